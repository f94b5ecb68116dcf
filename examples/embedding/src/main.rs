//! An application embedding modelless: it builds a runtime with one task of two
//! variants without blocking its executor, infers, steers the task with a policy
//! module and hot-reloads it, and serves the task over KServe V2 until Ctrl-C or
//! SIGTERM, then stops gracefully.
//!
//! `cargo run --release -- [SECONDS]` from this folder, after `make setup-demo` (or
//! `scripts/setup/base.sh`) in the repository; with SECONDS it serves that long
//! instead of waiting for a signal. `MODELLESS_ASSETS` points at another
//! `.modelless` folder.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use modelless::kserve::{ServerConfig, shutdown_signal};
use modelless::{PolicyConfig, Runtime, Slo, TaskConfig, Tensor, VariantConfig};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let assets = std::env::var_os("MODELLESS_ASSETS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../.modelless")));
    let models = assets.join("models");

    // One task, two variants that trade accuracy for cost; the larger serves first.
    let task = TaskConfig::new("classify")
        .with_latency_slo_ms(200.0)
        .with_variant(VariantConfig::new("small", models.join("mobilenetv2_0.5.onnx"), 65.4))
        .with_variant(VariantConfig::new("large", models.join("mobilenetv2_1.0.onnx"), 71.8))
        .with_active("large");
    // Loading and warming take seconds: awaited, they leave the executor free.
    let runtime = Arc::new(Runtime::builder().with_task(task).build_async().await?);

    let classify = runtime.task("classify")?;
    let slo = Slo::default().with_latency(Duration::from_millis(200));
    let answer = classify.infer(Tensor::full([1, 3, 224, 224], 0.5f32), slo).await?;
    println!("answered by {} in a batch of {}", answer.model, answer.batch_size);

    // Steering: the policy decides every tick which variant serves; reloading it
    // swaps the module while requests flow.
    let policy = assets.join("policies/cheapest-meeting-slo.wasm");
    runtime.start_policy(PolicyConfig::new(&policy))?;
    let took = runtime.reload_policy_async(&policy).await?;
    println!("policy reloaded in {took:?}");

    // KServe V2 on loopback (ports the system picks): Triton's clients work as is.
    let seconds = std::env::args().nth(1).map(|s| s.parse::<u64>()).transpose()?;
    let stop = async move {
        match seconds {
            Some(seconds) => tokio::time::sleep(Duration::from_secs(seconds)).await,
            None => shutdown_signal().await,
        }
    };
    println!("serving over KServe V2 on loopback until {}", seconds.map_or("Ctrl-C".into(), |s| format!("{s} s")));
    runtime.clone().serve_until(&ServerConfig::loopback(), stop).await?;
    runtime.stop_policy();
    println!("stopped");
    Ok(())
}
