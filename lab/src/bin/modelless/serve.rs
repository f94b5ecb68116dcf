//! `modelless serve`: the runtime of a config behind KServe V2 endpoints until
//! interrupted (Ctrl-C or SIGTERM), then a graceful stop.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use modelless::kserve::{ModelControlMode, ServerConfig};
use modelless::{Runtime, RuntimeBuilder, RuntimeConfig};

#[derive(clap::Args)]
pub struct Args {
    /// The runtime's TOML config; its `[server]` section sets the endpoints.
    #[arg(long)]
    config: PathBuf,
    /// gRPC address, overriding the config (e.g. 0.0.0.0:8001).
    #[arg(long)]
    grpc: Option<SocketAddr>,
    /// HTTP/REST and metrics address, overriding the config (e.g. 0.0.0.0:8000).
    #[arg(long)]
    http: Option<SocketAddr>,
    /// Folder of model files repository calls may load, overriding the config.
    #[arg(long)]
    model_repository: Option<PathBuf>,
    /// Whether repository calls may load and unload models (`none`, the default, or
    /// `explicit`), overriding the config; as Triton's --model-control-mode.
    #[arg(long, value_parser = parse_mode)]
    model_control_mode: Option<ModelControlMode>,
    /// File of the bearer token repository load and unload must present in explicit
    /// mode, overriding the config.
    #[arg(long)]
    admin_token_file: Option<PathBuf>,
    /// Let explicit model control run without an admin token (anyone who reaches the
    /// port may load and unload models).
    #[arg(long)]
    insecure_model_control: bool,
    /// Export every request's span, with a child per stage, over OTLP/gRPC to this
    /// collector (e.g. http://127.0.0.1:4317); a caller's W3C `traceparent` is
    /// honoured, so its trace continues inside the server.
    #[arg(long, value_name = "URL")]
    pub otlp_endpoint: Option<String>,
}

fn parse_mode(mode: &str) -> Result<ModelControlMode, String> {
    match mode {
        "none" => Ok(ModelControlMode::None),
        "explicit" => Ok(ModelControlMode::Explicit),
        other => Err(format!("`{other}` is not a model control mode: none or explicit")),
    }
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let config = RuntimeConfig::from_file(&args.config)?;
    let mut server = endpoints(&config, args.grpc, args.http);
    if let Some(root) = args.model_repository {
        server.model_repository = Some(root);
    }
    server.model_control_mode = args.model_control_mode.unwrap_or(server.model_control_mode);
    server.admin_token_file = args.admin_token_file.or(server.admin_token_file);
    server.insecure_model_control |= args.insecure_model_control;
    if server.model_repository.is_some() && server.model_control_mode == ModelControlMode::None {
        eprintln!("note: model_control_mode is none: repository load and unload calls are refused");
    }
    eprintln!("loading {} ...", args.config.display());
    let runtime = Arc::new(RuntimeBuilder::default().with_config(config).build()?);
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(serve(runtime, server))
}

/// The config's `[server]` (or the defaults), its addresses overridden where given.
pub fn endpoints(config: &RuntimeConfig, grpc: Option<SocketAddr>, http: Option<SocketAddr>) -> ServerConfig {
    let mut server = config.server.clone().unwrap_or_default();
    server.grpc_address = grpc.unwrap_or(server.grpc_address);
    server.http_address = http.unwrap_or(server.http_address);
    server
}

async fn serve(runtime: Arc<Runtime>, config: ServerConfig) -> anyhow::Result<()> {
    let server = runtime.clone().serve(&config).await.context("starting the endpoints")?;
    eprintln!(
        "serving tasks [{}], pipelines [{}] and models [{}]: gRPC on {}, HTTP and /metrics on {}",
        runtime.tasks().join(", "),
        runtime.pipelines().join(", "),
        runtime.models().join(", "),
        server.grpc_address(),
        server.http_address()
    );
    modelless::kserve::shutdown_signal().await;
    eprintln!("stopping: finishing the requests under way ...");
    server.shutdown().await;
    runtime.stop_policy();
    eprintln!("stopped");
    Ok(())
}
