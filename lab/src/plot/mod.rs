//! The lab's pictures, as SVG: the shared drawing ([`Canvas`]) and the charts that
//! take plain data. The charts of a load run and of a search live with their data
//! (`load::plot`, `tune::plot`) and draw through the same canvas.

mod canvas;
mod scatter;

pub use canvas::{Anchor, Canvas, PALETTE, tick};
pub use scatter::{Series, scatter_with_lines};
