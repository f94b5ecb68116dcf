//! One simulated server: per task a queue, the active variant, its knobs and
//! instances, and the traffic window the snapshot reads. A batch runs on an instance
//! of its variant: sessions on the shared intra-op pool take the machine in turns
//! (one such batch at a time holds every core), an instance with threads of its own
//! runs beside the others, and batches that hold more cores than the machine has
//! together run that much slower.
//!
//! Admission and batching follow the runtime's deadline rules with the runtime's own
//! arithmetic: each variant's profiled line, corrected by the batches it ran, refuses
//! a request predicted to be answered late, drops one that could no longer make it,
//! and cuts a batch where one more request would make its head late.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use modelless_runtime::batching::AdmissionMargin;
use modelless_runtime::batching::BatchCost;
use modelless_runtime::batching::{ArrivalRate, Backlog, RefusalLedger, SHARING_SLOWDOWN, predicted_answer};

use modelless::policy_abi::{
    ABI_VERSION, RunTotals, ServingKnobs, Snapshot, SystemSnapshot, TaskSnapshot, VariantState,
};
use modelless_runtime::metrics::{TrafficReading, TrafficWindow};
use modelless_runtime::policy::core::Action;
use modelless_runtime::policy::{TaskReading, task_snapshot};

use super::model::{SimModel, SimTask, SimVariant};

/// A request waiting for a batch.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Queued {
    /// Its index in the run's schedule.
    pub index: usize,
    pub arrived_us: u64,
    /// Its SLO from arrival: the deadline the in-process target sets too.
    pub deadline_us: u64,
    /// The variant it was routed to (the one active when it arrived).
    pub variant: usize,
}

/// A batch running on an instance.
#[derive(Clone, Debug)]
pub(crate) struct Running {
    /// Tells it from the others running.
    pub id: u64,
    pub task: usize,
    pub variant: usize,
    pub requests: Vec<Queued>,
    pub started_us: u64,
    /// The cores it holds: its instance's own threads, or the machine's for a session
    /// on the shared pool.
    pub cores: f64,
    /// Whether it runs on the shared pool, which takes one batch at a time.
    pub shared: bool,
}

/// Instances being added to a loaded variant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Scaling {
    pub variant: usize,
    /// Its instances once they are warm.
    pub instances: u32,
    /// When they are, µs.
    pub ready_us: u64,
}

/// A variant loading on a simulated server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Loading {
    pub variant: usize,
    /// When it is ready, µs.
    pub ready_us: u64,
    /// Whether it serves once ready (a switch), or only stays loaded (a load).
    pub takes_over: bool,
}

/// What a task looks like on this server.
#[derive(Clone, Debug)]
pub(crate) struct TaskState {
    pub active: usize,
    /// Per variant: largest batch and queue delay (µs) it forms now.
    pub knobs: Vec<(u32, u64)>,
    pub loaded: Vec<bool>,
    /// A variant being loaded (one at a time, as in the runtime).
    pub loading: Option<Loading>,
    /// Per variant: instances that take batches (0 while it is not loaded), and those
    /// it serves or loads with.
    pub instances: Vec<u32>,
    pub instances_set: Vec<u32>,
    /// Instances being added, one change at a time.
    pub scaling: Option<Scaling>,
    /// Per variant: when it last served, µs.
    pub last_served_us: Vec<u64>,
    pub queue: VecDeque<Queued>,
    pub traffic: TrafficWindow,
    pub in_flight: u64,
    /// Per variant: the batches it ran, as the runtime counts them.
    pub runs: Vec<RunTotals>,
    /// Per variant: what its batches cost, as the runtime predicts it.
    pub costs: Vec<Option<BatchCost>>,
    /// How fast its requests arrive, as the runtime's queue tracks it.
    pub arrivals: ArrivalRate,
    /// Per variant: its refusals and answers, as the runtime's queue judges their need.
    pub refusals: Vec<RefusalLedger>,
    /// Needless refusals over its variants as the last sample read them.
    pub needless_sampled: u64,
}

impl TaskState {
    fn new(task: &SimTask) -> Self {
        TaskState {
            active: task.active,
            knobs: task.variants.iter().map(|v| (v.max_batch_size.max(1), v.max_queue_delay_us)).collect(),
            loaded: task.variants.iter().map(|v| v.loaded).collect(),
            loading: None,
            instances: task.variants.iter().map(|v| if v.loaded { configured_instances(v) } else { 0 }).collect(),
            instances_set: task.variants.iter().map(configured_instances).collect(),
            scaling: None,
            last_served_us: vec![0; task.variants.len()],
            queue: VecDeque::new(),
            traffic: TrafficWindow::default(),
            in_flight: 0,
            runs: vec![RunTotals::default(); task.variants.len()],
            costs: task.variants.iter().map(|v| BatchCost::new(v.priced_fit())).collect(),
            arrivals: ArrivalRate::default(),
            refusals: vec![RefusalLedger::default(); task.variants.len()],
            needless_sampled: 0,
        }
    }

    /// What `variant` answers a second as profiled: its batch cost at its largest
    /// batch, for each instance (as the runtime's queue judges a refusal's need).
    fn capacity_per_s(&self, variant: usize) -> Option<f64> {
        let cost = self.costs[variant].as_ref()?;
        let one = cost.capacity_per_s(self.knobs[variant].0 as usize);
        Some(one * f64::from(self.instances[variant].max(1)))
    }

    /// Needless refusals since the last call: the sample of a second.
    pub fn needless_since_sampled(&mut self) -> u64 {
        let total: u64 = self.refusals.iter().map(RefusalLedger::needless).sum();
        total - std::mem::replace(&mut self.needless_sampled, total)
    }

    /// `variant` serves from now on, and the requests waiting move to it, as the
    /// runtime moves them (the batch running finishes where it is).
    fn switch_to(&mut self, variant: usize, now: u64) {
        self.last_served_us[self.active] = now;
        self.active = variant;
        self.queue.iter_mut().for_each(|q| q.variant = variant);
    }

    /// `variant` is loaded from now on, with the instances set for it.
    fn loaded(&mut self, variant: usize) {
        self.loaded[variant] = true;
        self.instances[variant] = self.instances_set[variant].max(1);
    }

    /// Requests queued for the active variant (what the runtime reports).
    pub fn active_queue(&self) -> u64 {
        self.queue.iter().filter(|q| q.variant == self.active).count() as u64
    }
}

/// Whether a task's next batch can leave now, or when it can.
enum Readiness {
    Now { rows: usize },
    At(u64),
}

/// When a utilisation count last restarted, and the executor time then.
#[derive(Clone, Copy, Debug, Default)]
struct BusyMark {
    at: u64,
    busy: u64,
}

impl BusyMark {
    /// Utilisation (%) from the mark to `now`, when `busy` is the executor time
    /// now; the count restarts here.
    fn restart(&mut self, now: u64, busy: u64) -> Option<f64> {
        let then = std::mem::replace(self, BusyMark { at: now, busy });
        (now > then.at).then(|| (busy - then.busy) as f64 / (now - then.at) as f64 * 100.0)
    }
}

/// One server.
#[derive(Clone, Debug)]
pub(crate) struct Server {
    pub tasks: Vec<TaskState>,
    pub running: Vec<Running>,
    next_id: u64,
    /// The machine's cores, and what the shared pool's batches hold of them.
    cores: f64,
    /// Core time of finished batches, core·µs.
    busy_done: u64,
    /// Where the utilisation counts of the ticks and of the samples restart.
    tick_mark: BusyMark,
    second_mark: BusyMark,
    /// When a held batch's delay runs out, if a wake-up is scheduled.
    pub wake_at: Option<u64>,
    /// The instant simulated time 0 stands for, in the runtime's deadline arithmetic.
    origin: Instant,
}

impl Server {
    pub fn new(model: &SimModel) -> Self {
        Server {
            tasks: model.tasks.iter().map(TaskState::new).collect(),
            running: Vec::new(),
            next_id: 0,
            cores: f64::from(model.cores.max(1)),
            busy_done: 0,
            tick_mark: BusyMark::default(),
            second_mark: BusyMark::default(),
            wake_at: None,
            origin: Instant::now(),
        }
    }

    /// Requests admitted and not yet ended, over all tasks: what least-connections
    /// balancing compares.
    pub fn in_flight(&self) -> u64 {
        self.tasks.iter().map(|t| t.in_flight).sum()
    }

    /// Core time up to `now`, core·µs.
    fn busy(&self, now: u64) -> u64 {
        let running: f64 = self.running.iter().map(|r| r.cores * now.saturating_sub(r.started_us) as f64).sum();
        self.busy_done + running as u64
    }

    /// The machine's utilisation since the last tick, % of its cores (and restarts
    /// the count).
    pub fn utilisation_since_tick(&mut self, now: u64) -> Option<f64> {
        let busy = self.busy(now);
        self.tick_mark.restart(now, busy).map(|u| u / self.cores)
    }

    /// Like [`Server::utilisation_since_tick`], for the per-second samples.
    pub fn utilisation_since_second(&mut self, now: u64) -> Option<f64> {
        let busy = self.busy(now);
        self.second_mark.restart(now, busy).map(|u| u / self.cores)
    }

    /// The instances of task `task`'s serving variant, those starting among them,
    /// and the cores of their own they hold, as the budget counts them.
    pub fn task_held(&self, model: &SimModel, task: usize) -> (u32, f64) {
        let state = &self.tasks[task];
        let starting = state.scaling.filter(|s| s.variant == state.active).map_or(0, |s| s.instances);
        let serving = state.instances[state.active].max(starting);
        (state.instances[state.active], own_threads(&model.tasks[task].variants[state.active]) * f64::from(serving))
    }

    /// Cores every task's serving instances hold now, as the budget counts them: their
    /// own threads, and the shared pool's once while any of them runs on it.
    pub fn cores_held(&self, model: &SimModel) -> f64 {
        let own: f64 = (0..self.tasks.len()).map(|t| self.task_held(model, t).1).sum();
        let shared = (0..self.tasks.len()).any(|t| own_threads(&model.tasks[t].variants[self.tasks[t].active]) == 0.0);
        own + if shared { self.cores } else { 0.0 }
    }

    /// Batch `id` ends at `now`.
    pub fn finish(&mut self, id: u64, now: u64) -> Option<Running> {
        let at = self.running.iter().position(|r| r.id == id)?;
        let running = self.running.swap_remove(at);
        let took = now - running.started_us;
        self.busy_done += (running.cores * took as f64) as u64;
        let state = &mut self.tasks[running.task];
        if let Some(cost) = &mut state.costs[running.variant] {
            cost.observe(running.requests.len(), Duration::from_micros(took), Duration::ZERO);
        }
        let capacity = state.capacity_per_s(running.variant);
        let origin = self.origin;
        state.refusals[running.variant].answered(
            origin + Duration::from_micros(now),
            running.requests.len() as u64,
            capacity,
        );
        let runs = &mut state.runs[running.variant];
        runs.batches += 1;
        runs.rows += running.requests.len() as u64;
        runs.run_ms += took as f64 / 1e3;
        Some(running)
    }

    /// How much slower than alone a batch holding `cores` more runs beside those
    /// running: the cores they hold together over the machine's, where more.
    pub fn crowding(&self, cores: f64) -> f64 {
        let held: f64 = self.running.iter().map(|r| r.cores).sum::<f64>() + cores;
        (held / self.cores).max(1.0)
    }

    /// Notes a refusal of `task`'s active variant at `now`, its queue empty or not,
    /// as the runtime's queue judges its need.
    pub fn refused(&mut self, task: usize, now: u64) {
        let at = self.origin + Duration::from_micros(now);
        let state = &mut self.tasks[task];
        let empty = state.active_queue() == 0;
        let capacity = state.capacity_per_s(state.active);
        state.refusals[state.active].refused(at, empty, capacity);
    }

    /// When a request of `task` arriving at `now` with `deadline_us` would be
    /// answered (µs), where the runtime would refuse it for that.
    pub fn would_miss(&mut self, task: usize, deadline_us: u64, now: u64) -> Option<u64> {
        self.tasks[task].arrivals.arrived(self.origin + Duration::from_micros(now));
        self.would_miss_on(task, self.tasks[task].active, deadline_us, now, 1.0)
    }

    /// Like [`Server::would_miss`], on `variant` with the rows queued for it ahead, its
    /// wait `slowed_by` times what the line predicts.
    fn would_miss_on(&self, task: usize, variant: usize, deadline_us: u64, now: u64, slowed_by: f64) -> Option<u64> {
        let origin = self.origin;
        let at = |us: u64| origin + Duration::from_micros(us);
        let state = &self.tasks[task];
        let cost = state.costs[variant].as_ref()?;
        // Each instance frees up when its batch ends; idle ones now.
        let mut free_at: Vec<Instant> = self
            .running
            .iter()
            .filter(|r| r.task == task && r.variant == variant)
            .map(|r| at(r.started_us) + cost.of(r.requests.len()))
            .collect();
        let idle = (state.instances[variant].max(1) as usize).saturating_sub(free_at.len());
        free_at.extend(std::iter::repeat_n(at(now), idle));
        let (max_batch_size, delay_us) = state.knobs[variant];
        let backlog = Backlog {
            free_at: &free_at,
            rows_ahead: state.queue.iter().filter(|q| q.variant == variant).count(),
            max_batch_size: max_batch_size as usize,
            max_queue_delay: Duration::from_micros(delay_us),
            arrivals_per_s: state.arrivals.per_s(),
        };
        // Simulated batches run as their line predicts: no overrun to keep a margin for.
        let wait = predicted_answer(cost, &backlog, 1, at(now)).saturating_duration_since(at(now));
        let predicted = at(now) + wait.mul_f64(slowed_by.max(1.0));
        let answer = AdmissionMargin::default().admits(at(now), predicted, at(deadline_us)).err()?;
        Some(answer.duration_since(origin).as_micros() as u64)
    }

    /// Where a request of `task` that its active variant would refuse goes instead, as
    /// the runtime spills it: the most accurate loaded variant that costs less a row,
    /// has an instance idle and nothing queued, and would answer it by `deadline_us`
    /// beside the active one ([`SHARING_SLOWDOWN`] times its line). The request then
    /// goes to the front of the queue, where its batch closes at once.
    pub fn spill_to(&self, model: &SimModel, task: usize, deadline_us: u64, now: u64) -> Option<usize> {
        let configured = &model.tasks[task];
        let state = &self.tasks[task];
        if !configured.spill {
            return None;
        }
        let row_ms = |v: usize| configured.variants[v].row_ms();
        let running = |v: usize| self.running.iter().filter(|r| r.task == task && r.variant == v).count();
        let mut cheaper: Vec<usize> = (0..configured.variants.len())
            .filter(|&v| state.loaded[v] && row_ms(v) < row_ms(state.active))
            .filter(|&v| running(v) < state.instances[v] as usize && !state.queue.iter().any(|q| q.variant == v))
            .collect();
        cheaper.sort_by(|&x, &y| configured.variants[y].accuracy.total_cmp(&configured.variants[x].accuracy));
        cheaper.into_iter().find(|&v| self.would_miss_on(task, v, deadline_us, now, SHARING_SLOWDOWN).is_none())
    }

    /// Takes out of the queues the requests that could no longer be answered by their
    /// deadline, were their batch to start at `now`.
    pub fn expire(&mut self, now: u64) -> Vec<(usize, Queued)> {
        let mut dead = Vec::new();
        for (index, task) in self.tasks.iter_mut().enumerate() {
            // Deadlines follow arrival order within a task: they share one target.
            while let Some(head) = task.queue.front()
                && now + one_row_us(&task.costs[head.variant]) > head.deadline_us
            {
                dead.extend(task.queue.pop_front().map(|q| (index, q)));
            }
        }
        dead
    }

    /// The next batch to run at `now`: of the tasks whose batch may leave and whose
    /// variant has an instance free, the one whose oldest request waited longest.
    /// `Err` holds when the earliest held batch may leave, if any is held.
    pub fn next_batch(&mut self, model: &SimModel, now: u64) -> Result<Running, Option<u64>> {
        let mut best: Option<(u64, usize, usize)> = None;
        let mut earliest_wake: Option<u64> = None;
        let shared_busy = self.running.iter().any(|r| r.shared);
        for (index, task) in self.tasks.iter().enumerate() {
            let Some(head) = task.queue.front() else { continue };
            let threads = own_threads(&model.tasks[index].variants[head.variant]);
            let busy = self.running.iter().filter(|r| r.task == index && r.variant == head.variant).count();
            let free = if threads == 0.0 {
                !shared_busy && busy < task.instances[head.variant].max(1) as usize
            } else {
                busy < task.instances[head.variant] as usize
            };
            if !free {
                continue;
            }
            match readiness(task, now) {
                Readiness::Now { rows } => {
                    if best.is_none_or(|(arrived, ..)| head.arrived_us < arrived) {
                        best = Some((head.arrived_us, index, rows));
                    }
                }
                Readiness::At(at) => earliest_wake = Some(earliest_wake.map_or(at, |w| w.min(at))),
            }
        }
        let Some((_, task, rows)) = best else { return Err(earliest_wake) };
        let state = &mut self.tasks[task];
        let rows = in_time(state, rows, now);
        let requests: Vec<Queued> = state.queue.drain(..rows).collect();
        let variant = requests[0].variant;
        let threads = own_threads(&model.tasks[task].variants[variant]);
        let (cores, shared) = if threads == 0.0 { (self.cores, true) } else { (threads, false) };
        self.next_id += 1;
        Ok(Running { id: self.next_id, task, variant, requests, started_us: now, cores, shared })
    }

    /// Carries out the actions the control core made of a policy's decision, at
    /// `now`, as the control loop does. Returns the switches started.
    pub fn steer(&mut self, model: &SimModel, actions: &[Action], now: u64, free: bool) -> u64 {
        actions.iter().map(|action| u64::from(self.carry_out(model, action, now, free))).sum()
    }

    /// Carries out one of the control core's actions at `now`, as the control loop
    /// does: knobs set on the variant named; a switch to a loaded variant (with
    /// `free`, to any) at once, to another once it has loaded; a load that takes the
    /// variant's load time; an unload at once. Returns whether a switch started.
    fn carry_out(&mut self, model: &SimModel, action: &Action, now: u64, free: bool) -> bool {
        let Some(task) = model.task_index(action.task()) else { return false };
        let variants = &model.tasks[task].variants;
        let state = &mut self.tasks[task];
        match action {
            Action::Configure { variant, knobs, .. } => {
                let Some(variant) = variants.iter().position(|v| &v.name == variant) else { return false };
                let (rows, delay) = &mut state.knobs[variant];
                *rows = knobs.max_batch_size.map_or(*rows, |set| u32::try_from(set).unwrap_or(u32::MAX));
                *delay = knobs.max_queue_delay_us.unwrap_or(*delay);
                false
            }
            Action::Switch { variant, .. } => {
                let Some(variant) = variants.iter().position(|v| &v.name == variant) else { return false };
                if free || state.loaded[variant] {
                    if !state.loaded[variant] {
                        state.loaded(variant);
                    }
                    state.switch_to(variant, now);
                    // One that stood by serves with the instances set for it.
                    scale(
                        state,
                        variant,
                        state.instances_set[variant],
                        now,
                        if free { 0.0 } else { variants[variant].load_ms },
                    );
                } else {
                    let ready_us = now + (variants[variant].load_ms * 1e3) as u64;
                    state.loading = Some(Loading { variant, ready_us, takes_over: true });
                }
                true
            }
            Action::Load { variant, .. } => {
                let Some(variant) = variants.iter().position(|v| &v.name == variant) else { return false };
                let ready_us = if free { now } else { now + (variants[variant].load_ms * 1e3) as u64 };
                state.loading = Some(Loading { variant, ready_us, takes_over: false });
                false
            }
            Action::Unload { variant, .. } => {
                let Some(variant) = variants.iter().position(|v| &v.name == variant) else { return false };
                state.loaded[variant] = false;
                state.instances[variant] = 0;
                state.last_served_us[variant] = now;
                false
            }
            Action::Scale { variant, instances, .. } => {
                let Some(variant) = variants.iter().position(|v| &v.name == variant) else { return false };
                state.instances_set[variant] = *instances;
                if state.loaded[variant] {
                    scale(state, variant, *instances, now, if free { 0.0 } else { variants[variant].load_ms });
                }
                false
            }
            Action::Refuse { .. } => false,
        }
    }

    /// Variants whose load finished by `now` are loaded, those switched to take over,
    /// and instances added by now take batches.
    pub fn finish_loads(&mut self, now: u64) {
        for task in &mut self.tasks {
            if let Some(loading) = task.loading
                && loading.ready_us <= now
            {
                task.loaded(loading.variant);
                if loading.takes_over {
                    task.switch_to(loading.variant, now);
                }
                task.loading = None;
            }
            if let Some(scaling) = task.scaling
                && scaling.ready_us <= now
            {
                if task.loaded[scaling.variant] {
                    task.instances[scaling.variant] = scaling.instances;
                }
                task.scaling = None;
            }
        }
    }

    /// The snapshot this server's control loop would hand its policy at `now`.
    pub fn snapshot(&mut self, model: &SimModel, tick: u64, now: u64) -> Snapshot {
        let second = now / 1_000_000;
        let cpu = self.utilisation_since_tick(now).map(|u| (u * 10.0).round() / 10.0);
        let tasks: Vec<TaskSnapshot> = self
            .tasks
            .iter_mut()
            .zip(&model.tasks)
            .map(|(state, task)| {
                let traffic = TrafficReading {
                    demand: state.traffic.demand(second),
                    in_flight: state.in_flight,
                    tick: state.traffic.take_tick(),
                    photos: None,
                };
                let variants = task
                    .variants
                    .iter()
                    .enumerate()
                    .map(|(index, v)| {
                        let variant_state = match state.loading {
                            Some(loading) if loading.variant == index => VariantState::Loading,
                            _ if state.loaded[index] => VariantState::Ready,
                            _ => VariantState::Unloaded,
                        };
                        let mut snapshot = v.snapshot.clone();
                        snapshot.name.clone_from(&v.name);
                        snapshot.runs = (variant_state == VariantState::Ready).then_some(state.runs[index]);
                        snapshot.state = variant_state;
                        snapshot.instances = state.instances[index];
                        snapshot.instances_starting = state
                            .scaling
                            .filter(|s| s.variant == index)
                            .map_or(0, |s| s.instances.saturating_sub(state.instances[index]));
                        snapshot.instances_set = state.instances_set[index];
                        snapshot.idle_ms = Some(if index == state.active {
                            0
                        } else {
                            now.saturating_sub(state.last_served_us[index]) / 1000
                        });
                        // Its batches are bounded by its configured size, as the runtime's
                        // are by theirs; a refusal it carries is the runtime's.
                        snapshot.batch_ceiling = Some(v.max_batch_size);
                        snapshot
                    })
                    .collect();
                let (max_batch_size, max_queue_delay_us) = state.knobs[state.active];
                task_snapshot(TaskReading {
                    name: task.name.clone(),
                    traffic,
                    queue_length: state.active_queue(),
                    slo_latency_ms: task.slo_ms,
                    active: ServingKnobs {
                        variant: task.variants[state.active].name.clone(),
                        max_batch_size,
                        max_queue_delay_us,
                        instances: state.instances[state.active],
                    },
                    variants,
                })
            })
            .collect();
        let budget = model.budget.as_ref().map(|b| modelless_runtime::policy::budget(&b.totals(model.cores), &tasks));
        let system = SystemSnapshot {
            cores: model.cores,
            cpu_host_percent: cpu,
            cpu_process_percent: cpu,
            budget,
            ..SystemSnapshot::default()
        };
        Snapshot { abi_version: ABI_VERSION, tick, now_ms: now / 1000, tasks, system }
    }
}

/// The instances a variant is configured with.
fn configured_instances(variant: &SimVariant) -> u32 {
    variant.snapshot.instances_set.max(1)
}

/// The threads of a variant's instance's own pool; 0 on the shared pool.
fn own_threads(variant: &SimVariant) -> f64 {
    variant.snapshot.share.map_or(0.0, |s| s.cores)
}

/// Brings loaded `variant` of `task` to `instances` at `now`: fewer at once (their
/// batches finish), more once they have loaded, `load_ms` on.
fn scale(task: &mut TaskState, variant: usize, instances: u32, now: u64, load_ms: f64) {
    let instances = instances.max(1);
    if instances <= task.instances[variant] || load_ms <= 0.0 {
        task.instances[variant] = instances;
        task.scaling = task.scaling.filter(|s| s.variant != variant);
    } else {
        task.scaling = Some(Scaling { variant, instances, ready_us: now + (load_ms * 1e3) as u64 });
    }
}

/// What one row costs on a variant, µs; nothing where the cost is unknown (a
/// request then expires at its deadline).
fn one_row_us(cost: &Option<BatchCost>) -> u64 {
    cost.as_ref().map_or(0, |c| c.of(1).as_micros() as u64)
}

/// Of the first `rows` requests of `task`'s queue, how many one batch starting at
/// `now` can answer by the head's deadline (the earliest: they share one target).
fn in_time(task: &TaskState, rows: usize, now: u64) -> usize {
    let Some(head) = task.queue.front() else { return rows };
    let Some(cost) = &task.costs[head.variant] else { return rows };
    let left = Duration::from_micros(head.deadline_us.saturating_sub(now));
    (1..=rows).rev().find(|&n| cost.of(n) <= left).unwrap_or(1)
}

/// Whether `task`'s head batch may leave at `now`: it is full, or its oldest request
/// has waited the variant's queue delay. Requests routed to another variant close
/// the batch in front of them (in the runtime, a request too large for the variant
/// that took over stays on the one replaced).
fn readiness(task: &TaskState, now: u64) -> Readiness {
    let head = task.queue[0];
    let (max_batch, delay) = task.knobs[head.variant];
    let rows = task.queue.iter().take(max_batch as usize).take_while(|q| q.variant == head.variant).count();
    let closed = rows < task.queue.len() && rows < max_batch as usize;
    if rows == max_batch as usize || closed || now >= head.arrived_us + delay {
        Readiness::Now { rows }
    } else {
        Readiness::At(head.arrived_us + delay)
    }
}

#[cfg(test)]
mod tests {
    use modelless::policy_abi::{Decision, LatencyFit, TaskDecision, VariantSnapshot};
    use modelless_runtime::batching::MAX_QUEUE_DELAY_US;
    use modelless_runtime::policy::core;

    use super::*;
    use crate::simulate::SimBudget;

    /// Task `t`: `a` loaded and serving, `b` not loaded (it loads in 100 ms), batches
    /// of up to 8.
    fn model() -> SimModel {
        let variant = |name: &str, loaded| SimVariant {
            name: name.into(),
            accuracy: 70.0,
            fit: LatencyFit { a_ms: 1.0, c_ms: 1.0, r2: 1.0 },
            spread: 0.0,
            load_ms: 100.0,
            loaded,
            max_batch_size: 8,
            max_queue_delay_us: 0,
            max_queue_size: 64,
            calibration: None,
            snapshot: VariantSnapshot::default(),
        };
        let task = SimTask {
            name: "t".into(),
            slo_ms: None,
            active: 0,
            variants: vec![variant("a", true), variant("b", false)],
            spill: true,
        };
        SimModel { cores: 1, tasks: vec![task], budget: None }
    }

    #[test]
    fn a_decision_is_clamped_as_the_runtime_clamps_it_and_its_knobs_await_the_variant_switched_to() {
        let model = model();
        let mut server = Server::new(&model);
        let wanted = TaskDecision {
            variant: Some("b".into()),
            max_batch_size: Some(99),
            max_queue_delay_us: Some(u64::MAX),
            ..TaskDecision::keep("t")
        };
        let decision = Decision { tasks: vec![wanted, TaskDecision::keep("nope")] };
        let actions = |server: &mut Server, now| core::tick(&server.snapshot(&model, 0, now), &decision).actions;
        let planned = actions(&mut server, 0);
        assert_eq!(server.steer(&model, &planned, 0, false), 1);
        let task = &server.tasks[0];
        assert_eq!(task.knobs, [(8, 0), (8, MAX_QUEUE_DELAY_US)], "the knobs are b's, within bounds");
        let loading = Loading { variant: 1, ready_us: 100_000, takes_over: true };
        assert_eq!((task.active, task.loading), (0, Some(loading)), "b loads first");
        let planned = actions(&mut server, 50_000);
        assert_eq!(server.steer(&model, &planned, 50_000, false), 0, "a switch is under way");
        server.finish_loads(100_000);
        assert_eq!(server.tasks[0].active, 1);
    }

    /// `model()` with `a` on instances of one thread of its own, on a machine of
    /// `cores` whose budget is `budget` cores.
    fn own_threads_model(cores: u32, budget: f64) -> SimModel {
        let mut model = model();
        model.cores = cores;
        model.budget = Some(SimBudget { cores: budget, memory_bytes: 1 << 40, unload_idle: true });
        for variant in &mut model.tasks[0].variants {
            let share = modelless::policy_abi::InstanceShare { cores: 1.0, memory_bytes: 1 << 20, gpu_memory_bytes: 0 };
            variant.snapshot.share = Some(share);
            variant.snapshot.instances_set = 1;
        }
        model
    }

    fn queue(server: &mut Server, requests: usize, now: u64) {
        for index in 0..requests {
            let queued = Queued { index, arrived_us: now, deadline_us: now + 1_000_000, variant: 0 };
            server.tasks[0].queue.push_back(queued);
        }
    }

    #[test]
    fn instances_added_once_loaded_run_batches_beside_each_other_and_crowd_the_cores_they_share() {
        let model = own_threads_model(1, 4.0);
        let mut server = Server::new(&model);
        let two = Decision { tasks: vec![TaskDecision { instances: Some(2), ..TaskDecision::keep("t") }] };
        let planned = core::tick(&server.snapshot(&model, 0, 0), &two).actions;
        server.steer(&model, &planned, 0, false);
        let snapshot = server.snapshot(&model, 1, 50_000);
        assert_eq!((snapshot.tasks[0].variants[0].instances, snapshot.tasks[0].variants[0].instances_starting), (1, 1));
        queue(&mut server, 16, 50_000);
        let first = server.next_batch(&model, 50_000).unwrap();
        server.running.push(first);
        assert!(server.next_batch(&model, 50_000).is_err(), "the second instance is still loading");
        server.finish_loads(100_000);
        let second = server.next_batch(&model, 100_000).unwrap();
        assert_eq!(second.cores, 1.0);
        assert_eq!(server.crowding(second.cores), 2.0, "two threads on one core: twice as long");
        server.running.push(second);
        assert_eq!(server.cores_held(&model), 2.0);
        // Back to one: at once, the batches running finish where they are.
        let one = Decision { tasks: vec![TaskDecision { instances: Some(1), ..TaskDecision::keep("t") }] };
        let planned = core::tick(&server.snapshot(&model, 2, 100_000), &one).actions;
        server.steer(&model, &planned, 100_000, false);
        assert_eq!(server.tasks[0].instances[0], 1);
        assert_eq!(server.running.len(), 2);
    }

    #[test]
    fn a_request_the_active_variant_would_refuse_spills_to_a_cheaper_idle_one_as_in_the_runtime() {
        let mut model = model();
        let cheap = &mut model.tasks[0].variants[1];
        (cheap.loaded, cheap.accuracy, cheap.fit) = (true, 60.0, LatencyFit { a_ms: 0.5, c_ms: 0.5, r2: 1.0 });
        let mut server = Server::new(&model);
        // `a` has two full batches of 9 ms queued: a request due in 10 ms misses there,
        // and `b`, idle, answers it in 1.
        queue(&mut server, 16, 0);
        assert!(server.would_miss(0, 10_000, 0).is_some());
        assert_eq!(server.spill_to(&model, 0, 10_000, 0), Some(1));
        assert_eq!(server.spill_to(&model, 0, 500, 0), None, "not even `b` answers in 0.5 ms");
        // Alone `b` would answer in 1 ms, 2.5 ms with the headroom; beside `a`, in 2.
        assert_eq!(server.spill_to(&model, 0, 2_500, 0), None, "beside `a`, `b` takes twice its line");
        let mut kept = model.clone();
        kept.tasks[0].spill = false;
        assert_eq!(server.spill_to(&kept, 0, 10_000, 0), None, "spill off");
        let mut pricier = model.clone();
        pricier.tasks[0].variants[1].fit = LatencyFit { a_ms: 2.0, c_ms: 2.0, r2: 1.0 };
        assert_eq!(server.spill_to(&pricier, 0, 10_000, 0), None, "only to a cheaper variant");
    }

    #[test]
    fn instances_beyond_the_simulated_budget_are_refused_as_the_runtime_refuses_them() {
        let model = own_threads_model(2, 1.0);
        let mut server = Server::new(&model);
        let two = Decision { tasks: vec![TaskDecision { instances: Some(2), ..TaskDecision::keep("t") }] };
        let planned = core::tick(&server.snapshot(&model, 0, 0), &two).actions;
        assert!(matches!(&planned[..], [Action::Refuse { .. }]), "{planned:?}");
        server.steer(&model, &planned, 0, false);
        assert_eq!(server.tasks[0].instances_set[0], 1);
    }

    #[test]
    fn a_load_keeps_the_variant_serving_and_makes_a_later_switch_cost_nothing() {
        let model = model();
        let mut server = Server::new(&model);
        let ask = |load: &[&str], unload: &[&str]| Decision {
            tasks: vec![TaskDecision {
                load: load.iter().map(|v| v.to_string()).collect(),
                unload: unload.iter().map(|v| v.to_string()).collect(),
                ..TaskDecision::keep("t")
            }],
        };
        let planned = core::tick(&server.snapshot(&model, 0, 0), &ask(&["b"], &[])).actions;
        assert_eq!(server.steer(&model, &planned, 0, false), 0);
        server.finish_loads(100_000);
        assert_eq!((server.tasks[0].active, &server.tasks[0].loaded[..]), (0, &[true, true][..]), "b loaded, a serves");
        let switch = Decision { tasks: vec![TaskDecision { variant: Some("b".into()), ..TaskDecision::keep("t") }] };
        let planned = core::tick(&server.snapshot(&model, 1, 100_000), &switch).actions;
        server.steer(&model, &planned, 100_000, false);
        assert_eq!(server.tasks[0].active, 1, "b took over at once");
        let planned = core::tick(&server.snapshot(&model, 2, 200_000), &ask(&[], &["a", "b"])).actions;
        server.steer(&model, &planned, 200_000, false);
        assert_eq!(&server.tasks[0].loaded[..], &[false, true][..], "a unloaded; b serves and stays");
    }
}
