//! Small SVG charts, so results people look at are also pictures.

use std::fmt::Write;

/// One series: measured points, and optionally a line `y = slope·x + intercept`.
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    pub line: Option<(f64, f64)>,
}

const COLORS: [&str; 8] = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"];

/// A tick label: whole numbers as such, others with one decimal.
fn tick(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 { format!("{v:.0}") } else { format!("{v:.1}") }
}

/// A scatter of every series' points with their lines, axes from zero.
pub fn scatter_with_lines(title: &str, x_label: &str, y_label: &str, series: &[Series]) -> String {
    let (w, h, pad) = (900.0, 500.0, 60.0);
    let all = series.iter().flat_map(|s| s.points.iter());
    let x_max = all.clone().map(|p| p.0).fold(1.0, f64::max);
    let y_max = all.map(|p| p.1).fold(1.0, f64::max) * 1.1;
    let x = |v: f64| pad + v / x_max * (w - 2.0 * pad);
    let y = |v: f64| h - pad - v / y_max * (h - 2.0 * pad);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(s, r#"<text x="{}" y="24" text-anchor="middle" font-size="15">{title}</text>"#, w / 2.0);
    let _ = writeln!(s, r#"<line x1="{pad}" y1="{0}" x2="{1}" y2="{0}" stroke="black"/>"#, h - pad, w - pad);
    let _ = writeln!(s, r#"<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{}" stroke="black"/>"#, h - pad);
    for i in 0..=4 {
        let (xv, yv) = (x_max * f64::from(i) / 4.0, y_max * f64::from(i) / 4.0);
        let _ =
            writeln!(s, r#"<text x="{:.1}" y="{}" text-anchor="middle">{}</text>"#, x(xv), h - pad + 18.0, tick(xv));
        let _ = writeln!(s, r#"<text x="{}" y="{:.1}" text-anchor="end">{}</text>"#, pad - 6.0, y(yv) + 4.0, tick(yv));
    }
    let _ = writeln!(s, r#"<text x="{}" y="{}" text-anchor="middle">{x_label}</text>"#, w / 2.0, h - 15.0);
    let _ = writeln!(
        s,
        r#"<text x="16" y="{0}" transform="rotate(-90 16 {0})" text-anchor="middle">{y_label}</text>"#,
        h / 2.0
    );
    for (i, series) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        if let Some((slope, intercept)) = series.line {
            let (x0, x1) = (0.0, x_max);
            let _ = writeln!(
                s,
                r#"<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{color}" stroke-dasharray="4 3"/>"#,
                x(x0),
                y((slope * x0 + intercept).max(0.0)),
                x(x1),
                y((slope * x1 + intercept).min(y_max))
            );
        }
        for &(px, py) in &series.points {
            let _ = writeln!(s, r#"<circle cx="{:.1}" cy="{:.1}" r="3.5" fill="{color}"/>"#, x(px), y(py));
        }
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" fill="{color}">● {}</text>"#,
            pad + 10.0,
            pad + 16.0 * (i as f64 + 1.0),
            series.name
        );
    }
    s.push_str("</svg>\n");
    s
}
