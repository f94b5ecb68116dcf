//! Which variant's model a request goes to: the active one, one named, or the
//! cheapest that is accurate enough; and queuing it there, counted.

use super::*;
use crate::trace;

impl Task {
    /// Whether `variant` can serve the task: known, and not found to misfit its
    /// signature. A policy's switch to one that cannot is refused with this error.
    pub fn can_serve(&self, variant: &str) -> Result<(), Error> {
        self.servable_index(variant).map(drop)
    }

    /// The index of `variant`, unless it is unknown or known not to fit.
    pub(super) fn servable_index(&self, variant: &str) -> Result<usize, Error> {
        let index = self.index_of(variant)?;
        match &self.lock().variants[index].misfit {
            Some(mismatch) => Err(Error::DoesNotFitTask(mismatch.clone())),
            None => Ok(index),
        }
    }

    /// Checks and queues a request: the active variant serves it, or, when it asks for
    /// more accuracy than that, the cheapest ready variant that has it.
    pub fn submit(&self, inputs: Inputs, slo: &Slo) -> Result<Ticket, Error> {
        let now = Instant::now();
        let routes = self.routes.load();
        let routes = routes.as_ref().ok_or(Error::ShuttingDown)?;
        let Some(chosen) = choose(&routes.accuracies, routes.costs.as_deref(), routes.active, slo.min_accuracy) else {
            self.traffic.refused();
            let error = Error::NoVariantMeetsSlo {
                task: self.name.to_string(),
                min_accuracy: slo.min_accuracy.unwrap_or(f64::NAN),
                available: routes.names.iter().cloned().zip(routes.accuracies.iter().copied()).collect(),
            };
            self.refusals.failed(&error);
            return Err(error);
        };
        let options = slo.options(now);
        let chosen = self.admitting(routes, chosen, &inputs, &options, slo.min_accuracy);
        self.submit_counted(&routes.ready[chosen], inputs, options)
    }

    /// `chosen`, unless it would refuse the request as unable to answer it in time and
    /// a cheaper ready variant accurate enough would not: then the most accurate such
    /// one. A warm variant that can answer is better than a refusal, and the active
    /// one's queue keeps what it can serve (a policy's step down comes a tick later).
    /// A cheaper variant on `chosen`'s device runs beside it while `chosen` works
    /// through its queue, the two sharing the cores: it is judged at
    /// [`crate::batching::SHARING_SLOWDOWN`] times its line.
    fn admitting(
        &self,
        routes: &Routes,
        chosen: usize,
        inputs: &Inputs,
        options: &InferOptions,
        min_accuracy: Option<f64>,
    ) -> usize {
        let Some(deadline) = options.deadline else { return chosen };
        if !self.spill {
            return chosen;
        }
        let rows = inputs.rows();
        let device = routes.ready[chosen].device();
        let admits = |i: usize| {
            let model = &routes.ready[i];
            let preparing =
                if inputs.has_images() { images::preparing(&self.images, model, inputs) } else { Duration::ZERO };
            let slowed_by =
                if i != chosen && model.device() == device { crate::batching::SHARING_SLOWDOWN } else { 1.0 };
            model.would_admit(rows, options.priority, deadline, preparing, slowed_by)
        };
        if admits(chosen) {
            return chosen;
        }
        spill_order(&routes.accuracies, routes.costs.as_deref(), chosen, min_accuracy)
            .into_iter()
            .find(|&i| admits(i))
            .unwrap_or(chosen)
    }

    /// Queues a request on `model`, counted in the task's traffic; one that carries
    /// images goes through the preprocessing pool first.
    pub(super) fn submit_counted(
        &self,
        model: &Arc<Model>,
        inputs: Inputs,
        options: InferOptions,
    ) -> Result<Ticket, Error> {
        let span = trace::request(&self.name, model.name(), options.priority, options.deadline);
        let photos = inputs.images.iter().flat_map(|(_, images)| images);
        let (count, bytes) = photos.fold((0, 0), |(n, b), image| (n + 1, b + image.len() as u64));
        self.traffic.carried(count, bytes);
        if inputs.has_images() {
            return images::submit(&self.images, model.clone(), inputs, options, span);
        }
        // Counted in flight before it can be answered, so the count never dips below zero.
        self.traffic.admitted();
        let submitted = model.submit_in(inputs, options, span);
        if let Err(error) = &submitted {
            self.traffic.unadmitted(error);
        }
        submitted
    }

    /// Checks and queues a request for `variant` itself, bypassing routing; refused as
    /// not ready when the variant is not loaded.
    pub fn submit_to(&self, variant: &str, inputs: Inputs, slo: &Slo) -> Result<Ticket, Error> {
        let model = self.variant_model(variant)?;
        self.submit_counted(&model, inputs, slo.options(Instant::now()))
    }

    /// The serving version of `variant`: `NotReady` when it is not loaded.
    pub fn variant_model(&self, variant: &str) -> Result<Arc<Model>, Error> {
        let routes = self.routes.load();
        let routes = routes.as_ref().ok_or(Error::ShuttingDown)?;
        if let Some(i) = routes.names.iter().position(|n| n == variant) {
            return Ok(routes.ready[i].clone());
        }
        self.index_of(variant)?;
        Err(Error::NotReady { model: variant.to_string() })
    }

    /// The serving version of the active variant.
    pub fn active_model(&self) -> Result<Arc<Model>, Error> {
        let routes = self.routes.load();
        let routes = routes.as_ref().ok_or(Error::ShuttingDown)?;
        routes.ready.get(routes.active).cloned().ok_or(Error::ShuttingDown)
    }

    /// Whether the task has a variant called `variant`.
    pub fn has_variant(&self, variant: &str) -> bool {
        self.index_of(variant).is_ok()
    }
}
