//! INFaaS's rule: serve each task with the cheapest variant (by profiled maximal
//! throughput) whose predicted latency at the current load meets the task's latency
//! target and whose accuracy meets its floor.
//!
//! The prediction uses the variant's latency fit `L(b) = a·b + c`: the smallest batch
//! `b` (up to the task's `max_batch_size`) whose throughput `b / L(b)` keeps up with
//! the demand over the last 10 s, and then a request waits for at most one batch
//! before its own, so its latency is about `2·L(b)`. When no variant meets the target,
//! the one predicted fastest among those accurate enough serves. Accuracy floors come
//! from the parameters (`{"min_accuracy": {"task": 70.0}}`); a task without one has
//! none. A task without a latency target, or whose variants lack profiles, is left
//! alone.

use std::collections::BTreeMap;

use modelless_policy_abi::guest::{Error, NoState, Policy};
use modelless_policy_abi::{Decision, Snapshot, TaskDecision, TaskSnapshot, VariantSnapshot};
use serde::Deserialize;

/// Parameters (the `init` JSON).
#[derive(Clone, Debug, Default, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Parameters {
    /// Accuracy floor per task.
    pub min_accuracy: BTreeMap<String, f64>,
}

/// The policy.
#[derive(Debug, Default)]
pub struct CheapestMeetingSlo {
    parameters: Parameters,
}

impl Policy for CheapestMeetingSlo {
    type Parameters = Parameters;
    type State = NoState;

    fn new(parameters: Parameters) -> Result<Self, Error> {
        Ok(CheapestMeetingSlo { parameters })
    }

    fn decide(&mut self, snapshot: &Snapshot) -> Result<Decision, Error> {
        let tasks = snapshot
            .tasks
            .iter()
            .filter_map(|task| {
                let choice = self.choose(task)?;
                (choice != task.active.variant).then(|| TaskDecision::switch(&task.name, choice))
            })
            .collect();
        Ok(Decision { tasks })
    }
}

impl CheapestMeetingSlo {
    /// The variant for `task`, when the rule has an answer.
    fn choose(&self, task: &TaskSnapshot) -> Option<String> {
        let target = task.slo_latency_ms?;
        let floor = self.parameters.min_accuracy.get(&task.name).copied().unwrap_or(f64::MIN);
        let max_batch = task.active.max_batch_size.max(1);
        let candidates: Vec<(&VariantSnapshot, f64, f64)> = task
            .variants
            .iter()
            .filter(|v| v.accuracy >= floor)
            .filter_map(|v| {
                let latency = predicted_latency_ms(v, task.demand.per_s_10s, max_batch)?;
                let cost = 1.0 / v.profile.as_ref()?.max_throughput?.requests_per_s;
                Some((v, latency, cost))
            })
            .collect();
        let meeting = candidates.iter().filter(|c| c.1 <= target).min_by(|a, b| a.2.total_cmp(&b.2));
        let chosen = meeting.or_else(|| candidates.iter().min_by(|a, b| a.1.total_cmp(&b.1)))?;
        Some(chosen.0.name.clone())
    }
}

/// About `2·L(b)` at the smallest batch that keeps up with `demand`; `None` without a
/// fit, or when no batch up to `max_batch` keeps up.
fn predicted_latency_ms(variant: &VariantSnapshot, demand: f64, max_batch: u32) -> Option<f64> {
    let fit = variant.profile.as_ref()?.fit?;
    (1..=max_batch).find_map(|b| {
        let latency = fit.a_ms * f64::from(b) + fit.c_ms;
        (latency > 0.0 && f64::from(b) / latency * 1e3 >= demand).then_some(2.0 * latency)
    })
}

modelless_policy_abi::export_policy!(CheapestMeetingSlo);

#[cfg(test)]
mod tests {
    use modelless_policy_abi::{Demand, LatencyFit, ServingKnobs, Throughput, VariantCost};

    use super::*;

    /// (name, accuracy, a ms/row, c ms): throughput from the fit at batch 8.
    const FAMILY: [(&str, f64, f64, f64); 3] =
        [("small", 60.0, 2.0, 1.0), ("medium", 70.0, 4.0, 2.0), ("large", 75.0, 8.0, 4.0)];

    fn task(demand: f64, slo_ms: f64) -> TaskSnapshot {
        let variants = FAMILY
            .iter()
            .map(|&(name, accuracy, a_ms, c_ms)| VariantSnapshot {
                name: name.into(),
                accuracy,
                profile: Some(VariantCost {
                    fit: Some(LatencyFit { a_ms, c_ms, r2: 0.999 }),
                    max_throughput: Some(Throughput { requests_per_s: 8e3 / (8.0 * a_ms + c_ms), batch_size: 8 }),
                    ..VariantCost::default()
                }),
                ..VariantSnapshot::default()
            })
            .collect();
        TaskSnapshot {
            name: "t".into(),
            demand: Demand { per_s_10s: demand, ..Demand::default() },
            slo_latency_ms: Some(slo_ms),
            active: ServingKnobs { variant: "large".into(), max_batch_size: 8, ..ServingKnobs::default() },
            variants,
            ..TaskSnapshot::default()
        }
    }

    fn floor(accuracy: f64) -> Parameters {
        Parameters { min_accuracy: [("t".to_string(), accuracy)].into() }
    }

    fn chosen(policy: &mut CheapestMeetingSlo, task: TaskSnapshot) -> Option<String> {
        let snapshot = Snapshot { tasks: vec![task], ..Snapshot::default() };
        policy.decide(&snapshot).unwrap().tasks.first().and_then(|t| t.variant.clone())
    }

    #[test]
    fn the_cheapest_variant_meeting_the_target_serves() {
        let mut policy = CheapestMeetingSlo::default();
        assert_eq!(chosen(&mut policy, task(10.0, 100.0)), Some("small".into()));
    }

    #[test]
    fn an_accuracy_floor_rules_out_cheaper_variants() {
        let mut policy = CheapestMeetingSlo::new(floor(65.0)).unwrap();
        assert_eq!(chosen(&mut policy, task(10.0, 100.0)), Some("medium".into()));
        policy = CheapestMeetingSlo::new(floor(74.0)).unwrap();
        assert_eq!(chosen(&mut policy, task(10.0, 100.0)), None, "large is already active");
    }

    #[test]
    fn under_heavy_load_the_prediction_rules_out_slow_variants() {
        // At 200 requests a second `large` cannot keep up at any batch up to 8, and
        // `medium` needs batches of 2 (10 ms, 20 ms predicted).
        let heavy = task(200.0, 15.0);
        assert_eq!(predicted_latency_ms(&heavy.variants[2], 200.0, 8), None);
        assert_eq!(predicted_latency_ms(&heavy.variants[1], 200.0, 8), Some(20.0));
        let mut policy = CheapestMeetingSlo::new(floor(65.0)).unwrap();
        // Nothing accurate enough meets 15 ms: the fastest accurate enough serves.
        assert_eq!(chosen(&mut policy, heavy), Some("medium".into()));
    }

    #[test]
    fn without_a_target_nothing_changes() {
        let mut no_target = task(10.0, 100.0);
        no_target.slo_latency_ms = None;
        assert_eq!(chosen(&mut CheapestMeetingSlo::default(), no_target), None);
    }
}
