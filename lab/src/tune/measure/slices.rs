//! Slices and pairs of them: a measuring process, loaded and warm, that measures a
//! slice each time it is asked ([`SliceChild`]), and the pairing of a candidate's
//! slices with a reference's ([`measure_pairs`]).

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::Measured;

/// How long a slice lasts, s.
pub const SLICE_SECONDS: u32 = 1;

/// One pair of slices: the candidate's cost and the reference's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pair {
    /// The candidate's cost.
    pub candidate: f64,
    /// The reference's cost.
    pub reference: f64,
}

impl Pair {
    /// The candidate's cost over the reference's.
    pub fn ratio(&self) -> f64 {
        self.candidate / self.reference
    }
}

/// Which side of a pairing failed, and why.
#[derive(Debug, PartialEq)]
pub enum Failed {
    /// The candidate's slice.
    Candidate(String),
    /// The reference's slice.
    Reference(String),
}

/// What runs slices on request: a measuring process, or a fake in tests.
pub trait Slicer {
    /// What a slice of `seconds` measured.
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

/// A measuring process, loaded and warm, that measures a slice each time it is
/// asked. Killed when dropped.
#[derive(Debug)]
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
