//! What the sessions ran, second by second: per task and variant, the batches, their
//! rows and the time they took (`runs.csv`). Set beside the profiles' lines, it says
//! how much slower or faster the machine served than it was profiled, which is what
//! `modelless simulate --calibrate` reads.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use modelless::policy_abi::RunTotals;

use super::LoadError;

/// The batches one variant of one task ran in one second.
#[derive(Clone, Debug, PartialEq)]
pub struct SecondRuns {
    /// The second (0 is the first).
    pub second: u32,
    /// The task.
    pub task: String,
    /// The variant.
    pub variant: String,
    /// Batches run.
    pub batches: u64,
    /// Their rows.
    pub rows: u64,
    /// Time the sessions took to run them, ms.
    pub run_ms: f64,
}

/// Turns the runtime's running totals into what each second added.
#[derive(Debug, Default)]
pub struct RunsMeter {
    last: BTreeMap<(String, String), RunTotals>,
}

impl RunsMeter {
    /// What ran since the last call, from `totals` (task, variant, totals so far); a
    /// variant whose totals fell (a reloaded version counts from zero) counts afresh.
    pub fn second(&mut self, second: u32, totals: Vec<(String, String, RunTotals)>) -> Vec<SecondRuns> {
        let mut ran = Vec::new();
        for (task, variant, now) in totals {
            let before = self.last.insert((task.clone(), variant.clone()), now).unwrap_or_default();
            let fresh = now.batches < before.batches || now.rows < before.rows || now.run_ms < before.run_ms;
            let since = if fresh { RunTotals::default() } else { before };
            let batches = now.batches - since.batches;
            if batches > 0 {
                ran.push(SecondRuns {
                    second,
                    task,
                    variant,
                    batches,
                    rows: now.rows - since.rows,
                    run_ms: now.run_ms - since.run_ms,
                });
            }
        }
        ran
    }
}

const HEADER: &str = "second,task,variant,batches,rows,run_ms";

/// The runs as CSV, `runs.csv`'s contents.
pub fn runs_csv(runs: &[SecondRuns]) -> String {
    let mut csv = format!("{HEADER}\n");
    for r in runs {
        let _ = writeln!(csv, "{},{},{},{},{},{:.3}", r.second, r.task, r.variant, r.batches, r.rows, r.run_ms);
    }
    csv
}

/// Reads a `runs.csv` written by [`runs_csv`].
pub fn read_runs_csv(path: &Path) -> Result<Vec<SecondRuns>, LoadError> {
    let text = std::fs::read_to_string(path).map_err(|e| LoadError::io(path, e))?;
    let mut lines = text.lines();
    if lines.next().map(str::trim) != Some(HEADER) {
        return Err(LoadError::invalid(format!("{}: expected the header `{HEADER}`", path.display())));
    }
    lines
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| {
            let bad = |what: &str| LoadError::invalid(format!("{} line {}: {what}", path.display(), i + 2));
            let fields: Vec<&str> = line.split(',').collect();
            let [second, task, variant, batches, rows, run_ms] = fields[..] else {
                return Err(bad("expected 6 fields"));
            };
            let run_ms: f64 = run_ms.parse().map_err(|_| bad("run_ms is not a number"))?;
            if !run_ms.is_finite() || run_ms < 0.0 {
                return Err(bad("run_ms must be a time, ≥ 0"));
            }
            Ok(SecondRuns {
                second: second.parse().map_err(|_| bad("second is not a count"))?,
                task: task.to_string(),
                variant: variant.to_string(),
                batches: batches.parse().map_err(|_| bad("batches is not a count"))?,
                rows: rows.parse().map_err(|_| bad("rows is not a count"))?,
                run_ms,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn totals(batches: u64, rows: u64, run_ms: f64) -> RunTotals {
        RunTotals { batches, rows, run_ms }
    }

    #[test]
    fn each_second_counts_what_ran_since_the_last() {
        let mut meter = RunsMeter::default();
        let first = meter.second(0, vec![("t".into(), "a".into(), totals(3, 5, 12.0))]);
        assert_eq!(first.len(), 1);
        assert_eq!((first[0].batches, first[0].rows, first[0].run_ms), (3, 5, 12.0));
        let idle = meter.second(1, vec![("t".into(), "a".into(), totals(3, 5, 12.0))]);
        assert!(idle.is_empty(), "nothing ran: {idle:?}");
        let next = meter.second(2, vec![("t".into(), "a".into(), totals(7, 13, 40.0))]);
        assert_eq!((next[0].second, next[0].batches, next[0].rows, next[0].run_ms), (2, 4, 8, 28.0));
        // A reloaded version counts from zero again.
        let reloaded = meter.second(3, vec![("t".into(), "a".into(), totals(2, 2, 5.0))]);
        assert_eq!((reloaded[0].batches, reloaded[0].rows, reloaded[0].run_ms), (2, 2, 5.0));
    }

    #[test]
    fn runs_survive_a_round_trip_through_csv_and_bad_lines_are_refused() {
        let runs = vec![
            SecondRuns { second: 0, task: "t".into(), variant: "a".into(), batches: 3, rows: 5, run_ms: 12.25 },
            SecondRuns { second: 4, task: "u".into(), variant: "b".into(), batches: 1, rows: 8, run_ms: 60.5 },
        ];
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runs.csv");
        std::fs::write(&path, runs_csv(&runs)).unwrap();
        assert_eq!(read_runs_csv(&path).unwrap(), runs);
        std::fs::write(&path, format!("{HEADER}\n1,t,a,2,2\n")).unwrap();
        assert!(read_runs_csv(&path).unwrap_err().to_string().contains("line 2"));
        std::fs::write(&path, format!("{HEADER}\n1,t,a,2,2,-4\n")).unwrap();
        assert!(read_runs_csv(&path).is_err());
        std::fs::write(&path, "second,task\n").unwrap();
        assert!(read_runs_csv(&path).unwrap_err().to_string().contains("header"));
    }
}
