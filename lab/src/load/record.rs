//! The per-request log of a run, as JSON Lines or CSV.

use std::io::Write;
use std::path::Path;

pub use modelless_runtime::Outcome;
use serde::{Deserialize, Serialize};

use super::LoadError;

/// One request of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RequestRecord {
    /// The task it asked.
    pub task: String,
    /// When it was sent, s from the start of the run.
    pub sent_s: f64,
    /// How it ended.
    pub status: Outcome,
    /// From sending to its answer or error, ms.
    pub latency_ms: f64,
    /// The variant that answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    /// Rows in the batch it ran in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_size: Option<u32>,
    /// Why it was not answered: its error's kind, a colon, and the error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Where the server says its time went, if it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stages: Option<Stages>,
}

/// Where an answered request's time went inside the server, ms.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Stages {
    /// Decoding its images.
    pub decode_ms: f64,
    /// Resizing and normalising them.
    pub preprocess_ms: f64,
    /// Waiting for a preprocessing thread and for its batch.
    pub queue_ms: f64,
    /// The model's run of its batch, inputs joined and outputs split included.
    pub compute_ms: f64,
    /// Arrival to answer inside the server.
    pub total_ms: f64,
}

impl Stages {
    /// The stages with their names, in the order a request passes them.
    pub fn named(&self) -> [(&'static str, f64); 4] {
        [
            ("decode", self.decode_ms),
            ("preprocess", self.preprocess_ms),
            ("queue", self.queue_ms),
            ("compute", self.compute_ms),
        ]
    }
}

impl From<&modelless::Timings> for Stages {
    fn from(t: &modelless::Timings) -> Self {
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        Stages {
            decode_ms: ms(t.decode),
            preprocess_ms: ms(t.preprocess),
            queue_ms: ms(t.queue),
            compute_ms: ms(t.compute_input + t.compute + t.postprocess),
            total_ms: ms(t.total),
        }
    }
}

impl RequestRecord {
    /// A request still under way when the run's drain of `drain_ms` ended.
    pub fn unanswered(task: &str, sent_s: f64, drain_ms: f64) -> Self {
        RequestRecord {
            task: task.to_string(),
            sent_s,
            status: Outcome::Failed,
            latency_ms: drain_ms,
            variant: None,
            batch_size: None,
            reason: Some(reason("unanswered", "no answer before the run's drain ended")),
            stages: None,
        }
    }

    /// The kind of its failure (the `reason` up to its first colon), if it failed.
    pub fn failure_kind(&self) -> Option<&str> {
        self.reason.as_deref().map(|r| r.split_once(':').map_or(r, |(kind, _)| kind))
    }
}

/// A failure's reason as records carry it, cut to 300 characters: `kind: message`.
pub fn reason(kind: &str, message: &str) -> String {
    const MAX_CHARS: usize = 300;
    let message = message.char_indices().nth(MAX_CHARS).map_or(message, |(at, _)| &message[..at]);
    format!("{kind}: {message}")
}

/// A CSV field, quoted where it holds a comma, quote or line break.
fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) { format!("\"{}\"", text.replace('"', "\"\"")) } else { text.to_string() }
}

/// The file format of a request log, from its extension: `.csv`, or JSON Lines.
fn is_csv(path: &Path) -> bool {
    path.extension().is_some_and(|e| e.eq_ignore_ascii_case("csv"))
}

/// Writes `records` to `path`: CSV if it ends in `.csv`, JSON Lines otherwise.
pub fn write_log(path: &Path, records: &[RequestRecord]) -> Result<(), LoadError> {
    let file = std::fs::File::create(path).map_err(|e| LoadError::io(path, e))?;
    let mut out = std::io::BufWriter::new(file);
    let written: std::io::Result<()> = (|| {
        if is_csv(path) {
            writeln!(
                out,
                "task,sent_s,status,latency_ms,variant,batch_size,decode_ms,preprocess_ms,queue_ms,compute_ms,reason"
            )?;
            for r in records {
                let stages = r
                    .stages
                    .map_or_else(|| ",,,".to_string(), |s| s.named().map(|(_, ms)| format!("{ms:.3}")).join(","));
                writeln!(
                    out,
                    "{},{:.6},{},{:.3},{},{},{stages},{}",
                    r.task,
                    r.sent_s,
                    r.status.as_str(),
                    r.latency_ms,
                    r.variant.as_deref().unwrap_or(""),
                    r.batch_size.map_or(String::new(), |b| b.to_string()),
                    csv_field(r.reason.as_deref().unwrap_or(""))
                )?;
            }
        } else {
            for r in records {
                serde_json::to_writer(&mut out, r)?;
                writeln!(out)?;
            }
        }
        out.flush()
    })();
    written.map_err(|e| LoadError::io(path, e))
}

/// Reads a JSON Lines request log.
pub fn read_log(path: &Path) -> Result<Vec<RequestRecord>, LoadError> {
    let text = std::fs::read_to_string(path).map_err(|e| LoadError::io(path, e))?;
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| {
            serde_json::from_str(line)
                .map_err(|e| LoadError::invalid(format!("{}: line {}: {e}", path.display(), i + 1)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_round_trips_through_json_lines_and_writes_as_csv() {
        let records = vec![
            RequestRecord {
                task: "t".into(),
                sent_s: 0.25,
                status: Outcome::Served,
                latency_ms: 12.5,
                variant: Some("v1".into()),
                batch_size: Some(4),
                reason: None,
                stages: Some(Stages {
                    decode_ms: 1.5,
                    preprocess_ms: 0.25,
                    queue_ms: 2.0,
                    compute_ms: 4.0,
                    total_ms: 8.0,
                }),
            },
            RequestRecord {
                task: "t".into(),
                sent_s: 0.5,
                status: Outcome::Rejected,
                latency_ms: 0.1,
                variant: None,
                batch_size: None,
                reason: Some(reason("overloaded", "model `v1` is overloaded, \"queue\" full")),
                stages: None,
            },
        ];
        let dir = tempfile::tempdir().unwrap();
        let jsonl = dir.path().join("requests.jsonl");
        write_log(&jsonl, &records).unwrap();
        assert_eq!(read_log(&jsonl).unwrap(), records);
        let csv = dir.path().join("requests.csv");
        write_log(&csv, &records).unwrap();
        let text = std::fs::read_to_string(&csv).unwrap();
        assert_eq!(text.lines().nth(1), Some("t,0.250000,ok,12.500,v1,4,1.500,0.250,2.000,4.000,"));
        let reason = r#""overloaded: model `v1` is overloaded, ""queue"" full""#;
        assert_eq!(text.lines().nth(2), Some(format!("t,0.500000,rejected,0.100,,,,,,,{reason}").as_str()));
    }
}
