//! Decoded pixels to the tensor a variant takes: one resize (with its crop) through
//! `fast_image_resize`'s SIMD kernels, then normalisation into the layout, channel
//! order and element type the model wants.

use std::cell::RefCell;

use fast_image_resize::images::{Image, ImageRef};
use fast_image_resize::{FilterType, PixelType, ResizeAlg, ResizeOptions, Resizer};
use half::f16;

use super::config::{ChannelOrder, ImagePreprocess, Interpolation, Layout};
use super::{Decoded, PreprocessError};
use crate::error::Cause;
use crate::tensor::{DType, Tensor};

thread_local! {
    /// A resizer keeps its scratch buffers between images of one thread.
    static RESIZER: RefCell<Resizer> = RefCell::new(Resizer::new());
}

/// `decoded` resized to `preprocess`'s size (cropped as it says) and normalised: a
/// tensor of one row.
pub fn to_tensor(decoded: &Decoded, preprocess: &ImagePreprocess) -> Result<Tensor, PreprocessError> {
    let resized = resize(decoded, preprocess)?;
    let (width, height) = preprocess.target_size(decoded.width, decoded.height);
    normalise(&resized, preprocess, preprocess.shape_sized(1, width, height))
}

/// The model-sized RGB pixels of `decoded`.
fn resize(decoded: &Decoded, preprocess: &ImagePreprocess) -> Result<Vec<u8>, PreprocessError> {
    let (width, height) = preprocess.target_size(decoded.width, decoded.height);
    let source = ImageRef::new(decoded.width, decoded.height, &decoded.rgb, PixelType::U8x3)
        .map_err(|e| PreprocessError::Codec { stage: "decoded pixels", source: Cause::new(e) })?;
    let (left, top, region_w, region_h) = preprocess.source_region(decoded.width, decoded.height);
    let algorithm = match preprocess.interpolation {
        Interpolation::Nearest => ResizeAlg::Nearest,
        Interpolation::Bilinear => ResizeAlg::Convolution(FilterType::Bilinear),
        Interpolation::Bicubic => ResizeAlg::Convolution(FilterType::CatmullRom),
        Interpolation::Lanczos3 => ResizeAlg::Convolution(FilterType::Lanczos3),
    };
    let options = ResizeOptions::new().crop(left, top, region_w, region_h).resize_alg(algorithm);
    let mut target = Image::new(width, height, PixelType::U8x3);
    RESIZER
        .with_borrow_mut(|resizer| resizer.resize(&source, &mut target, &options))
        .map_err(|e| PreprocessError::Resize(Cause::new(e)))?;
    Ok(target.into_vec())
}

/// Model-sized RGB pixels as the model's tensor.
fn normalise(rgb: &[u8], preprocess: &ImagePreprocess, shape: Vec<usize>) -> Result<Tensor, PreprocessError> {
    let (multiply, add) = preprocess.affine();
    let plane = rgb.len() / 3;
    // The source channel of each of the model's channels.
    let source = match preprocess.channel_order {
        ChannelOrder::Rgb => [0, 1, 2],
        ChannelOrder::Bgr => [2, 1, 0],
    };
    // Where channel `c` of pixel `i` goes.
    let place = |i: usize, c: usize| match preprocess.layout {
        Layout::Nchw => c * plane + i,
        Layout::Nhwc => i * 3 + c,
    };
    let invalid = |e: crate::tensor::ShapeError| PreprocessError::Invalid(e.to_string());
    if preprocess.dtype == DType::U8 {
        let mut values = vec![0u8; rgb.len()];
        for (i, pixel) in rgb.chunks_exact(3).enumerate() {
            for (c, &from) in source.iter().enumerate() {
                values[place(i, c)] = pixel[from];
            }
        }
        return Tensor::new(shape, values).map_err(invalid);
    }
    let mut values = vec![0f32; rgb.len()];
    for (i, pixel) in rgb.chunks_exact(3).enumerate() {
        for (c, &from) in source.iter().enumerate() {
            values[place(i, c)] = f32::from(pixel[from]) * multiply[c] + add[c];
        }
    }
    match preprocess.dtype {
        DType::F32 => Tensor::new(shape, values).map_err(invalid),
        DType::F16 => Tensor::new(shape, values.into_iter().map(f16::from_f32).collect::<Vec<_>>()).map_err(invalid),
        other => Err(PreprocessError::Invalid(format!("dtype {other} cannot hold an image"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preprocess::ImageSize;

    /// A 4×2 image: left half red, right half blue.
    fn halves() -> Decoded {
        let rgb = (0..8).flat_map(|i| if i % 4 < 2 { [200, 0, 0] } else { [0, 0, 100] }).collect();
        Decoded { width: 4, height: 2, rgb, shrink: 1 }
    }

    #[test]
    fn layout_channel_order_and_dtype_are_as_configured() {
        let stretch = ImagePreprocess {
            size: ImageSize::Rect([2, 1]),
            resize: super::super::ResizeMode::Stretch,
            interpolation: Interpolation::Nearest,
            ..ImagePreprocess::new(1, [0.0; 3], [1.0; 3])
        };
        let nchw = to_tensor(&halves(), &stretch).unwrap();
        assert_eq!(nchw.shape(), &[1, 3, 1, 2]);
        assert_eq!(nchw.as_slice::<f32>().unwrap(), &[200.0, 0.0, 0.0, 0.0, 0.0, 100.0]);
        let bgr_nhwc = ImagePreprocess { channel_order: ChannelOrder::Bgr, layout: Layout::Nhwc, ..stretch.clone() };
        let t = to_tensor(&halves(), &bgr_nhwc).unwrap();
        assert_eq!(t.shape(), &[1, 1, 2, 3]);
        assert_eq!(t.as_slice::<f32>().unwrap(), &[0.0, 0.0, 200.0, 100.0, 0.0, 0.0]);
        let raw = ImagePreprocess { dtype: DType::U8, mean: None, std: None, ..stretch.clone() };
        assert_eq!(to_tensor(&halves(), &raw).unwrap().as_slice::<u8>().unwrap(), &[200, 0, 0, 0, 0, 100]);
        let half = ImagePreprocess { dtype: DType::F16, scale: Some(0.5), mean: None, std: None, ..stretch };
        let t = to_tensor(&halves(), &half).unwrap();
        assert_eq!(t.as_slice::<f16>().unwrap()[0], f16::from_f32(100.0));
    }
}
