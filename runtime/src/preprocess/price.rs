//! What an image request will cost the preprocessing pool, told before it is decoded:
//! the pixels its decode will make (from its header), priced at what the pool's
//! decodes have cost per pixel lately. Admission refuses at once a photo that cannot be ready in time,
//! so that under overload the pool's threads decode only requests that can still be
//! answered (a refused photo decoded first costs as much as one served).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::{ImageData, ImagePreprocess};

/// Weight of each new decode in the price.
const SMOOTHING: f64 = 0.2;

/// The pool's price of an image's pixel, learned from its decodes.
#[derive(Debug, Default)]
pub struct PrepPrice {
    /// Nanoseconds per megapixel, as f64 bits; 0 until a decode is seen.
    ns_per_megapixel: AtomicU64,
}

impl PrepPrice {
    /// What images of `pixels` pixels in all are predicted to take to decode and
    /// preprocess; `None` until the pool has priced one.
    pub fn predict(&self, pixels: u64) -> Option<Duration> {
        let per_megapixel = f64::from_bits(self.ns_per_megapixel.load(Ordering::Relaxed));
        (per_megapixel > 0.0).then(|| Duration::from_nanos((per_megapixel * pixels as f64 / 1e6) as u64))
    }

    /// Learns from images of `pixels` pixels that took `took`.
    pub fn observe(&self, pixels: u64, took: Duration) {
        if pixels == 0 {
            return;
        }
        let seen = took.as_nanos() as f64 * 1e6 / pixels as f64;
        let _ = self.ns_per_megapixel.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| {
            let old = f64::from_bits(bits);
            let new = if old > 0.0 { old + SMOOTHING * (seen - old) } else { seen };
            Some(new.to_bits())
        });
    }

    /// Sets the price outright: for a caller that measured it, and for tests.
    pub fn set_per_megapixel(&self, took: Duration) {
        self.ns_per_megapixel.store((took.as_nanos() as f64).to_bits(), Ordering::Relaxed);
    }
}

/// The pixels decoding `image` for `preprocess` makes, as its header says: a JPEG
/// that may be decoded shrunk in the DCT domain makes 1/shrink² of them, so that a
/// price learned on small photos does not overprice large ones (a 3564×2880 photo for
/// a 224 crop decodes at 1/8). `None` where the header cannot be read, for the decode
/// to say why.
#[cfg(feature = "images")]
pub fn decoded_pixels(image: &ImageData, preprocess: &ImagePreprocess) -> Option<u64> {
    match image {
        ImageData::Rgb { width, height, .. } => Some(u64::from(*width) * u64::from(*height)),
        ImageData::Encoded(bytes) => {
            let reader = image::ImageReader::new(std::io::Cursor::new(bytes)).with_guessed_format().ok()?;
            let jpeg = reader.format() == Some(image::ImageFormat::Jpeg);
            let (width, height) = reader.into_dimensions().ok()?;
            let shrink = if jpeg { u64::from(preprocess.shrink_allowed(width, height)) } else { 1 };
            Some(u64::from(width) * u64::from(height) / (shrink * shrink))
        }
    }
}

/// Without image decoding no header is read.
#[cfg(not(feature = "images"))]
pub fn decoded_pixels(_: &ImageData, _: &ImagePreprocess) -> Option<u64> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_price_is_unknown_until_a_decode_is_seen_then_follows_them() {
        let price = PrepPrice::default();
        assert_eq!(price.predict(1_000_000), None);
        price.observe(2_000_000, Duration::from_millis(20));
        assert_eq!(price.predict(1_000_000), Some(Duration::from_millis(10)));
        price.observe(1_000_000, Duration::from_millis(20));
        // 10 ms a megapixel moved a fifth of the way to 20.
        assert_eq!(price.predict(1_000_000), Some(Duration::from_millis(12)));
        price.set_per_megapixel(Duration::from_secs(1));
        assert_eq!(price.predict(500_000), Some(Duration::from_millis(500)));
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
        assert_eq!(decoded_pixels(&encoded(image::ImageFormat::Png), &preprocess), Some(614_400));
        assert_eq!(decoded_pixels(&encoded(image::ImageFormat::Jpeg), &preprocess), Some(153_600));
        assert_eq!(decoded_pixels(&ImageData::from(b"not an image".to_vec()), &preprocess), None);
    }
}
