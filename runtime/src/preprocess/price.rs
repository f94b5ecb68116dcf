//! What an image request will cost the preprocessing pool, told before it is decoded:
//! its bytes and the pixels its decode will make (from its header), priced at what
//! the pool's decodes have cost lately. Admission refuses at once a photo that cannot
//! be ready in time, so that under overload the pool's threads decode only requests
//! that can still be answered (a refused photo decoded first costs as much as one
//! served).
//!
//! Two terms, because neither alone prices a mix of sizes: reading a JPEG's entropy
//! coded data costs by its bytes whatever the scale it decodes at, while the inverse
//! DCT, colour conversion and resize cost by the pixels made. A 3564×2880 photo (9.8
//! MB) decoded at 1/8 makes fewer pixels than a 500×375 one (117 KB) and takes 40
//! times as long (126 against 3 ms here).

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use super::{ImageData, ImagePreprocess};

/// Weight of the decodes before each new one: about the last hundred count.
const DECAY: f64 = 0.99;
/// Below this, the two terms cannot be told apart (one kind of image seen): the
/// price is then by bytes alone.
const MIN_INDEPENDENCE: f64 = 1e-3;

/// What decoding images makes work of.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ImageWork {
    /// Their encoded bytes.
    pub bytes: u64,
    /// The pixels their decode makes.
    pub pixels: u64,
}

impl std::iter::Sum for ImageWork {
    fn sum<I: Iterator<Item = ImageWork>>(iter: I) -> Self {
        iter.fold(ImageWork::default(), |a, b| ImageWork { bytes: a.bytes + b.bytes, pixels: a.pixels + b.pixels })
    }
}

/// The pool's price of images, learned from its decodes: `ns = a·bytes + b·pixels`
/// by least squares over recent decodes, weighted toward the newest.
#[derive(Debug, Default)]
pub struct PrepPrice {
    sums: Mutex<Sums>,
}

/// Decayed sums of the least-squares system (bytes and pixels in millions, time in ns).
#[derive(Clone, Copy, Debug, Default)]
struct Sums {
    bb: f64,
    bp: f64,
    pp: f64,
    bt: f64,
    pt: f64,
}

impl Sums {
    /// These sums with what came before weighed by `decay`, and one decode of `bytes`
    /// and `pixels` (millions) that took `ns` added `weight` times.
    fn with(self, decay: f64, weight: f64, bytes: f64, pixels: f64, ns: f64) -> Sums {
        Sums {
            bb: decay * self.bb + weight * bytes * bytes,
            bp: decay * self.bp + weight * bytes * pixels,
            pp: decay * self.pp + weight * pixels * pixels,
            bt: decay * self.bt + weight * bytes * ns,
            pt: decay * self.pt + weight * pixels * ns,
        }
    }

    /// ns per million bytes and per million pixels; `None` before any decode.
    fn coefficients(&self) -> Option<(f64, f64)> {
        if self.bb <= 0.0 {
            return None;
        }
        let det = self.bb * self.pp - self.bp * self.bp;
        if det > MIN_INDEPENDENCE * self.bb * self.pp {
            let a = (self.bt * self.pp - self.pt * self.bp) / det;
            let b = (self.pt * self.bb - self.bt * self.bp) / det;
            if a >= 0.0 && b >= 0.0 {
                return Some((a, b));
            }
        }
        Some((self.bt / self.bb, 0.0))
    }
}

impl PrepPrice {
    fn lock(&self) -> std::sync::MutexGuard<'_, Sums> {
        self.sums.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What images making `work` are predicted to take to decode and preprocess;
    /// `None` until the pool has priced one.
    pub fn predict(&self, work: ImageWork) -> Option<Duration> {
        let (a, b) = self.lock().coefficients()?;
        let ns = a * work.bytes as f64 / 1e6 + b * work.pixels as f64 / 1e6;
        Some(Duration::from_nanos(ns.max(0.0).round() as u64))
    }

    /// Learns from images making `work` that took `took`.
    pub fn observe(&self, work: ImageWork, took: Duration) {
        if work.bytes == 0 && work.pixels == 0 {
            return;
        }
        let (b, p, t) = (work.bytes as f64 / 1e6, work.pixels as f64 / 1e6, took.as_nanos() as f64);
        let mut sums = self.lock();
        *sums = sums.with(DECAY, 1.0, b, p, t);
    }

    /// Sets the price outright, as if many decodes had shown it: for a caller that
    /// measured it, and for tests.
    pub fn set(&self, per_megabyte: Duration, per_megapixel: Duration) {
        // Two independent kinds of image, a megabyte alone and a megapixel alone, each
        // seen a hundred times.
        let learned = Sums::default().with(1.0, 100.0, 1.0, 0.0, per_megabyte.as_nanos() as f64).with(
            1.0,
            100.0,
            0.0,
            1.0,
            per_megapixel.as_nanos() as f64,
        );
        *self.lock() = learned;
    }
}

/// The work decoding `image` for `preprocess` makes, as its header says: its bytes,
/// and its pixels, of which a JPEG that may be decoded shrunk in the DCT domain makes
/// 1/shrink² (a 3564×2880 photo for a 224 crop decodes at 1/8). `None` where the
/// header cannot be read, for the decode to say why.
#[cfg(feature = "images")]
pub fn image_work(image: &ImageData, preprocess: &ImagePreprocess) -> Option<ImageWork> {
    match image {
        ImageData::Rgb { width, height, pixels } => {
            Some(ImageWork { bytes: pixels.len() as u64, pixels: u64::from(*width) * u64::from(*height) })
        }
        ImageData::Encoded(bytes) => {
            let reader = image::ImageReader::new(std::io::Cursor::new(bytes)).with_guessed_format().ok()?;
            let jpeg = reader.format() == Some(image::ImageFormat::Jpeg);
            let (width, height) = reader.into_dimensions().ok()?;
            let shrink = if jpeg { u64::from(preprocess.shrink_allowed(width, height)) } else { 1 };
            let pixels = u64::from(width) * u64::from(height) / (shrink * shrink);
            Some(ImageWork { bytes: bytes.len() as u64, pixels })
        }
    }
}

/// Without image decoding no header is read.
#[cfg(not(feature = "images"))]
pub fn image_work(_: &ImageData, _: &ImagePreprocess) -> Option<ImageWork> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn one_kind_of_image_is_priced_by_its_bytes_and_a_mix_by_bytes_and_pixels() {
        let price = PrepPrice::default();
        let medium = ImageWork { bytes: 117_000, pixels: 187_500 };
        let large = ImageWork { bytes: 9_800_000, pixels: 160_380 };
        assert_eq!(price.predict(medium), None, "unknown until a decode is seen");
        price.observe(medium, ms(3));
        assert_eq!(price.predict(medium), Some(ms(3)));
        // By bytes alone until another kind is seen: the large photo at 84 times.
        assert_eq!(price.predict(large).map(|d| d.as_millis()), Some(251));
        // Photos of both sizes, each costing 12.8 ns a byte and 8 ns a pixel: the
        // large one, which makes fewer pixels, is priced 40 times the medium one.
        let cost = |w: ImageWork| Duration::from_nanos((12.8 * w.bytes as f64 + 8.0 * w.pixels as f64) as u64);
        for _ in 0..50 {
            price.observe(medium, cost(medium));
            price.observe(large, cost(large));
        }
        for work in [medium, large, ImageWork { bytes: 500_000, pixels: 1_000_000 }] {
            let (predicted, actual) = (price.predict(work).unwrap().as_secs_f64(), cost(work).as_secs_f64());
            assert!((predicted / actual - 1.0).abs() < 0.01, "{work:?}: {predicted} against {actual}");
        }
        price.set(Duration::from_secs(1), Duration::from_millis(500));
        assert_eq!(price.predict(ImageWork { bytes: 2_000_000, pixels: 2_000_000 }), Some(Duration::from_secs(3)));
    }

    #[cfg(feature = "images")]
    #[test]
    fn pixels_come_from_the_header_less_what_a_jpeg_decode_shrinks() {
        let encoded = |format| {
            let mut bytes = Vec::new();
            image::RgbImage::new(960, 640).write_to(&mut std::io::Cursor::new(&mut bytes), format).unwrap();
            ImageData::from(bytes)
        };
        // A 224 crop of 960×640 keeps 560×560 of it: a JPEG may decode at 1/2.
        let preprocess = ImagePreprocess::new(224, [0.0; 3], [1.0; 3]);
        let (png, jpeg) = (encoded(image::ImageFormat::Png), encoded(image::ImageFormat::Jpeg));
        assert_eq!(image_work(&png, &preprocess), Some(ImageWork { bytes: png.len() as u64, pixels: 614_400 }));
        assert_eq!(image_work(&jpeg, &preprocess), Some(ImageWork { bytes: jpeg.len() as u64, pixels: 153_600 }));
        assert_eq!(image_work(&ImageData::from(b"not an image".to_vec()), &preprocess), None);
    }
}
