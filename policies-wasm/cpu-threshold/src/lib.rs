//! The CPU-threshold policy (the TU Delft thesis's "trivial policy"), with its
//! published parameters as defaults:
//!
//! - Each task's variants form a chain ordered by profiled maximal throughput, from the
//!   most accurate down, each link at least 40 % cheaper (cost: the inverse of
//!   maximal throughput) than the one before; variants without a profile stay out.
//! - Step down one link when the mean host CPU over the last 10 s is above 70 %; step
//!   up one link when its maximum over the last 10 s is below 50 % and 30 s have
//!   passed since the last change; never more than one change per 15 s.
//! - A step up must keep the CPU predicted from demand × inverse throughput at or
//!   below 65 %. The prediction is trusted only up to 1.2 × the observed utilisation:
//!   the machine is assumed to get at least that much busier, whatever the model says.
//! - With several tasks, the one losing the least normalised accuracy (accuracy over
//!   the task's best) per unit of demand-weighted cost saved steps down first; the one
//!   gaining the most per unit of cost added steps up first.

use std::collections::VecDeque;

use modelless_policy_abi::guest::{Error, Policy};
use modelless_policy_abi::{Decision, Snapshot, TaskDecision, TaskSnapshot};
use serde::{Deserialize, Serialize};

/// The policy's parameters (its `init` JSON); every field is optional.
#[derive(Clone, Debug, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Parameters {
    /// Step down above this mean CPU, in %.
    pub step_down_above: f64,
    /// Step up below this maximum CPU, in %.
    pub step_up_below: f64,
    /// The CPU a step up may predict, in %.
    pub step_up_target: f64,
    /// How far the prediction is trusted below the observed utilisation.
    pub trust_factor: f64,
    /// The window CPU is averaged over, in ms.
    pub window_ms: u64,
    /// Least time between two changes, in ms.
    pub min_interval_ms: u64,
    /// Least time after a change before a step up, in ms.
    pub step_up_after_ms: u64,
    /// Least cost cut from one link of a chain to the next.
    pub min_cost_cut: f64,
}

impl Default for Parameters {
    fn default() -> Self {
        Parameters {
            step_down_above: 70.0,
            step_up_below: 50.0,
            step_up_target: 65.0,
            trust_factor: 1.2,
            window_ms: 10_000,
            min_interval_ms: 15_000,
            step_up_after_ms: 30_000,
            min_cost_cut: 0.4,
        }
    }
}

/// The policy: its parameters, and what it remembers.
#[derive(Debug, Default)]
pub struct CpuThreshold {
    parameters: Parameters,
    state: State,
}

/// A link of a task's chain: a variant, its cost (seconds per request) and its
/// normalised accuracy.
#[derive(Clone, Debug, PartialEq)]
struct Link {
    variant: String,
    cost: f64,
    accuracy: f64,
}

/// A possible step of one task: to `to`, changing accuracy and demand-weighted cost.
#[derive(Clone, Debug)]
struct Step {
    task: String,
    to: String,
    accuracy_change: f64,
    cost_change: f64,
}

/// What the policy remembers, and carries over to the module that replaces it:
/// recent CPU, and when it last changed anything.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct State {
    cpu: VecDeque<(u64, f64)>,
    last_change_ms: Option<u64>,
}

impl Policy for CpuThreshold {
    type Parameters = Parameters;
    type State = State;

    fn new(parameters: Parameters) -> Result<Self, Error> {
        Ok(CpuThreshold { parameters, ..CpuThreshold::default() })
    }

    fn decide(&mut self, snapshot: &Snapshot) -> Result<Decision, Error> {
        let now = snapshot.now_ms;
        if let Some(cpu) = snapshot.system.cpu_host_percent {
            self.state.cpu.push_back((now, cpu));
        }
        let window = self.parameters.window_ms;
        while self.state.cpu.front().is_some_and(|&(at, _)| at + window < now) {
            self.state.cpu.pop_front();
        }
        let Some((mean, max)) = self.cpu_summary() else { return Ok(Decision::default()) };
        let since_change = self.state.last_change_ms.map_or(u64::MAX, |at| now.saturating_sub(at));
        if since_change < self.parameters.min_interval_ms {
            return Ok(Decision::default());
        }
        let step = if mean > self.parameters.step_down_above {
            self.step_down(&snapshot.tasks)
        } else if max < self.parameters.step_up_below && since_change >= self.parameters.step_up_after_ms {
            self.step_up(&snapshot.tasks, mean, snapshot.system.cores.max(1))
        } else {
            None
        };
        let Some(step) = step else { return Ok(Decision::default()) };
        self.state.last_change_ms = Some(now);
        log::info!("{} steps to {}", step.task, step.to);
        Ok(Decision { tasks: vec![TaskDecision::switch(step.task, step.to)] })
    }

    fn state(&mut self) -> Option<&mut State> {
        Some(&mut self.state)
    }
}

impl CpuThreshold {
    /// Mean and maximum CPU over the window.
    fn cpu_summary(&self) -> Option<(f64, f64)> {
        let n = self.state.cpu.len();
        (n > 0).then(|| {
            let sum: f64 = self.state.cpu.iter().map(|c| c.1).sum();
            (sum / n as f64, self.state.cpu.iter().map(|c| c.1).fold(f64::MIN, f64::max))
        })
    }

    /// The task losing least accuracy per unit of demand-weighted cost saved.
    fn step_down(&self, tasks: &[TaskSnapshot]) -> Option<Step> {
        let steps = tasks.iter().filter_map(|t| self.neighbour(t, 1));
        steps
            .filter(|s| s.cost_change < 0.0)
            .min_by(|a, b| (-a.accuracy_change / -a.cost_change).total_cmp(&(-b.accuracy_change / -b.cost_change)))
    }

    /// The task gaining most accuracy per unit of cost added whose step keeps the
    /// predicted CPU at or below the target.
    fn step_up(&self, tasks: &[TaskSnapshot], observed: f64, cores: u32) -> Option<Step> {
        let modelled_now: f64 = tasks.iter().filter_map(|t| self.utilisation(t, cores)).sum();
        let p = &self.parameters;
        tasks
            .iter()
            .filter_map(|t| self.neighbour(t, -1))
            .filter(|s| s.cost_change > 0.0)
            .filter(|s| {
                // Cost is seconds per request, so demand-weighted cost is core-seconds per second.
                let modelled = modelled_now + 100.0 * s.cost_change / f64::from(cores);
                modelled.max(p.trust_factor * observed) <= p.step_up_target
            })
            .max_by(|a, b| (a.accuracy_change / a.cost_change).total_cmp(&(b.accuracy_change / b.cost_change)))
    }

    /// The CPU (in % of all cores) the task's demand takes on its active variant, by
    /// its profile.
    fn utilisation(&self, task: &TaskSnapshot, cores: u32) -> Option<f64> {
        let link = self.chain(task).into_iter().find(|l| l.variant == task.active.variant)?;
        Some(100.0 * task.demand.per_s_10s * link.cost / f64::from(cores))
    }

    /// The step `direction` links along the task's chain (1: down, -1: up).
    fn neighbour(&self, task: &TaskSnapshot, direction: isize) -> Option<Step> {
        let chain = self.chain(task);
        let at = position(&chain, &task.active.variant, task)?;
        let to = chain.get(at.checked_add_signed(direction)?)?;
        let from = &chain[at];
        let demand = task.demand.per_s_10s.max(1e-3);
        Some(Step {
            task: task.name.clone(),
            to: to.variant.clone(),
            accuracy_change: to.accuracy - from.accuracy,
            cost_change: demand * (to.cost - from.cost),
        })
    }

    /// The task's chain, most accurate first, each link at least `min_cost_cut`
    /// cheaper than the one before.
    fn chain(&self, task: &TaskSnapshot) -> Vec<Link> {
        let best = task.variants.iter().map(|v| v.accuracy).fold(f64::MIN, f64::max);
        let mut links: Vec<Link> = task
            .variants
            .iter()
            .filter_map(|v| {
                let per_s = v.profile.as_ref()?.max_throughput?.requests_per_s;
                (per_s > 0.0).then(|| Link { variant: v.name.clone(), cost: 1.0 / per_s, accuracy: v.accuracy / best })
            })
            .collect();
        links.sort_by(|a, b| b.cost.total_cmp(&a.cost));
        let mut chain: Vec<Link> = Vec::new();
        for link in links {
            match chain.last() {
                Some(last) if link.cost > (1.0 - self.parameters.min_cost_cut) * last.cost => {}
                _ => chain.push(link),
            }
        }
        chain
    }
}

/// Where the active variant sits in the chain: its own link, or else the link of the
/// nearest cost.
fn position(chain: &[Link], active: &str, task: &TaskSnapshot) -> Option<usize> {
    if let Some(at) = chain.iter().position(|l| l.variant == active) {
        return Some(at);
    }
    let cost = task.variant(active)?.profile.as_ref()?.max_throughput?.requests_per_s;
    let cost = 1.0 / cost;
    (0..chain.len()).min_by(|&a, &b| (chain[a].cost - cost).abs().total_cmp(&(chain[b].cost - cost).abs()))
}

modelless_policy_abi::export_policy!(CpuThreshold);

#[cfg(test)]
mod tests {
    use modelless_policy_abi::guest::configured;
    use modelless_policy_abi::{Demand, ServingKnobs, SystemSnapshot, Throughput, VariantCost, VariantSnapshot};

    use super::*;

    /// MobileNetV2 widths 0.35 to 1.4: published top-1, throughput as profiled here.
    const FAMILY: [(&str, f64, f64); 5] = [
        ("0.35", 60.3, 474.1),
        ("0.5", 65.4, 376.7),
        ("0.75", 69.8, 231.3),
        ("1.0", 71.8, 196.1),
        ("1.4", 75.0, 114.5),
    ];

    fn task(name: &str, active: &str, demand: f64) -> TaskSnapshot {
        let variants = FAMILY
            .iter()
            .map(|&(variant, accuracy, per_s)| VariantSnapshot {
                name: variant.into(),
                accuracy,
                profile: Some(VariantCost {
                    max_throughput: Some(Throughput { requests_per_s: per_s, batch_size: 8 }),
                    ..VariantCost::default()
                }),
                ..VariantSnapshot::default()
            })
            .collect();
        TaskSnapshot {
            name: name.into(),
            demand: Demand { per_s_1s: demand, per_s_10s: demand, per_s_60s: demand },
            active: ServingKnobs { variant: active.into(), max_batch_size: 8, ..ServingKnobs::default() },
            variants,
            ..TaskSnapshot::default()
        }
    }

    fn snapshot(now_s: u64, cpu: f64, tasks: Vec<TaskSnapshot>) -> Snapshot {
        let system = SystemSnapshot { cores: 2, cpu_host_percent: Some(cpu), ..SystemSnapshot::default() };
        Snapshot { abi_version: 1, tick: now_s, now_ms: now_s * 1000, tasks, system }
    }

    fn switches(decision: &Decision) -> Vec<(String, String)> {
        decision.tasks.iter().map(|t| (t.task.clone(), t.variant.clone().unwrap_or_default())).collect()
    }

    #[test]
    fn the_chain_cuts_cost_by_forty_percent_a_link() {
        let chain = CpuThreshold::default().chain(&task("t", "1.0", 10.0));
        let names: Vec<&str> = chain.iter().map(|l| l.variant.as_str()).collect();
        assert_eq!(names, vec!["1.4", "1.0", "0.5"]);
        assert!(chain.windows(2).all(|w| w[1].cost <= 0.6 * w[0].cost));
    }

    #[test]
    fn a_busy_cpu_steps_down_once_then_waits() {
        let mut policy = CpuThreshold::default();
        let mut decisions = Vec::new();
        for s in 0..=20 {
            decisions.push(policy.decide(&snapshot(s, 85.0, vec![task("t", "1.0", 150.0)])).unwrap());
        }
        assert_eq!(switches(&decisions[0]), vec![("t".to_string(), "0.5".to_string())]);
        assert!(decisions[1..15].iter().all(|d| d.tasks.is_empty()), "at most one change per 15 s");
        assert_eq!(switches(&decisions[15]), vec![("t".to_string(), "0.5".to_string())], "still busy");
    }

    #[test]
    fn an_idle_cpu_steps_up_only_when_the_prediction_allows_it_and_not_too_soon() {
        let mut policy = CpuThreshold::default();
        // A change at 0 s; idle from then on, with little demand.
        policy.decide(&snapshot(0, 85.0, vec![task("t", "1.0", 20.0)])).unwrap();
        let mut up = None;
        for s in 1..=40 {
            let decision = policy.decide(&snapshot(s, 20.0, vec![task("t", "0.5", 20.0)])).unwrap();
            if !decision.tasks.is_empty() {
                up = Some((s, switches(&decision)));
                break;
            }
        }
        // 10 s of the busy sample to age out is within the 30 s wait anyway.
        assert_eq!(up, Some((30, vec![("t".to_string(), "1.0".to_string())])));
        // At 300 requests a second 0.5 takes 40 % of two cores and 1.0 would take 77 %,
        // over 65 %: no step up, however long the CPU stays under 50 %.
        let mut busy = CpuThreshold::default();
        busy.decide(&snapshot(0, 85.0, vec![task("t", "1.0", 300.0)])).unwrap();
        let later = (1..=60).map(|s| busy.decide(&snapshot(s, 40.0, vec![task("t", "0.5", 300.0)])).unwrap());
        assert!(later.into_iter().all(|d| d.tasks.is_empty()));
    }

    #[test]
    fn with_two_tasks_the_one_losing_least_accuracy_per_cost_saved_steps_down() {
        // Same chains; the busier task saves far more cost for the same accuracy loss.
        let tasks = vec![task("quiet", "1.0", 5.0), task("busy", "1.0", 150.0)];
        let decision = CpuThreshold::default().decide(&snapshot(0, 90.0, tasks)).unwrap();
        assert_eq!(switches(&decision), vec![("busy".to_string(), "0.5".to_string())]);
    }

    #[test]
    fn parameters_and_state_round_trip() {
        let mut policy: CpuThreshold = configured(serde_json::json!({ "step_down_above": 80.0 })).unwrap();
        assert_eq!(policy.parameters.step_down_above, 80.0);
        assert_eq!(policy.parameters.step_up_below, 50.0);
        assert!(configured::<CpuThreshold>(serde_json::json!({ "nonsense": 1 })).is_err());
        policy.decide(&snapshot(3, 90.0, vec![task("t", "1.0", 150.0)])).unwrap();
        let saved = serde_json::to_value(policy.state().unwrap()).unwrap();
        let reloaded: State = serde_json::from_value(saved).unwrap();
        assert_eq!((reloaded.cpu.len(), reloaded.last_change_ms), (1, Some(3000)));
    }
}
