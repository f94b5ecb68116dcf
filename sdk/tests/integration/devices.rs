//! Variants placed on devices this machine may not have: a GPU variant where ONNX
//! Runtime cannot drive a GPU fails to load with a clear error and the rest of the task
//! keeps serving, or loads on the CPU where its config allows.
//!
//! The tests load ONNX Runtime's CPU build (what `scripts/setup/base.sh` installs), which
//! has no CUDA provider on any machine, GPU or not.

use std::sync::Arc;

use modelless::backend::{BackendError, Device};
use modelless::{BatchingConfig, Error, Runtime, Slo, TaskConfig, Tensor, VariantConfig, WarmupConfig};

use crate::common::{affine, max_relative_diff, models_dir, tiny_weights};

fn tiny(name: &str, device: Device, fallback_to_cpu: bool) -> VariantConfig {
    VariantConfig::new(name, models_dir().join("tiny.onnx"), 50.0)
        .with_batching(BatchingConfig::default().with_max_batch_size(4))
        .with_warmup(WarmupConfig::disabled())
        .with_device(device, fallback_to_cpu)
}

fn row(i: usize) -> Vec<f32> {
    (0..4).map(|j| (i * 4 + j) as f32 * 0.41 - 2.0).collect()
}

/// Asks `task` for `row(i)`: the variant that answered, and the answer.
fn ask(rt: &Runtime, task: &str, i: usize) -> Result<(String, Vec<f32>), Error> {
    let output = rt.infer_task_blocking(task, Tensor::new([1, 4], row(i)).unwrap(), Slo::default())?;
    let values = output.get("output").unwrap().as_slice::<f32>().unwrap().to_vec();
    Ok((output.model.to_string(), values))
}

fn expected(i: usize) -> Vec<f32> {
    let (w, b) = tiny_weights();
    affine(&row(i), &w, &b).into_iter().map(|v| v.max(0.0)).collect()
}

#[test]
fn a_gpu_variant_without_a_gpu_provider_fails_to_load_clearly_and_the_task_keeps_serving() {
    let task = TaskConfig::new("devices").with_variant(tiny("on-cpu", Device::Cpu, false)).with_variant(tiny(
        "on-gpu",
        Device::Cuda(0),
        false,
    ));
    let rt = Arc::new(Runtime::builder().with_task(task).build().unwrap());
    assert_eq!(ask(&rt, "devices", 0).unwrap().0, "on-cpu");

    let refused = rt.switch_variant("devices", "on-gpu").unwrap_err();
    let Error::Load { model, source } = &refused else { panic!("expected a load error, got {refused:?}") };
    assert_eq!(model, "on-gpu");
    let BackendError::DeviceUnavailable { device, reason } = source.as_ref() else {
        panic!("expected DeviceUnavailable, got {source:?}")
    };
    assert_eq!(device, "cuda:0");
    assert!(reason.contains("onnxruntime-gpu"), "the error says what would help: {reason}");

    for i in 0..8 {
        let (variant, values) = ask(&rt, "devices", i).unwrap();
        assert_eq!(variant, "on-cpu");
        assert!(max_relative_diff(&values, &expected(i)) <= 1e-5);
    }
    assert_eq!(rt.task_status("devices").unwrap().active, "on-cpu");
}

#[test]
fn a_task_whose_first_variant_cannot_have_its_gpu_does_not_start_and_says_why() {
    let task = TaskConfig::new("gpu-only").with_variant(tiny("on-gpu", Device::Cuda(1), false));
    let Err(error) = Runtime::builder().with_task(task).build() else {
        panic!("no GPU provider: the task cannot start")
    };
    assert!(error.to_string().contains("device cuda:1 is not available"), "{error}");
}

#[test]
fn a_gpu_variant_that_may_fall_back_serves_on_the_cpu_and_says_where_it_runs() {
    let task = TaskConfig::new("fallback").with_variant(tiny("gpu-or-cpu", Device::Cuda(0), true));
    let rt = Runtime::builder().with_task(task).build().unwrap();
    for i in 0..4 {
        let (variant, values) = ask(&rt, "fallback", i).unwrap();
        assert_eq!(variant, "gpu-or-cpu");
        assert!(max_relative_diff(&values, &expected(i)) <= 1e-5);
    }
    let snapshots = rt.variant_snapshots("fallback").unwrap();
    assert_eq!(snapshots[0].device, "cpu", "where it runs, not where it was asked to");
}

#[test]
fn devices_are_read_from_the_config_file_and_a_misspelt_one_is_named() {
    let config = |device: &str| {
        format!(
            "[[tasks]]\nname = \"t\"\n[[tasks.variants]]\nname = \"v\"\npath = \"x.onnx\"\naccuracy = 1.0\ndevice = \
             \"{device}\"\nfallback_to_cpu = true\n"
        )
    };
    let parsed = modelless::RuntimeConfig::from_toml(&config("cuda:2"), std::path::Path::new(".")).unwrap();
    assert_eq!(parsed.tasks[0].variants[0].device, Device::Cuda(2));
    assert!(parsed.tasks[0].variants[0].fallback_to_cpu);
    let error =
        modelless::RuntimeConfig::from_toml(&config("gpu0"), std::path::Path::new(".")).unwrap_err().to_string();
    assert!(error.contains("device `gpu0`"), "{error}");
}

#[test]
fn a_torchscript_variant_is_declared_in_the_config_file_as_the_readme_shows() {
    let text = r#"
        [[tasks]]
        name = "t"
        [[tasks.variants]]
        name = "ts"
        path = "mobilenetv2_1.0.pt"
        accuracy = 71.8
        device = "cuda:0"
        format = "torchscript"
        [tasks.variants.torchscript]
        inputs = [{ name = "input", dtype = "f32", shape = [-1, 3, 224, 224] }]
        outputs = [{ name = "logits", dtype = "f32", shape = [-1, 1000] }]
    "#;
    let parsed = modelless::RuntimeConfig::from_toml(text, std::path::Path::new(".")).unwrap();
    let variant = &parsed.tasks[0].variants[0];
    assert_eq!(variant.format, modelless::backend::ModelFormat::Torchscript);
    assert_eq!(variant.torchscript.inputs[0].shape, vec![-1, 3, 224, 224]);
    assert_eq!(variant.torchscript.outputs[0].dtype, modelless::DType::F32);
    let misspelt = text.replace("dtype = \"f32\", shape = [-1, 1000]", "dtype = \"float\", shape = [-1, 1000]");
    assert!(modelless::RuntimeConfig::from_toml(&misspelt, std::path::Path::new(".")).is_err());
}
