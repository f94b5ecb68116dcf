//! `deploy/`: the Kubernetes and KServe manifests validate offline (deploy/validate.py:
//! Kubernetes' JSON schemas, strict, and KServe's API types), a broken one is refused
//! naming what is wrong, and the manifests agree with the config baked into the image.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use modelless::RuntimeConfig;

use crate::common::crate_dir;

fn deploy_dir() -> PathBuf {
    crate_dir().join("../deploy")
}

fn python() -> PathBuf {
    let python = crate_dir().join("../.modelless/deploy-venv/bin/python");
    assert!(python.is_file(), "no manifest validator at {}: run scripts/setup.sh (make test does)", python.display());
    python
}

fn validate(files: &[PathBuf]) -> Output {
    Command::new(python()).arg(deploy_dir().join("validate.py")).args(files).output().unwrap()
}

fn manifests() -> Vec<PathBuf> {
    ["kubernetes/modelless.yaml", "kserve/serving-runtime.yaml", "kserve/inference-service.yaml"]
        .iter()
        .map(|f| deploy_dir().join(f))
        .collect()
}

/// The resources of a YAML file, as JSON.
fn resources(file: &Path) -> Vec<serde_json::Value> {
    let script = "import json, sys, yaml; print(json.dumps([r for r in yaml.safe_load_all(open(sys.argv[1])) if r]))";
    let output = Command::new(python()).args(["-c", script]).arg(file).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).unwrap()
}

fn of_kind<'a>(resources: &'a [serde_json::Value], kind: &str) -> &'a serde_json::Value {
    resources.iter().find(|r| r["kind"] == kind).unwrap_or_else(|| panic!("no {kind}"))
}

#[test]
fn every_manifest_validates_against_the_kubernetes_schemas_and_kserve_s_types() {
    let output = validate(&manifests());
    let report = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{report}{}", String::from_utf8_lossy(&output.stderr));
    for kind in ["Deployment", "Service", "PodDisruptionBudget"] {
        assert!(report.contains(&format!("{kind} modelless: valid (Kubernetes")), "{report}");
    }
    assert!(report.contains("ServingRuntime modelless: valid (KServe API types)"), "{report}");
    assert!(report.contains("InferenceService classify-image: valid (KServe API types)"), "{report}");
}

#[test]
fn a_broken_manifest_is_refused_naming_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let broken = |name: &str, from: &str, edit: &dyn Fn(String) -> String| {
        let text = std::fs::read_to_string(deploy_dir().join(from)).unwrap();
        let edited = edit(text.clone());
        assert_ne!(edited, text, "{name}: the edit applies");
        let path = dir.path().join(name);
        std::fs::write(&path, edited).unwrap();
        path
    };
    let cases = [
        (
            broken("typo.yaml", "kubernetes/modelless.yaml", &|t| t.replace("readinessProbe:", "readinesProbe:")),
            "'readinesProbe' was unexpected",
        ),
        (
            broken("runtime-typo.yaml", "kserve/inference-service.yaml", &|t| {
                t.replace("runtime: modelless", "runtme: modelless")
            }),
            "V1beta1ModelSpec has no field `runtme`",
        ),
        (
            broken("wrong-type.yaml", "kserve/serving-runtime.yaml", &|t| {
                t.replace("multiModel: false", "multiModel: \"no\"")
            }),
            "spec.multiModel: expected bool",
        ),
        (
            broken("no-name.yaml", "kserve/serving-runtime.yaml", &|t| {
                t.replace("- name: kserve-container\n      image:", "- image:")
            }),
            "spec.containers[0]: V1Container",
        ),
        (
            broken("not-yaml.yaml", "kserve/serving-runtime.yaml", &|t| t.replace("spec:", "spec: [")),
            "not readable YAML",
        ),
    ];
    for (file, reason) in cases {
        let output = validate(std::slice::from_ref(&file));
        let report = String::from_utf8_lossy(&output.stdout);
        assert_eq!(output.status.code(), Some(1), "{}: {report}", file.display());
        assert!(
            report.contains("INVALID") && report.contains(reason),
            "{}: `{reason}` not in\n{report}",
            file.display()
        );
    }
}

#[test]
fn the_manifests_agree_with_the_config_baked_into_the_image() {
    let config_text = std::fs::read_to_string(deploy_dir().join("models.toml")).unwrap();
    let config = RuntimeConfig::from_toml(&config_text, &deploy_dir()).unwrap();
    let drain_s = config.server.as_ref().map(|s| s.drain_timeout_s).unwrap_or_else(|| panic!("no [server] section"));
    assert!(config.tasks[0].variants.iter().all(|v| v.preload), "ready must mean every variant warm");

    let plain = resources(&deploy_dir().join("kubernetes/modelless.yaml"));
    let pod = &of_kind(&plain, "Deployment")["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let pre_stop_s = container["lifecycle"]["preStop"]["sleep"]["seconds"].as_u64().unwrap();
    let grace_s = pod["terminationGracePeriodSeconds"].as_u64().unwrap();
    assert!(grace_s > pre_stop_s + drain_s, "grace {grace_s} s ≤ preStop {pre_stop_s} s + drain {drain_s} s");
    let args: Vec<&str> = container["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    assert_eq!(args[..3], ["serve", "--config", "/models/config.toml"]);
    let ports: Vec<u64> =
        container["ports"].as_array().unwrap().iter().map(|p| p["containerPort"].as_u64().unwrap()).collect();
    for (flag, port) in [("--http", 8080), ("--grpc", 9000)] {
        let at = args.iter().position(|a| *a == flag).unwrap_or_else(|| panic!("{flag} missing"));
        assert_eq!(args[at + 1], format!("0.0.0.0:{port}"));
        assert!(ports.contains(&port), "{port} not declared");
    }
    for probe in ["readinessProbe", "startupProbe"] {
        assert_eq!(container[probe]["httpGet"]["path"], "/v2/health/ready");
    }
    assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/v2/health/live");

    let isvc = resources(&deploy_dir().join("kserve/inference-service.yaml"));
    let predictor = &of_kind(&isvc, "InferenceService")["spec"]["predictor"];
    assert!(predictor["terminationGracePeriodSeconds"].as_u64().unwrap() > drain_s);
    let runtime = resources(&deploy_dir().join("kserve/serving-runtime.yaml"));
    let runtime = of_kind(&runtime, "ServingRuntime");
    assert_eq!(predictor["model"]["runtime"], runtime["metadata"]["name"]);
    let formats: Vec<&serde_json::Value> =
        runtime["spec"]["supportedModelFormats"].as_array().unwrap().iter().map(|f| &f["name"]).collect();
    assert!(formats.contains(&&predictor["model"]["modelFormat"]["name"]));
}
