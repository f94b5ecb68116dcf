//! Helpers the benchmarks share: where the generated models are, where results go.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// `.modelless/models` in the working directory or the nearest of its ancestors.
pub fn models_dir() -> Result<PathBuf> {
    let cwd = std::env::current_dir()?;
    cwd.ancestors()
        .map(|d| d.join(".modelless/models"))
        .find(|p| p.join("manifest.json").is_file())
        .context("models not found under .modelless/models: run scripts/setup/base.sh")
}

/// `<target>/modelless-bench`: results files of the benchmarks.
pub fn output_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::current_exe().ok().and_then(|exe| exe.ancestors().nth(3).map(Path::to_path_buf)));
    target.unwrap_or_else(|| PathBuf::from("target")).join("modelless-bench")
}

/// Poisson arrivals at `rate` per second for `duration`, from `seed`: at each one,
/// `request` runs on a thread of its own with the arrival's scheduled instant, so that
/// a slow answer never delays the next arrival. Returns once every request is done.
pub fn poisson_arrivals(
    rate: f64,
    duration: std::time::Duration,
    seed: u64,
    request: impl Fn(std::time::Instant) + Clone + Send + 'static,
) {
    use rand::SeedableRng;
    use rand_distr::{Distribution, Exp};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let gaps = Exp::new(rate).unwrap_or_else(|_| unreachable!("rate is positive"));
    let start = std::time::Instant::now();
    let mut at = std::time::Duration::ZERO;
    let mut threads = Vec::new();
    loop {
        at += std::time::Duration::from_secs_f64(gaps.sample(&mut rng));
        if at >= duration {
            break;
        }
        let scheduled = start + at;
        if let Some(wait) = scheduled.checked_duration_since(std::time::Instant::now()) {
            std::thread::sleep(wait);
        }
        let request = request.clone();
        threads.push(std::thread::spawn(move || request(scheduled)));
    }
    threads.into_iter().for_each(|t| drop(t.join()));
}
