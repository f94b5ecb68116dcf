//! A variant as tuning sees it: its model file's hash, the space its settings are
//! searched in, the setting its config serves with, where its searches are stored,
//! and what a stored search's key holds.

use std::path::Path;

use modelless::profile::ProfileKey;
use modelless::{RuntimeConfig, VariantConfig};
use modelless_runtime::profile::{file_sha256, store_beside};

use super::measure::Bench;
use super::stored_filter::StoredFilter;
use super::{KnobSpace, Objective, SearchOptions, ServingSetting, SpaceLimits, Strategy, TuneError, TuneStore};

/// The variants of `task` in `config` that are tuned: `only` that one where it is
/// given, else every one.
pub fn variants<'a>(
    config: &'a RuntimeConfig,
    task: &str,
    only: Option<&str>,
) -> Result<Vec<&'a VariantConfig>, TuneError> {
    let configured = config.tasks.iter().find(|t| t.name == task).ok_or_else(|| TuneError::UnknownTask(task.into()))?;
    Ok(match only {
        Some(name) => vec![
            configured
                .variants
                .iter()
                .find(|v| v.name == name)
                .ok_or_else(|| TuneError::UnknownVariant { task: task.into(), variant: name.into() })?,
        ],
        None => configured.variants.iter().collect(),
    })
}

/// One variant to tune.
#[derive(Clone, Debug)]
pub struct TunedVariant<'a> {
    /// As the config declares it.
    pub config: &'a VariantConfig,
    /// Its model file's SHA-256.
    pub model_sha256: String,
    /// The name of the device it runs on.
    pub device: String,
    /// The bounds of its space (memory-safe batch, cores, images).
    pub limits: SpaceLimits,
    /// The space its settings are searched in.
    pub space: KnobSpace,
    /// The setting its config serves with, as the nearest point of the space.
    pub default: ServingSetting,
    /// Where its searches are stored: beside its model.
    pub store: TuneStore,
}

impl<'a> TunedVariant<'a> {
    /// `variant` of `config`, its model file read for its hash and its stored profile
    /// for the largest batch that fits in memory.
    pub fn new(config: &RuntimeConfig, variant: &'a VariantConfig) -> Result<Self, TuneError> {
        let model_sha256 =
            file_sha256(&variant.path).map_err(|source| TuneError::Read { path: variant.path.clone(), source })?;
        let safe = store_beside(&variant.path).max_safe_batch(&variant.name, &model_sha256);
        let limits =
            SpaceLimits::new(safe, variant.preprocess.is_some(), variant.device != modelless::backend::Device::Cpu);
        Ok(TunedVariant {
            config: variant,
            device: variant.device.name(),
            space: KnobSpace::new(limits.clone()),
            default: ServingSetting::of(config, variant, &limits),
            store: TuneStore::new(variant.path.parent().unwrap_or(Path::new("."))),
            model_sha256,
            limits,
        })
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// What is measured of it under `objective`, against its default.
    pub fn bench<'b>(&'b self, objective: &'b Objective) -> Bench<'b> {
        Bench { variant: self.name(), objective, reference: &self.default }
    }

    /// What decides what a setting measures under `objective`, measured for `seconds`
    /// after `warmup_seconds`; a search's key adds how it searched.
    pub fn measured_under(&self, objective: &Objective, seconds: u32, warmup_seconds: u32) -> serde_json::Value {
        serde_json::json!({
            "objective": objective, "limits": self.limits,
            "seconds": seconds, "warmup_seconds": warmup_seconds,
        })
    }

    /// The key a search of `strategy` with `options` is stored under; `paired` where
    /// its costs are ratios to the default, which hold for that default only.
    pub fn search_key(
        &self,
        measured_under: &serde_json::Value,
        strategy: Strategy,
        options: SearchOptions,
        paired: bool,
    ) -> ProfileKey {
        let mut settings = measured_under.clone();
        settings["strategy"] = serde_json::json!(strategy);
        settings["revision"] = serde_json::json!(strategy.revision());
        settings["options"] = serde_json::json!(options);
        if paired {
            settings["paired_with"] = serde_json::json!(self.default);
        }
        ProfileKey {
            model_sha256: self.model_sha256.clone(),
            device: self.device.clone(),
            settings: settings.to_string(),
        }
    }

    /// Every measurement stored for it by searches that measured as `measured_under`
    /// says, alone rather than paired, whatever searched (`StoredFilter`).
    pub fn stored_measurements(&self, measured_under: &serde_json::Value) -> Vec<(ServingSetting, f64)> {
        let filter = StoredFilter { model_sha256: &self.model_sha256, device: &self.device, measured_under };
        filter.measurements(&self.store, self.name())
    }
}
