//! The config's `[policy]` section: which module steers the tasks, and the sandbox,
//! ticks and recording it runs with.

use std::path::PathBuf;
#[cfg(feature = "policies")]
use std::time::Duration;

use modelless_runtime::Error;
#[cfg(feature = "policies")]
use modelless_runtime::policy::{EarlyTick, HostConfig};
use serde::{Deserialize, Serialize};

/// The policy section of the config.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyConfig {
    /// The module (`.wasm`, or `.wat` text); or, fetched into the blob cache (see
    /// `[sources]`), an `oci://registry/repository:tag` reference (followed: each new
    /// digest is reloaded as a changed file is), one pinned `@sha256:…`, or an
    /// `https://` URL with its `sha256`.
    pub module: PathBuf,
    /// What an `https://` `module` must hash to (64 hex digits, `sha256:` optional).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Parameters for its `init`.
    #[serde(default)]
    pub parameters: Option<serde_json::Value>,
    /// Time between decisions, in ms.
    #[serde(default = "default_tick_ms")]
    pub tick_ms: u64,
    /// Longest one decision may take, in ms.
    #[serde(default = "default_deadline_ms")]
    pub deadline_ms: u64,
    /// Most memory an instance of the module may hold, in MiB; by default 16 for a
    /// core module, 64 for a component (an interpreter's).
    #[serde(default)]
    pub memory_limit_mib: Option<usize>,
    /// Folder compiled modules are kept in, keyed by the module's hash and the
    /// engine's; by default `$XDG_CACHE_HOME/modelless/policies` (or
    /// `~/.cache/modelless/policies`). It must be as trusted as the binary.
    #[serde(default)]
    pub compiled_cache: Option<PathBuf>,
    /// Reload the module when its file changes.
    #[serde(default)]
    pub watch: bool,
    /// Append every tick's snapshot and decision to this JSON Lines file, for
    /// `modelless policy replay`.
    #[serde(default)]
    pub record: Option<PathBuf>,
    /// Tick early when a task's queue reaches this many requests (off when absent).
    #[serde(default)]
    pub early_tick_queue_length: Option<u64>,
    /// Least time between an early tick and the tick before it, in ms.
    #[serde(default = "default_early_tick_gap_ms")]
    pub early_tick_gap_ms: u64,
    /// Watch each policy that goes live by a reload (a followed tag, a watched file, a
    /// call) and put the previous one back if it serves worse (off when absent).
    #[serde(default)]
    pub rollback: Option<RollbackConfig>,
}

/// The `[policy.rollback]` table: for how long a policy that went live is compared
/// with the one it replaced, at a similar load, and how much worse it may serve.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RollbackConfig {
    /// Seconds after going live at which it is judged.
    #[serde(default = "default_window_s")]
    pub window_s: f64,
    /// Points (0 to 1) of the share answered within the SLO it may lose.
    #[serde(default = "default_share_tolerance")]
    pub share_tolerance: f64,
    /// Points of effective accuracy it may lose.
    #[serde(default = "default_accuracy_tolerance")]
    pub accuracy_tolerance: f64,
}

fn default_window_s() -> f64 {
    60.0
}

fn default_share_tolerance() -> f64 {
    0.01
}

fn default_accuracy_tolerance() -> f64 {
    2.0
}

impl Default for RollbackConfig {
    fn default() -> Self {
        RollbackConfig {
            window_s: default_window_s(),
            share_tolerance: default_share_tolerance(),
            accuracy_tolerance: default_accuracy_tolerance(),
        }
    }
}

/// The longest tick (and early-tick gap): an hour.
const MAX_TICK_MS: u64 = 3_600_000;
/// The longest a decision may take: a minute.
const MAX_DEADLINE_MS: u64 = 60_000;
/// A 32-bit module addresses 4 GiB at most.
const MAX_MEMORY_MIB: u64 = 4096;

fn default_early_tick_gap_ms() -> u64 {
    200
}

fn default_tick_ms() -> u64 {
    1000
}

fn default_deadline_ms() -> u64 {
    10
}

impl PolicyConfig {
    /// The module at `path` with default settings.
    pub fn new(module: impl Into<PathBuf>) -> Self {
        PolicyConfig {
            module: module.into(),
            sha256: None,
            parameters: None,
            tick_ms: default_tick_ms(),
            deadline_ms: default_deadline_ms(),
            memory_limit_mib: None,
            compiled_cache: None,
            watch: false,
            record: None,
            early_tick_queue_length: None,
            early_tick_gap_ms: default_early_tick_gap_ms(),
            rollback: None,
        }
    }

    /// Checks that the tick, the deadline, the memory and the early-tick gap are
    /// within bounds a sandboxed module can run with; the error names the setting.
    pub fn validate(&self) -> Result<(), Error> {
        if cfg!(not(feature = "policies")) {
            return Err(Error::Config(format!(
                "the config names the policy {}, but this build of modelless has no Wasm policy host \
                 (feature `policies`)",
                self.module.display()
            )));
        }
        let bounds = [
            ("tick_ms", self.tick_ms, MAX_TICK_MS),
            ("deadline_ms", self.deadline_ms, MAX_DEADLINE_MS),
            ("memory_limit_mib", self.memory_limit_mib.map_or(1, |m| m as u64), MAX_MEMORY_MIB),
            ("early_tick_gap_ms", self.early_tick_gap_ms, MAX_TICK_MS),
        ];
        if let Some((name, value, most)) = bounds.iter().find(|(_, value, most)| !(1..=*most).contains(value)) {
            return Err(Error::Config(format!("policy.{name} {value} is outside 1..={most}")));
        }
        let Some(rollback) = &self.rollback else { return Ok(()) };
        let ranges = [
            ("window_s", rollback.window_s, 0.001, MAX_TICK_MS as f64 / 1e3),
            ("share_tolerance", rollback.share_tolerance, 0.0, 1.0),
            ("accuracy_tolerance", rollback.accuracy_tolerance, 0.0, f64::MAX),
        ];
        match ranges.iter().find(|(_, value, least, most)| !(*least..=*most).contains(value)) {
            Some((name, value, least, most)) => {
                Err(Error::Config(format!("policy.rollback.{name} {value} is outside {least}..={most}")))
            }
            None => Ok(()),
        }
    }

    /// The watch it asks for, if any.
    #[cfg(feature = "policies")]
    pub(crate) fn watch(&self) -> Option<modelless_runtime::policy::WatchConfig> {
        let rollback = self.rollback.as_ref()?;
        Some(modelless_runtime::policy::WatchConfig {
            window: Duration::from_secs_f64(rollback.window_s.clamp(0.001, MAX_TICK_MS as f64 / 1e3)),
            share_tolerance: rollback.share_tolerance,
            accuracy_tolerance: rollback.accuracy_tolerance,
            ..Default::default()
        })
    }

    /// Watches each policy that goes live by a reload, and rolls it back if it serves
    /// worse than the one it replaced.
    pub fn with_rollback(mut self, rollback: RollbackConfig) -> Self {
        self.rollback = Some(rollback);
        self
    }

    /// The sandbox it asks for.
    #[cfg(feature = "policies")]
    pub(crate) fn host_config(&self) -> HostConfig {
        let mut host =
            HostConfig::default().with_deadline(Duration::from_millis(self.deadline_ms.clamp(1, MAX_DEADLINE_MS)));
        if let Some(mib) = self.memory_limit_mib {
            host = host.with_memory_limit((mib as u64).clamp(1, MAX_MEMORY_MIB) as usize * (1 << 20));
        }
        host.compiled_cache = self.compiled_cache.clone().or_else(modelless_runtime::policy::default_compiled_cache);
        host
    }

    /// The early ticks it asks for, if any.
    #[cfg(feature = "policies")]
    pub(crate) fn early_tick(&self) -> Option<EarlyTick> {
        let queue_length = self.early_tick_queue_length?;
        Some(EarlyTick { queue_length, min_gap: Duration::from_millis(self.early_tick_gap_ms) })
    }

    /// Ticks early when a task's queue reaches `queue_length`, at most every `min_gap`.
    pub fn with_early_tick(mut self, queue_length: u64, min_gap: std::time::Duration) -> Self {
        self.early_tick_queue_length = Some(queue_length);
        self.early_tick_gap_ms = min_gap.as_millis() as u64;
        self
    }

    /// Sets the time between decisions.
    pub fn with_tick(mut self, tick: std::time::Duration) -> Self {
        self.tick_ms = tick.as_millis() as u64;
        self
    }

    /// Reloads the module when its file changes.
    pub fn with_watch(mut self, watch: bool) -> Self {
        self.watch = watch;
        self
    }

    /// Sets the module's parameters.
    pub fn with_parameters(mut self, parameters: serde_json::Value) -> Self {
        self.parameters = Some(parameters);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "policies")]
    #[test]
    fn a_policy_within_bounds_is_valid_where_the_host_is_built_in() {
        assert!(PolicyConfig::new("p.wasm").validate().is_ok());
        let refused = PolicyConfig::new("p.wasm").with_tick(std::time::Duration::ZERO).validate().unwrap_err();
        assert!(refused.to_string().contains("policy.tick_ms 0"), "{refused}");
    }

    #[cfg(not(feature = "policies"))]
    #[test]
    fn a_policy_is_refused_naming_the_feature_where_the_host_is_not() {
        let refused = PolicyConfig::new("p.wasm").validate().unwrap_err().to_string();
        assert!(refused.contains("p.wasm") && refused.contains("feature `policies`"), "{refused}");
    }
}
