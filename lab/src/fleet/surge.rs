//! A replica's memory of the surges it has seen: the largest jump of its arriving
//! rate within a second beyond the noise (the last second's rate over the 10 s one,
//! where the level moved), held for a while. A surge faster than the HPA follows (a
//! sync, then a pod's start) is answered only by the headroom already held, so the
//! demand ratio can ask for headroom in proportion to the surges lately seen:
//! traffic that jumps gets more, traffic that rises slowly none.

use std::collections::VecDeque;

use modelless::policy_abi::{Demand, level_moved};

/// How long a surge is remembered, s.
pub const SURGE_MEMORY_S: u64 = 600;
/// Seconds of traffic a replica hears before it judges a jump: its 10 s rate counts
/// the seconds before it served as quiet ones.
const SETTLE_S: u64 = 10;

/// The surges within the memory that no later one as large outdoes, oldest (and
/// largest) first: when the largest is forgotten, the next largest is at hand.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SurgeMemory {
    surges: VecDeque<(u64, f64)>,
    first_s: Option<u64>,
}

impl SurgeMemory {
    /// Hears the demand at second `now_s`.
    pub fn observe(&mut self, demand: &Demand, now_s: u64) {
        let first_s = *self.first_s.get_or_insert(now_s);
        if now_s < first_s + SETTLE_S || !level_moved(demand) || demand.per_s_10s <= 0.0 {
            return;
        }
        let ratio = demand.per_s_1s / demand.per_s_10s;
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
            .map_or(1.0, |&(_, ratio)| ratio.max(1.0))
    }

    /// What the demand is multiplied by: 1 plus `weight` of the surge's excess.
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
        memory.observe(&demand(100.0, 10.0), 0);
        assert_eq!(memory.surge(0), 1.0, "a replica's first seconds count quiet ones before it served");
        memory.observe(&demand(110.0, 100.0), 10);
        assert_eq!(memory.surge(10), 1.0, "10 of 100 is within three Poisson deviations");
        memory.observe(&demand(300.0, 150.0), 20);
        assert_eq!(memory.surge(20), 2.0);
        memory.observe(&demand(240.0, 160.0), 30);
        assert_eq!(memory.surge(30), 2.0, "a smaller surge does not lower it");
        assert_eq!(memory.headroom(30, 0.25), 1.25);
        assert_eq!(memory.surge(20 + SURGE_MEMORY_S + 1), 1.5, "the smaller, later one is still remembered");
        assert_eq!(memory.surge(30 + SURGE_MEMORY_S + 1), 1.0);
    }
}
