//! A task's demand rising within the last seconds. The trend between the 10 s and
//! 60 s rates needs a minute of history and moves slowly; a warm-up ramp doubles the
//! demand within seconds, from the start. This compares the arrivals of the last
//! five seconds with those of the five before, less what Poisson noise explains,
//! while the demand still rises: a step (a flash crowd) that stopped rising leaves
//! the windows apart for five more seconds, but its last second no higher than the
//! last window's mean. In a task's first ten seconds the windows are half of what
//! it has seen (two seconds each at least): a ramp in the first seconds of traffic is
//! the one a task meets unprepared.

use crate::history::History;

/// Length of each of the two windows compared, ms, once the history holds both.
const WINDOW_MS: u64 = 5_000;
/// The shortest windows compared, ms, while the history is shorter.
const MIN_WINDOW_MS: u64 = 2_000;
/// Standard deviations of a second's arrivals by which the last second must exceed
/// the last window's mean for the demand to count as still rising.
const STILL_RISING_SIGMAS: f64 = 1.0;

/// How fast the rate rose over the two windows before the last tick, requests/s
/// per s, less two standard deviations of the counts' difference; 0 when it did
/// not rise, has stopped rising, or the history is shorter than two of the shortest
/// windows.
pub fn rising_per_s2(history: &History) -> f64 {
    let (Some(&(first_ms, _)), Some(&(last_ms, last))) = (history.first(), history.last()) else { return 0.0 };
    // Whole seconds, so that the windows' counts are the seconds' own.
    let window_ms = (((last_ms - first_ms) / 2).min(WINDOW_MS) / 1_000) * 1_000;
    if window_ms < MIN_WINDOW_MS {
        return 0.0;
    }
    let (Some(middle_ms), Some(start_ms)) = (last_ms.checked_sub(window_ms), last_ms.checked_sub(2 * window_ms)) else {
        return 0.0;
    };
    let (Some(middle), Some(start)) = (history.total_at(middle_ms), history.total_at(start_ms)) else { return 0.0 };
    let (recent, before) = (last as f64 - middle, middle - start);
    let Some(second_ago) = history.total_at(last_ms.saturating_sub(1_000)) else { return 0.0 };
    let last_second = last as f64 - second_ago;
    let recent_mean = recent * 1e3 / window_ms as f64;
    if last_second - recent_mean <= STILL_RISING_SIGMAS * last_second.sqrt() {
        return 0.0;
    }
    let rise = recent - before - 2.0 * f64::sqrt(recent + before);
    let seconds = window_ms as f64 / 1e3;
    rise.max(0.0) / (seconds * seconds)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ticks(rate_at: impl Fn(u64) -> u64, until_s: u64) -> History {
        let mut history = History::default();
        history.record(0, 0);
        for s in 1..=until_s {
            history.record(s * 1000, rate_at(s));
        }
        history
    }

    #[test]
    fn a_ramp_is_seen_within_seconds_and_a_steady_or_short_history_is_not() {
        // 10 more requests each second than the second before.
        let slope = rising_per_s2(&ticks(|s| 10 * s, 14));
        // Last 5 s: 100..140 → 600; the 5 before: 50..90 → 350; (250 − 2·√950) / 25.
        assert!((slope - (250.0 - 2.0 * 950f64.sqrt()) / 25.0).abs() < 1e-9, "{slope}");
        assert_eq!(rising_per_s2(&ticks(|_| 50, 14)), 0.0, "steady");
        assert_eq!(rising_per_s2(&ticks(|s| 10 * s, 3)), 0.0, "less than two of the shortest windows seen");
        assert_eq!(rising_per_s2(&ticks(|s| 200 - 10 * s, 14)), 0.0, "falling");
    }

    #[test]
    fn a_step_counts_while_it_rises_and_not_once_it_levels_off() {
        // 50 a second, then 150 from second 10 on.
        let step = |s: u64| if s < 10 { 50 } else { 150 };
        // Second 12: the last 5 s (8..12) hold 50, 50, 150, 150, 150; the 5 before, 250.
        let rising = rising_per_s2(&ticks(step, 12));
        assert!((rising - (300.0 - 2.0 * 800f64.sqrt()) / 25.0).abs() < 1e-9, "{rising}");
        // Second 16: the windows are still apart (750 against 450), but the last
        // second is the last window's mean.
        assert_eq!(rising_per_s2(&ticks(step, 16)), 0.0);
    }

    #[test]
    fn a_ramp_in_the_first_seconds_is_seen_on_windows_of_half_the_history() {
        // 30 a second for five seconds, then 60, 90, 120: a burst's onset.
        let onset = |s: u64| if s <= 5 { 30 } else { 30 * (s - 4) };
        // Second 8: windows of 4 s (5..8: 30, 60, 90, 120; 1..4: 30 each).
        let slope = rising_per_s2(&ticks(onset, 8));
        let (recent, before) = (300.0, 120.0);
        assert!((slope - (recent - before - 2.0 * f64::sqrt(recent + before)) / 16.0).abs() < 1e-9, "{slope}");
        assert!(slope > 5.0, "{slope}");
    }
}
