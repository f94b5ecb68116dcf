//! Tests that need an NVIDIA GPU. They are `#[ignore]`d, so `cargo test` lists them as
//! ignored where there is none; `make test` runs them (`--include-ignored gpu::`) where
//! `nvidia-smi` lists a GPU. On a machine without one they fail, never pass quietly.
//!
//! CUDA sessions: TorchScript ones (feature `tch`), and ONNX ones on ONNX Runtime's GPU
//! build, which `make test` installs where there is a GPU (`scripts/setup/ort_gpu.sh`);
//! the CPU build that setup installs refuses `cuda:N`, as `devices.rs` tests.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use modelless::backend::Device;
use modelless::backend::onnx::OrtEnvironmentConfig;
use modelless::{BatchingConfig, PolicyConfig, Runtime, Slo, TaskConfig, Tensor, VariantConfig};
use modelless_runtime::metrics::{gpu_snapshots, gpus_absent_reason};

use crate::common::{max_relative_diff, models_dir, policy_module, wait_for};

fn assert_gpu() {
    assert!(gpus_absent_reason().is_none(), "no GPU: {}", gpus_absent_reason().unwrap_or_default());
}

/// Set in the process a test starts for itself.
const ALONE: &str = "MODELLESS_GPU_TEST_ALONE";

/// Whether this is the process of its own that test `name` (of module `module`, as
/// `module_path!()` gives it) runs in; if not, runs it in one and asserts it passed.
fn in_a_process_of_its_own(module: &str, name: &str) -> bool {
    if std::env::var_os(ALONE).is_some() {
        return true;
    }
    let module = module.split_once("::").map_or("", |(_, rest)| rest);
    let test = format!("{module}::{name}");
    let status = Command::new(std::env::current_exe().unwrap())
        .args([test.as_str(), "--exact", "--include-ignored", "--nocapture", "--test-threads=1"])
        .env(ALONE, "1")
        .status()
        .unwrap();
    assert!(status.success(), "{test} in a process of its own failed: {status}");
    false
}

/// Batches of up to `max_batch` rows that wait for a full batch.
fn gathering(max_batch: usize) -> BatchingConfig {
    BatchingConfig::default()
        .with_max_batch_size(max_batch)
        .with_max_queue_delay_us(2_000_000)
        .with_preferred_batch_sizes([max_batch])
}

fn image(i: usize) -> Tensor {
    let values = (0..3 * 224 * 224).map(|j| ((j * 7 + i * 13) % 255) as f32 / 255.0 - 0.5).collect::<Vec<_>>();
    Tensor::new([1, 3, 224, 224], values).unwrap()
}

/// Task `task`, serving variant `on-gpu`, answers four images in one batch with the
/// logits its variant `on-cpu` gives each.
fn assert_gpu_batches_answer_as_the_cpu(rt: &Runtime, task: &str) {
    let snapshots = rt.variant_snapshots(task).unwrap();
    assert_eq!(snapshots.iter().find(|v| v.name == "on-gpu").unwrap().device, "cuda:0");
    let on_gpu: Vec<_> = (0..4).map(|i| rt.submit_task(task, image(i), Slo::default()).unwrap()).collect();
    let on_gpu: Vec<_> = on_gpu.into_iter().map(|t| t.wait().unwrap()).collect();
    rt.switch_variant(task, "on-cpu").unwrap();
    for (i, gpu) in on_gpu.iter().enumerate() {
        assert_eq!((&*gpu.model, gpu.batch_size), ("on-gpu", 4));
        let cpu = rt.infer_task_blocking(task, image(i), Slo::default()).unwrap();
        let (g, c) = (gpu.get("logits").unwrap(), cpu.get("logits").unwrap());
        let diff = max_relative_diff(g.as_slice::<f32>().unwrap(), c.as_slice::<f32>().unwrap());
        assert!(diff <= 1e-3, "GPU and CPU logits differ by {diff}");
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: make test runs it where nvidia-smi lists one"]
fn nvml_reports_every_gpu_with_its_memory_utilisation_and_clocks_in_the_policy_snapshot() {
    assert_gpu();
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("ticks.jsonl");
    let task = TaskConfig::new("tiny").with_variant(VariantConfig::new("tiny", models_dir().join("tiny.onnx"), 50.0));
    let rt = Runtime::builder().with_task(task).build().unwrap();
    let mut policy = PolicyConfig::new(policy_module("static")).with_tick(Duration::from_millis(30));
    policy.record = Some(record.clone());
    rt.start_policy(policy).unwrap();
    wait_for(|| modelless_runtime::policy::read_ticks(&record).is_ok_and(|ticks| ticks.len() >= 2));
    rt.stop_policy();
    let ticks = modelless_runtime::policy::read_ticks(&record).unwrap();
    let gpus = &ticks.last().unwrap().0.system.gpus;
    assert_eq!(gpus.len(), gpu_snapshots().len());
    assert!(!gpus.is_empty());
    for gpu in gpus {
        assert!(!gpu.name.is_empty());
        let (used, total) = (gpu.memory_used_bytes.unwrap(), gpu.memory_total_bytes.unwrap());
        assert!(total > 1 << 30 && used <= total, "{gpu:?}");
        assert!(gpu.utilisation_percent.is_some_and(|u| (0.0..=100.0).contains(&u)), "{gpu:?}");
        assert!(gpu.sm_clock_mhz.is_some_and(|mhz| mhz > 0), "{gpu:?}");
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: make test runs it where nvidia-smi lists one"]
fn an_onnx_variant_on_cuda_serves_batched_requests_with_the_cpus_answers() {
    assert_gpu();
    // ONNX Runtime's library is loaded once per process, and other tests load the CPU build.
    if !in_a_process_of_its_own(module_path!(), "an_onnx_variant_on_cuda_serves_batched_requests_with_the_cpus_answers")
    {
        return;
    }
    let library = std::env::var_os("MODELLESS_ORT_GPU_LIB").map(PathBuf::from);
    assert!(library.is_some(), "needs ONNX Runtime's GPU build: eval \"$(bash scripts/setup/ort_gpu.sh)\"");
    let variant = |name: &str, device| {
        VariantConfig::new(name, models_dir().join("mobilenetv2_0.35.onnx"), 60.3)
            .with_device(device, false)
            .with_batching(gathering(4))
    };
    let task = TaskConfig::new("onnx-gpu")
        .with_variant(variant("on-cpu", Device::Cpu))
        .with_variant(variant("on-gpu", Device::Cuda(0)).with_preload(true))
        .with_active("on-gpu");
    let onnxruntime = OrtEnvironmentConfig { library_path: library, ..OrtEnvironmentConfig::default() };
    let rt = Runtime::builder().with_onnxruntime(onnxruntime).with_task(task).build().unwrap();
    assert_gpu_batches_answer_as_the_cpu(&rt, "onnx-gpu");
}

#[cfg(feature = "tch")]
mod cuda {
    use modelless::backend::{TensorDeclaration, TorchScriptConfig};
    use modelless::profile::ProfileMode;
    use modelless::{DType, WarmupConfig};
    use modelless_runtime::metrics::process_gpu_memory;

    use super::*;
    use crate::common::torchscript_dir;

    fn mobilenet(name: &str, device: Device, max_batch: usize) -> VariantConfig {
        let config = TorchScriptConfig::new(
            vec![TensorDeclaration::new("input", DType::F32, [-1, 3, 224, 224])],
            vec![TensorDeclaration::new("logits", DType::F32, [-1, 1000])],
        );
        VariantConfig::new(name, torchscript_dir().join("mobilenetv2_0.35.pt"), 60.3)
            .with_torchscript(config)
            .with_device(device, false)
            .with_batching(gathering(max_batch))
            .with_warmup(WarmupConfig::default().with_batch_sizes([max_batch, 1]))
    }

    #[test]
    #[ignore = "needs an NVIDIA GPU: make test runs it where nvidia-smi lists one"]
    fn a_cuda_variant_serves_batched_requests_with_the_cpus_answers() {
        assert_gpu();
        let task = TaskConfig::new("gpu")
            .with_variant(mobilenet("on-cpu", Device::Cpu, 4))
            .with_variant(mobilenet("on-gpu", Device::Cuda(0), 4).with_preload(true))
            .with_active("on-gpu");
        let rt = Runtime::builder().with_task(task).build().unwrap();
        assert_gpu_batches_answer_as_the_cpu(&rt, "gpu");
    }

    #[test]
    #[ignore = "needs an NVIDIA GPU: make test runs it where nvidia-smi lists one"]
    fn profiling_on_the_gpu_fits_a_line_and_measures_device_memory_per_batch() {
        assert_gpu();
        let (_dir, path) = fresh_copy("mobilenetv2_0.35.pt");
        let variant = mobilenet("profiled", Device::Cuda(0), 16).with_path(&path).with_profile(ProfileMode::Measure);
        let rt = Runtime::builder().with_task(TaskConfig::new("gpu-profile").with_variant(variant)).build().unwrap();
        let profile = rt.variant_profile("gpu-profile", "profiled").unwrap().unwrap();
        assert_eq!(profile.key.device, "cuda:0");
        let fit = profile.fit.unwrap();
        assert!(fit.a_ms > 0.0 && fit.r2 >= 0.9, "{fit:?}");
        let memory: Vec<u64> = profile.points.iter().filter_map(|p| p.memory_bytes).collect();
        assert_eq!(memory.len(), profile.points.len(), "NVML measures device memory at every batch size");
        assert!(memory.last() > memory.first(), "larger batches hold more device memory: {memory:?}");
    }

    /// Where `name` is copied to a folder of its own, so that a profile stored beside
    /// it is measured now.
    fn fresh_copy(name: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(name);
        std::fs::copy(torchscript_dir().join(name), &path).unwrap();
        (dir, path)
    }

    #[test]
    #[ignore = "needs an NVIDIA GPU: make test runs it where nvidia-smi lists one"]
    fn batches_never_exceed_what_fits_the_memory_budget_and_larger_requests_run_split() {
        assert_gpu();
        // NVML counts a process's device memory, and libtorch's allocator keeps what
        // earlier tests freed: measured beside them, batches would seem to cost nothing.
        let name = "batches_never_exceed_what_fits_the_memory_budget_and_larger_requests_run_split";
        if !in_a_process_of_its_own(module_path!(), name) {
            return;
        }
        const BUDGET_MIB: u64 = 1024;
        const MAX_BATCH: usize = 256;
        let (_dir, path) = fresh_copy("mobilenetv2_0.35.pt");
        let variant = mobilenet("capped", Device::Cuda(0), MAX_BATCH)
            .with_path(&path)
            .with_profile(ProfileMode::Measure)
            .with_memory_budget_mib(BUDGET_MIB)
            .with_warmup(WarmupConfig::default().with_batch_sizes([1]));
        let rt = Runtime::builder().with_task(TaskConfig::new("capped").with_variant(variant)).build().unwrap();
        let profile = rt.variant_profile("capped", "capped").unwrap().unwrap();
        // At ~15 MB of activations per 224² image, 256 images need several GiB.
        assert!(profile.max_safe_batch.is_some(), "the budget found no batch that fits: {:?}", profile.points);
        let fits = profile.max_safe_batch.unwrap() as usize;
        assert!((1..MAX_BATCH).contains(&fits), "largest safe batch {fits}");
        for point in &profile.points {
            let bytes = point.memory_bytes.unwrap();
            assert_eq!(bytes <= BUDGET_MIB << 20, point.batch_size as usize <= fits, "{point:?} vs {fits}");
        }
        let snapshot = rt.variant_snapshots("capped").unwrap().remove(0);
        assert_eq!(snapshot.profile.unwrap().max_safe_batch, Some(fits as u32));
        // One request of the configured largest batch: it runs in batches that fit.
        let before = process_gpu_memory(0).unwrap();
        let rows = (0..MAX_BATCH).map(image).collect::<Vec<_>>();
        let values: Vec<f32> = rows.iter().flat_map(|t| t.as_slice::<f32>().unwrap().to_vec()).collect();
        let request = Tensor::new([MAX_BATCH, 3, 224, 224], values).unwrap();
        let answer = rt.infer_task_blocking("capped", request, Slo::default()).unwrap();
        assert!(answer.batch_size <= fits, "a batch of {} formed over the cap {fits}", answer.batch_size);
        let logits = answer.get("logits").unwrap();
        assert_eq!(logits.shape(), &[MAX_BATCH, 1000]);
        for i in [0, fits, MAX_BATCH - 1] {
            let alone = rt.infer_task_blocking("capped", image(i), Slo::default()).unwrap();
            let got = &logits.as_slice::<f32>().unwrap()[i * 1000..(i + 1) * 1000];
            let diff = max_relative_diff(got, alone.get("logits").unwrap().as_slice::<f32>().unwrap());
            assert!(diff <= 1e-3, "row {i} of the split request differs from it alone by {diff}");
        }
        // A batch of all 256 rows would have taken GiBs more.
        let grew = process_gpu_memory(0).unwrap().saturating_sub(before);
        assert!(grew < BUDGET_MIB << 20, "serving the request took {} MiB more device memory", grew >> 20);
    }
}
