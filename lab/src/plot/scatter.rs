//! Measured points with the lines fitted through them: latency against batch size,
//! one series per variant.

use super::canvas::{Anchor, Canvas, PALETTE, tick};

/// One series: measured points, and optionally a line `y = slope·x + intercept`.
#[derive(Clone, Debug)]
pub struct Series {
    /// Its legend.
    pub name: String,
    /// The measured (x, y) points.
    pub points: Vec<(f64, f64)>,
    /// The fitted line's (slope, intercept), drawn dashed.
    pub line: Option<(f64, f64)>,
}

/// A scatter of every series' points with their lines, axes from zero.
pub fn scatter_with_lines(title: &str, x_label: &str, y_label: &str, series: &[Series]) -> String {
    let (w, h, pad) = (900.0, 500.0, 60.0);
    let all = series.iter().flat_map(|s| s.points.iter());
    let x_max = all.clone().map(|p| p.0).fold(1.0, f64::max);
    let y_max = all.map(|p| p.1).fold(1.0, f64::max) * 1.1;
    let x = |v: f64| pad + v / x_max * (w - 2.0 * pad);
    let y = |v: f64| h - pad - v / y_max * (h - 2.0 * pad);
    let mut page = Canvas::new(w, h, title);
    page.axes(pad, pad, w - pad, h - pad);
    for i in 0..=4 {
        let (xv, yv) = (x_max * f64::from(i) / 4.0, y_max * f64::from(i) / 4.0);
        page.text(x(xv), h - pad + 18.0, Anchor::Middle, &tick(xv));
        page.text(pad - 6.0, y(yv) + 4.0, Anchor::End, &tick(yv));
    }
    page.text(w / 2.0, h - 15.0, Anchor::Middle, x_label);
    page.y_label(16.0, y_label);
    for (i, series) in series.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        if let Some((slope, intercept)) = series.line {
            let (x0, x1) = (0.0, x_max);
            let from = (x(x0), y((slope * x0 + intercept).max(0.0)));
            page.dashed(from, (x(x1), y((slope * x1 + intercept).min(y_max))), colour, "4 3");
        }
        for &(px, py) in &series.points {
            page.dot(x(px), y(py), 3.5, colour);
        }
        page.text_coloured(
            pad + 10.0,
            pad + 16.0 * (i as f64 + 1.0),
            Anchor::Start,
            colour,
            &format!("● {}", series.name),
        );
    }
    page.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_point_and_line_is_drawn_with_its_legend() {
        let series = [
            Series { name: "lite0".into(), points: vec![(1.0, 10.0), (8.0, 40.0)], line: Some((4.3, 5.7)) },
            Series { name: "lite1".into(), points: vec![(1.0, 14.0)], line: None },
        ];
        let svg = scatter_with_lines("latency", "batch", "ms", &series);
        assert_eq!(svg.matches("<circle").count(), 3, "{svg}");
        assert_eq!(svg.matches("stroke-dasharray").count(), 1, "{svg}");
        assert!(svg.contains("● lite0") && svg.contains("● lite1") && svg.contains(">batch<"), "{svg}");
    }
}
