//! The contract between modelless and its scheduling policies.
//!
//! A policy is a core WebAssembly module that receives a metrics snapshot as JSON and
//! answers with a decision as JSON. This crate names the ABI's version and exports,
//! and holds the types a snapshot carries: so far the [`Profile`] of each variant.
//! It has no dependency on wasmtime, so policies written in Rust depend on it alone.

mod profile;

pub use profile::{BatchPoint, FirstRunSample, LatencyFit, Profile, ProfileKey, Throughput};

/// Version of the policy ABI this crate describes.
pub const ABI_VERSION: u32 = 1;

/// Export whose presence marks a module as a policy of [`ABI_VERSION`].
pub const MARKER_EXPORT: &str = "modelless_policy_abi_v1";

/// Exports every policy module must provide, besides the marker.
pub const REQUIRED_EXPORTS: [&str; 4] = ["memory", "alloc", "dealloc", "decide"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_names_the_abi_version() {
        assert!(MARKER_EXPORT.ends_with(&format!("_v{ABI_VERSION}")));
        assert!(!REQUIRED_EXPORTS.contains(&MARKER_EXPORT));
    }
}
