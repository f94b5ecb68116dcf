//! The copy itself: `scripts/models/make_variant.py` (built into the binary) run by the
//! project's Python, which has ONNX Runtime's converters.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::MakeError;

/// The converter, carried in the binary so that it runs from any folder.
const SCRIPT: &str = include_str!("../../../scripts/models/make_variant.py");

/// What a copy is made in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyKind {
    /// Half precision, inputs and outputs kept in fp32: the copy a GPU serves fastest.
    Fp16,
    /// Still float32, the element-wise steps around the convolutions (scalar scales
    /// and shifts, written-out hard-swish) taken into them: the same outputs up to
    /// float rounding, fewer passes over the activations.
    Folded,
    /// Weights int8 per channel, activations quantised at run time.
    Int8Dynamic,
    /// QDQ int8, activations calibrated on the task's own inputs: the copy a CPU
    /// with int8 instructions serves fastest.
    Int8Static,
}

impl CopyKind {
    /// As the converter and the config name it.
    pub fn name(self) -> &'static str {
        match self {
            CopyKind::Fp16 => "fp16",
            CopyKind::Folded => "folded",
            CopyKind::Int8Dynamic => "int8-dynamic",
            CopyKind::Int8Static => "int8-static",
        }
    }

    /// Whether the converter takes inputs of the task: a static copy is calibrated on
    /// them, a dynamic or folded one timed on them (its inputs' sides may be fixed by
    /// the model, not open as they look).
    pub fn takes_inputs(self) -> bool {
        matches!(self, CopyKind::Int8Static | CopyKind::Int8Dynamic | CopyKind::Folded)
    }
}

/// The Python to convert with: `MODELLESS_PYTHON`, else the project's venv
/// (`.modelless/venv`, from the working folder up), else `python3`.
pub fn find_python() -> PathBuf {
    if let Some(python) = std::env::var_os("MODELLESS_PYTHON") {
        return python.into();
    }
    let venv = std::env::current_dir()
        .ok()
        .and_then(|cwd| cwd.ancestors().map(|d| d.join(".modelless/venv/bin/python")).find(|p| p.is_file()));
    venv.unwrap_or_else(|| "python3".into())
}

/// What the converter says on its error stream before a line of progress.
const PROGRESS: &str = "progress: ";

/// Makes the `kind` copy of `source` at `copy` with `python`, calibrated on the
/// inputs in `calibration` where the kind is; `on_progress` sees each step the
/// converter reports. Returns the converter's report (one JSON object: what it
/// converted, what it kept in float and why, how fast it ran).
pub fn make_copy(
    python: &Path,
    kind: CopyKind,
    source: &Path,
    copy: &Path,
    calibration: Option<&Path>,
    on_progress: &mut dyn FnMut(&str),
) -> Result<serde_json::Value, MakeError> {
    let failed = |reason: String| MakeError::Converter { program: python.into(), reason };
    let mut child = Command::new(python)
        .arg("-")
        .arg(kind.name())
        .arg(source)
        .arg(copy)
        .args(calibration)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| failed(format!("cannot start it: {e}")))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(SCRIPT.as_bytes()).map_err(|e| failed(format!("cannot hand it the script: {e}")))?;
    }
    // Its report on stdout is one line, so reading the error stream first cannot
    // leave it blocked on a full pipe.
    let mut last = String::from("no message");
    if let Some(stderr) = child.stderr.take() {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            match line.strip_prefix(PROGRESS) {
                Some(step) => on_progress(step),
                None if !line.trim().is_empty() => last = line,
                None => {}
            }
        }
    }
    let output = child.wait_with_output().map_err(|e| failed(e.to_string()))?;
    if !output.status.success() {
        return Err(failed(format!("{}: {last}", output.status)));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    serde_json::from_str(stdout.trim()).map_err(|e| failed(format!("its report `{}`: {e}", stdout.trim())))
}
