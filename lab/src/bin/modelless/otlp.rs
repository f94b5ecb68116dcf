//! `--otlp-endpoint`: the runtime's request spans exported over OTLP/gRPC, and a
//! caller's W3C `traceparent` honoured, so that a client's trace continues inside the
//! server.

use std::time::Duration;

use anyhow::Context;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::registry::LookupSpan;

/// How long shutting down may wait for the last spans to leave.
const FLUSH_LIMIT: Duration = Duration::from_secs(10);

/// Spans leaving for an OTLP endpoint; [`Exporter::shutdown`] sends what is left.
pub struct Exporter {
    provider: SdkTracerProvider,
    /// Drives the exporter's gRPC connection: its own thread, so that exporting never
    /// takes a serving thread, and it outlives the server until the last spans left.
    runtime: tokio::runtime::Runtime,
}

impl Exporter {
    /// Starts exporting to `endpoint` (e.g. `http://127.0.0.1:4317`) in batches, and
    /// makes W3C trace context the propagator the endpoints read callers' traces with.
    pub fn start(endpoint: &str) -> anyhow::Result<Exporter> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("modelless-otlp")
            .enable_all()
            .build()
            .context("starting the OTLP exporter's thread")?;
        // The gRPC channel is made within the runtime that will drive it.
        let exporter = runtime.block_on(async {
            opentelemetry_otlp::SpanExporter::builder().with_tonic().with_endpoint(endpoint).build()
        });
        let exporter = exporter.with_context(|| format!("an OTLP exporter to {endpoint}"))?;
        let resource = match std::env::var_os("OTEL_SERVICE_NAME") {
            // The sdk reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES itself.
            Some(_) => Resource::builder().build(),
            None => Resource::builder().with_service_name("modelless").build(),
        };
        let provider = SdkTracerProvider::builder().with_batch_exporter(exporter).with_resource(resource).build();
        opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
        Ok(Exporter { provider, runtime })
    }

    /// The layer that hands the runtime's request spans to the exporter: those of
    /// target `modelless::request` only, whatever `RUST_LOG` says.
    pub fn layer<S>(&self) -> impl Layer<S>
    where
        S: tracing::Subscriber + for<'span> LookupSpan<'span>,
    {
        let spans = Targets::new().with_target(modelless_runtime::trace::TARGET, LevelFilter::INFO);
        tracing_opentelemetry::layer()
            .with_tracer(self.provider.tracer("modelless"))
            // Each span says which thread it began on; where in the source is noise, and
            // busy and idle times mean nothing for spans that time a stage unentered.
            .with_location(false)
            .with_tracked_inactivity(false)
            .with_filter(spans)
    }

    /// Sends the spans not yet sent and stops; waits at most [`FLUSH_LIMIT`].
    pub fn shutdown(self) {
        if let Err(e) = self.provider.shutdown_with_timeout(FLUSH_LIMIT) {
            eprintln!("warning: the last spans may not have reached the OTLP endpoint: {e}");
        }
        self.runtime.shutdown_timeout(FLUSH_LIMIT);
    }
}
