//! Images through the load generator: photos sent in process and over gRPC, and
//! every answer's stages in the summary and plot.

use modelless::Runtime;

use crate::common::images_dir;
use crate::efficientnet::image_task;

/// `loadgen`'s closed loop sends photos to the image task in process and over gRPC (a
/// file, and JPEGs it generates), and every answer tells where its time went, decode
/// included; fed tensors instead, none decodes. The summary and plot carry the
/// breakdown; over gRPC, a task that takes images is refused a load without any.
#[test]
fn loadgen_sends_photos_in_process_and_over_grpc_and_reports_the_stages() {
    use modelless::kserve::ServerConfig;
    use modelless_lab::load::{Grpc, ImageSet, InProcess, LoadError, LoadSpec, Outcome, RunResult, run_closed};

    let runtime = std::sync::Arc::new(Runtime::builder().with_task(image_task()).build().unwrap());
    let tokio = tokio::runtime::Runtime::new().unwrap();
    let server = tokio.block_on(runtime.clone().serve(&ServerConfig::loopback())).unwrap();
    let spec: LoadSpec = toml::from_str(
        "[[tasks]]\ntask = \"classify-photo\"\nslo_ms = 60000\npattern = { kind = \"constant\", rate = 1, duration_s = 1 }",
    )
    .unwrap();
    let run = |target: std::sync::Arc<dyn modelless_lab::load::Target>| -> RunResult {
        tokio.block_on(run_closed(target, &spec, 4, &mut |_| {})).unwrap()
    };
    let decoded = |result: &RunResult, how: &str| {
        assert!(result.records.len() >= 4, "{how}: {} answers", result.records.len());
        for record in &result.records {
            assert_eq!(record.status, Outcome::Served, "{how}: {record:?}");
            let stages = record.stages.unwrap_or_else(|| panic!("{how}: no stages in {record:?}"));
            assert!(stages.decode_ms > 0.0 && stages.compute_ms > 0.0 && stages.total_ms > 0.0, "{how}: {stages:?}");
        }
        let breakdown = result.summaries()[0].stages.clone().unwrap();
        assert!(breakdown.decode_ms > 0.0 && breakdown.answers == result.records.len() as u64, "{how}");
    };

    let photo = ImageSet::from_path(&images_dir().join("bench/medium.jpg")).unwrap();
    let mut in_process = InProcess::new(runtime.clone(), &spec).unwrap();
    assert_eq!(in_process.with_images(&photo), vec!["classify-photo".to_string()]);
    let fed_photos = run(std::sync::Arc::new(in_process));
    decoded(&fed_photos, "in process");
    let dir = tempfile::tempdir().unwrap();
    fed_photos.write(dir.path(), "photos", false).unwrap();
    assert!(std::fs::read_to_string(dir.path().join("summary.md")).unwrap().contains("Where the time went"));
    assert!(std::fs::read_to_string(dir.path().join("classify-photo-stages.svg")).unwrap().contains("<title>decode"));

    let fed_tensors = run(std::sync::Arc::new(InProcess::new(runtime.clone(), &spec).unwrap()));
    for record in &fed_tensors.records {
        assert!(record.status == Outcome::Served && record.stages.unwrap().decode_ms == 0.0, "fed tensors: {record:?}");
    }

    let url = format!("http://{}", server.grpc_address());
    let generated = ImageSet::generated(&[(500, 375), (640, 480)], 3).unwrap();
    let grpc = tokio.block_on(Grpc::connect(&url, &spec, &Default::default(), Some(&generated))).unwrap();
    decoded(&run(std::sync::Arc::new(grpc)), "over gRPC");
    let without = tokio.block_on(Grpc::connect(&url, &spec, &Default::default(), None));
    assert!(matches!(without, Err(LoadError::Target(m)) if m.contains("takes encoded images")));
    tokio.block_on(server.shutdown());
}
