//! What went wrong serving a call, and how each protocol says it: a gRPC status code
//! or an HTTP status, with the message in the body.

use crate::error::Error;

/// The protocol's outcome classes, named as gRPC names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Code {
    /// Unknown model, task, variant or version.
    NotFound,
    /// Wrong input names, shapes, dtypes, parameters or configuration.
    InvalidArgument,
    /// The queue is full.
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
}

impl ServeError {
    /// An error of class `code`.
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        ServeError { code, message: message.into() }
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
            Error::Overloaded { .. } => Code::ResourceExhausted,
            Error::DeadlineExceeded { .. } => Code::DeadlineExceeded,
            Error::NotReady { .. } | Error::ShuttingDown => Code::Unavailable,
            Error::NoVariantMeetsSlo { .. } | Error::DoesNotFitTask(_) => Code::FailedPrecondition,
            // Loading a model that is loaded already is no failure to a repository
            // client; the repository answers it before this mapping is reached.
            Error::AlreadyLoaded(_) => Code::InvalidArgument,
            Error::Load { .. } | Error::Backend { .. } => Code::Internal,
        };
        ServeError::new(code, error.to_string())
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
        }
    }
}
