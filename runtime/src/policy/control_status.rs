//! What the control loop has done, for status pages and tests.

use std::collections::BTreeMap;
use std::time::Duration;

use modelless_policy_abi::Decision;

/// What the loop has done, for status pages and tests.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ControlStatus {
    /// Ticks run.
    pub ticks: u64,
    /// Of them, ticks called early by a growing queue.
    pub early_ticks: u64,
    /// The policy module deciding.
    pub policy: String,
    /// Its digest (`sha256:…`), which labels its metrics and log lines.
    pub policy_digest: String,
    /// Policy failures so far, by kind.
    pub failures: BTreeMap<&'static str, u64>,
    /// Whether the native fallback decides now.
    pub on_fallback: bool,
    /// The last decision applied.
    pub last_decision: Decision,
    /// Variant switches the loop started.
    pub switches: u64,
    /// What could not be applied, latest last (the last 32).
    pub reports: Vec<String>,
    /// Policy reloads done.
    pub reloads: u64,
    /// The last reload by the file watch: from the file's modification to the new
    /// module deciding.
    pub last_watched_reload: Option<Duration>,
    /// The machine's CPU utilisation in the last snapshot, in %.
    pub cpu_host_percent: Option<f64>,
    /// The shadow policy, when one runs.
    pub shadow: Option<String>,
    /// Its digest.
    pub shadow_digest: Option<String>,
    /// The shadow's last decision (never applied).
    pub shadow_decision: Option<Decision>,
    /// Policies the watch found worse and rolled back.
    pub rollbacks: u64,
    /// The watch of the last policy that went live, when reloads are watched.
    pub watch: Option<super::watch::WatchStatus>,
}
