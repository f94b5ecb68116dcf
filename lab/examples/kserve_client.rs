//! A KServe V2 gRPC client in Rust, talking to modelless the way it would talk to
//! Triton: health, metadata, a model-less request whose parameters are its SLO, and
//! the error a wrong request gets.
//!
//! `cargo run --release -p modelless-lab --example kserve_client` serves
//! `examples/classify.toml` on loopback from this process and talks to it;
//! `... --example kserve_client -- http://HOST:8001` talks to a running server (for
//! example `modelless serve --config examples/classify.toml`).

use std::collections::HashMap;
use std::sync::Arc;

use anyhow::Context;
use modelless::kserve::ServerConfig;
use modelless::{Runtime, Tensor};
use modelless_runtime::kserve::proto::grpc_inference_service_client::GrpcInferenceServiceClient;
use modelless_runtime::kserve::proto::infer_parameter::ParameterChoice;
use modelless_runtime::kserve::proto::model_infer_request::InferInputTensor;
use modelless_runtime::kserve::proto::{
    InferParameter, ModelInferRequest, ModelMetadataRequest, ServerMetadataRequest, ServerReadyRequest,
};
use modelless_runtime::kserve::tensors;

const TASK: &str = "classify-image";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut local = None;
    let url = match std::env::args().nth(1) {
        Some(url) => url,
        None => {
            let config = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/classify.toml");
            let runtime = Arc::new(Runtime::from_config_file(config).context("run scripts/setup/base.sh first")?);
            let server = runtime.serve(&ServerConfig::loopback()).await?;
            let url = format!("http://{}", server.grpc_address());
            local = Some(server);
            url
        }
    };
    let mut client = GrpcInferenceServiceClient::connect(url.clone()).await?;
    let ready = client.server_ready(ServerReadyRequest {}).await?.into_inner().ready;
    let server = client.server_metadata(ServerMetadataRequest {}).await?.into_inner();
    println!("{url}: {} {} ready={ready}, extensions {:?}", server.name, server.version, server.extensions);

    let model = client.model_metadata(ModelMetadataRequest { name: TASK.into(), version: String::new() }).await?;
    let model = model.into_inner();
    for input in &model.inputs {
        println!("{TASK} ({}): input `{}` {} {:?}", model.platform, input.name, input.datatype, input.shape);
    }

    let image = Tensor::full([1, 3, 224, 224], 0.5f32);
    for (latency_ms, min_accuracy) in [(50.0, 60.0), (200.0, 74.0)] {
        let request = ModelInferRequest {
            model_name: TASK.into(),
            parameters: HashMap::from([param("latency_ms", latency_ms), param("min_accuracy", min_accuracy)]),
            inputs: vec![InferInputTensor {
                name: model.inputs[0].name.clone(),
                datatype: "FP32".into(),
                shape: tensors::shape_of(&image),
                ..Default::default()
            }],
            raw_input_contents: vec![tensors::to_raw(&image).into()],
            ..Default::default()
        };
        let asked = format!("latency_ms={latency_ms} min_accuracy={min_accuracy}");
        // Only loaded variants serve: asking more accuracy than they have is refused.
        let answer = match client.model_infer(request).await {
            Ok(answer) => answer.into_inner(),
            Err(status) => {
                println!("{asked}: {:?}: {}", status.code(), status.message());
                continue;
            }
        };
        let logits: Vec<f32> = answer.raw_output_contents[0]
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        let best = (0..logits.len()).max_by(|&a, &b| logits[a].total_cmp(&logits[b])).unwrap_or(0);
        println!(
            "{asked}: served by {} v{}, class {best} ({:.3})",
            answer.model_name, answer.model_version, logits[best]
        );
    }

    let wrong = ModelInferRequest { model_name: "no-such-task".into(), ..Default::default() };
    let status = client.model_infer(wrong).await.err().context("an unknown model was served")?;
    println!("unknown model: {:?}: {}", status.code(), status.message());

    if let Some(server) = local {
        server.shutdown().await;
    }
    Ok(())
}

fn param(name: &str, value: f64) -> (String, InferParameter) {
    (name.to_string(), InferParameter { parameter_choice: Some(ParameterChoice::DoubleParam(value)) })
}
