//! The batching knobs each variant serves with, as a policy sets them.

use super::*;

impl Task {
    /// The active variant and its serving knobs, and the requests waiting in its queue.
    pub fn serving(&self) -> (ServingKnobs, u64) {
        let routes = self.routes.load();
        let Some(routes) = routes.as_ref() else { return (ServingKnobs::default(), 0) };
        let model = &routes.ready[routes.active];
        let batching = model.batching();
        let knobs = ServingKnobs {
            variant: routes.names[routes.active].clone(),
            max_batch_size: batching.max_batch_size as u32,
            max_queue_delay_us: batching.max_queue_delay_us,
            instances: model.instances() as u32,
        };
        (knobs, model.queued() as u64)
    }

    /// Each variant's name and the largest batch it may form: its configured
    /// `max_batch_size`, capped to what its serving version's profile found fits in
    /// memory. A batch size set by [`Task::configure_variant`] is clamped to it.
    pub fn batch_ceilings(&self) -> Vec<(String, usize)> {
        self.lock().variants.iter().map(|slot| (slot.config.name.clone(), slot.ceiling())).collect()
    }

    /// Sets `variant`'s batch size and queue delay, whether it serves, waits loaded, or
    /// is not loaded yet (it then loads with them), within bounds (see
    /// [`BatchingKnobs::clamped`]; the variant's ceiling is in [`Task::batch_ceilings`]).
    /// The knobs stay with the variant across its reloads and versions. Returns the
    /// knobs it serves (or is to serve) with.
    pub fn configure_variant(&self, variant: &str, knobs: BatchingKnobs) -> Result<BatchingConfig, Error> {
        let _control = self.control.lock().unwrap_or_else(PoisonError::into_inner);
        let index = self.index_of(variant)?;
        let (model, batching) = {
            let mut inner = self.lock();
            let slot = &mut inner.variants[index];
            let knobs = knobs.clamped(slot.ceiling());
            slot.knobs = slot.knobs.then(knobs);
            match slot.serving_version().and_then(|e| e.model.clone()) {
                Some(model) => {
                    let batching = model.batching().with_knobs(knobs);
                    (Some(model), batching)
                }
                None => (None, slot.config.batching.clone().with_knobs(slot.knobs)),
            }
        };
        if let Some(model) = model {
            model.configure(batching.clone())?;
        }
        Ok(batching)
    }
}
