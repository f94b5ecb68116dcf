//! The Gaussian process behind `modelless tune`'s Bayesian optimisation: a fit of
//! noisy costs over points of a space, and its belief (mean, standard deviation) at
//! other points. Depend on `modelless` instead; this crate is its own only so that
//! the numerics are compiled, and optimised, here: egobox-gp is generic over the
//! float type, and its code would otherwise be instantiated, unoptimised in test
//! builds, inside the crate that calls it.
//!
//! Measurements of serving settings are noisy (a setting measured twice can differ
//! by a tenth), so the process is not made to pass through every measurement: it has
//! a noise term (a nugget, a share of the process's variance added to its diagonal)
//! chosen among a few by likelihood at each fit. The likelihood alone cannot be
//! trusted with it: with a length scale per dimension and few points, short length
//! scales explain any measurement, luck included, and the likelihood then prefers no
//! noise at all. So the caller states the noise its measurements are known to carry,
//! and no smaller noise term is tried. The mean is constant and the correlation
//! Matérn 5/2 with one length scale per dimension, fitted by likelihood.

use std::panic::{AssertUnwindSafe, catch_unwind};

use egobox_gp::correlation_models::Matern52Corr;
use egobox_gp::mean_models::ConstantMean;
use egobox_gp::{GaussianProcess, ThetaTuning};
use linfa::Dataset;
use linfa::traits::Fit;
use ndarray::{Array1, Array2, array};

/// Noise terms tried at each fit, as shares of the process's variance: from nearly
/// interpolating to as much noise as signal.
pub const NUGGETS: [f64; 6] = [1e-6, 1e-3, 1e-2, 1e-1, 0.3, 1.0];

/// Why no model came of the data.
#[derive(Debug, thiserror::Error, PartialEq)]
#[non_exhaustive]
pub enum FitError {
    /// The points and costs do not make a table of `dimensions` columns.
    #[error("{points} numbers are not {costs} points of {dimensions} dimensions")]
    Shape {
        /// Numbers given as points.
        points: usize,
        /// Costs given.
        costs: usize,
        /// Numbers per point.
        dimensions: usize,
    },
    /// Fewer than two points: nothing to fit a correlation to.
    #[error("{0} points are too few to fit")]
    TooFew(usize),
    /// No noise term gave a fit (degenerate data, every cost equal, say).
    #[error("no fit: {0}")]
    Degenerate(String),
}

/// A fitted process.
pub struct NoisyProcess {
    gp: GaussianProcess<f64, ConstantMean, Matern52Corr>,
    dimensions: usize,
    nugget: f64,
}

// Its parts (sessions, threads, closures, channels) print nothing useful.
impl std::fmt::Debug for NoisyProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NoisyProcess").finish_non_exhaustive()
    }
}

impl NoisyProcess {
    /// Fits `costs` at `points` (row-major, `dimensions` numbers each), keeping the
    /// noise term of highest likelihood among those of [`NUGGETS`] that are at least
    /// the share of the costs' variance that a measurement noise of standard
    /// deviation `noise_sd` makes (that share itself is tried too; 0 where the noise
    /// is unknown).
    pub fn fit(points: &[f64], dimensions: usize, costs: &[f64], noise_sd: f64) -> Result<Self, FitError> {
        let shape = FitError::Shape { points: points.len(), costs: costs.len(), dimensions };
        if dimensions == 0 || points.len() != costs.len() * dimensions {
            return Err(shape);
        }
        if costs.len() < 2 {
            return Err(FitError::TooFew(costs.len()));
        }
        let x = Array2::from_shape_vec((costs.len(), dimensions), points.to_vec()).map_err(|_| shape)?;
        let data = Dataset::new(x, Array1::from(costs.to_vec()));
        let mut failures = Vec::new();
        let mut best: Option<NoisyProcess> = None;
        for nugget in noise_terms(costs, noise_sd) {
            let params = GaussianProcess::<f64, ConstantMean, Matern52Corr>::params(ConstantMean(), Matern52Corr())
                .theta_tuning(ThetaTuning::Full { init: array![0.1], bounds: array![(1e-2, 1e1)] })
                .nugget(nugget);
            // The library asserts on some data it cannot model: that noise term is
            // skipped, not the caller's search.
            match catch_unwind(AssertUnwindSafe(|| params.fit(&data))) {
                Ok(Ok(gp)) if gp.likelihood().is_finite() => {
                    if best.as_ref().is_none_or(|b| gp.likelihood() > b.gp.likelihood()) {
                        best = Some(NoisyProcess { gp, dimensions, nugget });
                    }
                }
                Ok(Ok(gp)) => failures.push(format!("nugget {nugget}: likelihood {}", gp.likelihood())),
                Ok(Err(e)) => failures.push(format!("nugget {nugget}: {e}")),
                Err(_) => failures.push(format!("nugget {nugget}: the fit panicked")),
            }
        }
        best.ok_or_else(|| FitError::Degenerate(failures.join("; ")))
    }

    /// The noise term the likelihood chose.
    pub fn nugget(&self) -> f64 {
        self.nugget
    }

    /// The fitted mean and standard deviation at each of `points` (row-major, as
    /// fitted); `None` where they are not whole points or the prediction failed.
    pub fn predict(&self, points: &[f64]) -> Option<Vec<(f64, f64)>> {
        if !points.len().is_multiple_of(self.dimensions) {
            return None;
        }
        let x = Array2::from_shape_vec((points.len() / self.dimensions, self.dimensions), points.to_vec()).ok()?;
        let (mean, variance) = self.gp.predict_valvar(&x).ok()?;
        Some(mean.iter().zip(variance.iter()).map(|(&m, &v)| (m, v.max(0.0).sqrt())).collect())
    }
}

/// The noise terms worth trying for `costs` measured with a noise of standard
/// deviation `noise_sd`: its share of their variance (at most 1), then those of
/// [`NUGGETS`] above it.
fn noise_terms(costs: &[f64], noise_sd: f64) -> Vec<f64> {
    let mean = costs.iter().sum::<f64>() / costs.len() as f64;
    let variance = costs.iter().map(|c| (c - mean) * (c - mean)).sum::<f64>() / costs.len() as f64;
    let floor = if noise_sd > 0.0 && variance > 0.0 { (noise_sd * noise_sd / variance).min(1.0) } else { 0.0 };
    let above = NUGGETS.into_iter().filter(|&nugget| nugget > floor);
    if floor > 0.0 { std::iter::once(floor).chain(above).collect() } else { above.collect() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_noise_term_smooths_over_a_lucky_measurement() {
        // A smooth cost along one dimension, measured with a little noise, and one
        // measurement flattered by half: an interpolating process would call that
        // point the best; the fitted one holds it near its neighbours.
        let xs: Vec<f64> = (0..16).map(|i| f64::from(i) / 15.0).collect();
        let noise =
            [0.02, -0.03, 0.01, 0.03, -0.02, 0.0, 0.02, -0.01, 0.03, -0.03, 0.01, -0.02, 0.02, 0.0, -0.01, 0.02];
        let mut costs: Vec<f64> = xs.iter().zip(noise).map(|(x, n)| 1.0 + (x - 0.3) * (x - 0.3) + n).collect();
        let lucky = 10;
        costs[lucky] -= 0.5;
        let model = NoisyProcess::fit(&xs, 1, &costs, 0.0).unwrap();
        assert!(model.nugget() > NUGGETS[0], "the likelihood chose a noise term: {}", model.nugget());
        let fitted: Vec<f64> = model.predict(&xs).unwrap().into_iter().map(|(mean, _)| mean).collect();
        assert!(
            fitted[lucky] - costs[lucky] > 0.25,
            "fitted {:.3} at the lucky point measured {:.3}",
            fitted[lucky],
            costs[lucky]
        );
        let lowest = (0..fitted.len()).min_by(|&a, &b| fitted[a].total_cmp(&fitted[b])).unwrap();
        assert_ne!(lowest, lucky, "the lowest fitted cost is not the lucky one: {fitted:?}");
    }

    #[test]
    fn smooth_noiseless_data_is_fitted_closely_and_its_doubt_grows_away_from_it() {
        let xs: Vec<f64> = (0..12).map(|i| f64::from(i) / 11.0).collect();
        let costs: Vec<f64> = xs.iter().map(|x| (3.0 * x).sin()).collect();
        let model = NoisyProcess::fit(&xs, 1, &costs, 0.0).unwrap();
        let at_points = model.predict(&xs).unwrap();
        for ((mean, _), cost) in at_points.iter().zip(&costs) {
            assert!((mean - cost).abs() < 0.02, "fitted {mean:.4} for {cost:.4}");
        }
        let (_, sd_near) = model.predict(&[0.5]).unwrap()[0];
        let (_, sd_far) = model.predict(&[3.0]).unwrap()[0];
        assert!(sd_far > 5.0 * sd_near, "doubt near the data {sd_near:.4}, far from it {sd_far:.4}");
    }

    #[test]
    fn no_noise_term_below_the_stated_measurement_noise_is_tried() {
        // Costs of variance 1: a noise of sd 0.2 is a share of 0.04 of it.
        let costs = [-1.0, 1.0, -1.0, 1.0];
        let terms = noise_terms(&costs, 0.2);
        assert!((terms[0] - 0.04).abs() < 1e-12, "{terms:?}");
        assert_eq!(&terms[1..], &[0.1, 0.3, 1.0]);
        assert_eq!(noise_terms(&costs, 0.0), NUGGETS.to_vec(), "unknown noise: every term");
        assert_eq!(noise_terms(&costs, 5.0), vec![1.0], "noise beyond the signal: as much noise as signal");
        assert_eq!(noise_terms(&[2.0, 2.0], 0.1), NUGGETS.to_vec(), "equal costs: no share to compute");
    }

    #[test]
    fn a_stated_noise_keeps_a_many_dimensional_fit_from_interpolating_a_lucky_point() {
        // Eight points spread over a 7-dimensional space on a smooth slope, one of
        // them measured 30 % low (in logarithms, as tune fits them). With a length
        // scale per dimension, the likelihood can explain it exactly; a stated noise
        // of 5 % must keep the fit's noise term at or above its share.
        let dimensions = 7;
        let xs: Vec<f64> =
            (0..8u32).flat_map(|i| (0..dimensions as u32).map(move |d| f64::from((i * (d + 3)) % 8) / 7.0)).collect();
        let mut costs: Vec<f64> = (0..8).map(|i| (100.0 + 10.0 * f64::from(i)).ln()).collect();
        costs[4] += 0.7f64.ln();
        let noise_sd = 0.05;
        let lucky = &xs[4 * dimensions..5 * dimensions];
        let unstated = NoisyProcess::fit(&xs, dimensions, &costs, 0.0).unwrap();
        let interpolated = unstated.predict(lucky).unwrap()[0].0 - costs[4];
        let model = NoisyProcess::fit(&xs, dimensions, &costs, noise_sd).unwrap();
        let floor = noise_terms(&costs, noise_sd)[0];
        assert!(model.nugget() >= floor, "noise term {} below the stated noise's share {floor}", model.nugget());
        let smoothed = model.predict(lucky).unwrap()[0].0 - costs[4];
        assert!(
            smoothed > 0.02 && smoothed > 10.0 * interpolated.abs(),
            "fitted above the lucky measurement by {smoothed:.4} with the noise stated, {interpolated:.4} without"
        );
    }

    #[test]
    fn malformed_data_is_refused_with_its_reason() {
        assert_eq!(
            NoisyProcess::fit(&[0.0, 1.0, 2.0], 2, &[1.0, 2.0], 0.0).err(),
            Some(FitError::Shape { points: 3, costs: 2, dimensions: 2 })
        );
        assert_eq!(NoisyProcess::fit(&[0.5], 1, &[1.0], 0.0).err(), Some(FitError::TooFew(1)));
        let model = NoisyProcess::fit(&[0.0, 0.5, 1.0], 1, &[1.0, 2.0, 1.5], 0.0).unwrap();
        assert!(model.predict(&[0.1, 0.2]).is_some());
        let two_d = NoisyProcess::fit(&[0.0, 0.0, 0.5, 1.0, 1.0, 0.5], 2, &[1.0, 2.0, 1.5], 0.05).unwrap();
        assert!(two_d.predict(&[0.1, 0.2, 0.3]).is_none(), "a point and a half");
    }
}
