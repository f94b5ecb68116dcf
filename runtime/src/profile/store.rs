//! The profile store: one JSON file per variant, reused while the model file (by its
//! SHA-256), the device and the settings are those it was measured with.

use std::io::Read;
use std::path::{Path, PathBuf};

use modelless_policy_abi::{Profile, ProfileKey};
use serde::Serialize;
use serde::de::DeserializeOwned;
use sha2::{Digest, Sha256};

/// The largest profile file read: a profile of every batch size up to thousands,
/// with its first runs, is a few hundred KiB.
const MAX_PROFILE_BYTES: u64 = 16 << 20;

/// A folder of profiles.
#[derive(Clone, Debug)]
pub struct ProfileStore {
    dir: PathBuf,
}

impl ProfileStore {
    /// Profiles kept in `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        ProfileStore { dir: dir.into() }
    }

    /// The folder it keeps.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file of `variant`'s profile.
    pub fn path(&self, variant: &str) -> PathBuf {
        self.dir.join(format!("{variant}.profile.json"))
    }

    /// The stored profile of `variant`, if there is one measured for `key`.
    pub fn load(&self, variant: &str, key: &ProfileKey) -> Option<Profile> {
        let mut profile = self.read(variant)?;
        if profile.key != *key {
            return None;
        }
        // A file written before fits were judged, or by hand, may hold an untrusted one.
        if profile.fit_refused.is_none() {
            let (fit, refused) = super::fit::trusted_fit(variant, profile.fit);
            (profile.fit, profile.fit_refused) = (fit, refused);
        }
        Some(profile)
    }

    /// The largest batch that fit the memory budget of `variant`'s stored profile, if
    /// it was measured on the model file whose SHA-256 is `model_sha256` (whatever
    /// the device and settings).
    pub fn max_safe_batch(&self, variant: &str, model_sha256: &str) -> Option<usize> {
        let profile = self.read(variant)?;
        (profile.key.model_sha256 == model_sha256).then_some(profile.max_safe_batch? as usize)
    }

    /// The profile file of `variant`, if it is one.
    fn read(&self, variant: &str) -> Option<Profile> {
        self.read_json(&self.path(variant))
    }

    /// Stores `profile` as `variant`'s, replacing any before it.
    pub fn save(&self, variant: &str, profile: &Profile) -> std::io::Result<()> {
        self.write_json(&self.path(variant), profile)
    }

    /// The JSON file at `path` in this store: one that is missing, larger than a
    /// profile can be, or corrupt counts as none (it is measured again).
    pub(super) fn read_json<T: DeserializeOwned>(&self, path: &Path) -> Option<T> {
        let file = std::fs::File::open(path).ok()?;
        let mut text = Vec::new();
        file.take(MAX_PROFILE_BYTES + 1).read_to_end(&mut text).ok()?;
        if text.len() as u64 > MAX_PROFILE_BYTES {
            tracing::warn!(path = %path.display(), "profile file over {MAX_PROFILE_BYTES} bytes ignored");
            return None;
        }
        serde_json::from_slice(&text).ok()
    }

    /// Writes `value` as JSON to `path` in this store, replacing any file there.
    pub(super) fn write_json(&self, path: &Path, value: &impl Serialize) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let partial = path.with_extension("json.partial");
        std::fs::write(&partial, serde_json::to_vec_pretty(value)?)?;
        // A reader sees the old file or the new one, never half of one.
        std::fs::rename(partial, path)
    }
}

/// SHA-256 of a file, hex.
pub fn file_sha256(path: &Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// The key of a profile of `model` on `device` with `settings`.
pub fn profile_key(model: &Path, device: &str, settings: &impl Serialize) -> std::io::Result<ProfileKey> {
    Ok(ProfileKey {
        model_sha256: file_sha256(model)?,
        device: device.to_string(),
        settings: serde_json::to_string(settings)?,
    })
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use proptest::collection::vec;
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::*;
    use crate::batching::BatchingConfig;
    use crate::fuzzing::{PeakAllocator, fuzz, hostile};
    #[cfg(feature = "warmup-predictor")]
    use crate::profile::WarmupFeatures;
    use crate::registry::memory_capped;

    fn profile(key: ProfileKey) -> Profile {
        Profile {
            key,
            points: Vec::new(),
            fit: None,
            fit_refused: None,
            max_throughput: None,
            memory_budget_bytes: None,
            max_safe_batch: None,
            first_runs: Vec::new(),
        }
    }

    #[test]
    fn a_stored_fit_below_the_least_r2_is_not_used() {
        let dir = tempfile::tempdir().unwrap();
        let model = dir.path().join("model.onnx");
        std::fs::write(&model, b"weights").unwrap();
        let store = ProfileStore::new(dir.path());
        let key = profile_key(&model, "cuda:0", &("threads", 2)).unwrap();
        let noisy = modelless_policy_abi::LatencyFit { a_ms: 0.138, c_ms: 130.0, r2: 0.038 };
        store.save("resnet50", &Profile { fit: Some(noisy), ..profile(key.clone()) }).unwrap();
        let loaded = store.load("resnet50", &key).unwrap();
        assert_eq!(loaded.fit, None, "admission must not price requests with it");
        assert!(loaded.fit_refused.is_some_and(|why| why.contains("R² 0.038")));
        let good = modelless_policy_abi::LatencyFit { a_ms: 0.2, c_ms: 1.5, r2: 0.999 };
        store.save("resnet50", &Profile { fit: Some(good), ..profile(key.clone()) }).unwrap();
        assert_eq!(store.load("resnet50", &key).unwrap().fit, Some(good));
    }

    #[test]
    fn a_profile_is_reused_only_for_the_same_file_device_and_settings() {
        let dir = tempfile::tempdir().unwrap();
        let model = dir.path().join("model.onnx");
        std::fs::write(&model, b"weights v1").unwrap();
        let store = ProfileStore::new(dir.path());
        let key = profile_key(&model, "cpu", &("threads", 2)).unwrap();
        store.save("small", &profile(key.clone())).unwrap();
        assert_eq!(store.load("small", &key).map(|p| p.key), Some(key.clone()));
        assert!(store.load("other", &key).is_none(), "keyed by variant");
        assert!(store.load("small", &profile_key(&model, "cuda:0", &("threads", 2)).unwrap()).is_none());
        assert!(store.load("small", &profile_key(&model, "cpu", &("threads", 1)).unwrap()).is_none());
        std::fs::write(&model, b"weights v2").unwrap();
        assert!(store.load("small", &profile_key(&model, "cpu", &("threads", 2)).unwrap()).is_none(), "new file");
    }

    #[test]
    fn a_corrupt_or_missing_profile_is_measured_again() {
        let dir = tempfile::tempdir().unwrap();
        let store = ProfileStore::new(dir.path());
        let key = ProfileKey { model_sha256: "00".into(), device: "cpu".into(), settings: "{}".into() };
        assert!(store.load("small", &key).is_none());
        std::fs::write(store.path("small"), b"{ not json").unwrap();
        assert!(store.load("small", &key).is_none());
    }

    #[test]
    fn the_hash_is_the_file_s_sha256() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("abc");
        std::fs::write(&file, b"abc").unwrap();
        assert_eq!(file_sha256(&file).unwrap(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }

    /// A profile file as a disk, a crash or a hand edit may leave it: numbers of every
    /// size and kind where the runtime expects counts, times and bytes.
    fn profile_file(key: ProfileKey) -> impl Strategy<Value = Vec<u8>> {
        let number = || {
            prop_oneof![
                4 => (0u64..100).prop_map(Value::from),
                1 => any::<u32>().prop_map(Value::from),
                1 => any::<u64>().prop_map(Value::from),
                1 => (-1e300f64..1e300).prop_map(Value::from),
                1 => hostile::scalar(),
            ]
        };
        let point = (number(), number(), number(), number(), number()).prop_map(|(batch, first, p50, p99, memory)| {
            json!({ "batch_size": batch, "first_run_ms": first, "warm_p50_ms": p50, "warm_p99_ms": p99,
                    "warm_runs": 3, "memory_bytes": memory })
        });
        let fit = (number(), number(), number()).prop_map(|(a, c, r2)| json!({ "a_ms": a, "c_ms": c, "r2": r2 }));
        let first_run =
            (number(), number(), number(), number(), number()).prop_map(|(b, before, switches, memory, ms)| {
                json!({ "batch_size": b, "largest_before": before, "involuntary_switches": switches,
                    "memory_in_use_bytes": memory, "first_run_ms": ms })
            });
        let file = (vec(point, 0..6), proptest::option::of(fit), proptest::option::of(number()), vec(first_run, 0..4))
            .prop_map(move |(points, fit, max_safe_batch, first_runs)| {
                json!({ "key": key, "points": points, "fit": fit, "max_throughput": null,
                        "memory_budget_bytes": 1 << 30, "max_safe_batch": max_safe_batch, "first_runs": first_runs })
                .to_string()
            });
        prop_oneof![8 => file.prop_flat_map(hostile::mangled), 1 => vec(any::<u8>(), 0..256)]
    }

    #[test]
    fn fuzz_profile_files() {
        let dir = tempfile::tempdir().unwrap();
        let store = ProfileStore::new(dir.path());
        let key = ProfileKey { model_sha256: "ab".into(), device: "cpu".into(), settings: "{}".into() };
        let (read, refused) = (Cell::new(0), Cell::new(0));
        fuzz("profile-file", profile_file(key.clone()), |bytes| {
            std::fs::write(store.path("v"), &bytes).unwrap();
            PeakAllocator::reset();
            let profile = store.load("v", &key);
            let safe_batch = store.max_safe_batch("v", "ab");
            let largest = PeakAllocator::largest();
            prop_assert!(largest <= 16 * bytes.len() + (64 << 10), "{} bytes allocated {largest}", bytes.len());
            let Some(profile) = profile else {
                refused.set(refused.get() + 1);
                return Ok(());
            };
            read.set(read.get() + 1);
            prop_assert_eq!(safe_batch, profile.max_safe_batch.map(|b| b as usize));
            // Whatever the file says, batches stay between 1 and what was configured,
            // and every estimate drawn from it is a number.
            let capped = memory_capped(BatchingConfig::default().with_max_batch_size(8), Some(&profile));
            prop_assert!((1..=8).contains(&capped.max_batch_size), "capped to {}", capped.max_batch_size);
            #[cfg(feature = "warmup-predictor")]
            if let Some(fit) = &profile.fit {
                for sample in &profile.first_runs {
                    let features = WarmupFeatures::of(sample, fit, &profile.points);
                    prop_assert!(!features.warm_ms.is_nan() || fit.a_ms.is_nan() || fit.c_ms.is_nan());
                }
            }
            Ok(())
        });
        assert!(read.get() > 0 && refused.get() > 0, "{} read, {} refused", read.get(), refused.get());
    }

    #[test]
    fn a_profile_file_larger_than_any_profile_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let store = ProfileStore::new(dir.path());
        let key = ProfileKey { model_sha256: "ab".into(), device: "cpu".into(), settings: "{}".into() };
        let mut text = serde_json::to_vec(&profile(key.clone())).unwrap();
        text.resize(MAX_PROFILE_BYTES as usize, b' ');
        std::fs::write(store.path("v"), &text).unwrap();
        assert!(store.load("v", &key).is_some(), "a profile padded to the bound is read");
        text.push(b' ');
        std::fs::write(store.path("v"), &text).unwrap();
        assert!(store.load("v", &key).is_none(), "one byte over it is not");
    }
}
