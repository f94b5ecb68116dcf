//! KServe V2 / Open Inference Protocol endpoints (feature `grpc`): the gRPC service
//! `inference.GRPCInferenceService` that Triton also serves, with Triton's model
//! repository and statistics extensions, and the same protocol over HTTP/REST with
//! JSON bodies, beside `/metrics` for Prometheus. Existing clients (`tritonclient`,
//! KServe, load balancers' health checks) work unchanged.
//!
//! A name in a request is a task (the request's `latency_ms`, `min_accuracy` and
//! `priority` parameters are its SLO, and the runtime picks the variant), a variant
//! of a task (served directly), or a plain model. Answers say what served them: the
//! variant as `model_name` with its version, and in the `variant` parameter.

mod admin_token;
mod answer;
mod body;
mod config;
mod grpc;
mod http;
mod infer_path;
mod limits;
mod params;
mod repository;
mod server;
mod service;
mod status;
pub mod tensors;
mod tls;
mod trace_context;
mod wire_scan;

/// The protocol's messages, and the client and server stubs tonic generates for it.
#[allow(missing_docs, clippy::all)]
pub mod proto {
    tonic::include_proto!("inference");
}

pub use admin_token::AdminToken;
pub use answer::{
    AnswerTensor, InferAnswer, InferCall, MAX_CLASSIFICATION, ModelDescription, ModelStats, RequestedOutput,
};
pub use config::{ModelControlMode, OverrideLimits, ServerConfig, TlsConfig};
pub use grpc::GrpcEndpoint;
pub use http::router;
pub use infer_path::InferenceRoutes;
pub use limits::{InputBounds, MAX_RANK, RequestLimits};
pub use params::{InferParams, ParamValue};
pub use repository::{Repository, RepositoryEntry, load_config, path_under_root, plain_name};
pub use server::{Server, ServerError};
pub use service::InferenceService;
pub use status::{Code, ServeError};
pub use tensors::Claim;
pub use tls::TlsError;
/// The gRPC library of the endpoints and of the generated client, for building
/// connections (`tonic::transport::Endpoint`).
pub use tonic;
pub use trace_context::RemoteParent;
