//! Deadline arithmetic: what a batch costs on a model, and when a request would be
//! answered given the work ahead of it. Pure (time is passed in), so the admission
//! rule is unit-tested at its boundary below.
//!
//! The cost of a batch is the profile's fitted line `a·rows + c`, scaled by how the
//! model's batches measured lately compared with it: the line was fitted on an idle
//! machine, the runs happen beside whatever else the machine does.

use std::time::{Duration, Instant};

use modelless_policy_abi::LatencyFit;

/// Weight of the newest batch in the correction: about the last ten batches count.
const CORRECTION_WEIGHT: f64 = 0.1;
/// Weight of the newest gap between arrivals in the arrival rate.
const ARRIVAL_WEIGHT: f64 = 0.05;
/// Bounds of the correction: one odd batch (a page fault storm, a descheduled
/// thread) moves it at most this far, however long it took.
const CORRECTION_RANGE: (f64, f64) = (0.25, 8.0);
/// The least a batch is taken to cost, whatever the line says at small sizes.
const MIN_BATCH_MS: f64 = 0.02;
/// The most a batch is taken to overrun its prediction by, as a share of it, when a
/// batch is formed: beyond it, one slow batch would answer the requests formed at
/// the edge of their deadlines late.
const MAX_SPREAD: f64 = 0.5;

/// What a batch of a given size costs on one model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BatchCost {
    line: LatencyFit,
    /// Measured over predicted, smoothed over recent batches; 1 until one ran.
    correction: f64,
    /// How far recent batches strayed from the corrected prediction, as a share of
    /// it (smoothed absolute deviation); 0 until one ran.
    spread: f64,
    /// How long a batch waited for its turn to run, smoothed over recent batches, ms:
    /// where sessions take turns, part of what a batch costs its requests. Kept apart
    /// from the run, whose spread it would otherwise swell with other tasks' load.
    turn_wait_ms: f64,
}

impl BatchCost {
    /// The cost `line` predicts; `None` for a line that predicts nothing usable (see
    /// [`LatencyFit::is_trusted`]).
    pub fn new(line: LatencyFit) -> Option<BatchCost> {
        line.is_trusted().then_some(BatchCost { line, correction: 1.0, spread: 0.0, turn_wait_ms: 0.0 })
    }

    /// What a batch of `rows` rows is predicted to take now, from when an instance
    /// takes it to its answers: its wait for a turn, then its run.
    pub fn of(&self, rows: usize) -> Duration {
        self.taking(rows, 1.0)
    }

    /// What a batch of `rows` rows takes when it runs as slowly as recent batches
    /// strayed: what a batch being formed is checked against, so that the requests
    /// it runs are answered in time even when it runs slow.
    pub fn of_slow(&self, rows: usize) -> Duration {
        self.taking(rows, 1.0 + self.spread)
    }

    /// The turn's wait, and the run stretched by `stretch`.
    fn taking(&self, rows: usize, stretch: f64) -> Duration {
        Duration::from_secs_f64((self.turn_wait_ms + self.line_ms(rows) * self.correction * stretch) / 1e3)
    }

    /// Rows a second one instance answers in batches of `rows` as batches are
    /// predicted to take now: its profiled capacity at that batch, corrected by how
    /// its recent batches ran against the line (a machine busy with the load's own
    /// clients, say, runs every batch slower than it was profiled alone).
    pub fn capacity_per_s(&self, rows: usize) -> f64 {
        let rows = rows.max(1);
        rows as f64 / self.of(rows).as_secs_f64().max(1e-9)
    }

    /// Measured over predicted, as it stands.
    pub fn correction(&self) -> f64 {
        self.correction
    }

    /// A batch of `rows` rows waited `waited` for its turn, then ran for `ran` (to its
    /// last answer): the correction and the spread move toward what the run measured,
    /// the turn's wait toward what it waited.
    pub fn observe(&mut self, rows: usize, ran: Duration, waited: Duration) {
        self.turn_wait_ms += CORRECTION_WEIGHT * (waited.as_secs_f64() * 1e3 - self.turn_wait_ms);
        let ratio = (ran.as_secs_f64() * 1e3 / self.line_ms(rows)).clamp(CORRECTION_RANGE.0, CORRECTION_RANGE.1);
        let strayed = ((ratio / self.correction - 1.0).abs()).min(MAX_SPREAD);
        self.spread += CORRECTION_WEIGHT * (strayed - self.spread);
        self.correction += CORRECTION_WEIGHT * (ratio - self.correction);
    }

    fn line_ms(&self, rows: usize) -> f64 {
        self.line.predict_ms(rows.min(u32::MAX as usize) as u32).max(MIN_BATCH_MS)
    }
}

/// How fast requests arrive, smoothed over the last few dozen: what fills a batch
/// while it waits for an instance.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ArrivalRate {
    last: Option<Instant>,
    /// Smoothed gap between arrivals, s.
    gap_s: Option<f64>,
}

impl ArrivalRate {
    /// A request arrived at `now`.
    pub fn arrived(&mut self, now: Instant) {
        if let Some(last) = self.last {
            let gap = now.saturating_duration_since(last).as_secs_f64();
            self.gap_s = Some(self.gap_s.map_or(gap, |g| g + ARRIVAL_WEIGHT * (gap - g)));
        }
        self.last = Some(now);
    }

    /// Requests per second; 0 until two arrived.
    pub fn per_s(&self) -> f64 {
        self.gap_s.map_or(0.0, |g| 1.0 / g.max(1e-6))
    }
}

/// The work between a request and its answer, as admission sees it.
#[derive(Clone, Copy, Debug)]
pub struct Backlog<'a> {
    /// When each instance is predicted to be free (an idle one: any time up to now).
    pub free_at: &'a [Instant],
    /// Rows queued ahead of the request.
    pub rows_ahead: usize,
    /// The largest batch in force: the queue ahead runs in batches of this many rows.
    pub max_batch_size: usize,
    /// How long a batch that is not full may be held for more requests.
    pub max_queue_delay: Duration,
    /// Requests arriving per second: those arriving while a batch waits join it.
    pub arrivals_per_s: f64,
}

/// How much slower a variant runs beside another that keeps the same cores busy:
/// each session's threads take about half of them. On the steep load's flash crowd,
/// MobileNetV2-0.75's batches of 8 took 48–50 ms beside MobileNetV2-1.0's against
/// 24–27 ms once it ran alone, and requests spilled to it on its own line expired.
pub const SHARING_SLOWDOWN: f64 = 2.0;

/// When a request of `rows` rows queued behind `backlog` would be answered, were it
/// admitted at `now`: the batches ahead go to whichever instance is free first, each
/// full, and the request rides in the batch that holds its last row. That batch is
/// priced with the requests that arrive while it waits for an instance (at the
/// arrival rate, up to full); one that can start at once, at its rows, held for the
/// queue delay when not full. Its own batch is priced as slow as recent batches
/// strayed, as the queue checks it when it forms the batch: a request admitted on
/// the mean alone would be dropped there whenever its batch ran slow.
pub fn predicted_answer(cost: &BatchCost, backlog: &Backlog<'_>, rows: usize, now: Instant) -> Instant {
    let max = backlog.max_batch_size.max(1);
    let mut free: Vec<Instant> = backlog.free_at.iter().map(|&t| t.max(now)).collect();
    if free.is_empty() {
        free.push(now);
    }
    let total = backlog.rows_ahead + rows.max(1);
    let batches_before = (total - 1) / max;
    let last_rows = total - batches_before * max;
    let full = cost.of(max);
    for _ in 0..batches_before {
        let first = first_free(&mut free);
        *first += full;
    }
    let start = *first_free(&mut free);
    if start > now {
        let joining = (backlog.arrivals_per_s * (start - now).as_secs_f64()).floor();
        let rows = if joining >= max as f64 { max } else { (last_rows + joining as usize).min(max) };
        return start + cost.of_slow(rows);
    }
    let start = if last_rows < max { start.max(now + backlog.max_queue_delay) } else { start };
    start + cost.of_slow(last_rows)
}

/// The instance free first.
fn first_free(free: &mut [Instant]) -> &mut Instant {
    let index = free.iter().enumerate().min_by_key(|(_, t)| **t).map_or(0, |(i, _)| i);
    &mut free[index]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batching::margin::AdmissionMargin;

    /// Arrivals that fill any batch that waits.
    const BUSY: f64 = 1e9;

    /// 1 ms a row plus 4 ms a batch, uncorrected.
    fn cost() -> BatchCost {
        BatchCost::new(LatencyFit { a_ms: 1.0, c_ms: 4.0, r2: 1.0 }).unwrap()
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// `rows_ahead` rows queued for instances free at `free_at`, in batches of up to 8
    /// that leave at once and fill while they wait.
    fn behind(free_at: &[Instant], rows_ahead: usize) -> Backlog<'_> {
        Backlog { free_at, rows_ahead, max_batch_size: 8, max_queue_delay: Duration::ZERO, arrivals_per_s: BUSY }
    }

    #[test]
    fn the_queue_ahead_runs_in_full_batches_and_the_request_in_the_last() {
        let now = Instant::now();
        let idle = [now];
        let backlog = Backlog {
            free_at: &idle,
            rows_ahead: 17,
            max_batch_size: 8,
            max_queue_delay: Duration::ZERO,
            arrivals_per_s: BUSY,
        };
        // Rows 1..=18: two full batches of 8 (12 ms each), then its own, which waits
        // for them and is priced full: 36.
        assert_eq!(predicted_answer(&cost(), &backlog, 1, now), now + ms(36));
        assert_eq!(predicted_answer(&cost(), &backlog, 7, now), now + ms(36));
        // One more row spills into a fourth batch.
        assert_eq!(predicted_answer(&cost(), &backlog, 8, now), now + ms(48));
        // Without a queue ahead, a batch that starts at once is priced at its rows.
        let backlog = Backlog { rows_ahead: 0, ..backlog };
        assert_eq!(predicted_answer(&cost(), &backlog, 2, now), now + ms(6));
        // One that waits 24 ms at 125 requests/s is joined by 3 (24 ms · 125/s).
        let backlog = Backlog { rows_ahead: 17, arrivals_per_s: 125.0, ..backlog };
        assert_eq!(predicted_answer(&cost(), &backlog, 1, now), now + ms(24 + 4 + 2 + 3));
    }

    #[test]
    fn the_requests_own_batch_is_priced_as_slow_as_recent_batches_strayed() {
        let now = Instant::now();
        let idle = [now];
        let backlog = behind(&idle, 8);
        // Batches alternating 9 and 15 ms against a 12 ms line: the mean stays near
        // 12 ms, the spread grows toward a quarter.
        let mut strayed = cost();
        for ran in [9, 15].repeat(40) {
            strayed.observe(8, ms(ran), Duration::ZERO);
        }
        let (mean, slow) = (strayed.of(8), strayed.of_slow(8));
        assert!(slow > mean.mul_f64(1.2), "{mean:?} {slow:?}");
        // The batch ahead at its mean, its own as slow as the queue will check it.
        assert_eq!(predicted_answer(&strayed, &backlog, 1, now), now + mean + slow);
        // So a deadline the mean alone would make is refused at once rather than
        // expired when the queue forms the batch.
        let margin = AdmissionMargin::default();
        let deadline = now + (mean * 2).mul_f64(1.06);
        assert!(margin.admits(now, predicted_answer(&cost(), &backlog, 1, now), now + ms(24).mul_f64(1.06)).is_ok());
        assert!(margin.admits(now, predicted_answer(&strayed, &backlog, 1, now), deadline).is_err());
    }

    #[test]
    fn batches_ahead_go_to_the_instance_free_first() {
        let now = Instant::now();
        let busy = [now + ms(10), now + ms(3)];
        let backlog = Backlog {
            free_at: &busy,
            rows_ahead: 16,
            max_batch_size: 8,
            max_queue_delay: Duration::ZERO,
            arrivals_per_s: BUSY,
        };
        // Batch 1 on the second instance (3 → 15), batch 2 on the first (10 → 22),
        // ours on the second again (15 → 27): it waits, so it is priced full.
        assert_eq!(predicted_answer(&cost(), &backlog, 1, now), now + ms(15 + 12));
        // An instance that ran past its predicted end is taken to be free now.
        let late = [now - ms(5)];
        let backlog = Backlog { free_at: &late, rows_ahead: 0, ..backlog };
        assert_eq!(predicted_answer(&cost(), &backlog, 1, now), now + ms(5));
    }

    #[test]
    fn a_batch_that_is_not_full_is_held_for_the_queue_delay() {
        let now = Instant::now();
        let idle = [now];
        let backlog =
            Backlog { free_at: &idle, rows_ahead: 0, max_batch_size: 8, max_queue_delay: ms(2), arrivals_per_s: BUSY };
        assert_eq!(predicted_answer(&cost(), &backlog, 1, now), now + ms(2 + 5));
        assert_eq!(predicted_answer(&cost(), &backlog, 8, now), now + ms(12), "a full batch leaves at once");
    }

    #[test]
    fn a_batch_being_formed_is_priced_as_slowly_as_recent_batches_strayed() {
        let mut cost = cost();
        assert_eq!(cost.of_slow(8), cost.of(8), "nothing strayed before a batch ran");
        for _ in 0..200 {
            cost.observe(8, ms(12), Duration::ZERO);
        }
        assert!(cost.of_slow(8) - cost.of(8) < Duration::from_micros(10), "steady batches keep no margin");
        for n in 0..400 {
            cost.observe(8, if n % 2 == 0 { ms(9) } else { ms(15) }, Duration::ZERO);
        }
        // Batches alternate 25 % either side of 12 ms: the margin is about a quarter.
        let margin = (cost.of_slow(8) - cost.of(8)).as_secs_f64() / cost.of(8).as_secs_f64();
        assert!((0.2..0.3).contains(&margin), "{margin}");
        for _ in 0..200 {
            cost.observe(8, ms(1000), Duration::ZERO);
        }
        assert!(cost.of_slow(8) <= cost.of(8).mul_f64(1.0 + MAX_SPREAD), "the margin is bounded");
    }

    #[test]
    fn a_wait_for_the_turn_adds_to_the_cost_but_not_to_its_spread() {
        let mut cost = cost();
        // Runs steady at the line's 12 ms; the turn comes at once or after 20 ms.
        for n in 0..400 {
            cost.observe(8, ms(12), if n % 2 == 0 { Duration::ZERO } else { ms(20) });
        }
        let of = cost.of(8).as_secs_f64() * 1e3;
        assert!((21.0..23.0).contains(&of), "a batch takes 12 ms and waits 10 on average: {of} ms");
        assert!(cost.of_slow(8) - cost.of(8) < Duration::from_micros(10), "the runs did not stray");
        assert!((cost.correction() - 1.0).abs() < 1e-9, "{}", cost.correction());
    }

    #[test]
    fn the_correction_follows_measured_batches_within_bounds() {
        let mut cost = cost();
        assert_eq!(cost.of(8), ms(12));
        for _ in 0..200 {
            cost.observe(8, ms(24), Duration::ZERO);
        }
        assert!((cost.correction() - 2.0).abs() < 1e-3, "{}", cost.correction());
        assert!((cost.of(4).as_secs_f64() - 0.016).abs() < 1e-5, "{:?}", cost.of(4));
        // One pathological batch moves it by a tenth of the bounded ratio.
        let before = cost.correction();
        cost.observe(8, Duration::from_secs(100), Duration::ZERO);
        assert!((cost.correction() - (before + 0.1 * (8.0 - before))).abs() < 1e-9);
    }

    #[test]
    fn the_arrival_rate_follows_the_gaps_between_arrivals() {
        let t0 = Instant::now();
        let mut rate = ArrivalRate::default();
        assert_eq!(rate.per_s(), 0.0);
        for i in 0..200 {
            rate.arrived(t0 + ms(4 * i));
        }
        assert!((rate.per_s() - 250.0).abs() < 1.0, "{}", rate.per_s());
        for i in 0..200 {
            rate.arrived(t0 + ms(800 + 20 * i));
        }
        assert!((rate.per_s() - 50.0).abs() < 1.0, "{}", rate.per_s());
    }

    #[test]
    fn a_line_that_predicts_nothing_gives_no_cost() {
        assert!(BatchCost::new(LatencyFit { a_ms: 0.0, c_ms: 0.0, r2: 1.0 }).is_none());
        assert!(BatchCost::new(LatencyFit { a_ms: -1.0, c_ms: 5.0, r2: 1.0 }).is_none());
        assert!(BatchCost::new(LatencyFit { a_ms: f64::NAN, c_ms: 5.0, r2: 1.0 }).is_none());
        // A noisy fit prices nothing: admission then judges by the queue's room alone.
        assert!(BatchCost::new(LatencyFit { a_ms: 0.138, c_ms: 130.0, r2: 0.038 }).is_none());
        // A negative intercept is fine while a row costs something.
        assert!(BatchCost::new(LatencyFit { a_ms: 2.0, c_ms: -0.5, r2: 1.0 }).is_some());
    }
}
