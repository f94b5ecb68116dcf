//! How far a task's arriving rate will have risen by the time a fleet's autoscaler
//! could answer it: a replica asked for now serves after the autoscaler's next sync
//! and the pod's start, and traffic that keeps rising meanwhile outgrows what the
//! demand of now asks for. The demand ratio adds the rise its 10 s rate shows over its
//! 60 s one, carried that far ahead. Pure arithmetic on a task's rates, here so that
//! the runtime and the fleet's simulation compute it alike.

use crate::snapshot::Demand;

/// How far ahead the demand ratio carries a rising rate unless a task's config sets
/// another, s: about a Kubernetes HPA's 15 s sync and a replica's start, with which
/// the manifests' setting held the fleet's simulated traces (docs/allocation.md).
pub const DEMAND_LEAD_S: f64 = 20.0;

/// Seconds between the middles of the 60 s and the 10 s windows: the time over which
/// the 10 s rate's lead over the 60 s one built up.
const WINDOWS_APART_S: f64 = 25.0;

/// Requests a second that `demand`'s arriving rate gains over `lead_s` at the pace its
/// 10 s rate rose above its 60 s one; 0 where it holds or falls.
pub fn rise_within(demand: &Demand, lead_s: f64) -> f64 {
    (demand.per_s_10s - demand.per_s_60s).max(0.0) * lead_s.max(0.0) / WINDOWS_APART_S
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rising_rate_is_carried_ahead_and_a_falling_one_adds_nothing() {
        let rising = Demand { per_s_1s: 150.0, per_s_10s: 140.0, per_s_60s: 100.0 };
        assert_eq!(rise_within(&rising, 20.0), 32.0, "40/s over 25 s, 20 s ahead");
        assert_eq!(rise_within(&rising, 0.0), 0.0);
        let falling = Demand { per_s_1s: 60.0, per_s_10s: 70.0, per_s_60s: 100.0 };
        assert_eq!(rise_within(&falling, 20.0), 0.0);
    }
}
