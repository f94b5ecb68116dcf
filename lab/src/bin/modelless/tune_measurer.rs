//! How `tune` measures a setting: in a `modelless tune-measure` process of its own
//! (ONNX Runtime's threads are set once per process, and no evaluation inherits
//! another's caches), for `--seconds` after its warm-up.
//!
//! With `--paired` (closed-loop objectives), the reference (the configured default)
//! instead stays loaded in a process of its own for the whole run, and each
//! candidate's one-second slices alternate with the reference's (candidate first in
//! one pair, reference first in the next, so that a steady drift falls on both
//! alike). A candidate's cost is then the median of its slices' ratios to the
//! reference's, times the reference's level when it was first measured. That cancels
//! a drift that slows every setting alike; where a busy host slows settings unlike
//! the default more or less than it, the ratio carries the difference, and on a
//! 2-core VM it made remeasured settings spread more, not less.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use modelless_lab::tune::ServingSetting;

use modelless_lab::stats::median;

use crate::tune::Objective;
use crate::tune_measure::Measured;

/// How long a slice lasts, s.
const SLICE_SECONDS: u32 = 1;

/// What is measured: a variant under an objective, against a reference setting.
pub struct Bench<'a> {
    pub variant: &'a str,
    pub objective: &'a Objective,
    /// The setting every closed-loop measurement is paired with.
    pub reference: &'a ServingSetting,
}

/// Runs measurements in child processes.
pub struct Measurer {
    /// This program, found once: a rebuild replacing the file mid-run leaves the
    /// running process's own path dangling.
    pub exe: PathBuf,
    pub config: PathBuf,
    pub task: String,
    /// Seconds each setting is measured (in slices, when paired).
    pub seconds: u32,
    pub warmup_seconds: u32,
    pub image_sizes: String,
    /// Whether closed-loop measurements are paired with the reference (`--paired`).
    pub paired: bool,
    /// The reference's process, kept between measurements of one bench.
    pub reference: RefCell<Option<Reference>>,
}

/// The reference's process and its level.
pub struct Reference {
    /// Which bench it serves.
    key: String,
    /// Its process, started when first needed and again after it failed.
    child: Option<SliceChild>,
    /// Its cost when first measured: what ratios to it are scaled by.
    level: Option<f64>,
}

impl Measurer {
    /// The objective's cost of `setting`, or why it could not be had.
    pub fn cost(&self, bench: &Bench, setting: &ServingSetting) -> Result<f64, String> {
        self.cost_of(bench, setting, false)
    }

    /// The model alone's closed-loop latency (see [`crate::tune_reference`]), the
    /// better of one session on every core and one single-threaded session per core.
    pub fn model_alone_ms(&self, bench: &Bench, setting: &ServingSetting) -> Result<f64, String> {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut best: Option<f64> = None;
        let mut error = None;
        for (sessions, threads) in [(1, cores), (cores, 1)] {
            let arranged = ServingSetting { instances: sessions, intra_op_threads: threads, ..setting.clone() };
            match self.cost_of(bench, &arranged, true) {
                Ok(cost) => best = Some(best.map_or(cost, |b| b.min(cost))),
                Err(e) => error = Some(e),
            }
        }
        best.ok_or_else(|| error.unwrap_or_default())
    }

    /// Whether measurements under `objective` are paired with the reference: those in
    /// a closed loop, where pairing is on.
    pub fn pairs(&self, objective: &Objective) -> bool {
        self.paired && objective.concurrency.is_some()
    }

    fn cost_of(&self, bench: &Bench, setting: &ServingSetting, model_alone: bool) -> Result<f64, String> {
        if !self.pairs(bench.objective) {
            let mut candidate = self.start(bench, setting, model_alone)?;
            return bench.objective.cost(&candidate.slice(self.seconds)?);
        }
        let mut held = self.reference.borrow_mut();
        let key = format!("{}/{}/{:?}", bench.variant, bench.objective.slug(), bench.reference);
        let reference = match held.as_mut() {
            Some(reference) if reference.key == key => reference,
            _ => held.insert(Reference { key, child: None, level: None }),
        };
        let reference_child = match reference.child.as_mut() {
            Some(child) => child,
            None => reference.child.insert(self.start(bench, bench.reference, false)?),
        };
        let mut candidate = self.start(bench, setting, model_alone)?;
        let pairs = (self.seconds / SLICE_SECONDS).max(1) as usize;
        match measure_pairs(&mut candidate, reference_child, pairs, |m| bench.objective.cost(m)) {
            Ok(pairs) => {
                let references: Vec<f64> = pairs.iter().map(|p| p.reference).collect();
                let ratios: Vec<f64> = pairs.iter().map(Pair::ratio).collect();
                let level = *reference.level.get_or_insert_with(|| median(&references).unwrap_or(f64::NAN));
                Ok(median(&ratios).unwrap_or(f64::NAN) * level)
            }
            Err(Failed::Candidate(e)) => Err(e),
            Err(Failed::Reference(e)) => {
                // Started afresh for the next measurement; its level stays.
                reference.child = None;
                Err(format!("the reference failed: {e}"))
            }
        }
    }

    fn start(&self, bench: &Bench, setting: &ServingSetting, model_alone: bool) -> Result<SliceChild, String> {
        let setting_json = serde_json::to_string(setting).map_err(|e| e.to_string())?;
        let mut command = Command::new(&self.exe);
        command
            .arg("tune-measure")
            .arg("--config")
            .arg(&self.config)
            .args(["--task", &self.task, "--variant", bench.variant, "--setting", &setting_json])
            .args(["--warmup-seconds", &self.warmup_seconds.to_string()])
            .args(["--image-sizes", &self.image_sizes])
            .args(bench.objective.child_args())
            .args(model_alone.then_some("--model-alone"));
        // Loading and warming a variant takes seconds; a child far past that is stuck.
        SliceChild::start(command, Duration::from_secs(u64::from(self.warmup_seconds) * 3 + 180))
    }
}

/// One pair of slices: the candidate's cost and the reference's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pair {
    pub candidate: f64,
    pub reference: f64,
}

impl Pair {
    fn ratio(&self) -> f64 {
        self.candidate / self.reference
    }
}

/// Which side of a pairing failed.
#[derive(Debug, PartialEq)]
pub enum Failed {
    Candidate(String),
    Reference(String),
}

/// What runs slices on request: a measuring process, or a fake in tests.
pub trait Slicer {
    fn slice(&mut self, seconds: u32) -> Result<Measured, String>;
}

/// `pairs` pairs of slices, the candidate first in even pairs and the reference
/// first in odd ones, each slice's cost as `cost` says.
pub fn measure_pairs(
    candidate: &mut dyn Slicer,
    reference: &mut dyn Slicer,
    pairs: usize,
    cost: impl Fn(&Measured) -> Result<f64, String>,
) -> Result<Vec<Pair>, Failed> {
    let mut candidate_cost = || candidate.slice(SLICE_SECONDS).and_then(|m| cost(&m)).map_err(Failed::Candidate);
    let mut reference_cost = || reference.slice(SLICE_SECONDS).and_then(|m| cost(&m)).map_err(Failed::Reference);
    (0..pairs)
        .map(|i| {
            let (candidate, reference) = if i % 2 == 0 {
                let c = candidate_cost()?;
                (c, reference_cost()?)
            } else {
                let r = reference_cost()?;
                (candidate_cost()?, r)
            };
            Ok(Pair { candidate, reference })
        })
        .collect()
}

/// A `modelless tune-measure` process, loaded and warm, that measures a slice each
/// time it is asked. Killed when dropped.
pub struct SliceChild {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    /// Its last lines of standard error, for the reason it failed.
    errors: Arc<Mutex<VecDeque<String>>>,
}

impl SliceChild {
    /// Starts `command` and waits, at most `ready_within`, until it says it is ready.
    pub fn start(mut command: Command, ready_within: Duration) -> Result<Self, String> {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting the measurement: {e}"))?;
        // Both pipes are read on threads of their own: a stuck child holds them open,
        // and the time limits must still be kept.
        let (sender, lines) = channel();
        if let Some(out) = child.stdout.take() {
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines().map_while(Result::ok) {
                    if sender.send(line).is_err() {
                        break;
                    }
                }
            });
        }
        let errors = Arc::new(Mutex::new(VecDeque::new()));
        if let Some(err) = child.stderr.take() {
            let errors = errors.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(err).lines().map_while(Result::ok) {
                    if let Ok(mut kept) = errors.lock() {
                        kept.push_back(line);
                        if kept.len() > 20 {
                            kept.pop_front();
                        }
                    }
                }
            });
        }
        let stdin = child.stdin.take();
        let mut started = SliceChild { child, stdin, lines, errors };
        match started.next_line(ready_within)?.trim() {
            "ready" => Ok(started),
            other => Err(format!("the measurement said `{other}` instead of ready")),
        }
    }

    /// The next line it prints, within `limit`.
    fn next_line(&mut self, limit: Duration) -> Result<String, String> {
        match self.lines.recv_timeout(limit) {
            Ok(line) => Ok(line),
            Err(RecvTimeoutError::Timeout) => Err(format!("the measurement ran past {limit:?}: killed")),
            Err(RecvTimeoutError::Disconnected) => {
                let status = self.child.wait().map_or("unknown".into(), |s| s.to_string());
                let errors = self.errors.lock().map(|e| e.clone()).unwrap_or_default();
                let last = errors.iter().rev().find(|l| !l.trim().is_empty()).map_or("no message", String::as_str);
                Err(format!("the measurement failed ({status}): {last}"))
            }
        }
    }
}

impl Slicer for SliceChild {
    fn slice(&mut self, seconds: u32) -> Result<Measured, String> {
        let stdin = self.stdin.as_mut().ok_or("the measurement's input is closed")?;
        writeln!(stdin, "{seconds}").and_then(|_| stdin.flush()).map_err(|e| format!("asking for a slice: {e}"))?;
        let line = self.next_line(Duration::from_secs(u64::from(seconds) * 3 + 60))?;
        serde_json::from_str(&line).map_err(|e| format!("the measurement's answer `{line}`: {e}"))
    }
}

impl Drop for SliceChild {
    fn drop(&mut self) {
        // Closing its input ends it; killing it covers one that is stuck.
        self.stdin = None;
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Answers slices from a list of mean latencies, and records when it was asked.
    struct Scripted {
        means: VecDeque<Result<f64, String>>,
        name: &'static str,
        order: Arc<Mutex<Vec<&'static str>>>,
    }

    impl Slicer for Scripted {
        fn slice(&mut self, seconds: u32) -> Result<Measured, String> {
            assert_eq!(seconds, SLICE_SECONDS);
            self.order.lock().unwrap().push(self.name);
            let mean = self.means.pop_front().unwrap_or_else(|| Err("asked for more slices than scripted".into()))?;
            Ok(Measured { mean_ms: Some(mean), ..Measured::default() })
        }
    }

    fn scripted(name: &'static str, means: &[Result<f64, String>], order: &Arc<Mutex<Vec<&'static str>>>) -> Scripted {
        Scripted { means: means.iter().cloned().collect(), name, order: order.clone() }
    }

    fn mean(m: &Measured) -> Result<f64, String> {
        m.mean_ms.ok_or_else(|| "none".to_string())
    }

    #[test]
    fn slices_alternate_which_side_goes_first_and_the_ratio_cancels_a_slow_spell() {
        let order = Arc::new(Mutex::new(Vec::new()));
        // The machine is 1.5× slower during the second pair: both sides see it.
        let mut candidate = scripted("candidate", &[Ok(110.0), Ok(165.0), Ok(110.0)], &order);
        let mut reference = scripted("reference", &[Ok(100.0), Ok(150.0), Ok(100.0)], &order);
        let pairs = measure_pairs(&mut candidate, &mut reference, 3, mean).unwrap();
        assert_eq!(
            *order.lock().unwrap(),
            ["candidate", "reference", "reference", "candidate", "candidate", "reference"]
        );
        assert_eq!(pairs[1], Pair { candidate: 165.0, reference: 150.0 });
        let ratios: Vec<f64> = pairs.iter().map(Pair::ratio).collect();
        assert!(ratios.iter().all(|r| (r - 1.1).abs() < 1e-12), "{ratios:?}");
    }

    #[test]
    fn a_failed_slice_says_which_side_failed() {
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut candidate = scripted("candidate", &[Ok(10.0), Err("candidate crashed".into())], &order);
        let mut reference = scripted("reference", &[Ok(10.0), Ok(10.0)], &order);
        let failed = measure_pairs(&mut candidate, &mut reference, 3, mean).unwrap_err();
        assert_eq!(failed, Failed::Candidate("candidate crashed".into()));
        let mut candidate = scripted("candidate", &[Ok(10.0)], &order);
        let mut reference = scripted("reference", &[Err("reference crashed".into())], &order);
        let failed = measure_pairs(&mut candidate, &mut reference, 3, mean).unwrap_err();
        assert_eq!(failed, Failed::Reference("reference crashed".into()));
        // A slice with no answered request fails its side too.
        let mut candidate = scripted("candidate", &[Ok(10.0)], &order);
        let mut reference = scripted("reference", &[Ok(10.0)], &order);
        let failed = measure_pairs(&mut candidate, &mut reference, 1, |_: &Measured| Err("nothing answered".into()));
        assert_eq!(failed.unwrap_err(), Failed::Candidate("nothing answered".into()));
    }
}
