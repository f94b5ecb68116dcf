//! How large an image may be, and what decoding one gives.

use serde::{Deserialize, Serialize};

use super::PreprocessError;

/// The most pixels an image may have: Pillow's own default (`MAX_IMAGE_PIXELS`), about
/// 9 459 × 9 459.
pub const DEFAULT_MAX_PIXELS: u64 = 89_478_485;

/// How large an image may be.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecodeLimits {
    /// The most pixels (width × height) an image may have; a header claiming more is
    /// refused before anything is decoded.
    #[serde(default = "default_max_pixels")]
    pub max_pixels: u64,
}

fn default_max_pixels() -> u64 {
    DEFAULT_MAX_PIXELS
}

impl Default for DecodeLimits {
    fn default() -> Self {
        DecodeLimits { max_pixels: DEFAULT_MAX_PIXELS }
    }
}

impl DecodeLimits {
    #[cfg_attr(not(feature = "images"), allow(dead_code))]
    pub(super) fn check(&self, width: u32, height: u32) -> Result<(), PreprocessError> {
        let pixels = u64::from(width) * u64::from(height);
        if pixels > self.max_pixels {
            return Err(PreprocessError::TooLarge(format!(
                "{width}x{height} is {pixels} pixels, more than the limit of {}",
                self.max_pixels
            )));
        }
        if pixels == 0 {
            return Err(PreprocessError::Decode(format!("the header claims a {width}x{height} image")));
        }
        Ok(())
    }
}

/// An image decoded to 8-bit RGB, upright.
#[derive(Debug)]
pub struct Decoded {
    /// Width, in pixels, as decoded (after any shrink).
    pub width: u32,
    /// Height, in pixels, as decoded.
    pub height: u32,
    /// Pixels, row-major, 3 bytes each.
    pub rgb: Vec<u8>,
    /// How much the decoder shrank the image (1, 2, 4 or 8).
    pub shrink: u32,
}
