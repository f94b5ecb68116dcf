//! Images in: every format and colour mode served decodes as Pillow decodes it, and
//! becomes the tensor Pillow's resize makes of it.

use modelless::preprocess::{DecodeLimits, ImagePreprocess, decode, to_tensor};
use serde_json::Value;

use crate::common::images_dir;

fn formats() -> Vec<Value> {
    let text = std::fs::read_to_string(images_dir().join("manifest.json")).unwrap();
    let manifest: Value = serde_json::from_str(&text).unwrap();
    manifest["formats"].as_array().unwrap().clone()
}

/// Mean and largest absolute difference.
fn differences(ours: impl Iterator<Item = f32>, reference: impl Iterator<Item = f32>) -> (f32, f32) {
    let (mut sum, mut max, mut n) = (0.0f32, 0.0f32, 0usize);
    for (a, b) in ours.zip(reference) {
        let d = (a - b).abs();
        sum += d;
        max = max.max(d);
        n += 1;
    }
    (sum / n as f32, max)
}

/// PNGs decode exactly as Pillow's; JPEGs within the rounding of two IDCTs (mean
/// ≤ 0.25 level of 255, none more than 4 off; measured 0.11 and 3); EXIF orientation turns the image
/// upright; CMYK, greyscale, alpha, palette and 16-bit images become Pillow's RGB.
#[test]
fn every_format_decodes_as_pillow_decodes_it() {
    let dir = images_dir().join("formats");
    for case in formats() {
        let file = case["file"].as_str().unwrap();
        let encoded = std::fs::read(dir.join(file)).unwrap();
        let reference = std::fs::read(dir.join(case["reference"].as_str().unwrap())).unwrap();
        let decoded = decode(&encoded, &DecodeLimits::default(), None).unwrap_or_else(|e| panic!("{file}: {e}"));
        let (width, height) = (case["width"].as_u64().unwrap() as u32, case["height"].as_u64().unwrap() as u32);
        assert_eq!((decoded.width, decoded.height), (width, height), "{file}");
        let (mean, max) =
            differences(decoded.rgb.iter().map(|&v| f32::from(v)), reference.iter().map(|&v| f32::from(v)));
        let (mean_ok, max_ok) = if file.ends_with(".png") { (0.0, 0.0) } else { (0.25, 4.0) };
        println!("{file}: mean {mean:.3}, max {max}");
        assert!(mean <= mean_ok && max <= max_ok, "{file}: mean difference {mean}, largest {max}");
    }
}

/// The 64×64 centre crop, decoded shrunk where the JPEG allows: within 1 level of
/// Pillow's on average and 10 at most (measured 0.67 and 8: its bicubic and
/// `fast_image_resize`'s Catmull-Rom round differently, and a shrunk JPEG decode
/// averages in the DCT domain what Pillow averages in its filter).
#[test]
fn every_format_becomes_the_tensor_pillow_makes_of_it() {
    let dir = images_dir().join("formats");
    let preprocess = ImagePreprocess::new(64, [0.0; 3], [1.0; 3]);
    for case in formats() {
        let file = case["file"].as_str().unwrap();
        let encoded = std::fs::read(dir.join(file)).unwrap();
        let reference = std::fs::read(dir.join(case["tensor"].as_str().unwrap())).unwrap();
        let reference = reference.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]));
        let decoded = decode(&encoded, &DecodeLimits::default(), Some(&preprocess)).unwrap();
        let tensor = to_tensor(&decoded, &preprocess).unwrap();
        assert_eq!(tensor.shape(), &[1, 3, 64, 64]);
        let (mean, max) = differences(tensor.as_slice::<f32>().unwrap().iter().copied(), reference);
        println!("{file}: shrink {}, mean {mean:.3}, max {max}", decoded.shrink);
        assert!(mean <= 1.0 && max <= 10.0, "{file}: mean difference {mean}, largest {max}");
    }
}
