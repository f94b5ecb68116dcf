//! Sharing the executor among co-located tasks. Each task's p99 depends on what the
//! others take of the cores, so the tasks are decided together, not each on its own
//! from the others' variants before the tick: deciding apart, tasks all step up into
//! the same room, or all step down out of the same crowd, and undo it together at
//! the next tick.
//!
//! - A task whose own signals say it is behind (observed p99 over the target, or its
//!   queue would be answered late), or that is predicted over its target even if the
//!   others served their cheapest variants, steps down itself.
//! - A task predicted over its target because of the others is made room for where
//!   it costs least: one step down at a time, by whichever task loses the least
//!   accuracy (weighted by its requests) per share of the executor it frees.
//! - Then tasks step up, one at a time, the one that gains the most accuracy per share
//!   of the executor first, to the most accurate variant comfortably under its target
//!   that leaves every other task under its own.
//!
//! Accuracy per request falls slower than cost as variants shrink, so this keeps
//! co-located tasks on similar variants rather than one on the smallest beside
//! another on the largest.

use std::cell::RefCell;
use std::collections::BTreeMap;

use modelless_policy_abi::LatencyFit;

use crate::{Sharing, SloPredictive, queue};

/// A variant a task may serve.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Candidate<'a> {
    /// Its name.
    pub name: &'a str,
    /// Its accuracy.
    pub accuracy: f64,
    /// Its latency line (refitted).
    pub fit: LatencyFit,
}

/// The share of the target a task's prediction may use.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Budgets {
    /// To keep the variant it serves, ms.
    pub stay_ms: f64,
    /// To step up to a more accurate one, ms.
    pub step_up_ms: f64,
}

/// A task as the allocation sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct Contender<'a> {
    /// The task's name.
    pub name: &'a str,
    /// Requests per second expected ahead: what keeping the variant serving is judged
    /// by.
    pub demand: f64,
    /// What a step up is judged by: no less than `demand`, by as much as the demand
    /// measured may be off (see [`crate::SloPredictive::lone_rates`]).
    pub step_up_demand: f64,
    /// Each recent second's demand relative to the mean, bursts beyond Poisson noise
    /// kept (see [`crate::queue::spread`]); a lone task is predicted with it.
    pub spread: Vec<f64>,
    /// The queue delay its batches wait for, ms.
    pub max_delay_ms: f64,
    /// What a lone task's simulated p99 misses, ms (see [`crate::unseen`]).
    pub unseen_ms: f64,
    /// The largest batch it is predicted with.
    pub ceiling: u32,
    /// None for a task without a latency target: it keeps its variant, and its load
    /// counts for the others.
    pub budgets: Option<Budgets>,
    /// Its variants with a profile.
    pub candidates: Vec<Candidate<'a>>,
    /// The one serving now (an index into `candidates`).
    pub active: usize,
    /// Its own signals say it is behind: it steps down whatever the others do.
    pub behind: bool,
    /// The late answers and refusals, when the variant serving was seen failing.
    pub seen_failing: Option<u64>,
    /// Its last change has settled: it may step up.
    pub may_step_up: bool,
    /// Per candidate, whether it may be stepped up to (see [`crate::failures`]).
    pub may_try: Vec<bool>,
}

/// The variant (an index into `candidates`) each of `tasks` is to serve.
pub fn allocate(policy: &SloPredictive, tasks: &[Contender]) -> Vec<usize> {
    let mut plan =
        Plan { policy, tasks, chosen: tasks.iter().map(|t| t.active).collect(), simulated: RefCell::default() };
    plan.make_room();
    plan.step_up();
    plan.chosen
}

struct Plan<'p, 'a> {
    policy: &'p SloPredictive,
    tasks: &'p [Contender<'a>],
    chosen: Vec<usize>,
    /// A lone task's simulated p99 by (task, variant, demand's bits): the allocation
    /// asks for the same several times a tick, and each costs a simulation.
    simulated: RefCell<BTreeMap<(usize, usize, u64), Option<f64>>>,
}

impl Plan<'_, '_> {
    /// What task `i` takes of the executor serving its variant `v`.
    fn load(&self, i: usize, v: usize) -> Sharing {
        let task = &self.tasks[i];
        let fit = task.candidates[v].fit;
        let batch_ms = fit.predict_ms(task.ceiling).max(0.0);
        let row_ms = self.policy.row_ms(task.name, fit, task.ceiling);
        Sharing { utilisation: task.demand / 1e3 * row_ms, batch_ms }
    }

    /// What the tasks other than `i` take, each serving its variant in `chosen`.
    fn others(&self, i: usize, chosen: &[usize]) -> Sharing {
        (0..self.tasks.len()).filter(|&j| j != i).map(|j| self.load(j, chosen[j])).fold(Sharing::default(), |sum, l| {
            Sharing { utilisation: sum.utilisation + l.utilisation, batch_ms: sum.batch_ms.max(l.batch_ms) }
        })
    }

    /// Task `i`'s p99 on `v` beside `others` at `demand`: for a lone task, simulated
    /// under its arrivals as they come; beside others, by the closed formula that
    /// prices their turns on the executor.
    fn p99_at(&self, i: usize, v: usize, others: Sharing, demand: f64) -> Option<f64> {
        let (task, fit) = (&self.tasks[i], self.tasks[i].candidates[v].fit);
        if !self.policy.is_co_located() {
            let simulate = || {
                let target = task.budgets.map_or(f64::MAX, |b| b.stay_ms);
                let arrivals = queue::Arrivals { per_s: demand, spread: &task.spread };
                let batcher = queue::Batcher { fit, max_batch: task.ceiling, max_delay_ms: task.max_delay_ms };
                queue::p99_ms(&arrivals, batcher, target).map(|p99| p99 + task.unseen_ms)
            };
            return *self.simulated.borrow_mut().entry((i, v, demand.to_bits())).or_insert_with(simulate);
        }
        let row_ms = self.policy.row_ms(task.name, fit, task.ceiling);
        self.policy.predict(fit, demand, task.ceiling, row_ms, others)
    }

    fn p99(&self, i: usize, v: usize, others: Sharing) -> Option<f64> {
        self.p99_at(i, v, others, self.tasks[i].demand)
    }

    /// Whether task `i` serving `v` is predicted within `budget_ms` beside the others
    /// serving theirs in `chosen`.
    fn fits(&self, i: usize, v: usize, chosen: &[usize], budget_ms: f64) -> bool {
        self.p99(i, v, self.others(i, chosen)).is_some_and(|p| p <= budget_ms)
    }

    /// Like [`Plan::fits`], at the demand a step up is judged by, and with the variant
    /// (with the others) under `step_up_utilisation` at it.
    fn fits_stepped_up(&self, i: usize, v: usize, chosen: &[usize], budget_ms: f64) -> bool {
        let (task, others) = (&self.tasks[i], self.others(i, chosen));
        let row_ms = self.policy.row_ms(task.name, task.candidates[v].fit, task.ceiling);
        let utilisation = task.step_up_demand / 1e3 * row_ms + others.utilisation;
        utilisation <= self.policy.parameters.step_up_utilisation
            && self.p99_at(i, v, others, task.step_up_demand).is_some_and(|p| p <= budget_ms)
    }

    /// Whether task `i` is predicted over its target as `chosen` serves.
    fn over(&self, i: usize, chosen: &[usize]) -> bool {
        self.tasks[i].budgets.is_some_and(|b| !self.fits(i, chosen[i], chosen, b.stay_ms))
    }

    /// The variant of task `j` that takes least of the executor, if `j` may move.
    fn least(&self, j: usize) -> usize {
        let task = &self.tasks[j];
        if task.budgets.is_none() {
            return self.chosen[j];
        }
        let utilisation = |v: usize| self.load(j, v).utilisation;
        (0..task.candidates.len()).min_by(|&x, &y| utilisation(x).total_cmp(&utilisation(y))).unwrap_or(task.active)
    }

    /// Steps down, first the tasks that must themselves, then where room for the
    /// others costs least.
    fn make_room(&mut self) {
        let mut settled = Vec::with_capacity(self.tasks.len());
        let least: Vec<usize> = (0..self.tasks.len()).map(|j| self.least(j)).collect();
        for i in 0..self.tasks.len() {
            let alone_over = self.over(i, &self.chosen) && {
                let mut beside_least = least.clone();
                beside_least[i] = self.chosen[i];
                self.over(i, &beside_least)
            };
            let own = self.tasks[i].behind || alone_over;
            if own {
                self.chosen[i] = self.own_step_down(i);
            }
            settled.push(own);
        }
        // Each pass lowers one task's variant: at most as many passes as variants.
        let most = self.tasks.iter().map(|t| t.candidates.len()).sum::<usize>();
        for _ in 0..most {
            if !(0..self.tasks.len()).any(|i| !settled[i] && self.over(i, &self.chosen)) {
                return;
            }
            let Some((j, v)) = self.cheapest_room(&settled) else { return };
            self.chosen[j] = v;
        }
    }

    /// Task `i`'s own step down: the most accurate variant below the one it serves
    /// predicted within its target, else the one predicted fastest; when none keeps
    /// up, the one that costs least per request. Like a step up, a variant stepped down
    /// to is judged by the demand a step up is (a crowd that is still rising would
    /// leave one chosen by the lower figure at the next tick).
    fn own_step_down(&self, i: usize) -> usize {
        let task = &self.tasks[i];
        let current = self.chosen[i];
        let Some(budgets) = task.budgets else { return current };
        let others = self.others(i, &self.chosen);
        let p99 = |v: usize| self.p99_at(i, v, others, task.step_up_demand);
        let accuracy = |v: usize| task.candidates[v].accuracy;
        let lower = (0..task.candidates.len())
            .filter(|&v| accuracy(v) < accuracy(current) && p99(v).is_some_and(|p| p <= budgets.stay_ms))
            .max_by(|&x, &y| accuracy(x).total_cmp(&accuracy(y)));
        // Never up: a variant that has not served lately is priced by its profile while
        // the one serving is priced as the machine runs now, so on a machine running
        // slow a more accurate one can look the faster.
        let fastest = (0..task.candidates.len())
            .filter(|&v| accuracy(v) <= accuracy(current))
            .filter_map(|v| Some((v, p99(v)?)))
            .min_by(|x, y| x.1.total_cmp(&y.1))
            .map(|(v, _)| v);
        let per_request = |v: usize| {
            let fit = task.candidates[v].fit;
            fit.a_ms + fit.c_ms.max(0.0) / f64::from(task.ceiling)
        };
        let cheapest = || {
            (0..task.candidates.len())
                .filter(|&v| accuracy(v) <= accuracy(current))
                .min_by(|&x, &y| per_request(x).total_cmp(&per_request(y)))
        };
        lower.or(fastest).or_else(cheapest).unwrap_or(current)
    }

    /// The step down that frees a share of the executor for the least accuracy lost
    /// (weighted by requests): the next cheaper variant of a task that may move.
    fn cheapest_room(&self, settled: &[bool]) -> Option<(usize, usize)> {
        let mut best: Option<(f64, usize, usize)> = None;
        for (j, task) in self.tasks.iter().enumerate() {
            if settled[j] || task.budgets.is_none() {
                continue;
            }
            let now = self.chosen[j];
            let (accuracy, utilisation) = (task.candidates[now].accuracy, self.load(j, now).utilisation);
            let next = (0..task.candidates.len())
                .filter(|&v| task.candidates[v].accuracy < accuracy && self.load(j, v).utilisation < utilisation)
                .max_by(|&x, &y| task.candidates[x].accuracy.total_cmp(&task.candidates[y].accuracy));
            let Some(v) = next else { continue };
            let lost = task.demand * (accuracy - task.candidates[v].accuracy);
            let cost = lost / (utilisation - self.load(j, v).utilisation);
            if best.is_none_or(|(c, _, _)| cost < c) {
                best = Some((cost, j, v));
            }
        }
        best.map(|(_, j, v)| (j, v))
    }

    /// Steps up the tasks that may, the best gain per share of the executor first.
    fn step_up(&mut self) {
        let mut waiting: Vec<usize> = (0..self.tasks.len())
            .filter(|&i| {
                let task = &self.tasks[i];
                task.budgets.is_some() && task.may_step_up && !task.behind && self.chosen[i] == task.active
            })
            .collect();
        while let Some((at, v)) = self.best_step_up(&waiting) {
            self.chosen[waiting[at]] = v;
            waiting.swap_remove(at);
        }
    }

    /// Among `waiting`, the step up with the best gain per share of the executor: the
    /// position in `waiting` and the variant.
    fn best_step_up(&self, waiting: &[usize]) -> Option<(usize, usize)> {
        let mut best: Option<(f64, usize, usize)> = None;
        for (at, &i) in waiting.iter().enumerate() {
            let Some(v) = self.step_up_for(i) else { continue };
            let (task, now) = (&self.tasks[i], self.chosen[i]);
            let gained = task.demand * (task.candidates[v].accuracy - task.candidates[now].accuracy);
            let taken = self.load(i, v).utilisation - self.load(i, now).utilisation;
            let gain = if taken > 0.0 { gained / taken } else { f64::INFINITY };
            if best.is_none_or(|(g, _, _)| gain > g) {
                best = Some((gain, at, v));
            }
        }
        best.map(|(_, at, v)| (at, v))
    }

    /// The most accurate variant task `i` may step up to: predicted under its step-up
    /// budget, and every other task within its own that was before.
    fn step_up_for(&self, i: usize) -> Option<usize> {
        let (task, now) = (&self.tasks[i], self.chosen[i]);
        let budgets = task.budgets?;
        let within_now: Vec<usize> = (0..self.tasks.len()).filter(|&j| j != i && !self.over(j, &self.chosen)).collect();
        let leaves_room = |v: usize| {
            let mut trial = self.chosen.clone();
            trial[i] = v;
            within_now.iter().all(|&j| !self.over(j, &trial))
        };
        (0..task.candidates.len())
            .filter(|&v| task.candidates[v].accuracy > task.candidates[now].accuracy && task.may_try[v])
            .filter(|&v| self.fits_stepped_up(i, v, &self.chosen, budgets.step_up_ms) && leaves_room(v))
            .max_by(|&x, &y| task.candidates[x].accuracy.total_cmp(&task.candidates[y].accuracy))
    }
}
