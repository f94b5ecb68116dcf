//! Distinct images made from a few photos, for comparing two variants' answers where
//! no labelled set is at hand: each photo cropped at several scales and places,
//! mirrored or not, and encoded at several JPEG qualities. No two images are the same
//! pixels, so none is counted twice. Also, for how steady a model's answer is, an
//! image's pixels beside the same pixels moved one level ([`nudged_pair`]).

use std::io::Cursor;
use std::path::{Path, PathBuf};

use image::codecs::jpeg::JpegEncoder;
use image::{DynamicImage, GenericImageView, imageops};

use super::MakeError;

/// Shares of the shorter side kept by the crops; 1.0 is the whole photo.
const SCALES: [f64; 5] = [1.0, 0.85, 0.7, 0.55, 0.4];
/// Where a crop sits: centre, then the four corners.
const PLACES: [(f64, f64); 5] = [(0.5, 0.5), (0.0, 0.0), (1.0, 0.0), (0.0, 1.0), (1.0, 1.0)];
const QUALITIES: [u8; 3] = [95, 80, 60];

/// One image made from a photo, encoded as JPEG.
#[derive(Clone, Debug)]
pub struct MadeImage {
    /// Which photo and how it was changed, e.g. `chelsea.png crop 0.70 at (0,1) mirrored q80`.
    pub name: String,
    /// The JPEG.
    pub jpeg: Vec<u8>,
}

/// The JPEG and PNG files of `folder`, by name.
pub fn photos_in(folder: &Path) -> Result<Vec<PathBuf>, MakeError> {
    crate::load::images::image_files(folder).map_err(|source| MakeError::Io { path: folder.into(), source })
}

/// How many distinct images [`made_images`] can make from `photos` photos.
pub fn most_images(photos: usize) -> usize {
    photos * (1 + (SCALES.len() - 1) * PLACES.len()) * 2 * QUALITIES.len()
}

/// Up to `count` distinct images from `photos`, in an order that takes every photo's
/// plainest images first (whole, unmirrored, best quality).
pub fn made_images(photos: &[PathBuf], count: usize) -> Result<Vec<MadeImage>, MakeError> {
    let decoded = photos
        .iter()
        .map(|p| image::open(p).map_err(|source| MakeError::Photo { path: p.clone(), source }))
        .collect::<Result<Vec<_>, _>>()?;
    let mut made = Vec::with_capacity(count.min(most_images(photos.len())));
    'all: for &quality in &QUALITIES {
        for mirrored in [false, true] {
            for &scale in &SCALES {
                let places = if scale == 1.0 { &PLACES[..1] } else { &PLACES[..] };
                for &place in places {
                    for (path, photo) in photos.iter().zip(&decoded) {
                        if made.len() == count {
                            break 'all;
                        }
                        let jpeg = crop_jpeg(path, photo, (scale, place, mirrored), quality)?;
                        let file = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                        let how = if mirrored { " mirrored" } else { "" };
                        let name = format!("{file} crop {scale:.2} at ({},{}){how} q{quality}", place.0, place.1);
                        made.push(MadeImage { name, jpeg });
                    }
                }
            }
        }
    }
    Ok(made)
}

/// `photo` (read from `path`) cropped at `scale` and `place`, mirrored if asked
/// ([`transformed`]), as a JPEG of `quality`.
pub(super) fn crop_jpeg(
    path: &Path,
    photo: &DynamicImage,
    (scale, place, mirrored): (f64, (f64, f64), bool),
    quality: u8,
) -> Result<Vec<u8>, MakeError> {
    let image = transformed(photo, scale, place, mirrored);
    let mut jpeg = Vec::new();
    JpegEncoder::new_with_quality(Cursor::new(&mut jpeg), quality)
        .encode_image(&image)
        .map_err(|source| MakeError::Photo { path: path.into(), source })?;
    Ok(jpeg)
}

/// `image`'s pixels as the lab decodes them, and the same pixels each moved one level
/// up or down (a fixed pseudo-random sign per value, away from the end at 0 and 255),
/// both as PNG so that serving them changes nothing more: two images no eye tells
/// apart, for how steady a model's answer is on the image itself.
pub fn nudged_pair(image: &MadeImage) -> Result<(Vec<u8>, Vec<u8>), MakeError> {
    let bad = |source| MakeError::Photo { path: PathBuf::from(&image.name), source };
    let pixels = image::load_from_memory(&image.jpeg).map_err(bad)?.to_rgb8();
    let mut nudged = pixels.clone();
    let mut state = 0x9E37_79B9_7F4A_7C15u64 ^ image.jpeg.len() as u64;
    for value in nudged.iter_mut() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let up = (state & 1 == 1 && *value < 255) || *value == 0;
        *value = if up { *value + 1 } else { *value - 1 };
    }
    let png = |rgb: &image::RgbImage| -> Result<Vec<u8>, MakeError> {
        let mut bytes = Vec::new();
        rgb.write_to(&mut Cursor::new(&mut bytes), image::ImageFormat::Png).map_err(bad)?;
        Ok(bytes)
    };
    Ok((png(&pixels)?, png(&nudged)?))
}

/// A square-ish crop keeping `scale` of each side, placed at `place` (0 to 1 across
/// the room left on each axis), mirrored if asked; RGB.
fn transformed(photo: &DynamicImage, scale: f64, place: (f64, f64), mirrored: bool) -> DynamicImage {
    let (w, h) = photo.dimensions();
    let (cw, ch) = (((w as f64) * scale).round().max(1.0) as u32, ((h as f64) * scale).round().max(1.0) as u32);
    let x = (f64::from(w - cw) * place.0).round() as u32;
    let y = (f64::from(h - ch) * place.1).round() as u32;
    let mut rgb = imageops::crop_imm(&photo.to_rgb8(), x, y, cw, ch).to_image();
    if mirrored {
        rgb = imageops::flip_horizontal(&rgb);
    }
    DynamicImage::ImageRgb8(rgb)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn photo(dir: &Path, name: &str, seed: u8) -> PathBuf {
        let image = image::RgbImage::from_fn(40, 30, |x, y| image::Rgb([x as u8 * seed, y as u8 * 3, seed]));
        let path = dir.join(name);
        image.save(&path).unwrap();
        path
    }

    #[test]
    fn no_image_is_made_twice_and_the_count_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let photos = vec![photo(dir.path(), "a.png", 2), photo(dir.path(), "b.png", 5)];
        assert_eq!(photos_in(dir.path()).unwrap(), photos);
        let all = made_images(&photos, usize::MAX).unwrap();
        assert_eq!(all.len(), most_images(2));
        let mut names: Vec<&str> = all.iter().map(|m| m.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), all.len(), "every image says a different photo or change");
        let mut bytes: Vec<&[u8]> = all.iter().map(|m| m.jpeg.as_slice()).collect();
        bytes.sort_unstable();
        bytes.dedup();
        assert_eq!(bytes.len(), all.len(), "and is different bytes");
        let some = made_images(&photos, 7).unwrap();
        assert_eq!(some.len(), 7);
        assert!(some[0].name.starts_with("a.png crop 1.00") && some[1].name.starts_with("b.png crop 1.00"));
    }

    #[test]
    fn a_nudged_image_moves_every_value_by_one_level_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let photos = vec![photo(dir.path(), "a.png", 5)];
        let image = &made_images(&photos, 1).unwrap()[0];
        let (plain, nudged) = nudged_pair(image).unwrap();
        let decoded = image::load_from_memory(&image.jpeg).unwrap().to_rgb8();
        let plain = image::load_from_memory(&plain).unwrap().to_rgb8();
        let nudged = image::load_from_memory(&nudged).unwrap().to_rgb8();
        assert_eq!(plain, decoded, "the plain PNG is the JPEG's pixels");
        assert_eq!(nudged.dimensions(), plain.dimensions());
        let moves: Vec<i16> = plain.iter().zip(nudged.iter()).map(|(a, b)| i16::from(*b) - i16::from(*a)).collect();
        assert!(moves.iter().all(|m| m.abs() == 1), "every value moves one level");
        let ups = moves.iter().filter(|m| **m == 1).count();
        assert!(
            ups > moves.len() / 4 && ups < moves.len() * 3 / 4,
            "both ways, about evenly: {ups} of {}",
            moves.len()
        );
    }

    #[test]
    fn a_photo_that_is_not_one_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let bad = dir.path().join("bad.jpg");
        std::fs::write(&bad, b"not a jpeg").unwrap();
        let error = made_images(&[bad], 3).unwrap_err();
        assert!(error.to_string().contains("bad.jpg"), "{error}");
    }
}
