//! The scalers compared: the HPA on the replicas' `modelless_task_demand_ratio`, the
//! HPA on CPU, KServe's concurrency target (Knative's KPA), and static provisioning
//! for the trace's peak. Each reads the pods as its real counterpart does.

use std::fmt;
use std::str::FromStr;

use modelless::policy_abi::{DEMAND_LEAD_S, DEMAND_SURGE_WEIGHT};
use modelless_runtime::profile::demand_ratio;
use serde::{Deserialize, Serialize};

use super::hpa::{Hpa, HpaConfig, PodMetric, metric_replicas};
use super::kpa::{Kpa, KpaConfig};
use super::pods::{PodState, Pods};
use super::replica::ReplicaModel;

/// The most a replica's demand ratio reads as: the runtime exports it capped, since
/// autoscalers pass it on through integers, where +Inf overflows.
const DEMAND_RATIO_CAP: f64 = 10.0;

/// Which scaler.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScalerKind {
    /// The HPA on the Pods metric `modelless_task_demand_ratio`, target averageValue.
    Demand,
    /// The HPA on CPU utilisation.
    Cpu,
    /// KServe's `scaleMetric: concurrency`: Knative's KPA.
    Kserve,
    /// The replicas the trace's peak needs, all the time.
    Static,
}

impl ScalerKind {
    /// Every scaler, in the order the tables list them.
    pub const ALL: [ScalerKind; 4] = [ScalerKind::Demand, ScalerKind::Cpu, ScalerKind::Kserve, ScalerKind::Static];

    /// Its name on the command line and in the tables.
    pub fn name(self) -> &'static str {
        match self {
            ScalerKind::Demand => "demand",
            ScalerKind::Cpu => "cpu",
            ScalerKind::Kserve => "kserve",
            ScalerKind::Static => "static",
        }
    }
}

impl fmt::Display for ScalerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ScalerKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ScalerKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| format!("unknown scaler `{s}`: demand, cpu, kserve or static"))
    }
}

/// The scalers' settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScalerConfig {
    /// The HPAs' settings (both HPAs share them).
    pub hpa: HpaConfig,
    /// The demand HPA's target averageValue of `modelless_task_demand_ratio`.
    pub demand_target: f64,
    /// Of the largest surge a replica saw lately, the share its demand ratio adds as
    /// headroom ([`SurgeMemory`](modelless::policy_abi::SurgeMemory)); the runtime's
    /// default unless set, 0 reads the demand alone.
    pub demand_surge_weight: f64,
    /// How far ahead, s, a replica's demand ratio carries its rate's rise
    /// ([`rise_within`](modelless::policy_abi::rise_within)); the runtime's default
    /// unless set, 0 reads the demand of now.
    pub demand_lead_s: f64,
    /// The CPU HPA's target utilisation (a share of the pod's cores).
    pub cpu_target: f64,
    /// CPU is read over this window (metrics-server's resolution), s; a pod ready
    /// for less is set aside, as the HPA sets aside a sample taken partly before
    /// readiness.
    pub cpu_window_s: f64,
    /// KServe's autoscaler.
    pub kpa: KpaConfig,
}

impl Default for ScalerConfig {
    fn default() -> Self {
        ScalerConfig {
            hpa: HpaConfig::default(),
            demand_target: 0.7,
            demand_surge_weight: DEMAND_SURGE_WEIGHT,
            demand_lead_s: DEMAND_LEAD_S,
            cpu_target: 0.7,
            cpu_window_s: 15.0,
            kpa: KpaConfig::default(),
        }
    }
}

/// How a replica's demand ratio reads its traffic, as the runtime's task config sets it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DemandReading {
    /// `demand_surge_weight`.
    pub surge_weight: f64,
    /// `demand_lead_s`.
    pub lead_s: f64,
}

/// A scaler and what it remembers.
#[derive(Clone, Debug)]
pub enum Scaler {
    /// The HPA on the demand ratio, and its target.
    Demand(Hpa, f64, DemandReading),
    /// The HPA on CPU.
    Cpu(Hpa, f64, f64),
    /// Knative's KPA.
    Kserve(Kpa),
    /// A fixed count.
    Static(u32),
}

impl Scaler {
    /// The scaler of `kind`; `peak` is what static provisioning holds.
    pub fn new(kind: ScalerKind, config: &ScalerConfig, peak: u32) -> Self {
        match kind {
            ScalerKind::Demand => {
                let reading = DemandReading { surge_weight: config.demand_surge_weight, lead_s: config.demand_lead_s };
                Scaler::Demand(Hpa::new(config.hpa.clone()), config.demand_target, reading)
            }
            ScalerKind::Cpu => Scaler::Cpu(Hpa::new(config.hpa.clone()), config.cpu_target, config.cpu_window_s),
            ScalerKind::Kserve => Scaler::Kserve(Kpa::new(config.kpa.clone())),
            ScalerKind::Static => Scaler::Static(peak),
        }
    }

    /// Time between its decisions, µs (`None`: it never changes).
    pub fn period_us(&self) -> Option<u64> {
        let s = match self {
            Scaler::Demand(hpa, ..) | Scaler::Cpu(hpa, ..) => hpa.config().sync_s,
            Scaler::Kserve(kpa) => kpa.config().tick_s,
            Scaler::Static(_) => return None,
        };
        Some((s * 1e6).round().max(1.0) as u64)
    }

    /// The second just gone at `now`: the KPA hears the ready pods' concurrency
    /// (every pod's count restarts).
    pub fn observe_second(&mut self, pods: &mut Pods, now: u64) {
        let mut total = 0.0;
        for index in 0..pods.all().len() {
            let pod = pods.get_mut(index);
            if matches!(pod.state, PodState::Gone { .. }) {
                continue;
            }
            let concurrency = pod.replica.take_concurrency(now);
            if matches!(pod.state, PodState::Ready { .. }) {
                total += concurrency;
            }
        }
        if let Scaler::Kserve(kpa) = self {
            kpa.observe_second(total);
        }
    }

    /// The replicas it wants at `now`, reading `pods` of `model`.
    pub fn decide(&mut self, pods: &mut Pods, model: &ReplicaModel, now: u64) -> u32 {
        let now_s = now as f64 / 1e6;
        let current = pods.wanted();
        match self {
            Scaler::Demand(hpa, target, reading) => {
                let capacity = model.capacity_per_s();
                let readings = readings(pods, |pod| match pod.state {
                    PodState::Ready { .. } => {
                        let now_s = now / 1_000_000;
                        let demand = pod.replica.demand_ahead(now_s, reading.surge_weight, reading.lead_s);
                        demand_ratio(demand, capacity)
                            .map_or(PodMetric::Missing, |ratio| PodMetric::Ready(ratio.min(DEMAND_RATIO_CAP)))
                    }
                    // Its server opens its endpoints, /metrics with them, once ready.
                    _ => PodMetric::Missing,
                });
                let recommended = metric_replicas(current, &readings, *target, hpa.config().tolerance, *target);
                hpa.sync(now_s, current, recommended)
            }
            Scaler::Cpu(hpa, target, window_s) => {
                let window_us = (*window_s * 1e6) as u64;
                let readings = readings(pods, |pod| {
                    let (at, busy) = pod.cpu_mark;
                    let busy_now = pod.replica.busy_us(now);
                    pod.cpu_mark = (now, busy_now);
                    match pod.state {
                        PodState::Ready { since_us } if now >= since_us + window_us && now > at => {
                            let cores = f64::from(model.instances.max(1));
                            PodMetric::Ready((busy_now - busy) as f64 / (now - at) as f64 / cores)
                        }
                        _ => PodMetric::Unready,
                    }
                });
                // A pod without a sample counts as fully busy when scaling down.
                let recommended = metric_replicas(current, &readings, *target, hpa.config().tolerance, target.max(1.0));
                hpa.sync(now_s, current, recommended)
            }
            Scaler::Kserve(kpa) => kpa.tick(now_s, pods.ready()),
            Scaler::Static(count) => *count,
        }
    }
}

/// What the HPA reads of each pod that is starting or ready (removed ones are
/// ignored).
fn readings(pods: &mut Pods, mut read: impl FnMut(&mut super::pods::Pod) -> PodMetric) -> Vec<PodMetric> {
    (0..pods.all().len())
        .filter_map(|index| {
            let pod = pods.get_mut(index);
            matches!(pod.state, PodState::Starting { .. } | PodState::Ready { .. }).then(|| read(pod))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalers_are_named_on_the_command_line_as_in_the_tables() {
        for kind in ScalerKind::ALL {
            assert_eq!(kind.name().parse::<ScalerKind>(), Ok(kind));
        }
        assert!("hpa".parse::<ScalerKind>().is_err());
    }
}
