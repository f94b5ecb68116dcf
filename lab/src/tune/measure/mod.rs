//! Measuring one setting: in a measuring process of its own (`modelless
//! tune-measure` for the command line), which loads the setting, warms it up and
//! measures slices on request over its standard input and output.
//!
//! - [`Measurer`]: the tuning side, which starts measuring processes from the
//!   [`MeasureCommand`] it is given and asks them for slices, alone or in pairs with
//!   the reference's;
//! - [`serve_measurements`]: the measuring process's side, which serves one
//!   [`MeasureRequest`];
//! - [`Measured`]: what a slice measured, the line of JSON between them.

mod child;
mod measured;
mod measurer;
mod request;
mod slices;

pub use child::serve_measurements;
pub use measured::Measured;
pub use measurer::{Bench, MeasureSetup, Measurer};
pub use request::{MeasureCommand, MeasureRequest};
pub use slices::{Failed, Pair, SLICE_SECONDS, SliceChild, Slicer, measure_pairs};
