//! Real ONNX Runtime sessions on the generated models.

use std::time::Duration;

use half::f16;
use modelless::backend::{BackendError, TensorSpec};
use modelless::{BatchingConfig, DType, Error, InferOptions, Inputs, Runtime, Tensor, VariantConfig};

use modelless::backend::{Backend, Batch, BatchParts};

use crate::common::{affine, max_relative_diff, models_dir, tiny_weights};

fn model(name: &str, file: &str, batching: BatchingConfig) -> VariantConfig {
    VariantConfig::plain(name, models_dir().join(file)).with_batching(batching)
}

/// Holds partial batches long enough for a burst of submissions to join one batch.
fn gathering(max: usize) -> BatchingConfig {
    BatchingConfig::default()
        .with_max_batch_size(max)
        .with_max_queue_delay_us(2_000_000)
        .with_preferred_batch_sizes([max])
}

#[test]
fn metadata_is_read_from_the_session() {
    let rt = Runtime::builder()
        .with_model(model("tiny", "tiny.onnx", BatchingConfig::default()))
        .with_model(model("fixed", "tiny_fixed.onnx", BatchingConfig::default()))
        .build()
        .unwrap();
    let tiny = rt.model_info("tiny").unwrap().metadata;
    assert_eq!(tiny.inputs, vec![TensorSpec::new("input", DType::F32, vec![None, Some(4)])]);
    assert_eq!(tiny.outputs, vec![TensorSpec::new("output", DType::F32, vec![None, Some(3)])]);
    assert!(tiny.dynamic_batch());
    let fixed = rt.model_info("fixed").unwrap();
    assert!(!fixed.metadata.dynamic_batch());
    assert_eq!(fixed.batching.max_batch_size, 1);
}

#[test]
fn batched_answers_equal_the_model_applied_row_by_row() {
    let (w, b) = tiny_weights();
    let rt = Runtime::builder().with_model(model("tiny", "tiny.onnx", gathering(8))).build().unwrap();
    let inputs: Vec<Vec<f32>> = (0..8).map(|i| (0..4).map(|j| (i * 4 + j) as f32 * 0.37 - 3.0).collect()).collect();
    let tickets: Vec<_> = inputs
        .iter()
        .map(|x| rt.submit("tiny", Tensor::new([1, 4], x.clone()).unwrap(), InferOptions::default()).unwrap())
        .collect();
    for (x, ticket) in inputs.iter().zip(tickets) {
        let output = ticket.wait().unwrap();
        assert_eq!(output.batch_size, 8);
        let expected: Vec<f32> = affine(x, &w, &b).into_iter().map(|v| v.max(0.0)).collect();
        let got = output.get("output").unwrap().as_slice::<f32>().unwrap();
        assert!(max_relative_diff(got, &expected) <= 1e-5, "{got:?} vs {expected:?}");
    }
}

#[test]
fn mobilenet_batched_outputs_equal_single_request_outputs() {
    let rt = Runtime::builder()
        .with_model(model("batched", "mobilenetv2_0.35.onnx", gathering(4)))
        .with_model(model("single", "mobilenetv2_0.35.onnx", BatchingConfig::default().with_max_batch_size(1)))
        .build()
        .unwrap();
    let images: Vec<Tensor> = (0..4)
        .map(|i| {
            let values = (0..3 * 224 * 224).map(|j| ((j * 7 + i * 13) % 255) as f32 / 255.0 - 0.5).collect::<Vec<_>>();
            Tensor::new([1, 3, 224, 224], values).unwrap()
        })
        .collect();
    let tickets: Vec<_> =
        images.iter().map(|img| rt.submit("batched", img.clone(), InferOptions::default()).unwrap()).collect();
    for (img, ticket) in images.iter().zip(tickets) {
        let batched = ticket.wait().unwrap();
        assert_eq!(batched.batch_size, 4);
        let single = rt.infer_blocking("single", img.clone()).unwrap();
        assert_eq!(single.batch_size, 1);
        let (b, s) = (batched.get("logits").unwrap(), single.get("logits").unwrap());
        assert_eq!(b.shape(), &[1, 1000]);
        let diff = max_relative_diff(b.as_slice::<f32>().unwrap(), s.as_slice::<f32>().unwrap());
        assert!(diff <= 1e-5, "batched and single outputs differ by {diff}");
    }
}

#[test]
fn several_inputs_of_different_dtypes_are_batched_by_name() {
    let (w, b) = tiny_weights();
    let rt = Runtime::builder().with_model(model("multi", "tiny_multi.onnx", gathering(3))).build().unwrap();
    let tickets: Vec<_> = (0..3)
        .map(|i| {
            let x = Tensor::new([1, 4], vec![i as f32, 1.0, 2.0, 3.0]).unwrap();
            let k = Tensor::new([1, 2], vec![i as i64 * 10, -5]).unwrap();
            rt.submit("multi", Inputs::new().with("k", k).with("x", x), InferOptions::default()).unwrap()
        })
        .collect();
    for (i, ticket) in tickets.into_iter().enumerate() {
        let output = ticket.wait().unwrap();
        assert_eq!(output.batch_size, 3);
        assert_eq!(output.get("k_next").unwrap().as_slice::<i64>().unwrap(), &[i as i64 * 10 + 1, -4]);
        let expected = affine(&[i as f32, 1.0, 2.0, 3.0], &w, &b);
        assert!(max_relative_diff(output.get("y").unwrap().as_slice::<f32>().unwrap(), &expected) <= 1e-5);
    }
}

#[test]
fn half_precision_tensors_round_trip() {
    let rt = Runtime::builder().with_model(model("f16", "tiny_f16.onnx", BatchingConfig::default())).build().unwrap();
    let x: Vec<f16> = [0.5f32, -1.25, 3.0, 8.0].iter().map(|&v| f16::from_f32(v)).collect();
    let output = rt.infer_blocking("f16", Tensor::new([1, 4], x).unwrap()).unwrap();
    let doubled: Vec<f32> = output.first().unwrap().as_slice::<f16>().unwrap().iter().map(|v| v.to_f32()).collect();
    assert_eq!(doubled, vec![1.0, -2.5, 6.0, 16.0]);
}

#[test]
fn bad_inputs_are_refused_on_admission_and_the_model_keeps_serving() {
    let rt = Runtime::builder().with_model(model("tiny", "tiny.onnx", BatchingConfig::default())).build().unwrap();
    let reason = |inputs: Inputs| match rt.infer_blocking("tiny", inputs) {
        Err(Error::InvalidInput { reason, .. }) => reason,
        other => panic!("expected InvalidInput, got {other:?}"),
    };
    assert!(reason(Inputs::new().with("image", Tensor::full([1, 4], 0f32))).contains("unknown input `image`"));
    assert!(reason(Tensor::full([1, 4], 0i64).into()).contains("expected f32 of shape [N, 4], got i64"));
    assert!(reason(Tensor::full([1, 5], 0f32).into()).contains("dimension 1 differs"));
    assert!(reason(Tensor::full([4], 0f32).into()).contains("shape [N, 4]"));
    assert_eq!(rt.infer_blocking("tiny", Tensor::full([2, 4], 1f32)).unwrap().first().unwrap().shape(), &[2, 3]);
}

#[test]
fn a_request_larger_than_the_batch_in_force_runs_split_and_one_over_the_configured_limit_is_refused() {
    let (w, b) = tiny_weights();
    let configured = BatchingConfig::default().with_max_batch_size(8);
    let rt = Runtime::builder().with_model(model("tiny", "tiny.onnx", configured)).build().unwrap();
    rt.configure_batching("tiny", BatchingConfig::default().with_max_batch_size(3)).unwrap();
    let x: Vec<f32> = (0..7 * 4).map(|i| i as f32 * 0.37 - 3.0).collect();
    let output = rt.infer_blocking("tiny", Tensor::new([7, 4], x.clone()).unwrap()).unwrap();
    assert!(output.batch_size <= 3, "a batch of {} rows formed", output.batch_size);
    let got = output.get("output").unwrap();
    assert_eq!(got.shape(), &[7, 3]);
    for (row, answer) in x.chunks(4).zip(got.as_slice::<f32>().unwrap().chunks(3)) {
        let expected: Vec<f32> = affine(row, &w, &b).into_iter().map(|v| v.max(0.0)).collect();
        assert!(max_relative_diff(answer, &expected) <= 1e-5, "{answer:?} vs {expected:?}");
    }
    let refused = rt.infer_blocking("tiny", Tensor::full([9, 4], 0f32));
    assert!(matches!(refused, Err(Error::RequestTooLarge { rows: 9, max_batch_size: 8, .. })), "{refused:?}");
}

#[test]
fn missing_or_corrupt_model_files_fail_to_load_with_a_clear_error() {
    let rt = Runtime::builder().with_model(model("tiny", "tiny.onnx", BatchingConfig::default())).build().unwrap();
    let missing = rt.load_model(VariantConfig::plain("missing", "/nonexistent/model.onnx"));
    assert!(
        matches!(&missing, Err(Error::Load { source, .. }) if matches!(**source, BackendError::ModelFile { .. })),
        "{:?}",
        missing.err()
    );
    let dir = tempfile::tempdir().unwrap();
    let corrupt_path = dir.path().join("corrupt.onnx");
    std::fs::write(&corrupt_path, b"\x08\x07this is not an onnx graph").unwrap();
    let corrupt = rt.load_model(VariantConfig::plain("corrupt", &corrupt_path));
    let message = corrupt.as_ref().err().map(ToString::to_string).unwrap_or_default();
    assert!(
        matches!(&corrupt, Err(Error::Load { source, .. }) if matches!(**source, BackendError::Ort { .. })),
        "{message}"
    );
    assert!(message.contains("corrupt"), "the error names the model: {message}");
    assert_eq!(rt.models(), vec!["tiny".to_string()]);
    assert!(rt.infer_blocking("tiny", Tensor::full([1, 4], 1f32)).is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fixed_batch_model_serves_concurrent_callers_one_at_a_time() {
    let rt = std::sync::Arc::new(
        Runtime::builder().with_model(model("fixed", "tiny_fixed.onnx", BatchingConfig::default())).build().unwrap(),
    );
    let tasks: Vec<_> = (0..16)
        .map(|i| {
            let rt = rt.clone();
            tokio::spawn(async move { rt.infer("fixed", Tensor::full([1, 4], i as f32)).await })
        })
        .collect();
    for task in tasks {
        let output = task.await.unwrap().unwrap();
        assert_eq!((output.batch_size, output.first().unwrap().shape()), (1, &[1usize, 3][..]));
        assert!(output.timings.total >= output.timings.compute);
    }
    let timeout = InferOptions::default().with_timeout(Duration::from_secs(5));
    assert!(rt.infer_with("fixed", Tensor::full([1, 4], 0f32), timeout).await.is_ok());
}

/// A batch that grows the session's memory arena faults in thousands of fresh pages
/// (2 352 for this model at batch 8; a warm run, none), each a trap into the kernel:
/// on a virtual machine, beside other work, a batch ran 5 times its time.
#[test]
fn after_warm_up_no_batch_size_grows_the_sessions_memory() {
    use modelless::backend::Device;
    use modelless::backend::onnx::{OrtEnvironmentConfig, OrtSessionConfig};
    use modelless_runtime::backend::onnx::{OrtBackend, environment};
    use modelless_runtime::metrics::pages_faulted_by_this_thread;

    let env = environment(&OrtEnvironmentConfig::default()).unwrap();
    // Its own pool of one thread: every page the run touches is faulted on this thread.
    let config = OrtSessionConfig::default().with_intra_op_threads(1);
    let path = models_dir().join("mobilenetv2_0.35.onnx");
    let mut session = OrtBackend::load(&env, &path, &config, Device::Cpu).unwrap();
    let max_batch_size = 8;
    let warm_up = session.warmup_batch_sizes(max_batch_size);
    let mut pages_faulted_by = |rows: usize| {
        let inputs = vec![Tensor::full([rows, 3, 224, 224], 0.5f32)];
        let before = pages_faulted_by_this_thread().unwrap();
        session.infer(Batch { inputs }).unwrap();
        pages_faulted_by_this_thread().unwrap() - before
    };
    for rows in warm_up {
        pages_faulted_by(rows);
    }
    let grew: Vec<(usize, u64)> = [3, 2, 5, 6, 8, 1, 7, 4, 8, 2, 6]
        .into_iter()
        .map(|rows| (rows, pages_faulted_by(rows)))
        .filter(|&(_, pages)| pages >= 100)
        .collect();
    assert!(grew.is_empty(), "batches (rows, pages faulted) that grew the arena after warm-up: {grew:?}");
}

/// A session on `cuda:N` with `pinned_inputs` copies each batch into staging tensors it
/// keeps per shape; the same path in host memory answers as reading the batch in place
/// does, batch after batch of other values and sizes (a stale staging tensor would
/// answer with the last batch's values).
#[test]
fn batches_staged_before_the_session_reads_them_answer_as_batches_read_in_place() {
    use modelless::backend::Device;
    use modelless::backend::onnx::{OrtEnvironmentConfig, OrtSessionConfig};
    use modelless_runtime::backend::onnx::{OrtBackend, environment};

    let env = environment(&OrtEnvironmentConfig::default()).unwrap();
    let path = models_dir().join("mobilenetv2_0.35.onnx");
    let config = OrtSessionConfig::default();
    let mut in_place = OrtBackend::load(&env, &path, &config, Device::Cpu).unwrap();
    let mut staged = OrtBackend::load(&env, &path, &config, Device::Cpu).unwrap().with_host_staging().unwrap();
    // 8 rows of 150 528 values are 4.8 MB: copied into the staging tensor on several threads.
    assert_images_answered_alike(&mut in_place, &mut staged, "staged");
    // Three inputs in 20 sizes: more staging tensors than are kept, let go of between
    // batches, never within one.
    let path = models_dir().join("tiny_types.onnx");
    let mut in_place = OrtBackend::load(&env, &path, &config, Device::Cpu).unwrap();
    let mut staged = OrtBackend::load(&env, &path, &config, Device::Cpu).unwrap().with_host_staging().unwrap();
    for rows in 1..=20 {
        let batch = || Batch {
            inputs: vec![
                Tensor::new([rows, 2], (0..rows as i32 * 2).collect::<Vec<_>>()).unwrap(),
                Tensor::new([rows, 2], (0..rows as u8 * 2).collect::<Vec<_>>()).unwrap(),
                Tensor::new([rows, 2], (0..rows * 2).map(|i| i % 3 == 0).collect::<Vec<_>>()).unwrap(),
            ],
        };
        let (want, got) = (in_place.infer(batch()).unwrap().outputs, staged.infer(batch()).unwrap().outputs);
        assert_eq!(got, want, "{rows} rows");
    }
}

/// Batches of images of other sizes and values, one after another: `other` answers each
/// as `in_place` does, both when given the batch joined and when given its requests'
/// tensors and padding to join itself (as it says it takes them).
fn assert_images_answered_alike(in_place: &mut dyn Backend, other: &mut dyn Backend, what: &str) {
    assert!(other.joins_batches(), "{what}: batches are joined where they are staged");
    let image = |value: f32| Tensor::full([1, 3, 224, 224], value);
    // A batch of 4 between two batches of 2 padded to 4: the padding is zeroed again.
    for (rows, value) in [(2, 0.25f32), (4, -0.5), (2, 0.75), (8, 0.1), (1, 0.3)] {
        let values: Vec<f32> = (0..rows).map(|row| value + row as f32 * 0.05).collect();
        let requests: Vec<Tensor> = values.iter().map(|&v| image(v)).collect();
        let joined = || BatchParts { columns: vec![requests.clone()], pad_rows: 0 }.join().unwrap();
        let want = in_place.infer(joined()).unwrap().outputs;
        let got = other.infer(joined()).unwrap().outputs;
        assert_eq!(got[0].shape(), want[0].shape());
        let (got, want) = (got[0].as_slice::<f32>().unwrap(), want[0].as_slice::<f32>().unwrap());
        assert!(max_relative_diff(got, want) < 1e-5, "{what}: {rows} rows from {value}");
        // The same requests and two rows of padding, which answer as images of zeros.
        let padded = [requests.clone(), vec![image(0.0), image(0.0)]].concat();
        let want = in_place.infer(BatchParts { columns: vec![padded], pad_rows: 0 }.join().unwrap()).unwrap().outputs;
        let got = other.infer_parts(BatchParts { columns: vec![requests], pad_rows: 2 }).unwrap().outputs;
        assert_eq!(got[0].shape(), want[0].shape());
        let (got, want) = (got[0].as_slice::<f32>().unwrap(), want[0].as_slice::<f32>().unwrap());
        assert!(max_relative_diff(got, want) < 1e-5, "{what}: {rows} rows from {value} joined and padded");
    }
}

/// A session on `cuda:N` with `cuda_graph` runs each batch on input and output tensors
/// it keeps per batch size (a captured graph replays on them). The same path in host
/// memory, copied into and out of by ONNX Runtime as device memory is, answers as
/// reading the batch in place does: batch after batch of other values and sizes (a
/// kept tensor not refilled would answer with the last batch of its size), inputs of
/// two dtypes, and more sizes than graphs are kept for.
#[test]
fn batches_run_on_tensors_kept_per_size_answer_as_batches_read_in_place() {
    use modelless::backend::Device;
    use modelless::backend::onnx::{OrtEnvironmentConfig, OrtSessionConfig};
    use modelless_runtime::backend::onnx::{OrtBackend, environment};

    let env = environment(&OrtEnvironmentConfig::default()).unwrap();
    let config = OrtSessionConfig::default();
    let load = |file: &str| OrtBackend::load(&env, &models_dir().join(file), &config, Device::Cpu).unwrap();
    let mut in_place = load("mobilenetv2_0.35.onnx");
    let mut bound = load("mobilenetv2_0.35.onnx").with_bound_runs().unwrap();
    assert_images_answered_alike(&mut in_place, &mut bound, "bound");
    // 40 sizes, each twice with other values: more sizes than graphs are kept for.
    let mut in_place = load("tiny_multi.onnx");
    let mut bound = load("tiny_multi.onnx").with_bound_runs().unwrap();
    for (round, rows) in (1..=40).chain(1..=40).enumerate() {
        let x: Vec<f32> = (0..rows * 4).map(|i| (i + round) as f32 * 0.01).collect();
        let k: Vec<i64> = (0..rows * 2).map(|i| (i * round) as i64).collect();
        let batch = || Batch {
            inputs: vec![Tensor::new([rows, 4], x.clone()).unwrap(), Tensor::new([rows, 2], k.clone()).unwrap()],
        };
        let want = in_place.infer(batch()).unwrap().outputs;
        let got = bound.infer(batch()).unwrap().outputs;
        assert_eq!(got[0].shape(), &[rows, 3]);
        let (y, want_y) = (got[0].as_slice::<f32>().unwrap(), want[0].as_slice::<f32>().unwrap());
        assert!(max_relative_diff(y, want_y) < 1e-6, "round {round}, {rows} rows");
        assert_eq!(got[1].as_slice::<i64>().unwrap(), want[1].as_slice::<i64>().unwrap(), "{rows} rows");
    }
}
