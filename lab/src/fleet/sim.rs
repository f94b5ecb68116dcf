//! The fleet's discrete-event loop: a trace's arrivals sent through the balancer to
//! the ready replicas, batches that end when their sampled time is up, pods that
//! become ready a start time after the scaler asked for them, the scaler deciding
//! every period, and a sample every second. Time is simulated, in µs; a seed fixes
//! the batch times, so a run is repeated exactly.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rand::SeedableRng;
use rand::rngs::StdRng;
use serde::{Deserialize, Serialize};

use super::pods::Pods;
use super::replica::{Ended, ReplicaModel, Waiting};
use super::scaler::{Scaler, ScalerConfig, ScalerKind};
use crate::load::LoadError;

const SECOND_US: u64 = 1_000_000;

/// How long requests still held when the trace ends get to finish, µs.
const DRAIN_US: u64 = 60 * SECOND_US;

/// How to run a fleet.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FleetConfig {
    /// From a pod asked for to its readiness, s: a real `modelless serve`'s, measured.
    pub start_s: f64,
    /// Pods ready when the trace starts (every autoscaler starts alike).
    pub initial_replicas: u32,
    /// The replicas static provisioning holds.
    pub static_replicas: u32,
    /// The scalers' settings.
    pub scalers: ScalerConfig,
    /// Seed of the batch times.
    pub seed: u64,
}

/// One second of a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FleetSecond {
    /// Requests that arrived in it.
    pub arrived: u64,
    /// Of them, those not answered within the target (refused, dropped or late).
    pub late: u64,
    /// Replicas the scaler wanted at its end.
    pub wanted: u32,
    /// Replicas ready at its end.
    pub ready: u32,
    /// Pods held at its end (starting, ready or draining).
    pub held: u32,
}

/// What a run came to.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FleetTotals {
    /// Requests sent.
    pub requests: u64,
    /// Answered within the target.
    pub within_slo: u64,
    /// Refused on arrival: no replica ready, or one predicting a late answer.
    pub refused: u64,
    /// Admitted, then answered late or dropped as hopeless.
    pub late_after_admission: u64,
    /// Pod-seconds held over the trace, from asking for a pod to its end.
    pub replica_seconds: f64,
    /// Most pods held at once.
    pub max_replicas: u32,
    /// Times the scaler changed the count.
    pub scale_events: u64,
}

impl FleetTotals {
    /// Requests not answered within the target.
    pub fn late(&self) -> u64 {
        self.requests - self.within_slo
    }

    /// Share of requests answered within the target.
    pub fn within_slo_share(&self) -> f64 {
        if self.requests == 0 { 1.0 } else { self.within_slo as f64 / self.requests as f64 }
    }
}

/// One scaler's run over a trace.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FleetRun {
    /// The scaler.
    pub scaler: ScalerKind,
    /// The totals.
    pub totals: FleetTotals,
    /// Second by second.
    pub seconds: Vec<FleetSecond>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    BatchDone { pod: usize, instance: usize },
    Ready { pod: usize },
    Decide,
    Second,
}

/// Runs `arrivals` (s from the start, ascending) over `duration_s` through a fleet
/// of `model` replicas that `kind` scales; `progress` hears each simulated second.
pub fn run_fleet(
    model: &ReplicaModel,
    arrivals: &[f64],
    duration_s: u32,
    kind: ScalerKind,
    config: &FleetConfig,
    progress: &mut dyn FnMut(u32, u32),
) -> Result<FleetRun, LoadError> {
    if !(config.start_s.is_finite() && config.start_s >= 0.0) {
        return Err(LoadError::Invalid(format!("a pod's start time must be 0 s or more, not {}", config.start_s)));
    }
    let initial = if kind == ScalerKind::Static { config.static_replicas } else { config.initial_replicas };
    let mut scaler = Scaler::new(kind, &config.scalers, config.static_replicas);
    let mut sim = Fleet {
        model,
        pods: Pods::ready_at_start(model, initial.max(1), 0),
        events: BinaryHeap::new(),
        sequence: 0,
        rng: StdRng::seed_from_u64(config.seed),
        seconds: vec![FleetSecond::default(); duration_s as usize],
        totals: FleetTotals::default(),
        ended: Vec::new(),
    };
    let end_us = u64::from(duration_s) * SECOND_US;
    let start_us = (config.start_s * 1e6).round() as u64;
    if let Some(period) = scaler.period_us() {
        sim.push(period, Event::Decide);
    }
    sim.push(SECOND_US, Event::Second);
    let mut next = 0;
    loop {
        let arrival_us = arrivals.get(next).map(|&at| (at * 1e6) as u64);
        let event_us = sim.events.peek().map(|Reverse((at, ..))| *at);
        // Events first on a tie: a batch that ends as a request arrives frees its instance.
        if let Some(at) = arrival_us.filter(|&a| event_us.is_none_or(|e| a < e)) {
            sim.arrive(at);
            next += 1;
            continue;
        }
        let Some(Reverse((now, _, event))) = sim.events.pop() else { break };
        // After the trace only batches and starting pods are left to end.
        if now > end_us + DRAIN_US {
            break;
        }
        match event {
            Event::BatchDone { pod, instance } => sim.batch_done(pod, instance, now),
            Event::Ready { pod } => {
                sim.pods.make_ready(pod, now);
                sim.start(pod, now);
            }
            Event::Decide => {
                let desired = scaler.decide(&mut sim.pods, model, now);
                if desired != sim.pods.wanted() {
                    sim.totals.scale_events += 1;
                }
                for (pod, ready_us) in sim.pods.scale_to(model, desired, now, start_us) {
                    sim.push(ready_us, Event::Ready { pod });
                }
                if let Some(period) = scaler.period_us().filter(|_| now < end_us) {
                    sim.push(now + period, Event::Decide);
                }
            }
            Event::Second => {
                scaler.observe_second(&mut sim.pods, now);
                let second = (now / SECOND_US) as usize;
                if let Some(sample) = sim.seconds.get_mut(second.wrapping_sub(1)) {
                    (sample.wanted, sample.ready, sample.held) = (sim.pods.wanted(), sim.pods.ready(), sim.pods.held());
                    progress(second as u32, duration_s);
                }
                if now < end_us {
                    sim.push(now + SECOND_US, Event::Second);
                }
            }
        }
    }
    // Whatever is still held after the drain never got an answer.
    let unanswered: u64 = sim.pods.all().iter().map(|p| p.replica.in_flight()).sum();
    sim.totals.late_after_admission += unanswered;
    sim.totals.replica_seconds = sim.pods.replica_seconds(end_us);
    sim.totals.max_replicas = sim.seconds.iter().map(|s| s.held).max().unwrap_or(0).max(initial);
    Ok(FleetRun { scaler: kind, totals: sim.totals, seconds: sim.seconds })
}

struct Fleet<'a> {
    model: &'a ReplicaModel,
    pods: Pods,
    /// (time µs, sequence, event): the sequence keeps equal times in push order.
    events: BinaryHeap<Reverse<(u64, u64, Event)>>,
    sequence: u64,
    rng: StdRng,
    seconds: Vec<FleetSecond>,
    totals: FleetTotals,
    /// Requests that ended, waiting to be counted.
    ended: Vec<Ended>,
}

impl Fleet<'_> {
    fn push(&mut self, at: u64, event: Event) {
        self.sequence += 1;
        self.events.push(Reverse((at, self.sequence, event)));
    }

    /// A request arrives at `now`: to the balancer's pick, or refused.
    fn arrive(&mut self, now: u64) {
        self.totals.requests += 1;
        let second = (now / SECOND_US) as usize;
        if let Some(sample) = self.seconds.get_mut(second) {
            sample.arrived += 1;
        }
        let request = Waiting { arrived_us: now, deadline_us: now + (self.model.slo_ms * 1e3) as u64 };
        let admitted = match self.pods.pick() {
            Some(pod) => {
                let taken = self.pods.get_mut(pod).replica.offer(self.model, request, now);
                if taken {
                    self.start(pod, now);
                }
                taken
            }
            None => false,
        };
        if !admitted {
            self.totals.refused += 1;
            self.count_late(request);
        }
    }

    fn start(&mut self, pod: usize, now: u64) {
        let started = self.pods.get_mut(pod).replica.start(self.model, now, &mut self.rng, &mut self.ended);
        for (instance, at) in started {
            self.push(at, Event::BatchDone { pod, instance });
        }
        self.count_ended();
    }

    fn batch_done(&mut self, pod: usize, instance: usize, now: u64) {
        self.pods.get_mut(pod).replica.finish(instance, now, &mut self.ended);
        self.count_ended();
        self.start(pod, now);
        self.pods.end_if_drained(pod, now);
    }

    fn count_ended(&mut self) {
        for ended in std::mem::take(&mut self.ended) {
            if ended.in_time {
                self.totals.within_slo += 1;
            } else {
                self.totals.late_after_admission += 1;
                self.count_late(ended.request);
            }
        }
    }

    fn count_late(&mut self, request: Waiting) {
        if let Some(sample) = self.seconds.get_mut((request.arrived_us / SECOND_US) as usize) {
            sample.late += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use modelless::policy_abi::LatencyFit;

    use super::*;

    /// 1 ms a row and 4 a batch, batches of up to 8 within 100 ms: 567 requests a
    /// second within the target, 667 at most.
    fn model() -> ReplicaModel {
        ReplicaModel {
            variant: "v".into(),
            fit: LatencyFit { a_ms: 1.0, c_ms: 4.0, r2: 1.0 },
            spread: 0.1,
            max_batch_size: 8,
            max_queue_size: 1024,
            instances: 1,
            slo_ms: 100.0,
        }
    }

    fn config(start_s: f64) -> FleetConfig {
        FleetConfig { start_s, initial_replicas: 1, static_replicas: 4, scalers: ScalerConfig::default(), seed: 3 }
    }

    /// 200 requests a second for 2 minutes, then 2000 for 5, then 200 for 8.
    fn step() -> (Vec<f64>, u32) {
        let rates: Vec<f64> = (0..900).map(|s| if (120..420).contains(&s) { 2000.0 } else { 200.0 }).collect();
        (crate::load::arrivals(&rates, 7), rates.len() as u32)
    }

    #[test]
    fn static_peak_provisioning_answers_a_step_in_time_and_holds_its_replicas_throughout() {
        let (arrivals, seconds) = step();
        let run = run_fleet(&model(), &arrivals, seconds, ScalerKind::Static, &config(10.0), &mut |_, _| {}).unwrap();
        let t = &run.totals;
        assert_eq!(t.requests, arrivals.len() as u64);
        assert!(t.within_slo_share() > 0.999, "{t:?}");
        assert!((t.replica_seconds - 4.0 * 900.0).abs() < 1e-6 && t.max_replicas == 4, "{t:?}");
        assert!(run.seconds.iter().all(|s| s.ready == 4 && s.wanted == 4));
        assert_eq!(run.seconds.iter().map(|s| s.arrived).sum::<u64>(), t.requests);
    }

    #[test]
    fn every_autoscaler_follows_a_step_up_and_back_down_and_a_slow_start_costs_answers() {
        let (arrivals, seconds) = step();
        for kind in [ScalerKind::Demand, ScalerKind::Cpu, ScalerKind::Kserve] {
            let run =
                |start_s| run_fleet(&model(), &arrivals, seconds, kind, &config(start_s), &mut |_, _| {}).unwrap();
            let (quick, slow) = (run(1.0), run(60.0));
            let peak = quick.seconds[120..420].iter().map(|s| s.ready).max().unwrap_or(0);
            assert!(peak >= 3, "{kind}: at most {peak} ready during the step");
            assert!(quick.seconds[899].wanted < peak, "{kind}: back down after the step");
            assert!(slow.totals.late() > quick.totals.late(), "{kind}: {:?} vs {:?}", slow.totals, quick.totals);
            let late: u64 = quick.seconds.iter().map(|s| s.late).sum();
            assert_eq!(late, quick.totals.late(), "{kind}: every late answer is in its second");
            assert_eq!(quick, run(1.0), "{kind}: seeded");
        }
    }
}
