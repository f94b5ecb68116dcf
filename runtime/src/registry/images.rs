//! Requests that carry images: preprocessed on the pool for the variant routing chose,
//! then queued on it as ready tensors; and made again for another variant when a switch
//! moves them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::admission::batch_key;
use crate::answered::Answered;
use crate::batching::margin::Prediction;
use crate::batching::pending::{Arrival, Pending, Prepared};
use crate::error::Error;
use crate::metrics::TaskTraffic;
use crate::model::{Model, Ticket};
use crate::preprocess::{ImagePreprocess, ImageSource, ImageWork, PreprocessPool, image_work, prepare_in};
use crate::request::{InferOptions, Inputs};
use crate::signature::ImageInput;
use crate::trace;

/// What preprocessing a task's requests needs besides the variant.
#[derive(Clone)]
pub(super) struct ImageServices {
    pub pool: Arc<PreprocessPool>,
    pub traffic: Arc<TaskTraffic>,
}

/// The input a variant's images fill: the one its `preprocess` names, else its only one.
fn image_input(model: &Model) -> Result<String, Error> {
    model.image_input().map(str::to_string).ok_or_else(|| {
        Error::Config(format!(
            "variant `{}` has {} inputs: its `preprocess` must name the one images fill (`input`)",
            model.name(),
            model.metadata().inputs.len()
        ))
    })
}

/// The input a variant with `preprocess` fills from images, as a signature taken from
/// that variant leaves it open.
pub(super) fn image_input_of(preprocess: &ImagePreprocess) -> ImageInput {
    ImageInput { name: preprocess.input.clone(), spatial_axes: preprocess.spatial_axes() }
}

/// Checks that the tensor `preprocess` makes fits the input it fills.
pub(super) fn check_fits(model: &Model, preprocess: &ImagePreprocess) -> Result<(), Error> {
    let name = image_input(model)?;
    let spec = model.metadata().inputs.iter().find(|s| s.name == name).ok_or_else(|| {
        Error::Config(format!("variant `{}`: `preprocess` fills input `{name}`, which it does not have", model.name()))
    })?;
    let shape = preprocess.shape(1);
    // Where the size follows each image, the input must leave height and width open.
    let follows = |axis: usize| preprocess.follows_image() && preprocess.spatial_axes().contains(&axis);
    let fits = spec.dtype == preprocess.dtype
        && spec.shape.len() == shape.len()
        && spec.shape.iter().zip(&shape).enumerate().skip(1).all(|(axis, (want, &got))| match want {
            None => true,
            Some(w) => !follows(axis) && *w == got,
        });
    if !fits {
        return Err(Error::Config(format!(
            "variant `{}`: its `preprocess` makes {} {:?} per image, but input `{name}` takes {} {}",
            model.name(),
            preprocess.dtype,
            shape,
            spec.dtype,
            spec.shape_display()
        )));
    }
    Ok(())
}

/// Hands a request carrying images to the pool, which preprocesses them for `model`
/// and queues it there; the ticket follows it, and so does its request span `span`.
pub(super) fn submit(
    services: &ImageServices,
    model: Arc<Model>,
    inputs: Inputs,
    options: InferOptions,
    span: tracing::Span,
) -> Result<Ticket, Error> {
    let arrived = Instant::now();
    let invalid = |reason: String| Error::InvalidInput { model: model.name().to_string(), reason };
    let refuse = |error: Error| {
        trace::failed(&span, &error);
        model.counters().failed(&error);
        services.traffic.refused();
        Err(error)
    };
    let Some(preprocess) = model.preprocess().cloned() else {
        return refuse(invalid("the variant takes tensors, not images (its config has no `preprocess`)".into()));
    };
    let input = match image_input(&model) {
        Ok(input) => input,
        Err(e) => return refuse(e),
    };
    let Inputs { tensors, mut images } = inputs;
    let images = match (images.pop(), images.is_empty()) {
        (Some((name, images)), true) if name.as_ref().is_none_or(|n| *n == input) => images,
        (Some((name, _)), true) => {
            return refuse(invalid(format!("images given for `{}`; images fill `{input}`", name.unwrap_or_default())));
        }
        _ => return refuse(invalid(format!("images are taken for one input, `{input}`"))),
    };
    if images.is_empty() {
        return refuse(invalid(format!("no images for `{input}`")));
    }
    if tensors.iter().any(|(name, _)| name.as_ref().is_none_or(|n| *n == input)) {
        return refuse(invalid(format!("input `{input}` given both as images and as a tensor")));
    }
    if images.len() > model.max_request_rows() {
        let error = Error::RequestTooLarge {
            model: model.name().to_string(),
            rows: images.len(),
            max_batch_size: model.max_request_rows(),
        };
        return refuse(error);
    }
    // Priced from the headers before anything is decoded: the pool's threads go only
    // to requests that can still be answered in time.
    let decoding: Option<ImageWork> = images.iter().map(|image| image_work(image, &preprocess)).sum();
    let work = decoding.and_then(|decoding| services.pool.price().predict(decoding));
    let mut prediction = None;
    if let (Some(deadline), Some(work)) = (options.deadline, work) {
        match judge(&model, &services.pool, images.len(), work, &options, deadline, arrived) {
            Ok(judged) => prediction = judged,
            Err(error) => return refuse(error),
        }
    }
    let reservation = work.map(|work| services.pool.reserve(work));
    let on_its_way = model.preparing(images.len());
    let (queued, ticket) = oneshot::channel();
    let (pool, traffic) = (services.pool.clone(), services.traffic.clone());
    let job_model = model.clone();
    let job_span = span.clone();
    services.traffic.admitted();
    let job = move || {
        let (model, span) = (job_model, job_span);
        if queued.is_closed() {
            model.counters().canceled();
            traffic.ended(Answered::Abandoned);
            return;
        }
        if options.deadline.is_some_and(|deadline| Instant::now() >= deadline) {
            let error = Error::DeadlineExceeded { model: model.name().to_string() };
            trace::failed(&span, &error);
            model.counters().failed(&error);
            traffic.ended(Answered::Expired);
            let _ = queued.send(Err(error));
            return;
        }
        let result = match prepare_in(&images, &preprocess, pool.limits(), &span) {
            Ok(prepared) => {
                if let Some(decoding) = decoding {
                    pool.price().observe(decoding, prepared.decode + prepared.preprocess);
                }
                let timings = Prepared { decode: prepared.decode, preprocess: prepared.preprocess };
                let source = Arc::new(ImageSource { images, input: input.clone() });
                let mut tensors = tensors;
                tensors.push((Some(input), prepared.tensor));
                let inputs = Inputs { tensors, images: Vec::new() };
                drop((on_its_way, reservation));
                let arrival = Arrival { at: arrived, prediction };
                model.submit_prepared(inputs, options, arrival, timings, Some(source), span)
            }
            Err((index, e)) => {
                let error =
                    Error::InvalidInput { model: model.name().to_string(), reason: format!("image {index}: {e}") };
                trace::failed(&span, &error);
                model.counters().failed(&error);
                Err(error)
            }
        };
        if let Err(error) = &result {
            traffic.unadmitted(error);
        }
        let _ = queued.send(result);
    };
    if services.pool.submit(Box::new(job)).is_err() {
        let error = Error::Overloaded {
            model: format!("{} (preprocessing)", model.name()),
            max_queue_size: services.pool.queue_size(),
        };
        trace::failed(&span, &error);
        services.traffic.unadmitted(&error);
        model.counters().failed(&error);
        return Err(error);
    }
    Ok(Ticket::preprocessing(ticket))
}

/// How long before `model`'s queue could take `inputs`' images: the pool's backlog
/// and their own decoding for `model`'s preprocessing, as [`submit`] judges them.
pub(super) fn preparing(services: &ImageServices, model: &Model, inputs: &Inputs) -> Duration {
    let backlog = services.pool.backlog();
    let Some(preprocess) = model.preprocess() else { return backlog };
    let images = inputs.images.iter().flat_map(|(_, images)| images);
    let decoding: Option<ImageWork> = images.map(|image| image_work(image, preprocess)).sum();
    backlog + decoding.and_then(|decoding| services.pool.price().predict(decoding)).unwrap_or_default()
}

/// Judges an image request before its images are decoded: its images ready once the
/// pool's backlog and their own `work` are done, then its batch as `model`'s queue
/// predicts it from there. The refusal where it would be answered after `deadline`;
/// else what was predicted for it (`None` where no profile prices the batches).
fn judge(
    model: &Model,
    pool: &PreprocessPool,
    rows: usize,
    work: Duration,
    options: &InferOptions,
    deadline: Instant,
    now: Instant,
) -> Result<Option<Prediction>, Error> {
    let preparing = pool.backlog() + work;
    let ready = now + preparing;
    if ready > deadline {
        model.note_refusal();
        return Err(Error::WouldMissDeadline {
            model: format!("{} (preprocessing)", model.name()),
            predicted: preparing,
            left: deadline.saturating_duration_since(now),
            retry_after: ready - deadline,
        });
    }
    model.judge_prepared(rows, options.priority, deadline, preparing)
}

/// Makes a waiting request's image input again for `to`, whose preprocessing differs
/// from the variant it was made for, and queues it there in its place in time; on the
/// pool, or here when the pool's queue is full.
pub(super) fn remake(services: &ImageServices, to: Arc<Model>, mut pending: Pending, enqueued: Instant) {
    let traffic = services.traffic.clone();
    let limits = *services.pool.limits();
    let job = move || {
        let Some(source) = pending.source.take() else {
            to.requeue(vec![(pending, enqueued)]);
            return;
        };
        if pending.reply.is_closed() {
            to.counters().canceled();
            traffic.ended(Answered::Abandoned);
            return;
        }
        let invalid = |reason: String| Error::InvalidInput { model: to.name().to_string(), reason };
        let Some(preprocess) = to.preprocess().cloned() else {
            return to.fail_taken(pending, invalid("moved to a variant that takes no images".into()));
        };
        let Some(index) = to.metadata().inputs.iter().position(|s| s.name == source.input) else {
            return to.fail_taken(pending, invalid(format!("moved to a variant without input `{}`", source.input)));
        };
        match prepare_in(&source.images, &preprocess, &limits, &pending.traced.request) {
            Ok(prepared) if index < pending.tensors.len() => {
                pending.tensors[index] = prepared.tensor;
                pending.key = batch_key(&pending.tensors);
                pending.prepared.decode += prepared.decode;
                pending.prepared.preprocess += prepared.preprocess;
                pending.source = Some(source);
                to.requeue(vec![(pending, enqueued)]);
            }
            Ok(_) => to.fail_taken(pending, invalid("the request lacks the image input".into())),
            Err((image, e)) => to.fail_taken(pending, invalid(format!("image {image}: {e}"))),
        }
    };
    if let Err(job) = services.pool.submit(Box::new(job)) {
        job();
    }
}

#[cfg(test)]
#[cfg(feature = "images")]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::backend::fake::{BatchLog, FakeBackend, FakeConfig};
    use crate::batching::BatchingConfig;
    use crate::registry::config::{TaskConfig, VariantConfig};
    use crate::registry::task::{MakeBackend, Task};
    use crate::request::Slo;
    use crate::signature::{SignatureConfig, TensorDeclaration};
    use crate::tensor::DType;
    use crate::warmup::WarmupConfig;

    fn png(width: u32, height: u32, colour: [u8; 3]) -> Vec<u8> {
        crate::preprocess::test_images::png(width, height, |_, _| colour)
    }

    /// Variants `small` (4×4 images, 100 ms a batch, one request at a time) and `large`
    /// (8×8, at once, normalised otherwise), both echoing their input; `small` active.
    fn two_resolutions(pool: Arc<PreprocessPool>) -> Task {
        let image = |side| TensorDeclaration::new("image", DType::F32, [-1, 3, side, side]);
        let signature =
            SignatureConfig::new(vec![image(-1)], vec![TensorDeclaration::new("output", DType::F32, [-1, 3, -1, -1])]);
        let mut config = TaskConfig::new("images").with_signature(signature);
        for (name, side, std) in [("small", 4, 255.0), ("large", 8, 1.0)] {
            let preprocess = crate::preprocess::ImagePreprocess::new(side, [0.0; 3], [std; 3]);
            let variant = VariantConfig::new(name, "fake", 70.0)
                .with_warmup(WarmupConfig::disabled())
                .with_preload(true)
                .with_batching(BatchingConfig::default().with_max_batch_size(1))
                .with_preprocess(preprocess);
            config = config.with_variant(variant);
        }
        let make: MakeBackend = Arc::new(|variant, _| {
            let side = if variant.name == "small" { 4 } else { 8 };
            let per_batch = if variant.name == "small" { Duration::from_millis(100) } else { Duration::ZERO };
            let fake = FakeConfig { row_shape: Some(vec![3, side, side]), per_batch, ..FakeConfig::default() };
            FakeBackend::factory(fake, BatchLog::default())
        });
        Task::start_with_pool(config, make, None, pool).unwrap()
    }

    fn pool() -> Arc<PreprocessPool> {
        let config = crate::preprocess::PreprocessConfig { threads: Some(2), ..Default::default() };
        PreprocessPool::start(&config).unwrap()
    }

    #[test]
    fn images_are_preprocessed_for_the_variant_and_made_again_when_a_switch_moves_them() {
        let task = two_resolutions(pool());
        let photo = png(20, 10, [255, 0, 51]);
        let tickets: Vec<Ticket> =
            (0..4).map(|_| task.submit(Inputs::image(photo.clone()), &Slo::default()).unwrap()).collect();
        // One runs on `small` for 100 ms; the other three wait in its queue.
        let queued = Instant::now();
        while task.serving().1 < 3 && queued.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(2));
        }
        assert_eq!(task.switch_to("large").unwrap().moved, 3);
        let answers: Vec<_> = tickets.into_iter().map(|t| t.wait().unwrap()).collect();
        // Two preprocessing threads: whichever request queued first ran on `small`.
        let mut served: Vec<&str> = answers.iter().map(|a| &*a.model).collect();
        served.sort();
        assert_eq!(served, ["large", "large", "large", "small"]);
        for answer in &answers {
            let output = answer.get("output").unwrap();
            let (side, scale) = if &*answer.model == "small" { (4, 255.0) } else { (8, 1.0) };
            assert_eq!(output.shape(), &[1, 3, side, side], "made for {}", answer.model);
            let values = output.as_slice::<f32>().unwrap();
            let plane = side * side;
            assert!((values[0] * scale - 255.0).abs() < 1e-3 && values[plane].abs() < 1e-3, "{values:?}");
            assert!((values[2 * plane] * scale - 51.0).abs() < 1e-3);
            assert!(answer.timings.decode > Duration::ZERO && answer.timings.preprocess > Duration::ZERO);
        }
        let reading = task.traffic().read();
        assert_eq!(reading.in_flight, 0);
        // The policy reads what the requests carried: all photos, of this size.
        let photos = reading.photos.expect("photos seen");
        assert_eq!((photos.share, photos.mean_bytes), (1.0, photo.len() as f64));
    }

    #[test]
    fn bad_images_are_refused_with_their_reason_while_good_ones_are_served() {
        let task = two_resolutions(pool());
        task.switch_to("large").unwrap();
        let good = png(16, 16, [10, 20, 30]);
        let mut truncated = good.clone();
        truncated.truncate(good.len() / 2);
        let bomb = crate::preprocess::test_images::png_claiming(60_000, 60_000);
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (Vec::new(), "empty"),
            (truncated, "PNG"),
            (b"GIF89a\x01\x00\x01\x00\x00\x00\x00;".to_vec(), "Gif"),
            (bomb, "too large"),
            (b"\xFF\xD8\xFFrubbish".to_vec(), "JPEG"),
        ];
        let mut tickets = Vec::new();
        for (bytes, why) in cases {
            tickets.push((task.submit(Inputs::image(good.clone()), &Slo::default()).unwrap(), None));
            tickets.push((task.submit(Inputs::image(bytes), &Slo::default()).unwrap(), Some(why)));
        }
        for (ticket, refused) in tickets {
            match (ticket.wait(), refused) {
                (Ok(answer), None) => assert_eq!(answer.get("output").unwrap().shape(), &[1, 3, 8, 8]),
                (Err(Error::InvalidInput { reason, .. }), Some(why)) => {
                    assert!(reason.contains(why), "{reason} should say {why}")
                }
                (other, expected) => panic!("{:?} for {expected:?}", other.map(|a| a.model)),
            }
        }
        let reading = task.traffic().read();
        assert_eq!((reading.in_flight, reading.tick.rejections), (0, 5));
    }

    #[test]
    fn images_wrong_for_the_task_are_refused_at_once() {
        let task = two_resolutions(pool());
        let photo = png(8, 8, [0; 3]);
        let named = Inputs::new().with_images("elsewhere", [photo.clone()]);
        assert!(matches!(task.submit(named, &Slo::default()), Err(Error::InvalidInput { .. })));
        let too_many = Inputs::new().with_images("image", vec![photo; 2]);
        let refused = task.submit(too_many, &Slo::default()).err();
        assert!(matches!(refused, Some(Error::RequestTooLarge { rows: 2, .. })), "{refused:?}");
        let expired = Slo::default().with_latency(Duration::ZERO);
        let late = task.submit(Inputs::image(png(8, 8, [0; 3])), &expired).unwrap().wait().err();
        assert!(matches!(late, Some(Error::DeadlineExceeded { .. })), "{late:?}");
    }

    #[test]
    fn a_photo_whose_header_prices_it_past_its_deadline_is_refused_without_being_decoded() {
        let pool = pool();
        let task = two_resolutions(pool.clone());
        task.switch_to("large").unwrap();
        // A second a megapixel: the header of a 1000×1000 photo prices it at a second.
        pool.price().set(Duration::from_secs(1), Duration::from_secs(1));
        let slo = Slo::default().with_latency(Duration::from_millis(100));
        let refused = task.submit(Inputs::image(png(1000, 1000, [1, 2, 3])), &slo).err();
        match refused {
            Some(Error::WouldMissDeadline { model, predicted, .. }) => {
                assert_eq!(model, "large (preprocessing)");
                assert!(predicted >= Duration::from_secs(1), "{predicted:?}");
            }
            other => panic!("refused at once, not {other:?}"),
        }
        let reading = pool.read();
        assert_eq!((reading.queued, reading.busy_seconds), (0, 0.0), "nothing reached the pool's threads");
        assert_eq!(task.traffic().read().tick.rejections, 1);
        // A photo whose price fits its deadline is decoded and served.
        let served = task.submit(Inputs::image(png(10, 10, [1, 2, 3])), &slo).unwrap().wait().unwrap();
        assert_eq!(served.get("output").unwrap().shape(), &[1, 3, 8, 8]);
    }

    #[test]
    fn a_preprocess_that_makes_the_wrong_tensor_fails_the_load() {
        let preprocess = crate::preprocess::ImagePreprocess::new(5, [0.0; 3], [1.0; 3]);
        let variant =
            VariantConfig::new("v", "fake", 70.0).with_warmup(WarmupConfig::disabled()).with_preprocess(preprocess);
        let make: MakeBackend = Arc::new(|_, _| {
            FakeBackend::factory(
                FakeConfig { row_shape: Some(vec![3, 4, 4]), ..FakeConfig::default() },
                BatchLog::default(),
            )
        });
        let refused = Task::start_with_pool(TaskConfig::new("misfit").with_variant(variant), make, None, pool()).err();
        let message = refused.map(|e| e.to_string()).unwrap_or_default();
        assert!(message.contains("[1, 3, 5, 5]") && message.contains("[N, 3, 4, 4]"), "{message}");
    }
}
