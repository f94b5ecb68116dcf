//! `deploy/`: the Kubernetes, KEDA and KServe manifests validate offline
//! (deploy/validate.py: Kubernetes' JSON schemas, strict; KServe's API types; KEDA's
//! ScaledObject spec; the Prometheus adapter's rules), a broken one is refused naming
//! what is wrong, the manifests agree with the config baked into the image, and every
//! autoscaler scales the Deployment that exists on the metric the replicas export.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use modelless::RuntimeConfig;

use crate::common::crate_dir;

fn deploy_dir() -> PathBuf {
    crate_dir().join("../deploy")
}

fn python() -> PathBuf {
    let python = crate_dir().join("../.modelless/deploy-venv/bin/python");
    assert!(
        python.is_file(),
        "no manifest validator at {}: run scripts/setup/base.sh (make test does)",
        python.display()
    );
    python
}

fn validate(files: &[PathBuf]) -> Output {
    Command::new(python()).arg(deploy_dir().join("validate.py")).args(files).output().unwrap()
}

fn manifests() -> Vec<PathBuf> {
    [
        "kubernetes/modelless.yaml",
        "kubernetes/hpa.yaml",
        "kubernetes/prometheus-adapter.yaml",
        "kubernetes/keda.yaml",
        "kserve/serving-runtime.yaml",
        "kserve/inference-service.yaml",
    ]
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

/// A YAML document given as text (a ConfigMap's file), as JSON.
fn yaml_text(text: &str) -> serde_json::Value {
    let script = "import json, sys, yaml; print(json.dumps(yaml.safe_load(sys.stdin)))";
    let mut child = Command::new(python())
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
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
    for kind in ["Deployment", "Service", "PodDisruptionBudget", "HorizontalPodAutoscaler"] {
        assert!(report.contains(&format!("{kind} modelless: valid (Kubernetes")), "{report}");
    }
    assert!(report.contains("ConfigMap prometheus-adapter: valid (Kubernetes"), "{report}");
    assert!(report.contains("strict; Prometheus adapter rules)"), "{report}");
    assert!(report.contains("ScaledObject modelless: valid (KEDA ScaledObject spec)"), "{report}");
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
        (
            broken("hpa-typo.yaml", "kubernetes/hpa.yaml", &|t| t.replace("averageValue:", "averageValu:")),
            "'averageValu' was unexpected",
        ),
        (
            broken("adapter-typo.yaml", "kubernetes/prometheus-adapter.yaml", &|t| {
                t.replace("seriesQuery:", "seriesQuerry:")
            }),
            "config.yaml.rules[0]: DiscoveryRule has no field `seriesQuerry`",
        ),
        (
            broken("keda-typo.yaml", "kubernetes/keda.yaml", &|t| t.replace("maxReplicaCount:", "maxReplicas:")),
            "ScaledObject.spec: ScaledObjectSpec has no field `maxReplicas`",
        ),
        (
            broken("keda-no-threshold.yaml", "kubernetes/keda.yaml", &|t| {
                t.replace("        threshold: \"0.7\"\n", "")
            }),
            "triggers[0].metadata: the prometheus trigger needs `threshold`",
        ),
        (
            broken("keda-number.yaml", "kubernetes/keda.yaml", &|t| t.replace("threshold: \"0.7\"", "threshold: 0.7")),
            "triggers[0].metadata.threshold: expected str",
        ),
        (
            broken("keda-unknown-key.yaml", "kubernetes/keda.yaml", &|t| {
                t.replace("ignoreNullValues:", "ignoreNullValue:")
            }),
            "the prometheus trigger has no metadata `ignoreNullValue`",
        ),
        (
            broken("keda-behaviour.yaml", "kubernetes/keda.yaml", &|t| {
                t.replacen("periodSeconds: 15", "periodSeconds: \"15\"", 1)
            }),
            "behavior.scaleUp.policies[0].periodSeconds: '15' is not of type 'integer'",
        ),
        (
            broken("isvc-metric-type.yaml", "kserve/inference-service.yaml", &|t| {
                t.replace("type: External", "type: Externl")
            }),
            "autoScaling.metrics[0].type: 'Externl' is not one of",
        ),
        (
            broken("isvc-quantity.yaml", "kserve/inference-service.yaml", &|t| {
                t.replace("value: \"0.7\"", "value: \"0.7x\"")
            }),
            "external.target.value: expected a quantity",
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
    assert_eq!(args[..3], ["serve", "--config", "/etc/modelless/config.toml"]);

    // The Deployment's config is the image's, with a policy followed from a registry
    // through the pull secret it mounts, cached on a volume it mounts.
    let mounted = of_kind(&plain, "ConfigMap")["data"]["config.toml"].as_str().unwrap();
    let deployed = RuntimeConfig::from_toml(mounted, Path::new("/etc/modelless")).unwrap();
    assert_eq!(deployed.server.as_ref().map(|s| s.drain_timeout_s), Some(drain_s));
    assert_eq!(deployed.onnxruntime.intra_op_threads, config.onnxruntime.intra_op_threads);
    let names = |c: &RuntimeConfig| -> Vec<(String, bool)> {
        c.tasks[0].variants.iter().map(|v| (v.path.file_name().unwrap().to_string_lossy().into(), v.preload)).collect()
    };
    assert_eq!(names(&deployed), names(&config), "the variants of the image's config");
    let module = deployed.policy.as_ref().unwrap().module.to_string_lossy().to_string();
    assert!(module.starts_with("oci://") && module.contains(':'), "{module} is not a followed tag");
    let mount_of = |volume: &str| -> String {
        let mounts = container["volumeMounts"].as_array().unwrap();
        let mount = mounts.iter().find(|m| m["name"] == volume).unwrap_or_else(|| panic!("{volume} not mounted"));
        mount["mountPath"].as_str().unwrap().to_string()
    };
    let volume = |name: &str| -> &serde_json::Value {
        let volumes = pod["volumes"].as_array().unwrap();
        volumes.iter().find(|v| v["name"] == name).unwrap_or_else(|| panic!("no volume {name}"))
    };
    assert_eq!(volume("config")["configMap"]["name"], of_kind(&plain, "ConfigMap")["metadata"]["name"]);
    let docker_config = deployed.sources.docker_config.as_ref().unwrap();
    assert_eq!(docker_config.parent().unwrap(), Path::new(&mount_of("registry")));
    let secret = &volume("registry")["secret"];
    assert_eq!(secret["items"][0]["key"], ".dockerconfigjson", "a docker-registry pull secret");
    assert_eq!(secret["items"][0]["path"].as_str().unwrap(), docker_config.file_name().unwrap().to_str().unwrap());
    assert!(deployed.sources.cache.as_ref().unwrap().starts_with(mount_of("cache")));
    assert!(volume("cache")["emptyDir"].is_object());
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

/// The one metric every autoscaler reads: what each replica exports, per task, of its
/// demand against what it can serve within the task's SLO (runtime's `/metrics`).
const DEMAND_RATIO: &str = "modelless_task_demand_ratio";

/// The target's quantity ("0.7", "700m") as a number.
fn quantity(value: &serde_json::Value) -> f64 {
    let text = value.as_str().map_or_else(|| value.to_string(), str::to_string);
    match text.strip_suffix('m') {
        Some(milli) => milli.parse::<f64>().unwrap() / 1000.0,
        None => text.parse().unwrap(),
    }
}

/// That a PromQL query sums, over the pods whose name starts `prefix` (a Deployment's
/// pods: `prefix` then two generated parts), the busiest task of each.
fn sums_the_busiest_task_per_pod(query: &str, prefix: &str) {
    assert!(query.starts_with("sum(max by (pod) (") && query.contains(DEMAND_RATIO), "{query}");
    assert!(query.contains(&format!("pod=~\"{prefix}-[a-z0-9]+-[a-z0-9]+\"")), "{prefix}'s pods in {query}");
}

#[test]
fn every_autoscaler_scales_the_deployment_on_the_demand_ratio_the_replicas_export() {
    let plain = resources(&deploy_dir().join("kubernetes/modelless.yaml"));
    let deployment = of_kind(&plain, "Deployment");
    let name = deployment["metadata"]["name"].as_str().unwrap();
    let target = serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": name});

    // The HPA reads the custom metric that the adapter's rule makes of the gauge.
    let hpa = resources(&deploy_dir().join("kubernetes/hpa.yaml"));
    let hpa = &of_kind(&hpa, "HorizontalPodAutoscaler")["spec"];
    assert_eq!(hpa["scaleTargetRef"], target);
    let metric = &hpa["metrics"][0];
    assert_eq!(hpa["metrics"].as_array().unwrap().len(), 1);
    assert_eq!(metric["type"], "Pods");
    assert_eq!(metric["pods"]["metric"]["name"], DEMAND_RATIO);
    assert_eq!(metric["pods"]["target"]["type"], "AverageValue");
    assert_eq!(quantity(&metric["pods"]["target"]["averageValue"]), 0.7);
    let (low, high) = (hpa["minReplicas"].as_u64().unwrap(), hpa["maxReplicas"].as_u64().unwrap());
    assert!(1 <= low && low < high, "{low}..{high} replicas");
    // Kubernetes' default scale-up, written out.
    let up = &hpa["behavior"]["scaleUp"];
    assert_eq!(up["stabilizationWindowSeconds"], 0);
    assert_eq!(up["selectPolicy"], "Max");
    let policies: Vec<(&str, u64, u64)> = up["policies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["type"].as_str().unwrap(), p["value"].as_u64().unwrap(), p["periodSeconds"].as_u64().unwrap()))
        .collect();
    assert_eq!(policies, [("Pods", 4, 15), ("Percent", 100, 15)]);
    // Down to the most asked for over 60 s, not Kubernetes' 300: with the ratio's
    // surge headroom, the setting the fleet's simulation chose (docs/allocation.md).
    assert_eq!(hpa["behavior"]["scaleDown"]["stabilizationWindowSeconds"], 60);

    let adapter = resources(&deploy_dir().join("kubernetes/prometheus-adapter.yaml"));
    let rules = yaml_text(of_kind(&adapter, "ConfigMap")["data"]["config.yaml"].as_str().unwrap());
    let rule = &rules["rules"][0];
    assert!(rule["seriesQuery"].as_str().unwrap().starts_with(&format!("{DEMAND_RATIO}{{")), "{rule}");
    assert_eq!(rule["name"]["as"], DEMAND_RATIO, "the name the HPA asks for");
    assert_eq!(rule["resources"]["overrides"]["pod"]["resource"], "pod");
    let busiest = rule["metricsQuery"].as_str().unwrap().starts_with("max by (<<.GroupBy>>)");
    assert!(busiest, "the busiest task: {rule}");

    // KEDA's ScaledObject: the same target, bounds, threshold and behaviour.
    let keda = resources(&deploy_dir().join("kubernetes/keda.yaml"));
    let keda = &of_kind(&keda, "ScaledObject")["spec"];
    assert_eq!(keda["scaleTargetRef"], target);
    assert_eq!((keda["minReplicaCount"].as_u64(), keda["maxReplicaCount"].as_u64()), (Some(low), Some(high)));
    assert_eq!(keda["advanced"]["horizontalPodAutoscalerConfig"]["behavior"], hpa["behavior"]);
    let trigger = &keda["triggers"][0];
    assert_eq!(trigger["type"], "prometheus");
    assert_eq!(trigger["metricType"], "AverageValue", "the query's sum, divided by the replicas");
    assert_eq!(quantity(&trigger["metadata"]["threshold"]), 0.7);
    sums_the_busiest_task_per_pod(trigger["metadata"]["query"].as_str().unwrap(), name);

    // KServe makes the predictor's ScaledObject from the same query and target.
    let isvc = resources(&deploy_dir().join("kserve/inference-service.yaml"));
    let isvc = of_kind(&isvc, "InferenceService");
    let annotations = &isvc["metadata"]["annotations"];
    assert_eq!(annotations["serving.kserve.io/deploymentMode"], "RawDeployment");
    assert_eq!(annotations["serving.kserve.io/autoscalerClass"], "keda");
    let predictor = &isvc["spec"]["predictor"];
    assert!(predictor.get("scaleMetric").is_none(), "autoScaling decides, not scaleMetric");
    assert_eq!((predictor["minReplicas"].as_u64(), predictor["maxReplicas"].as_u64()), (Some(low), Some(high)));
    let external = &predictor["autoScaling"]["metrics"][0];
    assert_eq!(external["type"], "External");
    assert_eq!(external["external"]["metric"]["backend"], "prometheus");
    assert_eq!(external["external"]["metric"]["serverAddress"], trigger["metadata"]["serverAddress"]);
    assert_eq!(quantity(&external["external"]["target"]["value"]), 0.7);
    let predictor_deployment = format!("{}-predictor", isvc["metadata"]["name"].as_str().unwrap());
    sums_the_busiest_task_per_pod(external["external"]["metric"]["query"].as_str().unwrap(), &predictor_deployment);
    let windows = &predictor["autoScaling"]["behavior"];
    for way in ["scaleUp", "scaleDown"] {
        assert_eq!(windows[way]["stabilizationWindowSeconds"], hpa["behavior"][way]["stabilizationWindowSeconds"]);
    }

    // Scaled down to its least, the Deployment can still be drained off a node.
    let budget = &of_kind(&plain, "PodDisruptionBudget")["spec"];
    match (budget["maxUnavailable"].as_u64(), budget["minAvailable"].as_u64()) {
        (Some(unavailable), None) => assert!(unavailable >= 1),
        (None, Some(available)) => assert!(available < low, "minAvailable {available} blocks drains at {low}"),
        other => panic!("PodDisruptionBudget: {other:?}"),
    }
    assert_eq!(budget["selector"]["matchLabels"], deployment["spec"]["selector"]["matchLabels"]);
}
