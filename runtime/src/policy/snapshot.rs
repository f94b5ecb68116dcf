//! How a task's readings become what a policy sees. One builder for the control loop
//! and for anything that stands in for a running task (the simulator), so a policy
//! decides on the same figures, rounded the same way, wherever it runs.

use modelless_policy_abi::{Demand, LatencySummary, PhotoTraffic, ServingKnobs, TaskSnapshot, VariantSnapshot};

use crate::metrics::TrafficReading;

/// What is read of one task at a tick.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskReading {
    /// The task's name.
    pub name: String,
    /// Demand, requests in flight, and what happened since the last tick.
    pub traffic: TrafficReading,
    /// Requests waiting in the active variant's queue.
    pub queue_length: u64,
    /// The task's latency target, ms.
    pub slo_latency_ms: Option<f64>,
    /// How the task is served now.
    pub active: ServingKnobs,
    /// Its variants, in configured order.
    pub variants: Vec<VariantSnapshot>,
}

/// The snapshot of one task.
pub fn task_snapshot(reading: TaskReading) -> TaskSnapshot {
    let TaskReading { name, traffic, queue_length, slo_latency_ms, active, variants } = reading;
    let latency =
        traffic.tick.latency().map(|l| LatencySummary { p50: round(l.p50), p95: round(l.p95), p99: round(l.p99) });
    TaskSnapshot {
        name,
        demand: Demand {
            per_s_1s: round(traffic.demand.per_s_1s),
            per_s_10s: round(traffic.demand.per_s_10s),
            per_s_60s: round(traffic.demand.per_s_60s),
        },
        queue_length,
        in_flight: traffic.in_flight,
        latency_ms: latency,
        completed: traffic.tick.latencies_ms.len() as u64,
        slo_violations: traffic.tick.slo_violations,
        rejections: traffic.tick.rejections,
        refusals: traffic.tick.refusals,
        slo_latency_ms,
        active,
        variants: variants.into_iter().map(rounded).collect(),
        photos: traffic
            .photos
            .map(|p| PhotoTraffic { share: (p.share * 100.0).round() / 100.0, mean_bytes: p.mean_bytes.round() }),
    }
}

/// A variant's measured rates and times to 0.1, like the other figures.
fn rounded(mut variant: VariantSnapshot) -> VariantSnapshot {
    if let Some(cost) = variant.profile.as_mut() {
        if let Some(throughput) = cost.max_throughput.as_mut() {
            throughput.requests_per_s = round(throughput.requests_per_s);
        }
        cost.load_ms = cost.load_ms.map(round);
        for photos in &mut cost.photos {
            photos.requests_per_s = round(photos.requests_per_s);
        }
    }
    if let Some(runs) = variant.runs.as_mut() {
        runs.run_ms = round(runs.run_ms);
    }
    variant
}

/// To 0.1: measured figures carry no more, and short numbers parse faster in a policy.
pub fn round(value: f64) -> f64 {
    (value * 10.0).round() / 10.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::TickCounts;
    use modelless_policy_abi::Refusals;

    #[test]
    fn readings_are_rounded_to_a_tenth_and_the_tick_is_summarised() {
        let traffic = TrafficReading {
            demand: Demand { per_s_1s: 10.04, per_s_10s: 9.96, per_s_60s: 1.0 / 3.0 },
            in_flight: 4,
            tick: TickCounts {
                latencies_ms: vec![1.26, 2.0, 30.0],
                slo_violations: 1,
                rejections: 2,
                refusals: Refusals { would_miss_deadline: 1, queue_full: 1, expired: 0 },
            },
            photos: Some(PhotoTraffic { share: 0.666_7, mean_bytes: 40_000.4 }),
        };
        let reading = TaskReading {
            name: "t".into(),
            traffic,
            queue_length: 3,
            slo_latency_ms: Some(25.0),
            active: ServingKnobs { variant: "v".into(), max_batch_size: 4, max_queue_delay_us: 0, instances: 1 },
            variants: Vec::new(),
        };
        let snapshot = task_snapshot(reading);
        assert_eq!(snapshot.demand, Demand { per_s_1s: 10.0, per_s_10s: 10.0, per_s_60s: 0.3 });
        assert_eq!(snapshot.latency_ms, Some(LatencySummary { p50: 2.0, p95: 30.0, p99: 30.0 }));
        assert_eq!((snapshot.completed, snapshot.slo_violations, snapshot.rejections), (3, 1, 2));
        assert_eq!(snapshot.refusals, Refusals { would_miss_deadline: 1, queue_full: 1, expired: 0 });
        assert_eq!((snapshot.queue_length, snapshot.in_flight), (3, 4));
        assert_eq!(snapshot.photos, Some(PhotoTraffic { share: 0.67, mean_bytes: 40_000.0 }));
    }
}
