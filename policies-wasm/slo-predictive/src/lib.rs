//! The SLO-predictive policy: for each task with a latency target, predict every
//! profiled variant's p99 at the demand expected over the next ticks, and serve the
//! most accurate one predicted to stay under the target with headroom.
//!
//! - Demand ahead: the larger of the 1 s and 10 s rates, plus the trend between the
//!   10 s and the 60 s rates carried `horizon_s` ahead when it rises (a falling trend
//!   is not trusted: load may come back).
//! - For a variant with fit `L(b) = a·b + c`: the smallest batch `b` (up to the task's
//!   ceiling) whose throughput `b / L(b)` keeps utilisation `ρ = λ·L(b)/b` under
//!   `max_utilisation`; p99 ≈ `2·L(b)` (the batch ahead and its own) plus the queueing
//!   wait `L(b)·ρ/(1−ρ)·ln(100)` (the 99th percentile of an exponential wait of that
//!   mean).
//! - Step down at once when the variant serving is predicted over the target, or the
//!   observed p99 is; step up only when the better variant is predicted safe and the
//!   last change is `step_up_after_ms` old.
//! - Each tick it also sets the batch size to that `b` and the queue delay to the time
//!   `b` requests take to arrive, capped at a tenth of the target.

use std::collections::BTreeMap;

use modelless_policy_abi::guest::Policy;
use modelless_policy_abi::{Decision, Snapshot, TaskDecision, TaskSnapshot};
use serde::Deserialize;

/// Parameters (the `init` JSON); every field is optional.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Parameters {
    /// Share of the target a prediction may use.
    pub headroom: f64,
    /// Highest utilisation a variant may be predicted to run at.
    pub max_utilisation: f64,
    /// How far ahead a rising demand is carried, in s.
    pub horizon_s: f64,
    /// Least time after a change before a step up, in ms.
    pub step_up_after_ms: u64,
    /// Largest batch considered where the profiles set no memory limit (the runtime
    /// clamps it to the variant's configured one).
    pub max_batch_size: u32,
}

impl Default for Parameters {
    fn default() -> Self {
        Parameters {
            headroom: 0.8,
            max_utilisation: 0.85,
            horizon_s: 10.0,
            step_up_after_ms: 10_000,
            max_batch_size: 32,
        }
    }
}

/// The policy: its parameters and when it last switched each task.
#[derive(Debug, Default)]
pub struct SloPredictive {
    parameters: Parameters,
    last_switch_ms: BTreeMap<String, u64>,
}

/// What a variant is predicted to do at the demand ahead.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Prediction {
    /// The batch size it needs.
    pub batch: u32,
    /// Its predicted p99, in ms.
    pub p99_ms: f64,
}

impl Policy for SloPredictive {
    fn decide(&mut self, snapshot: &Snapshot) -> Decision {
        let tasks = snapshot.tasks.iter().filter_map(|t| self.decide_task(t, snapshot.now_ms)).collect();
        Decision { tasks }
    }

    fn init(&mut self, parameters: &serde_json::Value) -> Result<(), String> {
        self.parameters = serde_json::from_value(parameters.clone()).map_err(|e| e.to_string())?;
        Ok(())
    }

    fn save_state(&self) -> Option<serde_json::Value> {
        serde_json::to_value(&self.last_switch_ms).ok()
    }

    fn load_state(&mut self, state: serde_json::Value) -> Result<(), String> {
        self.last_switch_ms = serde_json::from_value(state).map_err(|e| e.to_string())?;
        Ok(())
    }
}

impl SloPredictive {
    /// Requests per second expected over the horizon.
    pub fn demand_ahead(&self, task: &TaskSnapshot) -> f64 {
        let d = &task.demand;
        // The 10 s window is centred 5 s ago, the 60 s one 30 s ago.
        let trend_per_s = ((d.per_s_10s - d.per_s_60s) / 25.0).max(0.0);
        d.per_s_1s.max(d.per_s_10s) + trend_per_s * self.parameters.horizon_s
    }

    /// The variant's best batch and its p99 at `demand`, when it has a fit and some
    /// batch up to `ceiling` keeps up.
    pub fn predict(&self, a_ms: f64, c_ms: f64, demand: f64, ceiling: u32) -> Option<Prediction> {
        (1..=ceiling.max(1))
            .filter_map(|b| {
                let latency = a_ms * f64::from(b) + c_ms.max(0.0);
                let utilisation = demand * latency / 1e3 / f64::from(b);
                (latency > 0.0 && utilisation < self.parameters.max_utilisation).then(|| {
                    let wait = latency * utilisation / (1.0 - utilisation) * 100f64.ln();
                    Prediction { batch: b, p99_ms: 2.0 * latency + wait }
                })
            })
            .min_by(|x, y| x.p99_ms.total_cmp(&y.p99_ms))
    }

    fn decide_task(&mut self, task: &TaskSnapshot, now_ms: u64) -> Option<TaskDecision> {
        let target = task.slo_latency_ms?;
        let budget = target * self.parameters.headroom;
        let demand = self.demand_ahead(task);
        let ceiling = task.variants.iter().filter_map(|v| v.profile.as_ref()?.max_safe_batch).min();
        let ceiling = ceiling.unwrap_or(self.parameters.max_batch_size);
        let predicted: Vec<(&str, f64, Option<Prediction>)> = task
            .variants
            .iter()
            .filter_map(|v| {
                let fit = v.profile.as_ref()?.fit?;
                Some((v.name.as_str(), v.accuracy, self.predict(fit.a_ms, fit.c_ms, demand, ceiling)))
            })
            .collect();
        let active = predicted.iter().find(|p| p.0 == task.active.variant)?;
        let safe = |p: &&(&str, f64, Option<Prediction>)| p.2.is_some_and(|q| q.p99_ms <= budget);
        let best_safe = predicted.iter().filter(safe).max_by(|x, y| x.1.total_cmp(&y.1));
        let fastest = predicted.iter().filter(|p| p.2.is_some()).min_by(|x, y| {
            let p99 = |p: &(&str, f64, Option<Prediction>)| p.2.map_or(f64::MAX, |q| q.p99_ms);
            p99(x).total_cmp(&p99(y))
        });
        let observed_over = task.latency_ms.is_some_and(|l| l.p99 > target);
        let active_unsafe = !safe(&active) || observed_over;
        let recently =
            self.last_switch_ms.get(&task.name).is_some_and(|&at| now_ms < at + self.parameters.step_up_after_ms);
        let by_accuracy =
            |x: &&(&str, f64, Option<Prediction>), y: &&(&str, f64, Option<Prediction>)| x.1.total_cmp(&y.1);
        let chosen = if active_unsafe {
            // Down at once: the most accurate safe variant below the active one.
            let lower = predicted.iter().filter(safe).filter(|p| p.1 < active.1).max_by(by_accuracy);
            lower.or(fastest).unwrap_or(active)
        } else {
            // Up only when the last change has settled.
            match best_safe {
                Some(best) if best.1 > active.1 && !recently => best,
                _ => active,
            }
        };
        let prediction = chosen.2?;
        let delay_us =
            if demand > 0.0 { (f64::from(prediction.batch - 1) / demand * 1e6).min(target * 100.0) } else { 0.0 };
        let mut decision = TaskDecision {
            max_batch_size: Some(prediction.batch.max(1)).filter(|&b| b != task.active.max_batch_size),
            max_queue_delay_us: Some(delay_us as u64).filter(|&d| d != task.active.max_queue_delay_us),
            ..TaskDecision::keep(&task.name)
        };
        if chosen.0 != task.active.variant {
            decision.variant = Some(chosen.0.to_string());
            self.last_switch_ms.insert(task.name.clone(), now_ms);
        }
        (!decision.is_empty()).then_some(decision)
    }
}

modelless_policy_abi::export_policy!(SloPredictive);

#[cfg(test)]
mod tests {
    use modelless_policy_abi::{Demand, LatencyFit, ServingKnobs, VariantCost, VariantSnapshot};

    use super::*;

    /// (name, accuracy, a ms/row, c ms).
    const FAMILY: [(&str, f64, f64, f64); 3] =
        [("small", 60.0, 1.0, 1.0), ("medium", 70.0, 2.0, 2.0), ("large", 75.0, 4.0, 4.0)];

    fn task(active: &str, per_s_1s: f64, per_s_10s: f64, per_s_60s: f64) -> TaskSnapshot {
        let variants = FAMILY
            .iter()
            .map(|&(name, accuracy, a_ms, c_ms)| VariantSnapshot {
                name: name.into(),
                accuracy,
                profile: Some(VariantCost {
                    fit: Some(LatencyFit { a_ms, c_ms, r2: 0.999 }),
                    ..VariantCost::default()
                }),
                ..VariantSnapshot::default()
            })
            .collect();
        TaskSnapshot {
            name: "t".into(),
            demand: Demand { per_s_1s, per_s_10s, per_s_60s },
            slo_latency_ms: Some(100.0),
            active: ServingKnobs { variant: active.into(), max_batch_size: 8, ..ServingKnobs::default() },
            variants,
            ..TaskSnapshot::default()
        }
    }

    fn decide(policy: &mut SloPredictive, now_s: u64, task: TaskSnapshot) -> Option<TaskDecision> {
        let snapshot = Snapshot { now_ms: now_s * 1000, tasks: vec![task], ..Snapshot::default() };
        policy.decide(&snapshot).tasks.into_iter().next()
    }

    #[test]
    fn at_low_load_the_most_accurate_variant_serves_with_a_small_batch() {
        let decision = decide(&mut SloPredictive::default(), 0, task("medium", 20.0, 20.0, 20.0)).unwrap();
        assert_eq!(decision.variant.as_deref(), Some("large"));
        assert_eq!(decision.max_batch_size, Some(1));
        assert_eq!(decision.max_queue_delay_us, None, "no delay at batch 1, as now");
    }

    #[test]
    fn a_load_the_large_variant_cannot_keep_up_with_goes_to_one_that_can() {
        let policy = SloPredictive::default();
        assert_eq!(policy.predict(4.0, 4.0, 150.0, 32).map(|p| p.p99_ms <= 80.0), Some(false));
        let decision = decide(&mut SloPredictive::default(), 0, task("large", 150.0, 150.0, 150.0)).unwrap();
        assert_eq!(decision.variant.as_deref(), Some("medium"));
    }

    #[test]
    fn a_rising_demand_steps_down_before_the_target_is_missed() {
        // At a steady 60 requests a second `large` is predicted safe.
        assert_eq!(
            decide(&mut SloPredictive::default(), 0, task("large", 60.0, 60.0, 60.0)).and_then(|d| d.variant),
            None
        );
        // The same 60 now, but rising from nothing a minute ago: 84 expected ahead.
        let policy = SloPredictive::default();
        let rising = task("large", 60.0, 60.0, 0.0);
        assert!((policy.demand_ahead(&rising) - 84.0).abs() < 1e-9);
        let decision = decide(&mut SloPredictive::default(), 0, rising).unwrap();
        assert_eq!(decision.variant.as_deref(), Some("medium"));
    }

    #[test]
    fn a_step_up_waits_for_the_last_change_to_settle() {
        let mut policy = SloPredictive::default();
        let down = decide(&mut policy, 0, task("large", 150.0, 150.0, 150.0)).unwrap();
        assert_eq!(down.variant.as_deref(), Some("medium"));
        let mut quiet = |s| decide(&mut policy, s, task("medium", 20.0, 20.0, 20.0)).and_then(|d| d.variant);
        assert_eq!(quiet(5), None, "5 s after the change");
        assert_eq!(quiet(10), Some("large".into()), "10 s after it");
    }

    #[test]
    fn an_observed_p99_over_the_target_steps_down_whatever_the_prediction() {
        let mut over = task("medium", 20.0, 20.0, 20.0);
        over.latency_ms = Some(modelless_policy_abi::LatencySummary { p50: 50.0, p95: 90.0, p99: 120.0 });
        // `large` is predicted safe at 20 requests a second, but what is observed wins.
        assert_eq!(decide(&mut SloPredictive::default(), 0, over).and_then(|d| d.variant), Some("small".into()));
    }
}
