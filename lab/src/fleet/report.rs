//! What a fleet comparison writes: the table of every scaler's replica-seconds,
//! share within the SLO, late answers and most replicas (markdown and JSON), each
//! scaler's seconds as CSV, the plots, and the trace's rates.

use std::fmt::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::plot::fleet_svg;
use super::replica::ReplicaModel;
use super::scaler::ScalerKind;
use super::sim::{FleetConfig, FleetRun, FleetTotals};
use crate::load::LoadError;
use crate::load::trace::write_csv;

/// One comparison: what was run, and each scaler's totals.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FleetReport {
    /// The trace's file.
    pub trace: String,
    /// Its task.
    pub task: String,
    /// Its length, s.
    pub duration_s: u32,
    /// What every replica served with.
    pub replica: ReplicaModel,
    /// One replica's capacity within the SLO, requests a second.
    pub capacity_per_s: f64,
    /// How the fleet ran.
    pub config: FleetConfig,
    /// Each scaler's totals, in the order run.
    pub rows: Vec<FleetRow>,
}

/// One scaler's line of the table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FleetRow {
    /// The scaler.
    pub scaler: ScalerKind,
    /// What its run came to.
    pub totals: FleetTotals,
}

impl FleetReport {
    /// The replica-seconds of `row` over static provisioning's (`static_replicas`
    /// all the time).
    pub fn of_static(&self, row: &FleetRow) -> f64 {
        row.totals.replica_seconds / (f64::from(self.config.static_replicas) * f64::from(self.duration_s)).max(1e-9)
    }

    /// The table, as markdown.
    pub fn markdown(&self) -> String {
        let mut text = String::from(
            "| scaler | replica-seconds | × static | within SLO % | late answers | refused | late after admission | max replicas | scale events |\n\
             |---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        for row in &self.rows {
            let t = &row.totals;
            let _ = writeln!(
                text,
                "| {} | {:.0} | {:.2} | {:.3} | {} | {} | {} | {} | {} |",
                row.scaler,
                t.replica_seconds,
                self.of_static(row),
                t.within_slo_share() * 100.0,
                t.late(),
                t.refused,
                t.late_after_admission,
                t.max_replicas,
                t.scale_events
            );
        }
        text
    }

    /// What the table stands on, in one paragraph.
    pub fn preamble(&self) -> String {
        format!(
            "{} ({} s, task `{}`, SLO {} ms): every replica serves `{}` (line {:.3}·b + {:.3} ms, batches up to {}, \
             {} instance(s)), {:.1} requests/s within the SLO; pods ready {} s after they are asked for; static \
             provisioning holds {} replicas, the autoscalers start from {}; the HPAs scale up by up to {} % a sync \
             and down after a {} s window; the demand ratio adds {} of the surges heard as headroom and carries a \
             rising rate {} s ahead.",
            self.trace,
            self.duration_s,
            self.task,
            self.replica.slo_ms,
            self.replica.variant,
            self.replica.fit.a_ms,
            self.replica.fit.c_ms,
            self.replica.max_batch_size,
            self.replica.instances,
            self.capacity_per_s,
            self.config.start_s,
            self.config.static_replicas,
            self.config.initial_replicas,
            self.config.scalers.hpa.scale_up_percent,
            self.config.scalers.hpa.scale_down_stabilisation_s,
            self.config.scalers.demand_surge_weight,
            self.config.scalers.demand_lead_s
        )
    }

    /// Writes under `out`: `summary.md`, `summary.json`, `<scaler>.csv` and
    /// `<scaler>.svg` per run, `fleet.svg` with every run, `trace.csv` of `rates`.
    /// Returns the files written.
    pub fn write(&self, out: &Path, runs: &[FleetRun], rates: &[f64]) -> Result<Vec<PathBuf>, LoadError> {
        std::fs::create_dir_all(out).map_err(|e| LoadError::io(out, e))?;
        let mut written = Vec::new();
        let mut put = |name: &str, text: String| -> Result<(), LoadError> {
            let path = out.join(name);
            std::fs::write(&path, text).map_err(|e| LoadError::io(&path, e))?;
            written.push(path);
            Ok(())
        };
        put("summary.md", format!("{}\n\n{}", self.preamble(), self.markdown()))?;
        put("summary.json", serde_json::to_string_pretty(self).map_err(|e| LoadError::Invalid(e.to_string()))?)?;
        for run in runs {
            put(&format!("{}.csv", run.scaler), seconds_csv(run))?;
            put(
                &format!("{}.svg", run.scaler),
                fleet_svg(std::slice::from_ref(run), self.capacity_per_s, &self.title()),
            )?;
        }
        put("fleet.svg", fleet_svg(runs, self.capacity_per_s, &self.title()))?;
        let path = out.join("trace.csv");
        write_csv(&path, rates)?;
        written.push(path);
        Ok(written)
    }

    fn title(&self) -> String {
        format!("{}: {} replicas of {} (start {} s)", self.trace, self.task, self.replica.variant, self.config.start_s)
    }
}

/// A run's seconds: `second,arrived,late,wanted,ready,held`.
fn seconds_csv(run: &FleetRun) -> String {
    let mut text = String::from("second,arrived,late,wanted,ready,held\n");
    for (s, second) in run.seconds.iter().enumerate() {
        let _ =
            writeln!(text, "{s},{},{},{},{},{}", second.arrived, second.late, second.wanted, second.ready, second.held);
    }
    text
}

#[cfg(test)]
mod tests {
    use modelless::policy_abi::LatencyFit;

    use super::*;
    use crate::fleet::{FleetSecond, ScalerConfig};

    #[test]
    fn the_table_sets_each_scaler_against_static_provisioning_and_the_files_are_written() {
        let totals = |replica_seconds, within_slo| FleetTotals {
            requests: 1000,
            within_slo,
            refused: 1000 - within_slo,
            replica_seconds,
            max_replicas: 4,
            ..FleetTotals::default()
        };
        let report = FleetReport {
            trace: "t.toml".into(),
            task: "t".into(),
            duration_s: 100,
            replica: ReplicaModel {
                variant: "v".into(),
                fit: LatencyFit { a_ms: 1.0, c_ms: 4.0, r2: 1.0 },
                spread: 0.0,
                max_batch_size: 8,
                max_queue_size: 64,
                instances: 1,
                slo_ms: 100.0,
            },
            capacity_per_s: 567.0,
            config: FleetConfig {
                start_s: 12.0,
                initial_replicas: 1,
                static_replicas: 4,
                scalers: ScalerConfig::default(),
                seed: 0,
            },
            rows: vec![
                FleetRow { scaler: ScalerKind::Demand, totals: totals(200.0, 995) },
                FleetRow { scaler: ScalerKind::Static, totals: totals(400.0, 1000) },
            ],
        };
        let table = report.markdown();
        assert!(table.contains("| demand | 200 | 0.50 | 99.500 | 5 | 5 | 0 | 4 | 0 |"), "{table}");
        assert!(table.contains("| static | 400 | 1.00 | 100.000 | 0 |"), "{table}");
        let dir = tempfile::tempdir().unwrap();
        let run = FleetRun {
            scaler: ScalerKind::Demand,
            totals: totals(200.0, 995),
            seconds: vec![FleetSecond::default(); 3],
        };
        let written = report.write(dir.path(), &[run], &[1.0, 2.0, 3.0]).unwrap();
        assert_eq!(written.len(), 6);
        let csv = std::fs::read_to_string(dir.path().join("demand.csv")).unwrap();
        assert_eq!(csv.lines().count(), 4, "{csv}");
        let json: FleetReport =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join("summary.json")).unwrap()).unwrap();
        assert_eq!(json, report);
    }
}
