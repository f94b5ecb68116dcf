//! Searches stored as profiles are: one file per variant beside its model
//! (`<variant>.tune.json`), each search in it keyed by the model file's SHA-256, the
//! device and everything that decides what the search measures (objective, budget,
//! seed, the space's limits). A search whose key matches is reused, not run again.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::search::SearchTrace;
use modelless::profile::ProfileKey;

/// The largest file read: thousands of searches of a few dozen evaluations.
const MAX_STORE_BYTES: u64 = 16 << 20;

/// One stored search.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct StoredSearch {
    key: ProfileKey,
    trace: SearchTrace,
}

/// A folder of stored searches.
#[derive(Clone, Debug)]
pub struct TuneStore {
    dir: PathBuf,
}

impl TuneStore {
    /// Searches kept in `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        TuneStore { dir: dir.into() }
    }

    /// The file of `variant`'s searches.
    pub fn path(&self, variant: &str) -> PathBuf {
        self.dir.join(format!("{variant}.tune.json"))
    }

    /// The stored search of `variant` made under `key`, if there is one.
    pub fn load(&self, variant: &str, key: &ProfileKey) -> Option<SearchTrace> {
        self.read(&self.path(variant)).into_iter().find(|s| s.key == *key).map(|s| s.trace)
    }

    /// Every search stored for `variant`, with its key.
    pub fn all(&self, variant: &str) -> Vec<(ProfileKey, SearchTrace)> {
        self.read(&self.path(variant)).into_iter().map(|s| (s.key, s.trace)).collect()
    }

    /// Stores `trace` as `variant`'s search under `key`, replacing one stored under
    /// the same key and keeping the others.
    pub fn save(&self, variant: &str, key: &ProfileKey, trace: &SearchTrace) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let path = self.path(variant);
        let mut stored = self.read(&path);
        stored.retain(|s| s.key != *key);
        stored.push(StoredSearch { key: key.clone(), trace: trace.clone() });
        let partial = path.with_extension("json.partial");
        std::fs::write(&partial, serde_json::to_vec_pretty(&stored)?)?;
        // A reader sees the old searches or the new ones, never half a file.
        std::fs::rename(partial, path)
    }

    /// The searches in `path`: none where it is missing, too large or corrupt.
    fn read(&self, path: &Path) -> Vec<StoredSearch> {
        let Ok(file) = std::fs::File::open(path) else { return Vec::new() };
        let mut text = Vec::new();
        if file.take(MAX_STORE_BYTES + 1).read_to_end(&mut text).is_err() || text.len() as u64 > MAX_STORE_BYTES {
            tracing::warn!(path = %path.display(), "stored searches unreadable or over {MAX_STORE_BYTES} bytes: ignored");
            return Vec::new();
        }
        serde_json::from_slice(&text).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tune::space::{KnobSpace, SpaceLimits};
    use crate::tune::{Evaluation, SearchOptions, Strategy};

    fn key(settings: &str) -> ProfileKey {
        ProfileKey { model_sha256: "ab".into(), device: "cpu".into(), settings: settings.into() }
    }

    fn trace(seed: u64) -> SearchTrace {
        let space = KnobSpace::new(SpaceLimits { max_batch: 8, cores: 2, images: false, gpu: false });
        let point = space.sample(&mut <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(seed));
        SearchTrace {
            strategy: Strategy::Bayes,
            options: SearchOptions { budget: 1, initial: 1, seed, confirm: 0 },
            evaluations: vec![Evaluation { setting: space.decode(&point), point, cost: Some(12.5), error: None }],
        }
    }

    #[test]
    fn a_search_is_reused_under_its_own_key_only_and_others_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let store = TuneStore::new(dir.path());
        assert!(store.load("v", &key("a")).is_none());
        store.save("v", &key("a"), &trace(1)).unwrap();
        store.save("v", &key("b"), &trace(2)).unwrap();
        assert_eq!(store.load("v", &key("a")), Some(trace(1)));
        assert_eq!(store.load("v", &key("b")), Some(trace(2)));
        assert!(store.load("v", &key("c")).is_none(), "another objective or seed");
        assert!(store.load("w", &key("a")).is_none(), "keyed by variant");
        assert!(store.load("v", &ProfileKey { device: "cuda:0".into(), ..key("a") }).is_none());
        store.save("v", &key("a"), &trace(3)).unwrap();
        assert_eq!(store.load("v", &key("a")), Some(trace(3)), "replaced");
        assert_eq!(store.load("v", &key("b")), Some(trace(2)), "kept");
        let all = store.all("v");
        assert_eq!(all.len(), 2);
        assert!(all.contains(&(key("a"), trace(3))) && all.contains(&(key("b"), trace(2))));
        assert!(store.all("w").is_empty());
    }

    #[test]
    fn a_corrupt_store_counts_as_empty_and_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let store = TuneStore::new(dir.path());
        std::fs::write(store.path("v"), b"{ not json").unwrap();
        assert!(store.load("v", &key("a")).is_none());
        store.save("v", &key("a"), &trace(1)).unwrap();
        assert_eq!(store.load("v", &key("a")), Some(trace(1)));
    }
}
