//! The machine as it served. A profile times batches back to back on a quiet machine;
//! serving, the same batches ran slower or faster (sessions woken from sleep between
//! batches of one or two rows, a load generator beside them, a busier host). Real
//! runs' `runs.csv` tell how much: each second and variant is a point, the batch's
//! rows against the time taken over what the profile's line predicts, weighted by its
//! batches. A line through all variants' points is the machine's; each variant's is
//! that line moved by how its own points sit around it (shrunk toward the machine's
//! where it ran few batches). A calibrated model runs every batch at its line times
//! that ratio, and the oracle prices with the same times, so both face the machine
//! the real runs faced.

use std::collections::BTreeMap;

use modelless_runtime::profile::fit_weighted_line;

use super::model::SimModel;
use super::ratio_line::{FASTEST, RatioLine, SLOWEST};
use crate::load::{LoadError, SecondRuns};

/// Batches of its own a variant needs before its offset from the machine's line
/// counts fully: with `n` batches, `n / (n + PRIOR_BATCHES)` of it counts.
const PRIOR_BATCHES: f64 = 50.0;
/// Below this spread of rows a batch (standard deviation), the points cannot tell a
/// slope: the machine's ratio is taken as the same at every batch size.
const LEAST_ROWS_SPREAD: f64 = 0.5;

/// One second of one variant, set against its profile.
struct Point<'a> {
    variant: &'a str,
    weight: f64,
    rows: f64,
    ratio: f64,
}

impl SimModel {
    /// This model with every variant's batches timed as `runs` show the machine ran
    /// them. Runs of tasks or variants the model lacks are left out; none matching
    /// at all is an error.
    pub fn calibrated(&self, runs: &[SecondRuns]) -> Result<SimModel, LoadError> {
        let points: Vec<Point> = runs.iter().filter_map(|r| self.point(r)).collect();
        let machine = machine_line(&points).ok_or_else(|| {
            LoadError::invalid("none of the runs matches a profiled variant of the model (task and variant names)")
        })?;
        // Where each variant sits around the machine's line.
        let mut offsets: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
        for p in &points {
            let (w, sum) = offsets.entry(p.variant).or_default();
            *w += p.weight;
            *sum += p.weight * (p.ratio - machine.at(p.rows));
        }
        let mut calibrated = self.clone();
        for variant in calibrated.tasks.iter_mut().flat_map(|t| &mut t.variants) {
            let offset = offsets.get(variant.name.as_str()).map_or(0.0, |&(w, sum)| sum / (w + PRIOR_BATCHES));
            variant.calibration = Some(RatioLine { at_one: machine.at_one + offset, ..machine });
        }
        Ok(calibrated)
    }

    fn point<'a>(&'a self, run: &SecondRuns) -> Option<Point<'a>> {
        let task = self.tasks.iter().find(|t| t.name == run.task)?;
        let variant = task.variants.iter().find(|v| v.name == run.variant)?;
        let batches = run.batches as f64;
        let rows = run.rows as f64 / batches;
        let predicted = batches * (variant.fit.a_ms * rows + variant.fit.c_ms).max(0.05);
        (run.batches > 0 && run.run_ms > 0.0).then(|| Point {
            variant: &variant.name,
            weight: batches,
            rows,
            ratio: (run.run_ms / predicted).clamp(FASTEST, SLOWEST),
        })
    }
}

/// The weighted least-squares line through every point, flat where the rows hardly
/// vary; `None` without points.
fn machine_line(points: &[Point]) -> Option<RatioLine> {
    let total: f64 = points.iter().map(|p| p.weight).sum();
    if total <= 0.0 {
        return None;
    }
    let mean = |of: &dyn Fn(&Point) -> f64| points.iter().map(|p| p.weight * of(p)).sum::<f64>() / total;
    let rows = mean(&|p| p.rows);
    let spread = mean(&|p| (p.rows - rows).powi(2)).sqrt();
    let weighted: Vec<(f64, f64, f64)> = points.iter().map(|p| (p.rows, p.ratio, p.weight)).collect();
    Some(match fit_weighted_line(&weighted).filter(|_| spread >= LEAST_ROWS_SPREAD) {
        Some(line) => RatioLine { at_one: line.at(1.0), per_row: line.slope },
        None => RatioLine { at_one: mean(&|p| p.ratio), per_row: 0.0 },
    })
}

#[cfg(test)]
mod tests {
    use modelless::policy_abi::{LatencyFit, VariantSnapshot};

    use super::*;
    use crate::simulate::{SimTask, SimVariant};

    fn variant(name: &str, a_ms: f64) -> SimVariant {
        SimVariant {
            name: name.into(),
            accuracy: 70.0,
            fit: LatencyFit { a_ms, c_ms: 0.0, r2: 1.0 },
            spread: 0.0,
            load_ms: 0.0,
            loaded: true,
            max_batch_size: 8,
            max_queue_delay_us: 0,
            max_queue_size: 64,
            calibration: None,
            snapshot: VariantSnapshot::default(),
        }
    }

    fn model() -> SimModel {
        let variants = vec![variant("small", 1.0), variant("large", 4.0), variant("idle", 2.0)];
        SimModel {
            cores: 2,
            tasks: vec![SimTask { name: "t".into(), slo_ms: Some(100.0), active: 0, variants, spill: true }],
            budget: None,
        }
    }

    /// `batches` batches of `rows` rows of `variant`, which took `ratio` times its line.
    fn ran(model: &SimModel, variant: &str, batches: u64, rows: u64, ratio: f64) -> SecondRuns {
        let v = model.tasks[0].variants.iter().find(|v| v.name == variant).unwrap();
        let run_ms = ratio * v.fit.a_ms * (batches * rows) as f64;
        SecondRuns { second: 0, task: "t".into(), variant: variant.into(), batches, rows: batches * rows, run_ms }
    }

    #[test]
    fn the_machine_line_follows_the_ratio_by_rows_and_each_variant_its_offset() {
        let m = model();
        // Together they ran 1.6 × their lines at one row and 1.2 × at eight; `large`
        // 0.2 slower than `small` at both, with as many batches of each.
        let runs: Vec<SecondRuns> = (0..200)
            .flat_map(|_| {
                [
                    ran(&m, "small", 10, 1, 1.5),
                    ran(&m, "small", 10, 8, 1.1),
                    ran(&m, "large", 10, 1, 1.7),
                    ran(&m, "large", 10, 8, 1.3),
                ]
            })
            .collect();
        let calibrated = m.calibrated(&runs).unwrap();
        let line =
            |name: &str| calibrated.tasks[0].variants.iter().find(|v| v.name == name).unwrap().calibration.unwrap();
        let (small, large, idle) = (line("small"), line("large"), line("idle"));
        assert!((idle.at(1.0) - 1.6).abs() < 1e-9 && (idle.at(8.0) - 1.2).abs() < 1e-9, "{idle:?}");
        // 4000 batches each: the offset counts 4000/4050 of 0.1.
        let shift = 0.1 * 4000.0 / 4050.0;
        assert!((small.at(1.0) - (1.6 - shift)).abs() < 1e-9, "{small:?}");
        assert!((large.at(8.0) - (1.2 + shift)).abs() < 1e-9, "{large:?}");
    }

    #[test]
    fn rows_that_hardly_vary_give_a_flat_ratio_and_ratios_stay_in_bounds() {
        let m = model();
        let runs = vec![ran(&m, "small", 100, 1, 2.0), ran(&m, "small", 1, 1, 50.0)];
        let line = m.calibrated(&runs).unwrap().tasks[0].variants[2].calibration.unwrap();
        assert_eq!(line.per_row, 0.0);
        assert!((line.at(1.0) - (200.0 + 3.0) / 101.0).abs() < 1e-9, "the outlier counts as 3: {line:?}");
        assert_eq!(RatioLine { at_one: 9.0, per_row: 0.0 }.at(1.0), SLOWEST);
    }

    #[test]
    fn runs_of_another_model_are_refused() {
        let m = model();
        let mut other = ran(&m, "small", 10, 1, 1.5);
        other.task = "elsewhere".into();
        assert!(m.calibrated(&[other]).unwrap_err().to_string().contains("none of the runs"));
    }
}
