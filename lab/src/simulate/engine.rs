//! The discrete-event loop: arrivals from the load spec's schedule (the same requests a
//! real run sends), routed to the server with the fewest requests in flight; batches
//! that take what the profiles say; a policy tick on every server every tick; a
//! sample of every task every second. Time is simulated, in µs; a seed fixes
//! everything, so two runs with one seed are the same run.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::time::Duration;

use modelless::ErrorKind;
use modelless::policy_abi::{Decision, Snapshot};
use modelless_runtime::policy::EarlyTick;
use modelless_runtime::policy::core::{self, Action};
use rand::SeedableRng;
use rand::rngs::StdRng;

use super::model::SimModel;
use super::server::{Queued, Server};
use crate::load::{Allocation, LoadError, LoadSpec, Outcome, RequestRecord, RunResult, Sample, TaskTarget};

const SECOND_US: u64 = 1_000_000;

/// How long requests still queued at the end of the load get (as in a real run).
const DRAIN_US: u64 = 60 * SECOND_US;

/// What steers one server, a tick at a time.
pub trait Decider {
    /// The actions of the tick at `now` on `snapshot`, as the control core makes
    /// them (a Wasm policy runs in the runtime's own [`modelless_runtime::policy::Controller`];
    /// a native decider's decision goes through [`decided`]). `ahead` holds each
    /// snapshot task's arrivals at this server over the coming second: only an
    /// oracle may look.
    fn tick(&mut self, now: Duration, snapshot: Snapshot, ahead: &[f64]) -> Vec<Action>;

    /// Whether its switches cost nothing (no load, no waiting for a tick).
    fn free_switches(&self) -> bool {
        false
    }
}

/// The actions the control core makes of a native decider's `decision` on
/// `snapshot`.
pub fn decided(snapshot: &Snapshot, decision: &Decision) -> Vec<Action> {
    core::tick(snapshot, decision).actions
}

/// How to simulate.
#[derive(Clone, Debug, PartialEq)]
pub struct SimConfig {
    /// Servers behind a least-connections balancer, each a copy of the model.
    pub servers: usize,
    /// Time between policy ticks.
    pub tick: Duration,
    /// Seed of the batch-time noise (the arrivals follow the spec's own seed).
    pub seed: u64,
    /// Early ticks when a queue grows, as the control loop's.
    pub early_tick: Option<EarlyTick>,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig { servers: 1, tick: Duration::from_secs(1), seed: 0, early_tick: None }
    }
}

/// What a simulation did besides the requests' fates.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SimStats {
    /// Policy ticks, over all servers.
    pub ticks: u64,
    /// Of them, ticks called early by a growing queue.
    pub early_ticks: u64,
    /// Switches started, over all servers.
    pub switches: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    BatchDone {
        server: usize,
        batch: u64,
    },
    Wake {
        server: usize,
    },
    /// A server's regular tick; stale once an early tick moved the next one.
    Tick {
        server: usize,
        generation: u64,
    },
    Second,
}

/// Runs `spec` against `model` with a decider per server from `decider`; `progress`
/// hears each simulated second. Returns what a real run returns, and the counts.
pub fn simulate(
    model: &SimModel,
    spec: &LoadSpec,
    config: &SimConfig,
    decider: &mut dyn FnMut(usize) -> Box<dyn Decider>,
    progress: &mut dyn FnMut(u32, u32),
) -> Result<(RunResult, SimStats), LoadError> {
    if config.servers == 0 || config.tick.is_zero() {
        return Err(LoadError::invalid("a simulation needs at least one server and a tick longer than 0"));
    }
    let schedule = spec.schedule()?;
    let (task_of, targets) = targets(model, spec)?;
    let mut deciders: Vec<Box<dyn Decider>> = (0..config.servers).map(&mut *decider).collect();
    let mut sim = Sim {
        model,
        servers: (0..config.servers).map(|_| Server::new(model)).collect(),
        records: vec![None; schedule.arrivals.len()],
        events: BinaryHeap::new(),
        sequence: 0,
        rng: StdRng::seed_from_u64(config.seed),
        stats: SimStats::default(),
        ticks: vec![TickState::default(); config.servers],
        tick_us: (config.tick.as_micros() as u64).max(1),
        early_tick: config.early_tick,
        ahead: arrivals_per_second(&schedule, &task_of, model.tasks.len(), config.servers),
    };
    let end_us = u64::from(schedule.duration_s) * SECOND_US;
    for server in 0..config.servers {
        sim.push(sim.tick_us, Event::Tick { server, generation: 0 });
    }
    sim.push(SECOND_US, Event::Second);
    let mut samples = Vec::new();
    let mut next_arrival = 0;
    loop {
        let arrival_at = schedule.arrivals.get(next_arrival).map(|a| (a.at_s * 1e6) as u64);
        let event_at = sim.events.peek().map(|Reverse((at, ..))| *at);
        // Events first on a tie: a batch that ends as a request arrives frees the executor.
        let arrival_first = match (arrival_at, event_at) {
            (Some(a), Some(e)) => a < e,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if arrival_first {
            let arrival = schedule.arrivals[next_arrival];
            let now = arrival_at.unwrap_or_default();
            let server = sim.arrive(next_arrival, task_of[arrival.task], targets[arrival.task].slo_ms, now);
            next_arrival += 1;
            if sim.queue_grew(server, now) {
                sim.stats.early_ticks += 1;
                sim.tick(server, deciders[server].as_mut(), now);
            }
            continue;
        }
        let Some(Reverse((now, _, event))) = sim.events.pop() else { break };
        let idle = || sim.servers.iter().all(|s| s.in_flight() == 0);
        if arrival_at.is_none() && now >= end_us && (now > end_us + DRAIN_US || idle()) {
            break;
        }
        match event {
            Event::BatchDone { server, batch } => sim.batch_done(server, batch, now),
            Event::Wake { server } => {
                sim.servers[server].wake_at = None;
                sim.start(server, now);
            }
            Event::Tick { server, generation } => {
                if generation == sim.ticks[server].generation {
                    sim.tick(server, deciders[server].as_mut(), now);
                }
            }
            Event::Second => {
                let second = (now / SECOND_US) as u32;
                if second <= schedule.duration_s {
                    samples.extend(sim.samples(&task_of, &targets, second - 1, now));
                    progress(second, schedule.duration_s);
                }
                sim.push(now + SECOND_US, Event::Second);
            }
        }
    }
    let records = sim
        .records
        .into_iter()
        .zip(&schedule.arrivals)
        .map(|(record, arrival)| {
            record.unwrap_or_else(|| {
                RequestRecord::unanswered(&targets[arrival.task].task, arrival.at_s, DRAIN_US as f64 / 1e3)
            })
        })
        .collect();
    let result = RunResult { targets, records, samples, runs: Vec::new(), duration_s: schedule.duration_s };
    Ok((result, sim.stats))
}

/// What an offline planner knows of a run: each second's arrivals per model task at
/// one server, and each model task's SLO.
pub(crate) struct Foreseen {
    /// `arrivals[second][task]`.
    pub arrivals: Vec<Vec<f64>>,
    /// Per model task: the first spec task's that loads it; `None` where none does.
    pub slo_ms: Vec<Option<f64>>,
}

/// What an offline planner knows of a run of `spec` on `model` at one of `servers`.
pub(crate) fn foreseen(model: &SimModel, spec: &LoadSpec, servers: usize) -> Result<Foreseen, LoadError> {
    let schedule = spec.schedule()?;
    let (task_of, targets) = targets(model, spec)?;
    let mut slo_ms = vec![None; model.tasks.len()];
    for (&task, target) in task_of.iter().zip(&targets).rev() {
        slo_ms[task] = Some(target.slo_ms);
    }
    let mut arrivals = arrivals_per_second(&schedule, &task_of, model.tasks.len(), servers.max(1));
    arrivals.truncate(schedule.duration_s as usize);
    Ok(Foreseen { arrivals, slo_ms })
}

/// Each spec task's model task, and its target (SLO from the spec or the model).
fn targets(model: &SimModel, spec: &LoadSpec) -> Result<(Vec<usize>, Vec<TaskTarget>), LoadError> {
    let mut task_of = Vec::new();
    let mut targets = Vec::new();
    for load in &spec.tasks {
        let index =
            model.task_index(&load.task).ok_or_else(|| LoadError::Target(format!("unknown task `{}`", load.task)))?;
        let task = &model.tasks[index];
        if load.min_accuracy.is_some() {
            // The runtime would route such requests to a more accurate variant or
            // refuse them; the simulator does neither, so it says so.
            return Err(LoadError::invalid(format!("task `{}`: `min_accuracy` is not simulated", load.task)));
        }
        let slo_ms = load.slo_ms_or(task.slo_ms)?;
        let accuracies: BTreeMap<String, f64> = task.variants.iter().map(|v| (v.name.clone(), v.accuracy)).collect();
        task_of.push(index);
        targets.push(TaskTarget { task: load.task.clone(), slo_ms, accuracies });
    }
    Ok((task_of, targets))
}

/// Arrivals per second of each model task, each server's share.
fn arrivals_per_second(
    schedule: &crate::load::Schedule,
    task_of: &[usize],
    tasks: usize,
    servers: usize,
) -> Vec<Vec<f64>> {
    let mut counts = vec![vec![0.0; tasks]; schedule.duration_s as usize + 1];
    for arrival in &schedule.arrivals {
        if let Some(second) = counts.get_mut(arrival.at_s as usize) {
            second[task_of[arrival.task]] += 1.0 / servers as f64;
        }
    }
    counts
}

/// Where a server's control loop stands.
#[derive(Clone, Copy, Debug, Default)]
struct TickState {
    ticks: u64,
    last_us: u64,
    /// Bumped by every tick, so that only the latest scheduled one runs.
    generation: u64,
}

struct Sim<'a> {
    model: &'a SimModel,
    ticks: Vec<TickState>,
    tick_us: u64,
    early_tick: Option<EarlyTick>,
    /// Each second's arrivals per model task, a server's share.
    ahead: Vec<Vec<f64>>,
    servers: Vec<Server>,
    records: Vec<Option<RequestRecord>>,
    /// (time µs, sequence, event): the sequence keeps equal times in push order.
    events: BinaryHeap<Reverse<(u64, u64, Event)>>,
    sequence: u64,
    rng: StdRng,
    stats: SimStats,
}

impl Sim<'_> {
    fn push(&mut self, at: u64, event: Event) {
        self.sequence += 1;
        self.events.push(Reverse((at, self.sequence, event)));
    }

    fn record(&mut self, index: usize, task: usize, queued: &Queued, end: (Outcome, u64), batch: Option<(usize, u32)>) {
        self.record_why(index, task, queued, end, batch, "queue_full");
    }

    /// Like [`Sim::record`], a refusal for `refused` (the runtime's error kind).
    fn record_why(
        &mut self,
        index: usize,
        task: usize,
        queued: &Queued,
        end: (Outcome, u64),
        batch: Option<(usize, u32)>,
        refused: &str,
    ) {
        self.records[index] = Some(RequestRecord {
            task: self.model.tasks[task].name.clone(),
            sent_s: queued.arrived_us as f64 / 1e6,
            status: end.0,
            latency_ms: end.1.saturating_sub(queued.arrived_us) as f64 / 1e3,
            variant: batch.map(|(variant, _)| self.model.tasks[task].variants[variant].name.clone()),
            batch_size: batch.map(|(_, rows)| rows),
            stages: None,
            reason: match end.0 {
                Outcome::Rejected if refused == "would_miss_deadline" => {
                    Some(crate::load::record::reason(refused, "the simulated queue would answer it after its deadline"))
                }
                Outcome::Rejected => Some(crate::load::record::reason(refused, "the simulated queue is full")),
                Outcome::Expired => Some(crate::load::record::reason("expired", "expired in the simulated queue")),
                _ => None,
            },
        });
    }

    /// Request `index` for model task `task` arrives at `now`; returns the server
    /// it went to.
    fn arrive(&mut self, index: usize, task: usize, slo_ms: f64, now: u64) -> usize {
        let server = (0..self.servers.len()).min_by_key(|&s| (self.servers[s].in_flight(), s)).unwrap_or(0);
        let state = &mut self.servers[server].tasks[task];
        let second = now / SECOND_US;
        let queued = Queued { index, arrived_us: now, deadline_us: now + (slo_ms * 1e3) as u64, variant: state.active };
        state.traffic.arrived(second);
        if state.queue.len() >= self.model.tasks[task].variants[state.active].max_queue_size {
            state.traffic.rejected_for(ErrorKind::Overloaded);
            self.servers[server].refused(task, now);
            self.record(index, task, &queued, (Outcome::Rejected, now), None);
            return server;
        }
        if self.servers[server].would_miss(task, queued.deadline_us, now).is_some() {
            if let Some(variant) = self.servers[server].spill_to(self.model, task, queued.deadline_us, now) {
                let state = &mut self.servers[server].tasks[task];
                state.in_flight += 1;
                state.queue.push_front(Queued { variant, ..queued });
                self.start(server, now);
                return server;
            }
            self.servers[server].tasks[task].traffic.rejected_for(ErrorKind::WouldMissDeadline);
            self.servers[server].refused(task, now);
            self.record_why(index, task, &queued, (Outcome::Rejected, now), None, "would_miss_deadline");
            return server;
        }
        let state = &mut self.servers[server].tasks[task];
        state.in_flight += 1;
        state.queue.push_back(queued);
        self.start(server, now);
        server
    }

    /// Whether a queue of `server` calls an early tick at `now`.
    fn queue_grew(&self, server: usize, now: u64) -> bool {
        let Some(early) = self.early_tick else { return false };
        let since_last = now.saturating_sub(self.ticks[server].last_us);
        since_last >= early.min_gap.as_micros() as u64
            && self.servers[server]
                .tasks
                .iter()
                .any(|t| t.active_queue() >= early.queue_length || t.traffic.turned_away() > 0)
    }

    /// Starts the batches that instances free now can take, or a wake-up for a held
    /// one.
    fn start(&mut self, server: usize, now: u64) {
        for (task, queued) in self.servers[server].expire(now) {
            let state = &mut self.servers[server].tasks[task];
            state.traffic.expired();
            state.in_flight -= 1;
            self.record(queued.index, task, &queued, (Outcome::Expired, now.min(queued.deadline_us)), None);
        }
        loop {
            match self.servers[server].next_batch(self.model, now) {
                Ok(batch) => {
                    let variant = &self.model.tasks[batch.task].variants[batch.variant];
                    let alone = variant.batch_us(batch.requests.len() as u32, &mut self.rng);
                    let took = (alone as f64 * self.servers[server].crowding(batch.cores)).round() as u64;
                    let id = batch.id;
                    self.servers[server].running.push(batch);
                    self.push(now + took, Event::BatchDone { server, batch: id });
                }
                Err(Some(at)) => {
                    if self.servers[server].wake_at.is_none_or(|w| w > at) {
                        self.servers[server].wake_at = Some(at);
                        self.push(at, Event::Wake { server });
                    }
                    return;
                }
                Err(None) => return,
            }
        }
    }

    fn batch_done(&mut self, server: usize, batch: u64, now: u64) {
        let Some(batch) = self.servers[server].finish(batch, now) else { return };
        let rows = batch.requests.len() as u32;
        for queued in &batch.requests {
            let latency_ms = (now - queued.arrived_us) as f64 / 1e3;
            let late = now > queued.deadline_us;
            let state = &mut self.servers[server].tasks[batch.task];
            state.traffic.answered(latency_ms, late);
            state.in_flight -= 1;
            self.record(queued.index, batch.task, queued, (Outcome::Served, now), Some((batch.variant, rows)));
        }
        self.start(server, now);
    }

    /// A tick of `server`'s control loop at `now`; the next is due a tick later.
    fn tick(&mut self, server: usize, decider: &mut dyn Decider, now: u64) {
        let state = &mut self.ticks[server];
        let tick = state.ticks;
        (state.ticks, state.last_us, state.generation) = (tick + 1, now, state.generation + 1);
        let generation = state.generation;
        self.push(now + self.tick_us, Event::Tick { server, generation });
        self.servers[server].finish_loads(now);
        let snapshot = self.servers[server].snapshot(self.model, tick, now);
        let coming =
            self.ahead.get((now / SECOND_US) as usize).cloned().unwrap_or_else(|| vec![0.0; self.model.tasks.len()]);
        let actions = decider.tick(Duration::from_micros(now), snapshot, &coming);
        self.stats.ticks += 1;
        self.stats.switches += self.servers[server].steer(self.model, &actions, now, decider.free_switches());
        self.start(server, now);
    }

    /// What model task `task` holds over every server, and what the servers' serving
    /// instances hold in all.
    fn allocation(&self, task: usize) -> Allocation {
        let (mut instances, mut cores, mut machine_cores) = (0, 0.0, 0.0);
        for server in &self.servers {
            let (n, own) = server.task_held(self.model, task);
            instances += n;
            cores += own;
            machine_cores += server.cores_held(self.model);
        }
        Allocation { instances, cores, machine_cores }
    }

    /// Each spec task at the end of `second`: server 0's variant, every server's queue
    /// for it, the servers' mean utilisation, what they hold.
    fn samples(&mut self, task_of: &[usize], targets: &[TaskTarget], second: u32, now: u64) -> Vec<Sample> {
        let utilisation: Vec<f64> = self.servers.iter_mut().filter_map(|s| s.utilisation_since_second(now)).collect();
        let cpu = (!utilisation.is_empty()).then(|| utilisation.iter().sum::<f64>() / utilisation.len() as f64);
        task_of
            .iter()
            .zip(targets)
            .map(|(&task, target)| {
                let variant = self.servers[0].tasks[task].active;
                let needless = self.servers.iter_mut().map(|s| s.tasks[task].needless_since_sampled()).sum();
                Sample {
                    second,
                    task: target.task.clone(),
                    active: Some(self.model.tasks[task].variants[variant].name.clone()),
                    queue_length: Some(self.servers.iter().map(|s| s.tasks[task].queue.len() as u64).sum()),
                    cpu_percent: cpu,
                    process_cpu_s: None,
                    page_faults: None,
                    rss_bytes: None,
                    allocation: Some(self.allocation(task)),
                    needless_refusals: Some(needless),
                }
            })
            .collect()
    }
}
