//! What a task's recent requests carried as photos: the share of them that carried
//! photos, and the photos' mean size encoded. Decayed per request, so a policy reads
//! the mix of about the last hundred requests, not of the process's life.

use modelless_policy_abi::PhotoTraffic;

/// How much of the running figures each new request replaces.
const WEIGHT: f64 = 0.01;

/// The running figures; empty until a request carried a photo.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PhotoMix {
    share: f64,
    mean_bytes: f64,
    seen: bool,
}

impl PhotoMix {
    /// A request arrived carrying `photos` photos of `bytes` encoded in all (none: it
    /// carried tensors).
    pub fn arrived(&mut self, photos: usize, bytes: u64) {
        let carried = photos > 0;
        if carried {
            let per_photo = bytes as f64 / photos as f64;
            self.mean_bytes =
                if self.seen { self.mean_bytes + WEIGHT * (per_photo - self.mean_bytes) } else { per_photo };
        }
        let indicator = if carried { 1.0 } else { 0.0 };
        self.share = if self.seen { self.share + WEIGHT * (indicator - self.share) } else { indicator };
        self.seen |= carried;
    }

    /// The mix as a policy sees it; `None` until a request carried a photo.
    pub fn reading(&self) -> Option<PhotoTraffic> {
        self.seen.then_some(PhotoTraffic { share: self.share, mean_bytes: self.mean_bytes })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mix_follows_recent_requests_and_is_absent_before_a_photo() {
        let mut mix = PhotoMix::default();
        mix.arrived(0, 0);
        assert_eq!(mix.reading(), None, "tensors only");
        mix.arrived(2, 80_000);
        assert_eq!(mix.reading(), Some(PhotoTraffic { share: 1.0, mean_bytes: 40_000.0 }), "per photo");
        // Large photos from now on: the mean moves most of the way in a few hundred.
        for _ in 0..300 {
            mix.arrived(1, 2_000_000);
        }
        let reading = mix.reading().unwrap();
        assert!(reading.mean_bytes > 1_900_000.0 && reading.mean_bytes < 2_000_000.0, "{reading:?}");
        // Half the requests now carry tensors: the share falls towards a half, the
        // photos' size holds.
        for _ in 0..300 {
            mix.arrived(0, 0);
            mix.arrived(1, 2_000_000);
        }
        let reading = mix.reading().unwrap();
        assert!((reading.share - 0.5).abs() < 0.02 && reading.mean_bytes > 1_990_000.0, "{reading:?}");
    }
}
