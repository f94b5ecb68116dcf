//! The watch after a policy goes live: what each tick served is kept for a while
//! ([`History`]), and for a window after a reload the new policy's share of requests
//! answered within their SLO and its effective accuracy are compared with the
//! previous policy's at a similar load ([`judge`]). A regression beyond the
//! tolerance puts the previous module back (the control loop does that). Pure: time
//! comes from the caller, so the judgement is replayable.

use std::collections::VecDeque;
use std::time::Duration;

use modelless_policy_abi::Snapshot;

/// How a new policy is watched.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WatchConfig {
    /// How long after going live a policy is judged.
    pub window: Duration,
    /// How many points (0 to 1) of the share answered within the SLO it may lose.
    pub share_tolerance: f64,
    /// How many points of effective accuracy it may lose.
    pub accuracy_tolerance: f64,
    /// How far (a fraction) the previous policy's demand in a tick may be from the
    /// new one's mean for the tick to be compared.
    pub load_band: f64,
    /// How long ticks are kept.
    pub history: Duration,
}

impl Default for WatchConfig {
    fn default() -> Self {
        WatchConfig {
            window: Duration::from_secs(60),
            share_tolerance: 0.01,
            accuracy_tolerance: 2.0,
            load_band: 0.25,
            history: Duration::from_secs(600),
        }
    }
}

/// What one tick's snapshot says was served, over all tasks.
#[derive(Clone, Debug, PartialEq)]
pub struct TickServed {
    /// When (the loop's clock).
    pub at: Duration,
    /// The digest of the policy that decided.
    pub digest: String,
    /// Requests per second arriving in the last second.
    pub demand: f64,
    /// Requests answered within their SLO.
    pub within: u64,
    /// Requests answered late, expired or refused.
    pub missed: u64,
    /// The accuracy of the variant serving, times the requests it answered.
    pub accuracy_sum: f64,
    /// Requests answered.
    pub answered: u64,
}

impl TickServed {
    /// What `snapshot`, decided on by the policy of `digest`, says was served.
    pub fn of(at: Duration, digest: &str, snapshot: &Snapshot) -> TickServed {
        let mut tick = TickServed {
            at,
            digest: digest.to_string(),
            demand: 0.0,
            within: 0,
            missed: 0,
            accuracy_sum: 0.0,
            answered: 0,
        };
        for task in &snapshot.tasks {
            let expired = task.refusals.expired;
            let late = task.slo_violations.saturating_sub(expired);
            tick.demand += task.demand.per_s_1s;
            tick.within += task.completed.saturating_sub(late);
            tick.missed += task.slo_violations + task.rejections;
            tick.answered += task.completed;
            let accuracy = task.variants.iter().find(|v| v.name == task.active.variant).map_or(0.0, |v| v.accuracy);
            tick.accuracy_sum += accuracy * task.completed as f64;
        }
        tick
    }
}

/// Ticks of the last [`WatchConfig::history`].
#[derive(Clone, Debug, Default)]
pub struct History {
    ticks: VecDeque<TickServed>,
}

impl History {
    /// Keeps `tick`, and forgets ticks older than `keep` before it.
    pub fn push(&mut self, tick: TickServed, keep: Duration) {
        let oldest = tick.at.saturating_sub(keep);
        self.ticks.push_back(tick);
        while self.ticks.front().is_some_and(|t| t.at < oldest) {
            self.ticks.pop_front();
        }
    }

    /// The ticks kept, oldest first.
    pub fn ticks(&self) -> impl Iterator<Item = &TickServed> {
        self.ticks.iter()
    }
}

/// What a set of ticks served.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Served {
    /// Ticks counted.
    pub ticks: usize,
    /// Their mean demand, requests per second.
    pub demand: f64,
    /// The share of requests answered within their SLO, 0 to 1.
    pub share_within_slo: f64,
    /// Requests answered late, expired or refused.
    pub missed: u64,
    /// The mean accuracy of the answers.
    pub effective_accuracy: f64,
}

impl Served {
    fn of<'a>(ticks: impl Iterator<Item = &'a TickServed>) -> Served {
        let (mut served, mut within, mut accuracy_sum, mut answered, mut demand) = (Served::default(), 0, 0.0, 0, 0.0);
        for tick in ticks {
            served.ticks += 1;
            served.missed += tick.missed;
            within += tick.within;
            accuracy_sum += tick.accuracy_sum;
            answered += tick.answered;
            demand += tick.demand;
        }
        let offered = within + served.missed;
        served.share_within_slo = if offered == 0 { 1.0 } else { within as f64 / offered as f64 };
        served.effective_accuracy = if answered == 0 { 0.0 } else { accuracy_sum / answered as f64 };
        served.demand = if served.ticks == 0 { 0.0 } else { demand / served.ticks as f64 };
        served
    }
}

/// The comparison a watch made.
#[derive(Clone, Debug, PartialEq)]
pub struct Judgement {
    /// What the new policy served since it went live.
    pub live: Served,
    /// What the previous policy served at a similar load (or at any load, when no
    /// tick of it was similar: `similar_load` false).
    pub before: Served,
    /// Whether `before` holds only ticks at a load within the band of the live one's.
    pub similar_load: bool,
    /// Why the new policy regressed, if it did.
    pub regression: Option<String>,
}

/// Where a watch stands.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// The window is not over.
    Watching,
    /// Nothing to compare it with: the previous policy served nothing kept.
    Unjudged,
    /// Judged: kept, or to be rolled back when `regression` says why.
    Judged(Judgement),
}

/// How the watch of the last policy that went live ended, or that it goes on.
#[derive(Clone, Debug, PartialEq)]
pub enum WatchOutcome {
    /// Within its window.
    Watching,
    /// Judged and kept.
    Kept,
    /// Kept: the previous policy served nothing to compare with.
    Unjudged,
    /// Judged worse, and the previous module put back.
    RolledBack,
    /// Judged worse, but the previous module could not be put back (why).
    RollbackFailed(String),
}

/// The watch of the last policy that went live.
#[derive(Clone, Debug, PartialEq)]
pub struct WatchStatus {
    /// The digest of the policy watched.
    pub live: String,
    /// The digest of the one it replaced.
    pub previous: String,
    /// When it went live, on the loop's clock.
    pub since: Duration,
    /// Where the watch stands.
    pub outcome: WatchOutcome,
    /// The comparison, once made.
    pub judgement: Option<Judgement>,
}

impl WatchStatus {
    /// As JSON: what `GET /v2/policy` shows of the watch.
    pub fn to_json(&self) -> serde_json::Value {
        let served = |s: &Served| {
            serde_json::json!({
                "ticks": s.ticks,
                "demand_per_s": s.demand,
                "share_within_slo": s.share_within_slo,
                "missed": s.missed,
                "effective_accuracy": s.effective_accuracy,
            })
        };
        let (outcome, failure) = match &self.outcome {
            WatchOutcome::Watching => ("watching", None),
            WatchOutcome::Kept => ("kept", None),
            WatchOutcome::Unjudged => ("kept unjudged", None),
            WatchOutcome::RolledBack => ("rolled back", None),
            WatchOutcome::RollbackFailed(why) => ("rollback failed", Some(why.as_str())),
        };
        serde_json::json!({
            "live": self.live,
            "previous": self.previous,
            "outcome": outcome,
            "rollback_failure": failure,
            "live_served": self.judgement.as_ref().map(|j| served(&j.live)),
            "previous_served": self.judgement.as_ref().map(|j| served(&j.before)),
            "similar_load": self.judgement.as_ref().map(|j| j.similar_load),
            "regression": self.judgement.as_ref().and_then(|j| j.regression.clone()),
        })
    }
}

/// Judges the policy of `live` that went live at `since`, at `now`, on `history`.
pub fn judge(history: &History, live: &str, since: Duration, now: Duration, config: &WatchConfig) -> Verdict {
    if now.saturating_sub(since) < config.window {
        return Verdict::Watching;
    }
    let busy = |t: &&TickServed| t.within + t.missed > 0;
    let after = Served::of(history.ticks().filter(|t| t.at >= since && t.digest == live).filter(busy));
    let previous: Vec<&TickServed> =
        history.ticks().filter(|t| t.at < since && t.digest != live).filter(busy).collect();
    if previous.is_empty() || after.ticks == 0 {
        return Verdict::Unjudged;
    }
    let band = config.load_band * after.demand;
    let similar: Vec<&TickServed> =
        previous.iter().copied().filter(|t| (t.demand - after.demand).abs() <= band.max(1.0)).collect();
    let similar_load = !similar.is_empty();
    let before = Served::of(if similar_load { similar.into_iter() } else { previous.into_iter() });
    let share_lost = before.share_within_slo - after.share_within_slo;
    let accuracy_lost = before.effective_accuracy - after.effective_accuracy;
    let regression = if share_lost > config.share_tolerance {
        Some(format!(
            "{:.2} % answered within the SLO against the previous policy's {:.2} % at {:.1} requests/s ({} missed in {} \
             ticks)",
            100.0 * after.share_within_slo,
            100.0 * before.share_within_slo,
            before.demand,
            after.missed,
            after.ticks
        ))
    } else if accuracy_lost > config.accuracy_tolerance {
        Some(format!(
            "effective accuracy {:.2} against the previous policy's {:.2} at {:.1} requests/s",
            after.effective_accuracy, before.effective_accuracy, before.demand
        ))
    } else {
        None
    };
    Verdict::Judged(Judgement { live: after, before, similar_load, regression })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tick(second: u64, digest: &str, demand: f64, within: u64, missed: u64, accuracy: f64) -> TickServed {
        TickServed {
            at: Duration::from_secs(second),
            digest: digest.into(),
            demand,
            within,
            missed,
            accuracy_sum: accuracy * within as f64,
            answered: within,
        }
    }

    fn history(ticks: impl IntoIterator<Item = TickServed>) -> History {
        let mut history = History::default();
        ticks.into_iter().for_each(|t| history.push(t, Duration::from_secs(600)));
        history
    }

    const CONFIG: WatchConfig = WatchConfig {
        window: Duration::from_secs(10),
        share_tolerance: 0.01,
        accuracy_tolerance: 2.0,
        load_band: 0.25,
        history: Duration::from_secs(600),
    };

    #[test]
    fn a_policy_that_misses_more_at_the_same_load_is_rolled_back_and_one_that_holds_is_kept() {
        // Before: 100 requests/s, all in time; and a quieter stretch at 20/s.
        let before = (0..20)
            .map(|s| tick(s, "old", 100.0, 100, 0, 70.0))
            .chain((20..30).map(|s| tick(s, "old", 20.0, 20, 0, 75.0)));
        let worse = history(before.clone().chain((30..41).map(|s| tick(s, "new", 100.0, 90, 10, 75.0))));
        let Verdict::Judged(judged) = judge(&worse, "new", Duration::from_secs(30), Duration::from_secs(40), &CONFIG)
        else {
            panic!("not judged")
        };
        assert!(judged.similar_load && judged.before.ticks == 20, "compared with the ticks at 100/s: {judged:?}");
        let why = judged.regression.expect("a regression");
        assert!(why.contains("90.00 %") && why.contains("100.00 %"), "{why}");

        let holding = history(before.chain((30..41).map(|s| tick(s, "new", 100.0, 100, 0, 71.0))));
        let Verdict::Judged(judged) = judge(&holding, "new", Duration::from_secs(30), Duration::from_secs(40), &CONFIG)
        else {
            panic!("not judged")
        };
        assert_eq!(judged.regression, None, "{judged:?}");
        assert!((judged.live.effective_accuracy - 71.0).abs() < 1e-9);
    }

    #[test]
    fn the_window_runs_out_first_and_without_a_previous_policy_nothing_is_judged() {
        let ticks = history(
            (0..5).map(|s| tick(s, "old", 10.0, 10, 0, 70.0)).chain((5..9).map(|s| tick(s, "new", 10.0, 0, 10, 70.0))),
        );
        assert_eq!(judge(&ticks, "new", Duration::from_secs(5), Duration::from_secs(9), &CONFIG), Verdict::Watching);
        let alone = history((0..20).map(|s| tick(s, "new", 10.0, 0, 10, 70.0)));
        assert_eq!(judge(&alone, "new", Duration::ZERO, Duration::from_secs(20), &CONFIG), Verdict::Unjudged);
    }

    #[test]
    fn a_drop_in_accuracy_beyond_its_tolerance_is_a_regression_and_old_ticks_are_forgotten() {
        let ticks = history(
            (0..10)
                .map(|s| tick(s, "old", 50.0, 50, 0, 77.0))
                .chain((10..21).map(|s| tick(s, "new", 50.0, 50, 0, 70.0))),
        );
        let Verdict::Judged(judged) = judge(&ticks, "new", Duration::from_secs(10), Duration::from_secs(20), &CONFIG)
        else {
            panic!("not judged")
        };
        assert!(judged.regression.is_some_and(|why| why.contains("effective accuracy 70.00")));

        let mut kept = History::default();
        for s in 0..100 {
            kept.push(tick(s, "old", 1.0, 1, 0, 70.0), Duration::from_secs(30));
        }
        assert_eq!(kept.ticks().next().map(|t| t.at), Some(Duration::from_secs(69)));
    }
}
