//! The `modelless` command line.
//!
//! `cargo run --release -p modelless-lab -- serve --config examples/classify.toml`
//! `cargo run --release -p modelless-lab -- profile examples/classify.toml`
//! `cargo run --release -p modelless-lab -- tune --config examples/classify.toml --task classify-image`

mod fleet;
mod loadgen;
mod otlp;
mod plan;
mod policy;
mod policy_dev;
mod policy_new;
mod policy_test;
mod profile;
mod profile_photos;
mod push;
mod serve;
mod setup;
mod simulate;
mod status;
mod tune;
mod tune_measure;
mod variants;

use clap::{Parser, Subcommand};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// modelless: an embeddable runtime for serving ML models.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve a config's tasks and models over KServe V2: gRPC, HTTP/REST and
    /// Prometheus `/metrics`, with the model repository extension.
    Serve(serve::Args),
    /// Profile every variant (and model) of a config on this machine: warm-up and warm
    /// latency per batch size, the line through them, maximal throughput. Profiles are
    /// stored beside the models and reused while model, device and settings match.
    Profile(profile::Args),
    /// Send open-loop load that follows a pattern or a trace to the runtime of a config
    /// (in process) or to a KServe V2 endpoint; write the request log, timeline,
    /// summary and plots.
    Loadgen(loadgen::Args),
    /// Simulate a load against the profiled variants of a config, steered by a policy
    /// module or the oracle, on one server or several; write what `loadgen` writes.
    Simulate(simulate::Args),
    /// Simulate a trace through a fleet of replicas that Kubernetes scales, under each
    /// scaler in turn (the HPA on the demand ratio or on CPU, KServe's concurrency
    /// target, static peak provisioning); write the table and the plots.
    Fleet(fleet::Args),
    /// What each replica of a fleet runs: its policy's digest, the tag it follows and
    /// how its polls went, the watch of the last policy that went live, and the
    /// variants that follow tags (from each one's `GET /v2/policy`).
    Status(status::Args),
    /// Capacity planning from profiled costs: the fewest devices that finish N items
    /// by a deadline, or the most items a set of devices finishes by it.
    Plan(plan::Args),
    /// Install ONNX Runtime in the per-user directory, where every application that
    /// links modelless finds it: from a Python environment, a file, or PyPI.
    Setup(setup::Args),
    /// Check policy modules.
    #[command(subcommand)]
    Policy(policy::Command),
    /// Search a task's serving settings (batching, instances, threads) for the lowest
    /// latency or the highest throughput here: Bayesian optimisation against random
    /// search, each point measured through the runtime; the best as TOML.
    Tune(tune::Args),
    /// Make variants from the ones a task has (a half-precision copy), measure them
    /// against their original, and add them to the config.
    #[command(subcommand)]
    Variants(variants::Command),
    /// One measurement for `tune`, in its own process.
    #[command(hide = true)]
    TuneMeasure(tune_measure::MeasureArgs),
}

fn main() -> std::process::ExitCode {
    // A missing ONNX Runtime is then fixed by `modelless setup`, which this user has.
    modelless_runtime::backend::onnx_library::advise_as_the_cli();
    match start(Cli::parse()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{}", error_report(&error));
            std::process::ExitCode::FAILURE
        }
    }
}

fn start(cli: Cli) -> anyhow::Result<()> {
    let exporter = match &cli.command {
        Command::Serve(args) => args.otlp_endpoint.as_deref().map(otlp::Exporter::start).transpose()?,
        _ => None,
    };
    init_logging(exporter.as_ref());
    let result = run(cli.command);
    // After serving stopped, so that the last requests' spans leave too.
    if let Some(exporter) = exporter {
        exporter.shutdown();
    }
    result
}

/// An error as its cause chain, a line each: what failed, then why. No backtrace,
/// whatever `RUST_BACKTRACE` says (many Rust users keep it set; it would bury the
/// line that matters under frames of this binary); `MODELLESS_BACKTRACE=1` adds one.
fn error_report(error: &anyhow::Error) -> String {
    let mut lines = vec![format!("Error: {error}")];
    let mut seen = error.to_string();
    for cause in error.chain().skip(1) {
        let text = cause.to_string();
        // A cause whose text its parent's message already ends with says nothing new.
        if !seen.ends_with(&text) {
            lines.push(format!("  caused by: {text}"));
        }
        seen = text;
    }
    if std::env::var_os("MODELLESS_BACKTRACE").is_some_and(|v| v == "1") {
        lines.push(format!("{}", error.backtrace()));
    }
    lines.join("\n")
}

/// The library reports what goes wrong while serving (a variant without a profile, a
/// recording that stopped) as warnings on stderr; `RUST_LOG` sets the level. The
/// request spans go to `exporter`, where there is one.
fn init_logging(exporter: Option<&otlp::Exporter>) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let log = tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_filter(filter);
    tracing_subscriber::registry().with(log).with(exporter.map(otlp::Exporter::layer)).init();
}

fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Serve(args) => serve::run(args),
        Command::Profile(args) => profile::run(args),
        Command::Policy(command) => policy::run(command),
        Command::Loadgen(args) => loadgen::run(args),
        Command::Plan(args) => plan::run(args),
        Command::Simulate(args) => simulate::run(args),
        Command::Fleet(args) => fleet::run(args),
        Command::Status(args) => status::run(args),
        Command::Setup(args) => setup::run(args),
        Command::Tune(args) => tune::run(args),
        Command::Variants(command) => variants::run(command),
        Command::TuneMeasure(args) => tune_measure::measure(args),
    }
}
