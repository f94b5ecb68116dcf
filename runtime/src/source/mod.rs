//! Where policy modules and model versions come from: a file, an OCI registry
//! (`oci://registry/repository:tag`, or pinned `@sha256:…`), or an `https://` URL
//! checked against a `sha256`. Remote artifacts are verified against their digests,
//! kept in a [`BlobCache`] by digest (shared by every policy and variant, and what a
//! restart serves from while the registry is down), and a tag is followed by polling
//! ([`Follow`]): each new digest goes through the caller's reload path. The network
//! half is the `oci` feature; without it a remote source is refused with
//! [`FetchError::NotBuiltIn`](crate::FetchError::NotBuiltIn).

mod artifact;
mod blob_cache;
mod config;
#[cfg(feature = "oci")]
mod credentials;
mod digest;
#[cfg(feature = "oci")]
mod fetcher;
#[cfg(feature = "oci")]
mod follow;
mod location;
#[cfg(feature = "oci")]
mod registry_client;

pub use artifact::*;
pub use blob_cache::{BlobCache, Resolved};
pub use config::SourcesConfig;
#[cfg(feature = "oci")]
pub use credentials::{Credentials, RegistryAuth};
pub use digest::{hex_of, sha256_digest};
#[cfg(feature = "oci")]
pub use fetcher::{Fetched, Fetcher};
#[cfg(feature = "oci")]
pub use follow::{Apply, Follow, FollowStatus};
pub use location::{OciReference, Source, is_sha256_digest};
#[cfg(feature = "oci")]
pub use registry_client::Artifact;
