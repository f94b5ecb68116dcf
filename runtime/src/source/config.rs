//! The config's `[sources]` section: where fetched artifacts are cached, the
//! credentials registries are asked with, and how often followed tags are polled.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::Error;

/// How remote sources (`oci://`, `https://`) are fetched and followed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourcesConfig {
    /// The folder blobs are cached in by digest; by default
    /// `$XDG_CACHE_HOME/modelless/blobs` (or `~/.cache/modelless/blobs`). A restart
    /// serves from it when the registry is down.
    #[serde(default)]
    pub cache: Option<PathBuf>,
    /// A Docker-format `config.json` with registry credentials (a Kubernetes
    /// `dockerconfigjson` pull secret, mounted).
    #[serde(default)]
    pub docker_config: Option<PathBuf>,
    /// A file with a bearer token for registries `docker_config` does not name.
    #[serde(default)]
    pub token_file: Option<PathBuf>,
    /// Registries (`host:port`) spoken to over plain HTTP: a registry on the same
    /// machine or inside the cluster's network.
    #[serde(default)]
    pub insecure_registries: Vec<String>,
    /// Seconds between two polls of a followed tag.
    #[serde(default = "default_poll_interval_s")]
    pub poll_interval_s: f64,
    /// Seconds a registry or server has to answer one call.
    #[serde(default = "default_timeout_s")]
    pub timeout_s: f64,
}

fn default_poll_interval_s() -> f64 {
    30.0
}

fn default_timeout_s() -> f64 {
    30.0
}

/// The shortest poll interval: a registry is not to be hammered.
const MIN_POLL_INTERVAL_S: f64 = 0.1;
/// The longest poll interval or timeout: a day.
const MAX_SECONDS: f64 = 86_400.0;

impl Default for SourcesConfig {
    fn default() -> Self {
        SourcesConfig {
            cache: None,
            docker_config: None,
            token_file: None,
            insecure_registries: Vec::new(),
            poll_interval_s: default_poll_interval_s(),
            timeout_s: default_timeout_s(),
        }
    }
}

impl SourcesConfig {
    /// Checks the intervals; the error names the setting.
    pub fn validate(&self) -> Result<(), Error> {
        for (name, value, least) in
            [("poll_interval_s", self.poll_interval_s, MIN_POLL_INTERVAL_S), ("timeout_s", self.timeout_s, 0.001)]
        {
            if !(least..=MAX_SECONDS).contains(&value) {
                return Err(Error::Config(format!("sources.{name} {value} is outside {least}..={MAX_SECONDS}")));
            }
        }
        Ok(())
    }

    /// The time between two polls of a followed tag.
    pub fn poll_interval(&self) -> Duration {
        Duration::from_secs_f64(self.poll_interval_s.clamp(MIN_POLL_INTERVAL_S, MAX_SECONDS))
    }

    /// The folder blobs are cached in.
    pub fn cache_dir(&self) -> Option<PathBuf> {
        self.cache.clone().or_else(super::BlobCache::default_dir)
    }

    /// Polls followed tags every `every`.
    pub fn with_poll_interval(mut self, every: Duration) -> Self {
        self.poll_interval_s = every.as_secs_f64();
        self
    }

    /// Caches blobs in `dir`.
    pub fn with_cache(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cache = Some(dir.into());
        self
    }

    /// Speaks plain HTTP to `registry` (`host:port`).
    pub fn with_insecure_registry(mut self, registry: impl Into<String>) -> Self {
        self.insecure_registries.push(registry.into());
        self
    }
}
