//! Measuring what a variant answers a second when its requests carry photos: a closed
//! loop through the task's own request path (the decoder pool, the queue, the
//! batches), so that decoding and inference share the cores as they do in service.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::Task;
use crate::error::Error;
use crate::model::Model;
use crate::preprocess::ImagePreprocess;
use crate::profile::{ImageCapacity, ImageProfile, ProfileKey, ProfileStore, profile_key, store_beside};
use crate::request::{ImageData, Inputs, Output, Slo};

/// Of the loop's time, the share at its start whose answers are not counted: the
/// decoders' and the session's first runs, and the loop filling its batches.
const WARMUP_SHARE: f64 = 0.2;

/// Photos of one size class.
#[derive(Clone, Debug)]
pub struct ImageSizeClass {
    /// What the capacity is stored under: `WIDTHxHEIGHT`, or a name for a set.
    pub name: String,
    /// The photos, encoded; sent in turn.
    pub photos: Vec<ImageData>,
}

/// How a capacity is measured.
#[derive(Clone, Copy, Debug)]
pub struct ImageCapacityOptions {
    /// How long the loop runs, its warm-up included.
    pub duration: Duration,
    /// Callers in the loop; by default enough to fill every instance's largest batch
    /// while each decoder thread prepares the next photo.
    pub clients: Option<usize>,
}

impl Default for ImageCapacityOptions {
    fn default() -> Self {
        ImageCapacityOptions { duration: Duration::from_secs(5), clients: None }
    }
}

/// The settings a photo's cost depends on besides the model file and the device.
#[derive(Serialize)]
struct ImageSettings<'a> {
    preprocess: &'a ImagePreprocess,
    max_batch_size: usize,
    max_queue_delay_us: u64,
    instances: usize,
    preprocess_threads: usize,
}

/// Sums over the counted answers.
#[derive(Default)]
struct Tally {
    answers: usize,
    rows: usize,
    decode: Duration,
    preprocess: Duration,
    queue: Duration,
    compute: Duration,
}

impl Tally {
    fn add(&mut self, output: &Output) {
        let t = &output.timings;
        self.answers += 1;
        self.rows += output.batch_size;
        (self.decode, self.preprocess) = (self.decode + t.decode, self.preprocess + t.preprocess);
        (self.queue, self.compute) = (self.queue + t.queue, self.compute + t.compute);
    }

    fn mean_ms(&self, total: Duration) -> f64 {
        total.as_secs_f64() * 1e3 / self.answers.max(1) as f64
    }
}

impl Task {
    /// Measures what `variant` answers a second when sent `class`'s photos by a closed
    /// loop of callers (each sending its next request when its last is answered), and
    /// stores it beside the model in the variant's image profile. The variant must be
    /// loaded and take images. `on_progress(seconds done, of)` about every quarter
    /// second.
    pub fn measure_image_capacity(
        &self,
        variant: &str,
        class: &ImageSizeClass,
        options: &ImageCapacityOptions,
        on_progress: &mut dyn FnMut(f64, f64),
    ) -> Result<ImageCapacity, Error> {
        let model = self.variant_model(variant)?;
        let input = model
            .image_input()
            .ok_or_else(|| Error::Precondition(format!("`{variant}` takes no images: it has no `preprocess`")))?
            .to_string();
        if class.photos.is_empty() {
            return Err(Error::Precondition(format!("size class `{}` has no photos", class.name)));
        }
        let clients = options.clients.unwrap_or_else(|| self.default_clients(&model)).max(1);
        let (tally, counted_s) = self.closed_loop(variant, &input, class, clients, options.duration, on_progress)?;
        let mean_bytes = class.photos.iter().map(|p| p.len() as u64).sum::<u64>() / class.photos.len() as u64;
        let capacity = ImageCapacity {
            size_class: class.name.clone(),
            photos: class.photos.len(),
            mean_bytes,
            clients,
            requests_per_s: tally.answers as f64 / counted_s,
            mean_batch: tally.rows as f64 / tally.answers.max(1) as f64,
            decode_ms: tally.mean_ms(tally.decode),
            preprocess_ms: tally.mean_ms(tally.preprocess),
            queue_ms: tally.mean_ms(tally.queue),
            compute_ms: tally.mean_ms(tally.compute),
            measured_s: counted_s,
        };
        let (store, key) = self.image_profile_key(variant, &model)?;
        let profile = store
            .record_image_capacity(variant, &key, capacity.clone())
            .map_err(|e| Error::io("store the image profile in", store.image_path(variant), e))?;
        self.keep_image_profile(variant, profile)?;
        Ok(capacity)
    }

    /// The image profile stored for `variant`'s serving version as it is configured
    /// now; `None` where none matches (or it is not loaded, or takes no images).
    pub fn image_profile(&self, variant: &str) -> Result<Option<ImageProfile>, Error> {
        let model = match self.variant_model(variant) {
            Ok(model) if model.preprocess().is_some() => model,
            Ok(_) | Err(Error::NotReady { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let (store, key) = self.image_profile_key(variant, &model)?;
        Ok(store.load_images(variant, &key))
    }

    /// Every instance's largest batch, and one photo in hand for each decoder thread.
    fn default_clients(&self, model: &Model) -> usize {
        model.batching().max_batch_size * model.instances() + self.images.pool.threads()
    }

    /// Runs the loop; the tally of the answers after the warm-up, and the seconds
    /// they came in over.
    fn closed_loop(
        &self,
        variant: &str,
        input: &str,
        class: &ImageSizeClass,
        clients: usize,
        duration: Duration,
        on_progress: &mut dyn FnMut(f64, f64),
    ) -> Result<(Tally, f64), Error> {
        let start = Instant::now();
        let counted_from = start + duration.mul_f64(WARMUP_SHARE);
        let (next, tally) = (AtomicUsize::new(0), Mutex::new(Tally::default()));
        let result = std::thread::scope(|s| {
            let callers: Vec<_> = (0..clients)
                .map(|_| {
                    s.spawn(|| {
                        while start.elapsed() < duration {
                            let photo = class.photos[next.fetch_add(1, Ordering::Relaxed) % class.photos.len()].clone();
                            let inputs = Inputs::default().with_images(input, [photo]);
                            let output = self.submit_to(variant, inputs, &Slo::default())?.wait()?;
                            if Instant::now() >= counted_from
                                && let Ok(mut tally) = tally.lock()
                            {
                                tally.add(&output);
                            }
                        }
                        Ok::<(), Error>(())
                    })
                })
                .collect();
            while start.elapsed() < duration {
                std::thread::sleep(Duration::from_millis(250));
                on_progress(start.elapsed().as_secs_f64().min(duration.as_secs_f64()), duration.as_secs_f64());
            }
            callers.into_iter().try_for_each(|c| c.join().unwrap_or(Err(Error::ShuttingDown)))
        });
        result?;
        // Answers count until the last of them: the loop ends when every caller's
        // last request is answered.
        let counted_s = Instant::now().saturating_duration_since(counted_from).as_secs_f64().max(1e-3);
        let tally = tally.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
        Ok((tally, counted_s))
    }

    /// Where `variant`'s image profile is stored and the key it holds for: its serving
    /// version's model file, its device, and what a photo's cost depends on.
    fn image_profile_key(&self, variant: &str, model: &Model) -> Result<(ProfileStore, ProfileKey), Error> {
        let index = self.index_of(variant)?;
        let path = {
            let inner = self.lock();
            let slot = &inner.variants[index];
            slot.serving_version().map(|e| e.path.clone()).ok_or_else(|| Error::NotReady { model: variant.into() })?
        };
        let key = self.image_key(variant, model, &path)?;
        Ok((store_beside(&path), key))
    }

    /// The key of an image profile of `model`, loaded from `path`.
    fn image_key(&self, variant: &str, model: &Model, path: &Path) -> Result<ProfileKey, Error> {
        let preprocess = model
            .preprocess()
            .ok_or_else(|| Error::Precondition(format!("`{variant}` takes no images: it has no `preprocess`")))?;
        let batching = model.batching();
        let settings = ImageSettings {
            preprocess,
            max_batch_size: batching.max_batch_size,
            max_queue_delay_us: batching.max_queue_delay_us,
            instances: model.instances(),
            preprocess_threads: self.images.pool.threads(),
        };
        profile_key(path, &model.device().name(), &settings).map_err(|e| Error::io("read", path, e))
    }

    /// The image profile stored for `model`, just loaded from `path` as `variant`'s
    /// version; `None` where it takes no images or none is stored for its settings.
    pub(super) fn stored_image_profile(&self, variant: &str, model: &Model, path: &Path) -> Option<Arc<ImageProfile>> {
        model.preprocess()?;
        let store = store_beside(path);
        // The key hashes the model file: only worth it where a profile may match.
        if !store.image_path(variant).exists() {
            return None;
        }
        let key = self.image_key(variant, model, path).ok()?;
        store.load_images(variant, &key).map(Arc::new)
    }

    /// Makes `profile`, just measured, the one `variant`'s serving version is priced by.
    fn keep_image_profile(&self, variant: &str, profile: ImageProfile) -> Result<(), Error> {
        let index = self.index_of(variant)?;
        let mut inner = self.lock();
        let slot = &mut inner.variants[index];
        if let Some(entry) = slot.current.and_then(|c| slot.versions.get_mut(&c)) {
            if let Some(model) = &entry.model {
                model.set_photo_capacity(profile.least_requests_per_s());
            }
            entry.image_profile = Some(Arc::new(profile));
        }
        Ok(())
    }
}
