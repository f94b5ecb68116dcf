//! Errors of the runtime: [`Error`] reaches callers, [`BackendError`] comes from a
//! model session and is shared (behind `Arc`) by every request it fails, and
//! [`ErrorKind`] names each kind of [`Error`] for metrics, logs and the protocols'
//! status codes.
//!
//! The enums are `#[non_exhaustive]`: a new kind of failure is a new variant, and a
//! `match` on them outside this crate needs a `_` arm.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

mod cause;
mod fetch;
pub(crate) mod library;
mod mismatch;
mod policy;

pub use cause::Cause;
pub use fetch::FetchError;
pub use library::SearchedPlace;
pub use mismatch::SignatureMismatch;
pub use policy::PolicyError;

/// What went wrong inside a backend: loading a model or running a batch.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BackendError {
    /// No ONNX Runtime library was found in any of the places searched.
    #[error(
        "ONNX Runtime library not found; to fix: {fix}\nsearched, in order:\n{}",
        searched.iter().map(|place| format!("  - {place}")).collect::<Vec<_>>().join("\n")
    )]
    LibraryNotFound {
        /// The places tried, in order, and why each was not taken.
        searched: Vec<library::SearchedPlace>,
        /// What to do: for an application, what to set; for the command line, its setup.
        fix: &'static str,
    },
    /// The model file does not exist or cannot be read.
    #[error("cannot read model file {path}: {source}")]
    ModelFile {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// ONNX Runtime refused an operation.
    #[error("ONNX Runtime: {context}: {source}")]
    Ort {
        /// What was being done.
        context: String,
        /// ONNX Runtime's error.
        #[source]
        source: ort::Error,
    },
    /// The variant's device cannot be had: no GPU, no driver, or a backend library
    /// built without it.
    #[error("device {device} is not available: {reason}")]
    DeviceUnavailable {
        /// The device asked for, as configs write it.
        device: String,
        /// Why, and what would make it available.
        reason: String,
    },
    /// libtorch refused an operation on a TorchScript module.
    #[error("libtorch: {context}: {source}")]
    Torch {
        /// What was being done.
        context: String,
        /// libtorch's error.
        #[source]
        source: Cause,
    },
    /// The model's format needs a backend this build left out.
    #[error("cannot load {}: this build has no {what} support: build modelless with the `{feature}` feature", path.display())]
    NotBuiltWith {
        /// The backend: `TorchScript`.
        what: &'static str,
        /// The cargo feature that builds it in.
        feature: &'static str,
        /// The model file.
        path: PathBuf,
    },
    /// A model whose file does not say its inputs and outputs (a TorchScript module)
    /// needs them declared in its config.
    #[error("cannot load {}: a TorchScript variant declares its inputs and outputs in its config", path.display())]
    Undeclared {
        /// The model file.
        path: PathBuf,
    },
    /// A tensor made from the backend's buffers has a shape its elements do not fill.
    #[error("{what}: {source}")]
    Shape {
        /// What was being made.
        what: String,
        /// The shape and the elements.
        #[source]
        source: crate::tensor::ShapeError,
    },
    /// The model uses an input or output type modelless does not serve.
    #[error("{what} `{name}` has unsupported type {ty}")]
    UnsupportedType {
        /// "input" or "output".
        what: &'static str,
        /// Its name.
        name: String,
        /// The type as the backend reports it.
        ty: String,
    },
    /// The model answered with something that does not fit the batch it was given.
    #[error("model output does not match its batch: {0}")]
    OutputMismatch(String),
    /// The batch given to the model does not fit its inputs: a tensor is missing, the
    /// inputs disagree on rows or shapes, or no batch can be made for an input.
    /// Inputs are checked on admission, so this is the server's fault, not the
    /// caller's.
    #[error("model inputs do not match the batch: {0}")]
    InputMismatch(String),
    /// The model does not fit the signature of the task it was loaded for.
    #[error("{0}")]
    DoesNotFitTask(Box<SignatureMismatch>),
    /// The backend panicked; the panic was contained and the backend keeps serving.
    #[error("backend panicked: {0}")]
    Panicked(String),
    /// A pipeline's glue cannot read what one of its stages answered: the stage's
    /// model is not what the pipeline's configuration says it is.
    #[error("the {stage} stage answered {what}{}", source.as_ref().map(|s| format!(": {s}")).unwrap_or_default())]
    StageAnswer {
        /// The stage: `detection`, `recognition`, `join`, …
        stage: &'static str,
        /// What it answered, or what could not be made of it.
        what: String,
        /// The error that reading it met, if any.
        #[source]
        source: Option<Cause>,
    },
    /// A failure raised on purpose by a test backend.
    #[error("{0}")]
    Injected(String),
}

impl std::fmt::Debug for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self}")
    }
}

impl Error {
    /// What kind of failure it is, for logs, metrics, summaries and the protocols'
    /// status codes; [`ErrorKind::as_str`] names it.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::UnknownModel(_) => ErrorKind::UnknownModel,
            Error::InvalidInput { .. } => ErrorKind::InvalidInput,
            Error::RequestTooLarge { .. } => ErrorKind::RequestTooLarge,
            Error::Overloaded { .. } => ErrorKind::Overloaded,
            Error::WouldMissDeadline { .. } => ErrorKind::WouldMissDeadline,
            Error::DeadlineExceeded { .. } => ErrorKind::DeadlineExceeded,
            Error::Load { .. } => ErrorKind::Load,
            Error::Backend { .. } => ErrorKind::Backend,
            Error::DoesNotFitTask(_) => ErrorKind::DoesNotFitTask,
            Error::UnknownTask(_) => ErrorKind::UnknownTask,
            Error::UnknownVariant { .. } => ErrorKind::UnknownVariant,
            Error::NoVariantMeetsSlo { .. } => ErrorKind::NoVariantMeetsSlo,
            Error::NotReady { .. } => ErrorKind::NotReady,
            Error::AlreadyLoaded(_) => ErrorKind::AlreadyLoaded,
            Error::Config(_) | Error::ConfigRefused { .. } => ErrorKind::Config,
            Error::Precondition(_) => ErrorKind::Precondition,
            Error::Io { .. } => ErrorKind::Io,
            Error::ThreadStart { .. } => ErrorKind::ThreadStart,
            Error::Policy { .. } => ErrorKind::Policy,
            Error::Fetch { .. } => ErrorKind::Fetch,
            Error::ShuttingDown => ErrorKind::ShuttingDown,
        }
    }

    /// Reading or writing the file at `path` failed while doing `operation` (said as
    /// it follows "cannot": `read`, `record to`, …).
    pub fn io(operation: impl Into<String>, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io { operation: operation.into(), path: path.into(), source: Arc::new(source) }
    }

    /// Starting the thread that does `what` (said as it follows "cannot start":
    /// `the control loop`, `thread modelless-m-load-0`, …) failed.
    pub fn thread_start(what: impl Into<String>, source: std::io::Error) -> Self {
        Error::ThreadStart { what: what.into(), source: Arc::new(source) }
    }

    /// Fetching `reference` failed.
    pub fn fetch(reference: impl std::fmt::Display, cause: FetchError) -> Self {
        Error::Fetch { reference: reference.to_string(), cause }
    }

    /// A policy failed while doing `operation` (`compile`, `reload`, …).
    pub fn policy(operation: impl Into<String>, source: PolicyError) -> Self {
        Error::Policy { operation: operation.into(), source }
    }
}

/// The message a panic carried, for the error that reports it.
pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

/// Declares [`ErrorKind`], its [`ErrorKind::ALL`] and its labels from one list, so
/// that `ALL` cannot miss a kind.
macro_rules! error_kinds {
    ($($(#[$doc:meta])* $kind:ident => $label:literal,)*) => {
        /// What kind of failure an [`Error`] is: one kind for each variant of [`Error`]
        /// but `ConfigRefused`, which is a [`ErrorKind::Config`] as `Config` is. It
        /// is what metrics count failures by ([`ErrorKind::as_str`] is its label), and
        /// what the KServe endpoints map to a gRPC code and an HTTP status (see
        /// `kserve::Code::of`, behind the `grpc` feature).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum ErrorKind {
            $($(#[$doc])* $kind,)*
        }

        impl ErrorKind {
            /// Every kind, in the order they are declared.
            pub const ALL: &'static [ErrorKind] = &[$(ErrorKind::$kind,)*];

            /// The kind's name in metrics' labels, logs and load reports:
            /// `invalid_input`, `queue_full`, `expired`, …
            pub fn as_str(self) -> &'static str {
                match self {
                    $(ErrorKind::$kind => $label,)*
                }
            }
        }
    };
}

error_kinds! {
    /// [`Error::UnknownModel`].
    UnknownModel => "unknown_model",
    /// [`Error::InvalidInput`].
    InvalidInput => "invalid_input",
    /// [`Error::RequestTooLarge`].
    RequestTooLarge => "request_too_large",
    /// [`Error::Overloaded`]: the queue is full.
    Overloaded => "queue_full",
    /// [`Error::WouldMissDeadline`].
    WouldMissDeadline => "would_miss_deadline",
    /// [`Error::DeadlineExceeded`]: the request expired before it ran.
    DeadlineExceeded => "expired",
    /// [`Error::Load`].
    Load => "load_failed",
    /// [`Error::Backend`].
    Backend => "backend_failed",
    /// [`Error::DoesNotFitTask`].
    DoesNotFitTask => "does_not_fit_task",
    /// [`Error::UnknownTask`].
    UnknownTask => "unknown_task",
    /// [`Error::UnknownVariant`].
    UnknownVariant => "unknown_variant",
    /// [`Error::NoVariantMeetsSlo`].
    NoVariantMeetsSlo => "no_variant_meets_slo",
    /// [`Error::NotReady`].
    NotReady => "not_ready",
    /// [`Error::AlreadyLoaded`].
    AlreadyLoaded => "already_loaded",
    /// [`Error::Config`].
    Config => "config",
    /// [`Error::Precondition`].
    Precondition => "precondition",
    /// [`Error::Io`].
    Io => "io",
    /// [`Error::ThreadStart`].
    ThreadStart => "thread_start",
    /// [`Error::Policy`].
    Policy => "policy_failed",
    /// [`Error::Fetch`].
    Fetch => "fetch_failed",
    /// [`Error::ShuttingDown`].
    ShuttingDown => "shutting_down",
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An error a caller of the runtime sees. Cheap to clone: one backend failure reaches
/// every request of the batch it broke. Its `Debug` is its message, so that an
/// application whose `main` returns it prints what went wrong and how to fix it.
#[derive(Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No model of that name is loaded.
    #[error("unknown model `{0}`")]
    UnknownModel(String),
    /// The inputs do not match what the model expects.
    #[error("invalid input for model `{model}`: {reason}")]
    InvalidInput {
        /// The model.
        model: String,
        /// What was expected and what was given.
        reason: String,
    },
    /// The request holds more rows than the model's configured `max_batch_size`. (A
    /// request within it but larger than the batch in force, which a policy or the
    /// device's memory lowered, is split into batches that fit instead.)
    #[error("request of {rows} rows exceeds max_batch_size {max_batch_size} of model `{model}`")]
    RequestTooLarge {
        /// The model.
        model: String,
        /// Rows in the request (its dimension 0).
        rows: usize,
        /// The model's configured largest batch.
        max_batch_size: usize,
    },
    /// The model's queue is full.
    #[error("model `{model}` is overloaded: its queue holds {max_queue_size} requests")]
    Overloaded {
        /// The model.
        model: String,
        /// The queue's bound.
        max_queue_size: usize,
    },
    /// Refused at admission: the work queued ahead of the request, priced by the
    /// model's profiled batch cost, would answer it after its deadline. Nothing ran;
    /// a retry after `retry_after` meets a queue shorter by that much of work.
    #[error(
        "model `{model}` would answer in {:.1} ms, past the request's deadline in {:.1} ms; refused at once (retry after {} ms)",
        predicted.as_secs_f64() * 1e3,
        left.as_secs_f64() * 1e3,
        retry_after.as_millis()
    )]
    WouldMissDeadline {
        /// The model.
        model: String,
        /// When it would have answered, from admission.
        predicted: Duration,
        /// Time left to the deadline at admission.
        left: Duration,
        /// How much later the queue ahead is predicted to have room in time.
        retry_after: Duration,
    },
    /// The request's deadline passed before it could run, or would have passed before
    /// a batch started then could answer it; it was not run.
    #[error("deadline exceeded before model `{model}` could run the request")]
    DeadlineExceeded {
        /// The model.
        model: String,
    },
    /// A model could not be loaded.
    #[error("cannot load model `{model}`: {source}")]
    Load {
        /// The model.
        model: String,
        /// Why.
        #[source]
        source: Arc<BackendError>,
    },
    /// The backend failed while running the batch holding this request.
    #[error("model `{model}` failed: {source}")]
    Backend {
        /// The model.
        model: String,
        /// Why.
        #[source]
        source: Arc<BackendError>,
    },
    /// A variant does not fit its task's signature: it was not loaded, and it is
    /// never routed to nor switched to.
    #[error("{0}")]
    DoesNotFitTask(Arc<SignatureMismatch>),
    /// No task of that name exists.
    #[error("unknown task `{0}`")]
    UnknownTask(String),
    /// The task has no variant of that name.
    #[error("task `{task}` has no variant `{variant}`")]
    UnknownVariant {
        /// The task.
        task: String,
        /// The variant asked for.
        variant: String,
    },
    /// No ready variant of the task is accurate enough for the request.
    #[error(
        "no ready variant of task `{task}` has accuracy {min_accuracy} or more; ready: {}",
        available.iter().map(|(n, a)| format!("{n} ({a})")).collect::<Vec<_>>().join(", ")
    )]
    NoVariantMeetsSlo {
        /// The task.
        task: String,
        /// The accuracy asked for.
        min_accuracy: f64,
        /// Ready variants and their accuracies.
        available: Vec<(String, f64)>,
    },
    /// The model exists but is not loaded, so it cannot serve now.
    #[error("model `{model}` is not ready: load it first")]
    NotReady {
        /// The model or variant.
        model: String,
    },
    /// A model of that name is already loaded.
    #[error("a model named `{0}` is already loaded")]
    AlreadyLoaded(String),
    /// A configuration value is out of range or inconsistent: the settings given
    /// (in a config file, a builder or a repository call's override) must change.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// A configuration could not be read as its format says, or a part of it was
    /// refused by the check of the part's own type: the cause says where and why.
    #[error("invalid configuration: {what}: {source}")]
    ConfigRefused {
        /// What was being read: `TOML`, `task \`classify\`: variant \`a\``.
        what: String,
        /// The parser's or the part's error.
        #[source]
        source: Cause,
    },
    /// The call cannot be done in the state things are in now (the active variant
    /// cannot be unloaded; no policy runs to reload); the message says what to do
    /// first.
    #[error("{0}")]
    Precondition(String),
    /// Reading or writing a file failed.
    #[error("cannot {operation} {}: {source}", path.display())]
    Io {
        /// What was being done, as it follows "cannot": `read`, `record to`, …
        operation: String,
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: Arc<std::io::Error>,
    },
    /// A thread the runtime needs could not be started (the process is out of
    /// threads or memory).
    #[error("cannot start {what}: {source}")]
    ThreadStart {
        /// The thread, as it follows "cannot start".
        what: String,
        /// Why.
        #[source]
        source: Arc<std::io::Error>,
    },
    /// A policy module could not be compiled, reloaded or run.
    #[error("policy {operation}: {source}")]
    Policy {
        /// What was being done: `compile`, `reload`, …
        operation: String,
        /// Why.
        #[source]
        source: PolicyError,
    },
    /// A policy module or a model version could not be had from its registry or URL.
    #[error("cannot fetch {reference}: {cause}")]
    Fetch {
        /// What was asked for: `oci://registry/repository:tag`, a URL.
        reference: String,
        /// Why.
        #[source]
        cause: FetchError,
    },
    /// The model or runtime is shutting down and takes no more requests.
    #[error("shutting down")]
    ShuttingDown,
}
