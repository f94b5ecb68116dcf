//! A task's demand against what this replica can serve of it within its latency
//! target: the figure a fleet's autoscaler scales replicas on.

use super::*;
use crate::model::MAX_INSTANCES;
use crate::profile::{capacity_within_slo, demand_ratio, instances_within};

impl Task {
    /// The most requests a second this replica answers within the task's latency
    /// target at its best allocation: every variant that may serve it, with a trusted
    /// line, given all of `cores` in instances of its own threads (one instance where
    /// it runs on the shared pool), at its batch ceiling; the best of them. `None`
    /// without a target or a priced variant.
    pub fn capacity_per_s(&self, cores: f64) -> Option<f64> {
        let slo_ms = self.latency_slo_ms?;
        let inner = self.lock();
        inner
            .variants
            .iter()
            .filter(|slot| slot.misfit.is_none())
            .filter_map(|slot| {
                let fit = slot.profile()?.fit.filter(LatencyFit::is_trusted)?;
                let threads = share::cores_of(&slot.config);
                let instances =
                    if threads > 0.0 { instances_within(Some(cores), threads, MAX_INSTANCES as u32) } else { 1 };
                let ceiling = u32::try_from(slot.ceiling()).unwrap_or(u32::MAX);
                Some(capacity_within_slo(&fit, ceiling, instances, slo_ms))
            })
            .reduce(f64::max)
    }

    /// The requests a second arriving (`arriving_per_s`: the 10 s rate, or the last
    /// second's where the level moved), with the headroom its recent surges ask for
    /// (`demand_surge_weight`) and the rise its rate shows carried `demand_lead_s`
    /// ahead, against [`Task::capacity_per_s`] with `cores`: 1 is all
    /// this replica can serve within the target; infinite where demand meets no
    /// capacity, `None` without a target or a priced variant.
    pub fn demand_ratio(&self, cores: f64) -> Option<f64> {
        let capacity = self.capacity_per_s(cores)?;
        demand_ratio(self.traffic.demand_ahead(self.demand_surge_weight, self.demand_lead_s), capacity)
    }
}
