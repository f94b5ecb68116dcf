//! The batching queue as plain data: what is waiting, and which batch to run next.
//! No threads, no clocks of its own (time is passed in), so every rule is unit-tested
//! below. The queue is kept in the order batches take requests: by priority, then by
//! arrival (FIFO within a priority).
//!
//! Where the model's batch cost is known ([`BatchCost`]), a request leaves the queue
//! unrun as soon as it could not be answered in time even if its batch started now,
//! and a batch is cut where one more request would make an earlier one late.
//! High-priority requests go first, but while normal ones wait they get at most
//! `high_priority_share_percent` of the rows batched lately.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::BatchingConfig;
use super::deadline::BatchCost;
use crate::answered::Outcome;
pub use crate::request::Priority;

/// How much of the previous batches' rows the priority share remembers per batch:
/// about the last ten batches count.
const SHARE_MEMORY: f64 = 0.9;

/// What the queue needs to know about a request.
pub trait Queued {
    /// Its priority.
    fn priority(&self) -> Priority {
        Priority::Normal
    }
    /// Rows the request adds to a batch (its dimension 0).
    fn rows(&self) -> usize;
    /// When the request stops being worth running.
    fn deadline(&self) -> Option<Instant>;
    /// Whether the caller went away.
    fn is_abandoned(&self) -> bool;
    /// Whether the two can run in one batch (same trailing dimensions).
    fn can_batch_with(&self, other: &Self) -> bool;
}

/// A request that left the queue without running.
#[derive(Debug)]
pub struct Dead<T> {
    /// The request.
    pub item: T,
    /// Why: [`Outcome::Expired`] (its deadline passed, or would pass before a batch
    /// started now answered it) or [`Outcome::Abandoned`] (its caller went away).
    pub reason: Outcome,
}

/// What to do next.
#[derive(Debug)]
pub enum Next<T> {
    /// Run these requests as one batch, in this order.
    Batch(Vec<T>),
    /// Nothing to run before this instant, unless more requests arrive.
    WaitUntil(Instant),
    /// The queue is empty.
    Idle,
}

struct Slot<T> {
    item: T,
    enqueued: Instant,
}

/// The queue of one model.
pub struct State<T> {
    queue: VecDeque<Slot<T>>,
    config: BatchingConfig,
    cost: Option<BatchCost>,
    /// Rows batched lately of high and of normal priority, decayed per batch.
    recent_rows: [f64; 2],
}

// Its parts (sessions, threads, closures, channels) print nothing useful.
impl<T> std::fmt::Debug for State<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State").finish_non_exhaustive()
    }
}

impl<T: Queued> State<T> {
    /// An empty queue with the given knobs, without a batch cost.
    pub fn new(config: BatchingConfig) -> Self {
        State { queue: VecDeque::new(), config, cost: None, recent_rows: [0.0; 2] }
    }

    /// What a batch costs, where known: deadlines are then judged by when a batch
    /// would answer, not only by when it would start.
    pub fn set_cost(&mut self, cost: Option<BatchCost>) {
        self.cost = cost;
    }

    /// The batch cost in force, if any.
    pub fn cost(&self) -> Option<&BatchCost> {
        self.cost.as_ref()
    }

    /// A batch of `rows` rows waited `waited` for its turn and ran for `ran`: the
    /// cost learns both.
    pub fn observe(&mut self, rows: usize, ran: Duration, waited: Duration) {
        if let Some(cost) = &mut self.cost {
            cost.observe(rows, ran, waited);
        }
    }

    /// Rows a request of `priority` queued now would have ahead of it.
    pub fn rows_ahead(&self, priority: Priority) -> usize {
        self.queue.iter().filter(|s| s.item.priority() <= priority).map(|s| s.item.rows()).sum()
    }

    /// The knobs in force.
    pub fn config(&self) -> &BatchingConfig {
        &self.config
    }

    /// Replaces the knobs; they apply from the next batch on.
    pub fn set_config(&mut self, config: BatchingConfig) {
        self.config = config;
    }

    /// Requests waiting.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Queues a request behind those of its priority and above, or gives it back when
    /// the queue is full.
    pub fn append(&mut self, item: T, now: Instant) -> Result<(), T> {
        self.append_since(item, now)
    }

    /// Like [`State::append`] for a request first queued at `enqueued` (one moved from
    /// another queue): it goes behind those of its priority queued before it.
    pub fn append_since(&mut self, item: T, enqueued: Instant) -> Result<(), T> {
        if self.queue.len() >= self.config.max_queue_size {
            return Err(item);
        }
        let key = (item.priority(), enqueued);
        let slot = Slot { item, enqueued };
        if self.queue.back().is_none_or(|last| (last.item.priority(), last.enqueued) <= key) {
            self.queue.push_back(slot);
        } else {
            let at = self.queue.partition_point(|s| (s.item.priority(), s.enqueued) <= key);
            self.queue.insert(at, slot);
        }
        Ok(())
    }

    /// Takes every waiting request out, in queue order, each with when it was queued.
    pub fn take_all(&mut self) -> Vec<(T, Instant)> {
        self.queue.drain(..).map(|s| (s.item, s.enqueued)).collect()
    }

    /// Removes requests whose caller went away, and those whose deadline passed or
    /// would pass before a batch of their own started now could answer them.
    pub fn expire(&mut self, now: Instant) -> Vec<Dead<T>> {
        let cost = self.cost;
        let dead_reason = |item: &T| {
            if item.is_abandoned() {
                Some(Outcome::Abandoned)
            } else if item.deadline().is_some_and(|d| now >= expiry(cost.as_ref(), d, item.rows())) {
                Some(Outcome::Expired)
            } else {
                None
            }
        };
        if !self.queue.iter().any(|s| dead_reason(&s.item).is_some()) {
            return Vec::new();
        }
        let mut dead = Vec::new();
        let mut kept = VecDeque::with_capacity(self.queue.len());
        for slot in self.queue.drain(..) {
            match dead_reason(&slot.item) {
                Some(reason) => dead.push(Dead { item: slot.item, reason }),
                None => kept.push_back(slot),
            }
        }
        self.queue = kept;
        dead
    }

    /// The earliest instant a waiting request expires (see [`State::expire`]).
    pub fn next_deadline(&self) -> Option<Instant> {
        let cost = self.cost.as_ref();
        self.queue.iter().filter_map(|s| Some(expiry(cost, s.item.deadline()?, s.item.rows()))).min()
    }

    /// Expires what is dead, then decides what to run: the queue's front (see
    /// `State::batch_start` for when normal requests go first).
    ///
    /// A batch leaves at once when it is full (`max_batch_size` rows, or the next request
    /// cannot join it), when it reaches the largest preferred size, or when there is no
    /// queue delay; otherwise when the oldest request has waited `max_queue_delay_us`.
    /// A batch that leaves before it is full is cut to the largest preferred size it
    /// can form, and the rest waits for the next instance. Where the cost is known, a
    /// request the batch would answer after its deadline leaves unrun (`Expired`) and
    /// its room goes to the requests behind it: batches stay full under overload
    /// rather than shrink to save requests admitted at the edge.
    pub fn next_batch(&mut self, now: Instant) -> (Vec<Dead<T>>, Next<T>) {
        let mut dead = self.expire(now);
        loop {
            let (late, next) = self.form_batch(now);
            dead.extend(late);
            if let Some(next) = next {
                return (dead, next);
            }
        }
    }

    /// One try of [`State::next_batch`] after expiry: `None` (with the requests taken
    /// out) when the batch would have answered some late, whose room then goes to the
    /// requests behind them on the next try.
    fn form_batch(&mut self, now: Instant) -> (Vec<Dead<T>>, Option<Next<T>>) {
        if self.queue.is_empty() {
            return (Vec::new(), Some(Next::Idle));
        }
        let start = self.batch_start();
        let head = &self.queue[start];
        let max = self.config.max_batch_size.max(1);
        let (mut members, mut member_rows) = self.gather(start, &head.item);
        let rows = member_rows.last().copied().unwrap_or(0);
        if members.is_empty() {
            // Admission refuses oversized requests; should one slip through, run it alone.
            members.push(start);
            member_rows.push(head.item.rows());
        }
        // Requests of other shapes wait: holding the batch for more would hold them.
        let cannot_grow = rows >= max || start + members.len() < self.queue.len();
        let reached_preferred = self.config.largest_preferred().is_some_and(|p| rows >= p);
        let delay = Duration::from_micros(self.config.max_queue_delay_us);
        let waited_enough = now.duration_since(head.enqueued) >= delay;
        if !(cannot_grow || reached_preferred || waited_enough) {
            return (Vec::new(), Some(Next::WaitUntil(head.enqueued + delay)));
        }
        members.truncate(self.cut(&member_rows));
        let late = self.late_in(start, &members, now);
        if !late.is_empty() {
            return (late, None);
        }
        // Every request left answers in time at the predicted cost.
        let batch = self.take_out(&members);
        self.count_batched(&batch);
        (Vec::new(), Some(Next::Batch(batch)))
    }

    /// For a batch of `rows` rows led by `head` that waited for its turn to run (its
    /// requests' earliest deadline `deadline`): the requests at the front of the queue
    /// that can join it within `max_batch_size` (and, where preferred sizes are set, up
    /// to one of them) without making any request of it late, so that what arrived
    /// during the wait runs with it rather than after it. Expires what is dead first.
    pub fn top_up(&mut self, head: &T, rows: usize, deadline: Option<Instant>, now: Instant) -> (Vec<Dead<T>>, Vec<T>) {
        let dead = self.expire(now);
        let prefix_rows = self.joinable(0, head, rows);
        let take = if self.config.preferred_batch_sizes.is_empty() {
            prefix_rows.len()
        } else {
            prefix_rows.iter().rposition(|r| self.config.preferred_batch_sizes.contains(r)).map_or(0, |i| i + 1)
        };
        let take = self.in_time(take, deadline, rows, now);
        let joined: Vec<T> = self.queue.drain(..take).map(|s| s.item).collect();
        self.count_batched(&joined);
        (dead, joined)
    }

    /// Where the next batch starts in the queue: at its front, unless high-priority
    /// requests lead it and took more than their share of the rows batched lately
    /// while normal ones wait; then at the first normal one, so that sustained
    /// high-priority load never starves normal requests.
    fn batch_start(&self) -> usize {
        let [high, normal] = self.recent_rows;
        let share = f64::from(self.config.high_priority_share_percent) / 100.0;
        let over_share = high + normal > 0.0 && high > share * (high + normal);
        if !over_share || self.queue.front().is_none_or(|s| s.item.priority() != Priority::High) {
            return 0;
        }
        self.queue.iter().position(|s| s.item.priority() == Priority::Normal).unwrap_or(0)
    }

    /// Takes out of the requests at `members` (queue positions, ascending, from
    /// `start` on) those that a batch of them all, started at `now`, would answer after
    /// their deadline (where the cost is known). A request at the edge, answered in
    /// time only if the batch runs no slower than predicted (not as slowly as recent
    /// batches strayed), leaves only while a request outside the batch can take its
    /// room: under overload the batch stays full and answers nobody late, otherwise
    /// the request keeps its chance.
    fn late_in(&mut self, start: usize, members: &[usize], now: Instant) -> Vec<Dead<T>> {
        let Some(cost) = &self.cost else { return Vec::new() };
        let rows: usize = members.iter().map(|&i| self.queue[i].item.rows()).sum();
        let (finish, finish_slow) = (now + cost.of(rows), now + cost.of_slow(rows));
        let mut behind = self.queue.len().saturating_sub(start + members.len());
        let mut late = Vec::new();
        for &i in members {
            match self.queue[i].item.deadline() {
                Some(d) if d < finish => late.push(i),
                Some(d) if d < finish_slow && behind > 0 => {
                    behind -= 1;
                    late.push(i);
                }
                _ => {}
            }
        }
        self.take_out(&late).into_iter().map(|item| Dead { item, reason: Outcome::Expired }).collect()
    }

    /// Removes the requests at `positions` (ascending) from the queue, in order.
    fn take_out(&mut self, positions: &[usize]) -> Vec<T> {
        let mut taken: Vec<T> = positions.iter().rev().filter_map(|&i| self.queue.remove(i)).map(|s| s.item).collect();
        taken.reverse();
        taken
    }

    /// Remembers the rows of a batch by priority, for the share.
    fn count_batched(&mut self, batch: &[T]) {
        if batch.is_empty() {
            return;
        }
        self.recent_rows.iter_mut().for_each(|r| *r *= SHARE_MEMORY);
        for item in batch {
            let index = usize::from(item.priority() != Priority::High);
            self.recent_rows[index] += item.rows() as f64;
        }
    }

    /// Of the first `take` requests of the queue, how many can join a batch of `rows`
    /// rows (whose earliest deadline is `deadline`) and all be answered by their
    /// deadlines if it starts at `now`, even running as slowly as recent batches
    /// strayed; `take` where the cost is unknown.
    fn in_time(&self, take: usize, deadline: Option<Instant>, rows: usize, now: Instant) -> usize {
        let Some(cost) = &self.cost else { return take };
        let mut earliest = deadline;
        let mut total = rows;
        let mut fits = 0;
        for (n, slot) in self.queue.iter().take(take).enumerate() {
            total += slot.item.rows();
            earliest = [earliest, slot.item.deadline()].into_iter().flatten().min();
            if earliest.is_none_or(|d| now + cost.of_slow(total) <= d) {
                fits = n + 1;
            }
        }
        fits
    }

    /// Row totals, from `rows` on, of the longest run of the queue from `start` that
    /// can run in one batch led by `head` within `max_batch_size`.
    fn joinable(&self, start: usize, head: &T, rows: usize) -> Vec<usize> {
        let max = self.config.max_batch_size.max(1);
        let mut totals = Vec::new();
        let mut total = rows;
        for slot in self.queue.iter().skip(start) {
            if !slot.item.can_batch_with(head) || total + slot.item.rows() > max {
                break;
            }
            total += slot.item.rows();
            totals.push(total);
        }
        totals
    }

    /// The queue positions, from `start` on, of the requests a batch led by `head`
    /// gathers within `max_batch_size`, oldest first, passing over those it cannot
    /// run with (another shape): requests of one shape that arrive interleaved with
    /// others, as the lines of pages in flight do, still share batches. With them,
    /// the batch's row totals as each joins.
    fn gather(&self, start: usize, head: &T) -> (Vec<usize>, Vec<usize>) {
        let max = self.config.max_batch_size.max(1);
        let (mut members, mut totals) = (Vec::new(), Vec::new());
        let mut total = 0;
        for (i, slot) in self.queue.iter().enumerate().skip(start) {
            if !slot.item.can_batch_with(head) {
                continue;
            }
            if total + slot.item.rows() > max {
                break;
            }
            total += slot.item.rows();
            members.push(i);
            totals.push(total);
        }
        (members, totals)
    }

    /// How many requests of the prefix to take: the longest prefix whose rows are a
    /// preferred size, or the whole prefix when none is.
    fn cut(&self, prefix_rows: &[usize]) -> usize {
        prefix_rows
            .iter()
            .rposition(|r| self.config.preferred_batch_sizes.contains(r))
            .map_or(prefix_rows.len(), |i| i + 1)
    }
}

/// From when a request of `rows` rows due at `deadline` can no longer be answered in
/// time: just after the last instant a batch of its own could start and still answer
/// by then, or the deadline itself where the cost is unknown.
fn expiry(cost: Option<&BatchCost>, deadline: Instant, rows: usize) -> Instant {
    match cost {
        Some(cost) => deadline.checked_sub(cost.of(rows)).unwrap_or(deadline) + Duration::from_nanos(1),
        None => deadline,
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::rc::Rc;

    use super::*;

    #[derive(Debug)]
    struct Req {
        id: u32,
        rows: usize,
        width: usize,
        deadline: Option<Instant>,
        gone: Rc<Cell<bool>>,
        priority: Priority,
    }

    impl Req {
        fn new(id: u32) -> Self {
            Req { id, rows: 1, width: 4, deadline: None, gone: Rc::default(), priority: Priority::Normal }
        }
        fn high(id: u32) -> Self {
            Req { priority: Priority::High, ..Req::new(id) }
        }
        fn rows(mut self, rows: usize) -> Self {
            self.rows = rows;
            self
        }
    }

    impl Queued for Req {
        fn priority(&self) -> Priority {
            self.priority
        }
        fn rows(&self) -> usize {
            self.rows
        }
        fn deadline(&self) -> Option<Instant> {
            self.deadline
        }
        fn is_abandoned(&self) -> bool {
            self.gone.get()
        }
        fn can_batch_with(&self, other: &Self) -> bool {
            self.width == other.width
        }
    }

    fn ids(next: Next<Req>) -> Vec<u32> {
        match next {
            Next::Batch(b) => b.into_iter().map(|r| r.id).collect(),
            other => panic!("expected a batch, got {other:?}"),
        }
    }

    fn state(config: BatchingConfig) -> State<Req> {
        State::new(config)
    }

    #[test]
    fn requests_moved_from_another_queue_keep_their_place_in_time() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let mut from = state(BatchingConfig::default().with_max_batch_size(8));
        from.append(Req::new(1), ms(1)).unwrap();
        from.append(Req::high(2), ms(2)).unwrap();
        from.append(Req::new(3), ms(3)).unwrap();
        let mut to = state(BatchingConfig::default().with_max_batch_size(8));
        to.append(Req::new(10), ms(5)).unwrap();
        to.append(Req::high(11), ms(6)).unwrap();
        for (req, enqueued) in from.take_all() {
            to.append_since(req, enqueued).unwrap();
        }
        assert!(from.is_empty());
        assert_eq!(ids(to.next_batch(ms(7)).1), vec![2, 11, 1, 3, 10], "priority first, then time queued");
    }

    #[test]
    fn a_batch_that_waited_for_its_turn_is_topped_up_to_its_limits() {
        let t0 = Instant::now();
        let mut s = state(BatchingConfig::default().with_max_batch_size(8));
        let head = Req::new(0).rows(2);
        for (id, rows) in [(1, 3), (2, 2), (3, 1), (4, 1)] {
            s.append(Req::new(id).rows(rows), t0).unwrap();
        }
        let (_, joined) = s.top_up(&head, 2, None, t0);
        let joined: Vec<u32> = joined.into_iter().map(|r| r.id).collect();
        assert_eq!(joined, vec![1, 2, 3], "2 + 3 + 2 + 1 rows fill 8; the last waits");
        assert_eq!(s.len(), 1);

        // A request that cannot run with the batch stops the top-up: nothing overtakes it.
        let mut s = state(BatchingConfig::default().with_max_batch_size(8));
        s.append(Req { width: 8, ..Req::new(1) }, t0).unwrap();
        s.append(Req::new(2), t0).unwrap();
        assert!(s.top_up(&head, 2, None, t0).1.is_empty());

        // With preferred sizes, up to the largest one it can reach.
        let mut s = state(BatchingConfig::default().with_max_batch_size(8).with_preferred_batch_sizes([4, 8]));
        for id in 1..=3 {
            s.append(Req::new(id), t0).unwrap();
        }
        let (_, joined) = s.top_up(&head, 2, None, t0);
        assert_eq!(joined.len(), 2, "2 + 2 rows make 4; 5 is not preferred");
    }

    #[test]
    fn no_delay_sends_everything_queued_in_arrival_order() {
        let t0 = Instant::now();
        let mut s = state(BatchingConfig::default().with_max_batch_size(8));
        for id in 0..3 {
            s.append(Req::new(id), t0).unwrap();
        }
        assert_eq!(ids(s.next_batch(t0).1), vec![0, 1, 2]);
        assert!(matches!(s.next_batch(t0).1, Next::Idle));
    }

    #[test]
    fn a_batch_gathers_its_shape_from_behind_requests_of_other_shapes() {
        let t0 = Instant::now();
        let mut s = state(BatchingConfig::default().with_max_batch_size(3));
        // Two pages' lines, interleaved: widths 4, 8, 4, 8, 4, 4.
        for (id, width) in [(0, 4), (1, 8), (2, 4), (3, 8), (4, 4), (5, 4)] {
            s.append(Req { width, ..Req::new(id) }, t0).unwrap();
        }
        assert_eq!(ids(s.next_batch(t0).1), vec![0, 2, 4], "the oldest leads; its shape joins it, up to 3 rows");
        assert_eq!(ids(s.next_batch(t0).1), vec![1, 3], "then the oldest left, with its own shape");
        assert_eq!(ids(s.next_batch(t0).1), vec![5]);
    }

    #[test]
    fn batches_never_exceed_max_batch_size_in_rows() {
        let t0 = Instant::now();
        let mut s = state(BatchingConfig::default().with_max_batch_size(4));
        s.append(Req::new(0).rows(3), t0).unwrap();
        s.append(Req::new(1).rows(2), t0).unwrap();
        s.append(Req::new(2).rows(2), t0).unwrap();
        assert_eq!(ids(s.next_batch(t0).1), vec![0]);
        assert_eq!(ids(s.next_batch(t0).1), vec![1, 2]);
    }

    #[test]
    fn delay_holds_a_partial_batch_until_the_oldest_has_waited() {
        let t0 = Instant::now();
        let delay = Duration::from_micros(500);
        let mut s = state(BatchingConfig::default().with_max_batch_size(4).with_max_queue_delay_us(500));
        s.append(Req::new(0), t0).unwrap();
        s.append(Req::new(1), t0 + Duration::from_micros(100)).unwrap();
        match s.next_batch(t0 + Duration::from_micros(200)).1 {
            Next::WaitUntil(t) => assert_eq!(t, t0 + delay),
            other => panic!("expected to wait, got {other:?}"),
        }
        assert_eq!(ids(s.next_batch(t0 + delay).1), vec![0, 1]);
    }

    #[test]
    fn a_full_batch_leaves_before_the_delay() {
        let t0 = Instant::now();
        let mut s = state(BatchingConfig::default().with_max_batch_size(2).with_max_queue_delay_us(1_000_000));
        s.append(Req::new(0), t0).unwrap();
        s.append(Req::new(1), t0).unwrap();
        s.append(Req::new(2), t0).unwrap();
        assert_eq!(ids(s.next_batch(t0).1), vec![0, 1]);
        assert!(matches!(s.next_batch(t0).1, Next::WaitUntil(_)));
    }

    #[test]
    fn an_incompatible_request_closes_the_batch_in_front_of_it() {
        let t0 = Instant::now();
        let mut s = state(BatchingConfig::default().with_max_queue_delay_us(1_000_000));
        s.append(Req::new(0), t0).unwrap();
        s.append(Req { width: 8, ..Req::new(1) }, t0).unwrap();
        assert_eq!(ids(s.next_batch(t0).1), vec![0]);
    }

    #[test]
    fn reaching_the_largest_preferred_size_sends_at_once() {
        let t0 = Instant::now();
        let mut s = state(
            BatchingConfig::default()
                .with_max_batch_size(8)
                .with_max_queue_delay_us(1_000_000)
                .with_preferred_batch_sizes([2, 4]),
        );
        for id in 0..3 {
            s.append(Req::new(id), t0).unwrap();
        }
        assert!(matches!(s.next_batch(t0).1, Next::WaitUntil(_)), "3 rows: wait for 4");
        s.append(Req::new(3), t0).unwrap();
        s.append(Req::new(4), t0).unwrap();
        assert_eq!(ids(s.next_batch(t0).1), vec![0, 1, 2, 3], "cut to the preferred 4");
    }

    #[test]
    fn at_the_delay_a_batch_is_cut_to_a_preferred_size() {
        let t0 = Instant::now();
        let later = t0 + Duration::from_millis(2);
        let mut s = state(
            BatchingConfig::default()
                .with_max_batch_size(8)
                .with_max_queue_delay_us(1000)
                .with_preferred_batch_sizes([2, 4]),
        );
        for id in 0..3 {
            s.append(Req::new(id), t0).unwrap();
        }
        assert_eq!(ids(s.next_batch(later).1), vec![0, 1]);
        assert_eq!(ids(s.next_batch(later).1), vec![2], "no preferred size fits: send the rest");
    }

    #[test]
    fn a_full_queue_gives_the_request_back() {
        let t0 = Instant::now();
        let mut s = state(BatchingConfig::default().with_max_queue_size(2));
        s.append(Req::new(0), t0).unwrap();
        s.append(Req::new(1), t0).unwrap();
        assert_eq!(s.append(Req::new(2), t0).unwrap_err().id, 2);
        assert_eq!(s.len(), 2);
    }

    #[test]
    fn expired_requests_leave_without_running() {
        let t0 = Instant::now();
        let mut s = state(BatchingConfig::default());
        let soon = t0 + Duration::from_millis(1);
        s.append(Req { deadline: Some(soon), ..Req::new(0) }, t0).unwrap();
        s.append(Req::new(1), t0).unwrap();
        assert_eq!(s.next_deadline(), Some(soon));
        let (dead, next) = s.next_batch(soon);
        assert_eq!(dead.len(), 1);
        assert_eq!((dead[0].item.id, dead[0].reason), (0, Outcome::Expired));
        assert_eq!(ids(next), vec![1]);
    }

    #[test]
    fn abandoned_requests_are_dropped_before_they_run() {
        let t0 = Instant::now();
        let mut s = state(BatchingConfig::default());
        let gone = Req::new(0);
        gone.gone.set(true);
        s.append(gone, t0).unwrap();
        s.append(Req::new(1), t0).unwrap();
        let (dead, next) = s.next_batch(t0);
        assert_eq!(dead.iter().map(|d| d.reason).collect::<Vec<_>>(), vec![Outcome::Abandoned]);
        assert_eq!(ids(next), vec![1]);
    }

    #[test]
    fn expire_keeps_the_order_of_survivors() {
        let t0 = Instant::now();
        let mut s = state(BatchingConfig::default());
        for id in 0..5 {
            let r = Req::new(id);
            r.gone.set(id % 2 == 1);
            s.append(r, t0).unwrap();
        }
        assert_eq!(s.expire(t0).len(), 2);
        assert_eq!(ids(s.next_batch(t0).1), vec![0, 2, 4]);
    }

    #[test]
    fn new_knobs_apply_to_the_next_batch() {
        let t0 = Instant::now();
        let mut s = state(BatchingConfig::default().with_max_batch_size(8));
        for id in 0..4 {
            s.append(Req::new(id), t0).unwrap();
        }
        s.set_config(BatchingConfig::default().with_max_batch_size(2));
        assert_eq!(ids(s.next_batch(t0).1), vec![0, 1]);
    }

    #[test]
    fn high_priority_requests_are_batched_first_in_arrival_order() {
        let t0 = Instant::now();
        let mut s = state(BatchingConfig::default().with_max_batch_size(3));
        s.append(Req::new(0), t0).unwrap();
        s.append(Req::new(1), t0).unwrap();
        s.append(Req::high(2), t0).unwrap();
        s.append(Req::new(3), t0).unwrap();
        s.append(Req::high(4), t0).unwrap();
        assert_eq!(ids(s.next_batch(t0).1), vec![2, 4, 0]);
        assert_eq!(ids(s.next_batch(t0).1), vec![1, 3]);
    }

    /// 1 ms a row plus 4 ms a batch.
    fn costed(config: BatchingConfig) -> State<Req> {
        let mut s = state(config);
        s.set_cost(BatchCost::new(modelless_policy_abi::LatencyFit { a_ms: 1.0, c_ms: 4.0, r2: 1.0 }));
        s
    }

    fn due(id: u32, deadline: Instant) -> Req {
        Req { deadline: Some(deadline), ..Req::new(id) }
    }

    #[test]
    fn a_request_that_could_not_be_answered_in_time_leaves_unrun_before_its_deadline() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let mut s = costed(BatchingConfig::default().with_max_batch_size(1));
        // Alone, a row costs 5 ms: due at 5 ms it just makes it at 0; at 4.9 it cannot.
        s.append(due(0, t0 + Duration::from_micros(4900)), t0).unwrap();
        s.append(due(1, ms(5)), t0).unwrap();
        s.append(due(2, ms(9)), t0).unwrap();
        assert_eq!(s.next_deadline(), Some(t0 - Duration::from_micros(100) + Duration::from_nanos(1)));
        let (dead, next) = s.next_batch(t0);
        assert_eq!(dead.iter().map(|d| (d.item.id, d.reason)).collect::<Vec<_>>(), [(0, Outcome::Expired)]);
        assert_eq!(ids(next), vec![1]);
        // Request 2 is due at 9 ms: starting at 4 ms it still makes it, not after.
        assert!(s.expire(ms(4)).is_empty());
        assert_eq!(s.expire(ms(4) + Duration::from_nanos(1)).len(), 1);
    }

    #[test]
    fn a_request_its_batch_would_answer_late_leaves_and_its_room_goes_to_those_behind() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let fill = |s: &mut State<Req>, head_due: u64| {
            s.append(due(0, ms(head_due)), t0).unwrap();
            for id in 1..10 {
                s.append(due(id, ms(100)), t0).unwrap();
            }
        };
        // A full batch of 8 rows answers at 12 ms: the head due at 11 leaves unrun,
        // and the batch takes the next 8 instead of shrinking to save it.
        let mut s = costed(BatchingConfig::default().with_max_batch_size(8));
        fill(&mut s, 11);
        let (dead, next) = s.next_batch(t0);
        assert_eq!(dead.iter().map(|d| (d.item.id, d.reason)).collect::<Vec<_>>(), [(0, Outcome::Expired)]);
        assert_eq!(ids(next), (1..9).collect::<Vec<_>>());
        // Due at 12, it makes it: the boundary is in time.
        let mut s = costed(BatchingConfig::default().with_max_batch_size(8));
        fill(&mut s, 12);
        let (dead, next) = s.next_batch(t0);
        assert!(dead.is_empty());
        assert_eq!(ids(next), (0..8).collect::<Vec<_>>());

        // Without a cost, only the start counts.
        let mut s = state(BatchingConfig::default().with_max_batch_size(8));
        fill(&mut s, 11);
        assert_eq!(ids(s.next_batch(t0).1), (0..8).collect::<Vec<_>>());
    }

    #[test]
    fn when_batches_stray_from_their_prediction_the_edge_of_a_batch_leaves_unrun() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let mut s = costed(BatchingConfig::default().with_max_batch_size(8));
        // Batches of 8 alternate 9 and 15 ms around the 12 the line says: the mean
        // stays 12 ms, the margin grows to about a quarter of it.
        for n in 0..400 {
            s.observe(8, Duration::from_millis(if n % 2 == 0 { 9 } else { 15 }), Duration::ZERO);
        }
        s.append(due(0, ms(13)), t0).unwrap();
        for id in 1..9 {
            s.append(due(id, ms(100)), t0).unwrap();
        }
        // Due at 13 ms, the head makes it only if its batch runs at the mean: with a
        // request behind the batch to take its room, it leaves.
        let (dead, next) = s.next_batch(t0);
        assert_eq!(dead.iter().map(|d| (d.item.id, d.reason)).collect::<Vec<_>>(), [(0, Outcome::Expired)]);
        assert_eq!(ids(next), (1..9).collect::<Vec<_>>());
        // With nobody behind, it keeps its chance.
        s.append(due(9, ms(13)), t0).unwrap();
        for id in 10..17 {
            s.append(due(id, ms(100)), t0).unwrap();
        }
        let (dead, next) = s.next_batch(t0);
        assert!(dead.is_empty());
        assert_eq!(ids(next), (9..17).collect::<Vec<_>>());
    }

    #[test]
    fn a_batch_waiting_for_its_turn_takes_only_requests_that_keep_it_in_time() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let mut s = costed(BatchingConfig::default().with_max_batch_size(8));
        for id in 1..6 {
            s.append(due(id, ms(100)), t0).unwrap();
        }
        // A batch of 2 rows due at 9 ms: 3 more rows make 5 (9 ms), a fourth would be late.
        let (_, joined) = s.top_up(&Req::new(0), 2, Some(ms(9)), t0);
        assert_eq!(joined.iter().map(|r| r.id).collect::<Vec<_>>(), vec![1, 2, 3]);
        // A batch already late takes nobody.
        let (_, joined) = s.top_up(&Req::new(0), 2, Some(ms(5)), t0);
        assert!(joined.is_empty());
    }

    #[test]
    fn sustained_high_priority_load_leaves_normal_requests_their_share() {
        let t0 = Instant::now();
        let mut s = state(BatchingConfig::default().with_max_batch_size(2).with_high_priority_share_percent(50));
        for id in 0..4 {
            s.append(Req::new(100 + id), t0).unwrap();
        }
        let mut order = Vec::new();
        for round in 0..6 {
            // Two high-priority requests arrive for every batch.
            s.append(Req::high(2 * round), t0).unwrap();
            s.append(Req::high(2 * round + 1), t0).unwrap();
            order.push(ids(s.next_batch(t0).1));
        }
        let normal_batches = order.iter().filter(|b| b.iter().all(|&id| id >= 100)).count();
        assert_eq!(normal_batches, 2, "half the rows, as far as normal requests wait: {order:?}");
        assert_eq!(order[0], vec![0, 1], "high first while within its share");
        assert_eq!(order[1], vec![100, 101], "then the oldest normal requests");

        // At 100 %, priority is strict: normal requests wait for every high one.
        let mut s = state(BatchingConfig::default().with_max_batch_size(2).with_high_priority_share_percent(100));
        s.append(Req::new(100), t0).unwrap();
        for round in 0..4 {
            s.append(Req::high(2 * round), t0).unwrap();
            s.append(Req::high(2 * round + 1), t0).unwrap();
            assert!(ids(s.next_batch(t0).1).iter().all(|&id| id < 100));
        }
    }

    #[test]
    fn rows_ahead_of_a_request_count_its_priority_and_above() {
        let t0 = Instant::now();
        let mut s = state(BatchingConfig::default());
        s.append(Req::new(0).rows(3), t0).unwrap();
        s.append(Req::high(1).rows(2), t0).unwrap();
        assert_eq!((s.rows_ahead(Priority::High), s.rows_ahead(Priority::Normal)), (2, 5));
    }

    #[test]
    fn the_delay_counts_from_the_oldest_request_of_the_highest_priority() {
        let t0 = Instant::now();
        let mut s = state(BatchingConfig::default().with_max_batch_size(4).with_max_queue_delay_us(1000));
        s.append(Req::new(0), t0).unwrap();
        s.append(Req::high(1), t0 + Duration::from_micros(600)).unwrap();
        match s.next_batch(t0 + Duration::from_micros(1000)).1 {
            Next::WaitUntil(t) => assert_eq!(t, t0 + Duration::from_micros(1600)),
            other => panic!("expected to wait for the high-priority head, got {other:?}"),
        }
        assert_eq!(ids(s.next_batch(t0 + Duration::from_micros(1600)).1), vec![1, 0]);
    }
}
