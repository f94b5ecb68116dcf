//! The SVG drawing every lab chart shares: a white page with a title, axes, labels,
//! lines, marks and legends. Charts say what to draw; this says how it is written.

use std::fmt::Write;

/// Colours for series told apart by order.
pub const PALETTE: [&str; 8] = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"];

/// A text's horizontal anchor.
#[derive(Clone, Copy, Debug)]
pub enum Anchor {
    /// The text starts at the point.
    Start,
    /// The text is centred on the point.
    Middle,
    /// The text ends at the point.
    End,
}

impl Anchor {
    fn name(self) -> &'static str {
        match self {
            Anchor::Start => "start",
            Anchor::Middle => "middle",
            Anchor::End => "end",
        }
    }
}

/// An SVG document being drawn, in pixels from the top left.
#[derive(Debug)]
pub struct Canvas {
    svg: String,
    width: f64,
    height: f64,
}

impl Canvas {
    /// A white page of `width` × `height` titled `title` at its top centre.
    pub fn new(width: f64, height: f64, title: &str) -> Self {
        let mut svg = String::new();
        let _ = writeln!(
            svg,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">"#
        );
        let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
        let mut canvas = Canvas { svg, width, height };
        canvas.text_sized(width / 2.0, 22.0, Anchor::Middle, 15, None, title);
        canvas
    }

    /// The page's width.
    pub fn width(&self) -> f64 {
        self.width
    }

    /// The page's height.
    pub fn height(&self) -> f64 {
        self.height
    }

    /// Axes along the left and bottom of the box from (`left`, `top`) to
    /// (`right`, `bottom`).
    pub fn axes(&mut self, left: f64, top: f64, right: f64, bottom: f64) {
        self.polyline(&[(left, top), (left, bottom), (right, bottom)], "black", 1.0, None);
    }

    /// `text` at (`x`, `y`), in the default size and colour.
    pub fn text(&mut self, x: f64, y: f64, anchor: Anchor, text: &str) {
        self.text_sized(x, y, anchor, 12, None, text);
    }

    /// `text` at (`x`, `y`) in `colour`.
    pub fn text_coloured(&mut self, x: f64, y: f64, anchor: Anchor, colour: &str, text: &str) {
        self.text_sized(x, y, anchor, 12, Some(colour), text);
    }

    fn text_sized(&mut self, x: f64, y: f64, anchor: Anchor, size: u32, colour: Option<&str>, text: &str) {
        let size = if size == 12 { String::new() } else { format!(r#" font-size="{size}""#) };
        let fill = colour.map_or(String::new(), |c| format!(r#" fill="{c}""#));
        let _ = writeln!(
            self.svg,
            r#"<text x="{x:.1}" y="{y:.1}" text-anchor="{}"{size}{fill}>{text}</text>"#,
            anchor.name()
        );
    }

    /// `text` turned a quarter left, centred on the page's height, at `x`: a y axis's
    /// label.
    pub fn y_label(&mut self, x: f64, text: &str) {
        let y = self.height / 2.0;
        let _ = writeln!(
            self.svg,
            r#"<text x="{x}" y="{y:.1}" transform="rotate(-90 {x} {y:.1})" text-anchor="middle">{text}</text>"#
        );
    }

    /// A line through `points`, `width` wide, at `opacity` (opaque for `None`).
    pub fn polyline(&mut self, points: &[(f64, f64)], colour: &str, width: f64, opacity: Option<f64>) {
        let points: Vec<String> = points.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
        let opacity = opacity.map_or(String::new(), |o| format!(r#" stroke-opacity="{o}""#));
        let _ = writeln!(
            self.svg,
            r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="{width}"{opacity}/>"#,
            points.join(" ")
        );
    }

    /// A dashed straight line from (`x1`, `y1`) to (`x2`, `y2`); `dashes` as SVG
    /// spells them ("4 3").
    pub fn dashed(&mut self, (x1, y1): (f64, f64), (x2, y2): (f64, f64), colour: &str, dashes: &str) {
        let _ = writeln!(
            self.svg,
            r#"<line x1="{x1:.1}" y1="{y1:.1}" x2="{x2:.1}" y2="{y2:.1}" stroke="{colour}" stroke-dasharray="{dashes}"/>"#
        );
    }

    /// A filled box, with a tooltip where `tip` is given.
    pub fn rect(&mut self, (x, y): (f64, f64), (width, height): (f64, f64), colour: &str, tip: Option<&str>) {
        let shape = format!(r#"<rect x="{x:.1}" y="{y:.1}" width="{width:.1}" height="{height:.1}" fill="{colour}""#);
        let _ = match tip {
            Some(tip) => writeln!(self.svg, "{shape}><title>{tip}</title></rect>"),
            None => writeln!(self.svg, "{shape}/>"),
        };
    }

    /// A dot of `radius` at (`x`, `y`).
    pub fn dot(&mut self, x: f64, y: f64, radius: f64, colour: &str) {
        let _ = writeln!(self.svg, r#"<circle cx="{x:.1}" cy="{y:.1}" r="{radius}" fill="{colour}"/>"#);
    }

    /// A legend entry: a swatch of `colour` at (`x`, `y`) and `label` beside it.
    pub fn legend(&mut self, x: f64, y: f64, colour: &str, label: &str) {
        self.rect((x, y), (12.0, 12.0), colour, None);
        self.text(x + 16.0, y + 11.0, Anchor::Start, label);
    }

    /// The finished document.
    pub fn finish(mut self) -> String {
        self.svg.push_str("</svg>\n");
        self.svg
    }
}

/// A tick label: whole numbers as such, others with one decimal.
pub fn tick(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 { format!("{v:.0}") } else { format!("{v:.1}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_holds_its_title_and_marks_and_closes() {
        let mut page = Canvas::new(200.0, 100.0, "latency");
        page.axes(10.0, 10.0, 190.0, 90.0);
        page.dot(50.0, 50.0, 2.0, PALETTE[0]);
        page.rect((1.0, 2.0), (3.0, 4.0), "red", Some("decode 1.00 ms"));
        let svg = page.finish();
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"), "{svg}");
        assert!(svg.contains(">latency</text>") && svg.contains("<title>decode 1.00 ms</title>"), "{svg}");
        assert_eq!(svg.matches("<polyline").count(), 1, "{svg}");
        assert_eq!((tick(3.0), tick(2.5)), ("3".to_string(), "2.5".to_string()));
    }
}
