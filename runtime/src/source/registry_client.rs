//! The calls to OCI registries and `https://` servers, made with `oci-client` and
//! `reqwest` on a runtime of their own: callers block (the control loop, a follow
//! thread, the CLI), and no caller's executor is borrowed.

use std::collections::BTreeMap;
use std::time::Duration;

use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
use oci_client::manifest::{OciDescriptor, OciImageManifest};
use oci_client::secrets::RegistryAuth as ClientAuth;
use oci_client::{Client, Reference};

use super::artifact::ArtifactKind;
use super::credentials::RegistryAuth;
use super::location::OciReference;
use crate::error::FetchError;

/// A client of registries and HTTPS servers.
pub(crate) struct RegistryClient {
    oci: Client,
    https: reqwest::Client,
    runtime: tokio::runtime::Runtime,
}

/// The artifact's one layer, as its manifest describes it.
pub(crate) struct Layer {
    pub digest: String,
    pub media_type: String,
    pub size: u64,
}

/// What a push sends: one layer, a config and the manifest's annotations.
pub struct Artifact {
    /// The layer: the module or the model file.
    pub bytes: Vec<u8>,
    /// The layer's media type.
    pub layer_media_type: String,
    /// The layer's annotations (its title).
    pub layer_annotations: BTreeMap<String, String>,
    /// The config blob's media type and content.
    pub config_media_type: String,
    /// The config blob.
    pub config: Vec<u8>,
    /// The manifest's annotations.
    pub annotations: BTreeMap<String, String>,
}

// The bytes print nothing useful.
impl std::fmt::Debug for Artifact {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Artifact")
            .field("bytes", &self.bytes.len())
            .field("layer_media_type", &self.layer_media_type)
            .field("config_media_type", &self.config_media_type)
            .field("annotations", &self.annotations)
            .finish_non_exhaustive()
    }
}

fn unreachable(what: impl std::fmt::Display) -> FetchError {
    FetchError::Unreachable(what.to_string())
}

impl RegistryClient {
    pub(crate) fn new(insecure_registries: &[String], timeout: Duration) -> Result<RegistryClient, FetchError> {
        // reqwest's rustls is built without a crypto provider: the endpoints' (ring)
        // is the process's. Installing it twice is harmless.
        let _ = tokio_rustls::rustls::crypto::ring::default_provider().install_default();
        let config = ClientConfig {
            protocol: ClientProtocol::HttpsExcept(insecure_registries.to_vec()),
            read_timeout: Some(timeout),
            connect_timeout: Some(timeout),
            ..ClientConfig::default()
        };
        let https = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .map_err(|e| unreachable(format_args!("cannot make an HTTPS client: {e}")))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .thread_name("modelless-fetch")
            .build()
            .map_err(|e| unreachable(format_args!("cannot start the fetch runtime: {e}")))?;
        Ok(RegistryClient { oci: Client::new(config), https, runtime })
    }

    /// Runs `work` to its end on the client's runtime; from inside another runtime's
    /// thread, on a thread of its own (a runtime cannot block inside another).
    fn block_on<T: Send>(&self, work: impl std::future::Future<Output = T> + Send) -> T {
        if tokio::runtime::Handle::try_current().is_err() {
            return self.runtime.block_on(work);
        }
        std::thread::scope(|scope| {
            scope.spawn(|| self.runtime.block_on(work)).join().unwrap_or_else(|p| std::panic::resume_unwind(p))
        })
    }

    /// The digest of the manifest `reference` names now.
    pub(crate) fn manifest_digest(&self, reference: &OciReference, auth: &RegistryAuth) -> Result<String, FetchError> {
        let (image, auth) = (reference_of(reference), auth_of(auth));
        self.block_on(self.oci.fetch_manifest_digest(&image, &auth)).map_err(unreachable)
    }

    /// The layer of `kind` in the manifest `reference` pins, its manifest checked
    /// against the pinned digest.
    pub(crate) fn layer(
        &self,
        reference: &OciReference,
        kind: ArtifactKind,
        auth: &RegistryAuth,
    ) -> Result<Layer, FetchError> {
        let (image, auth) = (reference_of(reference), auth_of(auth));
        let accepted = [oci_client::manifest::OCI_IMAGE_MEDIA_TYPE];
        let (raw, _) = self.block_on(self.oci.pull_manifest_raw(&image, &auth, &accepted)).map_err(unreachable)?;
        if let Some(expected) = &reference.digest {
            let actual = super::digest::sha256_digest(&raw);
            if actual != *expected {
                return Err(FetchError::DigestMismatch { expected: expected.clone(), actual });
            }
        }
        let manifest: OciImageManifest = serde_json::from_slice(&raw)
            .map_err(|e| FetchError::NotAnArtifact(format!("its manifest is not an OCI image manifest: {e}")))?;
        let mut layers = manifest.layers.iter().filter(|l| kind.layer_media_types().contains(&l.media_type.as_str()));
        let (Some(layer), None) = (layers.next(), layers.next()) else {
            return Err(FetchError::NotAnArtifact(format!(
                "a {} is one layer of {}; this manifest has {}",
                kind.label(),
                kind.layer_media_types().join(" or "),
                describe(&manifest.layers)
            )));
        };
        let size = u64::try_from(layer.size).unwrap_or(u64::MAX);
        if size > kind.size_limit() {
            return Err(FetchError::TooLarge { kind: kind.label(), size, limit: kind.size_limit() });
        }
        Ok(Layer { digest: layer.digest.clone(), media_type: layer.media_type.clone(), size })
    }

    /// The bytes of `layer`, from the repository of `reference`.
    pub(crate) fn blob(
        &self,
        reference: &OciReference,
        layer: &Layer,
        auth: &RegistryAuth,
    ) -> Result<Vec<u8>, FetchError> {
        let (image, auth) = (reference_of(reference), auth_of(auth));
        let descriptor = OciDescriptor {
            media_type: layer.media_type.clone(),
            digest: layer.digest.clone(),
            size: layer.size as i64,
            ..OciDescriptor::default()
        };
        let mut bytes = Vec::with_capacity(layer.size.min(64 << 20) as usize);
        self.block_on(async {
            self.oci.store_auth_if_needed(image.resolve_registry(), &auth).await;
            self.oci.pull_blob(&image, &descriptor, &mut bytes).await
        })
        .map_err(|e| match e {
            oci_client::errors::OciDistributionError::DigestError(e) => {
                FetchError::DigestMismatch { expected: layer.digest.clone(), actual: e.to_string() }
            }
            other => unreachable(other),
        })?;
        Ok(bytes)
    }

    /// The body `url` answers with, at most `limit` bytes.
    pub(crate) fn https(&self, url: &str, kind: ArtifactKind) -> Result<Vec<u8>, FetchError> {
        self.block_on(async {
            let response = self.https.get(url).send().await.map_err(unreachable)?;
            let response = response.error_for_status().map_err(unreachable)?;
            if let Some(size) = response.content_length()
                && size > kind.size_limit()
            {
                return Err(FetchError::TooLarge { kind: kind.label(), size, limit: kind.size_limit() });
            }
            let body = response.bytes().await.map_err(unreachable)?;
            match body.len() as u64 {
                size if size > kind.size_limit() => {
                    Err(FetchError::TooLarge { kind: kind.label(), size, limit: kind.size_limit() })
                }
                _ => Ok(body.to_vec()),
            }
        })
    }

    /// Pushes `artifact` under `reference`; returns the manifest's digest.
    pub(crate) fn push(
        &self,
        reference: &OciReference,
        artifact: Artifact,
        auth: &RegistryAuth,
    ) -> Result<String, FetchError> {
        let (image, auth) = (reference_of(reference), auth_of(auth));
        let layer = ImageLayer::new(artifact.bytes, artifact.layer_media_type, Some(artifact.layer_annotations));
        let config = Config::new(artifact.config, artifact.config_media_type, None);
        let manifest = OciImageManifest::build(std::slice::from_ref(&layer), &config, Some(artifact.annotations));
        self.block_on(self.oci.push(&image, &[layer], config, &auth, Some(manifest))).map_err(unreachable)?;
        // The digest of the manifest as the registry keeps it, which pulls check.
        self.block_on(self.oci.fetch_manifest_digest(&image, &auth)).map_err(unreachable)
    }
}

fn reference_of(reference: &OciReference) -> Reference {
    let (registry, repository) = (reference.registry.clone(), reference.repository.clone());
    match (&reference.digest, &reference.tag) {
        (Some(digest), _) => Reference::with_digest(registry, repository, digest.clone()),
        (None, tag) => Reference::with_tag(registry, repository, tag.clone().unwrap_or_else(|| "latest".into())),
    }
}

fn auth_of(auth: &RegistryAuth) -> ClientAuth {
    match auth {
        RegistryAuth::Anonymous => ClientAuth::Anonymous,
        RegistryAuth::Basic { username, password } => ClientAuth::Basic(username.clone(), password.clone()),
        RegistryAuth::Bearer(token) => ClientAuth::Bearer(token.clone()),
    }
}

fn describe(layers: &[OciDescriptor]) -> String {
    match layers {
        [] => "no layer".into(),
        layers => layers.iter().map(|l| l.media_type.as_str()).collect::<Vec<_>>().join(", "),
    }
}
