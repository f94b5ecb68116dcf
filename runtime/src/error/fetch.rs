//! Why a policy module or a model version could not be had from where the config
//! says it is: an OCI registry, an `https://` URL, or the cache of what they gave.

use std::path::PathBuf;
use std::sync::Arc;

/// A fetch failure; [`super::Error::Fetch`] carries it with the reference asked for.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FetchError {
    /// The registry or the server could not be reached, or answered with an error
    /// (not found, unauthorised, a server fault).
    #[error("{0}")]
    Unreachable(String),
    /// It answered, but with no artifact of the kind asked for (a manifest without a
    /// layer of the media types this kind takes).
    #[error("{0}")]
    NotAnArtifact(String),
    /// The bytes received do not hash to the digest they were named by.
    #[error("its content has digest {actual}, not the {expected} it is named by")]
    DigestMismatch {
        /// The digest asked for (the manifest's, or the config's `sha256`).
        expected: String,
        /// The digest of what came.
        actual: String,
    },
    /// Larger than what this kind of artifact may be.
    #[error("{size} bytes, more than the {limit} a {kind} may have")]
    TooLarge {
        /// What it is (`policy module`, `model`).
        kind: &'static str,
        /// Its size.
        size: u64,
        /// The most allowed.
        limit: u64,
    },
    /// The registry could not be asked, and the cache holds nothing for the reference.
    #[error("the registry could not be asked ({reason}) and the cache holds no digest for it")]
    NotCached {
        /// Why the registry could not be asked.
        reason: String,
    },
    /// Reading or writing the cache failed.
    #[error("the cache at {}: {source}", path.display())]
    Cache {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: Arc<std::io::Error>,
    },
    /// This build has no client for remote sources.
    #[error("this build of modelless fetches nothing remote (feature `oci`)")]
    NotBuiltIn,
}

impl FetchError {
    /// A cache file that could not be read or written.
    pub(crate) fn cache(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        FetchError::Cache { path: path.into(), source: Arc::new(source) }
    }
}
