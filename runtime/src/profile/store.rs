//! The profile store: one JSON file per variant, reused while the model file (by its
//! SHA-256), the device and the settings are those it was measured with.

use std::io::Read;
use std::path::{Path, PathBuf};

use modelless_policy_abi::{Profile, ProfileKey};
use serde::Serialize;
use sha2::{Digest, Sha256};

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

    /// The file of `variant`'s profile.
    pub fn path(&self, variant: &str) -> PathBuf {
        self.dir.join(format!("{variant}.profile.json"))
    }

    /// The stored profile of `variant`, if there is one measured for `key`.
    pub fn load(&self, variant: &str, key: &ProfileKey) -> Option<Profile> {
        let text = std::fs::read_to_string(self.path(variant)).ok()?;
        let profile: Profile = serde_json::from_str(&text).ok()?;
        (profile.key == *key).then_some(profile)
    }

    /// The largest batch that fit the memory budget of `variant`'s stored profile, if
    /// it was measured on the model file whose SHA-256 is `model_sha256` (whatever
    /// the device and settings).
    pub fn max_safe_batch(&self, variant: &str, model_sha256: &str) -> Option<usize> {
        let text = std::fs::read_to_string(self.path(variant)).ok()?;
        let profile: Profile = serde_json::from_str(&text).ok()?;
        (profile.key.model_sha256 == model_sha256).then_some(profile.max_safe_batch? as usize)
    }

    /// Stores `profile` as `variant`'s, replacing any before it.
    pub fn save(&self, variant: &str, profile: &Profile) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let path = self.path(variant);
        let partial = path.with_extension("json.partial");
        std::fs::write(&partial, serde_json::to_vec_pretty(profile)?)?;
        // A reader sees the old profile or the new one, never half of one.
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
    use super::*;

    fn profile(key: ProfileKey) -> Profile {
        Profile {
            key,
            points: Vec::new(),
            fit: None,
            max_throughput: None,
            memory_budget_bytes: None,
            max_safe_batch: None,
            first_runs: Vec::new(),
        }
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
}
