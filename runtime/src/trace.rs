//! Request spans: one `tracing` span per request, carried with it across the threads
//! it crosses (the caller's at admission, a preprocessing thread, the batching queue,
//! an instance thread), with a child span per stage:
//!
//! ```text
//! request      task, variant, priority, deadline_ms    admission → answer sent
//! ├─ decode      image                                 per image, on the pool
//! ├─ preprocess  image                                 per image, on the pool
//! ├─ queue                                             queued → its batch starts
//! └─ batch       batch_size, instance                  its batch starts → answer sent
//! batch_run    model, instance, batch_size, requests   one per batch, its own trace
//! ```
//!
//! A batch serves several requests, each of its own trace, so its span cannot be a
//! child of all of them: `batch_run` is a root span that links to the request span of
//! every request it ran, and each request's `batch` child, which carries the batch's
//! size and instance, links back to it. A viewer shows each request's stages in its
//! own trace, and can follow a link to the batch it shared.
//!
//! Every span has the target [`TARGET`], at level INFO: a subscriber that does not ask
//! for it leaves them disabled, and a disabled span costs a cached check (its fields
//! are not even evaluated), so the hot path pays nothing without a subscriber. Spans
//! that time a stage are never entered, only created and dropped: an OpenTelemetry
//! bridge ends an entered span at its last exit, not when it is dropped.

use std::fmt::Debug;
use std::time::Instant;

use tracing::Span;
use tracing::field::Empty;

/// The target of every request span: `modelless::request=info` in a filter turns them on.
pub const TARGET: &str = "modelless::request";

/// A new request's span, a child of the current span (or of the caller's remote
/// context, where the endpoint set one): the task asked, the variant serving it, its
/// priority and the time to its deadline.
pub(crate) fn request(task: &str, variant: &str, priority: impl Debug, deadline: Option<Instant>) -> Span {
    let span = tracing::info_span!(
        target: TARGET,
        "request",
        task,
        variant,
        priority = ?priority,
        deadline_ms = Empty,
        error = Empty,
        otel.status_code = Empty,
    );
    if let Some(deadline) = deadline.filter(|_| !span.is_disabled()) {
        span.record("deadline_ms", deadline.saturating_duration_since(Instant::now()).as_secs_f64() * 1e3);
    }
    span
}

/// The span of decoding image `image` of a request (`parent`).
pub(crate) fn decode(parent: &Span, image: usize) -> Span {
    tracing::info_span!(target: TARGET, parent: parent, "decode", image)
}

/// The span of resizing and normalising image `image` of a request (`parent`).
pub(crate) fn preprocess(parent: &Span, image: usize) -> Span {
    tracing::info_span!(target: TARGET, parent: parent, "preprocess", image)
}

/// The span of one batch on instance `instance` of `model`: a root span; its size and
/// requests are recorded once known, and each request is linked with [`Traced::run_in`].
pub(crate) fn batch_run(model: &str, instance: usize) -> Span {
    tracing::info_span!(target: TARGET, parent: None, "batch_run", model, instance, batch_size = Empty, requests = Empty)
}

/// A queued request's spans: its own, and its current stage's.
#[derive(Debug)]
pub(crate) struct Traced {
    /// The request's span; it ends once every part of the request is answered.
    pub request: Span,
    /// The stage it is in: `queue` while it waits for a batch, `batch` once it runs.
    stage: Span,
}

impl Traced {
    /// A request (`request`) entering the batching queue: its `queue` span starts.
    pub fn queued(request: Span) -> Traced {
        let stage = tracing::info_span!(target: TARGET, parent: &request, "queue");
        Traced { request, stage }
    }

    /// Its queue wait ends as `batch` (`batch_size` rows on `instance`) starts with it:
    /// the request's `batch` span starts, and it and `batch` link to each other.
    pub fn run_in(&mut self, batch: &Span, batch_size: usize, instance: usize) {
        // Dropping the queue span ends the wait, before the batch starts.
        self.stage = Span::none();
        self.stage = tracing::info_span!(target: TARGET, parent: &self.request, "batch", batch_size, instance);
        self.stage.follows_from(batch);
        batch.follows_from(&self.request);
    }

    /// Marks the request as failed with `error`.
    pub fn failed(&self, error: &dyn std::error::Error) {
        failed(&self.request, error);
    }
}

/// Marks the request of span `request` as failed with `error`.
pub(crate) fn failed(request: &Span, error: &dyn std::error::Error) {
    request.record("otel.status_code", "ERROR").record("error", tracing::field::display(error));
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tracing::span::{Attributes, Id};
    use tracing_subscriber::layer::{Context, SubscriberExt};
    use tracing_subscriber::registry::LookupSpan;

    use super::*;

    /// What a subscriber saw, in order: spans opening (with their parent) and closing,
    /// and links.
    #[derive(Clone, Default)]
    struct Seen(Arc<Mutex<Vec<String>>>);

    impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> tracing_subscriber::Layer<S> for Seen {
        fn on_new_span(&self, _: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
            let span = ctx.span(id).unwrap();
            let parent = span.parent().map_or("none".into(), |p| p.name().to_string());
            self.0.lock().unwrap().push(format!("open {} in {parent}", span.name()));
        }

        fn on_follows_from(&self, id: &Id, follows: &Id, ctx: Context<'_, S>) {
            let (span, follows) = (ctx.span(id).unwrap(), ctx.span(follows).unwrap());
            self.0.lock().unwrap().push(format!("link {} to {}", span.name(), follows.name()));
        }

        fn on_close(&self, id: Id, ctx: Context<'_, S>) {
            self.0.lock().unwrap().push(format!("close {}", ctx.span(&id).unwrap().name()));
        }
    }

    #[test]
    fn a_requests_stages_nest_under_it_and_its_queue_wait_ends_before_its_batch_starts() {
        let seen = Seen::default();
        let subscriber = tracing_subscriber::registry().with(seen.clone());
        tracing::subscriber::with_default(subscriber, || {
            let span = request("t", "v", "Normal", Some(Instant::now()));
            drop(decode(&span, 0));
            drop(preprocess(&span, 0));
            let mut traced = Traced::queued(span);
            let batch = batch_run("v", 0);
            traced.run_in(&batch, 1, 0);
            drop(batch);
            drop(traced);
        });
        let seen = seen.0.lock().unwrap().clone();
        let expected = [
            "open request in none",
            "open decode in request",
            "close decode",
            "open preprocess in request",
            "close preprocess",
            "open queue in request",
            "open batch_run in none",
            "close queue",
            "open batch in request",
            "link batch to batch_run",
            "link batch_run to request",
            "close batch_run",
            "close batch",
            "close request",
        ];
        assert_eq!(seen, expected);
    }
}
