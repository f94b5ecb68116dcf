//! Where the time of a run's answered requests went, stage by stage, as the server
//! told it, and the table of it for the summary.

use std::fmt::Write;

use serde::{Deserialize, Serialize};

use super::record::{Outcome, RequestRecord, Stages};

/// The mean time of each stage over the answered requests that told their stages, ms,
/// and what remained: in the server outside the stages (routing, waking the caller),
/// and outside the server (the wire, the client).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StageBreakdown {
    /// Answers it is the mean of.
    pub answers: u64,
    /// Decoding images.
    pub decode_ms: f64,
    /// Resizing and normalising them.
    pub preprocess_ms: f64,
    /// Waiting for a preprocessing thread and for the batch.
    pub queue_ms: f64,
    /// The model's run, inputs joined and outputs split included.
    pub compute_ms: f64,
    /// In the server, outside the stages above.
    pub server_other_ms: f64,
    /// Outside the server: transport and client.
    pub outside_ms: f64,
    /// The mean latency the client saw.
    pub latency_ms: f64,
}

impl StageBreakdown {
    /// The mean over `records` that were answered and told their stages; `None` if
    /// none did.
    pub fn of<'a>(records: impl IntoIterator<Item = &'a RequestRecord>) -> Option<Self> {
        let told: Vec<(&Stages, f64)> = records
            .into_iter()
            .filter(|r| r.status == Outcome::Served)
            .filter_map(|r| r.stages.as_ref().map(|s| (s, r.latency_ms)))
            .collect();
        if told.is_empty() {
            return None;
        }
        let n = told.len() as f64;
        let mean = |f: &dyn Fn(&Stages, f64) -> f64| told.iter().map(|(s, l)| f(s, *l)).sum::<f64>() / n;
        let staged = |s: &Stages| s.decode_ms + s.preprocess_ms + s.queue_ms + s.compute_ms;
        Some(StageBreakdown {
            answers: told.len() as u64,
            decode_ms: mean(&|s, _| s.decode_ms),
            preprocess_ms: mean(&|s, _| s.preprocess_ms),
            queue_ms: mean(&|s, _| s.queue_ms),
            compute_ms: mean(&|s, _| s.compute_ms),
            server_other_ms: mean(&|s, _| (s.total_ms - staged(s)).max(0.0)),
            outside_ms: mean(&|s, latency| (latency - s.total_ms).max(0.0)),
            latency_ms: mean(&|_, latency| latency),
        })
    }

    /// Each part with its name, in the order a request passes them; they add up to
    /// the mean latency (up to clock skew between client and server).
    pub fn parts(&self) -> [(&'static str, f64); 6] {
        [
            ("decode", self.decode_ms),
            ("preprocess", self.preprocess_ms),
            ("queue", self.queue_ms),
            ("compute", self.compute_ms),
            ("server other", self.server_other_ms),
            ("outside server", self.outside_ms),
        ]
    }
}

/// The breakdowns of labelled summaries as a Markdown table: mean ms and share of the
/// mean latency per stage; empty where no row has one.
pub fn stage_table<'a>(rows: impl IntoIterator<Item = (&'a str, &'a str, &'a StageBreakdown)>) -> String {
    let mut out = String::new();
    for (label, task, b) in rows {
        if out.is_empty() {
            out.push_str(
                "| run | task | answers | decode | preprocess | queue | compute | server other | outside server | latency ms |\n\
                 |---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
            );
        }
        let cells: Vec<String> = b
            .parts()
            .iter()
            .map(|(_, ms)| format!("{ms:.2} ({:.0} %)", 100.0 * ms / b.latency_ms.max(f64::MIN_POSITIVE)))
            .collect();
        let _ = writeln!(out, "| {label} | {task} | {} | {} | {:.2} |", b.answers, cells.join(" | "), b.latency_ms);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answered(sent_s: f64, latency_ms: f64, stages: Option<Stages>) -> RequestRecord {
        RequestRecord {
            task: "t".into(),
            sent_s,
            status: Outcome::Served,
            latency_ms,
            variant: None,
            batch_size: None,
            reason: None,
            stages,
        }
    }

    #[test]
    fn the_breakdown_is_the_mean_of_what_answers_told_and_adds_up_to_the_latency() {
        let a = Stages { decode_ms: 4.0, preprocess_ms: 1.0, queue_ms: 2.0, compute_ms: 3.0, total_ms: 11.0 };
        let b = Stages { decode_ms: 2.0, preprocess_ms: 1.0, queue_ms: 0.0, compute_ms: 5.0, total_ms: 9.0 };
        let mut failed = answered(0.0, 99.0, Some(a));
        failed.status = Outcome::Failed;
        let records = [answered(0.1, 12.0, Some(a)), answered(1.2, 10.0, Some(b)), answered(1.5, 50.0, None), failed];
        let breakdown = StageBreakdown::of(&records).unwrap();
        assert_eq!(breakdown.answers, 2, "untold and failed ones are left out");
        assert_eq!((breakdown.decode_ms, breakdown.compute_ms, breakdown.latency_ms), (3.0, 4.0, 11.0));
        assert_eq!((breakdown.server_other_ms, breakdown.outside_ms), (1.0, 1.0));
        let sum: f64 = breakdown.parts().iter().map(|(_, ms)| ms).sum();
        assert!((sum - breakdown.latency_ms).abs() < 1e-9, "{sum}");
        assert!(StageBreakdown::of(&records[2..]).is_none());

        let table = stage_table([("run", "t", &breakdown)]);
        assert!(table.contains("| run | t | 2 | 3.00 (27 %) |"), "{table}");
        assert!(stage_table([]).is_empty());
        let refs: Vec<&RequestRecord> = records.iter().collect();
        let svg = crate::load::plot::stages_svg(&refs, 2, "t").unwrap();
        assert_eq!(svg.matches("<title>decode").count(), 2, "a bar per second");
        assert!(crate::load::plot::stages_svg(&refs[2..], 2, "t").is_none());
    }
}
