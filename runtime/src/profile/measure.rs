//! A whole profile: the sweep, the fit, and maximal throughput through the real
//! batching path; taken from the store when one was measured for the same key.

use std::sync::Arc;
use std::time::Duration;

use modelless_policy_abi::{BatchPoint, Profile, ProfileKey, Throughput};

use super::first_run::sample_first_runs;
use super::fit::{fit_latency_line, trusted_fit};
use super::load::closed_loop;
use super::memory::MemoryProbe;
use super::store::ProfileStore;
use super::sweep::{SweepConfig, SweepEvent, sweep};
use crate::backend::BackendFactory;
use crate::batching::BatchingConfig;
use crate::error::{BackendError, Error};
use crate::model::{Model, StartOptions};
use crate::warmup::WarmupConfig;

/// How to profile.
#[derive(Clone, Debug)]
pub struct ProfileOptions {
    /// The sweep.
    pub sweep: SweepConfig,
    /// How long the closed loop that measures maximal throughput runs; zero skips it.
    pub throughput_for: Duration,
    /// Fresh sessions that each run every batch size up to the largest swept once, in
    /// a random order, for the warm-up predictor; zero skips them.
    pub first_run_sessions: usize,
    /// Measure again even if the store has a profile for the same key.
    pub force: bool,
}

impl ProfileOptions {
    /// The default sweep up to `max_batch_size`, 3 sessions of first runs, and 5 s of
    /// closed loop.
    pub fn new(max_batch_size: usize) -> Self {
        ProfileOptions {
            sweep: SweepConfig::new(max_batch_size),
            throughput_for: Duration::from_secs(5),
            first_run_sessions: 3,
            force: false,
        }
    }
}

/// Progress of a profile, for progress bars.
#[derive(Clone, Debug, PartialEq)]
pub enum ProfileEvent {
    /// The stored profile matched and is used as it is.
    Reused,
    /// A step of the sweep.
    Sweep(SweepEvent),
    /// First runs in fresh sessions: `done` of `total`.
    FirstRuns {
        /// Runs done.
        done: usize,
        /// Runs planned.
        total: usize,
    },
    /// Closed-loop throughput: seconds done of the total.
    Throughput {
        /// Seconds done.
        done: f64,
        /// Seconds planned.
        total: f64,
    },
}

/// Profiles the model `name` (one backend made by `factory`) for `key`, or returns the
/// profile `store` has for that key. A new profile is saved to the store.
pub fn profile_model(
    name: &str,
    factory: BackendFactory,
    key: ProfileKey,
    store: &ProfileStore,
    options: &ProfileOptions,
    probe: &dyn MemoryProbe,
    on_event: &mut dyn FnMut(ProfileEvent),
) -> Result<Profile, Error> {
    if !options.force
        && let Some(profile) = store.load(name, &key)
    {
        on_event(ProfileEvent::Reused);
        return Ok(profile);
    }
    let failed = |source: BackendError| Error::Backend { model: name.to_string(), source: Arc::new(source) };
    let result = {
        let mut backend =
            factory().map_err(|source| Error::Load { model: name.to_string(), source: Arc::new(source) })?;
        sweep(backend.as_mut(), &options.sweep, probe, &mut |e| on_event(ProfileEvent::Sweep(e))).map_err(failed)?
    };
    let largest = result.points.last().map_or(0, |p| p.batch_size as usize);
    let sizes: Vec<usize> = (1..=largest).collect();
    let first_runs = if options.first_run_sessions > 0 {
        sample_first_runs(&factory, &sizes, options.first_run_sessions, FIRST_RUN_SEED, probe, &mut |done, total| {
            on_event(ProfileEvent::FirstRuns { done, total })
        })
        .map_err(failed)?
    } else {
        Vec::new()
    };
    let warm: Vec<(f64, f64)> = result.points.iter().map(|p| (f64::from(p.batch_size), p.warm_p50_ms)).collect();
    let (fit, fit_refused) = trusted_fit(name, fit_latency_line(&warm).map(|line| line.latency()));
    let best = best_batch(&result.points);
    let max_throughput = match best {
        Some(batch) if !options.throughput_for.is_zero() => {
            let rate = max_throughput(name, factory, batch as usize, options.throughput_for, on_event)?;
            Some(Throughput { requests_per_s: rate, batch_size: batch })
        }
        _ => None,
    };
    let profile = Profile {
        key,
        points: result.points,
        fit,
        fit_refused,
        max_throughput,
        memory_budget_bytes: options.sweep.memory_budget_bytes,
        max_safe_batch: result.max_safe_batch,
        first_runs,
    };
    store
        .save(name, &profile)
        .map_err(|e| Error::io(format!("store the profile of `{name}` in"), store.path(name), e))?;
    Ok(profile)
}

/// Seeds the orders first runs take: the same on every machine, for comparable profiles.
const FIRST_RUN_SEED: u64 = 0x5eed;

fn per_second(batch_size: u32, latency_ms: f64) -> f64 {
    f64::from(batch_size) / latency_ms * 1e3
}

/// The batch size maximal throughput is measured at: the largest whose warm throughput
/// is within 10 % of the best. Where the sweep cannot tell sizes apart (on a CPU the
/// cost per batch is small), the serving path's own cost per batch, which the sweep
/// does not see, favours the larger.
fn best_batch(points: &[BatchPoint]) -> Option<u32> {
    let rate = |p: &BatchPoint| per_second(p.batch_size, p.warm_p50_ms);
    let best = points.iter().map(rate).fold(f64::NAN, f64::max);
    points.iter().filter(|p| rate(p) >= 0.9 * best).map(|p| p.batch_size).max()
}

/// Requests per second a model batching up to `batch` answers with twice that many
/// callers sending single-row requests: the queue always holds a full batch, so this
/// is the batching path at its best batch. The model is warmed up, and a short pass
/// warms the path before the measured one.
fn max_throughput(
    name: &str,
    factory: BackendFactory,
    batch: usize,
    duration: Duration,
    on_event: &mut dyn FnMut(ProfileEvent),
) -> Result<f64, Error> {
    let options = StartOptions { warmup: WarmupConfig::default(), ..StartOptions::default() };
    let model = Model::start_with(name, factory, 1, BatchingConfig::default().with_max_batch_size(batch), options)?;
    closed_loop(&model, 2 * batch, duration / 5, &mut |_, _| {})?;
    closed_loop(&model, 2 * batch, duration, &mut |done, total| on_event(ProfileEvent::Throughput { done, total }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::fake::{BatchLog, FakeBackend, FakeConfig};

    fn options() -> ProfileOptions {
        let mut options = ProfileOptions::new(8);
        options.sweep = options.sweep.with_warm_runs(2);
        options.throughput_for = Duration::from_millis(300);
        options
    }

    fn point(batch_size: u32, warm_p50_ms: f64) -> BatchPoint {
        BatchPoint {
            batch_size,
            first_run_ms: warm_p50_ms,
            warm_p50_ms,
            warm_p99_ms: warm_p50_ms,
            warm_runs: 1,
            memory_bytes: None,
        }
    }

    #[test]
    fn the_best_batch_is_the_largest_within_ten_percent_of_the_best_rate() {
        // 1000, 1905, 1951 and 1860 rows a second.
        let points = [point(1, 1.0), point(2, 1.05), point(4, 2.05), point(8, 4.3)];
        assert_eq!(best_batch(&points), Some(8));
        // A batch of 8 at 1455 rows a second is too far below the best.
        let points = [point(1, 1.0), point(2, 1.05), point(4, 2.05), point(8, 5.5)];
        assert_eq!(best_batch(&points), Some(4));
        assert_eq!(best_batch(&[]), None);
    }

    #[test]
    fn a_profile_is_measured_once_then_reused_until_forced() {
        let dir = tempfile::tempdir().unwrap();
        let store = ProfileStore::new(dir.path().join("profiles"));
        let log = BatchLog::default();
        let fake = FakeConfig {
            per_batch: Duration::from_millis(2),
            per_row: Duration::from_millis(1),
            ..FakeConfig::default()
        };
        let factory = FakeBackend::factory(fake, log.clone());
        let key = ProfileKey { model_sha256: "ab".into(), device: "cpu".into(), settings: "{}".into() };
        let mut events = Vec::new();
        let profile =
            profile_model("fake", factory.clone(), key.clone(), &store, &options(), &log, &mut |e| events.push(e))
                .unwrap();
        // A line through every size measured; how well it fits is the machine's (sleeps
        // overshoot beside other tests), and a poor one is refused with its R² named.
        let sizes: Vec<u32> = profile.points.iter().map(|p| p.batch_size).collect();
        assert_eq!(sizes, [1, 2, 4, 8], "{:?}", profile.points);
        match (&profile.fit, &profile.fit_refused) {
            (Some(fit), None) => assert!(fit.is_trusted(), "{fit:?}"),
            (None, Some(why)) => assert!(why.contains("R²"), "{why}"),
            other => panic!("a fit and a refusal together, or neither: {other:?}"),
        }
        assert_eq!(profile.first_runs.len(), 3 * 8, "3 sessions of first runs at sizes 1 to 8");
        let throughput = profile.max_throughput.unwrap();
        assert!(throughput.requests_per_s > 0.0 && throughput.batch_size == 8, "{throughput:?}");
        let ran = log.sizes().len();
        let again =
            profile_model("fake", factory.clone(), key.clone(), &store, &options(), &log, &mut |e| events.push(e))
                .unwrap();
        assert_eq!(again, profile);
        assert_eq!(log.sizes().len(), ran, "reused without running anything");
        assert!(events.contains(&ProfileEvent::Reused));
        let forced = ProfileOptions { force: true, ..options() };
        profile_model("fake", factory, key, &store, &forced, &log, &mut |_| {}).unwrap();
        assert!(log.sizes().len() > ran);
    }

    #[test]
    fn a_model_that_runs_one_row_at_a_time_still_gets_a_latency_line() {
        // Without a line a policy takes the variant for unprofiled and never picks it.
        let dir = tempfile::tempdir().unwrap();
        let store = ProfileStore::new(dir.path().join("profiles"));
        let log = BatchLog::default();
        let fake = FakeConfig { per_batch: Duration::from_millis(3), ..FakeConfig::default() };
        let key = ProfileKey { model_sha256: "cd".into(), device: "cpu".into(), settings: "{}".into() };
        let one = ProfileOptions { throughput_for: Duration::ZERO, first_run_sessions: 0, ..ProfileOptions::new(1) };
        let profile =
            profile_model("fake", FakeBackend::factory(fake, log.clone()), key, &store, &one, &log, &mut |_| {})
                .unwrap();
        assert_eq!(profile.points.len(), 1);
        let fit = profile.fit.expect("a line through the origin and the one size measured");
        assert_eq!(fit.c_ms, 0.0);
        assert!((fit.predict_ms(1) - profile.points[0].warm_p50_ms).abs() < 1e-9, "{fit:?}");
    }

    #[test]
    fn a_model_whose_batch_dimension_is_fixed_is_priced_by_its_batch_of_one_whatever_its_config_batches() {
        // Swept at 1, 2, 4 and 8 it would run one row under each name: a flat line,
        // refused as noise, and a variant with no price that a policy never picks.
        let dir = tempfile::tempdir().unwrap();
        let store = ProfileStore::new(dir.path().join("profiles"));
        let log = BatchLog::default();
        let fake = FakeConfig { dynamic_batch: false, per_batch: Duration::from_millis(3), ..FakeConfig::default() };
        let key = ProfileKey { model_sha256: "ef".into(), device: "cpu".into(), settings: "{}".into() };
        let eight = ProfileOptions { throughput_for: Duration::ZERO, first_run_sessions: 0, ..options() };
        let profile =
            profile_model("fixed", FakeBackend::factory(fake, log.clone()), key, &store, &eight, &log, &mut |_| {})
                .unwrap();
        assert_eq!(profile.points.iter().map(|p| p.batch_size).collect::<Vec<_>>(), [1]);
        assert_eq!(profile.fit_refused, None);
        let fit = profile.fit.expect("a line through the origin and the batch of one");
        assert!(fit.is_trusted() && fit.c_ms == 0.0, "{fit:?}");
        assert!((fit.predict_ms(1) - profile.points[0].warm_p50_ms).abs() < 1e-9, "{fit:?}");
    }
}
