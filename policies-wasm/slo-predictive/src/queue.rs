//! What a variant's p99 would be under the arrivals as they come: a small simulation
//! of the runtime's dynamic batcher. Requests arrive as a Poisson process whose rate
//! follows the spread of per-second demand measured lately; one batch runs at a time,
//! taking up to `max_batch` of the queue (or, with a queue delay, waiting that long for
//! it to fill) and `a·b + c` ms. A closed formula of queueing delay has to be fitted to
//! one family's ratio of fixed to per-row cost; the simulation needs no constant.
//!
//! The arrivals come from a fixed seed, so the prediction is a smooth, deterministic
//! function of the demand: two ticks that see the same demand decide the same way, and
//! every variant is judged on the same arrivals.

use modelless_policy_abi::LatencyFit;

/// Arrivals simulated: the 99th percentile of fewer is noise, more costs time in the
/// tick's budget (a prediction takes about 0.2 ms natively).
const ARRIVALS: usize = 3_000;
/// Longest stretch of time simulated, s: at a low rate, fewer arrivals do.
const MOST_SECONDS: f64 = 600.0;
/// A latency this many times the target means the queue does not keep up.
const RUNAWAY: f64 = 20.0;

/// The arrivals a prediction is made for.
#[derive(Clone, Debug, PartialEq)]
pub struct Arrivals<'a> {
    /// Mean requests per second.
    pub per_s: f64,
    /// Each second's rate relative to the mean (mean 1), replayed in turn; empty for a
    /// steady rate.
    pub spread: &'a [f64],
}

/// How the variant batches.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Batcher {
    /// Its latency line.
    pub fit: LatencyFit,
    /// Largest batch.
    pub max_batch: u32,
    /// How long the head of the queue waits for a batch to fill, ms.
    pub max_delay_ms: f64,
}

/// The 99th percentile of the simulated latencies, ms; `None` when the queue does not
/// keep up (a latency beyond `RUNAWAY` times `target_ms`).
pub fn p99_ms(arrivals: &Arrivals, batcher: Batcher, target_ms: f64) -> Option<f64> {
    percentile_ms(arrivals, batcher, target_ms, 0.99)
}

/// The `q` quantile (0–1) of the simulated latencies, ms, as [`p99_ms`].
pub fn percentile_ms(arrivals: &Arrivals, batcher: Batcher, target_ms: f64, q: f64) -> Option<f64> {
    if arrivals.per_s <= 0.0 {
        return Some(batcher.fit.predict_ms(1).max(0.0));
    }
    let count = ARRIVALS.min((arrivals.per_s * MOST_SECONDS) as usize).max(100);
    let times = arrival_times(arrivals, count);
    let batch_ms = |rows: usize| (batcher.fit.a_ms * rows as f64 + batcher.fit.c_ms.max(0.0)).max(0.01);
    let max_batch = batcher.max_batch.max(1) as usize;
    let mut latencies = Vec::with_capacity(count);
    let (mut next, mut free_at) = (0usize, 0.0f64);
    while next < count {
        // The executor takes the queue when it is free and a request is there; with a
        // queue delay, the batch leaves once full or once its head has waited.
        let head = times[next];
        let start = free_at.max(head);
        let queued = times[next..].iter().take(max_batch).take_while(|&&t| t <= start).count();
        let (start, rows) = if queued < max_batch && batcher.max_delay_ms > 0.0 {
            let leave = start
                .max((head + batcher.max_delay_ms).min(times.get(next + max_batch - 1).copied().unwrap_or(f64::MAX)));
            (leave, times[next..].iter().take(max_batch).take_while(|&&t| t <= leave).count())
        } else {
            (start, queued.max(1))
        };
        let done = start + batch_ms(rows);
        for &arrived in &times[next..next + rows] {
            let latency = done - arrived;
            if latency > RUNAWAY * target_ms {
                return None;
            }
            latencies.push(latency);
        }
        next += rows;
        free_at = done;
    }
    let rank = ((latencies.len() as f64 * q.clamp(0.0, 1.0)).ceil() as usize).clamp(1, latencies.len()) - 1;
    latencies.select_nth_unstable_by(rank, f64::total_cmp);
    latencies.get(rank).copied()
}

/// `count` arrival times (ms, ascending): exponential gaps at the rate of the second
/// they fall in.
fn arrival_times(arrivals: &Arrivals, count: usize) -> Vec<f64> {
    let mut random = SplitMix(0x6d6f_6465_6c6c_6573);
    let mut times = Vec::with_capacity(count);
    let mut now = 0.0f64;
    while times.len() < count {
        let second = (now / 1e3) as usize;
        let factor = if arrivals.spread.is_empty() { 1.0 } else { arrivals.spread[second % arrivals.spread.len()] };
        let per_ms = arrivals.per_s * factor.max(0.0) / 1e3;
        if per_ms <= 0.0 {
            now = (second + 1) as f64 * 1e3;
            continue;
        }
        let gap = -random.unit().ln() / per_ms;
        // A gap that crosses into the next second is drawn again at that second's rate
        // (memoryless: the same process).
        let boundary = (second + 1) as f64 * 1e3;
        if !arrivals.spread.is_empty() && now + gap > boundary {
            now = boundary;
            continue;
        }
        now += gap;
        times.push(now);
    }
    times
}

/// A small deterministic generator (SplitMix64): no dependency, the same numbers on
/// every host.
struct SplitMix(u64);

impl SplitMix {
    /// Uniform in (0, 1].
    fn unit(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        ((z >> 11) as f64 + 1.0) / (1u64 << 53) as f64
    }
}

/// Seconds on either side of a second that its local level is the mean of.
const LEVEL_HALF_WIDTH: usize = 1;

/// Each second's rate relative to its local level (the mean of the seconds around it),
/// from `counts` (arrivals of recent seconds), with the spread that Poisson noise alone
/// explains taken out: a steady rate gives an empty spread (every second alike), a
/// bursty one keeps its bursts. A level that moves (a crowd that rises or ebbs over
/// seconds) is no burst: the rates ahead follow it.
pub fn spread(counts: &[f64]) -> Vec<f64> {
    if counts.len() < 5 {
        return Vec::new();
    }
    let level = |i: usize| {
        let (from, to) = (i.saturating_sub(LEVEL_HALF_WIDTH), (i + LEVEL_HALF_WIDTH + 1).min(counts.len()));
        counts[from..to].iter().sum::<f64>() / (to - from) as f64
    };
    // (the second's count over its level, the variance Poisson gives that ratio)
    let ratios: Vec<(f64, f64)> = (0..counts.len())
        .filter_map(|i| {
            let m = level(i);
            (m > 0.0).then(|| (counts[i] / m, 1.0 / m))
        })
        .collect();
    if ratios.len() < 5 {
        return Vec::new();
    }
    let n = ratios.len() as f64;
    let variance = ratios.iter().map(|(r, _)| (r - 1.0).powi(2)).sum::<f64>() / n;
    let poisson = ratios.iter().map(|(_, v)| v).sum::<f64>() / n;
    // Counts of a steady Poisson process vary by their mean; their sample variance
    // over `n` seconds by about √(2/(n−1)) of that. Only a variance two of those
    // above is the rate's own, and each ratio is shrunk towards 1 by the share of its
    // deviation that is.
    let noise = 1.0 + 2.0 * (2.0 / (n - 1.0)).sqrt();
    if poisson <= 0.0 || variance <= noise * poisson {
        return Vec::new();
    }
    let shrink = ((variance - poisson) / variance).sqrt();
    ratios.iter().map(|(r, _)| (1.0 + shrink * (r - 1.0)).max(0.0)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIT: LatencyFit = LatencyFit { a_ms: 10.0, c_ms: 2.0, r2: 1.0 };

    fn steady(per_s: f64) -> Arrivals<'static> {
        Arrivals { per_s, spread: &[] }
    }

    fn batcher(max_batch: u32) -> Batcher {
        Batcher { fit: FIT, max_batch, max_delay_ms: 0.0 }
    }

    #[test]
    fn a_light_load_is_answered_in_about_one_batch_and_a_heavier_one_waits() {
        // 1/s: hardly ever a request behind another: one row, 12 ms.
        let light = p99_ms(&steady(1.0), batcher(8), 100.0).unwrap();
        assert!((12.0..=24.0).contains(&light), "{light}");
        // 60/s takes 60 % of the executor at one row a batch: waits grow.
        let heavy = p99_ms(&steady(60.0), batcher(8), 100.0).unwrap();
        assert!(heavy > 2.0 * light, "{heavy} against {light}");
        // More than it can answer even in batches of 8 (10.25 ms a row): it runs away.
        assert_eq!(p99_ms(&steady(120.0), batcher(8), 100.0), None);
    }

    #[test]
    fn batching_absorbs_what_one_row_a_batch_cannot() {
        // 90/s at 12 ms a row is over capacity; in batches of up to 8 it is 0.92.
        assert_eq!(p99_ms(&steady(90.0), batcher(1), 100.0), None);
        assert!(p99_ms(&steady(90.0), batcher(8), 1_000.0).is_some());
    }

    #[test]
    fn the_same_demand_gives_the_same_prediction_and_more_demand_never_less() {
        let at = |per_s| p99_ms(&steady(per_s), batcher(8), 100.0).unwrap();
        assert_eq!(at(30.0), at(30.0));
        let rising: Vec<f64> = [10.0, 20.0, 30.0, 40.0, 50.0].iter().map(|&r| at(r)).collect();
        assert!(rising.windows(2).all(|w| w[0] <= w[1]), "{rising:?}");
    }

    #[test]
    fn bursts_in_the_spread_raise_the_p99_and_poisson_noise_alone_is_no_burst() {
        // Seconds alternating 20 % and 180 % of the mean: the busy ones queue.
        let bursty = [0.2, 1.8];
        let steady_p99 = p99_ms(&steady(40.0), batcher(8), 100.0).unwrap();
        let bursty_p99 = p99_ms(&Arrivals { per_s: 40.0, spread: &bursty }, batcher(8), 100.0).unwrap();
        assert!(bursty_p99 > steady_p99, "{bursty_p99} against {steady_p99}");
        // Counts of a Poisson process at 20/s vary by √20 ≈ 4.5: no excess.
        assert!(spread(&[16.0, 24.0, 19.0, 21.0, 25.0, 15.0, 20.0]).is_empty());
        // Counts of 5 and 35 vary far beyond it: the spread keeps most of it.
        let kept = spread(&[5.0, 35.0, 5.0, 35.0, 5.0, 35.0]);
        assert_eq!(kept.len(), 6);
        assert!(kept[2] < 0.5 && kept[3] > 1.5, "{kept:?}");
        assert!(spread(&[1.0, 2.0]).is_empty(), "too few seconds to tell");
        // A level that ebbs smoothly, second by second, is no burst.
        let ebbing: Vec<f64> = (0..20).map(|s| 80.0 - 3.0 * s as f64).collect();
        assert!(spread(&ebbing).is_empty(), "{:?}", spread(&ebbing));
    }

    #[test]
    fn a_queue_delay_holds_a_lone_request_until_it_passes() {
        let held = Batcher { max_delay_ms: 20.0, ..batcher(8) };
        let p99 = p99_ms(&steady(1.0), held, 100.0).unwrap();
        assert!((32.0..=44.0).contains(&p99), "waits 20 ms, runs 12: {p99}");
    }
}
