//! Shared helpers: where the generated models are, and waiting on a condition.

use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The folder of the crate under test (sdk/ or lab/, both beside the repository's
/// other folders), as cargo names it when it runs the tests: a test binary
/// reused from a shared target folder was compiled in another checkout, whose path
/// `env!` would give.
pub fn crate_dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR").map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from)
}

/// The folder of generated test models; fails loudly when setup has not run.
pub fn models_dir() -> PathBuf {
    generated("models", "manifest.json", "scripts/setup/base.sh")
}

/// The folder of generated TorchScript modules, likewise.
#[cfg_attr(not(feature = "tch"), allow(dead_code))]
pub fn torchscript_dir() -> PathBuf {
    generated("torchscript", "torchscript.json", "scripts/setup/torch.sh")
}

/// `.modelless/<folder>`, which `script` fills and marks with `manifest`.
fn generated(folder: &str, manifest: &str, script: &str) -> PathBuf {
    let dir = crate_dir().join("../.modelless").join(folder);
    assert!(dir.join(manifest).is_file(), "{folder} missing in {}: run {script} (make test does)", dir.display());
    dir
}

/// The weights `W` (4×3) and `b` (3) of the tiny models, from the manifest.
pub fn tiny_weights() -> (Vec<Vec<f32>>, Vec<f32>) {
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(models_dir().join("manifest.json")).unwrap()).unwrap();
    let w = serde_json::from_value(manifest["tiny_weights"]["W"].clone()).unwrap();
    let b = serde_json::from_value(manifest["tiny_weights"]["b"].clone()).unwrap();
    (w, b)
}

/// `x · W + b` for one row.
pub fn affine(x: &[f32], w: &[Vec<f32>], b: &[f32]) -> Vec<f32> {
    (0..b.len()).map(|j| b[j] + x.iter().zip(w).map(|(xi, wi)| xi * wi[j]).sum::<f32>()).collect()
}

/// Polls `condition` until it holds; fails the test after 10 s.
pub fn wait_for(mut condition: impl FnMut() -> bool) {
    let start = Instant::now();
    while !condition() {
        assert!(start.elapsed() < Duration::from_secs(10), "condition not reached in 10 s");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Largest difference relative to the magnitude of the expected value (at least 1).
pub fn max_relative_diff(actual: &[f32], expected: &[f32]) -> f32 {
    assert_eq!(actual.len(), expected.len());
    actual.iter().zip(expected).map(|(a, e)| (a - e).abs() / e.abs().max(1.0)).fold(0.0, f32::max)
}

/// A policy module `scripts/policies/build.sh` built.
pub fn policy_module(name: &str) -> PathBuf {
    let path = crate_dir().join(format!("../.modelless/policies/{name}.wasm"));
    assert!(
        path.is_file(),
        "policy module missing: {} (run scripts/setup/base.sh, which make test runs; the C policy also needs clang and \
         lld, which scripts/setup/test_deps.sh installs)",
        path.display()
    );
    path
}

/// A fixture of `policies-wasm/fixtures/`: snapshots, one per line.
pub fn fixture_path(name: &str) -> PathBuf {
    crate_dir().join(format!("../policies-wasm/fixtures/{name}.jsonl"))
}

/// The snapshots of a fixture in `policies-wasm/fixtures/`, one per tick.
pub fn fixture_snapshots(name: &str) -> Vec<modelless::policy_abi::Snapshot> {
    let text = std::fs::read_to_string(fixture_path(name)).unwrap();
    text.lines().map(|line| serde_json::from_str(line).unwrap()).collect()
}

/// The exported EfficientNet-Lite models, their labels and manifest.
pub fn efficientnet_dir() -> PathBuf {
    generated("efficientnet", "manifest.json", "scripts/setup/base.sh")
}

/// The images `scripts/data/gen_images.py` made: every format served with Pillow's decode of
/// each, and the benchmark's JPEGs.
pub fn images_dir() -> PathBuf {
    generated("images", "manifest.json", "scripts/setup/base.sh")
}

/// The sample photographs setup copies out of scikit-image's wheel.
pub fn photo(name: &str) -> Vec<u8> {
    let path = crate_dir().join("../.modelless/photos").join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e} (run scripts/setup/base.sh)", path.display()))
}
