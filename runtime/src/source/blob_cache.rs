//! The cache of what remote sources gave: each blob once, in a file named by its
//! digest and written only once its bytes hash to that digest; and, per reference,
//! the digests it last resolved to, so that a restart with the registry down serves
//! what it served before. Shared by every policy and variant of a process (and by
//! processes that name the same folder: writes are whole-file renames).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::digest::{hex_of, sha256_digest};
use crate::error::FetchError;

/// A folder of blobs by digest and of what references resolved to.
#[derive(Clone, Debug)]
pub struct BlobCache {
    dir: PathBuf,
}

/// What a reference resolved to when it was last fetched.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resolved {
    /// The reference as the config names it.
    pub reference: String,
    /// The manifest's digest (for an `https://` URL, the blob's).
    pub manifest: String,
    /// The digest of the blob it delivers: the module, or the model file.
    pub blob: String,
    /// The blob's media type.
    pub media_type: String,
}

impl BlobCache {
    /// The cache in `dir` (made when first written).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        BlobCache { dir: dir.into() }
    }

    /// `$XDG_CACHE_HOME/modelless/blobs`, or `~/.cache/modelless/blobs`.
    pub fn default_dir() -> Option<PathBuf> {
        let base = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".cache")))?;
        Some(base.join("modelless").join("blobs"))
    }

    /// Its folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn blob_path(&self, digest: &str) -> PathBuf {
        self.dir.join("blobs").join("sha256").join(hex_of(digest))
    }

    /// The file holding the blob `digest`, if the cache has it.
    pub fn blob(&self, digest: &str) -> Option<PathBuf> {
        let path = self.blob_path(digest);
        path.is_file().then_some(path)
    }

    /// Keeps `bytes` as the blob `digest`, once they hash to it; returns its file.
    pub fn store(&self, digest: &str, bytes: &[u8]) -> Result<PathBuf, FetchError> {
        let actual = sha256_digest(bytes);
        if actual != digest {
            return Err(FetchError::DigestMismatch { expected: digest.to_string(), actual });
        }
        let path = self.blob_path(digest);
        if !path.is_file() {
            write_whole(&path, bytes)?;
        }
        Ok(path)
    }

    fn resolved_path(&self, reference: &str) -> PathBuf {
        // Named by a digest of the reference: any reference is a valid file name then.
        self.dir.join("refs").join(format!("{}.json", hex_of(&sha256_digest(reference.as_bytes()))))
    }

    /// Notes what `resolved.reference` resolved to.
    pub fn remember(&self, resolved: &Resolved) -> Result<(), FetchError> {
        let path = self.resolved_path(&resolved.reference);
        let text = serde_json::to_vec_pretty(resolved).map_err(|e| FetchError::cache(&path, e.into()))?;
        write_whole(&path, &text)
    }

    /// What `reference` last resolved to, if its blob is still here.
    pub fn recall(&self, reference: &str) -> Option<Resolved> {
        let text = std::fs::read(self.resolved_path(reference)).ok()?;
        let resolved: Resolved = serde_json::from_slice(&text).ok()?;
        (resolved.reference == reference && self.blob(&resolved.blob).is_some()).then_some(resolved)
    }
}

/// Writes `bytes` to a file beside `path`, then renames it to `path`: a reader sees
/// the whole file or none.
fn write_whole(path: &Path, bytes: &[u8]) -> Result<(), FetchError> {
    let folder = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(folder).map_err(|e| FetchError::cache(folder, e))?;
    let partial = folder.join(format!(
        ".{}.{}.partial",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("blob"),
        std::process::id()
    ));
    std::fs::write(&partial, bytes).map_err(|e| FetchError::cache(&partial, e))?;
    std::fs::rename(&partial, path).map_err(|e| FetchError::cache(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blob_is_kept_only_under_the_digest_of_its_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let cache = BlobCache::new(dir.path());
        let digest = sha256_digest(b"module");
        let path = cache.store(&digest, b"module").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"module");
        assert_eq!(cache.blob(&digest), Some(path));

        let other = sha256_digest(b"other");
        let refused = cache.store(&other, b"tampered").unwrap_err();
        assert!(matches!(&refused, FetchError::DigestMismatch { expected, .. } if *expected == other), "{refused}");
        assert_eq!(cache.blob(&other), None, "nothing kept under a digest its bytes do not have");
    }

    #[test]
    fn a_reference_recalls_what_it_resolved_to_while_its_blob_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let cache = BlobCache::new(dir.path());
        let blob = sha256_digest(b"v1");
        let resolved = Resolved {
            reference: "oci://127.0.0.1:5000/p:live".into(),
            manifest: sha256_digest(b"manifest"),
            blob: blob.clone(),
            media_type: "application/wasm".into(),
        };
        cache.remember(&resolved).unwrap();
        assert_eq!(cache.recall(&resolved.reference), None, "no blob yet");
        cache.store(&blob, b"v1").unwrap();
        assert_eq!(cache.recall(&resolved.reference), Some(resolved));
        assert_eq!(cache.recall("oci://127.0.0.1:5000/p:other"), None);
    }
}
