//! A run's files: the request log, the timeline, the summary (JSON and Markdown) and
//! a plot per task.

use std::path::{Path, PathBuf};

use super::LoadError;
use super::plot::{stages_svg, task_svg};
use super::record::write_log;
use super::runner::RunResult;
use super::runs::runs_csv;
use super::summary::{markdown_table, timeline_csv};

impl RunResult {
    /// Writes the run under `dir`: `requests.jsonl` (or `.csv` with `csv_log`),
    /// `timeline.csv`, `summary.json`, `summary.md`, `<task>.svg`, `<task>-stages.svg`
    /// where the target told where the time went, and `runs.csv` where it told what
    /// its sessions ran; `label` heads the
    /// summary rows and the plots. Returns the files written.
    pub fn write(&self, dir: &Path, label: &str, csv_log: bool) -> Result<Vec<PathBuf>, LoadError> {
        std::fs::create_dir_all(dir).map_err(|e| LoadError::io(dir, e))?;
        let mut written = Vec::new();
        let log = dir.join(if csv_log { "requests.csv" } else { "requests.jsonl" });
        write_log(&log, &self.records)?;
        written.push(log);
        let summaries = self.summaries();
        let json = serde_json::to_string_pretty(&summaries).map_err(|e| LoadError::invalid(e.to_string()))?;
        let rows: Vec<(String, _)> = summaries.into_iter().map(|s| (label.to_string(), s)).collect();
        for (name, text) in [
            ("timeline.csv", timeline_csv(&self.timeline())),
            ("summary.json", json),
            ("summary.md", markdown_table(&rows)),
        ] {
            written.push(write(dir, name, &text)?);
        }
        if !self.runs.is_empty() {
            written.push(write(dir, "runs.csv", &runs_csv(&self.runs))?);
        }
        for target in &self.targets {
            let title = format!("{label}: {} (SLO {:.0} ms)", target.task, target.slo_ms);
            written.push(write(dir, &format!("{}.svg", target.task), &task_svg(self, &target.task, &title))?);
            let mine: Vec<_> = self.records.iter().filter(|r| r.task == target.task).collect();
            let title = format!("{label}: {}, where the time went", target.task);
            if let Some(svg) = stages_svg(&mine, self.duration_s, &title) {
                written.push(write(dir, &format!("{}-stages.svg", target.task), &svg)?);
            }
        }
        Ok(written)
    }
}

fn write(dir: &Path, name: &str, text: &str) -> Result<PathBuf, LoadError> {
    let path = dir.join(name);
    std::fs::write(&path, text).map_err(|e| LoadError::io(&path, e))?;
    Ok(path)
}
