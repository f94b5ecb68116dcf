//! Knative's Pod Autoscaler, the one KServe's `scaleMetric: concurrency` and
//! `scaleTarget` set (its `autoscaler.go`): every tick, the fleet's requests in flight
//! averaged over a stable window and a panic window (a tenth of it), divided by the
//! target per pod times the target utilisation; panic while the panic window asks
//! for twice the ready pods or more, and no scaling down until a stable window has
//! passed without that; scale-down at most to half the ready pods a tick. Pure: the
//! seconds' concurrency and the time come in.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

/// The KPA's settings; the defaults are Knative's, with KServe's `scaleTarget` of
/// `deploy/kserve/inference-service.yaml`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KpaConfig {
    /// Requests in flight per pod aimed at (`autoscaling.knative.dev/target`).
    pub target_concurrency: f64,
    /// Share of the target aimed at (`container-concurrency-target-percentage`).
    pub target_utilisation: f64,
    /// The stable window, s.
    pub stable_window_s: u32,
    /// The panic window, as a share of the stable one (%).
    pub panic_window_percentage: f64,
    /// Panic when the panic window asks for this many times the ready pods.
    pub panic_threshold: f64,
    /// Scale up to at most this many times the ready pods a tick.
    pub max_scale_up_rate: f64,
    /// Scale down to no fewer than the ready pods over this, a tick.
    pub max_scale_down_rate: f64,
    /// Time between decisions, s.
    pub tick_s: f64,
    /// Fewest replicas.
    pub min_replicas: u32,
    /// Most replicas.
    pub max_replicas: u32,
}

impl Default for KpaConfig {
    fn default() -> Self {
        KpaConfig {
            target_concurrency: 8.0,
            target_utilisation: 0.7,
            stable_window_s: 60,
            panic_window_percentage: 10.0,
            panic_threshold: 2.0,
            max_scale_up_rate: 1000.0,
            max_scale_down_rate: 2.0,
            tick_s: 2.0,
            min_replicas: 1,
            max_replicas: 100,
        }
    }
}

/// One KPA: the seconds' concurrency it has seen, and its panic.
#[derive(Clone, Debug)]
pub struct Kpa {
    config: KpaConfig,
    /// The fleet's mean requests in flight, one figure a second, newest last.
    seconds: VecDeque<f64>,
    /// When the panic window last asked for the threshold or more.
    panic_since_s: Option<f64>,
    max_panic_pods: u32,
}

impl Kpa {
    /// A KPA with `config` that has seen nothing.
    pub fn new(config: KpaConfig) -> Self {
        Kpa { config, seconds: VecDeque::new(), panic_since_s: None, max_panic_pods: 0 }
    }

    /// Its settings.
    pub fn config(&self) -> &KpaConfig {
        &self.config
    }

    /// The ready pods' requests in flight, summed, over the second just gone.
    pub fn observe_second(&mut self, concurrency: f64) {
        self.seconds.push_back(concurrency.max(0.0));
        while self.seconds.len() > self.config.stable_window_s.max(1) as usize {
            self.seconds.pop_front();
        }
    }

    /// Mean of the last `window` seconds seen (fewer at the start).
    fn window_mean(&self, window: usize) -> f64 {
        let window = window.clamp(1, self.seconds.len().max(1));
        self.seconds.iter().rev().take(window).sum::<f64>() / window as f64
    }

    /// Whether it is panicking.
    pub fn panicking(&self) -> bool {
        self.panic_since_s.is_some()
    }

    /// The tick at `now_s` with `ready` pods ready: the pods it wants.
    pub fn tick(&mut self, now_s: f64, ready: u32) -> u32 {
        let c = &self.config;
        let ready = f64::from(ready.max(1));
        let per_pod = (c.target_concurrency * c.target_utilisation).max(1e-9);
        let panic_window = ((f64::from(c.stable_window_s) * c.panic_window_percentage / 100.0).round() as usize).max(1);
        let stable_pods = (self.window_mean(c.stable_window_s as usize) / per_pod).ceil();
        let panic_pods = (self.window_mean(panic_window) / per_pod).ceil();
        let (floor, ceiling) = ((ready / c.max_scale_down_rate).floor(), (ready * c.max_scale_up_rate).ceil());
        let stable = stable_pods.clamp(floor, ceiling) as u32;
        let panic = panic_pods.clamp(floor, ceiling) as u32;
        let over_threshold = panic_pods / ready >= c.panic_threshold;
        if over_threshold {
            self.panic_since_s = Some(now_s);
        } else if self.panic_since_s.is_some_and(|since| since + f64::from(c.stable_window_s) < now_s) {
            self.panic_since_s = None;
            self.max_panic_pods = 0;
        }
        let mut desired = stable;
        if self.panicking() {
            desired = desired.max(panic);
            // No scaling down while panicking.
            self.max_panic_pods = self.max_panic_pods.max(desired);
            desired = self.max_panic_pods;
        }
        desired.clamp(c.min_replicas, c.max_replicas)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Knative's defaults with a utilisation of a half: 4 in flight per pod.
    fn config() -> KpaConfig {
        KpaConfig { target_utilisation: 0.5, ..KpaConfig::default() }
    }

    #[test]
    fn stable_mode_asks_for_the_minute_mean_over_the_target_per_pod() {
        let mut kpa = Kpa::new(config());
        for _ in 0..60 {
            kpa.observe_second(20.0);
        }
        assert_eq!(kpa.tick(60.0, 5), 5, "20 in flight, 4 a pod");
        assert!(!kpa.panicking());
        // Half the load over the last 6 s barely moves the minute's mean (19 → 5 pods).
        for _ in 0..6 {
            kpa.observe_second(10.0);
        }
        assert_eq!(kpa.tick(66.0, 5), 5);
    }

    #[test]
    fn a_burst_panics_at_twice_the_ready_pods_and_holds_the_count_for_a_window() {
        let mut kpa = Kpa::new(config());
        for _ in 0..60 {
            kpa.observe_second(4.0);
        }
        assert_eq!(kpa.tick(60.0, 1), 1);
        // 6 s at 40 in flight: the panic window asks for 10 pods, 10 × the one ready,
        // where the minute asks for 2.
        for _ in 0..6 {
            kpa.observe_second(40.0);
        }
        assert_eq!(kpa.tick(66.0, 1), 10);
        assert!(kpa.panicking());
        // The burst ends; while panicking the count holds.
        for _ in 0..10 {
            kpa.observe_second(0.0);
        }
        assert_eq!(kpa.tick(76.0, 10), 10);
        // A stable window after the last tick over the threshold the panic ends, and
        // the stable count (0) applies, no lower than half the ready pods.
        for _ in 0..50 {
            kpa.observe_second(0.0);
        }
        assert_eq!(kpa.tick(127.0, 10), 5);
        assert!(!kpa.panicking());
    }
}
