//! The inputs a static int8 copy is calibrated on: images made from the user's photos
//! by crops the compared images never use (other scales, other places), run through
//! the variant's own preprocessing, and written where the converter reads them
//! (`meta.json`: the input's name and each input's shape, which differ where the
//! input follows the image's size; `inputs.f32`: the tensors, little-endian float32,
//! one after another).

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use modelless::Tensor;
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
    let decoded = photos
        .iter()
        .map(|p| image::open(p).map_err(|source| MakeError::Photo { path: p.clone(), source }))
        .collect::<Result<Vec<_>, _>>()?;
    let mut written = InputsFile::create(folder, preprocess.input.clone())?;
    'all: for mirrored in [false, true] {
        for &scale in &SCALES {
            for &place in &PLACES {
                for (path, photo) in photos.iter().zip(&decoded) {
                    if written.len() == count {
                        break 'all;
                    }
                    let jpeg = crop_jpeg(path, photo, (scale, place, mirrored), QUALITY)?;
                    written.push(&image_tensor(&jpeg, preprocess)?)?;
                }
            }
        }
    }
    written.finish()
}

/// The calibration inputs of one model input as the converter reads them, written one
/// by one.
#[derive(Debug)]
pub struct InputsFile {
    folder: PathBuf,
    input: Option<String>,
    data: PathBuf,
    out: BufWriter<std::fs::File>,
    shapes: Vec<Vec<usize>>,
}

impl InputsFile {
    /// Starts the files in `folder`, for the model input `input` (its first where
    /// `None`).
    pub fn create(folder: &Path, input: Option<String>) -> Result<Self, MakeError> {
        let data = folder.join("inputs.f32");
        let file = std::fs::File::create(&data).map_err(|source| MakeError::Io { path: data.clone(), source })?;
        Ok(Self { folder: folder.to_path_buf(), input, data, out: BufWriter::new(file), shapes: Vec::new() })
    }

    /// Inputs written so far.
    pub fn len(&self) -> usize {
        self.shapes.len()
    }

    /// Whether none is written yet.
    pub fn is_empty(&self) -> bool {
        self.shapes.is_empty()
    }

    /// Appends one input of batch 1 (`[1, ...]`, float32).
    pub fn push(&mut self, tensor: &Tensor) -> Result<(), MakeError> {
        let values = tensor
            .as_slice::<f32>()
            .ok_or_else(|| MakeError::Config("a calibration input is not a float32 tensor".into()))?;
        for value in values {
            self.out
                .write_all(&value.to_le_bytes())
                .map_err(|source| MakeError::Io { path: self.data.clone(), source })?;
        }
        self.shapes.push(tensor.shape().iter().skip(1).copied().collect());
        Ok(())
    }

    /// Writes `meta.json` beside the inputs; returns how many there are.
    pub fn finish(mut self) -> Result<usize, MakeError> {
        self.out.flush().map_err(|source| MakeError::Io { path: self.data.clone(), source })?;
        let meta = serde_json::json!({ "input": self.input, "shapes": self.shapes });
        let path = self.folder.join("meta.json");
        std::fs::write(&path, meta.to_string()).map_err(|source| MakeError::Io { path, source })?;
        Ok(self.shapes.len())
    }
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
