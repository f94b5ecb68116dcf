//! A Wasm policy deciding in a simulation, guarded as in the control loop: a module
//! that fails falls back to the configured knobs, and the simulation goes on.

use modelless::policy::{GuardedPolicy, KeepConfigured, PolicyModule, Recorder};
use modelless::policy_abi::{Decision, ServingKnobs, Snapshot};

use super::engine::Decider;
use super::model::SimModel;

/// A policy module and its guard.
pub struct WasmDecider {
    policy: GuardedPolicy,
    recorder: Option<Recorder>,
    /// What the policy warned of, each said once.
    warned: std::collections::BTreeSet<String>,
}

// Its parts (sessions, threads, closures, channels) print nothing useful.
impl std::fmt::Debug for WasmDecider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmDecider").field("policy", &self.policy).finish_non_exhaustive()
    }
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
        WasmDecider { policy, recorder: None, warned: std::collections::BTreeSet::new() }
    }

    /// Records every tick (snapshot and decision) with `recorder`, as the control loop
    /// records a real run's, for `modelless policy replay`.
    pub fn with_recorder(mut self, recorder: Recorder) -> Self {
        self.recorder = Some(recorder);
        self
    }

    /// Failures by kind so far.
    pub fn failures(&self) -> &std::collections::BTreeMap<&'static str, u64> {
        self.policy.failures()
    }
}

impl Decider for WasmDecider {
    fn decide(&mut self, snapshot: &Snapshot, _ahead: &[f64]) -> Decision {
        let decision = self.decide_and_record(snapshot);
        for message in self.policy.take_warnings() {
            if self.warned.insert(message.clone()) {
                tracing::warn!(%message, "the policy warns");
            }
        }
        decision
    }
}

impl WasmDecider {
    /// What was warned of so far, each once.
    pub fn warnings(&self) -> impl Iterator<Item = &str> {
        self.warned.iter().map(String::as_str)
    }

    fn decide_and_record(&mut self, snapshot: &Snapshot) -> Decision {
        let Some(recorder) = &mut self.recorder else { return self.policy.decide(snapshot).decision };
        // Encoded once, for the module and the recording alike.
        let Ok(json) = serde_json::to_vec(snapshot) else { return self.policy.decide(snapshot).decision };
        let decided = self.policy.decide_encoded(snapshot, &json);
        if let Err(e) = recorder.write(&json, &decided.decision, decided.by.label(), None, &[]) {
            // The simulation goes on; the recording stops, said once.
            tracing::warn!(error = %e, "recording the simulated ticks stopped");
            self.recorder = None;
        }
        decided.decision
    }
}
