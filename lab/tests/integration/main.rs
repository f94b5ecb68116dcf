//! Integration tests of the lab and the `modelless` command line: load generation in
//! process and over gRPC, the simulator and its policies, `modelless tune` searching,
//! storing and writing a setting; the `modelless serve` binary under a barrage of
//! hostile clients; a fleet of replicas behind nginx losing one mid-run, and scaled
//! up and down under load; the container image built and run with podman; one
//! request's trace exported over OTLP by `modelless serve`; and the README's examples
//! built as an application outside the workspace.

// Tests may unwrap: a failure is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

// The sdk's test helpers: where the generated models, photos and policy modules are.
#[allow(dead_code)]
#[path = "../../../sdk/tests/integration/common.rs"]
mod common;
#[allow(dead_code)]
#[path = "../../../sdk/tests/integration/efficientnet.rs"]
mod efficientnet;

mod container;
mod embedding;
mod fleet;
mod hostile_clients;
mod images;
mod kit_rules;
mod load;
mod oci_sources;
mod policy_check;
mod policy_dev;
mod policy_languages;
mod policy_new;
mod policy_test;
mod simulate;
mod tracing;
mod tune;
mod variants;
mod variants_ocr;
