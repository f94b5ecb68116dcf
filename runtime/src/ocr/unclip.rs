//! Growing ("unclipping") a text box as PaddleOCR does: its corners taken as whole
//! pixels (truncated), each side moved out by the distance and each corner rounded by
//! an arc, every point rounded to a whole pixel as the Clipper library's round-joined
//! polygon offset computes them, then the least-area rectangle around the result.
//!
//! Growing the exact rectangle gives nearly the same box, but the recogniser reads a
//! line's text differently when its cut moves by one pixel (spaces above all), so the
//! reference's integer arithmetic is kept to read lines as it reads them.

use super::geometry::{Point, Quad, RotatedRect, min_area_rect};

/// `box_corners` grown by `distance`: the rectangle of least area around their
/// round-joined offset, every point in whole pixels. `None` when the corners, in whole
/// pixels, do not make a polygon.
pub fn unclip(box_corners: &Quad, distance: f32) -> Option<RotatedRect> {
    let points = offset_points(box_corners, f64::from(distance));
    if points.is_empty() {
        return None;
    }
    min_area_rect(&points.iter().map(|&(x, y)| Point::new(x as f32, y as f32)).collect::<Vec<_>>())
}

/// The round-joined offset of the polygon `corners` (truncated to whole pixels,
/// repeated points dropped) by `delta > 0`, outward, as Clipper's `ClipperOffset` with
/// its default arc tolerance of 0.25 produces it.
fn offset_points(corners: &Quad, delta: f64) -> Vec<(i64, i64)> {
    let mut polygon: Vec<(i64, i64)> = Vec::with_capacity(4);
    for p in corners {
        let q = (p.x.trunc() as i64, p.y.trunc() as i64);
        if polygon.last() != Some(&q) {
            polygon.push(q);
        }
    }
    while polygon.len() > 1 && polygon.first() == polygon.last() {
        polygon.pop();
    }
    if polygon.len() < 3 || delta <= 0.0 {
        return Vec::new();
    }
    if signed_area(&polygon) < 0.0 {
        polygon.reverse();
    }
    let n = polygon.len();
    let normals: Vec<(f64, f64)> = (0..n).map(|j| unit_normal(polygon[j], polygon[(j + 1) % n])).collect();

    let tolerance = if 0.25 > delta * 0.25 { delta * 0.25 } else { 0.25 };
    let steps = (std::f64::consts::PI / (1.0 - tolerance / delta).acos()).min(delta * std::f64::consts::PI);
    let turn = std::f64::consts::TAU / steps;
    let (sin, cos) = (turn.sin(), turn.cos());
    let steps_per_radian = steps / std::f64::consts::TAU;

    let at = |p: (i64, i64), normal: (f64, f64)| {
        (round_half_away(p.0 as f64 + normal.0 * delta), round_half_away(p.1 as f64 + normal.1 * delta))
    };
    let mut out = Vec::new();
    let mut k = n - 1;
    for j in 0..n {
        let (before, after) = (normals[k], normals[j]);
        let sin_a = before.0 * after.1 - after.0 * before.1;
        let cos_a = before.0 * after.0 + before.1 * after.1;
        if (sin_a * delta).abs() < 1.0 && cos_a > 0.0 {
            // Nearly straight on: one point.
            out.push(at(polygon[j], before));
        } else if sin_a.clamp(-1.0, 1.0) * delta < 0.0 {
            // A concave corner: both offsets with the corner between them.
            out.extend([at(polygon[j], before), polygon[j], at(polygon[j], after)]);
        } else {
            // The arc from the previous side's normal to the next side's.
            let angle = sin_a.clamp(-1.0, 1.0).atan2(cos_a);
            let arc_steps = (round_half_away(steps_per_radian * angle.abs()) as usize).max(1);
            let (mut x, mut y) = before;
            for _ in 0..arc_steps {
                out.push(at(polygon[j], (x, y)));
                (x, y) = (x * cos - sin * y, x * sin + y * cos);
            }
            out.push(at(polygon[j], after));
        }
        k = j;
    }
    out
}

/// Twice the polygon's area, positive when it runs clockwise on the page (y down), as
/// a box's corners in reading order do, so that the normals `(dy, −dx)` point out.
fn signed_area(polygon: &[(i64, i64)]) -> f64 {
    let n = polygon.len();
    (0..n)
        .map(|i| {
            let (a, b) = (polygon[i], polygon[(i + 1) % n]);
            (a.0 * b.1 - b.0 * a.1) as f64
        })
        .sum()
}

/// The unit normal `(dy, −dx)` of the side from `a` to `b`; zero for a point.
fn unit_normal(a: (i64, i64), b: (i64, i64)) -> (f64, f64) {
    let (dx, dy) = ((b.0 - a.0) as f64, (b.1 - a.1) as f64);
    if dx == 0.0 && dy == 0.0 {
        return (0.0, 0.0);
    }
    let f = 1.0 / (dx * dx + dy * dy).sqrt();
    (dy * f, -dx * f)
}

/// Clipper's rounding: halves away from zero.
fn round_half_away(v: f64) -> i64 {
    if v < 0.0 { (v - 0.5) as i64 } else { (v + 0.5) as i64 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quad(x0: f32, y0: f32, x1: f32, y1: f32) -> Quad {
        [Point::new(x0, y0), Point::new(x1, y0), Point::new(x1, y1), Point::new(x0, y1)]
    }

    fn extent(points: &[(i64, i64)]) -> (i64, i64, i64, i64) {
        let xs = points.iter().map(|p| p.0);
        let ys = points.iter().map(|p| p.1);
        (xs.clone().min().unwrap(), ys.clone().min().unwrap(), xs.max().unwrap(), ys.max().unwrap())
    }

    #[test]
    fn corners_are_truncated_then_sides_move_out_by_the_rounded_distance() {
        // 10.9 → 10 and 50.9 → 50: grown by 2 the box spans 8..=52 and 8..=32, as
        // pyclipper gives it for the same corners.
        let points = offset_points(&quad(10.9, 10.9, 50.9, 30.9), 2.0);
        assert_eq!(extent(&points), (8, 8, 52, 32));
        // pyclipper 1.4's answer for these corners (the points it keeps: it drops
        // those on a straight run between two others).
        let reference = [(52, 9), (52, 30), (51, 32), (10, 32), (8, 31), (8, 10), (9, 8), (50, 8)];
        assert!(reference.iter().all(|p| points.contains(p)), "{points:?}");
        // Either way round the corners are given, the polygon grows.
        let mut reversed = quad(10.9, 10.9, 50.9, 30.9);
        reversed.reverse();
        assert_eq!(extent(&offset_points(&reversed, 2.0)), (8, 8, 52, 32));
        // 2.6 each side is rounded once per point: 10 − 2.6 → 7, 50 + 2.6 → 53.
        assert_eq!(extent(&offset_points(&quad(10.0, 10.0, 50.0, 30.0), 2.6)), (7, 7, 53, 33));
    }

    #[test]
    fn the_grown_rectangle_is_upright_around_the_offset_and_a_point_is_none() {
        let rect = unclip(&quad(10.2, 20.7, 110.5, 40.1), 5.3).unwrap();
        let corners = rect.corners();
        let close = |p: Point, x: f32, y: f32| (p.x - x).abs() < 1e-3 && (p.y - y).abs() < 1e-3;
        // Truncated to 10..110 × 20..40, grown by 5.3 rounded: 5..115 × 15..45.
        assert!(close(corners[0], 5.0, 15.0) && close(corners[2], 115.0, 45.0), "{corners:?}");
        assert!(unclip(&quad(3.5, 3.5, 3.9, 3.9), 2.0).is_none());
    }
}
