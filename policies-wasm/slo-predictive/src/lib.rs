//! The SLO-predictive policy: for each task with a latency target, predict every
//! profiled variant's p99 at the demand expected over the next ticks, and serve the
//! most accurate one predicted to stay under the target with headroom. A task without
//! a target keeps its variant, and the policy warns of it once (`modelless.log`).
//!
//! **A task alone on the machine** (see [`SloPredictive::lone_rates`] and [`queue`]):
//! - Its p99 on a variant is simulated: Poisson arrivals at the demand, their rate
//!   following the spread of per-second demand over the last `spread_window_s`
//!   seconds beyond what Poisson noise explains ([`history`], [`queue::spread`]), run
//!   through the runtime's dynamic batcher (the task's batch limit and queue delay,
//!   the variant's refitted line). No constant is fitted to one family.
//! - It holds still by judging staying and stepping up at different demand: staying
//!   by the last second's rate and the last five seconds' mean, each less
//!   `measured_sigmas` standard deviations of its Poisson measurement, or the rate
//!   since the last tick (already two below what it counted); a step up, and the
//!   target of a step down, by the last five seconds' mean plus as many, or the last
//!   second's where more. The gap is the measurement's own noise: a steady load that
//!   moves within it moves no variant. A rising trend (10 s against 60 s rates)
//!   carried `horizon_s` ahead counts for both; a rise within the last seconds
//!   carried `ramp_horizon_s` ahead counts for the step up, and `stay_ramp_share`
//!   of it for staying.
//! - What the simulation does not see (decoding before the queue, a host that stalls)
//!   is measured against what it saw and added to every prediction (see [`unseen`]).
//! - Where requests carry images, a row also pays for its decoding, which takes the
//!   same cores as the sessions (see [`decoding`]), and no less than the variant's
//!   capacity with photos of their size says, where it was measured (see [`photos`]).
//!
//! **Co-located tasks** share the executor, and a closed formula prices their turns:
//! - Demand ahead: the largest of the 1 s and 10 s rates and the rate since the last
//!   tick, plus the trend carried `horizon_s` ahead, or the rise within the last ten
//!   seconds, while it still rises, carried `ramp_horizon_s` ahead where that is
//!   more (see [`ramp`]), plus the task's share of `burst_sigmas` standard
//!   deviations of a second's Poisson arrivals at the rate of all tasks (`√total`,
//!   not the sum of each task's own).
//! - For a variant with fit `L(b) = a·b + c` under the task's batch limit `B`, whose
//!   throughput keeps utilisation `ρ = λ·L(B)/B` under `max_utilisation`: a request
//!   typically waits for the batch ahead and runs in its own, `2·L(s)` where
//!   `s = λ·L(s)`; bursts queue on top, about `queueing·L(B)·ρ/(1−ρ)` at the 99th
//!   percentile (`queueing` 0.7 fits the MobileNetV2 family at ρ from 0.3 to 0.8).
//! - They are decided together (see [`allocate`]): room for a task that the others
//!   crowd is made where it costs least accuracy, and tasks step up one at a time
//!   into the room there is. A request's share of the executor is its variant's
//!   line at the rows the task's batches have held lately, scaled by how much longer
//!   the batches took than the lines say (see [`executor`]).
//!
//! **Every task:**
//! - When requests queue beyond one batch, the rate that clears them within the
//!   target is added to the demand.
//! - Step down at once when the variant serving is predicted over the target, or the
//!   observed p99 is (with more than two late answers, and over 1 %, since the last
//!   tick), or its queue turned requests away (as many), or the last request of its
//!   queue would be answered late; step up only when the better variant is predicted
//!   under `step_up_headroom` of the target and the last change is
//!   `step_up_after_ms` old. A variant left because it was seen failing is tried
//!   again only once the accuracy it would have gained repays the late answers it
//!   cost, and at a lower demand (see [`failures`]).
//! - Each variant's line is refitted through the batches it ran lately (see
//!   [`refit`]): where the machine serves slower or faster than it was profiled,
//!   predictions follow the machine.
//! - It leaves the batching knobs as configured: without a queue delay, batches grow
//!   exactly when a queue builds, which is what keeps a burst's tail short.

pub mod allocate;
pub mod decoding;
pub mod executor;
pub mod failures;
pub mod history;
pub mod photos;
pub mod queue;
pub mod ramp;
pub mod refit;
pub mod unseen;

use std::collections::BTreeMap;

use allocate::{Budgets, Candidate, Contender, allocate};
use decoding::Decoding;
use executor::Executor;
use failures::{Failures, Seen};
use history::History;
use modelless_policy_abi::guest::{Error, Policy};
use modelless_policy_abi::{Decision, LatencyFit, Snapshot, TaskDecision, TaskSnapshot, VariantSnapshot};
use refit::Refits;
use serde::{Deserialize, Serialize};
use unseen::Unseen;

/// Parameters (the `init` JSON); every field is optional.
#[derive(Clone, Debug, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Parameters {
    /// Share of the target a prediction may use.
    pub headroom: f64,
    /// Share of the target a more accurate variant may be predicted to use to be
    /// stepped up to: less than `headroom`, so that a step up is not undone at the
    /// next wave (a variant that was idle also runs its first batches slower). For a
    /// lone task, whose demands to stay and to step up already lie apart by the
    /// measured spread of its rate.
    pub step_up_headroom: f64,
    /// The same for co-located tasks, predicted from the mean demand alone: the band
    /// between it and `headroom` is all that keeps them from stepping up and back.
    pub co_located_step_up_headroom: f64,
    /// Highest utilisation a variant may be predicted to run at.
    pub max_utilisation: f64,
    /// Highest utilisation a more accurate variant may be predicted to run at to be
    /// stepped up to, at the demand a step up is judged by: below `max_utilisation`,
    /// so that a machine running a fifth slower than profiled for a few seconds (as
    /// a shared VM does) does not make the step up's queue late.
    pub step_up_utilisation: f64,
    /// The 99th-percentile queueing wait in units of `L(b)·ρ/(1−ρ)`.
    pub queueing: f64,
    /// How far ahead a rising demand is carried, in s.
    pub horizon_s: f64,
    /// How far ahead a demand that rose within the last ten seconds is carried, in s
    /// (about until a step down decided now has taken effect).
    pub ramp_horizon_s: f64,
    /// Standard deviations of a second's arrivals added to the demand ahead.
    pub burst_sigmas: f64,
    /// Share of the way from a falling 1 s rate back up to the 10 s rate that is
    /// still expected.
    pub falling_weight: f64,
    /// Least time after a change before a step up, in ms. Short: a step up must
    /// already fit under `step_up_headroom`, and after a crowd's peak the tasks that
    /// made room for it wait this long on their cheaper variants.
    pub step_up_after_ms: u64,
    /// Largest batch predicted with, whatever the task's knob says.
    pub max_batch_size: u32,
    /// Whether lines are refitted through the batches the variants ran.
    pub follow_runs: bool,
    /// Whether, where tasks are co-located, a request's share of the executor is
    /// priced at the rows its task's batches hold, and scaled by the busy time
    /// measured over what the lines say (else at full batches).
    pub follow_executor: bool,
    /// Run time (ms) of a variant's recent batches that a refit counts, the newest
    /// most.
    pub runs_window_ms: f64,
    /// Batches the profile's line is worth at one row and at the largest batch.
    pub profile_weight: f64,
    /// Seconds of recent arrivals whose spread a lone task's prediction replays.
    pub spread_window_s: u32,
    /// Least time since the last tick over which the arrivals since are taken as a
    /// rate, ms (two standard deviations below the count keep a short window's blip
    /// from counting as a crowd).
    pub recent_min_ms: u64,
    /// Standard deviations of the count below which the arrivals since the last tick
    /// are taken as a rate.
    pub recent_sigmas: f64,
    /// Standard deviations of a rate's measurement between the demand staying is
    /// judged by (below the rate) and the one a step up is (above it).
    pub measured_sigmas: f64,
    /// Share of a rising demand's ramp (carried `ramp_horizon_s` ahead) that a lone
    /// task's demand to stay on its variant carries: judged from the measured rates
    /// alone, a ramp is stepped down from a second late, when its queue already
    /// turns requests away.
    pub stay_ramp_share: f64,
}

impl Default for Parameters {
    fn default() -> Self {
        Parameters {
            headroom: 0.9,
            step_up_headroom: 0.85,
            co_located_step_up_headroom: 0.75,
            max_utilisation: 0.85,
            step_up_utilisation: 0.75,
            queueing: 0.7,
            horizon_s: 10.0,
            ramp_horizon_s: 3.0,
            burst_sigmas: 1.0,
            falling_weight: 0.5,
            step_up_after_ms: 3_000,
            max_batch_size: 32,
            follow_runs: true,
            follow_executor: true,
            runs_window_ms: 10_000.0,
            profile_weight: 20.0,
            spread_window_s: 60,
            recent_min_ms: 100,
            recent_sigmas: 2.0,
            measured_sigmas: 2.0,
            stay_ramp_share: 0.5,
        }
    }
}

/// The policy: its parameters and what it remembers between ticks.
#[derive(Debug, Default)]
pub struct SloPredictive {
    parameters: Parameters,
    state: State,
    /// Whether the last snapshot had more than one task.
    co_located: bool,
    /// The tasks it warned have no latency target (once each).
    warned: std::collections::BTreeSet<String>,
    /// Per task held for want of prices, the variants it named as unpriced (warned
    /// again only when they change).
    warned_unpriced: BTreeMap<String, Vec<String>>,
}

/// Per task: when it last switched, and the time and requests in flight of the last
/// tick (to count arrivals since); and what the variants ran.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct State {
    last_switch_ms: BTreeMap<String, u64>,
    last_seen: BTreeMap<String, (u64, u64)>,
    refits: Refits,
    executor: Executor,
    decoding: Decoding,
    history: BTreeMap<String, History>,
    failures: Failures,
    unseen: BTreeMap<String, Unseen>,
}

/// The executor's share other tasks take (utilisation, 0–1) and their longest batch
/// (ms): co-located tasks take turns on the same cores.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Sharing {
    /// Their utilisation, summed.
    pub utilisation: f64,
    /// Their longest full batch, ms.
    pub batch_ms: f64,
}

impl Policy for SloPredictive {
    type Parameters = Parameters;
    type State = State;

    fn new(parameters: Parameters) -> Result<Self, Error> {
        Ok(SloPredictive { parameters, ..SloPredictive::default() })
    }

    /// The steps of a tick: learn from what ran, read each task's demand ahead, price
    /// its variants, choose for all tasks together, and switch; a task whose serving
    /// variant has no price steps down only when seen failing.
    fn decide(&mut self, snapshot: &Snapshot) -> Result<Decision, Error> {
        for warning in self.unsteerable(snapshot) {
            log::warn!("{warning}");
        }
        self.co_located = snapshot.tasks.len() > 1;
        self.observe(snapshot);
        let readings = self.read_demands(snapshot);
        let Pricing { priced, contenders, held } = self.price(snapshot, readings);
        let chosen = allocate(self, &contenders);
        let mut tasks = Vec::new();
        for ((&i, contender), v) in priced.iter().zip(&contenders).zip(chosen) {
            if v != contender.active {
                tasks.push(self.switch(&snapshot.tasks[i], contender, v, snapshot.now_ms));
            }
        }
        for (i, own_latencies) in held {
            let task = &snapshot.tasks[i];
            if let Some(variant) = self.unpriced_step_down(task, own_latencies) {
                self.state.last_switch_ms.insert(task.name.clone(), snapshot.now_ms);
                tasks.push(TaskDecision::switch(&task.name, variant));
            }
        }
        Ok(Decision { tasks })
    }

    fn state(&mut self) -> Option<&mut State> {
        Some(&mut self.state)
    }
}

/// Seconds whose mean rate a step up is judged by.
const LATEST_S: usize = 5;

/// A task's expected rate, requests/s: to stay on its variant, and to step up.
struct Expected {
    stay: f64,
    step_up: f64,
    /// Whether the latencies observed are the active variant's.
    own_latencies: bool,
}

/// The tasks of a tick, priced: those whose serving variant has a price (their
/// indices, and how the allocation sees each), and the others, held (with whether
/// their latencies are their serving variant's).
struct Pricing<'a> {
    priced: Vec<usize>,
    contenders: Vec<Contender<'a>>,
    held: Vec<(usize, bool)>,
}

/// What a tick reads of a task's demand.
struct Reading {
    demand: f64,
    step_up_demand: f64,
    /// Whether the latencies observed are the active variant's.
    own_latencies: bool,
}

impl SloPredictive {
    /// Learns from what ran since the last tick: decoding's share, the variants'
    /// lines refitted through their batches, and the executor co-located tasks share.
    fn observe(&mut self, snapshot: &Snapshot) {
        self.state.decoding.observe(snapshot);
        if self.parameters.follow_runs || self.parameters.follow_executor {
            let ran = self.state.refits.observe(snapshot, self.parameters.runs_window_ms);
            if self.parameters.follow_executor {
                self.observe_executor(snapshot, &ran);
            }
        }
    }

    /// Each task's demand ahead: to stay and to step up, with its bursts and backlog.
    fn read_demands(&mut self, snapshot: &Snapshot) -> Vec<Reading> {
        let now_ms = snapshot.now_ms;
        let expected: Vec<Expected> = snapshot
            .tasks
            .iter()
            .map(|t| {
                // Before `recent_rate` records this tick as the last one seen.
                let own_latencies = self.window_after_switch(t);
                let recent = self.recent_rate(t, now_ms);
                let (stay, step_up) = if self.co_located {
                    let rate = self.expected_rate(t, recent, now_ms);
                    (rate, rate)
                } else {
                    self.lone_rates(t, recent, now_ms)
                };
                Expected { stay, step_up, own_latencies }
            })
            .collect();
        if !self.co_located {
            for (task, e) in snapshot.tasks.iter().zip(&expected) {
                self.observe_unseen(task, e.own_latencies);
            }
        }
        let total: f64 = expected.iter().map(|e| e.stay).sum();
        snapshot
            .tasks
            .iter()
            .zip(expected)
            .map(|(t, e)| {
                // A lone task's bursts are in its simulated arrivals; co-located tasks
                // are priced by a formula, which takes them as extra demand.
                let with_bursts = |rate| if self.co_located { self.with_bursts(rate, total) } else { rate };
                let backlog = self.backlog_per_s(t);
                Reading {
                    demand: with_bursts(e.stay) + backlog,
                    step_up_demand: with_bursts(e.step_up) + backlog,
                    own_latencies: e.own_latencies,
                }
            })
            .collect()
    }

    /// Each task priced ([`Pricing`]); a task held is warned of once with the
    /// variants it cannot price.
    fn price<'a>(&mut self, snapshot: &'a Snapshot, readings: Vec<Reading>) -> Pricing<'a> {
        let mut pricing = Pricing { priced: Vec::new(), contenders: Vec::new(), held: Vec::new() };
        for (i, (task, reading)) in snapshot.tasks.iter().zip(readings).enumerate() {
            let own_latencies = reading.own_latencies;
            match self.contender(task, reading, snapshot.now_ms) {
                Some(contender) => {
                    self.warned_unpriced.remove(&task.name);
                    pricing.priced.push(i);
                    pricing.contenders.push(contender);
                }
                None => {
                    if let Some(warning) = self.unpriced(task) {
                        log::warn!("{warning}");
                    }
                    pricing.held.push((i, own_latencies));
                }
            }
        }
        pricing
    }

    /// The switch of `task` to its candidate `to`, remembering when, and what the
    /// variant it leaves cost where it was seen failing.
    fn switch(&mut self, task: &TaskSnapshot, contender: &Contender, to: usize, now_ms: u64) -> TaskDecision {
        let name = &task.name;
        self.state.last_switch_ms.insert(name.clone(), now_ms);
        let (left, to_accuracy) = (contender.candidates[contender.active].accuracy, contender.candidates[to].accuracy);
        if let Some(late) = contender.seen_failing
            && to_accuracy < left
        {
            let seen = Seen { left, to: to_accuracy, late, demand: contender.demand };
            self.state.failures.failed(name, seen, now_ms, self.parameters.step_up_after_ms);
        }
        TaskDecision::switch(name, contender.candidates[to].name)
    }

    /// The warning for `task`, held because its serving variant has no price (no
    /// profile, and no batches run to price it by), naming every variant it cannot
    /// price: it then only steps such a task down when its own answers come late, and
    /// never up. Once per task, and again when what it lacks changes.
    fn unpriced(&mut self, task: &TaskSnapshot) -> Option<String> {
        let unpriced: Vec<String> =
            task.variants.iter().filter(|v| self.priced(task, v).is_none()).map(|v| v.name.clone()).collect();
        if self.warned_unpriced.get(&task.name) == Some(&unpriced) {
            return None;
        }
        let warning = format!(
            "task `{}` is held on `{}`: slo-predictive prices variants by their profiles and has none for {}; \
             profile them (`modelless profile`, or `profile = \"measure\"` in the variant's config) or let them \
             serve a while",
            task.name,
            task.active.variant,
            unpriced.iter().map(|v| format!("`{v}`")).collect::<Vec<_>>().join(", ")
        );
        self.warned_unpriced.insert(task.name.clone(), unpriced);
        Some(warning)
    }

    /// A warning for each task of `snapshot` it has not warned of yet that has
    /// variants to choose from but no latency target: without one it keeps the task on
    /// the variant serving, at any load.
    pub fn unsteerable(&mut self, snapshot: &Snapshot) -> Vec<String> {
        snapshot
            .tasks
            .iter()
            .filter(|t| t.slo_latency_ms.is_none() && t.variants.len() > 1)
            .filter(|t| self.warned.insert(t.name.clone()))
            .map(|t| {
                format!(
                    "task `{}` has no latency target: slo-predictive steers by one, and keeps it on `{}` at any \
                     load; set `latency_slo_ms` in the task's config",
                    t.name, t.active.variant
                )
            })
            .collect()
    }

    /// Whether the last snapshot had more than one task.
    pub fn is_co_located(&self) -> bool {
        self.co_located
    }

    /// A lone task's demand ahead, (to stay, to step up), requests/s, given `recent`,
    /// the rate since the last tick (already two deviations below what it counted).
    /// Staying is judged by the rates measured less `measured_sigmas` of their Poisson
    /// deviation (a second of 20 requests has one of √20 ≈ 4.5, five seconds' mean one
    /// of √(20/5) = 2), a step up by the last five seconds' mean plus as much, or the
    /// last second's where more: a crowd is seen at once, and a steady load that moves
    /// within its noise moves no variant. A rising trend carried ahead counts for both;
    /// a ramp within the last ten seconds (see [`ramp`]) carried `ramp_horizon_s` ahead
    /// counts for a step up, and so for where a step down goes: a crowd still rising
    /// would outgrow a variant chosen for the demand of now.
    pub fn lone_rates(&self, task: &TaskSnapshot, recent: f64, now_ms: u64) -> (f64, f64) {
        let d = &task.demand;
        let (one, ten) = (d.per_s_1s, d.per_s_10s);
        let rise = self.expected_rate(task, 0.0, now_ms) - self.settled_rate(task);
        let sigmas = self.parameters.measured_sigmas;
        let low = |rate: f64, seconds: f64| (rate - sigmas * (rate / seconds).sqrt()).max(0.0);
        let high = |rate: f64, seconds: f64| rate + sigmas * (rate / seconds).sqrt();
        // The last seconds' mean follows a crowd that ebbs sooner than the 10 s rate.
        let counts = self.state.history.get(&task.name).map(|h| h.counts()).unwrap_or_default();
        let last = &counts[counts.len().saturating_sub(LATEST_S)..];
        let latest = if last.len() == LATEST_S { last.iter().sum::<f64>() / LATEST_S as f64 } else { ten };
        let ramp = self.state.history.get(&task.name).map_or(0.0, ramp::rising_per_s2) * self.parameters.ramp_horizon_s;
        let stay = low(one, 1.0).max(low(latest, LATEST_S as f64)).max(recent)
            + rise.max(ramp * self.parameters.stay_ramp_share);
        let up = one.max(high(latest, LATEST_S as f64)).max(recent) + rise.max(ramp);
        (stay, up)
    }

    /// The rate measured, a falling one counted part of the way back to the 10 s rate.
    fn settled_rate(&self, task: &TaskSnapshot) -> f64 {
        let d = &task.demand;
        d.per_s_1s + self.parameters.falling_weight * (d.per_s_10s - d.per_s_1s).max(0.0)
    }

    /// Requests per second expected over the horizon, given `recent`, the rate since
    /// the last tick, before bursts. Before a minute has passed the 60 s rate counts
    /// seconds that were never seen, so no trend is drawn from it.
    pub fn expected_rate(&self, task: &TaskSnapshot, recent: f64, now_ms: u64) -> f64 {
        let d = &task.demand;
        let rising = d.per_s_1s >= d.per_s_10s && now_ms >= 60_000;
        // The 10 s window is centred 5 s ago, the 60 s one 30 s ago; after a crowd
        // the 10 s rate is still above the 60 s one while the 1 s one falls: no trend.
        let trend_per_s = if rising { ((d.per_s_10s - d.per_s_60s) / 25.0).max(0.0) } else { 0.0 };
        let settled = self.settled_rate(task);
        // A lone task's batches grow with its queue and absorb a ramp, as predicted;
        // co-located tasks taking turns keep theirs small, and a ramp fills the
        // executor before the rates show it.
        let ramp_per_s =
            if self.co_located { self.state.history.get(&task.name).map_or(0.0, ramp::rising_per_s2) } else { 0.0 };
        let rise = (trend_per_s * self.parameters.horizon_s).max(ramp_per_s * self.parameters.ramp_horizon_s);
        settled.max(recent) + rise
    }

    /// `rate` with its share of `burst_sigmas` standard deviations of a second's
    /// arrivals at `total`, the rate of all tasks: the tasks share the executor, and
    /// their Poisson arrivals add up to a deviation of `√total`, not the sum of each
    /// one's own (for a lone task, `rate + σ·√rate`).
    pub fn with_bursts(&self, rate: f64, total: f64) -> f64 {
        if total <= 0.0 {
            return rate;
        }
        rate + self.parameters.burst_sigmas * rate / total.sqrt()
    }

    /// The rate that clears the queue beyond one batch within the target: a crowd
    /// that already queued is served on top of what keeps arriving.
    pub fn backlog_per_s(&self, task: &TaskSnapshot) -> f64 {
        let Some(target) = task.slo_latency_ms else { return 0.0 };
        let beyond = task.queue_length.saturating_sub(u64::from(self.ceiling(task)));
        beyond as f64 * 1e3 / (target * self.parameters.headroom)
    }

    /// Whether the latencies of the window since the last tick are all the active
    /// variant's: not when the task switched at that tick, as the requests in flight
    /// then were answered by the variant replaced.
    fn window_after_switch(&self, task: &TaskSnapshot) -> bool {
        let since = self.state.last_seen.get(&task.name).map(|&(at, _)| at);
        match (self.state.last_switch_ms.get(&task.name), since) {
            (Some(&switched), Some(since)) => switched < since,
            _ => true,
        }
    }

    /// Requests per second that arrived since the last tick (0 at the first, or
    /// within `recent_min_ms` of it).
    fn recent_rate(&mut self, task: &TaskSnapshot, now_ms: u64) -> f64 {
        let last = self.state.last_seen.insert(task.name.clone(), (now_ms, task.in_flight));
        let in_flight_then = last.map_or(0, |(_, in_flight)| in_flight);
        let arrived = (task.completed + task.rejections + task.in_flight).saturating_sub(in_flight_then);
        self.state.history.entry(task.name.clone()).or_default().record(now_ms, arrived);
        let Some((then_ms, _)) = last else { return 0.0 };
        if now_ms < then_ms + self.parameters.recent_min_ms.max(1) {
            return 0.0;
        }
        let arrived = arrived as f64;
        // `recent_sigmas` standard deviations below what was counted: a short window's
        // Poisson blip is no crowd, a crowd still shows.
        (arrived - self.parameters.recent_sigmas * arrived.sqrt()).max(0.0) * 1e3 / (now_ms - then_ms) as f64
    }

    /// Takes in the rows of each task's batches that `ran`, and their busy time against
    /// what the lines say of the same batches.
    fn observe_executor(&mut self, snapshot: &Snapshot, ran: &[refit::Ran]) {
        let (mut rows, mut busy_ms, mut lines_ms) = (0.0, 0.0, 0.0);
        let mut per_task: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
        for r in ran {
            let Some(task) = snapshot.tasks.iter().find(|t| t.name == r.task) else { continue };
            let Some(variant) = task.variant(&r.variant) else { continue };
            let Some(fit) = self.refitted(task, variant) else { continue };
            rows += r.rows;
            busy_ms += r.run_ms;
            lines_ms += fit.a_ms * r.rows + fit.c_ms.max(0.0) * r.batches;
            let (batches, task_rows) = per_task.entry(&task.name).or_default();
            *batches += r.batches;
            *task_rows += r.rows;
        }
        self.state.executor.observe(rows, busy_ms, lines_ms);
        for (task, (batches, task_rows)) in per_task {
            self.state.executor.observe_batches(task, batches, task_rows);
        }
    }

    /// What the executor's share by the lines is multiplied by: the measured ratio
    /// where tasks are co-located.
    pub fn executor_factor(&self) -> f64 {
        if self.parameters.follow_executor && self.co_located { self.state.executor.factor() } else { 1.0 }
    }

    /// The executor time (ms) a request of `task` takes on a variant with line `fit`
    /// and batches of up to `limit`: where tasks are co-located, at the rows their
    /// batches hold as they take turns (full ones until they have run); a lone task's
    /// batches grow as its queue does, which [`Self::predict`] models, so full ones.
    pub fn row_ms(&self, task: &str, fit: LatencyFit, limit: u32) -> f64 {
        let limit = f64::from(limit.max(1));
        let rows = if self.parameters.follow_executor && self.co_located {
            self.state.executor.rows_per_batch(task).map_or(limit, |rows| rows.clamp(1.0, limit))
        } else {
            limit
        };
        self.executor_factor() * (fit.a_ms * rows + fit.c_ms.max(0.0)) / rows
    }

    /// The variant's p99 (ms) at `demand` with batches of up to `limit`, a request
    /// taking `row_ms` of the executor, beside `others`, when they keep up.
    pub fn predict(&self, fit: LatencyFit, demand: f64, limit: u32, row_ms: f64, others: Sharing) -> Option<f64> {
        let (a_ms, c_ms) = (fit.a_ms, fit.c_ms.max(0.0));
        let (per_ms, batch) = (demand / 1e3, limit.max(1));
        let latency = a_ms * f64::from(batch) + c_ms;
        let utilisation = per_ms * row_ms + others.utilisation;
        if latency <= 0.0 || utilisation >= self.parameters.max_utilisation {
            return None;
        }
        // The batch that gathers while one like it runs: s = λ·(a·s + c).
        let settled = (per_ms * c_ms / (1.0 - per_ms * a_ms)).clamp(1.0, f64::from(batch));
        let longest = latency.max(others.batch_ms);
        let wait = self.parameters.queueing * longest * utilisation / (1.0 - utilisation);
        Some(2.0 * (a_ms * settled + c_ms) + wait)
    }

    /// The largest batch `task` is predicted with.
    fn ceiling(&self, task: &TaskSnapshot) -> u32 {
        let memory_limit = task.variants.iter().filter_map(|v| v.profile.as_ref()?.max_safe_batch).min();
        memory_limit.unwrap_or(u32::MAX).min(task.active.max_batch_size).min(self.parameters.max_batch_size).max(1)
    }

    /// `variant`'s line: its profile's, refitted through the batches it ran lately.
    fn refitted(&self, task: &TaskSnapshot, variant: &VariantSnapshot) -> Option<LatencyFit> {
        let Some(profile) = variant.profile.as_ref().and_then(|p| p.fit) else {
            // A variant whose fit was refused (or never profiled) is priced by what it ran.
            return variant.runs.as_ref().and_then(refit::observed_line);
        };
        if !self.parameters.follow_runs {
            return Some(profile);
        }
        let largest = self.ceiling(task);
        Some(self.state.refits.fit(&task.name, &variant.name, profile, largest, self.parameters.profile_weight))
    }

    /// What a variant is predicted with: its refitted line, each row also paying for
    /// the decoding it takes from the same cores; where requests carry photos and
    /// the variant's capacity with them was measured, no less than that says.
    fn priced(&self, task: &TaskSnapshot, variant: &VariantSnapshot) -> Option<LatencyFit> {
        let line = self.refitted(task, variant)?;
        let fit = LatencyFit { a_ms: line.a_ms + self.state.decoding.per_row_ms(), ..line };
        let batch = self.ceiling(task);
        let Some(capacities) = variant.profile.as_ref().map(|p| &p.photos) else { return Some(fit) };
        let tensor_ms = line.a_ms + line.c_ms.max(0.0) / f64::from(batch);
        match task.photos.and_then(|traffic| modelless_policy_abi::photo_request_ms(capacities, traffic, tensor_ms)) {
            Some(request_ms) => Some(photos::at_least(fit, request_ms, batch)),
            None => Some(fit),
        }
    }

    /// How long the last of `queued` requests waits to be answered on a variant
    /// running batches of `batch`, with `running` rows in flight beyond the queue:
    /// the batch running now (of those rows, at most a full one; its whole time, at
    /// worst), the queue's full batches ahead of it (first in, first out), then its
    /// own, of the rows left. (Counting the last batch as full would make one request
    /// queued behind a large variant's batch look late; counting a full batch running
    /// when none is would make an idle variant whose full batch takes longer than the
    /// target look behind.)
    pub fn clearing_ms(&self, a_ms: f64, c_ms: f64, batch: u32, running: u64, queued: u64) -> f64 {
        let batch = u64::from(batch.max(1));
        let latency = |rows: u64| if rows == 0 { 0.0 } else { a_ms * rows as f64 + c_ms.max(0.0) };
        let (full, rest) = (queued / batch, queued % batch);
        latency(running.min(batch)) + full as f64 * latency(batch) + latency(rest)
    }

    /// `task` as the allocation sees it, if the variant serving it has a profile.
    /// `own_latencies`: whether the observed latencies are the active variant's.
    fn contender<'a>(&self, task: &'a TaskSnapshot, reading: Reading, now_ms: u64) -> Option<Contender<'a>> {
        let Reading { demand, step_up_demand, own_latencies } = reading;
        let ceiling = self.ceiling(task);
        let candidates: Vec<Candidate> = task
            .variants
            .iter()
            .filter_map(|v| Some(Candidate { name: &v.name, accuracy: v.accuracy, fit: self.priced(task, v)? }))
            .collect();
        let active = candidates.iter().position(|c| c.name == task.active.variant)?;
        let budgets = task.slo_latency_ms.map(|target| Budgets {
            stay_ms: target * self.parameters.headroom,
            step_up_ms: target
                * if self.co_located {
                    self.parameters.co_located_step_up_headroom
                } else {
                    self.parameters.step_up_headroom
                },
        });
        let seen_failing = self.seen_failing(task, own_latencies);
        let behind = budgets.is_some_and(|b| {
            let fit = candidates[active].fit;
            let running = task.in_flight.saturating_sub(task.queue_length);
            seen_failing.is_some()
                || self.clearing_ms(fit.a_ms, fit.c_ms, ceiling, running, task.queue_length) > b.stay_ms
        });
        let recently =
            self.state.last_switch_ms.get(&task.name).is_some_and(|&at| now_ms < at + self.parameters.step_up_after_ms);
        let may_try = candidates
            .iter()
            .map(|c| self.state.failures.may_try(&task.name, c.accuracy, step_up_demand, now_ms))
            .collect();
        Some(Contender {
            name: &task.name,
            demand,
            step_up_demand,
            spread: self.spread(task),
            unseen_ms: if self.co_located { 0.0 } else { self.state.unseen.get(&task.name).map_or(0.0, Unseen::ms) },
            max_delay_ms: task.active.max_queue_delay_us as f64 / 1e3,
            ceiling,
            budgets,
            candidates,
            active,
            behind,
            seen_failing,
            may_step_up: !recently,
            may_try,
        })
    }

    /// For a task whose variant serving has no price (no profiled line, and no batch
    /// run to price it by): where it is seen failing, or its queue holds more than a
    /// batch, the most accurate variant below it that may serve. With nothing to
    /// predict by, what is observed decides; once the variant stepped to has run, its
    /// batches price it and the predictions take over.
    fn unpriced_step_down(&self, task: &TaskSnapshot, own_latencies: bool) -> Option<String> {
        task.slo_latency_ms?;
        let active = task.active_variant()?;
        let queued_beyond_a_batch = task.queue_length > u64::from(self.ceiling(task));
        let behind = self.seen_failing(task, own_latencies).is_some() || (own_latencies && queued_beyond_a_batch);
        if !behind {
            return None;
        }
        task.variants
            .iter()
            .filter(|v| v.may_serve())
            .filter(|v| v.accuracy < active.accuracy)
            .max_by(|x, y| x.accuracy.total_cmp(&y.accuracy))
            .map(|v| v.name.clone())
    }

    /// Each recent second's demand of `task` relative to its level (see [`queue::spread`]).
    fn spread(&self, task: &TaskSnapshot) -> Vec<f64> {
        let mut counts = self.state.history.get(&task.name).map(|h| h.counts()).unwrap_or_default();
        counts.drain(..counts.len().saturating_sub(self.parameters.spread_window_s as usize));
        queue::spread(&counts)
    }

    /// Measures what a lone task's predictions miss (see [`unseen`]): the p99 of the
    /// answers since the last tick against the simulated variant serving at the rate
    /// of the last second.
    fn observe_unseen(&mut self, task: &TaskSnapshot, own_latencies: bool) {
        let (Some(seen), Some(target)) = (task.latency_ms, task.slo_latency_ms) else { return };
        let Some(variant) = task.active_variant() else { return };
        let Some(fit) = self.refitted(task, variant).filter(|_| own_latencies) else { return };
        let spread = self.spread(task);
        let arrivals = queue::Arrivals { per_s: task.demand.per_s_1s, spread: &spread };
        let max_delay_ms = task.active.max_queue_delay_us as f64 / 1e3;
        let batcher = queue::Batcher { fit, max_batch: self.ceiling(task), max_delay_ms };
        let quantile = Unseen::quantile(task.completed);
        if let Some(simulated) = queue::percentile_ms(&arrivals, batcher, target, quantile) {
            self.state.unseen.entry(task.name.clone()).or_default().observe(task.completed, seen.p99, simulated);
        }
    }

    /// The requests answered late or turned away since the last tick, when the
    /// variant serving was seen failing: more than two and over 1 % of the answers,
    /// either late with the p99 over the target, or turned away by its queue (full, or
    /// it would have answered them late: admission keeps such a queue short, so the
    /// queue alone would not show a crowd). Fewer are a blip (a slow first batch, the
    /// host); a real overload also shows in the queue and the demand.
    fn seen_failing(&self, task: &TaskSnapshot, own_latencies: bool) -> Option<u64> {
        let target = task.slo_latency_ms?;
        let blip = 2.max(task.completed / 100);
        let r = &task.refusals;
        let late_over = task.slo_violations > blip && task.latency_ms.is_some_and(|l| l.p99 > target);
        let turned_away = r.would_miss_deadline + r.queue_full + r.expired > blip;
        (own_latencies && (late_over || turned_away))
            .then_some(task.slo_violations + r.would_miss_deadline + r.queue_full)
    }
}

modelless_policy_abi::export_policy!(SloPredictive);

#[cfg(test)]
mod tests {
    use modelless_policy_abi::{Demand, RunTotals, ServingKnobs, VariantCost, VariantSnapshot};

    use super::*;

    /// (name, accuracy, a ms/row, c ms).
    const FAMILY: [(&str, f64, f64, f64); 3] =
        [("small", 60.0, 1.0, 1.0), ("medium", 70.0, 2.0, 2.0), ("large", 75.0, 4.0, 4.0)];
    /// The large variant's line, and its executor time a request in full batches of 8.
    const LARGE: LatencyFit = LatencyFit { a_ms: 4.0, c_ms: 4.0, r2: 0.999 };
    const LARGE_ROW_MS: f64 = 36.0 / 8.0;

    fn task(active: &str, per_s_1s: f64, per_s_10s: f64, per_s_60s: f64) -> TaskSnapshot {
        let variants = FAMILY
            .iter()
            .map(|&(name, accuracy, a_ms, c_ms)| VariantSnapshot {
                name: name.into(),
                accuracy,
                profile: Some(VariantCost {
                    fit: Some(LatencyFit { a_ms, c_ms, r2: 0.999 }),
                    ..VariantCost::default()
                }),
                ..VariantSnapshot::default()
            })
            .collect();
        TaskSnapshot {
            name: "t".into(),
            demand: Demand { per_s_1s, per_s_10s, per_s_60s },
            slo_latency_ms: Some(100.0),
            active: ServingKnobs { variant: active.into(), max_batch_size: 8, ..ServingKnobs::default() },
            variants,
            ..TaskSnapshot::default()
        }
    }

    /// The demand ahead of a task alone: its expected rate with its own bursts.
    fn demand_alone(policy: &SloPredictive, task: &TaskSnapshot, recent: f64, now_ms: u64) -> f64 {
        let rate = policy.expected_rate(task, recent, now_ms);
        policy.with_bursts(rate, rate)
    }

    fn decide(policy: &mut SloPredictive, now_s: u64, task: TaskSnapshot) -> Option<TaskDecision> {
        let snapshot = Snapshot { now_ms: now_s * 1000, tasks: vec![task], ..Snapshot::default() };
        policy.decide(&snapshot).unwrap().tasks.into_iter().next()
    }

    #[test]
    fn a_task_without_a_latency_target_is_warned_of_once_and_keeps_its_variant() {
        let mut untargeted = task("small", 20.0, 20.0, 20.0);
        untargeted.slo_latency_ms = None;
        let snapshot =
            Snapshot { tasks: vec![untargeted, named("u", task("small", 20.0, 20.0, 20.0))], ..Snapshot::default() };
        let mut policy = SloPredictive::default();
        let warnings = policy.unsteerable(&snapshot);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("`t`") && warnings[0].contains("latency_slo_ms"), "{warnings:?}");
        assert!(policy.unsteerable(&snapshot).is_empty(), "once");
        let decided = policy.decide(&snapshot).unwrap();
        assert!(decided.tasks.iter().all(|d| d.task != "t"), "{decided:?}");
        assert!(decided.tasks.iter().any(|d| d.task == "u"), "the task with a target steps up: {decided:?}");
    }

    /// The warnings `decide` logs, caught by a logger of this test thread's.
    fn warned(policy: &mut SloPredictive, snapshot: &Snapshot) -> (Decision, Vec<String>) {
        struct Caught;
        thread_local! {
            static LINES: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        impl log::Log for Caught {
            fn enabled(&self, metadata: &log::Metadata) -> bool {
                metadata.level() <= log::Level::Warn
            }
            fn log(&self, record: &log::Record) {
                if self.enabled(record.metadata()) {
                    LINES.with(|l| l.borrow_mut().push(record.args().to_string()));
                }
            }
            fn flush(&self) {}
        }
        static CAUGHT: Caught = Caught;
        if log::set_logger(&CAUGHT).is_ok() {
            log::set_max_level(log::LevelFilter::Warn);
        }
        let decision = policy.decide(snapshot).unwrap();
        (decision, LINES.with(|l| std::mem::take(&mut *l.borrow_mut())))
    }

    #[test]
    fn a_task_held_for_want_of_profiles_names_what_it_lacks_once_until_that_changes() {
        let mut held = task("medium", 20.0, 20.0, 20.0);
        for v in held.variants.iter_mut().filter(|v| v.name != "small") {
            v.profile = None;
        }
        let snapshot = Snapshot { tasks: vec![held.clone()], ..Snapshot::default() };
        let mut policy = SloPredictive::default();
        let (decided, warnings) = warned(&mut policy, &snapshot);
        assert!(decided.tasks.is_empty(), "held: {decided:?}");
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        let warning = &warnings[0];
        assert!(warning.contains("`t` is held on `medium`"), "{warning}");
        assert!(warning.contains("`medium`, `large`") && !warning.contains("`small`,"), "{warning}");
        assert!(warned(&mut policy, &snapshot).1.is_empty(), "once while nothing changes");
        // Profiled, the active variant is priced: nothing to say, and it steers again.
        let profiled = Snapshot { tasks: vec![task("medium", 20.0, 20.0, 20.0)], ..Snapshot::default() };
        let (decided, warnings) = warned(&mut policy, &profiled);
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(decided.tasks[0].variant.as_deref(), Some("large"));
        // Losing the profiles again is said again.
        assert_eq!(warned(&mut policy, &snapshot).1.len(), 1);
    }

    #[test]
    fn at_low_load_the_most_accurate_variant_serves_and_the_batching_knobs_stay() {
        let decision = decide(&mut SloPredictive::default(), 0, task("medium", 20.0, 20.0, 20.0)).unwrap();
        assert_eq!(decision.variant.as_deref(), Some("large"));
        assert_eq!((decision.max_batch_size, decision.max_queue_delay_us), (None, None));
    }

    #[test]
    fn a_load_the_large_variant_cannot_keep_up_with_goes_to_one_that_can() {
        let policy = SloPredictive::default();
        // Batches of 8 take 36 ms: at 150/s ρ = 0.675; 2·L(1.5) + 0.7·36·ρ/(1−ρ) = 72.4.
        let p99 = policy.predict(LARGE, 150.0, 8, LARGE_ROW_MS, Sharing::default()).unwrap();
        assert!((p99 - 72.4).abs() < 0.1, "{p99}");
        assert_eq!(policy.predict(LARGE, 300.0, 8, LARGE_ROW_MS, Sharing::default()), None, "300/s: ρ = 1.35");
        let decision = decide(&mut SloPredictive::default(), 0, task("large", 300.0, 300.0, 300.0)).unwrap();
        assert_eq!(decision.variant.as_deref(), Some("medium"));
    }

    #[test]
    fn decoding_on_the_same_cores_makes_a_variant_carry_less_demand() {
        // At a steady 120/s `large` is predicted in time on its line (ρ = 0.54) …
        let steady = task("large", 120.0, 120.0, 120.0);
        assert_eq!(decide(&mut SloPredictive::default(), 60, steady.clone()), None);
        // … but when the requests carry photos whose decoding keeps two threads 60 %
        // busy (10 ms a request), 5 ms of a 2-core machine joins every row: ρ is 1.14
        // on `large`, 0.87 on `medium` (over 0.85), 0.74 on `small`.
        let mut policy = SloPredictive::default();
        let preprocessing =
            modelless_policy_abi::PreprocessingSnapshot { threads: 2, utilisation_percent: 60.0, ..Default::default() };
        let system =
            modelless_policy_abi::SystemSnapshot { cores: 2, preprocessing: Some(preprocessing), ..Default::default() };
        let mut decision = None;
        for s in 50..=60 {
            let snapshot = Snapshot {
                now_ms: s * 1000,
                tasks: vec![steady.clone()],
                system: system.clone(),
                ..Snapshot::default()
            };
            decision = policy.decide(&snapshot).unwrap().tasks.into_iter().next();
        }
        assert!((policy.state.decoding.per_row_ms() - 5.0).abs() < 0.1, "{:?}", policy.state.decoding);
        assert_eq!(decision.and_then(|d| d.variant).as_deref(), Some("small"));
    }

    #[test]
    fn a_demand_over_a_variants_capacity_with_photos_steps_down_at_once() {
        // At a steady 120/s `large` is predicted in time on its line (4.5 ms a request
        // in batches of 8) and stays while nothing says what its photos cost …
        let mut steady = task("large", 120.0, 120.0, 120.0);
        steady.photos = Some(modelless_policy_abi::PhotoTraffic { share: 1.0, mean_bytes: 41_000.0 });
        assert_eq!(decide(&mut SloPredictive::default(), 60, steady.clone()), None);
        // … but measured with photos of that size it answers 100 a second (medium
        // 190, small 400): the first tick steps down, before any photo is decoded.
        let measured = [("small", 400.0), ("medium", 190.0), ("large", 100.0)];
        for (variant, (name, per_s)) in steady.variants.iter_mut().zip(measured) {
            assert_eq!(variant.name, name);
            let small_photos = modelless_policy_abi::PhotoCapacity {
                size_class: "500x375".into(),
                mean_bytes: 40_000,
                requests_per_s: per_s,
            };
            // Large photos cost ten times as much; these requests do not carry them.
            let large_photos = modelless_policy_abi::PhotoCapacity {
                size_class: "3564x2880".into(),
                mean_bytes: 2_000_000,
                requests_per_s: per_s / 10.0,
            };
            variant.profile.as_mut().unwrap().photos = vec![large_photos, small_photos];
        }
        let decision = decide(&mut SloPredictive::default(), 60, steady.clone()).unwrap();
        assert_eq!(decision.variant.as_deref(), Some("medium"));
        // Where a tenth of the requests carry tensors, `large` still cannot carry 120.
        steady.photos = Some(modelless_policy_abi::PhotoTraffic { share: 0.9, mean_bytes: 41_000.0 });
        let decision = decide(&mut SloPredictive::default(), 60, steady).unwrap();
        assert_eq!(decision.variant.as_deref(), Some("medium"));
    }

    #[test]
    fn a_rising_demand_steps_down_before_the_target_is_missed() {
        // A lone task is judged by its rates less two deviations of their measurement
        // (to stay), or plus them (to step up): at a steady 150/s (no history yet: the
        // 10 s rate stands for the last seconds') 139 and 161. `large` is predicted
        // at about 60 ms: it stays.
        let policy = SloPredictive::default();
        let steady = task("large", 150.0, 150.0, 150.0);
        let (stay, up) = policy.lone_rates(&steady, 0.0, 60_000);
        assert!((stay - (150.0 - 2.0 * 30f64.sqrt())).abs() < 1e-9 && (up - (150.0 + 2.0 * 30f64.sqrt())).abs() < 1e-9);
        assert_eq!(decide(&mut SloPredictive::default(), 60, steady.clone()), None);
        // The same 150 now, but rising from nothing a minute ago: 60 more expected
        // ahead, and large, at about 199/s, would be over the target.
        let rising = task("large", 150.0, 150.0, 0.0);
        let (stay, up) = policy.lone_rates(&rising, 0.0, 60_000);
        assert!(
            (stay - (150.0 - 2.0 * 30f64.sqrt() + 60.0)).abs() < 1e-9 && (up - stay - 4.0 * 30f64.sqrt()).abs() < 1e-9
        );
        assert_eq!(
            policy.lone_rates(&rising, 0.0, 59_000).0,
            policy.lone_rates(&steady, 0.0, 59_000).0,
            "no minute yet"
        );
        let decision = decide(&mut SloPredictive::default(), 60, rising).unwrap();
        assert_eq!(decision.variant.as_deref(), Some("medium"));
        // Co-located tasks are priced by the formula: the same trend, and a burst of a
        // standard deviation on top.
        let falling = task("large", 100.0, 200.0, 0.0);
        assert!((demand_alone(&policy, &falling, 0.0, 60_000) - (150.0 + 150f64.sqrt())).abs() < 1e-9);
    }

    #[test]
    fn a_ramp_within_the_first_minute_is_carried_ahead_where_tasks_are_co_located() {
        // Ten more requests a second each second: 450 in the last five against 200.
        let ramping = |s: u64| {
            let mut a = named("a", task("small", 10.0 * s as f64, 10.0 * s as f64, 10.0 * s as f64));
            a.completed = 10 * s;
            vec![a, named("b", task("small", 0.0, 0.0, 0.0))]
        };
        let now = named("a", task("small", 110.0, 110.0, 110.0));
        let ahead = |co_located: bool| {
            let mut policy = SloPredictive::default();
            for s in 0..=11 {
                decide_together(&mut policy, s, ramping(s).into_iter().take(if co_located { 2 } else { 1 }).collect());
            }
            demand_alone(&policy, &now, 0.0, 11_000)
        };
        let rise = (250.0 - 2.0 * 650f64.sqrt()) / 25.0 * 3.0;
        assert!((ahead(true) - (110.0 + rise + (110.0 + rise).sqrt())).abs() < 1e-9, "{}", ahead(true));
        assert!((ahead(false) - (110.0 + 110f64.sqrt())).abs() < 1e-9, "a lone task's batches absorb it");
    }

    /// `task` with every profile's fit refused, the variants having run `runs`.
    fn unprofiled(mut task: TaskSnapshot, runs: [Option<RunTotals>; 3]) -> TaskSnapshot {
        for (variant, runs) in task.variants.iter_mut().zip(runs) {
            variant.profile = None;
            variant.runs = runs;
        }
        task
    }

    #[test]
    fn variants_whose_fits_were_refused_are_priced_by_what_they_ran() {
        // large ran 1000 rows at 4.5 ms each, medium 1000 at 2.25: the lines in
        // proportion. At 300/s large cannot keep up, medium can.
        let ran = |per_row_ms: f64| Some(RunTotals { batches: 125, rows: 1000, run_ms: 1000.0 * per_row_ms });
        let runs = [ran(1.125), ran(2.25), ran(4.5)];
        let decision = decide(&mut SloPredictive::default(), 0, unprofiled(task("large", 300.0, 300.0, 300.0), runs));
        assert_eq!(decision.and_then(|d| d.variant).as_deref(), Some("medium"));
        let decision = decide(&mut SloPredictive::default(), 0, unprofiled(task("large", 20.0, 20.0, 20.0), runs));
        assert_eq!(decision, None, "20/s: large keeps up");
    }

    #[test]
    fn a_variant_with_no_price_at_all_steps_down_on_what_is_seen_and_only_then() {
        let mut late = unprofiled(task("large", 40.0, 40.0, 40.0), [None, None, None]);
        assert_eq!(decide(&mut SloPredictive::default(), 0, late.clone()), None, "nothing seen, nothing to predict by");
        late.latency_ms = Some(modelless_policy_abi::LatencySummary { p50: 90.0, p95: 180.0, p99: 250.0 });
        (late.completed, late.slo_violations) = (40, 6);
        let mut policy = SloPredictive::default();
        let stepped = decide(&mut policy, 0, late.clone()).and_then(|d| d.variant);
        assert_eq!(stepped.as_deref(), Some("medium"), "the next variant down");
        late.active.variant = "medium".into();
        assert_eq!(decide(&mut policy, 1, late.clone()), None, "the window after the switch is large's");
        let stepped = decide(&mut policy, 2, late.clone()).and_then(|d| d.variant);
        assert_eq!(stepped.as_deref(), Some("small"), "medium seen failing too");
        // A queue of more than a batch is behind as well; a task without a target
        // keeps its variant.
        let mut queued = unprofiled(task("large", 40.0, 40.0, 40.0), [None, None, None]);
        queued.queue_length = 20;
        assert_eq!(
            decide(&mut SloPredictive::default(), 0, queued.clone()).and_then(|d| d.variant).as_deref(),
            Some("medium")
        );
        queued.slo_latency_ms = None;
        assert_eq!(decide(&mut SloPredictive::default(), 0, queued), None);
    }

    #[test]
    fn a_step_up_leaves_the_better_variant_room_for_a_slower_machine() {
        // large takes 4.5 ms a request in full batches: at 160/s and the bursts a
        // second of it may hold, more than 0.75 of the executor, though within the
        // step-up target; at 140/s under it.
        let step_up = |policy: &mut SloPredictive, per_s| decide(policy, 10, task("medium", per_s, per_s, per_s));
        let mut uncapped: SloPredictive =
            modelless_policy_abi::guest::configured(serde_json::json!({ "step_up_utilisation": 1.0 })).unwrap();
        assert_eq!(step_up(&mut uncapped, 160.0).and_then(|d| d.variant).as_deref(), Some("large"));
        assert_eq!(step_up(&mut SloPredictive::default(), 160.0), None, "it stays on medium");
        let stepped = step_up(&mut SloPredictive::default(), 140.0).and_then(|d| d.variant);
        assert_eq!(stepped.as_deref(), Some("large"));
    }

    #[test]
    fn a_step_up_waits_for_the_last_change_to_settle() {
        let mut policy = SloPredictive::default();
        let down = decide(&mut policy, 0, task("large", 300.0, 300.0, 300.0)).unwrap();
        assert_eq!(down.variant.as_deref(), Some("medium"));
        let mut quiet = |s| decide(&mut policy, s, task("medium", 20.0, 20.0, 20.0)).and_then(|d| d.variant);
        assert_eq!(quiet(2), None, "2 s after the change");
        assert_eq!(quiet(3), Some("large".into()), "3 s after it");
    }

    #[test]
    fn a_queue_that_would_be_answered_late_steps_down_and_an_early_tick_counts_the_arrivals_since_the_last() {
        let policy = SloPredictive::default();
        // Batches of 4 at 4 ms a row and 4 ms each: 20 ms; the last of 9 queued waits
        // for the one running and 2 full batches, then runs alone (8 ms).
        assert_eq!(policy.clearing_ms(4.0, 4.0, 4, 4, 9), 68.0);
        assert_eq!(policy.clearing_ms(4.0, 4.0, 4, 4, 8), 60.0);
        // Nothing running: the queue's own batches; nothing at all: nothing to wait.
        assert_eq!(policy.clearing_ms(4.0, 4.0, 4, 0, 8), 40.0);
        assert_eq!(policy.clearing_ms(4.0, 4.0, 4, 0, 0), 0.0);
        // Two rows running, whatever the batch limit: a batch of two.
        assert_eq!(policy.clearing_ms(4.0, 4.0, 4, 2, 0), 12.0);
        // One request behind a batch of 8 that takes 68 ms is answered in 80, not in
        // two full batches' 136 (over a budget of 135).
        assert_eq!(policy.clearing_ms(8.0, 4.0, 8, 8, 1), 80.0);
        // 40 queued, batches of 8: 32 beyond one batch to clear within 90 ms.
        let mut queued = task("large", 20.0, 20.0, 20.0);
        queued.queue_length = 40;
        assert!((policy.backlog_per_s(&queued) - 32.0 / 0.09).abs() < 1e-9);
        let mut policy = SloPredictive::default();
        // The first tick: 0 in flight.
        decide(&mut policy, 0, task("large", 20.0, 20.0, 20.0));
        // 200 ms later 60 more are in flight and 10 were answered: 70 in 200 ms, at
        // least 266 a second (two standard deviations less).
        let mut crowded = task("large", 20.0, 20.0, 20.0);
        (crowded.in_flight, crowded.completed, crowded.queue_length) = (60, 10, 40);
        let snapshot = Snapshot { now_ms: 200, tasks: vec![crowded], ..Snapshot::default() };
        let early = policy.decide(&snapshot).unwrap().tasks.into_iter().next().unwrap();
        assert_eq!(early.variant.as_deref(), Some("small"), "about 280/s, and 32 queued beyond a batch: small");
    }

    #[test]
    fn when_nothing_keeps_up_the_cheapest_variant_serves() {
        // 1000/s and 200 queued: no variant keeps up.
        let mut flooded = task("large", 1000.0, 1000.0, 1000.0);
        flooded.queue_length = 200;
        let decision = decide(&mut SloPredictive::default(), 0, flooded).unwrap();
        assert_eq!(decision.variant.as_deref(), Some("small"));
    }

    #[test]
    fn a_step_down_never_goes_to_a_more_accurate_variant_that_looks_faster() {
        // medium serves behind a queue it cannot clear in time, small does no better,
        // and large is priced faster than both (as a variant that has not served lately
        // is, at its profile, while the machine runs slow): the step down stays below.
        // At 250/s large takes 0.78 of the executor, too much to step up to; the others
        // 0.94, more than any variant may stay at.
        let mut behind = task("medium", 250.0, 250.0, 250.0);
        behind.queue_length = 40;
        for variant in &mut behind.variants {
            let (a_ms, c_ms) = if variant.name == "large" { (2.5, 5.0) } else { (3.0, 6.0) };
            variant.profile =
                Some(VariantCost { fit: Some(LatencyFit { a_ms, c_ms, r2: 0.999 }), ..VariantCost::default() });
        }
        let decision = decide(&mut SloPredictive::default(), 10, behind);
        assert_ne!(decision.and_then(|d| d.variant).as_deref(), Some("large"));
    }

    /// The variants `tasks` are switched to, decided together at `now_s`.
    fn decide_together(policy: &mut SloPredictive, now_s: u64, tasks: Vec<TaskSnapshot>) -> Vec<(String, String)> {
        let snapshot = Snapshot { now_ms: now_s * 1000, tasks, ..Snapshot::default() };
        policy.decide(&snapshot).unwrap().tasks.into_iter().filter_map(|t| Some((t.task, t.variant?))).collect()
    }

    fn named(name: &str, task: TaskSnapshot) -> TaskSnapshot {
        TaskSnapshot { name: name.into(), ..task }
    }

    fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
        expected.iter().map(|&(t, v)| (t.into(), v.into())).collect()
    }

    #[test]
    fn co_located_tasks_share_the_executor() {
        // 100/s each: large alone takes ρ ≈ 0.5 and is safe; two of them are not, but
        // one stepping down to medium makes room for both.
        assert_eq!(decide(&mut SloPredictive::default(), 0, task("large", 100.0, 100.0, 100.0)), None);
        let two = vec![named("a", task("large", 100.0, 100.0, 100.0)), named("b", task("large", 100.0, 100.0, 100.0))];
        assert_eq!(decide_together(&mut SloPredictive::default(), 0, two), pairs(&[("a", "medium")]));
    }

    #[test]
    fn a_crowd_is_made_room_for_where_it_costs_least_accuracy() {
        // a: 280/s on medium; b: 40/s on large. Beside large, medium cannot keep up;
        // beside medium it can (p99 about 52 ms). b stepping down to medium loses 5
        // points of accuracy per 2.25 ms a row freed, a stepping down to small 10 per
        // 1.125: b makes room.
        let tasks = vec![named("a", task("medium", 280.0, 280.0, 280.0)), named("b", task("large", 40.0, 40.0, 40.0))];
        assert_eq!(decide_together(&mut SloPredictive::default(), 0, tasks), pairs(&[("b", "medium")]));
        // A task over its target even beside the others' cheapest variants steps
        // down itself: at 400/s medium cannot keep up beside anything.
        let tasks = vec![named("a", task("medium", 400.0, 400.0, 400.0)), named("b", task("large", 10.0, 10.0, 10.0))];
        assert_eq!(decide_together(&mut SloPredictive::default(), 0, tasks), pairs(&[("a", "small")]));
    }

    #[test]
    fn co_located_tasks_step_up_one_at_a_time_into_the_room_there_is() {
        // Three tasks at 60/s on medium: one of them on large is predicted at 55 ms,
        // under the 75 ms a step up may use here; two on large would take 97 ms.
        let on = |variants: [&str; 3]| -> Vec<TaskSnapshot> {
            ["a", "b", "c"].iter().zip(variants).map(|(name, v)| named(name, task(v, 60.0, 60.0, 60.0))).collect()
        };
        let parameters = Parameters { step_up_headroom: 0.75, ..Parameters::default() };
        let mut policy = SloPredictive { parameters, ..SloPredictive::default() };
        assert_eq!(decide_together(&mut policy, 0, on(["medium"; 3])), pairs(&[("a", "large")]));
        assert_eq!(decide_together(&mut policy, 1, on(["large", "medium", "medium"])), vec![], "no room for another");
    }

    #[test]
    fn an_observed_p99_over_the_target_steps_down_whatever_the_prediction() {
        let mut over = task("medium", 20.0, 20.0, 20.0);
        over.latency_ms = Some(modelless_policy_abi::LatencySummary { p50: 50.0, p95: 90.0, p99: 120.0 });
        (over.completed, over.slo_violations) = (20, 2);
        let blip = decide(&mut SloPredictive::default(), 0, over.clone()).and_then(|d| d.variant);
        assert_eq!(blip.as_deref(), Some("large"), "two late answers are a blip: the prediction decides");
        over.slo_violations = 3;
        // `large` is predicted safe at 20 requests a second, but what is observed wins.
        assert_eq!(
            decide(&mut SloPredictive::default(), 0, over.clone()).and_then(|d| d.variant),
            Some("small".into())
        );
        // The tick after a switch observes what the variant replaced answered: it is
        // no reason to step down again. The tick after that observes the new one's.
        let mut policy = SloPredictive::default();
        assert_eq!(
            decide(&mut policy, 0, task("large", 300.0, 300.0, 300.0)).and_then(|d| d.variant),
            Some("medium".into())
        );
        let mut late = task("medium", 150.0, 150.0, 150.0);
        (late.latency_ms, late.completed, late.slo_violations) = (over.latency_ms, 150, 3);
        assert_eq!(decide(&mut policy, 1, late.clone()), None, "the window is large's");
        assert_eq!(
            decide(&mut policy, 2, late).and_then(|d| d.variant),
            Some("small".into()),
            "the window is medium's"
        );
    }

    #[test]
    fn batches_running_slower_than_profiled_slow_the_predictions() {
        // The profile: large takes 4·4 + 4 = 20 ms for 4 rows, 36 ms for 8.
        let ran = |batches: u64, run_ms: f64| {
            let mut task = task("large", 140.0, 140.0, 140.0);
            task.variants[2].runs = Some(RunTotals { batches, rows: 4 * batches, run_ms });
            task
        };
        let parameters = |follow_runs| Parameters { follow_runs, follow_executor: false, ..Parameters::default() };
        let run = |parameters: Parameters, run_ms: f64| {
            let mut policy = SloPredictive { parameters, ..SloPredictive::default() };
            assert_eq!(decide(&mut policy, 0, ran(0, 0.0)), None, "the profile's pace: large keeps up");
            decide(&mut policy, 1, ran(500, run_ms)).and_then(|d| d.variant)
        };
        // 500 batches of 4 rows: the profile says 500·20 = 10 s.
        assert_eq!(run(parameters(true), 10_000.0), None, "at the profile's pace nothing changes");
        // 30 ms a batch of 4, 1.5 times the profile: corrected, 8 rows take about
        // 51 ms, ρ 0.84 at the 129/s staying is judged by, and queueing puts the p99
        // far over the target.
        assert_eq!(run(parameters(true), 15_000.0), Some("medium".into()), "1.5 times the profile");
        assert_eq!(run(parameters(false), 15_000.0), None, "without refits the profile decides");
    }

    #[test]
    fn co_located_tasks_single_rows_take_more_of_the_executor_by_each_variants_own_line() {
        // a's large ran 1000 single rows at its line's 8 ms each; full batches of 8
        // would take 36 / 8 = 4.5 ms a row. b, beside it, is idle.
        let ran = |rows: u64, run_ms: f64| {
            let mut a = named("a", task("large", 120.0, 120.0, 120.0));
            a.variants[2].runs = Some(RunTotals { batches: rows, rows, run_ms });
            vec![a, named("b", task("large", 0.0, 0.0, 0.0))]
        };
        let fit = |a_ms, c_ms| LatencyFit { a_ms, c_ms, r2: 1.0 };
        let run = |follow_executor, co_located: bool, run_ms: f64| {
            let parameters = Parameters { follow_runs: false, follow_executor, ..Parameters::default() };
            let mut policy = SloPredictive { parameters, ..SloPredictive::default() };
            let tasks = |tasks: Vec<TaskSnapshot>| tasks.into_iter().take(if co_located { 2 } else { 1 }).collect();
            decide_together(&mut policy, 0, tasks(ran(0, 0.0)));
            let decided = decide_together(&mut policy, 1, tasks(ran(1_000, run_ms)));
            let a = decided.into_iter().find(|(task, _)| task == "a").map(|(_, variant)| variant);
            (a, policy)
        };
        let (decision, policy) = run(true, true, 8_000.0);
        // A request takes its variant's line at one row: 8 ms on large, 4 on medium
        // (a global ratio, 8 / 4.5, would have priced medium at 4.4). b ran nothing
        // yet: full batches.
        assert_eq!(policy.executor_factor(), 1.0, "the batches took what the lines say of single rows");
        assert_eq!(policy.row_ms("a", fit(4.0, 4.0), 8), 8.0);
        assert_eq!(policy.row_ms("a", fit(2.0, 2.0), 8), 4.0);
        assert_eq!(policy.row_ms("b", fit(4.0, 4.0), 8), 4.5);
        // At 131/s ρ is 0.59 by full batches, 1.05 at single rows: large cannot keep up.
        assert_eq!(decision.as_deref(), Some("medium"));
        // Single rows twice as slow as their line: every share doubles (half way, 1.5).
        let (_, slower) = run(true, true, 16_000.0);
        assert_eq!(slower.executor_factor(), 1.5);
        assert_eq!(slower.row_ms("a", fit(2.0, 2.0), 8), 6.0);
        let (decision, policy) = run(false, true, 8_000.0);
        assert_eq!((decision, policy.row_ms("a", fit(4.0, 4.0), 8)), (None, 4.5), "by full batches large keeps up");
        let (decision, policy) = run(true, false, 8_000.0);
        let lone = (decision, policy.row_ms("a", fit(4.0, 4.0), 8));
        assert_eq!(lone, (None, 4.5), "a lone task's batches grow with its queue, as predicted");
    }

    #[test]
    fn co_located_tasks_share_one_margin_for_bursts() {
        // A lone task: one standard deviation of its own arrivals.
        let policy = SloPredictive::default();
        assert!((policy.with_bursts(100.0, 100.0) - 110.0).abs() < 1e-9);
        // Three tasks of 100/s: their arrivals add up to 300/s, whose deviation is
        // √300 = 17.3, not 3 · 10; each task takes its share.
        let each = policy.with_bursts(100.0, 300.0);
        assert!((3.0 * (each - 100.0) - 300f64.sqrt()).abs() < 1e-9, "{each}");
        assert_eq!(policy.with_bursts(0.0, 0.0), 0.0);
    }

    #[test]
    fn a_step_up_needs_more_room_than_staying() {
        // 175/s: staying is judged at 163/s, where large is predicted at about 70 ms,
        // under the 90 ms staying may use; a step up at 187/s, where it is predicted
        // over the 85 ms a step up may use.
        let task_at = |active| task(active, 175.0, 175.0, 175.0);
        assert_eq!(decide(&mut SloPredictive::default(), 0, task_at("large")), None, "large stays");
        assert_eq!(decide(&mut SloPredictive::default(), 0, task_at("medium")), None, "medium does not step up");
        // Judged at the rate measured and with as much room as staying has, it would.
        let eager = Parameters {
            step_up_headroom: 0.9,
            measured_sigmas: 0.0,
            step_up_utilisation: Parameters::default().max_utilisation,
            ..Parameters::default()
        };
        let stepped =
            decide(&mut SloPredictive { parameters: eager, ..SloPredictive::default() }, 0, task_at("medium"));
        assert_eq!(stepped.and_then(|d| d.variant).as_deref(), Some("large"), "with as much room as staying needs");
    }
}
