//! A task's traffic over the last minute, in one-second buckets: arrivals (for demand
//! over 1, 10 and 60 s, and the surges of the last minutes each complete second
//! shows), and since the last tick the answers, their latencies, the SLO violations
//! and the rejections. Pure: time is passed in, in whole seconds since any fixed
//! start.

use std::collections::VecDeque;

use modelless_policy_abi::{Demand, LatencySummary, Refusals, SurgeMemory, arriving_per_s, rise_within};

use crate::error::ErrorKind;
use crate::stats::percentile;

/// Seconds of arrivals kept.
const SECONDS: usize = 60;

/// Latencies kept per tick; beyond it, every other one is dropped (the percentiles
/// of a tick that busy barely move).
const MAX_LATENCIES: usize = 100_000;

/// One task's recent traffic.
#[derive(Clone, Debug, Default)]
pub struct TrafficWindow {
    /// Arrivals per second, newest last; `newest` is the second of the last one.
    arrivals: VecDeque<u64>,
    newest: u64,
    /// The second of the first arrival: until a minute of traffic has been heard,
    /// the 60 s rate counts quiet seconds before it, and every rate looks like a rise.
    first_arrival: Option<u64>,
    surges: SurgeMemory,
    tick: TickCounts,
}

/// What happened since the last tick.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TickCounts {
    /// Latencies of the requests answered, in ms.
    pub latencies_ms: Vec<f64>,
    /// Requests answered late or not at all because their deadline passed.
    pub slo_violations: u64,
    /// Requests refused at admission.
    pub rejections: u64,
    /// Requests never run, by reason.
    pub refusals: Refusals,
}

impl TickCounts {
    /// p50, p95 and p99 (nearest rank) of the latencies, when there were any.
    pub fn latency(&self) -> Option<LatencySummary> {
        if self.latencies_ms.is_empty() {
            return None;
        }
        let mut sorted = self.latencies_ms.clone();
        // Sorted once here; `percentile` finds it sorted the next two times.
        Some(LatencySummary {
            p50: percentile(&mut sorted, 0.5),
            p95: percentile(&mut sorted, 0.95),
            p99: percentile(&mut sorted, 0.99),
        })
    }
}

impl TrafficWindow {
    /// A request arrived in second `now`.
    pub fn arrived(&mut self, now: u64) {
        self.advance(now);
        self.first_arrival.get_or_insert(now);
        if let Some(last) = self.arrivals.back_mut() {
            *last += 1;
        }
    }

    /// A request was answered after `latency_ms`; `late` when past its target.
    pub fn answered(&mut self, latency_ms: f64, late: bool) {
        let latencies = &mut self.tick.latencies_ms;
        if latencies.len() >= MAX_LATENCIES {
            let mut keep = false;
            latencies.retain(|_| {
                keep = !keep;
                keep
            });
        }
        latencies.push(latency_ms);
        self.tick.slo_violations += u64::from(late);
    }

    /// A request failed its deadline without an answer.
    pub fn expired(&mut self) {
        self.tick.slo_violations += 1;
        self.tick.refusals.expired += 1;
    }

    /// A request was refused at admission.
    pub fn rejected(&mut self) {
        self.tick.rejections += 1;
    }

    /// A request was refused at admission with an error of `kind`, counted by reason
    /// where it is one of the snapshot's [`Refusals`].
    pub fn rejected_for(&mut self, kind: ErrorKind) {
        self.rejected();
        match kind {
            ErrorKind::WouldMissDeadline => self.tick.refusals.would_miss_deadline += 1,
            ErrorKind::Overloaded => self.tick.refusals.queue_full += 1,
            _ => {}
        }
    }

    /// Requests turned away since the last tick because their queue could not take
    /// them: refused as full or as it would have answered them late, or expired in it.
    pub fn turned_away(&self) -> u64 {
        let r = &self.tick.refusals;
        r.queue_full + r.would_miss_deadline + r.expired
    }

    /// Arrivals per second over the last 1, 10 and 60 seconds before second `now`
    /// (the second under way is not complete, so it does not count).
    pub fn demand(&mut self, now: u64) -> Demand {
        self.advance(now);
        rates(self.arrivals.iter().rev().skip(1))
    }

    /// What the demand is multiplied by for the surges heard over the last minutes,
    /// at second `now` (see [`SurgeMemory::headroom`]).
    pub fn surge_headroom(&mut self, now: u64, weight: f64) -> f64 {
        self.advance(now);
        self.surges.headroom(now, weight)
    }

    /// Requests a second the arriving rate will have gained `lead_s` ahead of second
    /// `now` (see [`rise_within`]); 0 until a minute of traffic has been heard.
    pub fn rise(&mut self, now: u64, lead_s: f64) -> f64 {
        let demand = self.demand(now);
        self.rise_of(&demand, now, lead_s)
    }

    /// The demand a task's demand ratio holds against its capacity at second `now`:
    /// the rate arriving ([`arriving_per_s`]), with the headroom its recent surges ask
    /// for ([`TrafficWindow::surge_headroom`] at `surge_weight`), plus its rise carried
    /// `lead_s` ahead ([`TrafficWindow::rise`]). The runtime's gauge and the fleet's
    /// simulated replicas both read it here.
    pub fn demand_ahead(&mut self, now: u64, surge_weight: f64, lead_s: f64) -> f64 {
        let demand = self.demand(now);
        arriving_per_s(&demand) * self.surges.headroom(now, surge_weight) + self.rise_of(&demand, now, lead_s)
    }

    fn rise_of(&self, demand: &Demand, now: u64, lead_s: f64) -> f64 {
        match self.first_arrival {
            Some(first) if now > first + SECONDS as u64 => rise_within(demand, lead_s),
            _ => 0.0,
        }
    }

    /// What happened since the last call of this.
    pub fn take_tick(&mut self) -> TickCounts {
        std::mem::take(&mut self.tick)
    }

    /// Moves the newest bucket to second `now`, with empty seconds in between; the
    /// surge memory hears every second that completes on the way.
    fn advance(&mut self, now: u64) {
        if self.arrivals.is_empty() {
            self.arrivals.push_back(0);
            self.newest = now;
        }
        // Beyond a minute and a second of silence, every rate the memory would hear is 0.
        let gap = now.saturating_sub(self.newest).min(SECONDS as u64 + 1);
        for step in 1..=gap {
            self.surges.observe(&rates(self.arrivals.iter().rev()), self.newest + step);
            self.arrivals.push_back(0);
            if self.arrivals.len() > SECONDS + 1 {
                self.arrivals.pop_front();
            }
        }
        self.newest = self.newest.max(now);
    }
}

/// Arrivals per second over the last 1, 10 and 60 of `complete` seconds, newest first.
fn rates<'a>(complete: impl Iterator<Item = &'a u64>) -> Demand {
    let complete: Vec<u64> = complete.take(SECONDS).copied().collect();
    let rate = |seconds: usize| complete.iter().take(seconds).sum::<u64>() as f64 / seconds as f64;
    Demand { per_s_1s: rate(1), per_s_10s: rate(10), per_s_60s: rate(SECONDS) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demand_averages_complete_seconds_over_each_window() {
        let mut window = TrafficWindow::default();
        for second in 0..20u64 {
            // 10 a second for the first 10 seconds, then 30 a second.
            for _ in 0..if second < 10 { 10 } else { 30 } {
                window.arrived(second);
            }
        }
        let demand = window.demand(20);
        assert_eq!(demand.per_s_1s, 30.0);
        assert_eq!(demand.per_s_10s, 30.0);
        assert_eq!(demand.per_s_60s, (10.0 * 10.0 + 10.0 * 30.0) / 60.0);
        // Quiet seconds count as zero, and a minute later nothing is left.
        assert_eq!(window.demand(25).per_s_1s, 0.0);
        assert_eq!(window.demand(25).per_s_10s, 5.0 * 30.0 / 10.0);
        assert_eq!(window.demand(100), Demand::default());
    }

    #[test]
    fn a_second_that_jumps_beyond_the_noise_leaves_headroom_for_ten_minutes() {
        let mut window = TrafficWindow::default();
        for second in 0..=30u64 {
            for _ in 0..if second < 30 { 100 } else { 300 } {
                window.arrived(second);
            }
        }
        assert_eq!(window.surge_headroom(30, 0.5), 1.0, "the jump's second is not complete yet");
        // Second 30 against its 10 s rate: 300 of (9 × 100 + 300) / 10 = 120, 2.5×.
        assert_eq!(window.surge_headroom(31, 0.5), 1.75);
        assert_eq!(window.surge_headroom(31, 0.0), 1.0);
        // What the demand ratio holds: the jump's second (300, beyond the noise of 120)
        // with that headroom.
        assert_eq!(window.demand_ahead(31, 0.5, 20.0), 300.0 * 1.75);
        assert_eq!(window.surge_headroom(200, 0.5), 1.75, "remembered through silence");
        assert_eq!(window.surge_headroom(31 + 601, 0.5), 1.0);
    }

    #[test]
    fn a_rate_rising_over_its_minute_is_carried_ahead_once_a_minute_has_been_heard() {
        let mut window = TrafficWindow::default();
        for second in 0..=100u64 {
            // 100 a second, rising by 10 a second from second 80.
            for _ in 0..100 + 10 * second.saturating_sub(80) {
                window.arrived(second);
            }
        }
        let demand = window.demand(100);
        let expected = (demand.per_s_10s - demand.per_s_60s) * 20.0 / 25.0;
        assert!(expected > 0.0);
        assert_eq!(window.rise(100, 20.0), expected);
        assert_eq!(window.rise(100, 0.0), 0.0);
        assert_eq!(window.demand_ahead(100, 0.0, 20.0), arriving_per_s(&demand) + expected);
        // A task's first minute: its 60 s rate counts the quiet seconds before it.
        let mut young = TrafficWindow::default();
        for second in 0..30u64 {
            for _ in 0..100 {
                young.arrived(second);
            }
        }
        assert!(young.demand(30).per_s_10s > young.demand(30).per_s_60s);
        assert_eq!(young.rise(30, 20.0), 0.0);
    }

    #[test]
    fn requests_turned_away_by_their_queue_count_until_the_tick_takes_them() {
        let mut window = TrafficWindow::default();
        window.rejected_for(ErrorKind::InvalidInput);
        window.answered(10.0, true);
        assert_eq!(window.turned_away(), 0, "a bad request or a late answer is no full queue");
        window.rejected_for(ErrorKind::WouldMissDeadline);
        window.rejected_for(ErrorKind::Overloaded);
        window.expired();
        assert_eq!(window.turned_away(), 3);
        window.take_tick();
        assert_eq!(window.turned_away(), 0);
    }

    #[test]
    fn a_tick_reports_latency_percentiles_violations_and_rejections_once() {
        let mut window = TrafficWindow::default();
        for ms in 1..=100 {
            window.answered(f64::from(ms), ms > 95);
        }
        window.expired();
        window.rejected();
        let tick = window.take_tick();
        assert_eq!(tick.latency(), Some(LatencySummary { p50: 50.0, p95: 95.0, p99: 99.0 }));
        assert_eq!((tick.slo_violations, tick.rejections), (6, 1));
        assert_eq!(window.take_tick(), TickCounts::default());
        assert_eq!(TickCounts::default().latency(), None);
    }

    #[test]
    fn latencies_are_thinned_not_grown_without_bound() {
        let mut window = TrafficWindow::default();
        for i in 0..(3 * MAX_LATENCIES) {
            window.answered(i as f64, false);
        }
        let kept = window.take_tick().latencies_ms.len();
        assert!((MAX_LATENCIES / 2..=MAX_LATENCIES).contains(&kept), "{kept}");
    }
}
