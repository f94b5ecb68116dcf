//! The photos a run sends to tasks that take images: the JPEG and PNG files of a
//! folder, or photo-like JPEGs generated at given sizes. Requests take them in turn.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use image::codecs::jpeg::JpegEncoder;
use rand::{Rng, SeedableRng};

use super::LoadError;

/// Encoded images, sent in turn.
#[derive(Clone, Debug)]
pub struct ImageSet {
    images: Vec<Bytes>,
}

/// The largest image a set may generate, in pixels (a 40-megapixel camera's).
pub const MAX_GENERATED_PIXELS: u64 = 40_000_000;
/// The most bytes a set may hold.
pub const MAX_SET_BYTES: u64 = 1 << 30;

/// The JPEG and PNG files of the folder `dir`, in name order.
pub fn image_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let ext = p.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
            matches!(ext.as_deref(), Some("jpg" | "jpeg" | "png"))
        })
        .collect();
    paths.sort();
    Ok(paths)
}

impl ImageSet {
    /// The image file at `path`, or the `.jpg`, `.jpeg` and `.png` files of the
    /// folder at `path`, in name order.
    pub fn from_path(path: &Path) -> Result<Self, LoadError> {
        if path.is_file() {
            let data = std::fs::read(path).map_err(|e| LoadError::io(path, e))?;
            return Ok(ImageSet { images: vec![Bytes::from(data)] });
        }
        let paths = image_files(path).map_err(|e| LoadError::io(path, e))?;
        let mut images = Vec::new();
        let mut total = 0u64;
        for path in paths {
            let data = std::fs::read(&path).map_err(|e| LoadError::io(&path, e))?;
            total += data.len() as u64;
            if total > MAX_SET_BYTES {
                return Err(LoadError::invalid(format!("{}: the images pass {MAX_SET_BYTES} bytes", path.display())));
            }
            images.push(Bytes::from(data));
        }
        if images.is_empty() {
            return Err(LoadError::invalid(format!("{}: no .jpg, .jpeg or .png files", path.display())));
        }
        Ok(ImageSet { images })
    }

    /// Photo-like JPEGs (smooth shapes under film grain, quality 90), one per size
    /// (width, height), the same for the same seed.
    pub fn generated(sizes: &[(u32, u32)], seed: u64) -> Result<Self, LoadError> {
        if sizes.is_empty() {
            return Err(LoadError::invalid("no image sizes to generate"));
        }
        let images = sizes
            .iter()
            .enumerate()
            .map(|(i, &(width, height))| photo_like(width, height, seed.wrapping_add(i as u64)).map(Bytes::from))
            .collect::<Result<_, _>>()?;
        Ok(ImageSet { images })
    }

    /// The image for the `n`th request.
    pub fn get(&self, n: usize) -> Bytes {
        self.images[n % self.images.len()].clone()
    }

    /// How many images there are.
    pub fn len(&self) -> usize {
        self.images.len()
    }

    /// Whether there are none (never, once made).
    pub fn is_empty(&self) -> bool {
        self.images.is_empty()
    }

    /// Their mean size, bytes.
    pub fn mean_bytes(&self) -> f64 {
        self.images.iter().map(|i| i.len() as f64).sum::<f64>() / self.images.len().max(1) as f64
    }
}

/// Reads sizes written `500x375,3564x2880`.
pub fn parse_sizes(text: &str) -> Result<Vec<(u32, u32)>, LoadError> {
    text.split(',')
        .map(|size| {
            let wrong = || LoadError::invalid(format!("image size `{size}`: write it as WIDTHxHEIGHT, e.g. 500x375"));
            let (w, h) = size.trim().split_once(['x', 'X']).ok_or_else(wrong)?;
            let (w, h): (u32, u32) = (w.parse().map_err(|_| wrong())?, h.parse().map_err(|_| wrong())?);
            if w == 0 || h == 0 || u64::from(w) * u64::from(h) > MAX_GENERATED_PIXELS || w > 65_535 || h > 65_535 {
                return Err(LoadError::invalid(format!(
                    "image size `{size}`: each side 1..=65535 and at most {MAX_GENERATED_PIXELS} pixels"
                )));
            }
            Ok((w, h))
        })
        .collect()
}

/// A JPEG of `width` × `height` with the statistics of a photo: broad gradients and
/// blobs (what the DCT compresses well) under grain (what keeps the file camera-sized).
fn photo_like(width: u32, height: u32, seed: u64) -> Result<Vec<u8>, LoadError> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let blobs: Vec<[f32; 6]> = (0..12)
        .map(|_| {
            [
                rng.random::<f32>(),
                rng.random::<f32>(),
                0.05 + 0.3 * rng.random::<f32>(),
                rng.random::<f32>() * 255.0,
                rng.random::<f32>() * 255.0,
                rng.random::<f32>() * 255.0,
            ]
        })
        .collect();
    let (wf, hf) = (width as f32, height as f32);
    let mut pixels = Vec::with_capacity(width as usize * height as usize * 3);
    for y in 0..height {
        let v = y as f32 / hf;
        for x in 0..width {
            let u = x as f32 / wf;
            let mut rgb = [90.0 + 80.0 * u, 110.0 + 60.0 * v, 140.0 - 50.0 * u * v];
            for [bx, by, radius, r, g, b] in &blobs {
                let d2 = ((u - bx).powi(2) + (v - by).powi(2)) / (radius * radius);
                let weight = (-d2).exp() * 0.8;
                for (channel, target) in rgb.iter_mut().zip([r, g, b]) {
                    *channel += (target - *channel) * weight;
                }
            }
            for channel in rgb {
                let grain = (rng.random::<f32>() - 0.5) * 24.0;
                pixels.push((channel + grain).clamp(0.0, 255.0) as u8);
            }
        }
    }
    let mut out = Vec::new();
    JpegEncoder::new_with_quality(&mut out, 90)
        .encode(&pixels, width, height, image::ExtendedColorType::Rgb8)
        .map_err(|e| LoadError::invalid(format!("encoding a {width}x{height} JPEG: {e}")))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_images_decode_at_their_size_and_are_seeded() {
        let set = ImageSet::generated(&[(64, 48), (30, 90)], 7).unwrap();
        assert_eq!(set.len(), 2);
        for (n, size) in [(0, (64, 48)), (1, (30, 90)), (2, (64, 48))] {
            let decoded = image::load_from_memory(&set.get(n)).unwrap();
            assert_eq!((decoded.width(), decoded.height()), size, "request {n}");
        }
        assert_eq!(set.get(0), ImageSet::generated(&[(64, 48)], 7).unwrap().get(0));
        assert_ne!(set.get(0), ImageSet::generated(&[(64, 48)], 8).unwrap().get(0));
    }

    #[test]
    fn sizes_parse_and_nonsense_is_refused() {
        assert_eq!(parse_sizes("500x375, 3564X2880").unwrap(), vec![(500, 375), (3564, 2880)]);
        for wrong in ["", "500", "0x10", "ax3", "70000x2", "60000x60000"] {
            assert!(matches!(parse_sizes(wrong), Err(LoadError::Invalid(_))), "{wrong}");
        }
    }

    #[test]
    fn a_folder_gives_its_images_in_name_order_and_a_file_itself() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(ImageSet::from_path(dir.path()), Err(LoadError::Invalid(m)) if m.contains("no .jpg")));
        let set = ImageSet::generated(&[(8, 8), (9, 9)], 1).unwrap();
        std::fs::write(dir.path().join("b.JPG"), set.get(1)).unwrap();
        std::fs::write(dir.path().join("a.jpeg"), set.get(0)).unwrap();
        std::fs::write(dir.path().join("notes.txt"), "not an image").unwrap();
        let read = ImageSet::from_path(dir.path()).unwrap();
        assert_eq!((read.len(), read.get(0), read.get(1)), (2, set.get(0), set.get(1)));
        assert!(ImageSet::from_path(&dir.path().join("missing")).is_err());
        let one = ImageSet::from_path(&dir.path().join("b.JPG")).unwrap();
        assert_eq!((one.len(), one.get(5)), (1, set.get(1)), "a file is a set of one");
    }
}
