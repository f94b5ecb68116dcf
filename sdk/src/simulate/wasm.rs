//! A Wasm policy deciding in a simulation, guarded as in the control loop: a module
//! that fails falls back to the configured knobs, and the simulation goes on.

use modelless_runtime::policy::{GuardedPolicy, KeepConfigured, PolicyModule};
use modelless_runtime::policy_abi::{Decision, ServingKnobs, Snapshot};

use super::engine::Decider;
use super::model::SimModel;

/// A policy module and its guard.
pub struct WasmDecider {
    policy: GuardedPolicy,
}

impl WasmDecider {
    /// `module` with `parameters`, falling back to the tasks' configured variants
    /// and knobs in `model`.
    pub fn new(module: PolicyModule, parameters: Option<serde_json::Value>, model: &SimModel) -> Self {
        let configured = model.tasks.iter().map(|task| {
            let active = &task.variants[task.active];
            let knobs = ServingKnobs {
                variant: active.name.clone(),
                max_batch_size: active.max_batch_size,
                max_queue_delay_us: active.max_queue_delay_us,
                instances: 1,
            };
            (task.name.clone(), knobs)
        });
        WasmDecider { policy: GuardedPolicy::new(module, parameters, KeepConfigured::new(configured)) }
    }

    /// Failures by kind so far.
    pub fn failures(&self) -> &std::collections::BTreeMap<&'static str, u64> {
        self.policy.failures()
    }
}

impl Decider for WasmDecider {
    fn decide(&mut self, snapshot: &Snapshot, _ahead: &[f64]) -> Decision {
        self.policy.decide(snapshot).decision
    }
}
