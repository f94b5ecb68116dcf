//! The contract between modelless and its scheduling policies.
//!
//! A policy is a core WebAssembly module that receives a metrics [`Snapshot`] as JSON
//! and answers with a [`Decision`] as JSON. This crate names the ABI's version and
//! exports, holds the types of both sides (with their JSON Schema under the `schema`
//! feature, committed in `schema/`), the rules both sides read a snapshot by (which
//! variant serves, the cores instances hold), and, under the `guest` feature, the
//! `guest` kit that turns a Rust type into a policy module. It has no dependency on
//! wasmtime: policies written in Rust depend on it alone.

mod buffer;
mod capacity;
mod decision;
#[cfg(feature = "guest")]
pub mod guest;
#[cfg(feature = "schema")]
pub mod kits;
mod photos;
mod profile;
mod rise;
mod rules;
mod snapshot;
mod surge;

pub use buffer::{pack, unpack};

pub use capacity::{
    CAPACITY_HEADROOM, CAPACITY_UTILISATION, arriving_per_s, capacity_within_slo, demand_ratio, instances_within,
    level_moved,
};
pub use decision::{Decision, PolicyOutput, TASK_DECISION_FIELDS, TaskDecision, UnknownFields};
pub use photos::photo_request_ms;
pub use profile::{BatchPoint, FirstRunSample, LatencyFit, MIN_FIT_R2, Profile, ProfileKey, Throughput};
pub use rise::{DEMAND_LEAD_S, rise_within};
pub use rules::{ServingCores, cores_held};
pub use snapshot::{
    Budget, Demand, GpuBudget, GpuSnapshot, InstanceShare, LatencySummary, PhotoCapacity, PhotoTraffic,
    PreprocessingSnapshot, Refusals, RunTotals, ServingKnobs, Snapshot, SystemSnapshot, TaskSnapshot, VariantCost,
    VariantSnapshot, VariantState,
};
pub use surge::{DEMAND_SURGE_WEIGHT, MAX_SURGE, SURGE_MEMORY_S, SurgeMemory};

/// Version of the policy ABI this crate describes.
pub const ABI_VERSION: u32 = 1;

/// Export whose presence marks a module as a policy of [`ABI_VERSION`].
pub const MARKER_EXPORT: &str = "modelless_policy_abi_v1";

/// Exports every policy module must provide, besides the marker.
pub const REQUIRED_EXPORTS: [&str; 4] = ["memory", "alloc", "dealloc", "decide"];

/// JSON Schemas of the ABI's documents, by file name under `schema/`, and the cases of
/// the rules every language kit must answer alike (`rules-cases.json`).
#[cfg(feature = "schema")]
pub fn schemas() -> Vec<(&'static str, serde_json::Value)> {
    let schema = |s: schemars::Schema| s.to_value();
    vec![
        ("snapshot.schema.json", schema(schemars::schema_for!(Snapshot))),
        ("decision.schema.json", schema(schemars::schema_for!(PolicyOutput))),
        ("profile.schema.json", schema(schemars::schema_for!(Profile))),
        ("rules-cases.json", kits::rules_cases()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_names_the_abi_version() {
        assert!(MARKER_EXPORT.ends_with(&format!("_v{ABI_VERSION}")));
        assert!(!REQUIRED_EXPORTS.contains(&MARKER_EXPORT));
    }

    #[test]
    fn a_decision_leaves_out_what_it_keeps_and_an_error_reads_as_one() {
        let decision = Decision { tasks: vec![TaskDecision { max_batch_size: Some(4), ..TaskDecision::keep("t") }] };
        let json = serde_json::to_string(&PolicyOutput::Decision(decision.clone())).unwrap();
        assert_eq!(json, r#"{"tasks":[{"task":"t","max_batch_size":4}]}"#);
        assert_eq!(serde_json::from_str::<PolicyOutput>(&json).unwrap(), PolicyOutput::Decision(decision));
        let error: PolicyOutput = serde_json::from_str(r#"{"error":"no profile"}"#).unwrap();
        assert_eq!(error, PolicyOutput::Error { error: "no profile".into() });
        assert_eq!(serde_json::from_str::<PolicyOutput>("{}").unwrap(), PolicyOutput::Decision(Decision::default()));
    }

    /// The language kits' types are generated from the committed schemas; this fails
    /// when a kit's committed types differ from what the schema makes of them.
    /// `MODELLESS_WRITE_SCHEMA=1 cargo test -p modelless-policy-abi --features schema`
    /// writes them anew.
    #[cfg(feature = "schema")]
    #[test]
    fn committed_kits_match_the_schema() {
        let crate_dir = std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into());
        let crate_dir = std::path::Path::new(&crate_dir);
        let schema = |file: &str| -> serde_json::Value {
            serde_json::from_str(&std::fs::read_to_string(crate_dir.join("schema").join(file)).unwrap()).unwrap()
        };
        let files = kits::kit_files(&schema("snapshot.schema.json"), &schema("decision.schema.json"));
        let mut drifted = Vec::new();
        for (file, text) in files {
            let path = crate_dir.join("..").join(file);
            if std::env::var_os("MODELLESS_WRITE_SCHEMA").is_some() {
                std::fs::write(&path, &text).unwrap();
            }
            if std::fs::read_to_string(&path).unwrap_or_default() != text {
                drifted.push(file);
            }
        }
        assert!(
            drifted.is_empty(),
            "{drifted:?} differ from what policy-abi/schema/ makes of them; run MODELLESS_WRITE_SCHEMA=1 cargo test \
             -p modelless-policy-abi --features schema and commit them"
        );
    }

    /// The committed schemas are the contract; this fails when the types drift from
    /// them. `MODELLESS_WRITE_SCHEMA=1 cargo test -p modelless-policy-abi --features
    /// schema` writes them anew.
    #[cfg(feature = "schema")]
    #[test]
    fn committed_schemas_match_the_types() {
        // Cargo's at run time: a binary from a shared target folder may have been
        // compiled in another checkout.
        let crate_dir = std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into());
        let dir = std::path::Path::new(&crate_dir).join("schema");
        for (file, schema) in schemas() {
            let path = dir.join(file);
            let text = serde_json::to_string_pretty(&schema).unwrap() + "\n";
            if std::env::var_os("MODELLESS_WRITE_SCHEMA").is_some() {
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(&path, &text).unwrap();
            }
            let committed = std::fs::read_to_string(&path).unwrap_or_default();
            assert!(
                committed == text,
                "{} differs from the types; run MODELLESS_WRITE_SCHEMA=1 cargo test -p modelless-policy-abi \
                 --features schema and commit it",
                path.display()
            );
        }
    }
}
