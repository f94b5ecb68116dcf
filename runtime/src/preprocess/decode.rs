//! Encoded images to 8-bit RGB pixels, within a pixel limit read from the header
//! before any pixel is allocated. JPEGs are decoded already shrunk in the DCT domain
//! (1/2, 1/4, 1/8) when the model's size needs no more pixels; EXIF orientation is
//! applied; greyscale, alpha, palette, 16-bit and CMYK images become RGB as Pillow's
//! `convert("RGB")` makes them (alpha dropped, 16 bits rounded to 8).

use image::metadata::Orientation;
use image::{DynamicImage, ImageDecoder, ImageReader, Limits, RgbImage};

use super::{DecodeLimits, Decoded, ImagePreprocess, PreprocessError};
use crate::error::Cause;

/// The most memory one decode may allocate, in bytes, whatever the header says.
const MAX_DECODE_BYTES: u64 = 1 << 30;

/// The container formats served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Jpeg,
    Png,
}

fn sniff(encoded: &[u8]) -> Result<Format, PreprocessError> {
    if encoded.is_empty() {
        return Err(PreprocessError::Decode("the image is empty (0 bytes)".into()));
    }
    if encoded.starts_with(&[0xFF, 0xD8, 0xFF]) {
        return Ok(Format::Jpeg);
    }
    if encoded.starts_with(b"\x89PNG\r\n\x1a\n") {
        return Ok(Format::Png);
    }
    Err(match image::guess_format(encoded) {
        Ok(format) => PreprocessError::Unsupported(format!("{format:?} images are not served; JPEG and PNG are")),
        Err(_) => PreprocessError::Unsupported("not a JPEG or PNG image".into()),
    })
}

/// Decodes `encoded` (JPEG or PNG) to upright 8-bit RGB within `limits`; where
/// `target` says what the pixels become, a JPEG is decoded shrunk as far as it allows.
pub fn decode(
    encoded: &[u8],
    limits: &DecodeLimits,
    target: Option<&ImagePreprocess>,
) -> Result<Decoded, PreprocessError> {
    match sniff(encoded)? {
        Format::Jpeg => decode_jpeg(encoded, limits, target),
        Format::Png => decode_png(encoded, limits),
    }
}

fn decode_jpeg(
    encoded: &[u8],
    limits: &DecodeLimits,
    target: Option<&ImagePreprocess>,
) -> Result<Decoded, PreprocessError> {
    let corrupt = |e: jpeg_decoder::Error| PreprocessError::Codec { stage: "JPEG", source: Cause::new(e) };
    let mut decoder = jpeg_decoder::Decoder::new(encoded);
    decoder.read_info().map_err(corrupt)?;
    let info = decoder.info().ok_or_else(|| PreprocessError::Decode("JPEG: no frame header".into()))?;
    let (width, height) = (u32::from(info.width), u32::from(info.height));
    limits.check(width, height)?;
    let early_orientation = decoder.exif_data().and_then(Orientation::from_exif_chunk);
    let (upright_w, upright_h) = match early_orientation {
        Some(o) if swaps_sides(o) => (height, width),
        _ => (width, height),
    };
    let shrink = target.map_or(1, |t| t.shrink_allowed(upright_w, upright_h));
    let eight_bit_colour_or_grey =
        matches!(info.pixel_format, jpeg_decoder::PixelFormat::RGB24 | jpeg_decoder::PixelFormat::L8);
    if shrink == 1 && eight_bit_colour_or_grey {
        let (rgb, exif_orientation) = decode_jpeg_full(encoded, width, height)?;
        return upright(width, height, rgb, early_orientation.or(exif_orientation), 1);
    }
    let (mut out_w, mut out_h) = (width, height);
    if shrink > 1 {
        let (w, h) = (width.div_ceil(shrink) as u16, height.div_ceil(shrink) as u16);
        let (w, h) = decoder.scale(w, h).map_err(corrupt)?;
        (out_w, out_h) = (u32::from(w), u32::from(h));
    }
    decoder.set_max_decoding_buffer_size(MAX_DECODE_BYTES as usize);
    let pixels = decoder.decode().map_err(corrupt)?;
    let info = decoder.info().ok_or_else(|| PreprocessError::Decode("JPEG: no frame header".into()))?;
    let rgb = match info.pixel_format {
        jpeg_decoder::PixelFormat::RGB24 => pixels,
        jpeg_decoder::PixelFormat::L8 => pixels.iter().flat_map(|&v| [v, v, v]).collect(),
        jpeg_decoder::PixelFormat::L16 => {
            pixels.chunks_exact(2).flat_map(|v| [eight_bits(u16::from_be_bytes([v[0], v[1]])); 3]).collect()
        }
        jpeg_decoder::PixelFormat::CMYK32 => pixels.chunks_exact(4).flat_map(cmyk_to_rgb).collect(),
    };
    if rgb.len() != (out_w * out_h * 3) as usize {
        return Err(PreprocessError::Decode(format!("JPEG: {} bytes of pixels for {out_w}x{out_h}", rgb.len())));
    }
    let orientation = early_orientation.or_else(|| decoder.exif_data().and_then(Orientation::from_exif_chunk));
    upright(out_w, out_h, rgb, orientation, shrink)
}

/// A JPEG of 8-bit colour or grey, `width` × `height` by its header, decoded at full
/// size to RGB by zune-jpeg (faster than jpeg-decoder there; it cannot shrink), with
/// the orientation its EXIF gives.
fn decode_jpeg_full(
    encoded: &[u8],
    width: u32,
    height: u32,
) -> Result<(Vec<u8>, Option<Orientation>), PreprocessError> {
    let options = zune_core::options::DecoderOptions::default()
        .jpeg_set_out_colorspace(zune_core::colorspace::ColorSpace::RGB)
        .set_max_width(width as usize)
        .set_max_height(height as usize)
        // A truncated or corrupt file is refused, not filled in.
        .set_strict_mode(true);
    let mut decoder = zune_jpeg::JpegDecoder::new_with_options(zune_core::bytestream::ZCursor::new(encoded), options);
    let rgb = decoder.decode().map_err(|e| PreprocessError::Codec { stage: "JPEG", source: Cause::new(e) })?;
    if rgb.len() != (width * height * 3) as usize {
        return Err(PreprocessError::Decode(format!("JPEG: {} bytes of pixels for {width}x{height}", rgb.len())));
    }
    let orientation = decoder.exif().and_then(|exif| Orientation::from_exif_chunk(exif));
    Ok((rgb, orientation))
}

fn swaps_sides(orientation: Orientation) -> bool {
    matches!(
        orientation,
        Orientation::Rotate90 | Orientation::Rotate270 | Orientation::Rotate90FlipH | Orientation::Rotate270FlipH
    )
}

/// A 16-bit value on the 8-bit scale, rounded.
fn eight_bits(v: u16) -> u8 {
    ((u32::from(v) + 128) / 257) as u8
}

/// As the decoder gives CMYK (Adobe's inverted form undone: 0 is no ink), the RGB
/// Pillow converts it to.
fn cmyk_to_rgb(cmyk: &[u8]) -> [u8; 3] {
    let k = 255 - u32::from(cmyk[3]);
    let channel = |c: u8| ((255 - u32::from(c)) * k / 255) as u8;
    [channel(cmyk[0]), channel(cmyk[1]), channel(cmyk[2])]
}

fn decode_png(encoded: &[u8], limits: &DecodeLimits) -> Result<Decoded, PreprocessError> {
    let mut reader = ImageReader::with_format(std::io::Cursor::new(encoded), image::ImageFormat::Png);
    let mut decode_limits = Limits::default();
    decode_limits.max_alloc = Some(MAX_DECODE_BYTES);
    reader.limits(decode_limits);
    let corrupt = |e: image::ImageError| match e {
        image::ImageError::Limits(limit) => PreprocessError::OverDecoderLimit(Cause::new(limit)),
        other => PreprocessError::Codec { stage: "PNG", source: Cause::new(other) },
    };
    let mut decoder = reader.into_decoder().map_err(corrupt)?;
    let (width, height) = decoder.dimensions();
    limits.check(width, height)?;
    let orientation = decoder.orientation().ok();
    let image = DynamicImage::from_decoder(decoder).map_err(corrupt)?;
    let rgb = image.into_rgb8();
    upright(width, height, rgb.into_raw(), orientation, 1)
}

fn upright(
    width: u32,
    height: u32,
    rgb: Vec<u8>,
    orientation: Option<Orientation>,
    shrink: u32,
) -> Result<Decoded, PreprocessError> {
    let Some(orientation) = orientation.filter(|o| *o != Orientation::NoTransforms) else {
        return Ok(Decoded { width, height, rgb, shrink });
    };
    let image = RgbImage::from_raw(width, height, rgb)
        .ok_or_else(|| PreprocessError::Decode(format!("pixels do not fill {width}x{height}")))?;
    let mut image = DynamicImage::ImageRgb8(image);
    image.apply_orientation(orientation);
    let image = image.into_rgb8();
    let (width, height) = image.dimensions();
    Ok(Decoded { width, height, rgb: image.into_raw(), shrink })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(image: &RgbImage, format: image::ImageFormat) -> Vec<u8> {
        let mut out = std::io::Cursor::new(Vec::new());
        image.write_to(&mut out, format).unwrap();
        out.into_inner()
    }

    #[test]
    fn a_large_jpeg_is_decoded_shrunk_to_just_above_what_the_model_takes() {
        let photo = RgbImage::from_fn(1024, 768, |x, y| image::Rgb([(x / 4) as u8, (y / 3) as u8, 128]));
        let jpeg = encoded(&photo, image::ImageFormat::Jpeg);
        let target = ImagePreprocess::new(64, [0.0; 3], [1.0; 3]);
        let small = decode(&jpeg, &DecodeLimits::default(), Some(&target)).unwrap();
        // 768 × 0.875 = 672 ≥ 8 × 64.
        assert_eq!((small.width, small.height, small.shrink), (128, 96, 8));
        let full = decode(&jpeg, &DecodeLimits::default(), None).unwrap();
        assert_eq!((full.width, full.height, full.shrink), (1024, 768, 1));
        // The shrunk decode averages blocks of the full one.
        let at = |d: &Decoded, x: u32, y: u32| d.rgb[((y * d.width + x) * 3) as usize];
        assert!((i32::from(at(&small, 64, 48)) - i32::from(at(&full, 516, 388))).abs() <= 4);
    }

    #[test]
    fn empty_unsupported_and_oversized_images_are_refused_by_kind() {
        let limits = DecodeLimits { max_pixels: 100 * 100 };
        assert!(matches!(decode(b"", &limits, None), Err(PreprocessError::Decode(_))));
        let gif = b"GIF89a\x01\x00\x01\x00\x00\x00\x00;";
        assert!(matches!(decode(gif, &limits, None), Err(PreprocessError::Unsupported(m)) if m.contains("Gif")));
        let big = encoded(&RgbImage::new(101, 100), image::ImageFormat::Png);
        assert!(matches!(decode(&big, &limits, None), Err(PreprocessError::TooLarge(_))));
        let big = encoded(&RgbImage::new(101, 100), image::ImageFormat::Jpeg);
        assert!(matches!(decode(&big, &limits, None), Err(PreprocessError::TooLarge(_))));
        assert!(decode(&big, &DecodeLimits::default(), None).is_ok());
    }
}
