//! The trace a fleet is run on: one task's requests per second, from a load file
//! (`modelless loadgen --load` reads the same, and draws the same arrivals) or a CSV
//! of requests per second; and what it asks of the fleet: the replicas its peak needs,
//! and those its first minute needs.

use std::path::Path;

use crate::load::trace::read_csv;
use crate::load::{LoadError, LoadSpec, arrivals, stream_seed};

/// One task's trace.
#[derive(Clone, Debug, PartialEq)]
pub struct FleetTrace {
    /// The task it loads.
    pub task: String,
    /// Requests per second, one figure a second.
    pub rates: Vec<f64>,
    /// Its latency target, where the load file sets one.
    pub slo_ms: Option<f64>,
    /// Seed of its arrivals.
    pub seed: u64,
}

impl FleetTrace {
    /// Reads `path`: a CSV of requests per second (`.csv`; for `task`, seeded with
    /// `seed`), or a load file, of which it takes `task`'s entry (the only one, when
    /// `task` is `None`). Rates are multiplied by `rate_scale` (and the file's own).
    pub fn read(path: &Path, task: Option<&str>, seed: u64, rate_scale: f64) -> Result<Self, LoadError> {
        if !(rate_scale.is_finite() && rate_scale > 0.0) {
            return Err(LoadError::Invalid(format!("the rate scale must be positive, not {rate_scale}")));
        }
        if path.extension().is_some_and(|e| e.eq_ignore_ascii_case("csv")) {
            let task = task.ok_or_else(|| LoadError::Invalid("a CSV trace needs its task named".into()))?;
            let rates = read_csv(path)?.into_iter().map(|r| r * rate_scale).collect();
            return Ok(FleetTrace { task: task.to_string(), rates, slo_ms: None, seed });
        }
        let mut spec = LoadSpec::from_file(path)?;
        spec.rate_scale *= rate_scale;
        let index = match task {
            Some(task) => spec.tasks.iter().position(|t| t.task == task),
            None if spec.tasks.len() == 1 => Some(0),
            None => None,
        }
        .ok_or_else(|| {
            let names: Vec<&str> = spec.tasks.iter().map(|t| t.task.as_str()).collect();
            LoadError::Invalid(format!("{}: name one task of {names:?}", path.display()))
        })?;
        let mut rates = spec.rates()?;
        Ok(FleetTrace {
            task: spec.tasks[index].task.clone(),
            rates: rates.swap_remove(index),
            slo_ms: spec.tasks[index].slo_ms,
            // The load generator's own stream for this task: the same requests.
            seed: stream_seed(spec.seed, index),
        })
    }

    /// Its length, s.
    pub fn duration_s(&self) -> u32 {
        self.rates.len() as u32
    }

    /// Every request's arrival, s from the start.
    pub fn arrivals(&self) -> Vec<f64> {
        arrivals(&self.rates, self.seed)
    }

    /// Replicas of `capacity_per_s` each that its busiest second needs.
    pub fn peak_replicas(&self, capacity_per_s: f64) -> u32 {
        replicas_for(self.rates.iter().copied().fold(0.0, f64::max), capacity_per_s)
    }

    /// Replicas that its first minute needs on average: where every autoscaler starts.
    pub fn opening_replicas(&self, capacity_per_s: f64) -> u32 {
        let minute = &self.rates[..self.rates.len().min(60)];
        replicas_for(minute.iter().sum::<f64>() / minute.len().max(1) as f64, capacity_per_s)
    }
}

/// Replicas of `capacity_per_s` each that `rate` needs, at least one.
fn replicas_for(rate: f64, capacity_per_s: f64) -> u32 {
    if capacity_per_s > 0.0 { (rate / capacity_per_s).ceil().clamp(1.0, f64::from(u32::MAX)) as u32 } else { 1 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_load_file_gives_its_task_the_arrivals_the_load_generator_would_send() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("load.toml");
        std::fs::write(
            &path,
            "seed = 5\n[[tasks]]\ntask = \"a\"\nslo_ms = 80\n\
             pattern = { kind = \"linear\", start = 100, step = 100, interval_s = 30, stop = 300 }\n\
             [[tasks]]\ntask = \"b\"\npattern = { kind = \"constant\", rate = 1, duration_s = 5 }\n",
        )
        .unwrap();
        let trace = FleetTrace::read(&path, Some("a"), 0, 2.0).unwrap();
        assert_eq!((trace.duration_s(), trace.slo_ms), (90, Some(80.0)));
        assert_eq!((trace.rates[0], trace.rates[89]), (200.0, 600.0), "scaled");
        let spec = LoadSpec { rate_scale: 2.0, ..LoadSpec::from_file(&path).unwrap() };
        let sent: Vec<f64> = spec.schedule().unwrap().arrivals.iter().filter(|a| a.task == 0).map(|a| a.at_s).collect();
        assert_eq!(trace.arrivals(), sent);
        assert_eq!((trace.peak_replicas(100.0), trace.opening_replicas(100.0)), (6, 3), "600/s; 200 and 400/s");
        assert!(FleetTrace::read(&path, None, 0, 1.0).is_err(), "two tasks: which?");
    }

    #[test]
    fn a_csv_trace_takes_its_task_from_the_caller() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.csv");
        std::fs::write(&path, "second,requests_per_s\n0,10\n1,30\n").unwrap();
        let trace = FleetTrace::read(&path, Some("t"), 1, 1.0).unwrap();
        assert_eq!((trace.task.as_str(), &trace.rates[..]), ("t", &[10.0, 30.0][..]));
        assert!(FleetTrace::read(&path, None, 1, 1.0).is_err());
    }
}
