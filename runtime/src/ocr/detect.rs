//! From a text detector's probability map to text boxes: Differentiable Binarization's
//! post-processing as PaddleOCR does it. The map is thresholded and dilated; each
//! 8-connected region becomes the rotated rectangle of least area around it, scored by
//! the map's mean inside it, grown ("unclipped", [`super::unclip`]) by area × ratio / perimeter, scaled
//! to the image, and the boxes come back in reading order.

use super::geometry::{Point, Quad, mean_within, min_area_rect, reading_order};
use super::unclip::unclip;

/// How boxes are drawn from the map (PaddleOCR's names and defaults for PP-OCRv4).
#[derive(Clone, Debug, PartialEq)]
pub struct DbConfig {
    /// A pixel is text above this probability.
    pub threshold: f32,
    /// A box is kept when the map's mean inside it reaches this.
    pub box_threshold: f32,
    /// Regions looked at, at most.
    pub max_candidates: usize,
    /// How far a box grows: its area × this / its perimeter.
    pub unclip_ratio: f32,
    /// Widen the text pixels by one (a 2 × 2 dilation) before finding regions.
    pub dilate: bool,
}

impl Default for DbConfig {
    fn default() -> Self {
        DbConfig { threshold: 0.3, box_threshold: 0.5, max_candidates: 1000, unclip_ratio: 1.6, dilate: true }
    }
}

/// A text box found, in the image's pixels.
#[derive(Clone, Debug, PartialEq)]
pub struct TextBox {
    /// Its corners in reading order.
    pub quad: Quad,
    /// The map's mean inside it before it grew.
    pub score: f32,
}

/// Rectangles with a shorter side below this (in map pixels) are noise.
const MIN_SIDE: f32 = 3.0;

/// The boxes of `map` (`width` × `height`, row-major probabilities) in an image of
/// `image_width` × `image_height`, top to bottom and, within a line, left to right.
pub fn boxes(
    map: &[f32],
    width: usize,
    height: usize,
    image: (u32, u32),
    config: &DbConfig,
) -> Result<Vec<TextBox>, MapSizeError> {
    if map.len() != width * height || width == 0 {
        return Err(MapSizeError { values: map.len(), width, height });
    }
    let mut text: Vec<bool> = map.iter().map(|&p| p > config.threshold).collect();
    if config.dilate {
        text = dilated(&text, width, height);
    }
    let mut found = Vec::new();
    for region in regions(&text, width, height).into_iter().take(config.max_candidates) {
        let Some(rect) = min_area_rect(&region) else { continue };
        if rect.short_side() < MIN_SIDE {
            continue;
        }
        let quad = rect.corners();
        let score = mean_within(map, width, &quad);
        if score < config.box_threshold {
            continue;
        }
        let (w, h) = rect.size;
        let Some(grown) = unclip(&quad, w * h * config.unclip_ratio / (2.0 * (w + h))) else { continue };
        if grown.short_side() < MIN_SIDE + 2.0 {
            continue;
        }
        // Map to image pixels as the reference does, in f32 with halves to even.
        let scale = |v: f32, map: usize, image: u32| (v / map as f32 * image as f32).round_ties_even();
        let scaled = grown.corners().map(|p| {
            Point::new(
                scale(p.x, width, image.0).clamp(0.0, image.0 as f32),
                scale(p.y, height, image.1).clamp(0.0, image.1 as f32),
            )
        });
        // As the reference keeps it: corners on the image, whole pixels, boxes of more
        // than 3 pixels each way.
        let quad = reading_order(scaled)
            .map(|p| Point::new(p.x.min(image.0 as f32 - 1.0).trunc(), p.y.min(image.1 as f32 - 1.0).trunc()));
        if quad[0].distance(quad[1]).trunc() <= 3.0 || quad[0].distance(quad[3]).trunc() <= 3.0 {
            continue;
        }
        found.push(TextBox { quad, score });
    }
    Ok(in_reading_order(found))
}

/// A map whose values are not its width × height.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("a detection map of {width} × {height} cannot hold {values} values")]
pub struct MapSizeError {
    /// Values given.
    pub values: usize,
    /// Width claimed.
    pub width: usize,
    /// Height claimed.
    pub height: usize,
}

/// A pixel is set where any of it, its left, upper and upper-left neighbours is (the
/// 2 × 2 kernel anchored at its lower right, as OpenCV anchors it).
fn dilated(text: &[bool], width: usize, height: usize) -> Vec<bool> {
    let at = |x: usize, y: usize| text[y * width + x];
    (0..height)
        .flat_map(|y| (0..width).map(move |x| (x, y)))
        .map(|(x, y)| at(x, y) || (x > 0 && at(x - 1, y)) || (y > 0 && (at(x, y - 1) || (x > 0 && at(x - 1, y - 1)))))
        .collect()
}

/// The 8-connected regions of set pixels, each as the centres of its pixels on its
/// border (those with a neighbour unset or off the map: the hull needs no more).
fn regions(text: &[bool], width: usize, height: usize) -> Vec<Vec<Point>> {
    let mut seen = vec![false; text.len()];
    let mut regions = Vec::new();
    let mut stack = Vec::new();
    for start in 0..text.len() {
        if !text[start] || seen[start] {
            continue;
        }
        seen[start] = true;
        stack.push(start);
        let mut border = Vec::new();
        while let Some(i) = stack.pop() {
            let (x, y) = ((i % width) as isize, (i / width) as isize);
            let mut on_border = false;
            for (dx, dy) in [(-1, -1), (0, -1), (1, -1), (-1, 0), (1, 0), (-1, 1), (0, 1), (1, 1)] {
                let (nx, ny) = (x + dx, y + dy);
                if nx < 0 || ny < 0 || nx >= width as isize || ny >= height as isize {
                    on_border = true;
                    continue;
                }
                let n = ny as usize * width + nx as usize;
                if !text[n] {
                    on_border = true;
                } else if !seen[n] {
                    seen[n] = true;
                    stack.push(n);
                }
            }
            if on_border {
                border.push(Point::new(x as f32, y as f32));
            }
        }
        regions.push(border);
    }
    regions
}

/// Top to bottom by the top-left corner; boxes whose tops lie within 10 pixels are one
/// line, read left to right.
fn in_reading_order(mut boxes: Vec<TextBox>) -> Vec<TextBox> {
    boxes.sort_by(|a, b| a.quad[0].y.total_cmp(&b.quad[0].y).then(a.quad[0].x.total_cmp(&b.quad[0].x)));
    for i in 0..boxes.len().saturating_sub(1) {
        for j in (0..=i).rev() {
            let (upper, lower) = (&boxes[j].quad[0], &boxes[j + 1].quad[0]);
            if (lower.y - upper.y).abs() < 10.0 && lower.x < upper.x {
                boxes.swap(j, j + 1);
            } else {
                break;
            }
        }
    }
    boxes
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `width` × `height` map, 0.9 inside each (x0, y0, x1, y1) rectangle (inclusive).
    fn drawn(width: usize, height: usize, rects: &[(usize, usize, usize, usize)]) -> Vec<f32> {
        let mut map = vec![0.05; width * height];
        for &(x0, y0, x1, y1) in rects {
            for y in y0..=y1 {
                for x in x0..=x1 {
                    map[y * width + x] = 0.9;
                }
            }
        }
        map
    }

    #[test]
    fn each_drawn_line_is_one_box_grown_scaled_and_read_in_order() {
        // Two lines on the right and left of one row, one line below; a speck.
        let map = drawn(100, 60, &[(60, 10, 89, 17), (5, 12, 40, 19), (10, 40, 70, 49), (95, 55, 95, 55)]);
        let found = boxes(&map, 100, 60, (200, 120), &DbConfig::default()).unwrap();
        assert_eq!(found.len(), 3, "the speck is too small: {found:?}");
        let lefts: Vec<f32> = found.iter().map(|b| b.quad[0].x).collect();
        assert!(lefts[0] < lefts[1], "within a row, left first: {lefts:?}");
        assert!(found[2].quad[0].y > found[1].quad[3].y, "then the line below");
        let first = &found[0];
        // Scored over the dilated region: 36 × 8 pixels at 0.9 of its 37 × 9.
        let expected = (288.0 * 0.9 + 45.0 * 0.05) / 333.0;
        assert!((first.score - expected).abs() < 1e-3, "score {}", first.score);
        // Dilated, the left line covers columns 5..=41 and rows 12..=20: 36 × 8 between
        // pixel centres, grown by 36·8·1.6/88 ≈ 5.24 each side, then doubled in scale.
        let width = first.quad[0].distance(first.quad[1]);
        let height = first.quad[0].distance(first.quad[3]);
        assert!((width - 2.0 * (36.0 + 2.0 * 5.24)).abs() <= 3.0, "width {width}");
        assert!((height - 2.0 * (8.0 + 2.0 * 5.24)).abs() <= 3.0, "height {height}");
    }

    #[test]
    fn a_blank_map_or_a_faint_region_gives_no_box() {
        assert!(boxes(&vec![0.0; 64 * 32], 64, 32, (64, 32), &DbConfig::default()).unwrap().is_empty());
        assert!(boxes(&[0.0; 10], 4, 4, (4, 4), &DbConfig::default()).is_err());
        // Above the pixel threshold but below the box threshold.
        let faint: Vec<f32> = drawn(64, 32, &[(5, 5, 50, 15)]).iter().map(|&p| if p > 0.5 { 0.4 } else { p }).collect();
        assert!(boxes(&faint, 64, 32, (64, 32), &DbConfig::default()).unwrap().is_empty());
    }

    #[test]
    fn a_tilted_line_gets_a_tilted_box() {
        // A band rising one pixel every four columns.
        let (width, height) = (120, 60);
        let mut map = vec![0.0; width * height];
        for x in 10..110 {
            for y in 0..6 {
                map[(40 - x / 4 + y) * width + x] = 0.95;
            }
        }
        let found = boxes(&map, width, height, (120, 60), &DbConfig::default()).unwrap();
        assert_eq!(found.len(), 1);
        let [top_left, top_right, ..] = found[0].quad;
        let slope = (top_right.y - top_left.y) / (top_right.x - top_left.x);
        assert!((slope + 0.25).abs() < 0.05, "slope {slope}");
    }
}
