//! The queue of one model, shared by the threads that use it: callers append and, when
//! an instance is idle, hand it a batch at once; an instance that finishes a batch
//! takes its next one itself. Neither waits for a third thread, which keeps a lone
//! request within a few microseconds of a raw session run. A timer thread handles
//! what needs a clock: the queue delay and deadlines of requests nobody else looks at.
//!
//! Where the model's batch cost is known, admission predicts when a request would be
//! answered (the batches ahead of it on the instances as they free up, then its own)
//! and refuses at once one that would be answered after its deadline: under overload
//! the queue holds only work that can still be done in time, and a caller that
//! cannot be served in time hears so within microseconds rather than at its deadline.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;

use super::BatchingConfig;
use super::deadline::{ArrivalRate, Backlog, BatchCost, predicted_answer};
use super::margin::{AdmissionMargin, Prediction};
use super::needless::RefusalLedger;
use super::pending::Pending;
use super::state::{Next, Queued, State};
use crate::answered::{AnswerHook, Answered, Outcome};
use crate::error::Error;
use crate::metrics::ModelCounters;

/// The shared queue.
pub(crate) struct Queue {
    model: Arc<str>,
    on_answer: Option<AnswerHook>,
    counters: Arc<ModelCounters>,
    inner: Mutex<Inner>,
    timer: Condvar,
    /// Rows admitted but still being prepared (images decoding) on their way here:
    /// they will be queued ahead of a request admitted after them.
    preparing: Arc<AtomicUsize>,
}

/// Rows counted as on their way to a queue until this is dropped, when they are
/// queued (or given up).
#[must_use = "the rows count as on their way only while this lives"]
pub(crate) struct PreparingRows {
    count: Arc<AtomicUsize>,
    rows: usize,
}

impl Drop for PreparingRows {
    fn drop(&mut self) {
        self.count.fetch_sub(self.rows, Ordering::Relaxed);
    }
}

struct Inner {
    state: State<Pending>,
    /// Instances waiting for a batch, most recently idle last.
    idle: Vec<usize>,
    /// Job channel of each instance, `None` once it was retired; cleared when the
    /// queue has drained after `close`.
    instances: Vec<Option<Sender<Vec<Pending>>>>,
    /// Per instance, whether it is to leave once the batch it runs is done.
    retiring: Vec<bool>,
    /// Per instance, the batch it runs: when it took it, and its rows.
    running: Vec<Option<(Instant, usize)>>,
    /// How fast requests are offered, refused ones included.
    arrivals: ArrivalRate,
    /// How late answers came against admission's predictions.
    margin: AdmissionMargin,
    /// Refusals and answers, second by second: which refusals were needless.
    refusals: RefusalLedger,
    /// What the model answers a second with the photos requests carry, where that
    /// was measured: below what the batch cost's line says, which is the session's
    /// alone.
    photo_capacity: Option<f64>,
    alive: usize,
    closed: bool,
    /// When the timer thread will look next; `None` while it waits for a notification.
    timer_at: Option<Instant>,
}

impl Queue {
    /// A queue in front of `instances` (job channels), all idle.
    pub fn new(
        model: Arc<str>,
        config: BatchingConfig,
        instances: Vec<Sender<Vec<Pending>>>,
        on_answer: Option<AnswerHook>,
        counters: Arc<ModelCounters>,
    ) -> Arc<Queue> {
        let inner = Inner {
            state: State::new(config),
            idle: (0..instances.len()).rev().collect(),
            alive: instances.len(),
            running: vec![None; instances.len()],
            retiring: vec![false; instances.len()],
            arrivals: ArrivalRate::default(),
            margin: AdmissionMargin::default(),
            refusals: RefusalLedger::default(),
            photo_capacity: None,
            instances: instances.into_iter().map(Some).collect(),
            closed: false,
            timer_at: None,
        };
        let preparing = Arc::new(AtomicUsize::new(0));
        Arc::new(Queue { model, on_answer, counters, inner: Mutex::new(inner), timer: Condvar::new(), preparing })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // The state stays consistent across a panic elsewhere: every change is one call.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Judges batches' deadlines by `cost` from now on (`None`: by their start only,
    /// and admission checks only the queue's room).
    pub fn set_cost(&self, cost: Option<BatchCost>) {
        self.lock().state.set_cost(cost);
        self.timer.notify_one();
    }

    /// The batch cost in force, with its correction as measured so far, and what the
    /// margin stretches predictions by; `None` while no cost prices batches.
    pub fn cost_and_margin(&self) -> Option<(BatchCost, f64)> {
        let inner = self.lock();
        inner.state.cost().map(|cost| (*cost, inner.margin.stretch(Instant::now())))
    }

    /// Judges the refusals' need by what the model answers a second with photos
    /// (`None`: by the batch cost's line).
    pub fn set_photo_capacity(&self, per_s: Option<f64>) {
        self.lock().photo_capacity = per_s;
    }

    /// Forgets how answers came against their predictions: admission starts again
    /// from the batch cost (the model was just switched to, or an instance joined).
    pub fn forget_overruns(&self) {
        self.lock().margin.forget();
    }

    /// Judges the refusals of a second that has ended, though nothing was refused or
    /// answered since: what they come to is then read at once.
    pub fn settle_refusals(&self) {
        let mut inner = self.lock();
        let capacity = inner.capacity_per_s();
        let needless = inner.refusals.settle(Instant::now(), capacity);
        self.counters.needless_refusals(needless);
    }

    /// Counts a request refused before it reached the queue (its images could not be
    /// ready in time) among the refusals whose need is judged.
    pub fn note_refusal(&self) {
        let mut inner = self.lock();
        let empty = inner.state.is_empty() && self.preparing.load(Ordering::Relaxed) == 0;
        self.refused(&mut inner, empty, Instant::now());
    }

    /// Queues a request's parts (one, unless it was split), running what it can at
    /// once if an instance is idle. All parts are queued or none is.
    pub fn submit(&self, parts: impl ExactSizeIterator<Item = Pending>) -> Result<(), Error> {
        let mut parts = parts.peekable();
        let Some(first) = parts.peek() else { return Ok(()) };
        let (deadline, priority, first_rows) = (first.deadline, first.priority, first.rows);
        let mut inner = self.lock();
        if inner.closed {
            return Err(Error::ShuttingDown);
        }
        let max_queue_size = inner.state.config().max_queue_size;
        let now = Instant::now();
        if inner.state.len() + parts.len() > max_queue_size {
            let error = Error::Overloaded { model: self.model.to_string(), max_queue_size };
            self.counters.failed(&error);
            self.refused(&mut inner, false, now);
            return Err(error);
        }
        inner.arrivals.arrived(now);
        let mut prediction = None;
        if let Some(deadline) = deadline {
            // Parts of a split request are all its own rows.
            let rows = parts.len() * first_rows;
            match self.judge(&inner, 0, Duration::ZERO, rows, priority, deadline, now, 1.0) {
                Ok(judged) => prediction = judged,
                Err(error) => {
                    self.counters.failed(&error);
                    let empty = inner.state.is_empty() && self.preparing.load(Ordering::Relaxed) == 0;
                    self.refused(&mut inner, empty, now);
                    return Err(error);
                }
            }
        }
        for mut pending in parts {
            // One judged before its images were prepared keeps that first prediction.
            pending.prediction = pending.prediction.or(prediction);
            // Room was checked above, under the same lock.
            let _ = inner.state.append(pending, now);
        }
        let hold_until = self.dispatch(&mut inner, now);
        let wake = [hold_until, deadline].into_iter().flatten().min();
        if wake.is_some_and(|w| inner.timer_at.is_none_or(|t| w < t)) {
            self.timer.notify_one();
        }
        Ok(())
    }

    /// Counts `rows` as on their way here (being prepared) while the guard lives.
    pub fn preparing(&self, rows: usize) -> PreparingRows {
        self.preparing.fetch_add(rows, Ordering::Relaxed);
        PreparingRows { count: self.preparing.clone(), rows }
    }

    /// Judges a request of `rows` rows and `priority` that will be queued once it is
    /// prepared, `preparing` from now, behind the rows being prepared before it: the
    /// refusal it meets, being predicted to be answered after `deadline`, or what was
    /// predicted for it (`None` while no profile prices the model's batches). Nothing
    /// is queued.
    pub fn judge_prepared(
        &self,
        rows: usize,
        priority: crate::request::Priority,
        deadline: Instant,
        preparing: Duration,
    ) -> Result<Option<Prediction>, Error> {
        let mut inner = self.lock();
        let on_their_way = self.preparing.load(Ordering::Relaxed);
        let now = Instant::now();
        let judged = self.judge(&inner, on_their_way, preparing, rows, priority, deadline, now, 1.0);
        if judged.is_err() {
            let empty = inner.state.is_empty() && on_their_way == 0;
            self.refused(&mut inner, empty, now);
        }
        judged
    }

    /// Whether a request of `rows` rows and `priority`, queued `preparing` from now,
    /// would be admitted to make `deadline` (always, while no profile prices the
    /// batches), its wait predicted `slowed_by` times as long as the batches' lines
    /// say (1: as they say). Nothing is queued or counted.
    pub fn would_admit(
        &self,
        rows: usize,
        priority: crate::request::Priority,
        deadline: Instant,
        preparing: Duration,
        slowed_by: f64,
    ) -> bool {
        let inner = self.lock();
        let on_their_way = self.preparing.load(Ordering::Relaxed);
        self.judge(&inner, on_their_way, preparing, rows, priority, deadline, Instant::now(), slowed_by).is_ok()
    }

    /// Notes a refusal made at `now` with the queue `empty` or not; counts those that
    /// became needless by it.
    fn refused(&self, inner: &mut Inner, empty: bool, now: Instant) {
        let capacity = inner.capacity_per_s();
        let needless = inner.refusals.refused(now, empty, capacity);
        self.counters.needless_refusals(needless);
    }

    /// Judges a request of `rows` rows and `priority` due at `deadline`, queued
    /// `lead` after `now` behind `not_yet_queued` rows besides the queue's (the
    /// queue taken as it stands now), its wait `slowed_by` times what the lines
    /// predict: its refusal when its answer, stretched by the margin answers have
    /// overrun lately, would come after the deadline; else the unstretched prediction
    /// it was admitted on (`None` when the cost is unknown).
    #[allow(clippy::too_many_arguments)]
    fn judge(
        &self,
        inner: &Inner,
        not_yet_queued: usize,
        lead: Duration,
        rows: usize,
        priority: crate::request::Priority,
        deadline: Instant,
        now: Instant,
        slowed_by: f64,
    ) -> Result<Option<Prediction>, Error> {
        let Some(cost) = inner.state.cost() else { return Ok(None) };
        let rows_ahead = inner.state.rows_ahead(priority) + not_yet_queued;
        // The stretch answers for what a stall leaves queued while the model runs flat
        // out. With nothing queued ahead, or with the model answering well under what
        // it can, there is no such queue: the request is judged as predicted, since a
        // refusal then turns away work the model had the time for.
        let saturated = rows_ahead > 0 && inner.refusals.busy(now, inner.capacity_per_s());
        // An instance retiring runs no batch after its own: it frees nothing for others.
        let free_at: Vec<Instant> = (0..inner.running.len())
            .filter(|&i| inner.instances[i].is_some() && !inner.retiring[i])
            .map(|i| inner.running[i].map_or(now, |(took, rows)| took + cost.of(rows)))
            .collect();
        let config = inner.state.config();
        let backlog = Backlog {
            free_at: &free_at,
            rows_ahead,
            max_batch_size: config.max_batch_size,
            max_queue_delay: Duration::from_micros(config.max_queue_delay_us),
            arrivals_per_s: inner.arrivals.per_s(),
        };
        let wait = predicted_answer(cost, &backlog, rows, now).saturating_duration_since(now);
        let answer = now + wait.mul_f64(slowed_by.max(1.0)) + lead;
        let unstretched = AdmissionMargin::default();
        let margin = if saturated { &inner.margin } else { &unstretched };
        match margin.admits(now, answer, deadline) {
            Ok(()) => Ok(Some(Prediction { made: now, answer, deadline })),
            Err(stretched) => Err(Error::WouldMissDeadline {
                model: self.model.to_string(),
                predicted: stretched.saturating_duration_since(now),
                left: deadline.saturating_duration_since(now),
                retry_after: stretched.saturating_duration_since(deadline),
            }),
        }
    }

    /// Takes out every request still waiting for a batch, each with when it was
    /// queued, for another queue to take over.
    pub fn take_waiting(&self) -> Vec<(Pending, Instant)> {
        self.lock().state.take_all()
    }

    /// Queues requests another queue held, each keeping its place in time, and runs
    /// what it can (a closed queue still runs what it holds); gives back those it has
    /// no room for.
    pub fn take_over(&self, moved: Vec<(Pending, Instant)>) -> Vec<(Pending, Instant)> {
        let mut inner = self.lock();
        let mut refused = Vec::new();
        for (pending, enqueued) in moved {
            if let Err(pending) = inner.state.append_since(pending, enqueued) {
                refused.push((pending, enqueued));
            }
        }
        self.dispatch(&mut inner, Instant::now());
        // Their deadlines and any held batch are the timer's to watch.
        self.timer.notify_one();
        refused
    }

    /// Answers requests no queue had room for, as a full queue does.
    pub fn refuse(&self, refused: Vec<Pending>) {
        let max_queue_size = self.lock().state.config().max_queue_size;
        for pending in refused {
            let error = Error::Overloaded { model: self.model.to_string(), max_queue_size };
            self.counters.failed(&error);
            pending.traced.failed(&error);
            let _ = pending.reply.send(Err(error));
            self.tell(Answered::Failed);
        }
    }

    /// Uses new knobs from the next batch on.
    pub fn configure(&self, config: BatchingConfig) {
        let mut inner = self.lock();
        inner.state.set_config(config);
        self.dispatch(&mut inner, Instant::now());
        self.timer.notify_one();
    }

    /// Requests waiting for a batch.
    pub fn len(&self) -> usize {
        self.lock().state.len()
    }

    /// Whether the queue was closed and everything in it has been answered.
    pub fn is_drained(&self) -> bool {
        let inner = self.lock();
        inner.closed && inner.state.is_empty() && inner.idle.len() == inner.alive
    }

    /// Takes no more requests; what is queued still runs, then the instances end.
    pub fn close(&self) {
        self.lock().closed = true;
        self.timer.notify_one();
    }

    /// For an instance that finished a batch of `ran` rows, after waiting `waited` for
    /// its turn, having answered requests admitted on `predictions`: its next batch, or
    /// `None` once it is marked idle (a caller or the timer will hand it work).
    pub fn next_for(
        &self,
        instance: usize,
        ran: usize,
        waited: Duration,
        predictions: &[Prediction],
    ) -> Option<Vec<Pending>> {
        let mut inner = self.lock();
        let now = Instant::now();
        inner.margin.observe_batch(predictions, now);
        if let Some((took, _)) = inner.running.get_mut(instance).and_then(Option::take)
            && ran > 0
        {
            let taken = now - took;
            inner.state.observe(ran, taken.saturating_sub(waited), waited.min(taken));
            let capacity = inner.capacity_per_s();
            let needless = inner.refusals.answered(now, ran as u64, capacity);
            self.counters.needless_refusals(needless);
        }
        if inner.retiring.get(instance).copied().unwrap_or(false) {
            // Its channel closes: the instance ends once this returns.
            inner.retiring[instance] = false;
            inner.instances[instance] = None;
            inner.alive -= 1;
            self.timer.notify_one();
            return None;
        }
        let (dead, next) = inner.state.next_batch(now);
        self.answer_dead(&mut inner, dead);
        match next {
            Next::Batch(batch) => {
                if let Some(running) = inner.running.get_mut(instance) {
                    *running = Some((now, batch.iter().map(|p| p.rows).sum()));
                }
                Some(batch)
            }
            Next::WaitUntil(at) => {
                inner.idle.push(instance);
                // A held batch now has an instance: the timer must send it when due.
                if inner.timer_at.is_none_or(|t| at < t) {
                    self.timer.notify_one();
                }
                None
            }
            Next::Idle => {
                inner.idle.push(instance);
                if inner.closed {
                    // The timer ends the instances once all are idle after a close.
                    self.timer.notify_one();
                }
                None
            }
        }
    }

    /// Takes batches on `jobs` from now on, idle until one comes: an instance loaded
    /// and warmed while the others served. Returns its index.
    pub fn add_instance(&self, jobs: Sender<Vec<Pending>>) -> usize {
        let mut inner = self.lock();
        let index = inner.instances.len();
        inner.instances.push(Some(jobs));
        inner.running.push(None);
        inner.retiring.push(false);
        inner.alive += 1;
        inner.idle.push(index);
        // What answers came to before says little of the instances serving now.
        inner.margin.forget();
        self.dispatch(&mut inner, Instant::now());
        index
    }

    /// Retires up to `count` instances, never the last: idle ones leave at once, busy
    /// ones once the batch they run is answered. No request waits for one that leaves.
    /// Returns how many will leave.
    pub fn retire_instances(&self, count: usize) -> usize {
        let mut inner = self.lock();
        let mut retired = 0;
        while retired < count && inner.serving() > 1 {
            if let Some(idle) = inner.idle.pop() {
                inner.instances[idle] = None;
                inner.alive -= 1;
            } else {
                let Some(busy) =
                    (0..inner.instances.len()).find(|&i| inner.instances[i].is_some() && !inner.retiring[i])
                else {
                    break;
                };
                inner.retiring[busy] = true;
            }
            retired += 1;
        }
        // Closing after the last leaves is the timer's to see.
        self.timer.notify_one();
        retired
    }

    /// Instances that take batches: started and not retiring.
    pub fn instances(&self) -> usize {
        self.lock().serving()
    }

    /// Adds to `batch`, which waited for its turn to run, the requests that arrived
    /// meanwhile and can join it (see [`State::top_up`]).
    pub fn top_up(&self, batch: &mut Vec<Pending>) {
        let Some(head) = batch.first() else { return };
        let rows = batch.iter().map(|p| p.rows).sum();
        let deadline = batch.iter().filter_map(|p| p.deadline()).min();
        let mut inner = self.lock();
        let (dead, more) = inner.state.top_up(head, rows, deadline, Instant::now());
        self.answer_dead(&mut inner, dead);
        drop(inner);
        batch.extend(more);
    }

    /// Hands batches to idle instances while there are both; returns when a batch held
    /// back by the queue delay is due.
    fn dispatch(&self, inner: &mut Inner, now: Instant) -> Option<Instant> {
        if inner.alive == 0 {
            // No instance is left to run anything: answer rather than hold requests forever.
            while let (_, Next::Batch(batch)) = inner.state.next_batch(now) {
                batch.into_iter().for_each(|p| drop(p.reply.send(Err(Error::ShuttingDown))));
            }
            return None;
        }
        while let Some(&instance) = inner.idle.last() {
            let (dead, next) = inner.state.next_batch(now);
            self.answer_dead(inner, dead);
            match next {
                Next::Batch(batch) => {
                    inner.idle.pop();
                    inner.running[instance] = Some((now, batch.iter().map(|p| p.rows).sum()));
                    // An idle instance's channel is empty, so this never blocks.
                    let sent = match &inner.instances[instance] {
                        Some(sender) => sender.send(batch),
                        None => Err(crossbeam_channel::SendError(batch)),
                    };
                    if let Err(lost) = sent {
                        inner.alive -= 1;
                        lost.0.into_iter().for_each(|p| drop(p.reply.send(Err(Error::ShuttingDown))));
                    }
                }
                Next::WaitUntil(at) => return Some(at),
                Next::Idle => return None,
            }
        }
        None
    }

    fn answer_dead(&self, inner: &mut Inner, dead: Vec<super::state::Dead<Pending>>) {
        // Given up as unable to make their deadlines: they would have been answered
        // no sooner than that.
        let given_up: Vec<Prediction> =
            dead.iter().filter(|d| d.reason != Outcome::Abandoned).filter_map(|d| d.item.prediction).collect();
        inner.margin.observe_given_up(&given_up, Instant::now());
        for d in dead {
            // The queue drops a request for one of two reasons: its caller left, or
            // its deadline (as State judges it) passed.
            let answered = if d.reason == Outcome::Abandoned {
                self.counters.canceled();
                Answered::Abandoned
            } else {
                let error = Error::DeadlineExceeded { model: self.model.to_string() };
                self.counters.failed(&error);
                d.item.traced.failed(&error);
                let _ = d.item.reply.send(Err(error));
                Answered::Expired
            };
            self.tell(answered);
        }
    }

    /// Tells the model's answer hook how a request ended.
    pub fn tell(&self, answered: Answered) {
        if let Some(on_answer) = &self.on_answer {
            on_answer(answered);
        }
    }
}

impl Inner {
    /// Instances that take batches: started and not retiring.
    fn serving(&self) -> usize {
        self.alive - self.retiring.iter().filter(|&&r| r).count()
    }

    /// What the model answers a second as profiled: its capacity with photos where
    /// that was measured (with its instances), else what its batch cost gives at the
    /// largest batch in force (the line as its batches have been running against it),
    /// for each serving instance; `None` without a profile.
    fn capacity_per_s(&self) -> Option<f64> {
        if let Some(photos) = self.photo_capacity {
            return Some(photos);
        }
        let one = self.state.cost()?.capacity_per_s(self.state.config().max_batch_size);
        Some(one * self.serving().max(1) as f64)
    }
}

/// Runs batches held back by the queue delay when it ends, answers expired requests
/// while every instance is busy, and lets the instances go once a closed queue drains.
pub(crate) fn timer_task(queue: Arc<Queue>) {
    let mut inner = queue.lock();
    loop {
        let now = Instant::now();
        let hold_until = queue.dispatch(&mut inner, now);
        // With every instance busy nothing forms batches, so expiry is the timer's job;
        // callers do not scan the queue on each request.
        let dead = inner.state.expire(now);
        queue.answer_dead(&mut inner, dead);
        if inner.closed && inner.state.is_empty() && inner.idle.len() == inner.alive {
            break;
        }
        let wake = [hold_until, inner.state.next_deadline()].into_iter().flatten().min();
        inner.timer_at = wake;
        inner = match wake {
            Some(at) => match queue.timer.wait_timeout(inner, at.saturating_duration_since(now)) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            },
            None => queue.timer.wait(inner).unwrap_or_else(PoisonError::into_inner),
        };
    }
    // Closing the job channels ends the instance threads.
    inner.instances.clear();
}
