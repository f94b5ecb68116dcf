//! Cases of the rules policies share with the host (`rules.rs`): sample tasks and
//! what each rule answers for them, written by the Rust rules themselves to
//! `schema/rules-cases.json`. Every language kit's rules run these cases in its own
//! tests, so that a kit cannot drift from the host's arithmetic.

use serde_json::{Value, json};

use crate::cores_held;
use crate::snapshot::{InstanceShare, ServingKnobs, TaskSnapshot, VariantSnapshot, VariantState};

fn variant(name: &str, state: VariantState, instances: u32, starting: u32, cores: Option<f64>) -> VariantSnapshot {
    VariantSnapshot {
        name: name.into(),
        state,
        instances,
        instances_starting: starting,
        share: cores.map(|cores| InstanceShare { cores, ..InstanceShare::default() }),
        ..VariantSnapshot::default()
    }
}

fn task(name: &str, active: &str, variants: Vec<VariantSnapshot>) -> TaskSnapshot {
    TaskSnapshot {
        name: name.into(),
        active: ServingKnobs { variant: active.into(), ..ServingKnobs::default() },
        variants,
        ..TaskSnapshot::default()
    }
}

/// The sample tasks: own threads, the shared pool (twice), an active variant that is
/// missing, one without a share, and variants that failed or were refused.
fn tasks() -> Vec<TaskSnapshot> {
    use VariantState::{Failed, Loading, Ready, Unloaded};
    let refused =
        VariantSnapshot { refused: Some("input `x`: sizes differ".into()), ..variant("d", Unloaded, 0, 0, None) };
    vec![
        task(
            "own",
            "b",
            vec![
                variant("a", Ready, 2, 1, Some(1.0)),
                variant("b", Ready, 1, 1, Some(2.0)),
                variant("c", Failed, 0, 0, Some(1.0)),
                refused,
            ],
        ),
        task("pooled", "p", vec![variant("p", Ready, 1, 0, Some(0.0)), variant("q", Loading, 0, 1, Some(0.0))]),
        task("pooled-too", "r", vec![variant("r", Ready, 2, 0, Some(0.0))]),
        task("idle-pool", "s", vec![variant("s", Unloaded, 0, 0, Some(0.0))]),
        task("missing", "gone", vec![variant("t", Ready, 1, 0, Some(1.0))]),
        task("no-share", "u", vec![variant("u", Ready, 3, 0, None)]),
    ]
}

/// The cases: per group of tasks and shared pool, what every rule answers.
pub fn rules_cases() -> Value {
    let all = tasks();
    let groups: Vec<(Vec<TaskSnapshot>, f64)> =
        vec![(all.clone(), 4.0), (all[..1].to_vec(), 4.0), (all[1..3].to_vec(), 2.0), (all[3..].to_vec(), 8.0)];
    let cases: Vec<Value> = groups
        .into_iter()
        .map(|(tasks, pool)| {
            let per_task: Vec<Value> = tasks
                .iter()
                .map(|t| {
                    json!({
                        "active_variant": t.active_variant().map(|v| v.name.clone()),
                        "active_index": t.active_index(),
                        "cores_held": t.cores_held(pool),
                        "may_serve": t.variants.iter().map(VariantSnapshot::may_serve).collect::<Vec<_>>(),
                        "serving_instances": t.variants.iter().map(VariantSnapshot::serving_instances).collect::<Vec<_>>(),
                    })
                })
                .collect();
            json!({
                "tasks": tasks,
                "shared_pool_cores": pool,
                "expected": { "tasks": per_task, "cores_held": cores_held(&tasks, pool) },
            })
        })
        .collect();
    json!({ "cases": cases })
}
