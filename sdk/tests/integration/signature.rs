//! A task is a contract: variants exported with other tensor names, output shapes and
//! batch dimensions answer in the task's signature, across switches under load; one
//! that cannot is refused at load and the task keeps serving.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use modelless::backend::TensorDeclaration;
use modelless::status::VariantState;
use modelless::{
    BatchingConfig, DType, Error, Inputs, Runtime, SignatureConfig, Slo, TaskConfig, Tensor, VariantConfig,
    WarmupConfig,
};

use crate::common::models_dir;

/// image [N, 3, 8, 8] → scores [N, 10].
fn zoo_signature() -> SignatureConfig {
    SignatureConfig::new(
        vec![TensorDeclaration::new("image", DType::F32, [-1, 3, 8, 8])],
        vec![TensorDeclaration::new("scores", DType::F32, [-1, 10])],
    )
}

fn zoo_variant(name: &str, file: &str, accuracy: f64) -> VariantConfig {
    VariantConfig::new(name, models_dir().join(file), accuracy)
        .with_batching(BatchingConfig::default().with_max_batch_size(8).with_max_queue_delay_us(300))
        .with_warmup(WarmupConfig::disabled())
        .with_preload(true)
}

/// The zoo task: `a` takes `data_0` and gives `prob` [N,10]; `b` takes `gpu_0/data_0`
/// and gives `softmaxout_1` [N,10,1,1]; `c` gives `features` then `logits` [N,1,10];
/// `d` takes one row per run.
fn zoo_task() -> TaskConfig {
    TaskConfig::new("zoo")
        .with_signature(zoo_signature())
        .with_variant(zoo_variant("a", "zoo_a.onnx", 60.0))
        .with_variant(zoo_variant("b", "zoo_b.onnx", 65.0))
        .with_variant(zoo_variant("c", "zoo_c.onnx", 70.0).with_output_map("logits", "scores"))
        .with_variant(zoo_variant("d", "zoo_d.onnx", 75.0))
}

/// Request `i`: `rows` images whose pixels follow from `i`.
fn images(i: usize, rows: usize) -> Tensor {
    let values = (0..rows * 3 * 64).map(|k| ((i * 31 + k * 7) % 97) as f32 / 97.0 - 0.5).collect::<Vec<_>>();
    Tensor::new([rows, 3, 8, 8], values).unwrap()
}

#[test]
fn variants_of_other_names_and_shapes_switched_under_load_answer_every_request_in_the_task_signature() {
    let rt = Arc::new(Runtime::builder().build().unwrap());
    rt.add_task(zoo_task()).unwrap();
    let signature = rt.task_metadata("zoo").unwrap();
    assert_eq!(signature, zoo_signature_metadata());
    // What each variant answers to each request, asked of the variant itself.
    const REQUESTS: usize = 12;
    let rows = |i: usize| 1 + i % 3;
    let mut expected: HashMap<(String, usize), Vec<f32>> = HashMap::new();
    for variant in ["a", "b", "c", "d"] {
        for i in 0..REQUESTS {
            let out = rt.submit_variant("zoo", variant, images(i, rows(i)), Slo::default()).unwrap().wait().unwrap();
            let scores = out.get("scores").unwrap_or_else(|| panic!("{variant}: no `scores` in {out:?}"));
            assert_eq!(scores.shape(), &[rows(i), 10], "{variant}");
            expected.insert((variant.to_string(), i), scores.as_slice::<f32>().unwrap().to_vec());
        }
    }
    assert_ne!(expected[&("a".to_string(), 0)], expected[&("b".to_string(), 0)], "the variants differ");

    let clients = 8;
    let stop = Arc::new(AtomicBool::new(false));
    let served = Arc::new(AtomicUsize::new(0));
    let start = Arc::new(Barrier::new(clients + 1));
    let expected = Arc::new(expected);
    let handles: Vec<_> = (0..clients)
        .map(|c| {
            let (rt, stop, served, start, expected) =
                (rt.clone(), stop.clone(), served.clone(), start.clone(), expected.clone());
            std::thread::spawn(move || {
                start.wait();
                let mut by_variant: HashMap<String, usize> = HashMap::new();
                let mut n = c;
                while !stop.load(Ordering::Relaxed) {
                    let i = n % REQUESTS;
                    let out = rt
                        .infer_task_blocking("zoo", images(i, rows(i)), Slo::default())
                        .unwrap_or_else(|e| panic!("client {c}, request {n}: {e}"));
                    let names: Vec<&str> = out.iter().map(|(name, _)| name).collect();
                    assert_eq!(names, ["scores"], "client {c}: answered by {}", out.model);
                    let scores = out.first().unwrap();
                    assert_eq!(scores.shape(), &[rows(i), 10], "answered by {}", out.model);
                    assert_eq!(
                        scores.as_slice::<f32>().unwrap(),
                        &expected[&(out.model.to_string(), i)][..],
                        "request {i} answered by {} differs from that variant's own answer",
                        out.model
                    );
                    *by_variant.entry(out.model.to_string()).or_default() += 1;
                    served.fetch_add(1, Ordering::Relaxed);
                    n += clients;
                }
                by_variant
            })
        })
        .collect();
    start.wait();
    let order = ["b", "c", "d", "a"];
    let mut switches = 0;
    while switches < 40 {
        let before = served.load(Ordering::Relaxed);
        rt.switch_variant("zoo", order[switches % order.len()]).unwrap();
        switches += 1;
        assert_eq!(rt.task_metadata("zoo").unwrap(), signature, "metadata changed after switch {switches}");
        // Some requests between switches, so each variant serves under load; a client
        // that panicked serves no more, and the bound ends the wait for it.
        let until = Instant::now() + Duration::from_secs(60);
        while served.load(Ordering::Relaxed) < before + 20 {
            assert!(Instant::now() < until, "the clients stopped serving after switch {switches}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    stop.store(true, Ordering::Relaxed);
    let mut totals: HashMap<String, usize> = HashMap::new();
    for handle in handles {
        for (variant, n) in handle.join().unwrap_or_else(|_| panic!("a client failed")) {
            *totals.entry(variant).or_default() += n;
        }
    }
    let total: usize = totals.values().sum();
    eprintln!("{switches} switches, {total} requests answered, none failed; by variant: {totals:?}");
    assert!(["a", "b", "c", "d"].iter().all(|v| totals.get(*v).is_some_and(|&n| n > 0)), "{totals:?}");
    let status = rt.task_status("zoo").unwrap();
    assert!(status.variants.iter().all(|v| v.state() == VariantState::Ready), "{status:?}");
}

fn zoo_signature_metadata() -> modelless::backend::ModelMetadata {
    zoo_signature().metadata()
}

#[test]
fn a_variant_that_does_not_fit_is_refused_at_load_naming_the_tensor_and_the_task_keeps_serving() {
    let rt = Runtime::builder().build().unwrap();
    let task = zoo_task().with_variant(zoo_variant("wide", "zoo_misfit.onnx", 80.0).with_preload(false));
    rt.add_task(task).unwrap();
    let mismatch = match rt.switch_variant("zoo", "wide") {
        Err(Error::DoesNotFitTask(mismatch)) => mismatch,
        other => panic!("expected DoesNotFitTask, got {other:?}"),
    };
    assert_eq!((mismatch.variant.as_str(), mismatch.tensor.as_str()), ("wide", "output `scores`"));
    let text = mismatch.to_string();
    assert!(text.contains("scores f32 [N, 10]") && text.contains("prob f32 [N, 12]"), "{text}");
    // Known not to fit: refused again at once, and a policy sees it failed.
    assert!(matches!(rt.switch_variant("zoo", "wide"), Err(Error::DoesNotFitTask(_))));
    let wide = rt.variant_snapshots("zoo").unwrap().into_iter().find(|v| v.name == "wide").unwrap();
    assert_eq!(wide.state, VariantState::Failed);
    // A new version of a serving variant that does not fit leaves the old one serving.
    let refused = rt.load_version("zoo", "a", models_dir().join("zoo_misfit.onnx"));
    assert!(matches!(&refused, Err(Error::DoesNotFitTask(m)) if m.variant == "a"), "{refused:?}");
    let out = rt.infer_task_blocking("zoo", images(0, 2), Slo::default().with_min_accuracy(79.0));
    assert!(matches!(out, Err(Error::NoVariantMeetsSlo { .. })), "the misfit is never routed to: {out:?}");
    let out = rt.infer_task_blocking("zoo", images(0, 2), Slo::default()).unwrap();
    assert_eq!((&*out.model, out.version, out.get("scores").unwrap().shape()), ("a", 1, &[2, 10][..]));
}

#[test]
fn a_task_without_a_declared_signature_holds_every_variant_to_its_first() {
    let rt = Runtime::builder().build().unwrap();
    let mut task = zoo_task();
    task.signature = None;
    rt.add_task(task).unwrap();
    let signature = rt.task_metadata("zoo").unwrap();
    assert_eq!((signature.inputs[0].name.as_str(), signature.outputs[0].name.as_str()), ("data_0", "prob"));
    assert_eq!(signature.outputs[0].shape, vec![None, Some(10)]);
    rt.switch_variant("zoo", "b").unwrap();
    let out = rt.infer_task_blocking("zoo", Inputs::new().with("data_0", images(1, 3)), Slo::default()).unwrap();
    assert_eq!((&*out.model, out.get("prob").map(Tensor::shape)), ("b", Some(&[3, 10][..])));
    assert_eq!(rt.task_metadata("zoo").unwrap(), signature);
}
