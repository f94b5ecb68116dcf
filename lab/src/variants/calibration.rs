//! The inputs a static int8 copy is calibrated on: images made from the user's photos
//! by crops the compared images never use (other scales, other places), run through
//! the variant's own preprocessing, and written where the converter reads them
//! (`meta.json`: the input's name and each input's shape, which differ where the
//! input follows the image's size; `inputs.f32`: the tensors, little-endian float32,
//! one after another).

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use modelless::preprocess::{ImagePreprocess, image_tensor};

use super::MakeError;
use super::photos::crop_jpeg;

/// Shares of each side the calibration crops keep: none of the compared images'.
const SCALES: [f64; 5] = [0.92, 0.77, 0.62, 0.47, 0.33];
/// Where they sit: at the thirds, where no compared crop does.
const PLACES: [(f64, f64); 6] = [
    (1.0 / 3.0, 1.0 / 3.0),
    (2.0 / 3.0, 1.0 / 3.0),
    (1.0 / 3.0, 2.0 / 3.0),
    (2.0 / 3.0, 2.0 / 3.0),
    (0.5, 1.0 / 3.0),
    (0.5, 2.0 / 3.0),
];
/// The JPEG quality they are encoded at, as a client would send them.
const QUALITY: u8 = 90;

/// How many calibration inputs [`write_inputs`] can make from `photos` photos.
pub fn most_inputs(photos: usize) -> usize {
    photos * SCALES.len() * PLACES.len() * 2
}

/// Writes up to `count` calibration inputs made from `photos` through `preprocess`
/// into `folder`; returns how many.
pub fn write_inputs(
    photos: &[PathBuf],
    preprocess: &ImagePreprocess,
    count: usize,
    folder: &Path,
) -> Result<usize, MakeError> {
    let io = |path: PathBuf| move |source| MakeError::Io { path, source };
    let decoded = photos
        .iter()
        .map(|p| image::open(p).map_err(|source| MakeError::Photo { path: p.clone(), source }))
        .collect::<Result<Vec<_>, _>>()?;
    let data = folder.join("inputs.f32");
    let mut out = BufWriter::new(std::fs::File::create(&data).map_err(io(data.clone()))?);
    let mut shapes: Vec<Vec<usize>> = Vec::new();
    'all: for mirrored in [false, true] {
        for &scale in &SCALES {
            for &place in &PLACES {
                for (path, photo) in photos.iter().zip(&decoded) {
                    if shapes.len() == count {
                        break 'all;
                    }
                    let jpeg = crop_jpeg(path, photo, (scale, place, mirrored), QUALITY)?;
                    let tensor = image_tensor(&jpeg, preprocess)?;
                    let values = tensor.as_slice::<f32>().ok_or_else(|| {
                        MakeError::Config("the variant's preprocessing gives no float32 tensor".into())
                    })?;
                    for value in values {
                        out.write_all(&value.to_le_bytes()).map_err(io(data.clone()))?;
                    }
                    shapes.push(tensor.shape().iter().skip(1).copied().collect());
                }
            }
        }
    }
    out.flush().map_err(io(data.clone()))?;
    let meta = serde_json::json!({ "input": preprocess.input, "shapes": shapes });
    let meta_path = folder.join("meta.json");
    std::fs::write(&meta_path, meta.to_string()).map_err(io(meta_path.clone()))?;
    Ok(shapes.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_are_written_one_after_another_with_their_shape() {
        let dir = tempfile::tempdir().unwrap();
        let photo = dir.path().join("a.png");
        image::RgbImage::from_fn(40, 30, |x, y| image::Rgb([x as u8 * 6, y as u8 * 8, 100])).save(&photo).unwrap();
        let preprocess = ImagePreprocess::new(8, [0.0; 3], [255.0; 3]);
        let written = write_inputs(&[photo], &preprocess, 7, dir.path()).unwrap();
        assert_eq!(written, 7);
        let bytes = std::fs::read(dir.path().join("inputs.f32")).unwrap();
        assert_eq!(bytes.len(), 7 * 3 * 8 * 8 * 4);
        let meta: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join("meta.json")).unwrap()).unwrap();
        assert_eq!(meta["shapes"], serde_json::json!(vec![[3, 8, 8]; 7]));
        let first: Vec<f32> =
            bytes[..3 * 64 * 4].chunks(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
        assert!(first.iter().all(|v| (0.0..=1.0).contains(v)), "normalised as the variant's preprocess says");
        assert!(first.iter().any(|v| *v != first[0]), "pixels of a photo, not a constant");
        assert_eq!(most_inputs(1), 60);
    }
}
