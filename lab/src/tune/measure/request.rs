//! What a measuring process is asked to measure, and the command line that asks it.

use std::ffi::OsString;
use std::path::PathBuf;

use crate::tune::{Objective, ServingSetting};

/// The command that starts a measuring process: a program and the arguments that
/// come before a request's flags (for the `modelless` command line, its own path
/// and the hidden `tune-measure` subcommand).
#[derive(Clone, Debug, PartialEq)]
pub struct MeasureCommand {
    /// The program. Found once: a rebuild replacing the file mid-run leaves a running
    /// process's own path dangling.
    pub program: PathBuf,
    /// Its arguments before the request's flags.
    pub args: Vec<OsString>,
}

/// One setting of one variant to load, warm up and measure slice by slice.
#[derive(Clone, Debug, PartialEq)]
pub struct MeasureRequest {
    /// The runtime's TOML config.
    pub config: PathBuf,
    /// The task.
    pub task: String,
    /// The variant measured; the config's other tasks and variants are left out.
    pub variant: String,
    /// The setting it is served with.
    pub setting: ServingSetting,
    /// What is measured, under what load.
    pub objective: Objective,
    /// Seconds of load before the first slice, not measured.
    pub warmup_seconds: u32,
    /// Photo-like JPEGs of these sizes (`640x480,…`) for tasks that take images.
    pub image_sizes: String,
    /// Measure the variant's sessions alone instead (closed-loop objectives only).
    pub model_alone: bool,
}

impl MeasureRequest {
    /// The flags that say it after a [`MeasureCommand`]: `--config`, `--task`,
    /// `--variant`, `--setting` (JSON), `--warmup-seconds`, `--image-sizes`, the
    /// objective's ([`Objective::args`]) and `--model-alone`.
    pub fn args(&self) -> Result<Vec<OsString>, serde_json::Error> {
        let setting = serde_json::to_string(&self.setting)?;
        let mut args: Vec<OsString> = vec!["--config".into(), self.config.clone().into_os_string()];
        let flags = [
            ("--task", self.task.clone()),
            ("--variant", self.variant.clone()),
            ("--setting", setting),
            ("--warmup-seconds", self.warmup_seconds.to_string()),
            ("--image-sizes", self.image_sizes.clone()),
        ];
        args.extend(flags.into_iter().flat_map(|(flag, value)| [flag.into(), value.into()]));
        args.extend(self.objective.args().into_iter().map(OsString::from));
        if self.model_alone {
            args.push("--model-alone".into());
        }
        Ok(args)
    }
}
