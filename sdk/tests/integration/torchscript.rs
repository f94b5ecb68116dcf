//! TorchScript variants on libtorch (feature `tch`), on the CPU: answers equal to
//! PyTorch's own and to the ONNX model's, batching, several outputs, typed errors for
//! bad modules and declarations, profiling, and switches between TorchScript and ONNX
//! variants of one task under load. `scripts/setup/torch.sh` (which `make test` runs)
//! installs PyTorch and generates the modules.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use modelless::backend::{BackendError, Device};
use modelless::backend::{TensorDeclaration, TorchScriptConfig};
use modelless::profile::ProfileMode;
use modelless::{BatchingConfig, DType, Error, Runtime, Slo, TaskConfig, Tensor, VariantConfig, WarmupConfig};

use crate::common::{affine, max_relative_diff, models_dir, tiny_weights, torchscript_dir};

fn manifest() -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(torchscript_dir().join("torchscript.json")).unwrap()).unwrap()
}

fn tiny_declared(outputs: Vec<TensorDeclaration>) -> TorchScriptConfig {
    TorchScriptConfig::new(vec![TensorDeclaration::new("input", DType::F32, [-1, 4])], outputs)
}

fn tiny_variant(name: &str, file: &str, config: TorchScriptConfig, max_batch: usize) -> VariantConfig {
    let batching = BatchingConfig::default()
        .with_max_batch_size(max_batch)
        .with_max_queue_delay_us(2_000_000)
        .with_preferred_batch_sizes([max_batch]);
    VariantConfig::new(name, torchscript_dir().join(file), 50.0)
        .with_torchscript(config)
        .with_batching(batching)
        .with_warmup(WarmupConfig::disabled())
}

fn image_config() -> TorchScriptConfig {
    TorchScriptConfig::new(
        vec![TensorDeclaration::new("input", DType::F32, [-1, 3, 224, 224])],
        vec![TensorDeclaration::new("logits", DType::F32, [-1, 1000])],
    )
}

fn mobilenet(width: &str) -> VariantConfig {
    VariantConfig::new(
        format!("mobilenetv2-{width}-ts"),
        torchscript_dir().join(format!("mobilenetv2_{width}.pt")),
        0.0,
    )
    .with_torchscript(image_config())
    .with_batching(BatchingConfig::default().with_max_batch_size(2))
    .with_warmup(WarmupConfig::default().with_batch_sizes([2, 1]))
}

fn row(i: usize) -> Vec<f32> {
    (0..4).map(|j| (i * 4 + j) as f32 * 0.37 - 3.0).collect()
}

#[test]
fn batched_torchscript_answers_equal_the_onnx_models_weights_applied_row_by_row() {
    let (w, b) = tiny_weights();
    let config = tiny_declared(vec![TensorDeclaration::new("output", DType::F32, [-1, 3])]);
    let task = TaskConfig::new("ts-tiny").with_variant(tiny_variant("tiny-ts", "tiny.pt", config, 8));
    let rt = Runtime::builder().with_task(task).build().unwrap();
    let tickets: Vec<_> = (0..8)
        .map(|i| rt.submit_task("ts-tiny", Tensor::new([1, 4], row(i)).unwrap(), Slo::default()).unwrap())
        .collect();
    for (i, ticket) in tickets.into_iter().enumerate() {
        let output = ticket.wait().unwrap();
        assert_eq!((output.batch_size, &*output.model), (8, "tiny-ts"));
        let expected: Vec<f32> = affine(&row(i), &w, &b).into_iter().map(|v| v.max(0.0)).collect();
        let got = output.get("output").unwrap().as_slice::<f32>().unwrap();
        assert!(max_relative_diff(got, &expected) <= 1e-5, "{got:?} vs {expected:?}");
    }
}

#[test]
fn a_module_returning_a_tuple_answers_every_declared_output_in_its_type() {
    let (w, b) = tiny_weights();
    let config = tiny_declared(vec![
        TensorDeclaration::new("output", DType::F32, [-1, 3]),
        TensorDeclaration::new("positives", DType::I64, [-1]),
    ]);
    let task = TaskConfig::new("ts-pair").with_variant(tiny_variant("pair", "tiny_pair.pt", config, 1));
    let rt = Runtime::builder().with_task(task).build().unwrap();
    let x = vec![0.5, -1.0, 2.0, 0.0];
    let output = rt.infer_task_blocking("ts-pair", Tensor::new([1, 4], x.clone()).unwrap(), Slo::default()).unwrap();
    let expected: Vec<f32> = affine(&x, &w, &b).into_iter().map(|v| v.max(0.0)).collect();
    assert!(max_relative_diff(output.get("output").unwrap().as_slice::<f32>().unwrap(), &expected) <= 1e-5);
    assert_eq!(output.get("positives").unwrap().as_slice::<i64>().unwrap(), &[2]);
}

#[test]
fn mobilenet_logits_through_libtorch_equal_pytorchs_own() {
    let manifest = manifest();
    let probe = &manifest["variants"].as_array().unwrap()[0];
    assert_eq!(probe["file"], "mobilenetv2_0.35.pt");
    let task = TaskConfig::new("ts-image").with_variant(mobilenet("0.35"));
    let rt = Runtime::builder().with_task(task).build().unwrap();
    // The generator's probe: sin(0.001·i)·0.5 over two images, i counting across both.
    let per_image = 3 * 224 * 224;
    for image in 0..2 {
        let values: Vec<f32> = (0..per_image).map(|i| ((image * per_image + i) as f32 * 0.001).sin() * 0.5).collect();
        let output = rt.infer_task_blocking("ts-image", Tensor::new([1, 3, 224, 224], values).unwrap(), Slo::default());
        let logits = output.unwrap().get("logits").unwrap().as_slice::<f32>().unwrap().to_vec();
        let expected: Vec<f32> = serde_json::from_value(probe["probe_logits"][image].clone()).unwrap();
        assert!(max_relative_diff(&logits[..8], &expected) <= 1e-3, "{:?} vs {expected:?}", &logits[..8]);
    }
}

#[test]
fn a_corrupt_module_or_a_wrong_declaration_fails_clearly_and_the_task_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let corrupt = dir.path().join("corrupt.pt");
    std::fs::write(&corrupt, b"PK\x03\x04 not a TorchScript archive").unwrap();
    let good = tiny_declared(vec![TensorDeclaration::new("output", DType::F32, [-1, 3])]);
    let wrong_type = tiny_declared(vec![TensorDeclaration::new("output", DType::I32, [-1, 3])]);
    let task = TaskConfig::new("ts-bad")
        .with_variant(tiny_variant("good", "tiny.pt", good.clone(), 1))
        .with_variant(tiny_variant("corrupt", "tiny.pt", good, 1).with_path(&corrupt))
        .with_variant(tiny_variant("wrong-type", "tiny.pt", wrong_type.clone(), 1));
    let rt = Runtime::builder().with_task(task).build().unwrap();

    let refused = rt.switch_variant("ts-bad", "corrupt").unwrap_err();
    let Error::Load { source, .. } = &refused else { panic!("{refused:?}") };
    assert!(matches!(source.as_ref(), BackendError::Torch { .. }), "{source:?}");

    // Declared with another output type than the task's (its first variant's), it
    // does not fit the task and is refused before it loads.
    let misfit = rt.switch_variant("ts-bad", "wrong-type").unwrap_err();
    assert!(matches!(&misfit, Error::DoesNotFitTask(m) if m.tensor == "output `output`"), "{misfit}");

    // Alone in a task, a module whose output is not the declared type loads (nothing
    // says so before a run) and fails its first request with the mismatch named.
    let alone = TaskConfig::new("ts-wrong").with_variant(tiny_variant("wrong-type", "tiny.pt", wrong_type, 1));
    rt.add_task(alone).unwrap();
    let failed = rt.infer_task_blocking("ts-wrong", Tensor::new([1, 4], row(1)).unwrap(), Slo::default()).unwrap_err();
    assert!(failed.to_string().contains("output `output` is Float, declared I32"), "{failed}");

    rt.switch_variant("ts-bad", "good").unwrap();
    let output = rt.infer_task_blocking("ts-bad", Tensor::new([1, 4], row(2)).unwrap(), Slo::default()).unwrap();
    assert_eq!(&*output.model, "good");
}

/// Where this process mapped a library whose file is named `file`, if it did.
fn mapped(file: &str) -> Option<std::path::PathBuf> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    maps.lines().filter_map(|line| line.split_whitespace().nth(5)).find(|path| path.ends_with(file)).map(Into::into)
}

#[test]
fn a_cuda_variant_has_libtorchs_cuda_library_loaded_and_without_a_gpu_fails_clearly() {
    let declared = tiny_declared(vec![TensorDeclaration::new("output", DType::F32, [-1, 3])]);
    let task = TaskConfig::new("ts-cuda")
        .with_variant(tiny_variant("on-cpu", "tiny.pt", declared.clone(), 1))
        .with_variant(tiny_variant("on-gpu", "tiny.pt", declared, 1).with_device(Device::Cuda(0), false));
    let rt = Runtime::builder().with_task(task).build().unwrap();
    let switched = rt.switch_variant("ts-cuda", "on-gpu");

    // The linker drops libtorch_cuda.so (nothing calls into it); without it libtorch
    // finds no GPU even where there is one. Where PyTorch has it, it is loaded now.
    let cpu_half = mapped("/libtorch_cpu.so").expect("libtorch is loaded");
    if cpu_half.with_file_name("libtorch_cuda.so").exists() {
        assert!(mapped("/libtorch_cuda.so").is_some(), "libtorch_cuda.so beside {cpu_half:?} is not loaded");
    }
    match switched {
        Ok(_) => assert!(std::path::Path::new("/dev/nvidia0").exists(), "loaded on cuda:0 without a GPU"),
        Err(refused) => {
            let Error::Load { source, .. } = &refused else { panic!("{refused:?}") };
            let BackendError::DeviceUnavailable { device, reason } = source.as_ref() else { panic!("{source:?}") };
            assert_eq!(device, "cuda:0");
            assert!(reason.contains("no CUDA device"), "{reason}");
            let output = rt.infer_task_blocking("ts-cuda", Tensor::new([1, 4], row(3)).unwrap(), Slo::default());
            assert_eq!(&*output.unwrap().model, "on-cpu");
        }
    }
}

#[test]
fn a_torchscript_variant_is_profiled_at_load_and_its_fit_judged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mobilenetv2_0.35.pt");
    std::fs::copy(torchscript_dir().join("mobilenetv2_0.35.pt"), &path).unwrap();
    let variant = mobilenet("0.35")
        .with_path(&path)
        .with_batching(BatchingConfig::default().with_max_batch_size(4))
        .with_profile(ProfileMode::Measure);
    let rt = Runtime::builder().with_task(TaskConfig::new("ts-profiled").with_variant(variant)).build().unwrap();
    let profile = rt.variant_profile("ts-profiled", "mobilenetv2-0.35-ts").unwrap().unwrap();
    assert_eq!(profile.key.device, "cpu");
    assert_eq!(profile.points.iter().map(|p| p.batch_size).collect::<Vec<_>>(), vec![1, 2, 4]);
    // Beside the other tests' load the points may not lie on a line; then the fit is
    // refused with its R² named rather than kept to mislead admission.
    match (&profile.fit, &profile.fit_refused) {
        (Some(fit), None) => assert!(fit.is_trusted() && fit.a_ms.is_finite() && fit.c_ms.is_finite(), "{fit:?}"),
        (None, Some(why)) => assert!(why.contains("R²"), "{why}"),
        other => panic!("a fit and a refusal together, or neither: {other:?}"),
    }
    assert!(dir.path().join("mobilenetv2-0.35-ts.profile.json").is_file(), "stored beside the module");
}

#[test]
fn a_task_switches_between_onnx_and_torchscript_variants_under_load_without_failing_a_request() {
    let onnx = VariantConfig::new("onnx-0.35", models_dir().join("mobilenetv2_0.35.onnx"), 60.3)
        .with_batching(BatchingConfig::default().with_max_batch_size(2))
        .with_warmup(WarmupConfig::default().with_batch_sizes([2, 1]));
    let task = TaskConfig::new("mixed").with_variant(onnx).with_variant(mobilenet("0.5"));
    let rt = Arc::new(Runtime::builder().with_task(task).build().unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..3)
        .map(|c| {
            let (rt, stop) = (rt.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut served = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let image = Tensor::new([1, 3, 224, 224], vec![c as f32 * 0.1; 3 * 224 * 224]).unwrap();
                    match rt.infer_task_blocking("mixed", image, Slo::default()) {
                        Ok(output) => served.push(output.model.to_string()),
                        Err(e) => return Err(e),
                    }
                }
                Ok(served)
            })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(300));
    rt.switch_variant("mixed", "mobilenetv2-0.5-ts").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    rt.switch_variant("mixed", "onnx-0.35").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let served: Vec<String> = clients.into_iter().flat_map(|c| c.join().unwrap().unwrap()).collect();
    for variant in ["onnx-0.35", "mobilenetv2-0.5-ts"] {
        assert!(served.iter().any(|s| s == variant), "{variant} served none of {}", served.len());
    }
}
