//! Load generation and what a run comes to: open-loop arrivals following a pattern
//! (constant, linear, exponential, or a reshaped trace), sent to a runtime in this
//! process or to a KServe V2 endpoint, with a log of every request, a summary, a
//! timeline and plots. `modelless loadgen` drives it from the command line.
//!
//! ```no_run
//! # async fn run(runtime: std::sync::Arc<modelless::Runtime>) -> Result<(), modelless_lab::load::LoadError> {
//! use modelless_lab::load::{InProcess, LoadSpec, run};
//! let spec = LoadSpec::from_file("load.toml")?;
//! let target = InProcess::new(runtime, &spec)?;
//! let result = run(std::sync::Arc::new(target), &spec, &mut |_| {}).await?;
//! println!("{:#?}", result.summaries());
//! # Ok(())
//! # }
//! ```

mod arrivals;
mod bounds;
mod closed;
mod grpc;
pub mod images;
mod in_process;
mod output;
pub mod pattern;
pub mod plot;
pub mod record;
mod runner;
pub mod runs;
pub mod stages;
pub mod summary;
pub mod trace;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use arrivals::{arrivals, stream_seed};
pub use closed::{MAX_CONCURRENCY, run_closed};
pub use grpc::Grpc;
pub use images::ImageSet;
pub use in_process::{InProcess, RequestMaker};
pub use pattern::Pattern;
pub use record::{Outcome, RequestRecord, Stages};
pub use runner::{Answer, Progress, RunResult, Target, run};
pub use runs::{RunsMeter, SecondRuns, read_runs_csv, runs_csv};
pub use stages::StageBreakdown;
pub use summary::{Allocation, Sample, Second, Summary, TaskTarget, markdown_table};
pub use trace::{SyntheticTrace, TraceConfig};

/// What went wrong with a load spec, a trace or a run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// The spec or a trace makes no sense.
    #[error("invalid load: {0}")]
    Invalid(String),
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The target refused to take part (unknown task, unreachable endpoint).
    #[error("target: {0}")]
    Target(String),
}

impl LoadError {
    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        LoadError::Invalid(message.into())
    }

    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        LoadError::Io { path: path.to_path_buf(), source }
    }
}

/// The longest run a load may describe, s (a week).
pub const MAX_RUN_S: u32 = 7 * 86_400;
/// The most requests a run may send.
pub const MAX_REQUESTS: f64 = 50e6;
/// The longest latency SLO, ms (a day).
pub const MAX_SLO_MS: f64 = 86_400_000.0;

/// A run: the tasks to load, each with its pattern and SLO.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadSpec {
    /// Seed of the arrivals (each task draws its own stream from it).
    #[serde(default)]
    pub seed: u64,
    /// The tasks, each loaded at once.
    pub tasks: Vec<TaskLoad>,
    /// Every task's rates multiplied by this: the same load, relative to a machine
    /// faster or slower than the one its rates were written for.
    #[serde(default = "unscaled")]
    pub rate_scale: f64,
}

fn unscaled() -> f64 {
    1.0
}

/// One task's load.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskLoad {
    /// The task (or, over KServe, any model name).
    pub task: String,
    /// Requests per second over the run.
    pub pattern: Pattern,
    /// Latency SLO of its requests, ms (default: the task's configured one).
    #[serde(default)]
    pub slo_ms: Option<f64>,
    /// Least accuracy its requests ask for.
    #[serde(default)]
    pub min_accuracy: Option<f64>,
    /// Seconds after the start of the run before its pattern begins.
    #[serde(default)]
    pub start_s: u32,
}

impl TaskLoad {
    /// Its latency SLO: the load's, else `configured` (the task's own), in ms.
    pub fn slo_ms_or(&self, configured: Option<f64>) -> Result<f64, LoadError> {
        let slo_ms = self.slo_ms.or(configured).ok_or_else(|| {
            LoadError::invalid(format!("task `{}` has no latency SLO: set `slo_ms` in the load", self.task))
        })?;
        if !(slo_ms > 0.0 && slo_ms <= MAX_SLO_MS) {
            return Err(LoadError::invalid(format!(
                "task `{}`: `slo_ms` must be in (0, {MAX_SLO_MS}], not {slo_ms}",
                self.task
            )));
        }
        Ok(slo_ms)
    }
}

/// One request to send: when (s from the start) and to which task of the spec.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Arrival {
    /// Seconds from the start of the run.
    pub at_s: f64,
    /// Index of the task in the spec.
    pub task: usize,
}

impl LoadSpec {
    /// Reads a spec from TOML; a trace `file` is taken relative to the spec's folder.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, LoadError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| LoadError::io(path, e))?;
        let mut spec: LoadSpec =
            toml::from_str(&text).map_err(|e| LoadError::invalid(format!("{}: {e}", path.display())))?;
        let base = path.parent().unwrap_or(Path::new("."));
        for task in &mut spec.tasks {
            if let Pattern::Trace(TraceConfig { file: Some(file), .. }) = &mut task.pattern {
                *file = base.join(&*file);
            }
        }
        Ok(spec)
    }

    /// Each task's rates, offset by its start.
    pub fn rates(&self) -> Result<Vec<Vec<f64>>, LoadError> {
        if self.tasks.is_empty() {
            return Err(LoadError::invalid("a load needs at least one task"));
        }
        if !(self.rate_scale.is_finite() && self.rate_scale > 0.0) {
            return Err(LoadError::invalid(format!("rate_scale must be positive, not {}", self.rate_scale)));
        }
        self.tasks
            .iter()
            .map(|task| {
                bounds::within_run("`start_s`", task.start_s as usize)?;
                let mut rates = vec![0.0; task.start_s as usize];
                rates.extend(task.pattern.rates()?.into_iter().map(|rate| rate * self.rate_scale));
                Ok(rates)
            })
            .collect()
    }

    /// Every request of the run, in time order, and the run's length (until the last
    /// task's pattern ends).
    pub fn schedule(&self) -> Result<Schedule, LoadError> {
        let rates = self.rates()?;
        let expected: f64 = rates.iter().flatten().sum();
        if expected > MAX_REQUESTS {
            return Err(LoadError::invalid(format!(
                "the run sends {expected:.0} requests, over the most of {MAX_REQUESTS}"
            )));
        }
        let mut arrivals: Vec<Arrival> = rates
            .iter()
            .enumerate()
            .flat_map(|(task, rates)| {
                arrivals(rates, stream_seed(self.seed, task)).into_iter().map(move |at_s| Arrival { at_s, task })
            })
            .collect();
        arrivals.sort_by(|a, b| a.at_s.total_cmp(&b.at_s));
        let duration_s = rates.iter().map(Vec::len).max().unwrap_or(0) as u32;
        Ok(Schedule { arrivals, duration_s })
    }
}

/// The requests of a run and its length.
#[derive(Clone, Debug, PartialEq)]
pub struct Schedule {
    /// Every request, in time order.
    pub arrivals: Vec<Arrival>,
    /// Length of the run, s.
    pub duration_s: u32,
}

#[cfg(test)]
mod tests {
    use super::*;
    use modelless_runtime::fuzzing::{PeakAllocator, fuzz};
    use proptest::prelude::*;

    #[test]
    fn a_spec_reads_from_toml_and_schedules_every_task_in_time_order() {
        let spec: LoadSpec = toml::from_str(
            r#"
            seed = 3
            [[tasks]]
            task = "a"
            slo_ms = 100
            pattern = { kind = "constant", rate = 50, duration_s = 4 }
            [[tasks]]
            task = "b"
            start_s = 2
            pattern = { kind = "linear", start = 10, step = 10, interval_s = 1, stop = 40 }
            "#,
        )
        .unwrap();
        let Schedule { arrivals: schedule, duration_s } = spec.schedule().unwrap();
        assert_eq!(duration_s, 6, "b starts at 2 and runs 4 s");
        assert!(schedule.windows(2).all(|w| w[0].at_s <= w[1].at_s));
        assert!(schedule.iter().filter(|a| a.task == 1).all(|a| a.at_s >= 2.0), "b waits for its start");
        let a = schedule.iter().filter(|a| a.task == 0).count() as f64;
        assert!((a - 200.0).abs() < 4.0 * 200f64.sqrt(), "{a} requests for a");
        assert_eq!(schedule, spec.schedule().unwrap().arrivals, "seeded");
        assert!(
            toml::from_str::<LoadSpec>(
                "[[tasks]]\ntask = \"a\"\npattern = { kind = \"constant\", rate = 1, duration_s = 1 }\nslo = 3"
            )
            .is_err()
        );
    }

    #[test]
    fn a_trace_file_is_found_beside_the_spec() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("trace.csv"), "5\n6\n7\n").unwrap();
        std::fs::write(
            dir.path().join("load.toml"),
            "[[tasks]]\ntask = \"a\"\n[tasks.pattern]\nkind = \"trace\"\nfile = \"trace.csv\"\n",
        )
        .unwrap();
        let mut spec = LoadSpec::from_file(dir.path().join("load.toml")).unwrap();
        assert_eq!(spec.rates().unwrap(), vec![vec![5.0, 6.0, 7.0]]);
        spec.rate_scale = 1.5;
        assert_eq!(spec.rates().unwrap(), vec![vec![7.5, 9.0, 10.5]], "scaled");
        for wrong in [0.0, -1.0, f64::NAN] {
            spec.rate_scale = wrong;
            assert!(matches!(spec.rates(), Err(LoadError::Invalid(m)) if m.contains("rate_scale")), "{wrong}");
        }
    }

    #[test]
    fn the_allocation_experiments_two_tasks_never_burst_at_once() {
        for load in ["two-tasks-load.toml", "two-tasks-shapes-load.toml"] {
            let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../experiments").join(load);
            never_burst_at_once(&LoadSpec::from_file(path).unwrap().rates().unwrap());
        }
    }

    fn never_burst_at_once(rates: &[Vec<f64>]) {
        assert_eq!(rates.len(), 2);
        let base: Vec<f64> = rates.iter().map(|r| r.iter().copied().fold(f64::INFINITY, f64::min)).collect();
        let bursting = |task: usize, second: usize| rates[task][second] > base[task];
        let seconds = rates[0].len().min(rates[1].len());
        assert!((0..seconds).any(|s| bursting(0, s)) && (0..seconds).any(|s| bursting(1, s)), "both burst");
        assert!((0..seconds).all(|s| !(bursting(0, s) && bursting(1, s))), "never together");
    }

    /// A TOML float, `inf` and `nan` included.
    fn toml_float(x: f64) -> String {
        if x.is_nan() {
            "nan".into()
        } else if x.is_infinite() {
            format!("{}inf", if x < 0.0 { "-" } else { "" })
        } else {
            format!("{x:?}")
        }
    }

    fn hostile_float() -> impl Strategy<Value = f64> {
        prop_oneof![3 => 0.0f64..500.0, 1 => any::<f64>(), 1 => Just(f64::NAN), 1 => Just(1e-300), 1 => Just(-1.0)]
    }

    fn hostile_u32() -> impl Strategy<Value = u32> {
        prop_oneof![3 => 0u32..100, 1 => any::<u32>()]
    }

    /// A load file: each kind of pattern with hostile numbers, perhaps cut short.
    fn load_file() -> impl Strategy<Value = String> {
        let f = hostile_float;
        let pattern = prop_oneof![
            (f(), hostile_u32()).prop_map(|(rate, d)| format!(
                r#"{{ kind = "constant", rate = {}, duration_s = {d} }}"#,
                toml_float(rate)
            )),
            (f(), f(), hostile_u32(), f()).prop_map(|(start, step, i, stop)| format!(
                r#"{{ kind = "linear", start = {}, step = {}, interval_s = {i}, stop = {} }}"#,
                toml_float(start),
                toml_float(step),
                toml_float(stop)
            )),
            (f(), f(), hostile_u32(), f()).prop_map(|(start, factor, i, stop)| format!(
                r#"{{ kind = "exponential", start = {}, factor = {}, interval_s = {i}, stop = {} }}"#,
                toml_float(start),
                toml_float(factor),
                toml_float(stop)
            )),
            (hostile_u32(), f(), hostile_u32(), f()).prop_map(|(d, mean, spikes, noise)| format!(
                r#"{{ kind = "trace", synthetic = {{ duration_s = {d}, mean = {}, spikes = {spikes}, noise = {} }} }}"#,
                toml_float(mean),
                toml_float(noise)
            )),
        ];
        (any::<u64>(), f(), pattern, f(), hostile_u32(), any::<prop::sample::Index>(), any::<bool>()).prop_map(
            |(seed, scale, pattern, slo, start, cut, whole)| {
                let text = format!(
                    "seed = {seed}\nrate_scale = {}\n[[tasks]]\ntask = \"t\"\nslo_ms = {}\nstart_s = {start}\npattern = {pattern}\n",
                    toml_float(scale),
                    toml_float(slo)
                );
                if whole { text } else { text[..cut.index(text.len() + 1)].to_string() }
            },
        )
    }

    #[test]
    fn fuzz_load_files() {
        fuzz("load-file", load_file(), |text| {
            PeakAllocator::reset();
            let Ok(spec) = toml::from_str::<LoadSpec>(&text) else { return Ok(()) };
            // Runs of up to MAX_REQUESTS are allowed; drawing that many arrivals takes
            // seconds, so only small ones are drawn here.
            let small = spec.rates().is_ok_and(|rates| rates.iter().flatten().sum::<f64>() <= 1e5);
            let schedule = if small {
                spec.schedule()
            } else {
                spec.rates().map(|_| Schedule { arrivals: Vec::new(), duration_s: 0 })
            };
            let slo = spec.tasks[0].slo_ms_or(None).map(|ms| std::time::Duration::from_secs_f64(ms / 1e3));
            let largest = PeakAllocator::largest();
            prop_assert!(largest <= 256 << 20, "a load file of {} bytes allocated {largest} at once", text.len());
            if let Ok(schedule) = schedule {
                prop_assert!(schedule.arrivals.len() as f64 <= 2.0 * MAX_REQUESTS);
            }
            prop_assert!(slo.is_ok() || spec.tasks[0].slo_ms.is_some_and(|ms| !(ms > 0.0 && ms <= MAX_SLO_MS)));
            Ok(())
        });
    }
}
