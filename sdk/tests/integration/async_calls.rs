//! Inside an async application: building the runtime and switching a task's variant
//! load and warm models for seconds, and the executor keeps running the application's
//! other tasks meanwhile, even on a single thread.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use modelless::backend::MakeBackend;
use modelless::{BatchingConfig, Runtime, Slo, TaskConfig, Tensor, VariantConfig};
use modelless_runtime::backend::fake::{BatchLog, FakeBackend, FakeConfig};

use crate::common::models_dir;

/// A fake backend taking 40 ms a batch, warmed at every size up to 8: about a third
/// of a second to load.
fn slow() -> FakeConfig {
    FakeConfig { per_batch: Duration::from_millis(40), ..FakeConfig::default() }
}

/// Counts, every millisecond or so, that the executor ran it.
fn heartbeat() -> (Arc<AtomicUsize>, tokio::task::JoinHandle<()>) {
    let beats = Arc::new(AtomicUsize::new(0));
    let counter = beats.clone();
    let task = tokio::spawn(async move {
        loop {
            counter.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    });
    (beats, task)
}

#[tokio::test(flavor = "current_thread")]
async fn the_executor_runs_other_tasks_while_the_runtime_builds_and_switches() {
    let (beats, heart) = heartbeat();
    let eight = BatchingConfig::default().with_max_batch_size(8);
    // A task served by MobileNetV2-1.0 on ONNX Runtime, warmed at every batch size up
    // to 8 before the build returns.
    let path = models_dir().join("mobilenetv2_1.0.onnx");
    let variant = VariantConfig::new("mobilenetv2-1.0", path, 71.8).with_batching(eight.clone());
    let builder = Runtime::builder().with_task(TaskConfig::new("image").with_variant(variant));
    let before = beats.load(Ordering::Relaxed);
    let runtime = builder.build_async().await.unwrap();
    let during_build = beats.load(Ordering::Relaxed) - before;
    // On one thread, a build that blocked would have let the heartbeat beat at most
    // once (when the test first yields); loading and warming the model take long
    // enough for it to beat many times.
    assert!(during_build >= 3, "the heartbeat beat {during_build} times while the runtime built");

    let mut task = TaskConfig::new("classify");
    for (name, accuracy) in [("small", 60.0), ("large", 70.0)] {
        task = task.with_variant(VariantConfig::new(name, "fake", accuracy).with_batching(eight.clone()));
    }
    let make: MakeBackend = Arc::new(|_, _| FakeBackend::factory(slow(), BatchLog::default()));
    runtime.add_task_with(task, make).unwrap();
    let classify = runtime.task("classify").unwrap();
    let before = beats.load(Ordering::Relaxed);
    let switched = classify.switch("large").await.unwrap();
    let during_switch = beats.load(Ordering::Relaxed) - before;
    assert!(switched.loaded, "`large` was loaded and warmed by the switch");
    assert!(during_switch >= 3, "the heartbeat beat {during_switch} times while the task switched");
    let input = Tensor::new([1, 4], vec![1.0f32; 4]).unwrap();
    let answer = classify.infer(input, Slo::default()).await.unwrap();
    assert_eq!(answer.model.as_ref(), "large");
    assert_eq!(classify.status().active, "large");
    heart.abort();
}
