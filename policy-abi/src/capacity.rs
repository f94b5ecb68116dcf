//! What a replica can serve of a task within its latency target: the figure its
//! demand is held against for Kubernetes (`modelless_task_demand_ratio`), that a
//! fleet's simulation scales on, and that allocating policies size instances by.
//! Pure arithmetic on a variant's profiled line, here so that the runtime, the
//! simulator and policies compute it alike.

use crate::profile::LatencyFit;
use crate::snapshot::Demand;

/// Share of the latency target a request's batch and the one ahead of it may take.
pub const CAPACITY_HEADROOM: f64 = 0.9;

/// Utilisation a variant's instances are planned at: beyond it, bursts queue past the
/// target.
pub const CAPACITY_UTILISATION: f64 = 0.85;

/// Requests a second that `instances` instances of a variant with line `fit`, batching
/// up to `max_batch` rows, answer within `slo_ms`: each at the largest batch whose
/// run, with one like it ahead, fits [`CAPACITY_HEADROOM`] of the target, planned at
/// [`CAPACITY_UTILISATION`]. Zero where not even a batch of one fits, or the line
/// prices no batch.
pub fn capacity_within_slo(fit: &LatencyFit, max_batch: u32, instances: u32, slo_ms: f64) -> f64 {
    let budget_ms = CAPACITY_HEADROOM * slo_ms;
    let within = (1..=max_batch.max(1)).rev().find(|&b| {
        let latency = fit.predict_ms(b);
        latency > 0.0 && 2.0 * latency <= budget_ms
    });
    let Some(batch) = within else { return 0.0 };
    f64::from(instances) * CAPACITY_UTILISATION * 1e3 * f64::from(batch) / fit.predict_ms(batch)
}

/// The most instances of `per_instance_cores` cores each that a budget of `cores`
/// holds, at least one and at most `most`; `most` without a budget, or for instances
/// on the shared pool (0 cores of their own).
pub fn instances_within(cores: Option<f64>, per_instance_cores: f64, most: u32) -> u32 {
    let fit = match cores {
        Some(cores) if per_instance_cores > 0.0 => (cores / per_instance_cores).floor().max(1.0) as u32,
        _ => u32::MAX,
    };
    most.min(fit).max(1)
}

/// Whether a task's last second stands more than three Poisson deviations from its
/// 10 s rate: its level moved (a burst rising, or one gone), more than the noise of a
/// second does but once in several hundred.
pub fn level_moved(demand: &Demand) -> bool {
    (demand.per_s_1s - demand.per_s_10s).abs() > 3.0 * demand.per_s_10s.max(1.0).sqrt()
}

/// Requests a second arriving at a task: its 10 s rate, steady against a second's
/// noise, or its last second's where the level moved ([`level_moved`]), so that a
/// burst counts whole from its first second rather than a tenth of it.
pub fn arriving_per_s(demand: &Demand) -> f64 {
    if level_moved(demand) { demand.per_s_1s } else { demand.per_s_10s }
}

/// Demand over capacity: 1 is a replica serving all it can within the target, above
/// it one that cannot keep up. `None` without a capacity to divide by and with no
/// demand; infinite for demand that no capacity meets.
pub fn demand_ratio(demand_per_s: f64, capacity_per_s: f64) -> Option<f64> {
    if capacity_per_s > 0.0 {
        Some(demand_per_s.max(0.0) / capacity_per_s)
    } else if demand_per_s > 0.0 {
        Some(f64::INFINITY)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fit(a_ms: f64, c_ms: f64) -> LatencyFit {
        LatencyFit { a_ms, c_ms, r2: 1.0 }
    }

    #[test]
    fn capacity_is_the_largest_batch_within_the_target_at_the_planned_utilisation() {
        // 4 ms a row and 4 a batch: a batch of 8 takes 36 ms, twice that 72 under 90.
        let line = fit(4.0, 4.0);
        let expected = CAPACITY_UTILISATION * 1e3 * 8.0 / 36.0;
        assert!((capacity_within_slo(&line, 8, 1, 100.0) - expected).abs() < 1e-9);
        assert!((capacity_within_slo(&line, 8, 3, 100.0) - 3.0 * expected).abs() < 1e-9, "instances add up");
        // Under 50 ms the batch is cut to 4 (20 ms, twice 40 under 45).
        let cut = CAPACITY_UTILISATION * 1e3 * 4.0 / 20.0;
        assert!((capacity_within_slo(&line, 8, 1, 50.0) - cut).abs() < 1e-9);
        assert_eq!(capacity_within_slo(&line, 8, 1, 5.0), 0.0, "not even one row in time");
        assert_eq!(capacity_within_slo(&fit(-1.0, 0.0), 8, 1, 100.0), 0.0, "a line that prices nothing");
    }

    #[test]
    fn a_budget_holds_the_instances_its_cores_fit_at_least_one() {
        assert_eq!(instances_within(Some(4.0), 1.0, 8), 4);
        assert_eq!(instances_within(Some(3.5), 2.0, 8), 1);
        assert_eq!(instances_within(Some(0.5), 1.0, 8), 1, "one, whatever the budget");
        assert_eq!(instances_within(Some(64.0), 1.0, 8), 8);
        assert_eq!(instances_within(None, 1.0, 8), 8);
        assert_eq!(instances_within(Some(2.0), 0.0, 8), 8, "the shared pool's threads are counted once");
    }

    #[test]
    fn a_second_counts_only_where_it_stands_beyond_the_noise_of_ten() {
        let demand = |per_s_1s, per_s_10s| Demand { per_s_1s, per_s_10s, per_s_60s: per_s_10s };
        // 100/s over 10 s: a second's deviation is 10, three of them 30.
        assert_eq!(arriving_per_s(&demand(125.0, 100.0)), 100.0, "noise");
        assert_eq!(arriving_per_s(&demand(75.0, 100.0)), 100.0, "noise");
        assert_eq!(arriving_per_s(&demand(135.0, 100.0)), 135.0, "a burst rising");
        assert_eq!(arriving_per_s(&demand(60.0, 100.0)), 60.0, "one gone");
        assert_eq!(arriving_per_s(&demand(4.0, 0.0)), 4.0, "from nothing, past three of one request's");
        assert!(!level_moved(&demand(2.0, 0.0)));
    }

    #[test]
    fn the_ratio_is_demand_over_capacity_and_unbounded_without_capacity() {
        assert_eq!(demand_ratio(35.0, 50.0), Some(0.7));
        assert_eq!(demand_ratio(0.0, 50.0), Some(0.0));
        assert_eq!(demand_ratio(5.0, 0.0), Some(f64::INFINITY));
        assert_eq!(demand_ratio(0.0, 0.0), None);
    }
}
