//! Kubernetes' HorizontalPodAutoscaler, as its controller computes (autoscaling/v2,
//! `replica_calculator.go` and `horizontal.go`): at each sync, the replicas the
//! metric asks for from the ready pods' mean against the target, within a tolerance,
//! with pods not ready or without metrics counted the cautious way; then the
//! behaviour: the highest recommendation of the scale-down stabilisation window, and
//! scale-up at most the larger of 4 pods and 100 % per 15 s. Pure: time comes in.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

/// The HPA's settings; the defaults are Kubernetes'.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HpaConfig {
    /// Time between syncs (`--horizontal-pod-autoscaler-sync-period`), s.
    pub sync_s: f64,
    /// A usage ratio within this of 1 changes nothing.
    pub tolerance: f64,
    /// Scale down to no fewer than the most recommended over this window, s.
    pub scale_down_stabilisation_s: f64,
    /// Scale-up policies: at most this many pods more per period ...
    pub scale_up_pods: u32,
    /// ... or this share more (%), whichever allows more.
    pub scale_up_percent: f64,
    /// The scale-up policies' period, s.
    pub scale_up_period_s: f64,
    /// Scale-down policy: at most this share fewer per period (%).
    pub scale_down_percent: f64,
    /// The scale-down policy's period, s.
    pub scale_down_period_s: f64,
    /// Fewest replicas.
    pub min_replicas: u32,
    /// Most replicas.
    pub max_replicas: u32,
}

impl Default for HpaConfig {
    fn default() -> Self {
        HpaConfig {
            sync_s: 15.0,
            tolerance: 0.1,
            scale_down_stabilisation_s: 300.0,
            scale_up_pods: 4,
            scale_up_percent: 100.0,
            scale_up_period_s: 15.0,
            scale_down_percent: 100.0,
            scale_down_period_s: 15.0,
            min_replicas: 1,
            max_replicas: 100,
        }
    }
}

/// What the HPA reads of one pod at a sync.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PodMetric {
    /// A ready pod's value, in the target's units.
    Ready(f64),
    /// A pod the controller sets aside as not ready (for CPU: not ready, or ready for
    /// less than the metric's window); counted as 0 when scaling up.
    Unready,
    /// A pod without a metric (its server not yet listening); counted as 0 when
    /// scaling up and at the fallback when scaling down.
    Missing,
}

/// The replicas the metric asks for, as `replica_calculator.go` computes them:
/// `ceil(ratio × ready pods)` where `ratio` is the ready pods' mean over `target`,
/// unless within `tolerance`; where pods are unready or missing, the ratio is
/// recomputed with them counted against the move (0 up; `missing_down`, in the
/// metric's units, down), and nothing changes if that flips the direction.
/// `current` is the replicas the workload asks for now.
pub fn metric_replicas(current: u32, pods: &[PodMetric], target: f64, tolerance: f64, missing_down: f64) -> u32 {
    let ready: Vec<f64> =
        pods.iter().filter_map(|p| if let PodMetric::Ready(v) = p { Some(*v) } else { None }).collect();
    if ready.is_empty() || target <= 0.0 {
        return current; // the controller reports the error and leaves the scale alone
    }
    let within = |ratio: f64| (1.0 - ratio).abs() <= tolerance;
    let ratio = ready.iter().sum::<f64>() / ready.len() as f64 / target;
    let unready = pods.iter().filter(|p| **p == PodMetric::Unready).count();
    let missing = pods.iter().filter(|p| **p == PodMetric::Missing).count();
    let up_with_unready = unready > 0 && ratio > 1.0;
    if !up_with_unready && missing == 0 {
        return if within(ratio) { current } else { ceil_u32(ratio * ready.len() as f64) };
    }
    let mut sum: f64 = ready.iter().sum();
    let mut counted = ready.len();
    if ratio < 1.0 {
        sum += missing as f64 * missing_down;
        counted += missing;
    } else if ratio > 1.0 {
        counted += missing;
    }
    if up_with_unready {
        counted += unready;
    }
    let new_ratio = sum / counted as f64 / target;
    if within(new_ratio) || (ratio > 1.0 && new_ratio < 1.0) || (ratio < 1.0 && new_ratio > 1.0) {
        return current;
    }
    let replicas = ceil_u32(new_ratio * counted as f64);
    if (new_ratio < 1.0 && replicas > current) || (new_ratio > 1.0 && replicas < current) { current } else { replicas }
}

fn ceil_u32(x: f64) -> u32 {
    x.ceil().clamp(0.0, f64::from(u32::MAX)) as u32
}

/// One HPA: its recommendations and scale events, which its behaviour reads.
#[derive(Clone, Debug)]
pub struct Hpa {
    config: HpaConfig,
    /// (time s, replicas the metric recommended), oldest first.
    recommendations: VecDeque<(f64, u32)>,
    /// (time s, pods added or removed), oldest first.
    scale_events: VecDeque<(f64, i64)>,
}

impl Hpa {
    /// An HPA with `config`, that has not synced yet.
    pub fn new(config: HpaConfig) -> Self {
        Hpa { config, recommendations: VecDeque::new(), scale_events: VecDeque::new() }
    }

    /// Its settings.
    pub fn config(&self) -> &HpaConfig {
        &self.config
    }

    /// The sync at `now_s`: with the workload at `current` replicas and `recommended`
    /// by the metric ([`metric_replicas`]), the replicas it sets, after stabilisation,
    /// the rate limits and the bounds.
    pub fn sync(&mut self, now_s: f64, current: u32, recommended: u32) -> u32 {
        let stabilised = self.stabilise(now_s, current, recommended);
        let desired = self.rate_limited(now_s, current, stabilised);
        if desired != current {
            self.scale_events.push_back((now_s, i64::from(desired) - i64::from(current)));
        }
        let keep = self.config.scale_up_period_s.max(self.config.scale_down_period_s);
        while self.scale_events.front().is_some_and(|(at, _)| *at <= now_s - keep) {
            self.scale_events.pop_front();
        }
        desired
    }

    /// `stabilizeRecommendationWithBehaviors`: no lower than the highest
    /// recommendation of the scale-down window (scale-up's window is 0).
    fn stabilise(&mut self, now_s: f64, current: u32, recommended: u32) -> u32 {
        let cutoff = now_s - self.config.scale_down_stabilisation_s;
        while self.recommendations.front().is_some_and(|(at, _)| *at <= cutoff) {
            self.recommendations.pop_front();
        }
        let down_floor = self.recommendations.iter().map(|(_, r)| *r).fold(recommended, u32::max);
        self.recommendations.push_back((now_s, recommended));
        current.max(recommended).min(down_floor)
    }

    /// `convertDesiredReplicasWithBehaviorRate`: the policies' limits over what was
    /// added or removed within their periods, then the bounds.
    fn rate_limited(&self, now_s: f64, current: u32, desired: u32) -> u32 {
        let c = &self.config;
        let changed_within = |period_s: f64, up: bool| -> i64 {
            self.scale_events
                .iter()
                .filter(|(at, change)| *at > now_s - period_s && (*change > 0) == up)
                .map(|(_, change)| change.abs())
                .sum()
        };
        let period_start = |period_s: f64| {
            (i64::from(current) - changed_within(period_s, true) + changed_within(period_s, false)).max(0) as f64
        };
        if desired > current {
            let start = period_start(c.scale_up_period_s);
            let by_pods = start + f64::from(c.scale_up_pods);
            let by_share = (start * (1.0 + c.scale_up_percent / 100.0)).ceil();
            let limit = ceil_u32(by_pods.max(by_share)).max(current);
            desired.min(limit).min(c.max_replicas).max(c.min_replicas)
        } else if desired < current {
            let start = period_start(c.scale_down_period_s);
            let limit = ((start * (1.0 - c.scale_down_percent / 100.0)).floor().max(0.0) as u32).min(current);
            desired.max(limit).max(c.min_replicas).min(c.max_replicas)
        } else {
            desired
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use PodMetric::{Missing, Ready, Unready};

    #[test]
    fn the_metric_asks_for_ready_pods_times_their_ratio_outside_the_tolerance() {
        // Two pods at 1.2 and 1.3 times a 0.5 target: a mean ratio of 1.25, outside.
        assert_eq!(metric_replicas(2, &[Ready(0.6), Ready(0.65)], 0.5, 0.1, 0.5), 3);
        // A mean ratio of 1.05 is within the tolerance: no change, even for a spec of 5.
        assert_eq!(metric_replicas(5, &[Ready(0.525), Ready(0.525)], 0.5, 0.1, 0.5), 5);
        // Down: 4 pods at 0.4 of the target ask for 2.
        assert_eq!(metric_replicas(4, &[Ready(0.2); 4], 0.5, 0.1, 0.5), 2);
        // Nothing ready: nothing to go by.
        assert_eq!(metric_replicas(3, &[Missing, Unready], 0.5, 0.1, 0.5), 3);
    }

    #[test]
    fn pods_not_ready_count_as_idle_on_the_way_up_and_missing_ones_at_the_fallback_down() {
        // One ready pod at twice the target and one unready: (1 + 0) / 2 / 0.5 = 1, no change.
        assert_eq!(metric_replicas(2, &[Ready(1.0), Unready], 0.5, 0.1, 0.5), 2);
        // Three times the target: (1.5 + 0) / 2 / 0.5 = 1.5, so 3 pods.
        assert_eq!(metric_replicas(2, &[Ready(1.5), Unready], 0.5, 0.1, 0.5), 3);
        // Down with a missing pod: it counts at the target, (0.05 + 0.5) / 2 / 0.5 = 0.55 → 2.
        assert_eq!(metric_replicas(3, &[Ready(0.05), Missing], 0.5, 0.1, 0.5), 2);
        // An unready pod on the way down is left out: a ratio of 0.5 over the 2 ready → 1.
        assert_eq!(metric_replicas(3, &[Ready(0.25), Ready(0.25), Unready], 0.5, 0.1, 0.5), 1);
    }

    #[test]
    fn scale_up_is_limited_to_four_pods_or_double_per_period() {
        let mut hpa = Hpa::new(HpaConfig::default());
        assert_eq!(hpa.sync(15.0, 1, 40), 5, "1 + 4 beats doubling");
        assert_eq!(hpa.sync(30.0, 5, 40), 10, "doubling beats + 4");
        // Within one period two syncs share the limit: 10 → 20, then nothing more.
        assert_eq!(hpa.sync(35.0, 10, 40), 10, "the event at 30 s is within 15 s");
        assert_eq!(hpa.sync(45.0, 10, 40), 20);
        assert_eq!(hpa.sync(60.0, 20, 40), 40);
        assert_eq!(hpa.sync(75.0, 40, 400), 80);
        assert_eq!(hpa.sync(90.0, 80, 400), 100, "capped at max_replicas");
    }

    #[test]
    fn scale_down_waits_for_the_highest_recommendation_of_five_minutes_to_pass() {
        let mut hpa = Hpa::new(HpaConfig::default());
        assert_eq!(hpa.sync(0.0, 10, 10), 10);
        assert_eq!(hpa.sync(15.0, 10, 4), 10, "10 was recommended within 300 s");
        assert_eq!(hpa.sync(150.0, 10, 6), 10);
        assert_eq!(hpa.sync(300.0, 10, 3), 6, "10 has aged out at 300 s; 6 (at 150 s) has not");
        assert_eq!(hpa.sync(450.0, 6, 3), 3);
        assert_eq!(hpa.sync(465.0, 3, 0), 3, "3 was recommended at 300 and 450 s");
        assert_eq!(Hpa::new(HpaConfig::default()).sync(0.0, 3, 0), 1, "no fewer than min_replicas");
    }
}
