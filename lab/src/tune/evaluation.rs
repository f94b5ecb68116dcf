//! One measured point of a search, and how measured costs become what the Bayesian
//! model is fitted to.

use serde::{Deserialize, Serialize};

use super::space::ServingSetting;

/// One measured point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    /// The point, one number per knob.
    pub point: Vec<f64>,
    /// What it sets.
    pub setting: ServingSetting,
    /// What the objective measured, or `None` where the measurement failed.
    pub cost: Option<f64>,
    /// Why it failed, where it did.
    pub error: Option<String>,
}

/// The costs the model is fitted to: their logarithm where all are positive (latency
/// spans orders of magnitude between good and bad settings, and a Gaussian process
/// fits its logarithm better), and a failed measurement as the worst cost seen, so
/// that the model learns to avoid its region.
pub(super) fn modelled_costs(done: &[Evaluation]) -> Vec<f64> {
    let measured: Vec<f64> = done.iter().filter_map(|e| e.cost).collect();
    let log = !measured.is_empty() && measured.iter().all(|&c| c > 0.0);
    let worst = measured.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let spread = measured.iter().copied().fold(f64::INFINITY, f64::min);
    let failed = if worst.is_finite() { worst + (worst - spread).abs().max(worst.abs() * 0.5) } else { 1.0 };
    done.iter()
        .map(|e| {
            let cost = e.cost.unwrap_or(if log { failed.max(f64::MIN_POSITIVE) } else { failed });
            if log { cost.ln() } else { cost }
        })
        .collect()
}

/// The standard deviation, in the units of [`modelled_costs`], of a measurement whose
/// relative noise is `relative`: itself for logarithms, that share of the mean
/// magnitude of the costs otherwise.
pub(super) fn modelled_noise(done: &[Evaluation], relative: f64) -> f64 {
    let measured: Vec<f64> = done.iter().filter_map(|e| e.cost).collect();
    if measured.is_empty() || measured.iter().all(|&c| c > 0.0) {
        return relative;
    }
    relative * measured.iter().map(|c| c.abs()).sum::<f64>() / measured.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tune::space::{KnobSpace, SpaceLimits};

    fn space() -> KnobSpace {
        KnobSpace::new(SpaceLimits { max_batch: 32, cores: 2, images: false, gpu: false })
    }

    #[test]
    fn failed_measurements_are_modelled_as_worse_than_any_measured_and_noise_in_the_costs_units() {
        let at = |cost: Option<f64>| Evaluation {
            point: vec![],
            setting: space().decode(&[]),
            cost,
            error: cost.is_none().then(|| "failed".into()),
        };
        let costs = modelled_costs(&[at(Some(10.0)), at(None), at(Some(40.0))]);
        assert!((costs[0] - 10f64.ln()).abs() < 1e-12 && (costs[2] - 40f64.ln()).abs() < 1e-12);
        assert!(costs[1] > costs[2], "{costs:?}");
        let negative = modelled_costs(&[at(Some(-300.0)), at(None), at(Some(-100.0))]);
        assert!(negative[1] > -100.0, "throughput objectives are negated: {negative:?}");
        assert_eq!(modelled_noise(&[at(Some(10.0)), at(Some(40.0))], 0.05), 0.05, "in logarithms");
        let throughput = modelled_noise(&[at(Some(-300.0)), at(None), at(Some(-100.0))], 0.05);
        assert!((throughput - 10.0).abs() < 1e-9, "5 % of 200 answers/s: {throughput}");
    }
}
