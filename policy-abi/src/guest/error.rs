//! What a policy's method fails with.

/// A policy's failure, as the host will read it: a message. Anything that displays
/// converts with `?` (serde's errors, `String`, `&str`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error(String);

impl Error {
    /// The message the host reports.
    pub fn message(&self) -> &str {
        &self.0
    }

    /// The message, owned.
    pub fn into_message(self) -> String {
        self.0
    }
}

// Not `Display` itself, so that every `Display` converts: `?` on any error or message.
impl<E: std::fmt::Display> From<E> for Error {
    fn from(error: E) -> Self {
        Error(error.to_string())
    }
}
