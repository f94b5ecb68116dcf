//! A Wasm policy steering a simulated server through the runtime's own controller:
//! guarded as in the control loop (a module that fails falls back to the configured
//! knobs, and the simulation goes on), its decisions made into actions, refused and
//! recorded as the runtime does.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use modelless::policy_abi::{ServingKnobs, Snapshot};
use modelless_runtime::policy::PolicyModule;
use modelless_runtime::policy::core::Action;
use modelless_runtime::policy::{Controller, GuardedPolicy, KeepConfigured, Recorder};

use super::engine::Decider;
use super::model::SimModel;

/// A policy module in a controller.
#[derive(Debug)]
pub struct WasmDecider {
    controller: Controller,
    /// What the policy warned of, each said once.
    warned: BTreeSet<String>,
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
        let policy = GuardedPolicy::new(module, parameters, KeepConfigured::new(configured));
        WasmDecider { controller: Controller::new(policy), warned: BTreeSet::new() }
    }

    /// Records every tick (snapshot, decision, actions) with `recorder`, as the
    /// control loop records a real run's, for `modelless policy replay`.
    pub fn with_recorder(mut self, recorder: Recorder) -> Self {
        self.controller = self.controller.with_recorder(recorder);
        self
    }

    /// Failures by kind so far.
    pub fn failures(&self) -> &BTreeMap<&'static str, u64> {
        self.controller.policy().failures()
    }

    /// What was warned of so far, each once.
    pub fn warnings(&self) -> impl Iterator<Item = &str> {
        self.warned.iter().map(String::as_str)
    }
}

impl Decider for WasmDecider {
    fn tick(&mut self, now: Duration, snapshot: Snapshot, _ahead: &[f64]) -> Vec<Action> {
        let ticked = self.controller.tick(now, snapshot);
        for message in ticked.warnings {
            if self.warned.insert(message.clone()) {
                tracing::warn!(%message, "the policy warns");
            }
        }
        // The simulation goes on when its recording stops; the controller says so once.
        for stopped in ticked.plan.reports.iter().filter(|r| r.starts_with("recording stopped")) {
            tracing::warn!(report = %stopped, "recording the simulated ticks stopped");
        }
        ticked.plan.actions
    }
}
