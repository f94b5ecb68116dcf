//! The error beneath another: kept whole, so that a caller can walk its sources and
//! downcast it, and shared, so that the error above it stays cheap to clone.

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;

/// An error that caused another. It displays as its message followed by those of its
/// own sources, joined by `: `, so that a message built on it says everything;
/// [`Cause::get`] is the error itself. Two causes are equal when they display alike.
#[derive(Clone)]
pub struct Cause(Arc<dyn StdError + Send + Sync + 'static>);

impl Cause {
    /// Keeps `error` as a cause.
    pub fn new(error: impl StdError + Send + Sync + 'static) -> Self {
        Cause(Arc::new(error))
    }

    /// Keeps an error already boxed (as `anyhow`-style errors convert to) as a cause.
    pub fn boxed(error: Box<dyn StdError + Send + Sync + 'static>) -> Self {
        Cause(Arc::from(error))
    }

    /// The error kept.
    pub fn get(&self) -> &(dyn StdError + Send + Sync + 'static) {
        &*self.0
    }

    /// The error kept, if it is a `T`.
    pub fn downcast_ref<T: StdError + 'static>(&self) -> Option<&T> {
        self.0.downcast_ref::<T>()
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(error) = source {
            write!(f, ": {error}")?;
            source = error.source();
        }
        Ok(())
    }
}

impl fmt::Debug for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl StdError for Cause {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.0.source()
    }
}

impl PartialEq for Cause {
    fn eq(&self, other: &Self) -> bool {
        self.to_string() == other.to_string()
    }
}

impl Eq for Cause {}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn a_cause_says_its_whole_chain_and_can_be_downcast() {
        let cause = Cause::new(Outer(std::io::Error::other("inner")));
        assert_eq!(cause.to_string(), "outer: inner");
        assert!(cause.downcast_ref::<Outer>().is_some());
        assert_eq!(cause.source().map(|s| s.to_string()).as_deref(), Some("inner"));
        assert_eq!(cause.clone(), cause);
    }
}
