//! How a variant takes images: the `preprocess` section next to it in the config.

use serde::{Deserialize, Serialize};

use super::PreprocessError;
use crate::tensor::DType;

/// What a variant's model expects of an image. The defaults are how ImageNet
/// classifiers are evaluated: the shorter side scaled to `size / crop_fraction`, the
/// centre cropped, bicubic, RGB, NCHW, f32.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImagePreprocess {
    /// The task input the image fills; the task's only input by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<String>,
    /// What the model takes: a side (`224`) or `[width, height]`.
    pub size: ImageSize,
    /// How the image is fitted to `size`.
    #[serde(default)]
    pub resize: ResizeMode,
    /// With `shorter_side_crop`, what the crop keeps of the scaled image.
    #[serde(default = "default_crop_fraction")]
    pub crop_fraction: f32,
    /// The resampling filter.
    #[serde(default)]
    pub interpolation: Interpolation,
    /// Per-channel mean, on the 0..=255 scale: values become `(v - mean) / std`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean: Option<[f32; 3]>,
    /// Per-channel standard deviation, on the 0..=255 scale.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub std: Option<[f32; 3]>,
    /// Instead of mean and std: values become `v * scale + offset`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale: Option<f32>,
    /// Per-channel offset added after `scale`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<[f32; 3]>,
    /// Channel order the model takes.
    #[serde(default)]
    pub channel_order: ChannelOrder,
    /// Memory layout of the tensor.
    #[serde(default)]
    pub layout: Layout,
    /// Element type of the tensor: `f32`, `f16`, or `u8` (pixel values, no normalisation).
    #[serde(default = "default_dtype")]
    pub dtype: DType,
}

/// A target size: a square side, or width and height.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ImageSize {
    /// A square of this side.
    Square(u32),
    /// `[width, height]`.
    Rect([u32; 2]),
}

impl ImageSize {
    /// Width and height.
    pub fn dims(self) -> (u32, u32) {
        match self {
            ImageSize::Square(side) => (side, side),
            ImageSize::Rect([width, height]) => (width, height),
        }
    }
}

/// How an image is fitted to the model's size.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResizeMode {
    /// Scaled, aspect kept, to cover `size / crop_fraction`, then the centre cropped.
    #[default]
    ShorterSideCrop,
    /// Scaled to `size`, aspect not kept.
    Stretch,
    /// As text detectors take pages (PP-OCR's `limit_type = min`): scaled, aspect kept,
    /// so that the shorter side is `size` (a side; an image whose shorter side is longer
    /// keeps its scale), then each side rounded to the nearest multiple of 32. The
    /// tensor's height and width follow the image.
    ShorterSideMultiple32,
    /// As PP-OCR's `limit_type = max`: scaled, aspect kept, so that the longer side is
    /// at most `size` (a smaller image keeps its scale), then each side rounded to the
    /// nearest multiple of 32. The tensor's height and width follow the image: a
    /// cheaper, coarser look at a large page.
    LongerSideMultiple32,
}

/// Resampling filters, as Pillow and torchvision name them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Interpolation {
    /// Nearest pixel.
    Nearest,
    /// Linear in both directions.
    Bilinear,
    /// Catmull-Rom cubic.
    #[default]
    Bicubic,
    /// Lanczos, three lobes.
    Lanczos3,
}

/// Channel order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChannelOrder {
    /// Red, green, blue.
    #[default]
    Rgb,
    /// Blue, green, red (models trained with OpenCV).
    Bgr,
}

/// Memory layout of an image tensor.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Layout {
    /// `[N, 3, H, W]`.
    #[default]
    Nchw,
    /// `[N, H, W, 3]`.
    Nhwc,
}

fn default_crop_fraction() -> f32 {
    0.875
}

fn default_dtype() -> DType {
    DType::F32
}

/// The largest side a model input may have.
const MAX_TARGET_SIDE: u32 = 8192;

impl ImagePreprocess {
    /// A `size`×`size` input normalised with `mean` and `std`, cropping 87.5 %.
    pub fn new(size: u32, mean: [f32; 3], std: [f32; 3]) -> Self {
        ImagePreprocess {
            input: None,
            size: ImageSize::Square(size),
            resize: ResizeMode::ShorterSideCrop,
            crop_fraction: default_crop_fraction(),
            interpolation: Interpolation::Bicubic,
            mean: Some(mean),
            std: Some(std),
            scale: None,
            offset: None,
            channel_order: ChannelOrder::Rgb,
            layout: Layout::Nchw,
            dtype: DType::F32,
        }
    }

    /// Checks sizes, the crop, and that the normalisation is one of its two forms.
    pub fn validate(&self) -> Result<(), PreprocessError> {
        let invalid = |what: String| Err(PreprocessError::Invalid(what));
        let (width, height) = self.size.dims();
        if !(1..=MAX_TARGET_SIDE).contains(&width) || !(1..=MAX_TARGET_SIDE).contains(&height) {
            return invalid(format!("size {width}x{height} is outside 1..={MAX_TARGET_SIDE}"));
        }
        if !(self.crop_fraction > 0.0 && self.crop_fraction <= 1.0) {
            return invalid(format!("crop_fraction {} is outside (0, 1]", self.crop_fraction));
        }
        let by_stats = self.mean.is_some() || self.std.is_some();
        let by_scale = self.scale.is_some() || self.offset.is_some();
        if by_stats && by_scale {
            return invalid("give mean and std, or scale and offset, not both".into());
        }
        let finite = |values: &[f32]| values.iter().all(|v| v.is_finite());
        let stats_ok = self.mean.is_none_or(|m| finite(&m)) && self.std.is_none_or(|s| finite(&s) && !s.contains(&0.0));
        let scale_ok = self.scale.is_none_or(f32::is_finite) && self.offset.is_none_or(|o| finite(&o));
        if !(stats_ok && scale_ok) {
            return invalid("mean, std, scale and offset must be finite, std not 0".into());
        }
        match self.dtype {
            DType::F32 | DType::F16 => Ok(()),
            DType::U8 if !(by_stats || by_scale) => Ok(()),
            DType::U8 => invalid("a u8 input takes pixel values as they are: no normalisation".into()),
            other => invalid(format!("dtype {other} cannot hold an image; f32, f16 or u8")),
        }
    }

    /// Per channel (R, G, B), what a value `v` becomes: `v * multiply + add`.
    #[cfg_attr(not(feature = "images"), allow(dead_code))]
    pub(crate) fn affine(&self) -> ([f32; 3], [f32; 3]) {
        let mut multiply = [1.0; 3];
        let mut add = [0.0; 3];
        for c in 0..3 {
            if self.mean.is_some() || self.std.is_some() {
                let (mean, std) = (self.mean.map_or(0.0, |m| m[c]), self.std.map_or(1.0, |s| s[c]));
                multiply[c] = 1.0 / std;
                add[c] = -mean / std;
            } else {
                multiply[c] = self.scale.unwrap_or(1.0);
                add[c] = self.offset.map_or(0.0, |o| o[c]);
            }
        }
        (multiply, add)
    }

    /// The tensor shape of `rows` images (of the images' own size where the resize
    /// follows them: see [`ImagePreprocess::follows_image`]).
    pub fn shape(&self, rows: usize) -> Vec<usize> {
        let (width, height) = self.size.dims();
        self.shape_sized(rows, width, height)
    }

    /// Whether the tensor's height and width follow each image rather than `size`.
    pub fn follows_image(&self) -> bool {
        matches!(self.resize, ResizeMode::ShorterSideMultiple32 | ResizeMode::LongerSideMultiple32)
    }

    /// The size an image `width`×`height` is resized to.
    pub fn target_size(&self, width: u32, height: u32) -> (u32, u32) {
        if !self.follows_image() {
            return self.size.dims();
        }
        let side = f64::from(self.size.dims().0);
        let (shorter, longer) = (f64::from(width.min(height).max(1)), f64::from(width.max(height).max(1)));
        let scale = match self.resize {
            ResizeMode::ShorterSideMultiple32 if shorter < side => side / shorter,
            ResizeMode::LongerSideMultiple32 if longer > side => side / longer,
            _ => 1.0,
        };
        // Truncated, then to the nearest multiple of 32 (ties to even, as Python's round).
        let to_32 = |v: u32| {
            let scaled = (f64::from(v) * scale).trunc() / 32.0;
            ((scaled.round_ties_even() as u32) * 32).clamp(32, MAX_TARGET_SIDE)
        };
        (to_32(width), to_32(height))
    }

    /// Where the tensor's height and width follow each image, the size a typical one
    /// (a portrait page, 1 : √2) is resized to: what the variant is profiled at.
    pub fn typical_size(&self) -> Option<(u32, u32)> {
        if !self.follows_image() {
            return None;
        }
        let side = self.size.dims().0;
        let long = (f64::from(side) * std::f64::consts::SQRT_2).round() as u32;
        let short = (f64::from(side) / std::f64::consts::SQRT_2).round() as u32;
        Some(match self.resize {
            ResizeMode::LongerSideMultiple32 => self.target_size(short, side),
            _ => self.target_size(side, long),
        })
    }

    /// The tensor shape of `rows` images resized to `width`×`height`.
    pub fn shape_sized(&self, rows: usize, width: u32, height: u32) -> Vec<usize> {
        let (width, height) = (width as usize, height as usize);
        match self.layout {
            Layout::Nchw => vec![rows, 3, height, width],
            Layout::Nhwc => vec![rows, height, width, 3],
        }
    }

    /// The positions of height and width in [`ImagePreprocess::shape`]'s dimensions.
    pub fn spatial_axes(&self) -> [usize; 2] {
        match self.layout {
            Layout::Nchw => [2, 3],
            Layout::Nhwc => [1, 2],
        }
    }

    /// Of an image `width`×`height`, the region `(left, top, width, height)` that is
    /// scaled to the model's size.
    #[cfg_attr(not(feature = "images"), allow(dead_code))]
    pub(crate) fn source_region(&self, width: u32, height: u32) -> (f64, f64, f64, f64) {
        let (w, h) = (f64::from(width), f64::from(height));
        match self.resize {
            ResizeMode::Stretch | ResizeMode::ShorterSideMultiple32 | ResizeMode::LongerSideMultiple32 => {
                (0.0, 0.0, w, h)
            }
            ResizeMode::ShorterSideCrop => {
                let (tw, th) = self.size.dims();
                let fraction = f64::from(self.crop_fraction);
                // The scale at which the image covers size / crop_fraction.
                let scale = (f64::from(tw) / (fraction * w)).max(f64::from(th) / (fraction * h));
                let (cw, ch) = ((f64::from(tw) / scale).min(w).max(1.0), (f64::from(th) / scale).min(h).max(1.0));
                ((w - cw) / 2.0, (h - ch) / 2.0, cw, ch)
            }
        }
    }

    /// The most an image `width`×`height` may be shrunk (1, 2, 4 or 8) while the
    /// region scaled to the model's size still has at least its pixels: a JPEG can be
    /// decoded at that scale in the DCT domain.
    #[cfg_attr(not(feature = "images"), allow(dead_code))]
    pub(crate) fn shrink_allowed(&self, width: u32, height: u32) -> u32 {
        let (_, _, cw, ch) = self.source_region(width, height);
        let (tw, th) = self.target_size(width, height);
        [8, 4, 2]
            .into_iter()
            .find(|&d| cw / f64::from(d) >= f64::from(tw) && ch / f64::from(d) >= f64::from(th))
            .unwrap_or(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_for_a_text_detector_keeps_its_aspect_in_multiples_of_32() {
        let detector: ImagePreprocess =
            serde_json::from_str(r#"{"size": 736, "resize": "shorter_side_multiple32", "scale": 1}"#).unwrap();
        assert!(detector.follows_image());
        // 500 × 700: scaled by 736/500 to 736 × 1030.4 → 736 × 1024.
        assert_eq!(detector.target_size(500, 700), (736, 1024));
        // A larger page keeps its scale, rounded: 1000 × 1400 → 992 × 1408.
        assert_eq!(detector.target_size(1000, 1400), (992, 1408));
        assert_eq!(detector.shape_sized(1, 992, 1408), [1, 3, 1408, 992]);
        let fixed = ImagePreprocess::new(224, [0.0; 3], [1.0; 3]);
        assert_eq!((fixed.follows_image(), fixed.target_size(500, 700)), (false, (224, 224)));
        let coarse: ImagePreprocess =
            serde_json::from_str(r#"{"size": 640, "resize": "longer_side_multiple32", "scale": 1}"#).unwrap();
        assert!(coarse.follows_image());
        // 1000 × 1400: scaled by 640/1400 to 457.1 × 640 → 448 × 640.
        assert_eq!(coarse.target_size(1000, 1400), (448, 640));
        // A smaller page keeps its scale: 300 × 500 → 288 × 512.
        assert_eq!(coarse.target_size(300, 500), (288, 512));
        // Profiled at a portrait page: 453 × 640 → 448 × 640; 736 × 1041 → 736 × 1056.
        assert_eq!(coarse.typical_size(), Some((448, 640)));
        assert_eq!(detector.typical_size(), Some((736, 1056)));
        assert_eq!(fixed.typical_size(), None);
    }

    #[test]
    fn the_config_reads_both_size_forms_and_checks_the_normalisation() {
        let square: ImagePreprocess =
            serde_json::from_str(r#"{"size": 224, "mean": [1, 2, 3], "std": [2, 2, 2]}"#).unwrap();
        assert_eq!(square.size.dims(), (224, 224));
        assert_eq!(square.shape(2), [2, 3, 224, 224]);
        square.validate().unwrap();
        let (multiply, add) = square.affine();
        assert_eq!((multiply[2], add[2]), (0.5, -1.5));
        let rect: ImagePreprocess =
            serde_json::from_str(r#"{"size": [320, 240], "layout": "nhwc", "scale": 0.5, "offset": [-1, 0, 1]}"#)
                .unwrap();
        assert_eq!(rect.shape(1), [1, 240, 320, 3]);
        assert_eq!(rect.affine(), ([0.5; 3], [-1.0, 0.0, 1.0]));
        let both = ImagePreprocess { scale: Some(1.0), ..square.clone() };
        assert!(both.validate().is_err());
        let u8_normalised = ImagePreprocess { dtype: DType::U8, ..square.clone() };
        assert!(u8_normalised.validate().is_err());
        assert!(ImagePreprocess { std: Some([1.0, 0.0, 1.0]), ..square.clone() }.validate().is_err());
        assert!(ImagePreprocess { size: ImageSize::Square(0), ..square }.validate().is_err());
    }

    #[test]
    fn the_region_is_the_centre_and_the_shrink_keeps_enough_pixels() {
        let p = ImagePreprocess::new(224, [0.0; 3], [1.0; 3]);
        // 87.5 % of the shorter side, centred.
        let (left, top, w, h) = p.source_region(400, 300);
        assert!((w - 262.5).abs() < 1e-9 && (h - 262.5).abs() < 1e-9);
        assert!((left - 68.75).abs() < 1e-9 && (top - 18.75).abs() < 1e-9);
        assert_eq!(p.shrink_allowed(400, 300), 1);
        // 2880 * 0.875 = 2520 ≥ 8 × 224: an eighth keeps enough.
        assert_eq!(p.shrink_allowed(3564, 2880), 8);
        assert_eq!(p.shrink_allowed(1000, 1000), 2, "875 / 4 < 224 ≤ 875 / 2");
        let stretch = ImagePreprocess { resize: ResizeMode::Stretch, ..p };
        assert_eq!(stretch.source_region(400, 300), (0.0, 0.0, 400.0, 300.0));
    }
}
