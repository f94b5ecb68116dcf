//! Turning a photo into the tensor a variant takes: decode (PNG, JPEG) within limits,
//! scale the shorter side and crop the centre in one resize, normalise per channel.

use fast_image_resize::images::Image;
use fast_image_resize::{FilterType, PixelType, ResizeAlg, ResizeOptions, Resizer};
use image::{ImageReader, Limits};
use serde::{Deserialize, Serialize};

use crate::tensor::Tensor;

/// The widest or tallest image decoded, in pixels.
pub const MAX_IMAGE_SIDE: u32 = 16_384;
/// The most memory one decode may take, in bytes: a small file claiming a huge image
/// (a decompression bomb) is refused before its pixels are allocated.
pub const MAX_DECODE_BYTES: u64 = 512 << 20;

/// What a variant's model expects of an image, as ImageNet classifiers are evaluated:
/// the shorter side scaled to `size / crop_fraction`, the centre `size`×`size` cropped,
/// each RGB channel normalised as `(value - mean) / std` (values 0..=255), NCHW f32.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImagePreprocess {
    /// Side of the square the model takes.
    pub size: u32,
    /// Of the scaled image's shorter side, what the crop keeps.
    #[serde(default = "default_crop_fraction")]
    pub crop_fraction: f32,
    /// Per-channel mean (R, G, B), on the 0..=255 scale.
    pub mean: [f32; 3],
    /// Per-channel standard deviation (R, G, B), on the 0..=255 scale.
    pub std: [f32; 3],
}

fn default_crop_fraction() -> f32 {
    0.875
}

impl ImagePreprocess {
    /// A `size`×`size` input normalised with `mean` and `std`, cropping 87.5 %.
    pub fn new(size: u32, mean: [f32; 3], std: [f32; 3]) -> Self {
        ImagePreprocess { size, crop_fraction: default_crop_fraction(), mean, std }
    }
}

/// Why an image could not become a tensor.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PreprocessError {
    /// The bytes are not an image of a format served, or are corrupt.
    #[error("cannot decode the image: {0}")]
    Decode(String),
    /// The image is larger than the limits.
    #[error("the image is too large: {0}")]
    TooLarge(String),
    /// The settings cannot describe a crop.
    #[error("invalid preprocessing: {0}")]
    Invalid(String),
}

/// The encoded image `encoded` as a `[1, 3, size, size]` f32 tensor.
pub fn image_tensor(encoded: &[u8], preprocess: &ImagePreprocess) -> Result<Tensor, PreprocessError> {
    let size = preprocess.size;
    let crop_ok = preprocess.crop_fraction > 0.0 && preprocess.crop_fraction <= 1.0;
    if !((1..=4096).contains(&size) && crop_ok) {
        return Err(PreprocessError::Invalid(format!(
            "size {size} (1..=4096) and crop_fraction {} (0..=1)",
            preprocess.crop_fraction
        )));
    }
    if preprocess.std.iter().any(|s| !s.is_finite() || *s == 0.0) || preprocess.mean.iter().any(|m| !m.is_finite()) {
        return Err(PreprocessError::Invalid("mean and std must be finite, std not 0".into()));
    }
    let rgb = decode_rgb(encoded)?;
    let (width, height) = rgb.dimensions();
    let source = Image::from_vec_u8(width, height, rgb.into_raw(), PixelType::U8x3)
        .map_err(|e| PreprocessError::Decode(e.to_string()))?;
    // The centre square that, scaled to `size`, is the crop of the image scaled so its
    // shorter side is size / crop_fraction.
    let side = (f64::from(width.min(height)) * f64::from(preprocess.crop_fraction)).max(1.0);
    let (left, top) = ((f64::from(width) - side) / 2.0, (f64::from(height) - side) / 2.0);
    let mut target = Image::new(size, size, PixelType::U8x3);
    let options =
        ResizeOptions::new().crop(left, top, side, side).resize_alg(ResizeAlg::Convolution(FilterType::CatmullRom));
    Resizer::new()
        .resize(&source, &mut target, &options)
        .map_err(|e| PreprocessError::Invalid(format!("resize: {e}")))?;
    let plane = (size * size) as usize;
    let mut values = vec![0f32; 3 * plane];
    for (i, pixel) in target.buffer().chunks_exact(3).enumerate() {
        for c in 0..3 {
            values[c * plane + i] = (f32::from(pixel[c]) - preprocess.mean[c]) / preprocess.std[c];
        }
    }
    Tensor::new([1, 3, size as usize, size as usize], values).map_err(|e| PreprocessError::Invalid(e.to_string()))
}

/// Decodes to 8-bit RGB within [`MAX_IMAGE_SIDE`] and [`MAX_DECODE_BYTES`].
fn decode_rgb(encoded: &[u8]) -> Result<image::RgbImage, PreprocessError> {
    let mut reader = ImageReader::new(std::io::Cursor::new(encoded))
        .with_guessed_format()
        .map_err(|e| PreprocessError::Decode(e.to_string()))?;
    let mut limits = Limits::default();
    limits.max_image_width = Some(MAX_IMAGE_SIDE);
    limits.max_image_height = Some(MAX_IMAGE_SIDE);
    limits.max_alloc = Some(MAX_DECODE_BYTES);
    reader.limits(limits);
    let decoded = reader.decode().map_err(|e| match e {
        image::ImageError::Limits(limit) => PreprocessError::TooLarge(limit.to_string()),
        other => PreprocessError::Decode(other.to_string()),
    })?;
    Ok(decoded.to_rgb8())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png(width: u32, height: u32, pixel: impl Fn(u32, u32) -> [u8; 3]) -> Vec<u8> {
        let img = image::RgbImage::from_fn(width, height, |x, y| image::Rgb(pixel(x, y)));
        let mut out = std::io::Cursor::new(Vec::new());
        img.write_to(&mut out, image::ImageFormat::Png).unwrap();
        out.into_inner()
    }

    #[test]
    fn a_photo_becomes_a_normalised_nchw_crop_of_its_centre() {
        // Left third red, the rest blue: the centre crop of a wide image drops the red.
        let wide = png(300, 100, |x, _| if x < 100 { [255, 0, 0] } else { [0, 0, 255] });
        let p = ImagePreprocess { size: 8, crop_fraction: 0.5, mean: [127.0; 3], std: [128.0; 3] };
        let t = image_tensor(&wide, &p).unwrap();
        assert_eq!(t.shape(), &[1, 3, 8, 8]);
        let v = t.as_slice::<f32>().unwrap();
        let (red, blue) = (&v[..64], &v[128..]);
        assert!(red.iter().all(|&r| (r + 127.0 / 128.0).abs() < 1e-3), "{red:?}");
        assert!(blue.iter().all(|&b| (b - 1.0).abs() < 1e-3), "{blue:?}");
    }

    /// PNG's chunk checksum (CRC-32, IEEE).
    fn crc32(bytes: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &b in bytes {
            crc ^= u32::from(b);
            for _ in 0..8 {
                crc = if crc & 1 == 1 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
            }
        }
        !crc
    }

    #[test]
    fn corrupt_images_and_bombs_are_refused_with_their_reason() {
        let p = ImagePreprocess::new(8, [0.0; 3], [1.0; 3]);
        assert!(matches!(image_tensor(b"not an image", &p), Err(PreprocessError::Decode(_))));
        let mut truncated = png(64, 64, |x, y| [x as u8, y as u8, 0]);
        truncated.truncate(truncated.len() / 2);
        assert!(matches!(image_tensor(&truncated, &p), Err(PreprocessError::Decode(_))));
        // A PNG header claiming 100000×100000 pixels, nothing behind it.
        let mut bomb = png(1, 1, |_, _| [0; 3]);
        bomb[16..20].copy_from_slice(&100_000u32.to_be_bytes());
        bomb[20..24].copy_from_slice(&100_000u32.to_be_bytes());
        let crc = crc32(&bomb[12..29]);
        bomb[29..33].copy_from_slice(&crc.to_be_bytes());
        let refused = image_tensor(&bomb, &p).unwrap_err();
        assert!(matches!(refused, PreprocessError::TooLarge(_)), "{refused}");
        assert!(image_tensor(&png(4, 4, |_, _| [0; 3]), &ImagePreprocess::new(0, [0.0; 3], [1.0; 3])).is_err());
    }
}
