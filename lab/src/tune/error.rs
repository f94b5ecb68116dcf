//! What goes wrong while tuning: reading the config and the model, measuring a
//! setting in its own process, replaying stored searches, writing the best setting.

use std::path::PathBuf;

use modelless::backend::BackendError;

use crate::load::LoadError;

/// An error of tuning. A measurement that fails while a search runs is not one: it
/// is recorded in the search (the setting failed, not the tuning) as a string.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TuneError {
    /// A file could not be read.
    #[error("reading {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file could not be written (or put in place).
    #[error("writing {}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The measuring process could not read its requests or write its answers.
    #[error("the measurement's standard input or output")]
    Pipe(#[source] std::io::Error),
    /// The threads that drive a measurement's load could not start.
    #[error("starting the load's threads")]
    Threads(#[source] std::io::Error),
    /// A measurement could not be said as JSON.
    #[error("a measurement as JSON")]
    Json(#[source] serde_json::Error),
    /// A config file is not TOML.
    #[error("the config is not TOML")]
    Toml(#[source] toml_edit::TomlError),
    /// The config has no task of that name.
    #[error("no task `{0}`")]
    UnknownTask(String),
    /// The task has no variant of that name.
    #[error("task `{task}` has no variant `{variant}`")]
    UnknownVariant {
        /// The task.
        task: String,
        /// The variant asked for.
        variant: String,
    },
    /// The config's text lacks what `--write` edits, or holds it in another shape.
    #[error("{0}")]
    Config(String),
    /// A config written by `--write` would not read back: nothing was written.
    #[error("the edited config does not read back")]
    EditedConfig(#[source] modelless::Error),
    /// The runtime refused: a config that does not read, a runtime that does not build.
    #[error(transparent)]
    Runtime(#[from] modelless::Error),
    /// A measurement's load (its spec, images or run) failed.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A session of the variant could not be loaded.
    #[error("loading `{variant}`")]
    LoadVariant {
        /// The variant.
        variant: String,
        /// Why.
        #[source]
        source: BackendError,
    },
    /// A session failed while it ran a batch.
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// A measurement could not be taken.
    #[error("{0}")]
    Measurement(String),
    /// The measuring process was asked for a slice in words it does not know.
    #[error("a slice's seconds, not `{line}`")]
    SliceRequest {
        /// What it was asked.
        line: String,
        /// Why it is not a number of seconds.
        #[source]
        source: std::num::ParseIntError,
    },
    /// What was asked cannot be done (a replay of a rate, a model alone in an open
    /// loop, a slice shorter than a second).
    #[error("{0}")]
    Invalid(String),
    /// A replay found no stored measurement of the variant and objective.
    #[error("{what}: nothing stored to replay against: run `modelless tune` with this objective first")]
    NothingToReplay {
        /// The variant and objective, in words.
        what: String,
    },
}
