//! Tests that need an NVIDIA GPU. They are `#[ignore]`d, so `cargo test` lists them as
//! ignored where there is none; `make test` runs them (`--include-ignored gpu::`) where
//! `nvidia-smi` lists a GPU. On a machine without one they fail, never pass quietly.
//!
//! The CUDA sessions are TorchScript ones (feature `tch`): the ONNX Runtime library the
//! setup installs is its CPU build, whose refusal of `cuda:N` `devices.rs` tests.

use modelless::metrics::{gpu_snapshots, gpus_absent_reason};

fn assert_gpu() {
    assert!(gpus_absent_reason().is_none(), "no GPU: {}", gpus_absent_reason().unwrap_or_default());
}

#[test]
#[ignore = "needs an NVIDIA GPU: make test runs it where nvidia-smi lists one"]
fn nvml_reports_every_gpu_with_its_memory_utilisation_and_clocks() {
    assert_gpu();
    let gpus = gpu_snapshots();
    assert!(!gpus.is_empty());
    for gpu in &gpus {
        assert!(!gpu.name.is_empty());
        let (used, total) = (gpu.memory_used_bytes.unwrap(), gpu.memory_total_bytes.unwrap());
        assert!(total > 1 << 30 && used <= total, "{gpu:?}");
        assert!(gpu.utilisation_percent.is_some_and(|u| (0.0..=100.0).contains(&u)), "{gpu:?}");
        assert!(gpu.sm_clock_mhz.is_some_and(|mhz| mhz > 0), "{gpu:?}");
    }
}

#[cfg(feature = "tch")]
mod cuda {
    use modelless::backend::torchscript::{TensorDeclaration, TorchScriptConfig};
    use modelless::{
        BatchingConfig, DType, Device, ProfileMode, Runtime, Slo, TaskConfig, Tensor, VariantConfig, WarmupConfig,
    };

    use super::assert_gpu;
    use crate::common::{max_relative_diff, torchscript_dir};

    fn mobilenet(name: &str, device: Device, max_batch: usize) -> VariantConfig {
        let config = TorchScriptConfig::new(
            vec![TensorDeclaration::new("input", DType::F32, [-1, 3, 224, 224])],
            vec![TensorDeclaration::new("logits", DType::F32, [-1, 1000])],
        );
        let batching = BatchingConfig::default()
            .with_max_batch_size(max_batch)
            .with_max_queue_delay_us(2_000_000)
            .with_preferred_batch_sizes([max_batch]);
        VariantConfig::new(name, torchscript_dir().join("mobilenetv2_0.35.pt"), 60.3)
            .with_torchscript(config)
            .with_device(device, false)
            .with_batching(batching)
            .with_warmup(WarmupConfig::default().with_batch_sizes([max_batch, 1]))
    }

    fn image(i: usize) -> Tensor {
        let values = (0..3 * 224 * 224).map(|j| ((j * 7 + i * 13) % 255) as f32 / 255.0 - 0.5).collect::<Vec<_>>();
        Tensor::new([1, 3, 224, 224], values).unwrap()
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
        let snapshots = rt.variant_snapshots("gpu").unwrap();
        assert_eq!(snapshots.iter().find(|v| v.name == "on-gpu").unwrap().device, "cuda:0");
        let on_gpu: Vec<_> = (0..4).map(|i| rt.submit_task("gpu", image(i), Slo::default()).unwrap()).collect();
        let on_gpu: Vec<_> = on_gpu.into_iter().map(|t| t.wait().unwrap()).collect();
        rt.switch_variant("gpu", "on-cpu").unwrap();
        for (i, gpu) in on_gpu.iter().enumerate() {
            assert_eq!((&*gpu.model, gpu.batch_size), ("on-gpu", 4));
            let cpu = rt.infer_task_blocking("gpu", image(i), Slo::default()).unwrap();
            let (g, c) = (gpu.get("logits").unwrap(), cpu.get("logits").unwrap());
            let diff = max_relative_diff(g.as_slice::<f32>().unwrap(), c.as_slice::<f32>().unwrap());
            assert!(diff <= 1e-3, "GPU and CPU logits differ by {diff}");
        }
    }

    #[test]
    #[ignore = "needs an NVIDIA GPU: make test runs it where nvidia-smi lists one"]
    fn profiling_on_the_gpu_fits_a_line_and_measures_device_memory_per_batch() {
        assert_gpu();
        let dir = std::env::temp_dir().join(format!("modelless-gpu-profile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("mobilenetv2_0.35.pt");
        std::fs::copy(torchscript_dir().join("mobilenetv2_0.35.pt"), &path).unwrap();
        let variant = mobilenet("profiled", Device::Cuda(0), 16).with_path(&path).with_profile(ProfileMode::Measure);
        let rt = Runtime::builder().with_task(TaskConfig::new("gpu-profile").with_variant(variant)).build().unwrap();
        let profile = rt.variant_profile("gpu-profile", "profiled").unwrap().unwrap();
        assert_eq!(profile.key.device, "cuda:0");
        let fit = profile.fit.unwrap();
        assert!(fit.a_ms > 0.0 && fit.r2 >= 0.9, "{fit:?}");
        let memory: Vec<u64> = profile.points.iter().filter_map(|p| p.memory_bytes).collect();
        assert_eq!(memory.len(), profile.points.len(), "NVML measures device memory at every batch size");
        assert!(memory.last() > memory.first(), "larger batches hold more device memory: {memory:?}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
