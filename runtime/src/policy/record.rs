//! Recording and replaying policy decisions: every tick's snapshot and decision as one
//! line of JSON, and any policy run again over such a file (or over bare snapshots),
//! its decisions set beside the recorded ones.

use std::io::{BufRead, Write};
use std::path::Path;

use modelless_policy_abi::{Decision, Snapshot};
use serde::{Deserialize, Serialize};

use super::core::Action;
use super::host::PolicyInstance;
use crate::error::PolicyError;

/// One tick as recorded.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecordedTick {
    /// What the policy saw.
    pub snapshot: Snapshot,
    /// What was applied (empty when the module's decision was discarded).
    pub decision: Decision,
    /// Who decided: `module`, `fallback` or `discarded`.
    pub by: String,
    /// What a shadow policy decided, when one ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shadow: Option<Decision>,
    /// What the control core made of the decision on the snapshot: the actions the
    /// runtime carried out, refusals among them (none recorded by a simulation).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub actions: Vec<Action>,
}

/// Appends ticks to a JSON Lines file.
pub struct Recorder {
    out: std::io::BufWriter<std::fs::File>,
}

// Its parts (sessions, threads, closures, channels) print nothing useful.
impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder").finish_non_exhaustive()
    }
}

impl Recorder {
    /// Appends to `path`, creating it.
    pub fn open(path: &Path) -> std::io::Result<Recorder> {
        let file = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Recorder { out: std::io::BufWriter::new(file) })
    }

    /// Writes one tick, the snapshot as already encoded, with the `actions` carried
    /// out; flushed so that a crash loses at most the tick under way. The line reads
    /// back as a [`RecordedTick`].
    pub fn write(
        &mut self,
        snapshot_json: &[u8],
        decision: &Decision,
        by: &str,
        shadow: Option<&Decision>,
        actions: &[Action],
    ) -> std::io::Result<()> {
        self.out.write_all(b"{\"snapshot\":")?;
        self.out.write_all(snapshot_json)?;
        self.out.write_all(b",\"decision\":")?;
        serde_json::to_writer(&mut self.out, decision)?;
        self.out.write_all(b",\"by\":")?;
        serde_json::to_writer(&mut self.out, by)?;
        if let Some(shadow) = shadow {
            self.out.write_all(b",\"shadow\":")?;
            serde_json::to_writer(&mut self.out, shadow)?;
        }
        if !actions.is_empty() {
            self.out.write_all(b",\"actions\":")?;
            serde_json::to_writer(&mut self.out, actions)?;
        }
        self.out.write_all(b"}\n")?;
        self.out.flush()
    }
}

/// Reads a recording, or a file of bare snapshots (one per line; their recorded
/// decision is then unknown).
pub fn read_ticks(path: &Path) -> std::io::Result<Vec<(Snapshot, Option<Decision>)>> {
    let file = std::io::BufReader::new(std::fs::File::open(path)?);
    let mut ticks = Vec::new();
    for (number, line) in file.lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let tick = match serde_json::from_str::<RecordedTick>(&line) {
            Ok(tick) => (tick.snapshot, Some(tick.decision)),
            Err(_) => {
                let snapshot = serde_json::from_str::<Snapshot>(&line).map_err(|e| {
                    std::io::Error::new(std::io::ErrorKind::InvalidData, format!("line {}: {e}", number + 1))
                })?;
                (snapshot, None)
            }
        };
        ticks.push(tick);
    }
    Ok(ticks)
}

/// A replayed tick: the decision now, and whether it differs from the recorded one.
#[derive(Clone, Debug, PartialEq)]
pub struct Replayed {
    /// The policy's decision (or its failure).
    pub decision: Result<Decision, PolicyError>,
    /// `Some(true)` when it differs from the recorded decision; `None` when none was.
    pub differs: Option<bool>,
}

/// Runs `instance` over `ticks`, in order.
pub fn replay(instance: &mut PolicyInstance, ticks: &[(Snapshot, Option<Decision>)]) -> Vec<Replayed> {
    ticks
        .iter()
        .map(|(snapshot, recorded)| {
            let decision = instance.decide(snapshot);
            let differs = recorded.as_ref().map(|r| decision.as_ref().ok() != Some(r));
            Replayed { decision, differs }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::host::{HostConfig, PolicyEngine};
    use crate::policy::test_modules::answering;

    #[test]
    fn a_recording_replays_and_differences_are_marked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ticks.jsonl");
        let switch: Decision = serde_json::from_str(r#"{"tasks":[{"task":"t","variant":"v1"}]}"#).unwrap();
        let mut recorder = Recorder::open(&path).unwrap();
        let snapshot = serde_json::to_vec(&Snapshot::default()).unwrap();
        for decision in [Decision::default(), switch.clone()] {
            recorder.write(&snapshot, &decision, "module", Some(&switch), &[]).unwrap();
        }
        drop(recorder);
        let ticks = read_ticks(&path).unwrap();
        assert_eq!(ticks.len(), 2);
        let engine = PolicyEngine::new(HostConfig::default()).unwrap();
        let module = engine.compile("switch", answering(r#"{"tasks":[{"task":"t","variant":"v1"}]}"#).as_bytes());
        let replayed = replay(&mut module.unwrap().instantiate(None).unwrap(), &ticks);
        assert_eq!(replayed[0].differs, Some(true));
        assert_eq!(replayed[1].differs, Some(false));
        assert_eq!(replayed[1].decision, Ok(switch));
        // Bare snapshots replay too, with nothing to compare against.
        std::fs::write(&path, serde_json::to_string(&Snapshot::default()).unwrap() + "\n").unwrap();
        assert_eq!(read_ticks(&path).unwrap(), vec![(Snapshot::default(), None)]);
        std::fs::write(&path, "{ broken\n").unwrap();
        assert!(read_ticks(&path).unwrap_err().to_string().contains("line 1"));
    }
}
