//! What a search for the ONNX Runtime library tried, for the error that says where
//! it looked and how to fix it.

use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

/// The fix an application's caller is told: what it sets in its own code or
/// environment, since an app has neither the CLI nor a checkout's setup scripts.
const FIX_FOR_AN_APP: &str = "set ORT_DYLIB_PATH to a libonnxruntime (ONNX Runtime 1.31), or name it with \
                              `OrtEnvironmentConfig::with_library_path` (a config's `[onnxruntime] \
                              library_path`); `pip install onnxruntime==1.31.1` in the active Python \
                              environment provides one";

/// The fix the `modelless` command line's user is told.
const FIX_FOR_THE_CLI: &str = "run `modelless setup` (puts ONNX Runtime in the per-user directory), or \
                               `pip install onnxruntime` in the active Python environment, or set \
                               ORT_DYLIB_PATH to a libonnxruntime";

/// Whether this process is the `modelless` command line, whose users `modelless setup`
/// serves; an application's are told what to set instead.
static THE_CLI: AtomicBool = AtomicBool::new(false);

/// Marks this process as the `modelless` command line: a missing library's error then
/// advises `modelless setup` first.
pub fn advise_as_the_cli() {
    THE_CLI.store(true, Ordering::Relaxed);
}

/// The fix for this process's caller.
pub fn fix() -> &'static str {
    fix_for(THE_CLI.load(Ordering::Relaxed))
}

/// The fix for the command line's user, or for an application's.
pub(crate) fn fix_for(cli: bool) -> &'static str {
    if cli { FIX_FOR_THE_CLI } else { FIX_FOR_AN_APP }
}

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
