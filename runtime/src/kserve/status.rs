//! What went wrong serving a call, and how each protocol says it: a gRPC status code
//! or an HTTP status, with the message in the body.

use std::time::Duration;

use crate::error::{Error, ErrorKind};

/// The protocol's outcome classes, named as gRPC names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Code {
    /// Unknown model, task, variant or version.
    NotFound,
    /// Wrong input names, shapes, dtypes, parameters or configuration.
    InvalidArgument,
    /// The queue is full, or would answer the request after its deadline.
    ResourceExhausted,
    /// A message, tensor or batch larger than the server's limit (named in the message).
    OutOfRange,
    /// The request's deadline passed before it ran.
    DeadlineExceeded,
    /// The model is not ready, the server is shutting down, or it could not start a
    /// thread: a retry later may be served.
    Unavailable,
    /// A call that needs a credential came without the right one (repository load
    /// and unload under explicit model control).
    Unauthenticated,
    /// A repository path outside the repository root.
    PermissionDenied,
    /// No variant can meet what the request asks for, or the call needs another
    /// state first (the active variant cannot be unloaded).
    FailedPrecondition,
    /// The server failed: the model, a file, a policy.
    Internal,
}

impl Code {
    /// The class of a failure of `kind`: the one table from the runtime's errors to
    /// the protocols' codes. The caller's mistakes are 4xx; the server's own faults
    /// are `INTERNAL`/500 or `UNAVAILABLE`/503, never `INVALID_ARGUMENT`/400.
    ///
    /// | [`ErrorKind`]       | [`Code`]             | gRPC code (number)      | HTTP |
    /// |---------------------|----------------------|-------------------------|------|
    /// | `UnknownModel`      | `NotFound`           | `NOT_FOUND` (5)         | 404  |
    /// | `UnknownTask`       | `NotFound`           | `NOT_FOUND` (5)         | 404  |
    /// | `UnknownVariant`    | `NotFound`           | `NOT_FOUND` (5)         | 404  |
    /// | `InvalidInput`      | `InvalidArgument`    | `INVALID_ARGUMENT` (3)  | 400  |
    /// | `Config`            | `InvalidArgument`    | `INVALID_ARGUMENT` (3)  | 400  |
    /// | `AlreadyLoaded`     | `InvalidArgument`    | `INVALID_ARGUMENT` (3)  | 400  |
    /// | `RequestTooLarge`   | `OutOfRange`         | `OUT_OF_RANGE` (11)     | 413  |
    /// | `Overloaded`        | `ResourceExhausted`  | `RESOURCE_EXHAUSTED` (8)| 429  |
    /// | `WouldMissDeadline` | `ResourceExhausted`  | `RESOURCE_EXHAUSTED` (8)| 429  |
    /// | `DeadlineExceeded`  | `DeadlineExceeded`   | `DEADLINE_EXCEEDED` (4) | 504  |
    /// | `NoVariantMeetsSlo` | `FailedPrecondition` | `FAILED_PRECONDITION` (9)| 412 |
    /// | `DoesNotFitTask`    | `FailedPrecondition` | `FAILED_PRECONDITION` (9)| 412 |
    /// | `Precondition`      | `FailedPrecondition` | `FAILED_PRECONDITION` (9)| 412 |
    /// | `NotReady`          | `Unavailable`        | `UNAVAILABLE` (14)      | 503  |
    /// | `ShuttingDown`      | `Unavailable`        | `UNAVAILABLE` (14)      | 503  |
    /// | `ThreadStart`       | `Unavailable`        | `UNAVAILABLE` (14)      | 503  |
    /// | `Load`              | `Internal`           | `INTERNAL` (13)         | 500  |
    /// | `Backend`           | `Internal`           | `INTERNAL` (13)         | 500  |
    /// | `Io`                | `Internal`           | `INTERNAL` (13)         | 500  |
    /// | `Policy`            | `Internal`           | `INTERNAL` (13)         | 500  |
    ///
    /// `AlreadyLoaded` reaches no repository client: loading a model that is loaded
    /// already is no failure there, and the repository answers it before this table.
    /// `PermissionDenied` (403) is the repository's own, for a path outside its root.
    pub fn of(kind: ErrorKind) -> Code {
        match kind {
            ErrorKind::UnknownModel | ErrorKind::UnknownTask | ErrorKind::UnknownVariant => Code::NotFound,
            ErrorKind::InvalidInput | ErrorKind::Config | ErrorKind::AlreadyLoaded => Code::InvalidArgument,
            ErrorKind::RequestTooLarge => Code::OutOfRange,
            ErrorKind::Overloaded | ErrorKind::WouldMissDeadline => Code::ResourceExhausted,
            ErrorKind::DeadlineExceeded => Code::DeadlineExceeded,
            ErrorKind::NoVariantMeetsSlo | ErrorKind::DoesNotFitTask | ErrorKind::Precondition => {
                Code::FailedPrecondition
            }
            ErrorKind::NotReady | ErrorKind::ShuttingDown | ErrorKind::ThreadStart | ErrorKind::Fetch => {
                Code::Unavailable
            }
            ErrorKind::Load | ErrorKind::Backend | ErrorKind::Io | ErrorKind::Policy => Code::Internal,
        }
    }

    /// The gRPC status code of this class.
    pub fn grpc(self) -> tonic::Code {
        match self {
            Code::NotFound => tonic::Code::NotFound,
            Code::InvalidArgument => tonic::Code::InvalidArgument,
            Code::ResourceExhausted => tonic::Code::ResourceExhausted,
            Code::OutOfRange => tonic::Code::OutOfRange,
            Code::DeadlineExceeded => tonic::Code::DeadlineExceeded,
            Code::Unavailable => tonic::Code::Unavailable,
            Code::Unauthenticated => tonic::Code::Unauthenticated,
            Code::PermissionDenied => tonic::Code::PermissionDenied,
            Code::FailedPrecondition => tonic::Code::FailedPrecondition,
            Code::Internal => tonic::Code::Internal,
        }
    }

    /// The HTTP status of this class.
    pub fn http_status(self) -> u16 {
        match self {
            Code::NotFound => 404,
            Code::InvalidArgument => 400,
            Code::ResourceExhausted => 429,
            Code::OutOfRange => 413,
            Code::DeadlineExceeded => 504,
            Code::Unavailable => 503,
            Code::Unauthenticated => 401,
            Code::PermissionDenied => 403,
            Code::FailedPrecondition => 412,
            Code::Internal => 500,
        }
    }
}

/// A failed call: its class and a message for the caller.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ServeError {
    /// Its class.
    pub code: Code,
    /// What happened, for the caller.
    pub message: String,
    /// When a retry is predicted to be served in time, where the server predicts it:
    /// HTTP's `Retry-After` and gRPC's `grpc-retry-pushback-ms` carry it.
    pub retry_after: Option<Duration>,
}

impl ServeError {
    /// An error of class `code`.
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        ServeError { code, message: message.into(), retry_after: None }
    }

    /// A request over one of the server's limits.
    pub fn too_large(message: impl Into<String>) -> Self {
        ServeError::new(Code::OutOfRange, message)
    }

    /// The answer to a request whose handling panicked at `site`: logged, counted,
    /// and reported as INTERNAL with the panic's message.
    pub fn from_panic(site: &str, panic: &(dyn std::any::Any + Send)) -> Self {
        let message = crate::error::panic_message(panic);
        tracing::error!(site, panic = %message, "a request's handling panicked; it is answered INTERNAL");
        crate::metrics::serving_metrics().request_panicked(site);
        ServeError::new(Code::Internal, format!("the server failed handling this request: {message}"))
    }

    /// Bad input from the caller.
    pub fn invalid(message: impl Into<String>) -> Self {
        ServeError::new(Code::InvalidArgument, message)
    }

    /// The code's name in metrics' labels.
    pub fn code_label(&self) -> &'static str {
        match self.code {
            Code::NotFound => "not_found",
            Code::InvalidArgument => "invalid_argument",
            Code::ResourceExhausted => "resource_exhausted",
            Code::OutOfRange => "out_of_range",
            Code::DeadlineExceeded => "deadline_exceeded",
            Code::Unavailable => "unavailable",
            Code::Unauthenticated => "unauthenticated",
            Code::PermissionDenied => "permission_denied",
            Code::FailedPrecondition => "failed_precondition",
            Code::Internal => "internal",
        }
    }

    /// Counts this error as `endpoint`'s refusal of a request before it reached a model.
    pub fn counted_by(self, endpoint: &str) -> Self {
        crate::metrics::serving_metrics().endpoint_refused(endpoint, self.code_label());
        self
    }

    /// The HTTP status of this error.
    pub fn http_status(&self) -> u16 {
        self.code.http_status()
    }
}

impl From<Error> for ServeError {
    /// The error's class by [`Code::of`] its kind, its message as it displays.
    fn from(error: Error) -> Self {
        let code = Code::of(error.kind());
        let retry_after = match &error {
            Error::WouldMissDeadline { retry_after, .. } => Some(*retry_after),
            _ => None,
        };
        ServeError { retry_after, ..ServeError::new(code, error.to_string()) }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::error::BackendError;
    use crate::policy::PolicyError;

    /// Whose fault a failure of each kind is.
    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Fault {
        /// The request or call was wrong: fixing it is the caller's to do.
        Client,
        /// The server has no room for it now, or no time left for it.
        Capacity,
        /// The server failed.
        Server,
    }

    /// Each kind's fault, gRPC code and HTTP status, written out again apart from
    /// the table. No `_` arm: a new kind does not build until it is listed here.
    fn expected(kind: ErrorKind) -> (Fault, tonic::Code, u16) {
        use tonic::Code as G;
        match kind {
            ErrorKind::UnknownModel | ErrorKind::UnknownTask | ErrorKind::UnknownVariant => {
                (Fault::Client, G::NotFound, 404)
            }
            ErrorKind::InvalidInput | ErrorKind::Config | ErrorKind::AlreadyLoaded => {
                (Fault::Client, G::InvalidArgument, 400)
            }
            ErrorKind::RequestTooLarge => (Fault::Client, G::OutOfRange, 413),
            ErrorKind::NoVariantMeetsSlo | ErrorKind::DoesNotFitTask | ErrorKind::Precondition => {
                (Fault::Client, G::FailedPrecondition, 412)
            }
            ErrorKind::Overloaded | ErrorKind::WouldMissDeadline => (Fault::Capacity, G::ResourceExhausted, 429),
            ErrorKind::DeadlineExceeded => (Fault::Capacity, G::DeadlineExceeded, 504),
            ErrorKind::NotReady | ErrorKind::ShuttingDown | ErrorKind::ThreadStart | ErrorKind::Fetch => {
                (Fault::Server, G::Unavailable, 503)
            }
            ErrorKind::Load | ErrorKind::Backend | ErrorKind::Io | ErrorKind::Policy => {
                (Fault::Server, G::Internal, 500)
            }
        }
    }

    /// An error of `kind`. No `_` arm either.
    fn error_of(kind: ErrorKind) -> Error {
        let model = || "m".to_string();
        let io = || Arc::new(std::io::Error::other("disk on fire"));
        let backend = || Arc::new(BackendError::Injected("broken".into()));
        match kind {
            ErrorKind::UnknownModel => Error::UnknownModel(model()),
            ErrorKind::InvalidInput => Error::InvalidInput { model: model(), reason: "r".into() },
            ErrorKind::RequestTooLarge => Error::RequestTooLarge { model: model(), rows: 9, max_batch_size: 8 },
            ErrorKind::Overloaded => Error::Overloaded { model: model(), max_queue_size: 1 },
            ErrorKind::WouldMissDeadline => Error::WouldMissDeadline {
                model: model(),
                predicted: Duration::from_millis(2),
                left: Duration::from_millis(1),
                retry_after: Duration::from_millis(1),
            },
            ErrorKind::DeadlineExceeded => Error::DeadlineExceeded { model: model() },
            ErrorKind::Load => Error::Load { model: model(), source: backend() },
            ErrorKind::Backend => Error::Backend { model: model(), source: backend() },
            ErrorKind::DoesNotFitTask => Error::DoesNotFitTask(Arc::new(crate::signature::SignatureMismatch {
                task: "t".into(),
                variant: "v".into(),
                tensor: "input `x`".into(),
                reason: "sizes differ".into(),
                task_signature: String::new(),
                variant_signature: String::new(),
            })),
            ErrorKind::UnknownTask => Error::UnknownTask("t".into()),
            ErrorKind::UnknownVariant => Error::UnknownVariant { task: "t".into(), variant: "v".into() },
            ErrorKind::NoVariantMeetsSlo => {
                Error::NoVariantMeetsSlo { task: "t".into(), min_accuracy: 90.0, available: Vec::new() }
            }
            ErrorKind::NotReady => Error::NotReady { model: model() },
            ErrorKind::AlreadyLoaded => Error::AlreadyLoaded(model()),
            ErrorKind::Config => Error::Config("max_batch_size must be at least 1".into()),
            ErrorKind::Precondition => Error::Precondition("`v` is active".into()),
            ErrorKind::Io => Error::Io { operation: "read".into(), path: "/m.onnx".into(), source: io() },
            ErrorKind::ThreadStart => Error::ThreadStart { what: "the control loop".into(), source: io() },
            ErrorKind::Policy => Error::policy("reload", PolicyError::OutOfFuel),
            ErrorKind::Fetch => Error::fetch("oci://r/p:v1", crate::FetchError::Unreachable("refused".into())),
            ErrorKind::ShuttingDown => Error::ShuttingDown,
        }
    }

    #[test]
    fn every_kind_maps_to_its_code_and_a_server_fault_is_never_the_callers() {
        for &kind in ErrorKind::ALL {
            let (fault, grpc, http) = expected(kind);
            let code = Code::of(kind);
            assert_eq!((code.grpc(), code.http_status()), (grpc, http), "{kind:?}");
            match fault {
                Fault::Server => assert!(
                    matches!(code, Code::Internal | Code::Unavailable) && matches!(http, 500 | 503),
                    "{kind:?} is the server's fault, answered {code:?}/{http}"
                ),
                Fault::Client => {
                    assert!((400..500).contains(&http) && http != 429, "{kind:?} is the caller's, answered {http}")
                }
                Fault::Capacity => assert!(matches!(http, 429 | 504), "{kind:?} answered {http}"),
            }

            let error = error_of(kind);
            assert_eq!(error.kind(), kind, "{error}");
            let served = ServeError::from(error.clone());
            assert_eq!((served.code, served.http_status()), (code, http), "{error}");
            assert_eq!(tonic::Status::from(served.clone()).code(), grpc, "{error}");
            assert_eq!(served.message, error.to_string());
        }
    }

    #[test]
    fn kinds_have_the_labels_metrics_had_and_each_its_own() {
        let labels: Vec<&str> = ErrorKind::ALL.iter().map(|k| k.as_str()).collect();
        for old in [
            "invalid_input",
            "request_too_large",
            "queue_full",
            "would_miss_deadline",
            "expired",
            "backend_failed",
            "does_not_fit_task",
            "not_ready",
            "shutting_down",
            "unknown_model",
            "load_failed",
            "unknown_task",
            "unknown_variant",
            "no_variant_meets_slo",
            "already_loaded",
            "config",
        ] {
            assert!(labels.contains(&old), "{old}");
        }
        let mut unique = labels.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), labels.len(), "{labels:?}");
    }

    #[test]
    fn a_server_fault_keeps_its_source() {
        use std::error::Error as _;
        let error = error_of(ErrorKind::Io);
        let source = error.source().and_then(|s| s.downcast_ref::<Arc<std::io::Error>>());
        assert_eq!(source.map(|s| s.kind()), Some(std::io::ErrorKind::Other), "{error}");
        let error = error_of(ErrorKind::Policy);
        let source = error.source().and_then(|s| s.downcast_ref::<PolicyError>());
        assert_eq!(source, Some(&PolicyError::OutOfFuel), "{error}");
    }

    #[test]
    fn runtime_errors_map_to_the_codes_clients_expect() {
        let cases = [
            (Error::UnknownModel("m".into()), Code::NotFound, 404),
            (Error::InvalidInput { model: "m".into(), reason: "r".into() }, Code::InvalidArgument, 400),
            (Error::Overloaded { model: "m".into(), max_queue_size: 1 }, Code::ResourceExhausted, 429),
            (Error::DeadlineExceeded { model: "m".into() }, Code::DeadlineExceeded, 504),
            (Error::NotReady { model: "m".into() }, Code::Unavailable, 503),
        ];
        for (error, code, http) in cases {
            let served = ServeError::from(error.clone());
            assert_eq!((served.code, served.http_status()), (code, http), "{error}");
            assert_eq!(served.message, error.to_string());
            assert_eq!(served.retry_after, None);
        }
        let late = Error::WouldMissDeadline {
            model: "m".into(),
            predicted: Duration::from_millis(180),
            left: Duration::from_millis(150),
            retry_after: Duration::from_millis(30),
        };
        let served = ServeError::from(late);
        assert_eq!((served.code, served.http_status()), (Code::ResourceExhausted, 429));
        assert_eq!(served.retry_after, Some(Duration::from_millis(30)));
        assert!(served.message.contains("would answer in 180.0 ms"), "{}", served.message);
    }
}
