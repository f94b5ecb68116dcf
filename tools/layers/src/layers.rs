//! The runtime's layers (those of docs/architecture.md), and the check of its
//! top-level modules' imports against them.

use crate::check::{LIB, Problem};
use crate::graph::Graph;

/// A crate's layers, lowest first: a module may import only from its own layer's
/// modules and from lower layers. Two modules of one layer must not import each other
/// (the circle search finds that).
pub type Layers = &'static [&'static [&'static str]];

/// The runtime's layers, lowest first.
pub const RUNTIME: Layers = &[
    &["tensor", "request", "stats", "error", "answered", "classify", "trace"],
    &["metrics", "backend", "signature"],
    &["preprocess", "warmup", "source"],
    &["batching", "admission"],
    &["model", "profile"],
    &["registry"],
    &["policy", "ocr"],
    &["kserve"],
    &["fuzzing"],
];

/// The sdk's layers, lowest first: the re-exports `lib.rs` names in modules of its
/// own, and helpers that import nothing of the crate (blocking work made awaitable,
/// the stop signal, the server's handle); the config types, what the repository may
/// load, the task handle and a model's report, and the re-exports of those; the policy
/// steering a registry; the runtime facade; serving it over KServe.
pub const SDK: Layers = &[
    &["backend", "kserve", "ocr", "policy", "preprocess", "profile", "off_thread", "shutdown", "server"],
    &[
        "policy_config",
        "pipeline_config",
        "declared",
        "overrides",
        "task_handle",
        "model_info",
        "pipeline",
        "status",
        "sources",
        "source",
    ],
    &["steering"],
    &["runtime"],
    &["serving"],
];

/// The layer of `module`, if it is in one.
pub fn layer_of(layers: Layers, module: &str) -> Option<usize> {
    layers.iter().position(|layer| layer.contains(&module))
}

/// The problems of a crate's top-level graph: a module in no layer, an import from a
/// higher layer, an import of an item `lib.rs` defines.
pub fn check(crate_name: &str, top: &Graph, layers: Layers) -> Vec<Problem> {
    let mut problems = Vec::new();
    for (module, imports) in &top.edges {
        if module == LIB {
            continue;
        }
        let Some(layer) = layer_of(layers, module) else {
            problems.push(Problem::new(format!(
                "{crate_name}: {module} is in no layer (add it to tools/layers/src/layers.rs and docs/architecture.md)"
            )));
            continue;
        };
        for (used, witness) in imports {
            let message = if used == LIB {
                format!("{crate_name}: {module} imports an item of lib.rs, which no module may")
            } else {
                match layer_of(layers, used) {
                    Some(used_layer) if used_layer > layer => {
                        format!("{crate_name}: {module} (layer {layer}) imports {used} (layer {used_layer}): upward")
                    }
                    _ => continue,
                }
            };
            problems.push(Problem::new(message).with_detail(format!("{}: {}", witness.file, witness.path)));
        }
    }
    problems
}
