//! Text lines as the direction classifier and the recogniser take them: each box cut
//! out of the page and straightened (a perspective warp of its quadrilateral onto an
//! upright rectangle), then resized to the models' height of 48 with its aspect kept,
//! normalised to [-1, 1] in BGR order (as PaddleOCR's models were trained, on OpenCV's
//! images), and padded with zeros on the right to the width of its batch.

use std::ops::Deref;

use image::{ImageBuffer, Rgb, RgbImage};

/// RGB pixels in any buffer: a page is cut from the bytes it arrived in, uncopied.
pub type RgbPixels<C> = ImageBuffer<Rgb<u8>, C>;

use super::geometry::{Point, Quad};

/// The height both line models take.
pub const LINE_HEIGHT: usize = 48;

/// The box `quad` of `page` cut out upright: as wide as its longer horizontal side and
/// as tall as its longer vertical one, sampled bicubically with edges repeated. A cut
/// half again as tall as it is wide is taken for vertical text and turned a quarter
/// to the left, as the reference does.
pub fn cut<C: Deref<Target = [u8]>>(page: &RgbPixels<C>, quad: &Quad) -> RgbImage {
    let width = quad[0].distance(quad[1]).max(quad[2].distance(quad[3])).max(1.0) as u32;
    let height = quad[0].distance(quad[3]).max(quad[1].distance(quad[2])).max(1.0) as u32;
    let corners = [
        Point::new(0.0, 0.0),
        Point::new(width as f32, 0.0),
        Point::new(width as f32, height as f32),
        Point::new(0.0, height as f32),
    ];
    let to_page = homography(&corners, quad);
    let mut out = RgbImage::new(width, height);
    for (x, y, pixel) in out.enumerate_pixels_mut() {
        let (u, v) = apply(&to_page, x as f64, y as f64);
        *pixel = image::Rgb(sample(page, u, v));
    }
    if f64::from(height) >= 1.5 * f64::from(width) { image::imageops::rotate270(&out) } else { out }
}

/// The width a line takes at [`LINE_HEIGHT`], its aspect kept: ⌈48 · (width / height)⌉,
/// in that order, as the reference rounds it.
pub fn scaled_width(line: &RgbImage) -> usize {
    (LINE_HEIGHT as f64 * (f64::from(line.width()) / f64::from(line.height().max(1)))).ceil() as usize
}

/// `line` as a `[3, 48, width]` CHW tensor's elements: resized to 48 rows and
/// [`scaled_width`] columns (at most `width`), BGR, `(v / 255 − 0.5) / 0.5`, zeros to the right.
pub fn line_input(line: &RgbImage, width: usize) -> Vec<f32> {
    let columns = scaled_width(line).clamp(1, width.max(1));
    let resized =
        image::imageops::resize(line, columns as u32, LINE_HEIGHT as u32, image::imageops::FilterType::Triangle);
    let mut elements = vec![0.0f32; 3 * LINE_HEIGHT * width];
    for (x, y, pixel) in resized.enumerate_pixels() {
        for (plane, channel) in [2, 1, 0].into_iter().enumerate() {
            let v = f32::from(pixel.0[channel]) / 255.0;
            elements[(plane * LINE_HEIGHT + y as usize) * width + x as usize] = (v - 0.5) / 0.5;
        }
    }
    elements
}

/// The 3 × 3 matrix taking each corner of `from` to the same corner of `to`.
fn homography(from: &[Point; 4], to: &[Point; 4]) -> [f64; 9] {
    // Eight equations in the eight unknowns h0..h7 (h8 = 1), solved by elimination.
    let mut a = [[0.0f64; 9]; 8];
    for i in 0..4 {
        let (x, y) = (f64::from(from[i].x), f64::from(from[i].y));
        let (u, v) = (f64::from(to[i].x), f64::from(to[i].y));
        a[2 * i] = [x, y, 1.0, 0.0, 0.0, 0.0, -u * x, -u * y, u];
        a[2 * i + 1] = [0.0, 0.0, 0.0, x, y, 1.0, -v * x, -v * y, v];
    }
    for col in 0..8 {
        let pivot = (col..8).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs())).unwrap_or(col);
        a.swap(col, pivot);
        let p = a[col][col];
        if p.abs() < 1e-12 {
            continue;
        }
        let pivot_row = a[col];
        for (i, row) in a.iter_mut().enumerate() {
            if i != col {
                let f = row[col] / p;
                row.iter_mut().zip(pivot_row).skip(col).for_each(|(v, q)| *v -= f * q);
            }
        }
    }
    let h = |i: usize| if a[i][i].abs() < 1e-12 { 0.0 } else { a[i][8] / a[i][i] };
    [h(0), h(1), h(2), h(3), h(4), h(5), h(6), h(7), 1.0]
}

fn apply(h: &[f64; 9], x: f64, y: f64) -> (f64, f64) {
    let w = h[6] * x + h[7] * y + h[8];
    ((h[0] * x + h[1] * y + h[2]) / w, (h[3] * x + h[4] * y + h[5]) / w)
}

/// The page's colour at (`x`, `y`), bicubic as OpenCV weighs it (a = −0.75), edges
/// repeated beyond the page.
fn sample<C: Deref<Target = [u8]>>(page: &RgbPixels<C>, x: f64, y: f64) -> [u8; 3] {
    const A: f64 = -0.75;
    let weight = |t: f64| {
        let t = t.abs();
        if t <= 1.0 {
            ((A + 2.0) * t - (A + 3.0)) * t * t + 1.0
        } else if t < 2.0 {
            ((A * t - 5.0 * A) * t + 8.0 * A) * t - 4.0 * A
        } else {
            0.0
        }
    };
    let (w, h) = (page.width().max(1) as i64, page.height().max(1) as i64);
    let (x0, y0) = (x.floor(), y.floor());
    let (fx, fy) = (x - x0, y - y0);
    let mut sum = [0.0f64; 3];
    for j in -1..=2i64 {
        let wy = weight(fy - j as f64);
        let py = (y0 as i64 + j).clamp(0, h - 1) as u32;
        for i in -1..=2i64 {
            let wx = weight(fx - i as f64);
            let px = (x0 as i64 + i).clamp(0, w - 1) as u32;
            let pixel = page.get_pixel(px, py).0;
            for c in 0..3 {
                sum[c] += wx * wy * f64::from(pixel[c]);
            }
        }
    }
    sum.map(|v| v.round().clamp(0.0, 255.0) as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 40 × 20 page, white but for a red block at columns 10..20, rows 5..10.
    fn page() -> RgbImage {
        RgbImage::from_fn(40, 20, |x, y| {
            if (10..20).contains(&x) && (5..10).contains(&y) {
                image::Rgb([255, 0, 0])
            } else {
                image::Rgb([255, 255, 255])
            }
        })
    }

    #[test]
    fn an_upright_box_is_cut_as_it_is_and_a_tall_one_is_turned() {
        let quad = [Point::new(10.0, 5.0), Point::new(20.0, 5.0), Point::new(20.0, 10.0), Point::new(10.0, 10.0)];
        let cut = cut(&page(), &quad);
        assert_eq!(cut.dimensions(), (10, 5));
        assert!(cut.pixels().all(|p| p.0 == [255, 0, 0]), "only the red block");
        let tall = [Point::new(10.0, 0.0), Point::new(14.0, 0.0), Point::new(14.0, 20.0), Point::new(10.0, 20.0)];
        assert_eq!(super::cut(&page(), &tall).dimensions(), (20, 4), "turned to lie down");
    }

    #[test]
    fn a_line_is_resized_to_48_rows_normalised_in_bgr_and_padded_with_zeros() {
        let red = RgbImage::from_pixel(20, 10, image::Rgb([255, 0, 0]));
        assert_eq!(scaled_width(&red), 96);
        let width = 120;
        let elements = line_input(&red, width);
        assert_eq!(elements.len(), 3 * 48 * width);
        let at = |plane: usize, y: usize, x: usize| elements[(plane * 48 + y) * width + x];
        assert_eq!((at(0, 20, 50), at(1, 20, 50), at(2, 20, 50)), (-1.0, -1.0, 1.0), "blue, green, red");
        assert_eq!(at(2, 20, 100), 0.0, "padding beyond the 96 columns");
        // A line wider than the batch is squeezed into it.
        let narrow = line_input(&red, 50);
        assert_eq!(narrow.len(), 3 * 48 * 50);
        assert_eq!(narrow[(2 * 48 + 10) * 50 + 49], 1.0);
    }
}
