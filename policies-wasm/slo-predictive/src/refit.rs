//! Latency lines refitted from what the sessions ran while serving. A profile times
//! batches on a quiet machine, sizes taken in turns; while serving, the same batches
//! can run faster (a run of equal shapes reuses what the last one set up) or slower (a
//! busier host, a load generator beside it, a slower hour of a shared VM). The
//! runtime counts what each variant's sessions ran (`runs`); between two ticks that is
//! `batches` batches of `rows / batches` rows on average, which took `run_ms` where
//! the profile's line says another time: the ratio of the two at that batch size is a
//! point, weighted by its batches. A line through the recent points and the profile's
//! own (ratio 1 at one row and at the largest batch, worth `profile_weight` batches
//! each) says how much slower or faster than profiled each batch size runs: where
//! the variant served, as it did; elsewhere, closer to the profile. The latency line
//! predicted with is the chord of the corrected latencies at one row and at the
//! largest batch.

use std::collections::BTreeMap;

use modelless_policy_abi::{LatencyFit, RunTotals, Snapshot};
use serde::{Deserialize, Serialize};

/// Bounds of a ratio to the profile: beyond them the counts or the profile are wrong,
/// not the machine.
const FASTEST: f64 = 0.5;
const SLOWEST: f64 = 3.0;

/// Weighted sums of the points seen: weight (batches), x (rows a batch), y (time taken
/// over the time the profile predicts).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Points {
    w: f64,
    x: f64,
    y: f64,
    xx: f64,
    xy: f64,
}

impl Points {
    /// Adds `weight` batches of `x` rows that took `y` times the profile's time, after
    /// the sums so far are scaled by `keep` (older evidence fades).
    pub fn add(&mut self, weight: f64, x: f64, y: f64, keep: f64) {
        let kept = |s: f64| s * keep;
        *self = Points {
            w: kept(self.w) + weight,
            x: kept(self.x) + weight * x,
            y: kept(self.y) + weight * y,
            xx: kept(self.xx) + weight * x * x,
            xy: kept(self.xy) + weight * x * y,
        };
    }

    /// `profile`'s line corrected by these points, as the chord between one row and
    /// `largest` rows. The slope stays at least a quarter of the profile's.
    pub fn fit(&self, profile: LatencyFit, largest: u32, profile_weight: f64) -> LatencyFit {
        let largest = f64::from(largest.max(1));
        let mut all = *self;
        for rows in [1.0, largest] {
            all.add(profile_weight, rows, 1.0, 1.0);
        }
        if all.w <= 0.0 {
            return profile;
        }
        let (mean_x, mean_y) = (all.x / all.w, all.y / all.w);
        let variance = all.xx / all.w - mean_x * mean_x;
        let slope = if variance > 1e-9 { (all.xy / all.w - mean_x * mean_y) / variance } else { 0.0 };
        let ratio = |rows: f64| (mean_y + slope * (rows - mean_x)).clamp(FASTEST, SLOWEST);
        let profiled = |rows: f64| profile.a_ms * rows + profile.c_ms;
        let (one, most) = (ratio(1.0) * profiled(1.0), ratio(largest) * profiled(largest));
        let a_ms = if largest > 1.0 { (most - one) / (largest - 1.0) } else { profile.a_ms * ratio(1.0) };
        let a_ms = a_ms.max(0.25 * profile.a_ms);
        LatencyFit { a_ms, c_ms: one - a_ms, r2: profile.r2 }
    }
}

/// What one variant ran between two snapshots.
#[derive(Clone, Debug, PartialEq)]
pub struct Ran {
    /// Its task.
    pub task: String,
    /// The variant.
    pub variant: String,
    /// Batches it ran.
    pub batches: f64,
    /// Rows it ran.
    pub rows: f64,
    /// Time its batches took, ms.
    pub run_ms: f64,
}

/// Per task and variant, the points seen and the totals last seen.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Refits {
    points: BTreeMap<String, BTreeMap<String, Points>>,
    seen: BTreeMap<String, BTreeMap<String, RunTotals>>,
}

impl Refits {
    /// Takes in what every variant ran since the last snapshot, and returns it;
    /// `window_ms` of run time counts, the newest most.
    pub fn observe(&mut self, snapshot: &Snapshot, window_ms: f64) -> Vec<Ran> {
        let mut ran = Vec::new();
        for task in &snapshot.tasks {
            for variant in &task.variants {
                let (Some(runs), Some(profile)) = (variant.runs, variant.profile.as_ref().and_then(|p| p.fit)) else {
                    continue;
                };
                let seen = self.seen.entry(task.name.clone()).or_default();
                let Some(before) = seen.insert(variant.name.clone(), runs) else { continue };
                // Counts that went back belong to another process: start again from them.
                if runs.batches <= before.batches || runs.rows < before.rows || runs.run_ms < before.run_ms {
                    continue;
                }
                let batches = (runs.batches - before.batches) as f64;
                let run_ms = runs.run_ms - before.run_ms;
                let rows = (runs.rows - before.rows) as f64 / batches;
                let profiled_ms = batches * (profile.a_ms * rows + profile.c_ms);
                if profiled_ms <= 0.0 {
                    continue;
                }
                let keep = (-run_ms / window_ms.max(1.0)).exp();
                let points = self.points.entry(task.name.clone()).or_default();
                points.entry(variant.name.clone()).or_default().add(batches, rows, run_ms / profiled_ms, keep);
                ran.push(Ran {
                    task: task.name.clone(),
                    variant: variant.name.clone(),
                    batches,
                    rows: rows * batches,
                    run_ms,
                });
            }
        }
        ran
    }

    /// `variant`'s line: its profile's, refitted through what it ran lately.
    pub fn fit(&self, task: &str, variant: &str, profile: LatencyFit, largest: u32, profile_weight: f64) -> LatencyFit {
        match self.points.get(task).and_then(|v| v.get(variant)) {
            Some(points) => points.fit(profile, largest, profile_weight),
            None => profile,
        }
    }
}

/// The line of a variant that has no profiled one, from what its sessions ran: its
/// mean time a row, in proportion (totals cannot tell a cost per batch from one per
/// row, and a cost in proportion is the cautious reading). `None` before it ran.
pub fn observed_line(runs: &RunTotals) -> Option<LatencyFit> {
    (runs.batches > 0 && runs.rows > 0 && runs.run_ms > 0.0).then(|| LatencyFit {
        a_ms: runs.run_ms / runs.rows as f64,
        c_ms: 0.0,
        r2: 0.0,
    })
}

#[cfg(test)]
mod tests {
    use modelless_policy_abi::{TaskSnapshot, VariantCost, VariantSnapshot};

    use super::*;

    const PROFILE: LatencyFit = LatencyFit { a_ms: 8.0, c_ms: 4.0, r2: 0.999 };

    fn snapshot(runs: RunTotals) -> Snapshot {
        let profile = Some(VariantCost { fit: Some(PROFILE), ..VariantCost::default() });
        let variant = VariantSnapshot { name: "v".into(), profile, runs: Some(runs), ..VariantSnapshot::default() };
        let task = TaskSnapshot { name: "t".into(), variants: vec![variant], ..TaskSnapshot::default() };
        Snapshot { tasks: vec![task], ..Snapshot::default() }
    }

    fn totals(batches: u64, rows: u64, run_ms: f64) -> RunTotals {
        RunTotals { batches, rows, run_ms }
    }

    fn close(fit: LatencyFit, rows: u32, expected_ms: f64) -> bool {
        (fit.predict_ms(rows) - expected_ms).abs() < 0.01 * expected_ms
    }

    #[test]
    fn a_variant_without_a_profile_is_priced_by_its_mean_row_once_it_ran() {
        assert_eq!(observed_line(&totals(0, 0, 0.0)), None);
        let line = observed_line(&totals(200, 400, 2_000.0)).unwrap();
        assert_eq!((line.a_ms, line.c_ms), (5.0, 0.0));
        assert_eq!(line.predict_ms(1), 5.0);
    }

    #[test]
    fn single_rows_faster_than_profiled_pivot_the_line_around_the_largest_batch() {
        let mut refits = Refits::default();
        refits.observe(&snapshot(totals(0, 0, 0.0)), 10_000.0);
        assert_eq!(refits.fit("t", "v", PROFILE, 8, 20.0), PROFILE, "the first totals are only a start");
        // 500 single rows at 9 ms where the profile says 12.
        refits.observe(&snapshot(totals(500, 500, 4_500.0)), 10_000.0);
        let fit = refits.fit("t", "v", PROFILE, 8, 20.0);
        assert!(fit.predict_ms(1) < 9.2, "{fit:?}");
        assert!(close(fit, 8, 68.0), "the largest batch is the profile's: {fit:?}");
        assert_eq!(refits.fit("t", "w", PROFILE, 8, 20.0), PROFILE, "a variant that ran nothing keeps its profile");
    }

    #[test]
    fn batches_a_fifth_slower_at_every_size_make_the_line_a_fifth_slower() {
        let mut points = Points::default();
        for rows in [1.0, 2.0, 4.0, 8.0] {
            points.add(1_000.0, rows, 1.2, 1.0);
        }
        let fit = points.fit(PROFILE, 8, 20.0);
        assert!(close(fit, 1, 1.2 * 12.0) && close(fit, 8, 1.2 * 68.0), "{fit:?}");
        // Only batches of 4 seen, half as slow again: the profile's two points, on
        // either side, hardly tilt the correction.
        let mut middle = Points::default();
        middle.add(500.0, 4.0, 1.5, 1.0);
        let fit = middle.fit(PROFILE, 8, 20.0);
        assert!(fit.predict_ms(8) > 1.35 * 68.0 && fit.predict_ms(1) > 1.35 * 12.0, "{fit:?}");
    }

    #[test]
    fn older_points_fade_a_restart_starts_again_and_the_slope_keeps_a_floor() {
        let mut points = Points::default();
        points.add(1_000.0, 8.0, 1.5, 1.0);
        for _ in 0..100 {
            points.add(100.0, 8.0, 1.0, 0.5);
        }
        assert!(close(points.fit(PROFILE, 8, 20.0), 8, 68.0), "the old slow batches have faded");
        let mut flat = Points::default();
        flat.add(1_000.0, 1.0, 2.5, 1.0);
        flat.add(1_000.0, 8.0, 0.5, 1.0);
        assert!(flat.fit(PROFILE, 8, 20.0).a_ms >= 2.0, "a flat line is noise: a quarter of the profile's slope");

        let mut refits = Refits::default();
        refits.observe(&snapshot(totals(100, 800, 7_000.0)), 10_000.0);
        refits.observe(&snapshot(totals(5, 40, 350.0)), 10_000.0);
        assert_eq!(refits.fit("t", "v", PROFILE, 8, 20.0), PROFILE, "counts that went back are no evidence");
        refits.observe(&snapshot(totals(15, 120, 1_350.0)), 10_000.0);
        assert!(refits.fit("t", "v", PROFILE, 8, 20.0).predict_ms(8) > 75.0, "10 batches of 8 at 100 ms");
    }
}
