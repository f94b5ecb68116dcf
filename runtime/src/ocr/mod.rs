//! Optical character recognition as PP-OCR does it, the glue of the `read-text`
//! pipeline: a text detector's probability map becomes boxes (`detect`), each box a
//! straightened line (`lines`) for the direction classifier and the recogniser, whose
//! per-step probabilities become text (`ctc`); [`ReadText`] is the pipeline glue
//! that chains them around the three models, which run as tasks of their own;
//! [`FindLines`] and [`ReadLine`] are its two halves, for stages in different servers.
//!
//! Needs feature `ocr` (which brings `images`).

pub(crate) mod ctc;
pub(crate) mod detect;
pub(crate) mod geometry;
pub(crate) mod lines;
pub(crate) mod read_text;
pub(crate) mod split;
pub(crate) mod unclip;

pub use ctc::Alphabet;
pub use detect::DbConfig;
pub use read_text::{Line, LinePadding, ReadText, ReadTextConfig, recognition_inputs};
pub use split::{FindLines, ReadLine};
