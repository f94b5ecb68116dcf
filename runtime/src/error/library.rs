//! What a search for the ONNX Runtime library tried, for the error that says where
//! it looked and how to fix it.

use std::fmt;
use std::path::PathBuf;

/// The error's advice: the one-line fix.
pub const FIX: &str = "run `modelless setup` (puts ONNX Runtime in the per-user directory), or \
                       `pip install onnxruntime` in the active Python environment, or set ORT_DYLIB_PATH \
                       to a libonnxruntime";

/// One place searched, and what was found there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchedPlace {
    /// Which rule of the search order it comes from.
    pub source: &'static str,
    /// The path (or, for the loader, the name) tried.
    pub path: PathBuf,
    /// Why it was not taken.
    pub outcome: String,
}

impl fmt::Display for SearchedPlace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} ({})", self.source, self.path.display(), self.outcome)
    }
}
