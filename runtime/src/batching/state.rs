//! The batching queue as plain data: what is waiting, and which batch to run next.
//! No threads, no clocks of its own (time is passed in), so every rule is unit-tested
//! below. The queue is kept in the order batches take requests: by priority, then by
//! arrival.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::BatchingConfig;

/// How urgent a request is. Higher priorities are batched first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Priority {
    /// Batched before every normal request.
    High,
    /// The default.
    #[default]
    Normal,
}

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

/// Why a request left the queue without running.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeadReason {
    /// Its deadline passed.
    Expired,
    /// Its caller went away.
    Abandoned,
}

/// A request that left the queue without running.
#[derive(Debug)]
pub struct Dead<T> {
    /// The request.
    pub item: T,
    /// Why.
    pub reason: DeadReason,
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
}

impl<T: Queued> State<T> {
    /// An empty queue with the given knobs.
    pub fn new(config: BatchingConfig) -> Self {
        State { queue: VecDeque::new(), config }
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

    /// Removes requests whose deadline passed or whose caller went away.
    pub fn expire(&mut self, now: Instant) -> Vec<Dead<T>> {
        let dead_reason = |item: &T| {
            if item.is_abandoned() {
                Some(DeadReason::Abandoned)
            } else if item.deadline().is_some_and(|d| d <= now) {
                Some(DeadReason::Expired)
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

    /// The earliest deadline among waiting requests.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.queue.iter().filter_map(|s| s.item.deadline()).min()
    }

    /// Expires what is dead, then decides what to run, oldest first.
    ///
    /// A batch leaves at once when it is full (`max_batch_size` rows, or the next request
    /// cannot join it), when it reaches the largest preferred size, or when there is no
    /// queue delay; otherwise when the oldest request has waited `max_queue_delay_us`.
    /// A batch that leaves before it is full is cut to the largest preferred size it
    /// can form, and the rest waits for the next instance.
    pub fn next_batch(&mut self, now: Instant) -> (Vec<Dead<T>>, Next<T>) {
        let dead = self.expire(now);
        let Some(head) = self.queue.front() else {
            return (dead, Next::Idle);
        };
        let max = self.config.max_batch_size.max(1);
        let mut prefix_rows = self.joinable(&head.item, 0);
        let rows = prefix_rows.last().copied().unwrap_or(0);
        if prefix_rows.is_empty() {
            // Admission refuses oversized requests; should one slip through, run it alone.
            prefix_rows.push(head.item.rows());
        }
        let cannot_grow = rows >= max || prefix_rows.len() < self.queue.len();
        let reached_preferred = self.config.largest_preferred().is_some_and(|p| rows >= p);
        let delay = Duration::from_micros(self.config.max_queue_delay_us);
        let waited_enough = now.duration_since(head.enqueued) >= delay;
        if !(cannot_grow || reached_preferred || waited_enough) {
            return (dead, Next::WaitUntil(head.enqueued + delay));
        }
        let take = self.cut(&prefix_rows);
        let batch = self.queue.drain(..take).map(|s| s.item).collect();
        (dead, Next::Batch(batch))
    }

    /// For a batch of `rows` rows led by `head` that waited for its turn to run: the
    /// requests at the front of the queue that can join it within `max_batch_size`
    /// (and, where preferred sizes are set, up to one of them), so that what arrived
    /// during the wait runs with it rather than after it. Expires what is dead first.
    pub fn top_up(&mut self, head: &T, rows: usize, now: Instant) -> (Vec<Dead<T>>, Vec<T>) {
        let dead = self.expire(now);
        let prefix_rows = self.joinable(head, rows);
        let take = if self.config.preferred_batch_sizes.is_empty() {
            prefix_rows.len()
        } else {
            prefix_rows.iter().rposition(|r| self.config.preferred_batch_sizes.contains(r)).map_or(0, |i| i + 1)
        };
        (dead, self.queue.drain(..take).map(|s| s.item).collect())
    }

    /// Row totals, from `rows` on, of the longest prefix of the queue that can run in
    /// one batch led by `head` within `max_batch_size`.
    fn joinable(&self, head: &T, rows: usize) -> Vec<usize> {
        let max = self.config.max_batch_size.max(1);
        let mut totals = Vec::new();
        let mut total = rows;
        for slot in &self.queue {
            if !slot.item.can_batch_with(head) || total + slot.item.rows() > max {
                break;
            }
            total += slot.item.rows();
            totals.push(total);
        }
        totals
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
        let (_, joined) = s.top_up(&head, 2, t0);
        let joined: Vec<u32> = joined.into_iter().map(|r| r.id).collect();
        assert_eq!(joined, vec![1, 2, 3], "2 + 3 + 2 + 1 rows fill 8; the last waits");
        assert_eq!(s.len(), 1);

        // A request that cannot run with the batch stops the top-up: nothing overtakes it.
        let mut s = state(BatchingConfig::default().with_max_batch_size(8));
        s.append(Req { width: 8, ..Req::new(1) }, t0).unwrap();
        s.append(Req::new(2), t0).unwrap();
        assert!(s.top_up(&head, 2, t0).1.is_empty());

        // With preferred sizes, up to the largest one it can reach.
        let mut s = state(BatchingConfig::default().with_max_batch_size(8).with_preferred_batch_sizes([4, 8]));
        for id in 1..=3 {
            s.append(Req::new(id), t0).unwrap();
        }
        let (_, joined) = s.top_up(&head, 2, t0);
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
        assert_eq!((dead[0].item.id, dead[0].reason), (0, DeadReason::Expired));
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
        assert_eq!(dead.iter().map(|d| d.reason).collect::<Vec<_>>(), vec![DeadReason::Abandoned]);
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
