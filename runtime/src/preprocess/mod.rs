//! Turning encoded images into the tensor a variant takes: decode (JPEG, PNG) within
//! limits, resize (with the crop) and normalise as the variant's `preprocess` section
//! says. Requests that carry images are preprocessed on a pool of their own, for the
//! variant that will run them (see [`PreprocessPool`]).
//!
//! Decoding and resizing need feature `images`; without it the settings still parse,
//! and a task whose variants declare `preprocess` is refused when it is configured.

mod config;
#[cfg(feature = "images")]
mod decode;
mod images;
mod limits;
#[cfg(feature = "images")]
mod pixels;
pub(crate) mod pool;
mod price;

pub use crate::request::ImageData;
pub use config::{ChannelOrder, ImagePreprocess, ImageSize, Interpolation, Layout, ResizeMode};
#[cfg(feature = "images")]
pub use decode::decode;
pub(crate) use images::{ImageSource, prepare_in};
pub use images::{Prepared, prepare};
pub use limits::{DEFAULT_MAX_PIXELS, DecodeLimits, Decoded};
#[cfg(feature = "images")]
pub use pixels::to_tensor;
pub use pool::{PoolReading, PreprocessConfig, PreprocessPool, Reservation};
pub use price::{ImageWork, PrepPrice, image_work};

use crate::error::Cause;
#[cfg(feature = "images")]
use crate::tensor::Tensor;

/// Why a build without feature `images` takes no image.
pub const NO_IMAGES: &str = "this build of modelless has no image decoding (feature `images`)";

/// Why an image could not become a tensor.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PreprocessError {
    /// The bytes are empty, truncated or corrupt, as found by modelless's own checks.
    #[error("cannot decode the image: {0}")]
    Decode(String),
    /// The decoder refused the bytes as corrupt or truncated.
    #[error("cannot decode the image: {stage}: {source}")]
    Codec {
        /// What was being decoded: `JPEG`, `PNG`, `decoded pixels`.
        stage: &'static str,
        /// The decoder's error.
        #[source]
        source: Cause,
    },
    /// The bytes are not of a format served.
    #[error("unsupported image: {0}")]
    Unsupported(String),
    /// The image has more pixels than the limit.
    #[error("the image is too large: {0}")]
    TooLarge(String),
    /// The decoder stopped at one of its limits (of memory, of dimensions).
    #[error("the image is too large: {0}")]
    OverDecoderLimit(#[source] Cause),
    /// The settings cannot describe the tensor.
    #[error("invalid preprocessing: {0}")]
    Invalid(String),
    /// The resizer refused the images it was given.
    #[error("invalid preprocessing: resize: {0}")]
    Resize(#[source] Cause),
}

/// The encoded image `encoded` as a one-row tensor of what `preprocess` describes,
/// within the default [`DecodeLimits`].
#[cfg(feature = "images")]
pub fn image_tensor(encoded: &[u8], preprocess: &ImagePreprocess) -> Result<Tensor, PreprocessError> {
    preprocess.validate()?;
    let decoded = decode(encoded, &DecodeLimits::default(), Some(preprocess))?;
    to_tensor(&decoded, preprocess)
}

/// Images for the tests of this crate.
#[cfg(test)]
#[cfg(feature = "images")]
pub(crate) mod test_images {
    /// A PNG of `width`×`height` pixels coloured by `pixel`.
    pub fn png(width: u32, height: u32, pixel: impl Fn(u32, u32) -> [u8; 3]) -> Vec<u8> {
        let img = image::RgbImage::from_fn(width, height, |x, y| image::Rgb(pixel(x, y)));
        let mut out = std::io::Cursor::new(Vec::new());
        img.write_to(&mut out, image::ImageFormat::Png).unwrap();
        out.into_inner()
    }

    /// A valid PNG header claiming `width`×`height` pixels, with one pixel behind it: a
    /// decompression bomb's start.
    pub fn png_claiming(width: u32, height: u32) -> Vec<u8> {
        let mut bomb = png(1, 1, |_, _| [0; 3]);
        bomb[16..20].copy_from_slice(&width.to_be_bytes());
        bomb[20..24].copy_from_slice(&height.to_be_bytes());
        let crc = crc32(&bomb[12..29]);
        bomb[29..33].copy_from_slice(&crc.to_be_bytes());
        bomb
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
}

#[cfg(test)]
#[cfg(feature = "images")]
mod tests {
    use super::test_images::{png, png_claiming};
    use super::*;

    #[test]
    fn a_photo_becomes_a_normalised_nchw_crop_of_its_centre() {
        // Left third red, the rest blue: the centre crop of a wide image drops the red.
        let wide = png(300, 100, |x, _| if x < 100 { [255, 0, 0] } else { [0, 0, 255] });
        let p = ImagePreprocess { crop_fraction: 0.5, ..ImagePreprocess::new(8, [127.0; 3], [128.0; 3]) };
        let t = image_tensor(&wide, &p).unwrap();
        assert_eq!(t.shape(), &[1, 3, 8, 8]);
        let v = t.as_slice::<f32>().unwrap();
        let (red, blue) = (&v[..64], &v[128..]);
        assert!(red.iter().all(|&r| (r + 127.0 / 128.0).abs() < 1e-3), "{red:?}");
        assert!(blue.iter().all(|&b| (b - 1.0).abs() < 1e-3), "{blue:?}");
    }

    #[test]
    fn corrupt_images_and_bombs_are_refused_with_their_reason() {
        let p = ImagePreprocess::new(8, [0.0; 3], [1.0; 3]);
        assert!(matches!(image_tensor(b"not an image", &p), Err(PreprocessError::Unsupported(_))));
        let mut truncated = png(64, 64, |x, y| [x as u8, y as u8, 0]);
        truncated.truncate(truncated.len() / 2);
        assert!(matches!(image_tensor(&truncated, &p), Err(PreprocessError::Codec { .. })));
        let refused = image_tensor(&png_claiming(100_000, 100_000), &p).unwrap_err();
        assert!(matches!(refused, PreprocessError::TooLarge(_)), "{refused}");
        assert!(image_tensor(&png(4, 4, |_, _| [0; 3]), &ImagePreprocess::new(0, [0.0; 3], [1.0; 3])).is_err());
    }
}
