//! Predicts the first-run time of a batch size not yet run (the warm-up outlier) with a
//! random forest, as González-Vidal et al. did: from the batch size, the largest batch
//! the session ran before, the involuntary context switches during the run, the memory
//! in use (allocated) and the memory a batch of that size takes (requested; on a GPU,
//! both are device memory), and the variant's warm latency at that size (from its fit, so that one
//! forest serves a family of variants). The forest learns the first run's time as a
//! multiple of the warm latency: trees predict in steps, and a multiple changes far
//! less between batch sizes than a time does, so a size never seen lands close.

use modelless_policy_abi::{BatchPoint, FirstRunSample, LatencyFit};
use smartcore::ensemble::random_forest_regressor::{RandomForestRegressor, RandomForestRegressorParameters};
use smartcore::linalg::basic::matrix::DenseMatrix;

use crate::error::Cause;

/// What the predictor looks at.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WarmupFeatures {
    /// Rows in the batch.
    pub batch_size: u32,
    /// The largest batch the session ran before (0 for none).
    pub largest_before: u32,
    /// Involuntary context switches of the process during the run.
    pub involuntary_switches: u64,
    /// Memory in use before the run, in bytes.
    pub memory_in_use_bytes: u64,
    /// Memory a batch of this size takes, by the profile's memory per batch size (0
    /// where it measured none), in bytes.
    pub batch_memory_bytes: u64,
    /// The variant's warm latency at this batch size, in ms.
    pub warm_ms: f64,
}

/// The warm latency of a batch by `fit`; where noise fit the line's intercept so far
/// below zero that the line is not positive at small batches, the per-row cost alone.
fn warm_ms(fit: &LatencyFit, batch_size: u32) -> f64 {
    let line = fit.predict_ms(batch_size);
    if line > 0.0 { line } else { fit.a_ms.max(0.0) * f64::from(batch_size) }
}

impl WarmupFeatures {
    /// The features of a recorded first run of a variant whose warm latency is `fit`
    /// and whose profile measured `points`.
    pub fn of(sample: &FirstRunSample, fit: &LatencyFit, points: &[BatchPoint]) -> Self {
        WarmupFeatures {
            batch_size: sample.batch_size,
            largest_before: sample.largest_before,
            involuntary_switches: sample.involuntary_switches,
            memory_in_use_bytes: sample.memory_in_use_bytes,
            batch_memory_bytes: super::sweep::predict_memory(points, sample.batch_size as usize).unwrap_or(0),
            warm_ms: warm_ms(fit, sample.batch_size),
        }
    }

    fn row(&self) -> Vec<f64> {
        // FEATURES values, in this order.
        vec![
            f64::from(self.batch_size),
            f64::from(self.largest_before),
            self.involuntary_switches as f64,
            self.memory_in_use_bytes as f64 / f64::from(1 << 20),
            self.batch_memory_bytes as f64 / f64::from(1 << 20),
            self.warm_ms,
        ]
    }
}

/// Values in a row of features.
const FEATURES: usize = 6;

/// A first run to learn from: its features and its time in ms.
pub type Example = (WarmupFeatures, f64);

/// Why a predictor could not be trained or asked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PredictorError {
    /// Fewer than two examples to learn from.
    #[error("warm-up predictor: {0} examples; at least 2 are needed")]
    TooFewExamples(usize),
    /// An example's warm latency, which first runs are learnt as multiples of, is not
    /// a positive number.
    #[error("warm-up predictor: warm latency {warm_ms} ms at batch {batch_size} is not positive")]
    NotPositive {
        /// The latency.
        warm_ms: f64,
        /// The example's batch size.
        batch_size: u32,
    },
    /// No example has a batch size held out to measure the error on.
    #[error("warm-up predictor: no example has a held-out batch size")]
    NothingHeldOut,
    /// The random forest refused its data.
    #[error("warm-up predictor: {0}")]
    Forest(#[source] Cause),
}

/// A random forest from features to first-run time.
pub struct WarmupPredictor {
    forest: RandomForestRegressor<f64, f64, DenseMatrix<f64>, Vec<f64>>,
}

// Its parts (sessions, threads, closures, channels) print nothing useful.
impl std::fmt::Debug for WarmupPredictor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WarmupPredictor").finish_non_exhaustive()
    }
}

impl WarmupPredictor {
    /// Trains on `examples` (at least two, each with a positive warm latency).
    pub fn train(examples: &[Example]) -> Result<Self, PredictorError> {
        if examples.len() < 2 {
            return Err(PredictorError::TooFewExamples(examples.len()));
        }
        if let Some((f, _)) = examples.iter().find(|(f, _)| f.warm_ms.is_nan() || f.warm_ms <= 0.0) {
            return Err(PredictorError::NotPositive { warm_ms: f.warm_ms, batch_size: f.batch_size });
        }
        let x = matrix(examples.iter().map(|e| &e.0))?;
        let multiples: Vec<f64> = examples.iter().map(|(f, ms)| ms / f.warm_ms).collect();
        let parameters = RandomForestRegressorParameters::default().with_n_trees(100).with_m(FEATURES).with_seed(1);
        let forest = RandomForestRegressor::fit(&x, &multiples, parameters).map_err(forest_error)?;
        Ok(WarmupPredictor { forest })
    }

    /// Predicted first-run times, in ms.
    pub fn predict(&self, features: &[WarmupFeatures]) -> Result<Vec<f64>, PredictorError> {
        let multiples = self.forest.predict(&matrix(features.iter())?).map_err(forest_error)?;
        Ok(multiples.iter().zip(features).map(|(m, f)| m * f.warm_ms).collect())
    }
}

fn matrix<'a>(features: impl Iterator<Item = &'a WarmupFeatures>) -> Result<DenseMatrix<f64>, PredictorError> {
    let rows: Vec<Vec<f64>> = features.map(WarmupFeatures::row).collect();
    DenseMatrix::from_2d_vec(&rows).map_err(forest_error)
}

fn forest_error(error: smartcore::error::Failed) -> PredictorError {
    PredictorError::Forest(Cause::new(error))
}

/// How well the predictor does on batch sizes it never saw.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HeldOut {
    /// Mean absolute percentage error over the held-out examples, in %.
    pub mape: f64,
    /// Examples trained on.
    pub trained_on: usize,
    /// Examples tested on.
    pub tested_on: usize,
}

/// Trains on the examples whose batch size is not in `held_out_sizes` and measures
/// the error on those that are.
pub fn held_out_error(examples: &[Example], held_out_sizes: &[u32]) -> Result<HeldOut, PredictorError> {
    let (test, train): (Vec<Example>, Vec<Example>) =
        examples.iter().partition(|(f, _)| held_out_sizes.contains(&f.batch_size));
    if test.is_empty() {
        return Err(PredictorError::NothingHeldOut);
    }
    let predictor = WarmupPredictor::train(&train)?;
    let features: Vec<WarmupFeatures> = test.iter().map(|e| e.0).collect();
    let predicted = predictor.predict(&features)?;
    Ok(HeldOut { mape: mape(&predicted, test.iter().map(|e| e.1)), trained_on: train.len(), tested_on: test.len() })
}

/// Mean absolute percentage error of `predicted` against `actual`, in %.
pub fn mape(predicted: &[f64], actual: impl Iterator<Item = f64>) -> f64 {
    let errors: Vec<f64> = predicted.iter().zip(actual).map(|(p, a)| ((p - a) / a).abs()).collect();
    100.0 * errors.iter().sum::<f64>() / errors.len().max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_below_zero_at_small_batches_gives_the_per_row_cost_there() {
        let fit = LatencyFit { a_ms: 30.0, c_ms: -50.0, r2: 0.97 };
        assert_eq!(warm_ms(&fit, 1), 30.0);
        assert_eq!(warm_ms(&fit, 4), 70.0);
        let positive = LatencyFit { a_ms: 2.0, c_ms: 3.0, r2: 0.99 };
        assert_eq!(warm_ms(&positive, 2), 7.0);
    }
    #[test]
    fn the_memory_a_batch_requests_comes_from_the_profiles_memory_per_batch_size() {
        let point = |batch_size: u32, mib: u64| BatchPoint {
            batch_size,
            first_run_ms: 1.0,
            warm_p50_ms: 1.0,
            warm_p99_ms: 1.0,
            warm_runs: 1,
            memory_bytes: Some(mib << 20),
        };
        let sample = FirstRunSample {
            batch_size: 6,
            largest_before: 4,
            involuntary_switches: 2,
            memory_in_use_bytes: 300 << 20,
            first_run_ms: 9.0,
        };
        let fit = LatencyFit { a_ms: 1.0, c_ms: 1.0, r2: 1.0 };
        let features = WarmupFeatures::of(&sample, &fit, &[point(2, 40), point(4, 60), point(8, 100)]);
        assert_eq!(features.batch_memory_bytes, 80 << 20);
        assert_eq!((features.memory_in_use_bytes, features.warm_ms), (300 << 20, 7.0));
        assert_eq!(WarmupFeatures::of(&sample, &fit, &[]).batch_memory_bytes, 0);
    }

    use rand::{Rng, SeedableRng};

    /// First runs of two variants whose time depends on the batch size, on whether the
    /// session already ran a batch as large (buffers to grow), and on preemption.
    fn examples() -> Vec<Example> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let mut examples = Vec::new();
        for (a, c) in [(2.0, 1.0), (5.0, 3.0)] {
            for _ in 0..6 {
                let mut largest_before = 0;
                for b in [3u32, 1, 8, 5, 2, 7, 4, 6] {
                    let warm_ms = a * f64::from(b) + c;
                    let switches = rng.random_range(0..20u64);
                    let growth = if b > largest_before { 0.6 * warm_ms } else { 0.0 };
                    let features = WarmupFeatures {
                        batch_size: b,
                        largest_before,
                        involuntary_switches: switches,
                        memory_in_use_bytes: (100 + 10 * u64::from(largest_before)) << 20,
                        batch_memory_bytes: (10 * u64::from(b)) << 20,
                        warm_ms,
                    };
                    examples.push((features, warm_ms + growth + 0.3 * switches as f64));
                    largest_before = largest_before.max(b);
                }
            }
        }
        examples
    }

    #[test]
    fn predicts_held_out_batch_sizes_far_better_than_the_mean() {
        let examples = examples();
        let held_out = [3, 5, 6, 7];
        let forest = held_out_error(&examples, &held_out).unwrap();
        assert_eq!(forest.tested_on, 2 * 6 * 4);
        assert_eq!(forest.trained_on, 2 * 6 * 4);
        let train: Vec<f64> = examples.iter().filter(|e| !held_out.contains(&e.0.batch_size)).map(|e| e.1).collect();
        let mean = train.iter().sum::<f64>() / train.len() as f64;
        let test: Vec<f64> = examples.iter().filter(|e| held_out.contains(&e.0.batch_size)).map(|e| e.1).collect();
        let baseline = mape(&vec![mean; test.len()], test.into_iter());
        assert!(forest.mape < baseline / 2.0, "forest {:.1} % against the mean's {baseline:.1} %", forest.mape);
    }

    #[test]
    fn too_few_examples_no_warm_latency_or_nothing_held_out_is_an_error() {
        assert!(WarmupPredictor::train(&examples()[..1]).is_err());
        assert!(held_out_error(&examples(), &[64]).is_err());
        let mut unfit = examples();
        unfit[0].0.warm_ms = 0.0;
        assert!(WarmupPredictor::train(&unfit).is_err());
    }

    #[test]
    fn mape_is_the_mean_relative_error_in_percent() {
        assert!((mape(&[110.0, 45.0], [100.0, 50.0].into_iter()) - 10.0).abs() < 1e-9);
    }
}
