//! [`Fetcher`]: an artifact from where its source says, through the cache. A tag is
//! resolved to a digest at the registry; with the registry down, to the digest it
//! resolved to last. What a digest names is taken from the cache when it is there,
//! and fetched, checked against the digest and cached when it is not.

use std::path::PathBuf;

use super::artifact::ArtifactKind;
use super::blob_cache::{BlobCache, Resolved};
use super::config::SourcesConfig;
use super::credentials::Credentials;
use super::location::{OciReference, Source, is_sha256_digest};
use super::registry_client::{Artifact, RegistryClient};
use crate::error::{Error, FetchError};

/// Fetches remote sources into a [`BlobCache`].
pub struct Fetcher {
    cache: BlobCache,
    credentials: Credentials,
    client: RegistryClient,
}

// Its client prints nothing useful.
impl std::fmt::Debug for Fetcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fetcher").field("cache", &self.cache).finish_non_exhaustive()
    }
}

/// An artifact on this machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fetched {
    /// The file holding it.
    pub path: PathBuf,
    /// Its digest (the module's, the model file's).
    pub blob: String,
    /// The digest of the manifest it came by (for an `https://` URL, the blob's): a
    /// followed tag has moved when this changes.
    pub manifest: String,
    /// Why the registry was not asked, when the cache answered for a tag alone.
    pub offline: Option<String>,
}

impl Fetcher {
    /// A fetcher with the cache and credentials `config` names.
    pub fn new(config: &SourcesConfig) -> Result<Fetcher, Error> {
        config.validate()?;
        let cache = config.cache_dir().ok_or_else(|| {
            Error::Config(
                "no folder for the blob cache: set `sources.cache` (neither XDG_CACHE_HOME nor HOME is set)".into(),
            )
        })?;
        let timeout = std::time::Duration::from_secs_f64(config.timeout_s);
        let client =
            RegistryClient::new(&config.insecure_registries, timeout).map_err(|e| Error::fetch("registries", e))?;
        let credentials =
            Credentials { docker_config: config.docker_config.clone(), token_file: config.token_file.clone() };
        Ok(Fetcher { cache: BlobCache::new(cache), credentials, client })
    }

    /// The cache it fetches into.
    pub fn cache(&self) -> &BlobCache {
        &self.cache
    }

    /// `source`, as a file on this machine; `sha256` is what an `https://` source must
    /// hash to (it is required there, and refused elsewhere).
    pub fn fetch(&self, source: &Source, sha256: Option<&str>, kind: ArtifactKind) -> Result<Fetched, Error> {
        match (source, sha256) {
            (Source::File(path), None) => {
                let bytes = std::fs::read(path).map_err(|e| Error::io("read", path, e))?;
                let digest = super::digest::sha256_digest(&bytes);
                Ok(Fetched { path: path.clone(), blob: digest.clone(), manifest: digest, offline: None })
            }
            (Source::Https(url), Some(sha256)) => self.fetch_https(url, sha256, kind),
            (Source::Https(url), None) => {
                Err(Error::Config(format!("{url}: an `https://` source needs the `sha256` its content must have")))
            }
            (Source::Oci(reference), None) => self.fetch_oci(reference, kind),
            (other, Some(_)) => Err(Error::Config(format!(
                "{other}: `sha256` is for `https://` sources; pin an OCI reference with `@sha256:…`"
            ))),
        }
    }

    fn fetch_https(&self, url: &str, sha256: &str, kind: ArtifactKind) -> Result<Fetched, Error> {
        let digest = if sha256.starts_with("sha256:") { sha256.to_string() } else { format!("sha256:{sha256}") };
        if !is_sha256_digest(&digest) {
            return Err(Error::Config(format!("{url}: `sha256` {sha256} is not 64 lowercase hex digits")));
        }
        let path = match self.cache.blob(&digest) {
            Some(path) => path,
            None => {
                let bytes = self.client.https(url, kind).map_err(|e| Error::fetch(url, e))?;
                self.cache.store(&digest, &bytes).map_err(|e| Error::fetch(url, e))?
            }
        };
        Ok(Fetched { path, blob: digest.clone(), manifest: digest, offline: None })
    }

    /// The digest of the manifest `reference`'s tag names at the registry now.
    pub fn resolve(&self, reference: &OciReference) -> Result<String, Error> {
        let auth = self.credentials.for_registry(&reference.registry)?;
        self.client.manifest_digest(reference, &auth).map_err(|e| Error::fetch(reference, e))
    }

    fn fetch_oci(&self, reference: &OciReference, kind: ArtifactKind) -> Result<Fetched, Error> {
        let asked = reference.to_string();
        let (manifest, offline) = match &reference.digest {
            Some(digest) => (digest.clone(), None),
            None => match self.resolve(reference) {
                Ok(digest) => (digest, None),
                Err(error) => {
                    let reason = error.to_string();
                    let Some(resolved) = self.cache.recall(&asked) else {
                        return Err(Error::fetch(&asked, FetchError::NotCached { reason }));
                    };
                    tracing::warn!(reference = %asked, digest = %resolved.manifest, %reason, "serving the cached digest");
                    return self.fetched(&asked, resolved, Some(reason));
                }
            },
        };
        let resolved = self.fetch_pinned(reference, &manifest, kind)?;
        if reference.digest.is_none() {
            let tagged = Resolved { reference: asked.clone(), ..resolved.clone() };
            self.cache.remember(&tagged).map_err(|e| Error::fetch(&asked, e))?;
        }
        self.fetched(&asked, resolved, offline)
    }

    /// The artifact the manifest `manifest` of `reference`'s repository names: from
    /// the cache, or fetched.
    fn fetch_pinned(&self, reference: &OciReference, manifest: &str, kind: ArtifactKind) -> Result<Resolved, Error> {
        let pinned = &reference.pinned(manifest);
        let key = OciReference { tag: None, ..pinned.clone() }.to_string();
        if let Some(resolved) = self.cache.recall(&key) {
            return Ok(resolved);
        }
        let auth = self.credentials.for_registry(&pinned.registry)?;
        let failed = |e| Error::fetch(pinned, e);
        let layer = self.client.layer(pinned, kind, &auth).map_err(failed)?;
        let bytes = self.client.blob(pinned, &layer, &auth).map_err(failed)?;
        self.cache.store(&layer.digest, &bytes).map_err(failed)?;
        let resolved = Resolved {
            reference: key,
            manifest: manifest.to_string(),
            blob: layer.digest,
            media_type: layer.media_type,
        };
        self.cache.remember(&resolved).map_err(failed)?;
        Ok(resolved)
    }

    /// Notes that the tag `reference` now serves `fetched`: a restart with the
    /// registry down serves it.
    pub fn remember_tag(&self, reference: &OciReference, fetched: &Fetched) -> Result<(), Error> {
        let tag = OciReference { digest: None, ..reference.clone() }.to_string();
        let pinned = OciReference { tag: None, ..reference.pinned(&fetched.manifest) }.to_string();
        let resolved = self.cache.recall(&pinned).ok_or_else(|| {
            Error::fetch(&tag, FetchError::NotCached { reason: format!("{pinned} is not in the cache") })
        })?;
        self.cache.remember(&Resolved { reference: tag.clone(), ..resolved }).map_err(|e| Error::fetch(&tag, e))
    }

    fn fetched(&self, asked: &str, resolved: Resolved, offline: Option<String>) -> Result<Fetched, Error> {
        let Some(path) = self.cache.blob(&resolved.blob) else {
            let reason = format!("its blob {} left the cache", resolved.blob);
            return Err(Error::fetch(asked, FetchError::NotCached { reason }));
        };
        Ok(Fetched { path, blob: resolved.blob, manifest: resolved.manifest, offline })
    }

    /// Pushes `artifact` under `reference` (a tag); returns the manifest's digest.
    pub fn push(&self, reference: &OciReference, artifact: Artifact) -> Result<String, Error> {
        let auth = self.credentials.for_registry(&reference.registry)?;
        self.client.push(reference, artifact, &auth).map_err(|e| Error::fetch(reference, e))
    }
}
