//! The autoscaling policy, after INFaaS's model-autoscaler: for every task with a
//! latency target it decides the variant and its instances together, and the loads
//! that keep a cheaper variant ready.
//!
//! - **What serves each task** ([`allocate`]): of every variant and number of
//!   instances the budget allows ([`options`]), the most accurate that serves the
//!   demand ahead within the target (`capacity_within_slo`, the runtime's own
//!   arithmetic), the cheapest of those in cores held plus `lambda` cores a second of
//!   loading. Where the budget's cores are short, the step down that loses the least
//!   accuracy (weighted by demand) per core freed, whichever task takes it.
//! - **Up at once, down after a while**: an allocation that holds more cores, or that
//!   the one serving cannot serve, is asked at once; one that holds fewer only after
//!   `scale_down_after_ticks` ticks in a row wanted fewer (5: INFaaS waits 10 for its
//!   CPU variants; docs/allocation.md has the sweep that set it), and a more accurate
//!   one on as many cores once the last change is `step_up_after_ms` old. A rate
//!   rising is followed ahead by a tick and the load of an instance, so that the
//!   instances a burst needs are asked before it arrives.
//! - **Accuracy down first while instances come**: where the allocation needs
//!   instances that must load, and the variant serving cannot serve what arrives
//!   meanwhile, the most accurate loaded variant whose warm instances can serves it,
//!   and the instances wanted warm up beside it (`standby`); once they are warm, the
//!   next tick moves to them. Where no core of the machine is free for the loading, the
//!   serving instances share theirs with it, and serve that much less meanwhile.
//! - **A cheaper variant ready**: the most accurate variant below the one serving is
//!   kept loaded (`load`), so that a crowd finds a step down warm.
//!
//! - **At the machine's pace** ([`pace`]): each variant's profiled line is stretched
//!   by how much longer than their lines the batches of the last ticks took, so that
//!   instances sharing cores, and tasks crowding each other, are priced as they run.
//!
//! Demand ahead: the rate arriving (the 10 s rate, or the 1 s rate where it stands
//! more than three standard deviations of a second's Poisson arrivals from it, a
//! level that moved; the rate since the last tick, two deviations below what it
//! counted, where that is higher), plus `burst_sigmas` deviations, plus the rate that
//! clears the queue beyond a batch within the target. Only a variant that cannot
//! serve the rate arriving (without the deviations) is stepped away from while
//! instances load. A task without a target keeps what it has; its cores count
//! against the budget.

pub mod allocate;
pub mod options;
pub mod pace;

use std::collections::BTreeMap;

use allocate::{Need, allocate};
use modelless_policy_abi::guest::{Error, Policy};
use modelless_policy_abi::{
    Decision, Snapshot, TaskDecision, TaskSnapshot, VariantState, arriving_per_s, cores_held, level_moved,
};
use options::Allocation;
use serde::{Deserialize, Serialize};

/// Parameters (the `init` JSON); every field is optional.
#[derive(Clone, Debug, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Parameters {
    /// Cores a second of loading is worth, against cores held.
    pub lambda: f64,
    /// Ticks in a row that must want fewer cores before a task gives them up.
    pub scale_down_after_ticks: u32,
    /// Standard deviations of a second's arrivals added to the demand ahead.
    pub burst_sigmas: f64,
    /// Least time after a change before a more accurate variant on as many cores, ms.
    pub step_up_after_ms: u64,
    /// Most instances of one variant.
    pub max_instances: u32,
    /// Largest batch capacity is priced with.
    pub max_batch_size: u32,
    /// Whether the variant below the one serving is kept loaded.
    pub keep_cheaper_loaded: bool,
}

impl Default for Parameters {
    fn default() -> Self {
        Parameters {
            lambda: 0.5,
            scale_down_after_ticks: 5,
            burst_sigmas: 2.0,
            step_up_after_ms: 3_000,
            max_instances: 8,
            max_batch_size: 32,
            keep_cheaper_loaded: true,
        }
    }
}

/// The policy: its parameters and what it remembers between ticks.
#[derive(Debug, Default)]
pub struct Autoscale {
    parameters: Parameters,
    state: State,
}

/// Per task: ticks in a row that wanted fewer cores, when it last changed, the time
/// and requests in flight of the last tick (to count arrivals since), and the time
/// and 1 s rate of a tick at least a second back (to see a rate rising).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct State {
    low_ticks: BTreeMap<String, u32>,
    last_change_ms: BTreeMap<String, u64>,
    last_seen: BTreeMap<String, (u64, u64)>,
    last_rate: BTreeMap<String, (u64, f64)>,
    pace: pace::Pace,
}

impl Policy for Autoscale {
    type Parameters = Parameters;
    type State = State;

    fn new(parameters: Parameters) -> Result<Self, Error> {
        Ok(Autoscale { parameters, ..Autoscale::default() })
    }

    fn decide(&mut self, snapshot: &Snapshot) -> Result<Decision, Error> {
        let budget = snapshot.system.budget.as_ref();
        let pool = budget.map_or(0.0, |b| b.shared_pool_cores);
        let machine_cores = f64::from(snapshot.system.cores.max(1));
        let cores = budget.map_or(machine_cores, |b| b.cores);
        let now_ms = snapshot.now_ms;
        let pace = self.state.pace.update(snapshot);
        let mut steered = Vec::new();
        let mut unsteered = Vec::new();
        let busy = cores_held(&snapshot.tasks, pool);
        let machine = Machine { cores: machine_cores, busy };
        for task in &snapshot.tasks {
            let recent = self.recent_rate(task, now_ms);
            let rising = self.rising(task, now_ms);
            match task.slo_latency_ms {
                Some(slo_ms) => {
                    let rate = arriving(task, recent);
                    let arriving = rate + backlog(task, slo_ms);
                    let demand = arriving + self.parameters.burst_sigmas * rate.sqrt();
                    let ahead = demand + rising * lead_s(task);
                    let p = &self.parameters;
                    let limits =
                        options::Limits { machine_cores, max_instances: p.max_instances, max_batch: p.max_batch_size };
                    let options = options::options(task, slo_ms, budget, &limits, pace);
                    steered.push((task, Need { arriving, demand, ahead, options }));
                }
                None => unsteered.push(task),
            }
        }
        let held = cores_held(unsteered, pool);
        let needs: Vec<Need> = steered.iter().map(|(_, need)| need.clone()).collect();
        let chosen = allocate(&needs, cores, held, self.parameters.lambda);
        let mut tasks = Vec::new();
        for ((task, need), choice) in steered.iter().zip(chosen) {
            let Some(target) = choice.map(|c| need.options[c]) else { continue };
            if let Some(decision) = self.towards(task, need, target, pool, machine, now_ms) {
                tasks.push(decision);
            }
        }
        Ok(Decision { tasks })
    }

    fn state(&mut self) -> Option<&mut State> {
        Some(&mut self.state)
    }
}

/// The machine's cores, and those the serving instances of every task hold.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Machine {
    cores: f64,
    busy: f64,
}

impl Machine {
    /// The share of their cores serving instances keep while `loading` more cores' worth
    /// of instances load and warm: all of them where free cores hold the loading,
    /// otherwise the machine's cores over all that then want one.
    fn share_while_loading(&self, loading: f64) -> f64 {
        if loading <= 0.0 { 1.0 } else { (self.cores / (self.busy + loading)).min(1.0) }
    }
}

/// Requests a second arriving at `task`: the 10 s rate, unless the last second stands
/// more than three Poisson deviations from it (the level moved), or the rate since the
/// last tick (`recent`) is higher. One noisy second is no burst: it would switch
/// variants for nothing.
fn arriving(task: &TaskSnapshot, recent: f64) -> f64 {
    arriving_per_s(&task.demand).max(recent)
}

/// How far ahead a rising rate is followed, s: a tick, and the load of an instance of
/// the variant serving (what more of it take to come).
fn lead_s(task: &TaskSnapshot) -> f64 {
    let load_ms = task.active_variant().and_then(|v| v.profile.as_ref()).and_then(|p| p.load_ms).unwrap_or(1_000.0);
    1.0 + load_ms / 1e3
}

/// The rate that clears `task`'s queue beyond one batch within 90 % of its target.
fn backlog(task: &TaskSnapshot, slo_ms: f64) -> f64 {
    let ceiling = u64::from(task.active.max_batch_size.max(1));
    task.queue_length.saturating_sub(ceiling) as f64 * 1e3 / (0.9 * slo_ms)
}

/// The cores of the instances `target` must load: those beyond its variant's warm ones.
fn loading_cores(task: &TaskSnapshot, target: Allocation) -> f64 {
    if target.load_s == 0.0 {
        return 0.0;
    }
    let variant = &task.variants[target.variant];
    let warm = if variant.state == VariantState::Ready { variant.instances.min(target.instances) } else { 0 };
    target.cores * f64::from(target.instances - warm) / f64::from(target.instances.max(1))
}

impl Autoscale {
    /// How fast `task`'s rate rises, requests a second per second: the change of the
    /// 1 s rate over at least a second, where the level moved (see [`arriving`]); 0
    /// where it holds or falls.
    fn rising(&mut self, task: &TaskSnapshot, now_ms: u64) -> f64 {
        let per_s = task.demand.per_s_1s;
        let then = self.state.last_rate.get(&task.name).copied();
        let slope = match then {
            Some((at, then_per_s)) if now_ms > at && level_moved(&task.demand) => {
                (per_s - then_per_s).max(0.0) * 1e3 / (now_ms - at).max(1_000) as f64
            }
            _ => 0.0,
        };
        if then.is_none_or(|(at, _)| now_ms >= at + 1_000) {
            self.state.last_rate.insert(task.name.clone(), (now_ms, per_s));
        }
        slope
    }

    /// Requests a second that arrived since the last tick, two standard deviations
    /// below what was counted (0 at the first tick).
    fn recent_rate(&mut self, task: &TaskSnapshot, now_ms: u64) -> f64 {
        let last = self.state.last_seen.insert(task.name.clone(), (now_ms, task.in_flight));
        let Some((then_ms, in_flight_then)) = last.filter(|&(then, _)| now_ms > then + 100) else { return 0.0 };
        let arrived = (task.completed + task.rejections + task.in_flight).saturating_sub(in_flight_then) as f64;
        (arrived - 2.0 * arrived.sqrt()).max(0.0) * 1e3 / (now_ms - then_ms) as f64
    }

    /// What `task` must be asked to move towards `target`, by the rules of the crate's
    /// docs; `None` to keep what it has.
    fn towards(
        &mut self,
        task: &TaskSnapshot,
        need: &Need,
        target: Allocation,
        shared_pool_cores: f64,
        machine: Machine,
        now_ms: u64,
    ) -> Option<TaskDecision> {
        let name = &task.name;
        let active = task.active_index()?;
        let serving = task.variants[active].instances.max(1);
        let current = need.options.iter().find(|o| o.variant == active && o.instances == serving).copied();
        let held = task.cores_held(shared_pool_cores);
        let keeps_up = current.is_some_and(|c| c.capacity >= need.demand);
        let same = target.variant == active && target.instances == serving;
        let fewer = target.cores < held - 1e-9;
        let low = self.state.low_ticks.entry(name.clone()).or_default();
        *low = if same {
            0
        } else if fewer && keeps_up {
            *low + 1
        } else {
            0
        };
        let waited = *low >= self.parameters.scale_down_after_ticks;
        let settled =
            self.state.last_change_ms.get(name).is_none_or(|&at| now_ms >= at + self.parameters.step_up_after_ms);
        let more_accurate = target.accuracy > task.variants[active].accuracy;
        let go = if same {
            false
        } else if !keeps_up || target.cores > held + 1e-9 {
            true
        } else if fewer {
            waited
        } else {
            !more_accurate || settled
        };
        let mut decision = TaskDecision::keep(name);
        if go {
            self.state.low_ticks.insert(name.clone(), 0);
            self.state.last_change_ms.insert(name.clone(), now_ms);
            let target_name = task.variants[target.variant].name.clone();
            // A variant that serves what arrives, on the share of its cores the loading
            // leaves it, keeps serving while instances load beside it; stepping away
            // only for the margin would cost accuracy.
            let share = machine.share_while_loading(loading_cores(task, target));
            let behind = current.is_none_or(|c| c.capacity * share < need.arriving);
            let bridge = (target.load_s > 0.0 && behind).then(|| self.bridge(task, need, target)).flatten();
            match bridge {
                Some(bridge) => {
                    decision.variant = Some(task.variants[bridge].name.clone());
                    decision.standby.insert(target_name, target.instances);
                }
                None if target.variant == active => decision.instances = Some(target.instances),
                None => {
                    decision.variant = Some(target_name);
                    decision.instances = Some(target.instances);
                }
            }
        }
        if self.parameters.keep_cheaper_loaded
            && let Some(cheaper) = self.cheaper_to_keep(task, if go { target.variant } else { active })
        {
            decision.load.push(cheaper);
        }
        (!decision.is_empty()).then_some(decision)
    }

    /// The most accurate variant other than the target's whose warm instances serve the
    /// demand now: what serves while the target's instances load.
    fn bridge(&self, task: &TaskSnapshot, need: &Need, target: Allocation) -> Option<usize> {
        need.options
            .iter()
            .filter(|o| o.variant != target.variant && o.load_s == 0.0 && o.capacity >= need.demand)
            .filter(|o| {
                task.variants[o.variant].state == VariantState::Ready
                    && o.instances == task.variants[o.variant].instances.max(1)
            })
            .max_by(|a, b| a.accuracy.total_cmp(&b.accuracy))
            .map(|o| o.variant)
    }

    /// The most accurate variant below `serving` that may serve and is not loaded, to
    /// load.
    fn cheaper_to_keep(&self, task: &TaskSnapshot, serving: usize) -> Option<String> {
        let accuracy = task.variants[serving].accuracy;
        let below = task
            .variants
            .iter()
            .filter(|v| v.may_serve() && v.accuracy < accuracy && options::line(v).is_some())
            .max_by(|a, b| a.accuracy.total_cmp(&b.accuracy))?;
        (below.state == VariantState::Unloaded).then(|| below.name.clone())
    }
}

modelless_policy_abi::export_policy!(Autoscale);

#[cfg(test)]
mod tests;
