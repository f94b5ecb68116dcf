//! Images in: every format and colour mode served decodes as Pillow decodes it, and
//! becomes the tensor Pillow's resize makes of it; photos sent as JPEG bytes through the
//! SDK, gRPC and HTTP reach the right label on every EfficientNet-Lite variant; bad
//! files are refused while good requests go on; the shipped image example switches
//! among its variants with no signature declared.

use std::time::{Duration, Instant};

use modelless::preprocess::{DecodeLimits, ImagePreprocess, decode, to_tensor};
use modelless::profile::{ImageCapacityOptions, ImageSizeClass};
use modelless::{BatchingConfig, Error, Inputs, PolicyConfig, Runtime, RuntimeConfig, Slo, TaskConfig, VariantConfig};
use serde_json::Value;

use crate::common::{crate_dir, efficientnet_dir, images_dir, photo, policy_module};
use crate::efficientnet::{CATS, image_task, labels, manifest, preprocess_of};

fn formats() -> Vec<Value> {
    let text = std::fs::read_to_string(images_dir().join("manifest.json")).unwrap();
    let manifest: Value = serde_json::from_str(&text).unwrap();
    manifest["formats"].as_array().unwrap().clone()
}

/// Mean and largest absolute difference.
fn differences(ours: impl Iterator<Item = f32>, reference: impl Iterator<Item = f32>) -> (f32, f32) {
    let (mut sum, mut max, mut n) = (0.0f32, 0.0f32, 0usize);
    for (a, b) in ours.zip(reference) {
        let d = (a - b).abs();
        sum += d;
        max = max.max(d);
        n += 1;
    }
    (sum / n as f32, max)
}

/// PNGs decode exactly as Pillow's; JPEGs within the rounding of two IDCTs and two
/// chroma upsamplers (mean ≤ 0.25 level of 255, none more than 6 off; measured 0.21
/// and 5 where zune-jpeg decodes at full size, 0.03 and 1 where jpeg-decoder does);
/// EXIF orientation turns the image upright; CMYK, greyscale, alpha, palette and
/// 16-bit images become Pillow's RGB.
#[test]
fn every_format_decodes_as_pillow_decodes_it() {
    let dir = images_dir().join("formats");
    for case in formats() {
        let file = case["file"].as_str().unwrap();
        let encoded = std::fs::read(dir.join(file)).unwrap();
        let reference = std::fs::read(dir.join(case["reference"].as_str().unwrap())).unwrap();
        let decoded = decode(&encoded, &DecodeLimits::default(), None).unwrap_or_else(|e| panic!("{file}: {e}"));
        let (width, height) = (case["width"].as_u64().unwrap() as u32, case["height"].as_u64().unwrap() as u32);
        assert_eq!((decoded.width, decoded.height), (width, height), "{file}");
        let (mean, max) =
            differences(decoded.rgb.iter().map(|&v| f32::from(v)), reference.iter().map(|&v| f32::from(v)));
        let (mean_ok, max_ok) = if file.ends_with(".png") { (0.0, 0.0) } else { (0.25, 6.0) };
        println!("{file}: mean {mean:.3}, max {max}");
        assert!(mean <= mean_ok && max <= max_ok, "{file}: mean difference {mean}, largest {max}");
    }
}

/// The 64×64 centre crop, decoded shrunk where the JPEG allows: within 1 level of
/// Pillow's on average and 10 at most (measured 0.67 and 8: its bicubic and
/// `fast_image_resize`'s Catmull-Rom round differently, and a shrunk JPEG decode
/// averages in the DCT domain what Pillow averages in its filter).
#[test]
fn every_format_becomes_the_tensor_pillow_makes_of_it() {
    let dir = images_dir().join("formats");
    let preprocess = ImagePreprocess::new(64, [0.0; 3], [1.0; 3]);
    for case in formats() {
        let file = case["file"].as_str().unwrap();
        let encoded = std::fs::read(dir.join(file)).unwrap();
        let reference = std::fs::read(dir.join(case["tensor"].as_str().unwrap())).unwrap();
        let reference = reference.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]));
        let decoded = decode(&encoded, &DecodeLimits::default(), Some(&preprocess)).unwrap();
        let tensor = to_tensor(&decoded, &preprocess).unwrap();
        assert_eq!(tensor.shape(), &[1, 3, 64, 64]);
        let (mean, max) = differences(tensor.as_slice::<f32>().unwrap().iter().copied(), reference);
        println!("{file}: shrink {}, mean {mean:.3}, max {max}", decoded.shrink);
        assert!(mean <= 1.0 && max <= 10.0, "{file}: mean difference {mean}, largest {max}");
    }
}

fn bench_image(name: &str) -> Vec<u8> {
    std::fs::read(images_dir().join("bench").join(name)).unwrap()
}

/// A JPEG photo of a cat (500×375) and a large one (3564×2880, decoded at 1/8) reach a
/// cat label through the SDK on every variant, each preprocessed for its resolution.
#[test]
fn each_efficientnet_lite_variant_classifies_jpeg_bytes_through_the_sdk() {
    let runtime = Runtime::builder().with_task(image_task()).build().unwrap();
    for v in manifest()["variants"].as_array().unwrap() {
        let name = v["name"].as_str().unwrap();
        for file in ["medium.jpg", "large.jpg"] {
            let ticket =
                runtime.submit_variant("classify-photo", name, Inputs::image(bench_image(file)), Slo::default());
            let answer = ticket.unwrap().wait().unwrap();
            let best = &answer.classes("logits", 1).unwrap()[0][0];
            assert!(CATS.contains(&best.index), "{name}, {file}: {best:?}");
            assert!(answer.timings.decode > Duration::ZERO && answer.timings.preprocess > Duration::ZERO);
            let side = v["resolution"].as_u64().unwrap();
            eprintln!("{name} {file} ({side}px): {:?}, {:?}", best.label, answer.timings);
        }
    }
}

/// A variant's capacity with whole photos is measured through the task's own request
/// path (decoded and run, per answer), stored beside the model by size class, and
/// found again for the same settings; a variant that takes no images has none.
#[test]
fn the_capacity_with_photos_is_measured_per_size_class_and_stored_beside_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let lite0 = &manifest()["variants"][0];
    let path = dir.path().join("lite0.onnx");
    std::fs::copy(efficientnet_dir().join(lite0["file"].as_str().unwrap()), &path).unwrap();
    let task_of = |path: &std::path::Path| {
        let batching = BatchingConfig::default().with_max_batch_size(4);
        let photos =
            VariantConfig::new("photos", path, 75.0).with_batching(batching).with_preprocess(preprocess_of(lite0));
        TaskConfig::new("capacity").with_variant(photos)
    };
    let tensors = TaskConfig::new("tensors").with_variant(VariantConfig::new("tensors", &path, 75.0));
    let runtime = Runtime::builder().with_task(task_of(&path)).with_task(tensors).build().unwrap();
    assert_eq!(runtime.image_profile("capacity", "photos").unwrap(), None);

    let options = ImageCapacityOptions { duration: Duration::from_millis(1500), clients: Some(6) };
    let mut ticks = 0;
    for (name, file) in [("500x375", "medium.jpg"), ("3564x2880", "large.jpg")] {
        let class = ImageSizeClass { name: name.into(), photos: vec![bench_image(file).into()] };
        let capacity = runtime.measure_image_capacity("capacity", "photos", &class, &options, &mut |_, _| ticks += 1);
        let capacity = capacity.unwrap();
        assert_eq!((capacity.size_class.as_str(), capacity.clients, capacity.photos), (name, 6, 1));
        assert!(capacity.requests_per_s > 0.0, "{capacity:?}");
        assert!(capacity.decode_ms > 0.0 && capacity.preprocess_ms > 0.0 && capacity.compute_ms > 0.0, "{capacity:?}");
        assert!((1.0..=4.0).contains(&capacity.mean_batch), "batches within the variant's limit: {capacity:?}");
        assert_eq!(capacity.mean_bytes, bench_image(file).len() as u64);
    }
    assert!(ticks >= 2, "progress is reported");
    let stored = runtime.image_profile("capacity", "photos").unwrap().expect("stored");
    let classes: Vec<&str> = stored.capacities.iter().map(|c| c.size_class.as_str()).collect();
    assert_eq!(classes, ["500x375", "3564x2880"]);
    assert!(dir.path().join("photos.images.json").is_file(), "beside the model");
    // A 3564×2880 JPEG costs more to decode than a 500×375 one, even at 1/8.
    let (medium, large) = (stored.capacity("500x375").unwrap(), stored.capacity("3564x2880").unwrap());
    assert!(large.decode_ms > medium.decode_ms, "{medium:?} {large:?}");
    // Policies price the variant by them at once, and a runtime started later over
    // the same model finds them as the variant loads.
    let priced = |runtime: &Runtime| {
        let snapshots = runtime.variant_snapshots("capacity").unwrap();
        let photos = snapshots[0].profile.as_ref().map(|p| p.photos.clone()).unwrap_or_default();
        photos.into_iter().map(|c| (c.size_class, c.requests_per_s)).collect::<Vec<_>>()
    };
    let measured: Vec<(String, f64)> =
        stored.capacities.iter().map(|c| (c.size_class.clone(), c.requests_per_s)).collect();
    assert_eq!(priced(&runtime), measured);
    let later = Runtime::builder().with_task(task_of(&path)).build().unwrap();
    assert_eq!(priced(&later), measured);
    drop(later);

    let class = ImageSizeClass { name: "500x375".into(), photos: vec![bench_image("medium.jpg").into()] };
    let refused = runtime.measure_image_capacity("tensors", "tensors", &class, &options, &mut |_, _| {});
    assert!(matches!(refused, Err(Error::Precondition(ref m)) if m.contains("takes no images")), "{refused:?}");
    assert_eq!(runtime.image_profile("tensors", "tensors").unwrap(), None);
    assert!(runtime.measure_image_capacity("capacity", "nope", &class, &options, &mut |_, _| {}).is_err());
}

/// tritonclient sends JPEG bytes as BYTES over gRPC and HTTP and gets classification
/// labels from the task and each variant; empty, truncated, corrupt and unsupported
/// files and decompression bombs are refused as invalid (gRPC `INVALID_ARGUMENT`, HTTP
/// 400) while other clients' good requests all succeed.
#[test]
fn tritonclient_sends_jpeg_bytes_and_bad_files_are_refused_while_good_ones_succeed() {
    use modelless::kserve::ServerConfig;

    let labels = labels();
    let runtime = std::sync::Arc::new(Runtime::builder().with_task(image_task()).build().unwrap());
    let tokio = tokio::runtime::Runtime::new().unwrap();
    let server = tokio.block_on(runtime.clone().serve(&ServerConfig::loopback())).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let images = images_dir();
    let manifest_text = std::fs::read_to_string(images.join("manifest.json")).unwrap();
    let bad: serde_json::Map<String, Value> = serde_json::from_str::<Value>(&manifest_text).unwrap()["bad"]
        .as_array()
        .unwrap()
        .iter()
        .map(|name| {
            let name = name.as_str().unwrap();
            (name.to_string(), Value::from(images.join("bad").join(name).to_str().unwrap()))
        })
        .collect();
    let mut models = vec!["classify-photo".to_string()];
    models.extend(manifest()["variants"].as_array().unwrap().iter().map(|v| v["name"].as_str().unwrap().to_string()));
    let plan = serde_json::json!({
        "grpc": server.grpc_address().to_string(),
        "http": server.http_address().to_string(),
        "models": models,
        "input": "image",
        "image_file": images.join("bench/medium.jpg"),
        "output": "logits",
        "classes": 3,
        "bad": bad,
    });
    let (plan_path, report_path) = (dir.path().join("plan.json"), dir.path().join("report.json"));
    std::fs::write(&plan_path, plan.to_string()).unwrap();
    let python = crate::common::crate_dir().join("../.modelless/venv/bin/python");
    let script = crate::common::crate_dir().join("tests/image_client.py");
    let run = std::process::Command::new(&python).arg(&script).arg(&plan_path).arg(&report_path).output().unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report_path).unwrap()).unwrap();
    for protocol in ["grpc", "http"] {
        let report = &report[protocol];
        assert_eq!(report["datatype"], "BYTES", "{protocol}: the metadata presents the image input as BYTES");
        for model in &models {
            let answer = &report["answers"][model];
            let first = answer["classes"][0].as_str().unwrap();
            let index: usize = first.split(':').nth(1).unwrap().parse().unwrap();
            assert!(CATS.contains(&index) && first.ends_with(&labels[index]), "{protocol} {model}: {answer}");
            if model != "classify-photo" {
                assert_eq!(answer["variant"], *model, "{protocol}");
            }
        }
        let invalid = if protocol == "grpc" { "StatusCode.INVALID_ARGUMENT" } else { "400" };
        for (file, refused) in report["refused"].as_object().unwrap() {
            assert_eq!(refused["status"], invalid, "{protocol} {file}: {refused}");
            eprintln!("{protocol} {file}: {}", refused["message"]);
        }
        let (sent, failed) = (report["good"]["sent"].as_u64().unwrap(), report["good"]["failed"].as_u64().unwrap());
        assert!(sent > 0 && failed == 0, "{protocol}: {failed} of {sent} good requests failed beside the bad ones");
    }
    let metrics = runtime.metrics_text();
    let decoded = metrics
        .lines()
        .find(|l| l.starts_with(r#"modelless_inference_decode_duration_seconds_count{task="classify-photo""#))
        .unwrap_or_else(|| panic!("no decode histogram:\n{metrics}"));
    let count: f64 = decoded.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(count >= 8.0, "decodes counted after traffic: {decoded}");
    tokio.block_on(server.shutdown());
}

/// `examples/images.toml`, loaded as an application loads it, declares no signature, so
/// the task takes its first variant's; that one resizes photos to 224, the others to
/// 240 and 260, so the task leaves height and width open and every variant fits it. A
/// policy switches the task to Lite2 and `switch_variant` to Lite1 and back to Lite0;
/// each serves a photo of a cat and says so in its answer.
#[test]
fn the_image_example_switches_among_its_three_variants_with_no_signature_declared() {
    let config = RuntimeConfig::from_file(crate_dir().join("../examples/images.toml")).unwrap();
    let task = &config.tasks[0];
    assert!(task.signature.is_none(), "the example is meant to declare none");
    let name = task.name.clone();
    let runtime = Runtime::builder().with_config(config).build().unwrap();
    let signature = runtime.task_metadata(&name).unwrap();
    let output = signature.outputs[0].name.clone();
    let cat = photo("chelsea.png");
    let serve = |expected: &str| {
        let answer = runtime.infer_task_blocking(&name, Inputs::image(cat.clone()), Slo::default()).unwrap();
        assert_eq!(&*answer.model, expected, "the variant that answered");
        let best = &answer.classes(&output, 1).unwrap()[0][0];
        assert!(CATS.contains(&best.index), "{expected}: {best:?}");
    };
    serve("efficientnet-lite0");

    runtime.switch_variant(&name, "efficientnet-lite1").unwrap();
    serve("efficientnet-lite1");

    // The schedule policy with one variant asks for it on every tick.
    let mut policy = PolicyConfig::new(policy_module("schedule"));
    policy.parameters = Some(serde_json::json!({"variants": ["efficientnet-lite2"], "period_ms": 1000}));
    policy.tick_ms = 50;
    runtime.start_policy(policy).unwrap();
    // Loading and warming Lite2 takes seconds on a busy machine; the bound only ends a
    // test that would otherwise hang.
    let started = Instant::now();
    while runtime.task_status(&name).unwrap().active != "efficientnet-lite2" {
        let status = runtime.task_status(&name).unwrap();
        assert!(started.elapsed() < Duration::from_secs(120), "the policy's switch did not land: {status:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    serve("efficientnet-lite2");
    runtime.stop_policy();

    runtime.switch_variant(&name, "efficientnet-lite0").unwrap();
    serve("efficientnet-lite0");
    assert_eq!(signature.inputs[0].shape, [None, Some(3), None, None], "height and width open");
}
