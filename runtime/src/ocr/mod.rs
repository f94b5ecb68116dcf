//! Optical character recognition as PP-OCR does it, the glue of the `read-text`
//! pipeline: a text detector's probability map becomes boxes ([`detect`]), each box a
//! straightened line ([`lines`]) for the direction classifier and the recogniser, whose
//! per-step probabilities become text ([`ctc`]). Pure functions on pixels and tensors;
//! the models run as tasks of their own.
//!
//! Needs feature `ocr` (which brings `images`).

pub mod ctc;
pub mod detect;
pub mod geometry;
pub mod lines;
