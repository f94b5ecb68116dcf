//! One replica of a fleet: a task's queue in front of its instances, served on one
//! variant's profiled line with the runtime's rules. Admission refuses a request
//! predicted to be answered after its deadline (the batches ahead at the line, its
//! own as slow as the profile's p99); an idle instance takes the largest batch up to
//! the limit, cut so that its oldest request is still in time, after dropping those
//! that no longer can be. Batch times spread log-normally as the profile measured.

use std::collections::VecDeque;

use modelless::policy_abi::LatencyFit;
use modelless_runtime::metrics::TrafficWindow;
use modelless_runtime::profile::capacity_within_slo;
use rand::Rng;
use rand_distr::StandardNormal;
use serde::{Deserialize, Serialize};

use crate::load::LoadError;
use crate::simulate::SimTask;

/// The z-score of the 99th percentile of a normal distribution.
const Z99: f64 = 2.326;

/// What every replica of a fleet serves with.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReplicaModel {
    /// The variant serving.
    pub variant: String,
    /// Its warm batch latency, `a·b + c` ms.
    pub fit: LatencyFit,
    /// Standard deviation of the logarithm of a batch's time around the line.
    pub spread: f64,
    /// Largest batch formed.
    pub max_batch_size: u32,
    /// Requests queued before more are refused.
    pub max_queue_size: usize,
    /// Instances, each running one batch at a time.
    pub instances: u32,
    /// The task's latency target, ms.
    pub slo_ms: f64,
}

impl ReplicaModel {
    /// The model of a replica of `task` serving its cheapest variant per request at
    /// its best allocation, as the runtime's `modelless_task_demand_ratio` prices it:
    /// the variant whose instances (`instances` says how many each gets) answer the
    /// most requests a second within `slo_ms`. Refused where none answers any.
    pub fn cheapest(task: &SimTask, instances: &dyn Fn(&str) -> u32, slo_ms: f64) -> Result<Self, LoadError> {
        let models = task.variants.iter().map(|v| ReplicaModel {
            variant: v.name.clone(),
            fit: v.cost_fit(),
            spread: v.spread,
            max_batch_size: v.max_batch_size.max(1),
            max_queue_size: v.max_queue_size,
            instances: instances(&v.name).max(1),
            slo_ms,
        });
        models
            .max_by(|a, b| a.capacity_per_s().total_cmp(&b.capacity_per_s()))
            .filter(|m| m.capacity_per_s() > 0.0)
            .ok_or_else(|| {
                LoadError::Invalid(format!("no variant of `{}` answers a batch of one within {slo_ms} ms", task.name))
            })
    }

    /// Requests a second one replica answers within the target, as the runtime's
    /// metric counts them.
    pub fn capacity_per_s(&self) -> f64 {
        capacity_within_slo(&self.fit, self.max_batch_size, self.instances, self.slo_ms)
    }

    /// A batch of `rows` at the line, µs.
    pub fn median_us(&self, rows: usize) -> u64 {
        (self.fit.predict_ms(rows as u32).max(0.05) * 1e3).round() as u64
    }

    /// A batch of `rows` as slow as the profile's p99, µs: what admission allows for.
    pub fn slow_us(&self, rows: usize) -> u64 {
        (self.median_us(rows) as f64 * (Z99 * self.spread).exp()).round() as u64
    }

    /// One run of a batch of `rows`, µs.
    pub fn batch_us(&self, rows: usize, rng: &mut impl Rng) -> u64 {
        let z: f64 = rng.sample(StandardNormal);
        ((self.median_us(rows) as f64 * (self.spread * z).exp()).round() as u64).max(1)
    }
}

/// A request waiting in a replica, or done with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Waiting {
    /// When it arrived, µs.
    pub arrived_us: u64,
    /// When its target runs out, µs.
    pub deadline_us: u64,
}

/// How a request admitted by a replica ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ended {
    /// The request.
    pub request: Waiting,
    /// Whether it was answered by its deadline (else late or dropped).
    pub in_time: bool,
}

#[derive(Clone, Debug)]
struct Running {
    rows: Vec<Waiting>,
    started_us: u64,
}

/// One replica's queue, instances and meters.
#[derive(Clone, Debug)]
pub struct Replica {
    queue: VecDeque<Waiting>,
    running: Vec<Option<Running>>,
    busy_done_us: u64,
    in_flight: u64,
    /// Requests in flight × µs since `window_from_us`: the concurrency Knative reads.
    area: f64,
    window_from_us: u64,
    /// When `area` was last brought up to date.
    area_from_us: u64,
    traffic: TrafficWindow,
}

impl Replica {
    /// An idle replica of `model`, from `now`.
    pub fn new(model: &ReplicaModel, now: u64) -> Self {
        Replica {
            queue: VecDeque::new(),
            running: vec![None; model.instances.max(1) as usize],
            busy_done_us: 0,
            in_flight: 0,
            area: 0.0,
            window_from_us: now,
            area_from_us: now,
            traffic: TrafficWindow::default(),
        }
    }

    /// Requests admitted and not yet ended: what least-connections balancing compares.
    pub fn in_flight(&self) -> u64 {
        self.in_flight
    }

    /// Instance time spent on batches up to `now`, µs.
    pub fn busy_us(&self, now: u64) -> u64 {
        let running: u64 = self.running.iter().flatten().map(|r| now.saturating_sub(r.started_us)).sum();
        self.busy_done_us + running
    }

    /// The demand its demand ratio holds against its capacity before second `now_s`,
    /// as the runtime's does (`TrafficWindow::demand_ahead`).
    pub fn demand_ahead(&mut self, now_s: u64, surge_weight: f64, lead_s: f64) -> f64 {
        self.traffic.demand_ahead(now_s, surge_weight, lead_s)
    }

    /// Mean requests in flight since the last call (or the start), to `now`.
    pub fn take_concurrency(&mut self, now: u64) -> f64 {
        let since = std::mem::replace(&mut self.window_from_us, now);
        self.touch(now);
        let mean = if now > since { self.area / (now - since) as f64 } else { self.in_flight as f64 };
        self.area = 0.0;
        mean
    }

    fn touch(&mut self, now: u64) {
        self.area += self.in_flight as f64 * now.saturating_sub(self.area_from_us) as f64;
        self.area_from_us = now;
    }

    /// Takes `request` at `now`, or refuses it (`false`): its queue is full, or it is
    /// predicted to be answered after its deadline.
    pub fn offer(&mut self, model: &ReplicaModel, request: Waiting, now: u64) -> bool {
        self.traffic.arrived(now / 1_000_000);
        if self.queue.len() >= model.max_queue_size || self.predicted_answer_us(model, now) > request.deadline_us {
            return false;
        }
        self.touch(now);
        self.in_flight += 1;
        self.queue.push_back(request);
        true
    }

    /// When a request arriving at `now` would be answered: the queue ahead in full
    /// batches at the line, each on the instance free first, then its own batch as
    /// slow as the p99 (the runtime's prediction, without its corrections).
    fn predicted_answer_us(&self, model: &ReplicaModel, now: u64) -> u64 {
        let max = model.max_batch_size.max(1) as usize;
        let mut free: Vec<u64> = self
            .running
            .iter()
            .map(|r| r.as_ref().map_or(now, |r| (r.started_us + model.median_us(r.rows.len())).max(now)))
            .collect();
        let total = self.queue.len() + 1;
        let before = (total - 1) / max;
        let own = total - before * max;
        for _ in 0..before {
            if let Some(first) = free.iter_mut().min() {
                *first += model.median_us(max);
            }
        }
        free.into_iter().min().unwrap_or(now) + model.slow_us(own)
    }

    /// Starts batches on the idle instances at `now`; returns each one started as
    /// (instance, when it ends). Requests dropped on the way go to `ended`.
    pub fn start(
        &mut self,
        model: &ReplicaModel,
        now: u64,
        rng: &mut impl Rng,
        ended: &mut Vec<Ended>,
    ) -> Vec<(usize, u64)> {
        let mut started = Vec::new();
        for instance in 0..self.running.len() {
            if self.running[instance].is_some() {
                continue;
            }
            let Some(rows) = self.next_batch(model, now, ended) else { break };
            let took = model.batch_us(rows.len(), rng);
            self.running[instance] = Some(Running { rows, started_us: now });
            started.push((instance, now + took));
        }
        started
    }

    /// The batch to run at `now`: the oldest requests up to the limit, cut so that the
    /// oldest is answered in time at the line; those that could not be even alone are
    /// dropped first, into `ended`.
    fn next_batch(&mut self, model: &ReplicaModel, now: u64, ended: &mut Vec<Ended>) -> Option<Vec<Waiting>> {
        while let Some(&head) = self.queue.front()
            && now + model.median_us(1) > head.deadline_us
        {
            self.queue.pop_front();
            self.end(now, head, false, ended);
        }
        let head = *self.queue.front()?;
        let most = self.queue.len().min(model.max_batch_size.max(1) as usize);
        let left = head.deadline_us - now;
        let rows = (1..=most).rev().find(|&n| model.median_us(n) <= left).unwrap_or(1);
        Some(self.queue.drain(..rows).collect())
    }

    /// The batch on `instance` ends at `now`: its requests go to `ended`.
    pub fn finish(&mut self, instance: usize, now: u64, ended: &mut Vec<Ended>) {
        let Some(batch) = self.running.get_mut(instance).and_then(Option::take) else { return };
        self.busy_done_us += now.saturating_sub(batch.started_us);
        for request in batch.rows {
            self.end(now, request, now <= request.deadline_us, ended);
        }
    }

    fn end(&mut self, now: u64, request: Waiting, in_time: bool, ended: &mut Vec<Ended>) {
        self.touch(now);
        self.in_flight -= 1;
        ended.push(Ended { request, in_time });
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    use super::*;

    /// 1 ms a row and 4 a batch, no spread, batches of up to 4, a 20 ms target.
    pub(crate) fn model() -> ReplicaModel {
        ReplicaModel {
            variant: "v".into(),
            fit: LatencyFit { a_ms: 1.0, c_ms: 4.0, r2: 1.0 },
            spread: 0.0,
            max_batch_size: 4,
            max_queue_size: 64,
            instances: 1,
            slo_ms: 20.0,
        }
    }

    fn request(at_ms: u64, slo_ms: u64) -> Waiting {
        Waiting { arrived_us: at_ms * 1000, deadline_us: (at_ms + slo_ms) * 1000 }
    }

    #[test]
    fn admission_refuses_what_the_queue_ahead_would_make_late() {
        let model = model();
        let (mut replica, mut rng, mut ended) = (Replica::new(&model, 0), StdRng::seed_from_u64(1), Vec::new());
        assert!(replica.offer(&model, request(0, 20), 0));
        assert_eq!(replica.start(&model, 0, &mut rng, &mut ended), vec![(0, 5_000)], "a batch of one: 5 ms");
        // Running until 5 ms: four more join one batch of 8 ms, answered at 13 ms.
        for _ in 0..4 {
            assert!(replica.offer(&model, request(0, 20), 0));
        }
        // A sixth waits for that batch too: 5 + 8 + 5 = 18 ms, still in time; a
        // seventh whose target is 15 ms is not.
        assert!(replica.offer(&model, request(0, 20), 0));
        assert!(!replica.offer(&model, request(0, 15), 0), "predicted at 19 ms, due at 15");
        assert_eq!(replica.in_flight(), 6);
        replica.finish(0, 5_000, &mut ended);
        assert_eq!(ended, vec![Ended { request: request(0, 20), in_time: true }]);
        assert_eq!(replica.start(&model, 5_000, &mut rng, &mut ended), vec![(0, 13_000)], "four rows, 8 ms");
        assert_eq!(replica.busy_us(7_000), 7_000);
    }

    #[test]
    fn a_batch_is_cut_to_what_its_oldest_request_still_makes_and_the_hopeless_are_dropped() {
        let model = model();
        let (mut replica, mut rng, mut ended) = (Replica::new(&model, 0), StdRng::seed_from_u64(1), Vec::new());
        for at in [0, 1, 2, 3] {
            replica.queue.push_back(request(at, 20));
            replica.in_flight += 1;
        }
        replica.queue.push_front(request(0, 3));
        replica.in_flight += 1;
        // At 13 ms: the request due at 3 ms is dropped; the head (due at 20) has 7 ms
        // left, so the batch holds 3 rows (7 ms), not the 4 the limit allows.
        let started = replica.start(&model, 13_000, &mut rng, &mut ended);
        assert_eq!(started, vec![(0, 20_000)]);
        assert_eq!(ended, vec![Ended { request: request(0, 3), in_time: false }]);
        assert_eq!((replica.in_flight(), replica.queue.len()), (4, 1));
        ended.clear();
        replica.finish(0, 21_000, &mut ended);
        let in_time: Vec<bool> = ended.iter().map(|e| e.in_time).collect();
        assert_eq!(in_time, [false, true, true], "due at 20, 21 and 22 ms, answered at 21");
    }

    #[test]
    fn concurrency_is_the_time_weighted_mean_of_requests_in_flight() {
        let model = model();
        let mut replica = Replica::new(&model, 0);
        assert!(replica.offer(&model, request(0, 20), 0));
        assert!(replica.offer(&model, request(0, 20), 500));
        // One in flight for 0.5 ms, two for 0.5 ms.
        assert!((replica.take_concurrency(1_000) - 1.5).abs() < 1e-12);
        assert!((replica.take_concurrency(2_000) - 2.0).abs() < 1e-12);
    }

    #[test]
    fn the_cheapest_variant_is_the_one_answering_most_within_the_target() {
        let variant = |name: &str, a_ms, c_ms| crate::simulate::SimVariant {
            name: name.into(),
            accuracy: 70.0,
            fit: LatencyFit { a_ms, c_ms, r2: 1.0 },
            spread: 0.0,
            load_ms: 0.0,
            loaded: true,
            max_batch_size: 8,
            max_queue_delay_us: 0,
            max_queue_size: 64,
            calibration: None,
            snapshot: Default::default(),
        };
        let task = SimTask {
            name: "t".into(),
            slo_ms: Some(100.0),
            active: 0,
            variants: vec![variant("big", 4.0, 4.0), variant("small", 1.0, 2.0)],
            spill: true,
        };
        let one = ReplicaModel::cheapest(&task, &|_| 1, 100.0).unwrap();
        assert_eq!(one.variant, "small");
        // Four instances of the big one answer more than one of the small one.
        let four = ReplicaModel::cheapest(&task, &|v| if v == "big" { 4 } else { 1 }, 100.0).unwrap();
        assert_eq!((four.variant.as_str(), four.instances), ("big", 4));
        assert!(ReplicaModel::cheapest(&task, &|_| 1, 1.0).is_err(), "no batch of one within 1 ms");
    }
}
