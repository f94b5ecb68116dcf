//! Plane geometry of text boxes: convex hulls, the rotated rectangle of least area
//! around points, a quadrilateral's corners in reading order, and the mean of a map
//! within one.

/// A point in pixels, `x` to the right and `y` down.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Point {
    /// Column.
    pub x: f32,
    /// Row.
    pub y: f32,
}

impl Point {
    /// The point at (`x`, `y`).
    pub const fn new(x: f32, y: f32) -> Self {
        Point { x, y }
    }

    /// The distance to `other`.
    pub fn distance(self, other: Point) -> f32 {
        (self.x - other.x).hypot(self.y - other.y)
    }
}

/// Four corners: top left, top right, bottom right, bottom left.
pub type Quad = [Point; 4];

/// A rectangle at any angle.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RotatedRect {
    /// Its centre.
    pub center: Point,
    /// Side lengths along `axis` and across it.
    pub size: (f32, f32),
    /// The unit vector of its first side.
    pub axis: (f32, f32),
}

impl RotatedRect {
    /// Its shorter side.
    pub fn short_side(&self) -> f32 {
        self.size.0.min(self.size.1)
    }

    /// Its corners in reading order (see [`reading_order`]).
    pub fn corners(&self) -> Quad {
        let (ux, uy) = self.axis;
        let (vx, vy) = (-uy, ux);
        let (hw, hh) = (self.size.0 / 2.0, self.size.1 / 2.0);
        let c = self.center;
        let at = |s: f32, t: f32| Point::new(c.x + s * hw * ux + t * hh * vx, c.y + s * hw * uy + t * hh * vy);
        reading_order([at(-1.0, -1.0), at(1.0, -1.0), at(1.0, 1.0), at(-1.0, 1.0)])
    }
}

/// The convex hull of `points`, counter-clockwise in image coordinates (Andrew's
/// monotone chain); fewer than three distinct points come back as they are.
pub fn convex_hull(points: &[Point]) -> Vec<Point> {
    let mut sorted: Vec<Point> = points.to_vec();
    sorted.sort_by(|a, b| a.x.total_cmp(&b.x).then(a.y.total_cmp(&b.y)));
    sorted.dedup();
    if sorted.len() < 3 {
        return sorted;
    }
    let cross = |o: Point, a: Point, b: Point| (a.x - o.x) * (b.y - o.y) - (a.y - o.y) * (b.x - o.x);
    let mut hull: Vec<Point> = Vec::with_capacity(2 * sorted.len());
    for pass in [&sorted[..], &sorted.iter().rev().copied().collect::<Vec<_>>()[..]] {
        let floor = hull.len();
        for &p in pass {
            while hull.len() >= floor + 2 && cross(hull[hull.len() - 2], hull[hull.len() - 1], p) <= 0.0 {
                hull.pop();
            }
            hull.push(p);
        }
        hull.pop();
    }
    hull
}

/// The rectangle of least area that holds `points` (rotating calipers over their hull:
/// the best rectangle has a side along an edge of it). `None` without points.
pub fn min_area_rect(points: &[Point]) -> Option<RotatedRect> {
    let hull = convex_hull(points);
    let first = *hull.first()?;
    if hull.len() == 1 {
        return Some(RotatedRect { center: first, size: (0.0, 0.0), axis: (1.0, 0.0) });
    }
    let mut best: Option<(f32, RotatedRect)> = None;
    for i in 0..hull.len() {
        let (a, b) = (hull[i], hull[(i + 1) % hull.len()]);
        let length = a.distance(b);
        if length == 0.0 {
            continue;
        }
        let (ux, uy) = ((b.x - a.x) / length, (b.y - a.y) / length);
        let (mut s0, mut s1, mut t0, mut t1) = (f32::MAX, f32::MIN, f32::MAX, f32::MIN);
        for p in &hull {
            let (s, t) = (p.x * ux + p.y * uy, -p.x * uy + p.y * ux);
            (s0, s1, t0, t1) = (s0.min(s), s1.max(s), t0.min(t), t1.max(t));
        }
        let area = (s1 - s0) * (t1 - t0);
        if best.as_ref().is_none_or(|(least, _)| area < *least) {
            let (s, t) = ((s0 + s1) / 2.0, (t0 + t1) / 2.0);
            let center = Point::new(s * ux - t * uy, s * uy + t * ux);
            best = Some((area, RotatedRect { center, size: (s1 - s0, t1 - t0), axis: (ux, uy) }));
        }
    }
    best.map(|(_, rect)| rect)
}

/// Four corners as top left, top right, bottom right, bottom left: the two leftmost
/// points (by x) are the left side, each side's upper point (by y) its top.
pub fn reading_order(points: [Point; 4]) -> Quad {
    let mut by_x = points;
    by_x.sort_by(|a, b| a.x.total_cmp(&b.x).then(a.y.total_cmp(&b.y)));
    let (left, right) = by_x.split_at(2);
    let upper_first = |a: Point, b: Point| if a.y <= b.y { (a, b) } else { (b, a) };
    let (top_left, bottom_left) = upper_first(left[0], left[1]);
    let (top_right, bottom_right) = upper_first(right[0], right[1]);
    [top_left, top_right, bottom_right, bottom_left]
}

/// Whether `p` lies within the convex quadrilateral `quad` (its edges included).
pub fn inside(quad: &Quad, p: Point) -> bool {
    let mut sign = 0.0f32;
    for i in 0..4 {
        let (a, b) = (quad[i], quad[(i + 1) % 4]);
        let cross = (b.x - a.x) * (p.y - a.y) - (b.y - a.y) * (p.x - a.x);
        if cross != 0.0 {
            if sign != 0.0 && cross.signum() != sign {
                return false;
            }
            sign = cross.signum();
        }
    }
    true
}

/// The mean of `map` (`width` columns, row-major) over the pixels whose centres lie in
/// `quad`; 0 where none does.
pub fn mean_within(map: &[f32], width: usize, quad: &Quad) -> f32 {
    let height = map.len() / width.max(1);
    if height == 0 {
        return 0.0;
    }
    let clamp = |v: f32, most: usize| (v.max(0.0) as usize).min(most - 1);
    let x0 = clamp(quad.iter().map(|p| p.x).fold(f32::MAX, f32::min).floor(), width);
    let x1 = clamp(quad.iter().map(|p| p.x).fold(f32::MIN, f32::max).ceil(), width);
    let y0 = clamp(quad.iter().map(|p| p.y).fold(f32::MAX, f32::min).floor(), height);
    let y1 = clamp(quad.iter().map(|p| p.y).fold(f32::MIN, f32::max).ceil(), height);
    let (mut sum, mut count) = (0.0f64, 0usize);
    for y in y0..=y1 {
        for x in x0..=x1 {
            if inside(quad, Point::new(x as f32, y as f32)) {
                sum += f64::from(map[y * width + x]);
                count += 1;
            }
        }
    }
    if count == 0 { 0.0 } else { (sum / count as f64) as f32 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f32, b: f32) -> bool {
        (a - b).abs() < 1e-3
    }

    #[test]
    fn the_hull_drops_inner_points_and_the_rectangle_of_a_tilted_square_is_the_square() {
        let mut points = vec![Point::new(0.0, 0.0), Point::new(4.0, 0.0), Point::new(4.0, 2.0), Point::new(0.0, 2.0)];
        points.push(Point::new(2.0, 1.0));
        assert_eq!(convex_hull(&points).len(), 4);
        let rect = min_area_rect(&points).unwrap();
        assert!(close(rect.size.0 * rect.size.1, 8.0) && close(rect.short_side(), 2.0), "{rect:?}");
        assert!(close(rect.center.x, 2.0) && close(rect.center.y, 1.0));
        // A square of side √2 turned by 45°: its own rectangle, not the 2 × 2 one upright.
        let diamond = [Point::new(1.0, 0.0), Point::new(2.0, 1.0), Point::new(1.0, 2.0), Point::new(0.0, 1.0)];
        let rect = min_area_rect(&diamond).unwrap();
        assert!(close(rect.size.0 * rect.size.1, 2.0), "{rect:?}");
    }

    #[test]
    fn corners_come_in_reading_order_whichever_side_the_axis_follows() {
        let rect = RotatedRect { center: Point::new(10.0, 5.0), size: (8.0, 2.0), axis: (1.0, 0.0) };
        let expected = [Point::new(6.0, 4.0), Point::new(14.0, 4.0), Point::new(14.0, 6.0), Point::new(6.0, 6.0)];
        assert_eq!(rect.corners(), expected);
        // The same rectangle described from its other side gives the same corners.
        let turned = RotatedRect { size: (2.0, 8.0), axis: (0.0, -1.0), ..rect };
        let corners = turned.corners();
        assert!(corners.iter().zip(expected).all(|(a, b)| close(a.x, b.x) && close(a.y, b.y)), "{corners:?}");
    }

    #[test]
    fn the_mean_counts_only_pixels_inside_the_box() {
        // A 6 × 4 map: ones in columns 1..=3 of rows 1..=2, zeros elsewhere.
        let width = 6;
        let map: Vec<f32> = (0..24)
            .map(|i| if (1..=3).contains(&(i % width)) && (1..=2).contains(&(i / width)) { 1.0 } else { 0.0 })
            .collect();
        let ones = [Point::new(1.0, 1.0), Point::new(3.0, 1.0), Point::new(3.0, 2.0), Point::new(1.0, 2.0)];
        assert!(close(mean_within(&map, width, &ones), 1.0));
        let wider = [Point::new(0.0, 1.0), Point::new(3.0, 1.0), Point::new(3.0, 2.0), Point::new(0.0, 2.0)];
        assert!(close(mean_within(&map, width, &wider), 0.75), "column 0 holds zeros");
        let outside = [Point::new(-9.0, -9.0), Point::new(-8.0, -9.0), Point::new(-8.0, -8.0), Point::new(-9.0, -8.0)];
        assert!(close(mean_within(&map, width, &outside), 0.0));
    }
}
