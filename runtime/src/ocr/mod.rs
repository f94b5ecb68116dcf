//! Optical character recognition as PP-OCR does it, the glue of the `read-text`
//! pipeline: a text detector's probability map becomes boxes ([`detect`]), each box a
//! straightened line ([`lines`]) for the direction classifier and the recogniser, whose
//! per-step probabilities become text ([`ctc`]); [`ReadText`] is the pipeline glue
//! that chains them around the three models, which run as tasks of their own;
//! [`FindLines`] and [`ReadLine`] are its two halves, for stages in different servers.
//!
//! Needs feature `ocr` (which brings `images`).

pub mod ctc;
pub mod detect;
pub mod geometry;
pub mod lines;
pub mod read_text;
pub mod split;
pub mod unclip;

pub use read_text::{Line, LinePadding, ReadText, ReadTextConfig};
pub use split::{FindLines, ReadLine};
