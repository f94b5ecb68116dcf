//! The `read-text` pipeline served over KServe V2 and read by tritonclient
//! (`tests/ocr_client.py`), gRPC and HTTP, on PP-OCRv4's real models.

use std::process::Command;
use std::sync::Arc;

use modelless::kserve::ServerConfig;
use modelless::ocr::ReadTextConfig;
use modelless::{Inputs, Slo};
use serde_json::Value;

use crate::common::crate_dir;
use crate::ocr::{documents, page, runtime, texts};

#[test]
fn tritonclient_reads_a_page_through_the_pipeline_over_grpc_and_http() {
    let runtime = Arc::new(runtime(ReadTextConfig::default()));
    let (bytes, labels) = page(1);
    let in_process =
        texts(&runtime.infer_pipeline_blocking("read-text", Inputs::image(bytes), Slo::default()).unwrap());
    let tokio = tokio::runtime::Runtime::new().unwrap();
    let server = tokio.block_on(runtime.clone().serve(&ServerConfig::loopback())).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("not-a-page.png");
    std::fs::write(&bad, b"\x89PNG\r\n\x1a\n not really").unwrap();
    let plan = serde_json::json!({
        "grpc": server.grpc_address().to_string(),
        "http": server.http_address().to_string(),
        "pipeline": "read-text",
        "page_file": documents().join(&labels.file),
        "bad_file": bad,
    });
    let (plan_path, report_path) = (dir.path().join("plan.json"), dir.path().join("report.json"));
    std::fs::write(&plan_path, plan.to_string()).unwrap();
    let python = crate_dir().join("../.modelless/venv/bin/python");
    let script = crate_dir().join("tests/ocr_client.py");
    let run = Command::new(&python).arg(&script).arg(&plan_path).arg(&report_path).output().unwrap();
    tokio.block_on(server.shutdown());
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report_path).unwrap()).unwrap();
    let n = in_process.len();
    for protocol in ["grpc", "http"] {
        let report = &report[protocol];
        assert_eq!(report["ready"], true, "{protocol}");
        let specs = |which: &str| -> Vec<(String, String)> {
            report[which]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| (s["name"].as_str().unwrap().to_string(), s["datatype"].as_str().unwrap().to_string()))
                .collect()
        };
        assert_eq!(specs("inputs"), [("image".into(), "BYTES".into())], "{protocol}");
        let outputs = specs("outputs");
        assert!(outputs.contains(&("text".into(), "BYTES".into())), "{protocol}: {outputs:?}");
        assert!(outputs.contains(&("boxes".into(), "FP32".into())), "{protocol}: {outputs:?}");
        let read: Vec<String> = serde_json::from_value(report["texts"].clone()).unwrap();
        assert_eq!(read, in_process, "{protocol}: the same lines as in process");
        assert_eq!(report["boxes"], serde_json::json!([n, 4, 2]), "{protocol}");
        assert_eq!(report["scores"], serde_json::json!([n]), "{protocol}");
        let parameters = &report["parameters"];
        assert_eq!(parameters["stage_detect-text_items"], 1, "{protocol}: {parameters}");
        assert_eq!(parameters["stage_recognize-text_items"], n, "{protocol}: {parameters}");
        assert!(parameters["stage_recognize-text_us"].as_i64().unwrap() > 0, "{protocol}: {parameters}");
        assert_eq!(parameters["stage_detect-text_variant"], "det-736", "{protocol}: {parameters}");
        let refusal = report["refusal"].as_str().unwrap_or_else(|| panic!("{protocol}: a bad page was answered"));
        assert!(refusal.contains("decode"), "{protocol}: {refusal}");
        // Listed in the repository index as Triton lists its ensembles.
        let listed = report["index"].as_array().unwrap().iter().find(|e| e["name"] == "read-text").cloned();
        let listed = listed.unwrap_or_else(|| panic!("{protocol}: read-text not in the index {}", report["index"]));
        assert_eq!((&listed["version"], &listed["state"]), (&"1".into(), &"READY".into()), "{protocol}");
    }
    let metrics = report["metrics"].as_str().unwrap();
    let items = r#"modelless_pipeline_stage_items_sum{pipeline="read-text",stage="recognize-text"}"#;
    let line = metrics.lines().find(|l| l.starts_with(items)).unwrap_or_else(|| panic!("no {items}:\n{metrics}"));
    let sum: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(sum >= 3.0 * n as f64, "three pages' lines, in process and over both protocols: {line}");
    let refused = r#"modelless_pipeline_requests{outcome="invalid_input",pipeline="read-text"}"#;
    let line = metrics.lines().find(|l| l.starts_with(refused)).unwrap_or_else(|| panic!("no {refused}:\n{metrics}"));
    let count: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(count >= 2.0, "the bad page, refused over both protocols: {line}");
}
