//! The images one request carries, and their tensor for one variant.

use std::time::{Duration, Instant};

use tracing::Span;

use super::{DecodeLimits, ImagePreprocess, PreprocessError};
use crate::request::ImageData;
use crate::tensor::Tensor;
use crate::trace;

/// The images a queued request's image input was made from, kept so that a switch can
/// make it again for another variant.
#[derive(Debug)]
pub(crate) struct ImageSource {
    /// One per row.
    pub images: Vec<ImageData>,
    /// The input they fill.
    pub input: String,
}

/// Images as one tensor for a variant, and where the time went.
#[derive(Debug)]
pub struct Prepared {
    /// One row per image, in order.
    pub tensor: Tensor,
    /// Decoding them.
    pub decode: Duration,
    /// Resizing and normalising them.
    pub preprocess: Duration,
}

/// Decodes `images` within `limits` and makes them the tensor `preprocess` describes.
/// The error names the image (from 0) that failed. Each image's decode and
/// preprocessing are spans (see [`crate::trace`]) in the current span.
pub fn prepare(
    images: &[ImageData],
    preprocess: &ImagePreprocess,
    limits: &DecodeLimits,
) -> Result<Prepared, (usize, PreprocessError)> {
    prepare_in(images, preprocess, limits, &Span::current())
}

/// Like [`prepare`], its stages' spans children of the request span `request`.
pub(crate) fn prepare_in(
    images: &[ImageData],
    preprocess: &ImagePreprocess,
    limits: &DecodeLimits,
    request: &Span,
) -> Result<Prepared, (usize, PreprocessError)> {
    let (mut decode_time, mut preprocess_time) = (Duration::ZERO, Duration::ZERO);
    let mut rows = Vec::with_capacity(images.len());
    for (index, image) in images.iter().enumerate() {
        let started = Instant::now();
        let decoding = trace::decode(request, index);
        let decoded = pixels::decoded(image, preprocess, limits).map_err(|e| (index, e))?;
        drop(decoding);
        let decoded_at = Instant::now();
        let preprocessing = trace::preprocess(request, index);
        rows.push(pixels::to_tensor(&decoded, preprocess).map_err(|e| (index, e))?);
        drop(preprocessing);
        decode_time += decoded_at - started;
        preprocess_time += decoded_at.elapsed();
    }
    let tensor = if rows.len() == 1 { rows.pop() } else { Tensor::concat_rows(rows) };
    let tensor = tensor.ok_or((0, PreprocessError::Invalid("no images to join".into())))?;
    Ok(Prepared { tensor, decode: decode_time, preprocess: preprocess_time })
}

/// The pixel work, where this build has it.
#[cfg(feature = "images")]
mod pixels {
    pub(super) use super::super::to_tensor;
    use super::super::{DecodeLimits, Decoded, ImagePreprocess, PreprocessError, decode};
    use crate::request::ImageData;

    pub(super) fn decoded(
        image: &ImageData,
        preprocess: &ImagePreprocess,
        limits: &DecodeLimits,
    ) -> Result<Decoded, PreprocessError> {
        match image {
            ImageData::Encoded(bytes) => decode(bytes, limits, Some(preprocess)),
            ImageData::Rgb { width, height, pixels } => {
                let expected = u64::from(*width) * u64::from(*height) * 3;
                if expected != pixels.len() as u64 || expected == 0 {
                    return Err(PreprocessError::Decode(format!(
                        "{width}x{height} RGB pixels take {expected} bytes, not {}",
                        pixels.len()
                    )));
                }
                if u64::from(*width) * u64::from(*height) > limits.max_pixels {
                    return Err(PreprocessError::TooLarge(format!("{width}x{height} is more than the pixel limit")));
                }
                Ok(Decoded { width: *width, height: *height, rgb: pixels.to_vec(), shrink: 1 })
            }
        }
    }
}

/// A build without feature `images` refuses every image; tasks that take images are
/// refused before any request comes (see `TaskConfig::validate`).
#[cfg(not(feature = "images"))]
mod pixels {
    use super::super::{DecodeLimits, Decoded, ImagePreprocess, PreprocessError};
    use crate::request::ImageData;
    use crate::tensor::Tensor;

    pub(super) fn decoded(_: &ImageData, _: &ImagePreprocess, _: &DecodeLimits) -> Result<Decoded, PreprocessError> {
        Err(PreprocessError::Unsupported(super::super::NO_IMAGES.into()))
    }

    pub(super) fn to_tensor(_: &Decoded, _: &ImagePreprocess) -> Result<Tensor, PreprocessError> {
        Err(PreprocessError::Unsupported(super::super::NO_IMAGES.into()))
    }
}
