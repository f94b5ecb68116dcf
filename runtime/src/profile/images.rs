//! What an image variant answers a second when requests carry photos: decoding,
//! resizing and inference measured together on the cores they share, per size class
//! of photo. A tensor profile prices the session alone; on a machine where the
//! decoder and the session take turns on the same cores, this is the capacity that
//! holds. Stored beside the model, next to the tensor profile, under a key of its own.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{ProfileKey, ProfileStore};

/// What one variant served in a closed loop of photos of one size class.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ImageCapacity {
    /// The size class: `WIDTHxHEIGHT` of generated photos, or a name for a set.
    pub size_class: String,
    /// Distinct photos sent.
    pub photos: usize,
    /// Their mean size encoded, in bytes.
    pub mean_bytes: u64,
    /// Callers in the closed loop.
    pub clients: usize,
    /// Requests answered a second, after the loop's warm-up.
    pub requests_per_s: f64,
    /// Mean rows of the batches the answers rode in.
    pub mean_batch: f64,
    /// Mean per answer, ms: decoding its photo.
    pub decode_ms: f64,
    /// Resizing and normalising it.
    pub preprocess_ms: f64,
    /// Waiting for a decoder thread, then for its batch.
    pub queue_ms: f64,
    /// Its batch's run.
    pub compute_ms: f64,
    /// Seconds the rate was measured over.
    pub measured_s: f64,
}

/// A variant's whole-request capacities, one per size class measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ImageProfile {
    /// What they were measured for: the model file, the device, and the settings a
    /// photo's cost depends on (preprocessing, batching, instances, decoder threads).
    pub key: ProfileKey,
    /// By size class, in the order measured.
    pub capacities: Vec<ImageCapacity>,
}

impl ImageProfile {
    /// The capacity measured for `size_class`, if it was.
    pub fn capacity(&self, size_class: &str) -> Option<&ImageCapacity> {
        self.capacities.iter().find(|c| c.size_class == size_class)
    }

    /// The least requests a second measured with any size class: what the variant
    /// surely answers whatever photos come.
    pub fn least_requests_per_s(&self) -> Option<f64> {
        self.capacities.iter().map(|c| c.requests_per_s).min_by(f64::total_cmp)
    }

    /// With `capacity` in place of any of its size class.
    fn with(mut self, capacity: ImageCapacity) -> Self {
        match self.capacities.iter_mut().find(|c| c.size_class == capacity.size_class) {
            Some(old) => *old = capacity,
            None => self.capacities.push(capacity),
        }
        self
    }
}

impl ProfileStore {
    /// The file of `variant`'s image profile.
    pub fn image_path(&self, variant: &str) -> PathBuf {
        self.dir().join(format!("{variant}.images.json"))
    }

    /// `variant`'s image profile, if one is stored for `key`.
    pub fn load_images(&self, variant: &str, key: &ProfileKey) -> Option<ImageProfile> {
        self.read_json::<ImageProfile>(&self.image_path(variant)).filter(|p| p.key == *key)
    }

    /// Stores `capacity` in `variant`'s image profile for `key`, beside the size classes
    /// measured before for the same key (those of another key are dropped); returns the
    /// profile stored.
    pub fn record_image_capacity(
        &self,
        variant: &str,
        key: &ProfileKey,
        capacity: ImageCapacity,
    ) -> std::io::Result<ImageProfile> {
        let before =
            self.load_images(variant, key).unwrap_or(ImageProfile { key: key.clone(), capacities: Vec::new() });
        let profile = before.with(capacity);
        self.write_json(&self.image_path(variant), &profile)?;
        Ok(profile)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capacity(size_class: &str, requests_per_s: f64) -> ImageCapacity {
        ImageCapacity {
            size_class: size_class.into(),
            photos: 2,
            mean_bytes: 40_000,
            clients: 10,
            requests_per_s,
            mean_batch: 7.5,
            decode_ms: 3.0,
            preprocess_ms: 0.7,
            queue_ms: 20.0,
            compute_ms: 40.0,
            measured_s: 4.0,
        }
    }

    #[test]
    fn size_classes_accumulate_under_a_key_and_another_key_starts_afresh() {
        let dir = tempfile::tempdir().unwrap();
        let store = ProfileStore::new(dir.path());
        let key = ProfileKey { model_sha256: "ab".into(), device: "cpu".into(), settings: "{}".into() };
        assert_eq!(store.load_images("lite0", &key), None);
        store.record_image_capacity("lite0", &key, capacity("500x375", 120.0)).unwrap();
        store.record_image_capacity("lite0", &key, capacity("3564x2880", 9.0)).unwrap();
        let again = store.record_image_capacity("lite0", &key, capacity("500x375", 130.0)).unwrap();
        assert_eq!(store.load_images("lite0", &key).as_ref(), Some(&again));
        let rates: Vec<(&str, f64)> =
            again.capacities.iter().map(|c| (c.size_class.as_str(), c.requests_per_s)).collect();
        assert_eq!(rates, [("500x375", 130.0), ("3564x2880", 9.0)], "remeasured in place");
        // Another model file, device or setting: the old capacities say nothing of it.
        let other = ProfileKey { settings: "{\"instances\":2}".into(), ..key.clone() };
        assert_eq!(store.load_images("lite0", &other), None);
        let fresh = store.record_image_capacity("lite0", &other, capacity("500x375", 200.0)).unwrap();
        assert_eq!(fresh.capacities.len(), 1);
        assert_eq!(store.load_images("lite0", &key), None, "replaced");
        // Beside the tensor profile, in a file of its own.
        assert!(store.image_path("lite0").ends_with("lite0.images.json"));
        assert_ne!(store.image_path("lite0"), store.path("lite0"));
    }

    #[test]
    fn a_corrupt_image_profile_counts_as_none() {
        let dir = tempfile::tempdir().unwrap();
        let store = ProfileStore::new(dir.path());
        let key = ProfileKey { model_sha256: "ab".into(), device: "cpu".into(), settings: "{}".into() };
        std::fs::write(store.image_path("v"), b"{\"key\": 3").unwrap();
        assert_eq!(store.load_images("v", &key), None);
        store.record_image_capacity("v", &key, capacity("a", 1.0)).unwrap();
        assert_eq!(store.load_images("v", &key).map(|p| p.capacities.len()), Some(1));
    }
}
