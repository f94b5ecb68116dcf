//! How fast this machine runs its variants now, against their profiles: the time the
//! sessions took for the batches they ran since the last tick, over what the profiled
//! lines say those batches take, over every variant that ran. Profiles are measured one
//! variant at a time on an idle machine; serving, instances share cores (on a small VM,
//! hyperthreads of one core) and tasks crowd each other, and a batch takes longer.
//! Capacity priced on the profile alone then promises what the machine does not give.
//!
//! The pace rises at once to what a tick measured and falls back slowly (a tenth of
//! the way a tick): instances sized on the pace of a quiet second would be short at
//! the next burst, when the crowding returns. A tick while a variant loads, warms or
//! drains measures nothing: a switch runs the old variant's last batches beside the
//! new one's warm-up, and a pace taken then would step down again for a crowding the
//! switch itself made.

use std::collections::BTreeMap;

use modelless_policy_abi::{LatencyFit, RunTotals, Snapshot, VariantState};
use serde::{Deserialize, Serialize};

/// Least profiled work (ms) the batches since the last tick must stand for before
/// their time says anything of the pace.
const MIN_PROFILED_MS: f64 = 50.0;

/// The pace is held within these: a measurement beyond them is a glitch, not a pace.
const PACE_RANGE: (f64, f64) = (0.5, 4.0);

/// Share of the way back towards a lower measurement a tick goes.
const SETTLE: f64 = 0.1;

/// What the pace remembers: each variant's run totals at the last tick, and the pace.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Pace {
    seen: BTreeMap<String, RunTotals>,
    pace: Option<f64>,
}

impl Pace {
    /// The pace after `snapshot` (1 until batches have been measured): the factor a
    /// profiled line's times are multiplied by.
    pub fn update(&mut self, snapshot: &Snapshot) -> f64 {
        let (mut took, mut profiled) = (0.0, 0.0);
        for task in &snapshot.tasks {
            for variant in &task.variants {
                let key = format!("{}/{}", task.name, variant.name);
                let Some(now) = variant.runs else { continue };
                let before = self.seen.insert(key, now);
                let fit = variant.profile.as_ref().and_then(|p| p.fit);
                if let (Some(before), Some(fit)) = (before, fit)
                    && let Some((ran_ms, line_ms)) = since(before, now, &fit)
                {
                    took += ran_ms;
                    profiled += line_ms;
                }
            }
        }
        let changing = snapshot.tasks.iter().flat_map(|t| &t.variants).any(|v| {
            matches!(v.state, VariantState::Loading | VariantState::Warming | VariantState::Draining)
                || v.instances_starting > 0
        });
        if profiled >= MIN_PROFILED_MS && !changing {
            let measured = (took / profiled).clamp(PACE_RANGE.0, PACE_RANGE.1);
            self.pace = Some(match self.pace {
                Some(pace) if measured < pace => pace + SETTLE * (measured - pace),
                _ => measured,
            });
        }
        self.pace.unwrap_or(1.0)
    }
}

/// The batches run between two totals: the time they took, and what `fit` says they
/// take; `None` when none ran (or the totals restarted, as a reloaded variant's do).
fn since(before: RunTotals, now: RunTotals, fit: &LatencyFit) -> Option<(f64, f64)> {
    let batches = now.batches.checked_sub(before.batches).filter(|&b| b > 0)?;
    let rows = now.rows.checked_sub(before.rows)?;
    let ran_ms = now.run_ms - before.run_ms;
    let line_ms = fit.a_ms * rows as f64 + fit.c_ms * batches as f64;
    (ran_ms >= 0.0 && line_ms > 0.0).then_some((ran_ms, line_ms))
}

/// `fit` at `pace`.
pub fn paced(fit: LatencyFit, pace: f64) -> LatencyFit {
    LatencyFit { a_ms: fit.a_ms * pace, c_ms: fit.c_ms * pace, r2: fit.r2 }
}

#[cfg(test)]
mod tests {
    use modelless_policy_abi::{TaskSnapshot, VariantCost, VariantSnapshot};

    use super::*;

    fn snapshot(batches: u64, run_ms: f64) -> Snapshot {
        let variant = VariantSnapshot {
            name: "v".into(),
            profile: Some(VariantCost {
                fit: Some(LatencyFit { a_ms: 2.0, c_ms: 4.0, r2: 0.99 }),
                ..VariantCost::default()
            }),
            runs: Some(RunTotals { batches, rows: 4 * batches, run_ms }),
            ..VariantSnapshot::default()
        };
        let task = TaskSnapshot { name: "t".into(), variants: vec![variant], ..TaskSnapshot::default() };
        Snapshot { tasks: vec![task], ..Snapshot::default() }
    }

    #[test]
    fn the_pace_rises_at_once_and_settles_slowly() {
        let mut pace = Pace::default();
        assert_eq!(pace.update(&snapshot(0, 0.0)), 1.0, "nothing measured yet");
        // 10 batches of 4 rows: 120 ms on the line, 240 taken.
        assert_eq!(pace.update(&snapshot(10, 240.0)), 2.0);
        // The next 10 at the profile's pace: a tenth of the way back.
        assert!((pace.update(&snapshot(20, 360.0)) - 1.9).abs() < 1e-9);
        // Too little work since says nothing.
        assert!((pace.update(&snapshot(21, 400.0)) - 1.9).abs() < 1e-9);
        // Totals that restart (a reloaded variant) are a new start, not a measurement.
        assert!((pace.update(&snapshot(1, 12.0)) - 1.9).abs() < 1e-9);
        // Batches run while a variant drains say nothing of the pace either.
        let mut draining = snapshot(11, 412.0);
        draining.tasks[0].variants[0].state = VariantState::Draining;
        assert!((pace.update(&draining) - 1.9).abs() < 1e-9);
    }
}
