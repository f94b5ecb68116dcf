//! Which stored searches measured settings the way a search now would: those whose
//! measurements a replay or a variant's report may reuse.

use modelless::profile::ProfileKey;

use super::{ServingSetting, TuneStore};

/// Which stored searches measured settings as `measured_under` says (the part of a
/// store key's settings that decides a measurement: objective, space, measuring
/// times), measured alone rather than paired; whatever their strategy, seed, budget
/// or revision.
#[derive(Clone, Copy, Debug)]
pub struct StoredFilter<'a> {
    /// The model file's SHA-256.
    pub model_sha256: &'a str,
    /// The device it was measured on.
    pub device: &'a str,
    /// What decided the measurements, as in a stored search's key.
    pub measured_under: &'a serde_json::Value,
}

impl StoredFilter<'_> {
    fn matches(&self, key: &ProfileKey) -> bool {
        let Ok(stored) = serde_json::from_str::<serde_json::Value>(&key.settings) else { return false };
        key.model_sha256 == self.model_sha256
            && key.device == self.device
            && stored.get("paired_with").is_none()
            && self
                .measured_under
                .as_object()
                .is_some_and(|fields| fields.iter().all(|(k, v)| stored.get(k) == Some(v)))
    }

    /// Every successful measurement of the matching searches in `store`.
    pub fn measurements(&self, store: &TuneStore, variant: &str) -> Vec<(ServingSetting, f64)> {
        store
            .all(variant)
            .into_iter()
            .filter(|(key, _)| self.matches(key))
            .flat_map(|(_, trace)| trace.evaluations)
            .filter_map(|e| Some((e.setting, e.cost?)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tune::{Evaluation, KnobSpace, PreferredSizes, SearchOptions, SearchTrace, SpaceLimits, Strategy};

    #[test]
    fn only_searches_of_the_same_objective_space_and_times_measured_alone_are_replayed() {
        let dir = tempfile::tempdir().unwrap();
        let store = TuneStore::new(dir.path());
        let space = KnobSpace::new(SpaceLimits { max_batch: 8, cores: 2, images: false, gpu: false });
        let setting = ServingSetting {
            max_batch_size: 4,
            max_queue_delay_us: 0,
            preferred_batch_sizes: PreferredSizes::None,
            instances: 1,
            intra_op_threads: 1,
            one_run_at_a_time: false,
            spinning: false,
            preprocessing_threads: None,
            cuda: None,
        };
        let measured_under = serde_json::json!({"objective": {"concurrency": 8}, "limits": space.limits(),
            "seconds": 3, "warmup_seconds": 1});
        let mut searched = measured_under.clone();
        searched["strategy"] = "bayes".into();
        searched["revision"] = 3.into();
        let stored = |settings: serde_json::Value, cost: f64| {
            let key = ProfileKey { model_sha256: "ab".into(), device: "cpu".into(), settings: settings.to_string() };
            let evaluation =
                Evaluation { point: space.encode(&setting), setting: setting.clone(), cost: Some(cost), error: None };
            let trace = SearchTrace {
                strategy: Strategy::Random,
                options: SearchOptions { budget: 1, initial: 1, seed: cost as u64, confirm: 0 },
                evaluations: vec![evaluation],
            };
            store.save("v", &key, &trace).unwrap();
        };
        let with = |field: &str, value: serde_json::Value| {
            let mut settings = searched.clone();
            settings[field] = value;
            settings
        };
        stored(with("strategy", "random".into()), 1.0);
        stored(with("revision", 1.into()), 2.0);
        stored(with("objective", serde_json::json!({"concurrency": 32})), 3.0);
        stored(with("seconds", 5.into()), 4.0);
        stored(with("paired_with", serde_json::json!(setting)), 5.0);
        let filter = StoredFilter { model_sha256: "ab", device: "cpu", measured_under: &measured_under };
        let mut costs: Vec<f64> = filter.measurements(&store, "v").into_iter().map(|(_, c)| c).collect();
        costs.sort_by(f64::total_cmp);
        assert_eq!(costs, vec![1.0, 2.0], "any strategy or revision; not another objective, time or pairing");
        let other_model = StoredFilter { model_sha256: "cd", ..filter };
        assert!(other_model.measurements(&store, "v").is_empty());
    }
}
