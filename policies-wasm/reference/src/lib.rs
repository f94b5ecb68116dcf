//! The reference policy: short enough to read first, and using all a policy decides
//! (variant, instances, a standby, state kept across reloads). `docs/policies.md`
//! walks through it.
//!
//! Every tick, for each task with a latency target:
//!
//! 1. **Demand**: the rate arriving, plus `headroom` of it for bursts.
//! 2. **Want**: of the variants that may serve, the most accurate that serves the
//!    demand within the target with the fewest instances the task's cores allow
//!    (`capacity_within_slo`, and with photos the capacity measured decoding them);
//!    where none does, the one that serves the most.
//! 3. **When**: where the variant serving cannot keep up, the task moves at once;
//!    otherwise a move (a step up, or fewer instances) waits until the task's last
//!    change is `settle_ms` old, so that one quiet second does not undo it.
//! 4. **Standby**: the most accurate variant below the one serving is kept loaded
//!    with an instance, so that the next step down costs no load.
//!
//! Its state is when each task last changed; a task without a target is left alone.

use std::collections::BTreeMap;

use modelless_policy_abi::guest::{Error, Policy};
use modelless_policy_abi::{
    CAPACITY_UTILISATION, Decision, Snapshot, TaskDecision, TaskSnapshot, VariantSnapshot, VariantState,
    arriving_per_s, capacity_within_slo, instances_within, photo_request_ms,
};
use serde::{Deserialize, Serialize};

/// The `[policy.parameters]` table; every field has a default.
#[derive(Clone, Debug, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Parameters {
    /// Share of the demand planned for beyond it (0.2: a fifth more).
    pub headroom: f64,
    /// Least age of a task's last change before a step up or fewer instances, ms.
    pub settle_ms: u64,
    /// Most instances of one variant.
    pub max_instances: u32,
    /// Whether the variant below the one serving is kept loaded.
    pub standby: bool,
}

impl Default for Parameters {
    fn default() -> Self {
        Parameters { headroom: 0.2, settle_ms: 5_000, max_instances: 4, standby: true }
    }
}

/// What it remembers, and hands the module that replaces it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct State {
    /// When each task last changed, on the control loop's clock (ms).
    pub last_change_ms: BTreeMap<String, u64>,
}

/// The policy.
#[derive(Debug, Default)]
pub struct Reference {
    parameters: Parameters,
    state: State,
}

/// A way to serve a task: a variant, its instances, and what they serve in time.
#[derive(Clone, Copy, Debug)]
struct Plan<'a> {
    variant: &'a VariantSnapshot,
    instances: u32,
    capacity: f64,
}

impl Policy for Reference {
    type Parameters = Parameters;
    type State = State;

    fn new(parameters: Parameters) -> Result<Self, Error> {
        if parameters.headroom.is_nan() || parameters.headroom < 0.0 || parameters.max_instances == 0 {
            return Err("headroom must be 0 or more, and max_instances at least 1".into());
        }
        Ok(Reference { parameters, state: State::default() })
    }

    fn decide(&mut self, snapshot: &Snapshot) -> Result<Decision, Error> {
        let budget = snapshot.system.budget.as_ref();
        let mut decision = Decision::default();
        for task in &snapshot.tasks {
            let Some(slo_ms) = task.slo_latency_ms else { continue };
            let demand = arriving_per_s(&task.demand) * (1.0 + self.parameters.headroom);
            // The cores this task may hold: those free, and those it holds already.
            let cores = budget.map(|b| b.cores_free + task.cores_held(b.shared_pool_cores));
            let plans = self.plans(task, slo_ms, demand, cores);
            let Some(want) = most_accurate_serving(&plans, demand) else {
                log::warn!("task `{}`: no variant that may serve has a profile to plan with", task.name);
                continue;
            };
            let keeps_up = capacity(task, task.active_variant(), serving(task), slo_ms) >= demand;
            let mut wants = self.towards(task, want, keeps_up, snapshot.now_ms);
            let serving_next = wants.variant.as_deref().unwrap_or(&task.active.variant);
            if let Some(below) = self.standby(task, serving_next) {
                wants.standby.insert(below, 1);
            }
            if !wants.is_empty() {
                decision.tasks.push(wants);
            }
        }
        Ok(decision)
    }

    fn state(&mut self) -> Option<&mut State> {
        Some(&mut self.state)
    }
}

impl Reference {
    /// Each variant that may serve and has a profile, with the fewest instances within
    /// `cores` that serve `demand` (or the most it may have, where none do).
    fn plans<'a>(&self, task: &'a TaskSnapshot, slo_ms: f64, demand: f64, cores: Option<f64>) -> Vec<Plan<'a>> {
        let may_serve = task.variants.iter().filter(|v| v.may_serve());
        let plan = |variant: &'a VariantSnapshot| {
            variant.profile.as_ref()?.fit?;
            // Instances on the pool sessions share add no cores: one.
            let most = match variant.share {
                Some(share) if share.on_shared_pool() => 1,
                share => instances_within(cores, share.map_or(0.0, |s| s.cores), self.parameters.max_instances),
            };
            let serves = |n| capacity(task, Some(variant), n, slo_ms);
            let instances = (1..=most).find(|&n| serves(n) >= demand).unwrap_or(most);
            Some(Plan { variant, instances, capacity: serves(instances) })
        };
        may_serve.filter_map(plan).collect()
    }

    /// What `task` is asked, moving to `want` by the rules of the crate's docs.
    fn towards(&mut self, task: &TaskSnapshot, want: Plan, keeps_up: bool, now_ms: u64) -> TaskDecision {
        let same = want.variant.name == task.active.variant && want.instances == serving(task);
        let last = self.state.last_change_ms.get(&task.name);
        let settled = last.is_none_or(|&at| now_ms >= at + self.parameters.settle_ms);
        if same || (keeps_up && !settled) {
            return TaskDecision::keep(&task.name);
        }
        self.state.last_change_ms.insert(task.name.clone(), now_ms);
        log::info!("task `{}`: {} × {}", task.name, want.variant.name, want.instances);
        let mut moved = TaskDecision::scale(&task.name, want.instances);
        if want.variant.name != task.active.variant {
            moved.variant = Some(want.variant.name.clone());
        }
        moved
    }

    /// The most accurate variant below `serving` that may serve, where it is not
    /// loaded yet.
    fn standby(&self, task: &TaskSnapshot, serving: &str) -> Option<String> {
        let accuracy = task.variant(serving)?.accuracy;
        let below = task.variants.iter().filter(|v| v.may_serve() && v.accuracy < accuracy);
        let next = below.max_by(|a, b| a.accuracy.total_cmp(&b.accuracy))?;
        (self.parameters.standby && next.state == VariantState::Unloaded).then(|| next.name.clone())
    }
}

/// The most accurate plan that serves `demand`; where none does, the one serving most.
fn most_accurate_serving<'a>(plans: &[Plan<'a>], demand: f64) -> Option<Plan<'a>> {
    let serving = plans.iter().filter(|p| p.capacity >= demand);
    let best = serving.max_by(|a, b| a.variant.accuracy.total_cmp(&b.variant.accuracy));
    best.or_else(|| plans.iter().max_by(|a, b| a.capacity.total_cmp(&b.capacity))).copied()
}

/// Requests a second `instances` of `variant` serve within `slo_ms`: by its profiled
/// line at the task's batch ceiling, and, where requests carry photos, at the capacity
/// its image profile measured with decoding (planned at the same utilisation); 0
/// without a line.
fn capacity(task: &TaskSnapshot, variant: Option<&VariantSnapshot>, instances: u32, slo_ms: f64) -> f64 {
    let Some((variant, profile)) = variant.and_then(|v| Some((v, v.profile.as_ref()?))) else { return 0.0 };
    let Some(fit) = profile.fit else { return 0.0 };
    let ceiling = variant.batch_ceiling.unwrap_or(task.active.max_batch_size).max(1);
    let lined = capacity_within_slo(&fit, ceiling, instances, slo_ms);
    let Some(photos) = task.photos.filter(|_| lined > 0.0) else { return lined };
    // An instance's time a request takes on tensors, as planned.
    let tensor_ms = f64::from(instances) * 1e3 * CAPACITY_UTILISATION / lined;
    match photo_request_ms(&profile.photos, photos, tensor_ms) {
        Some(request_ms) => f64::from(instances) * 1e3 * CAPACITY_UTILISATION / request_ms,
        None => lined,
    }
}

/// The instances serving `task` now (at least one).
fn serving(task: &TaskSnapshot) -> u32 {
    task.active_variant().map_or(1, |v| v.serving_instances().max(1))
}

modelless_policy_abi::export_policy!(Reference);

#[cfg(test)]
mod tests;
