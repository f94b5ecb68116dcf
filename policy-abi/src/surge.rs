//! A task's memory of the surges it has heard: the largest jump of its arriving rate
//! within a second beyond the noise (the last second's rate over the 10 s one, where
//! the level moved), held for a while. A surge faster than a fleet's autoscaler follows
//! (a sync, then a pod's start) is answered only by the headroom already held, so the
//! demand ratio asks for headroom in proportion to the surges lately heard: traffic
//! that jumps gets more, traffic that rises slowly none. Pure: time is passed in, in
//! whole seconds; the runtime's traffic window and the fleet's simulation feed it
//! alike.

use std::collections::VecDeque;

use crate::capacity::level_moved;
use crate::snapshot::Demand;

/// How long a surge is remembered, s.
pub const SURGE_MEMORY_S: u64 = 600;

/// Of the largest surge lately heard, the share a task's demand ratio adds as headroom
/// unless its config sets another: the weight with which the manifests' HPA setting
/// held both of the fleet's simulated traces at 99 % within the SLO for at most 0.7 ×
/// static provisioning on each profile measured (docs/allocation.md).
pub const DEMAND_SURGE_WEIGHT: f64 = 0.5;

/// The largest surge counted: a task waking from near silence jumps by any factor,
/// and headroom in proportion to that would hold replicas for a trickle.
pub const MAX_SURGE: f64 = 4.0;

/// Seconds of traffic heard before a jump is judged: a replica's 10 s rate counts
/// the seconds before its first request as quiet ones, and a pod that has just joined
/// a balancer would otherwise read its own arrival as a surge.
const SETTLE_S: u64 = 10;

/// The surges within the memory that no later one as large outdoes, oldest (and
/// largest) first: when the largest is forgotten, the next largest is at hand.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SurgeMemory {
    surges: VecDeque<(u64, f64)>,
    first_heard_s: Option<u64>,
}

impl SurgeMemory {
    /// Hears `demand`, the rates over the complete seconds before second `now_s`.
    pub fn observe(&mut self, demand: &Demand, now_s: u64) {
        if self.first_heard_s.is_none() && demand.per_s_1s > 0.0 {
            self.first_heard_s = Some(now_s);
        }
        let Some(first_s) = self.first_heard_s else { return };
        if now_s < first_s + SETTLE_S || !level_moved(demand) || demand.per_s_10s <= 0.0 {
            return;
        }
        let ratio = (demand.per_s_1s / demand.per_s_10s).min(MAX_SURGE);
        if ratio <= 1.0 {
            return;
        }
        while self.surges.back().is_some_and(|&(_, r)| r <= ratio) {
            self.surges.pop_back();
        }
        self.surges.push_back((now_s, ratio));
        while self.surges.front().is_some_and(|&(at_s, _)| now_s.saturating_sub(at_s) > SURGE_MEMORY_S) {
            self.surges.pop_front();
        }
    }

    /// The largest surge within the memory at `now_s`, 1 where none.
    pub fn surge(&self, now_s: u64) -> f64 {
        self.surges
            .iter()
            .find(|&&(at_s, _)| now_s.saturating_sub(at_s) <= SURGE_MEMORY_S)
            .map_or(1.0, |&(_, ratio)| ratio)
    }

    /// What the demand is multiplied by at `now_s`: 1 plus `weight` of the surge's
    /// excess over 1.
    pub fn headroom(&self, now_s: u64, weight: f64) -> f64 {
        1.0 + weight.max(0.0) * (self.surge(now_s) - 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn demand(per_s_1s: f64, per_s_10s: f64) -> Demand {
        Demand { per_s_1s, per_s_10s, per_s_60s: per_s_10s }
    }

    #[test]
    fn a_jump_beyond_the_noise_is_remembered_for_the_memory_and_then_forgotten() {
        let mut memory = SurgeMemory::default();
        memory.observe(&demand(0.0, 0.0), 0);
        memory.observe(&demand(100.0, 10.0), 5);
        assert_eq!(memory.surge(5), 1.0, "the first request's seconds count quiet ones before it");
        memory.observe(&demand(110.0, 100.0), 15);
        assert_eq!(memory.surge(15), 1.0, "10 of 100 is within three Poisson deviations");
        memory.observe(&demand(300.0, 150.0), 20);
        assert_eq!(memory.surge(20), 2.0);
        memory.observe(&demand(240.0, 160.0), 30);
        assert_eq!(memory.surge(30), 2.0, "a smaller surge does not lower it");
        assert_eq!(memory.headroom(30, 0.25), 1.25);
        assert_eq!(memory.headroom(30, -1.0), 1.0, "no weight below none");
        assert_eq!(memory.surge(20 + SURGE_MEMORY_S + 1), 1.5, "the smaller, later one is still remembered");
        assert_eq!(memory.surge(30 + SURGE_MEMORY_S + 1), 1.0);
    }

    #[test]
    fn a_task_waking_from_a_trickle_counts_at_most_the_largest_surge() {
        let mut memory = SurgeMemory::default();
        memory.observe(&demand(1.0, 0.1), 0);
        memory.observe(&demand(500.0, 0.2), 60);
        assert_eq!(memory.surge(60), MAX_SURGE);
    }
}
