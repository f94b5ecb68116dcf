//! What went wrong serving a call, and how each protocol says it: a gRPC status code
//! or an HTTP status, with the message in the body.

use std::time::Duration;

use crate::error::Error;

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
    /// The model is not ready, or the server is shutting down.
    Unavailable,
    /// A repository path outside the repository root.
    PermissionDenied,
    /// No variant can meet what the request asks for.
    FailedPrecondition,
    /// The model failed.
    Internal,
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
        let message = crate::panic_message(panic);
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
        match self.code {
            Code::NotFound => 404,
            Code::InvalidArgument => 400,
            Code::ResourceExhausted => 429,
            Code::OutOfRange => 413,
            Code::DeadlineExceeded => 504,
            Code::Unavailable => 503,
            Code::PermissionDenied => 403,
            Code::FailedPrecondition => 412,
            Code::Internal => 500,
        }
    }
}

impl From<Error> for ServeError {
    fn from(error: Error) -> Self {
        let code = match &error {
            Error::UnknownModel(_) | Error::UnknownTask(_) | Error::UnknownVariant { .. } => Code::NotFound,
            Error::InvalidInput { .. } | Error::Config(_) => Code::InvalidArgument,
            Error::RequestTooLarge { .. } => Code::OutOfRange,
            Error::Overloaded { .. } | Error::WouldMissDeadline { .. } => Code::ResourceExhausted,
            Error::DeadlineExceeded { .. } => Code::DeadlineExceeded,
            Error::NotReady { .. } | Error::ShuttingDown => Code::Unavailable,
            Error::NoVariantMeetsSlo { .. } | Error::DoesNotFitTask(_) => Code::FailedPrecondition,
            // Loading a model that is loaded already is no failure to a repository
            // client; the repository answers it before this mapping is reached.
            Error::AlreadyLoaded(_) => Code::InvalidArgument,
            Error::Load { .. } | Error::Backend { .. } => Code::Internal,
        };
        let retry_after = match &error {
            Error::WouldMissDeadline { retry_after, .. } => Some(*retry_after),
            _ => None,
        };
        ServeError { retry_after, ..ServeError::new(code, error.to_string()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
