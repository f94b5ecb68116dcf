//! `modelless policy dev`: a policy author's edit loop. It serves a config (endpoints
//! as `modelless serve` has them), watches the policy's folder, and on every save
//! rebuilds the module with the folder's `build.sh` (any language `policy new`
//! writes), runs the new module as a shadow beside the live policy, printing where
//! their decisions differ, and makes it live on Enter, or by itself once it has
//! decided `--live-after` ticks. Each step says how long it took from the save.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context as _;
use modelless::{PolicyConfig, Runtime, RuntimeBuilder, RuntimeConfig};

/// How often the folder is looked at.
const POLL: Duration = Duration::from_millis(200);

#[derive(clap::Args)]
pub struct Args {
    /// The runtime's TOML config to serve; its `[policy]`, if any, is the live policy
    /// the first build shadows.
    #[arg(long)]
    config: PathBuf,
    /// The policy's folder: its sources and the `build.sh` that builds it.
    #[arg(long, default_value = ".")]
    source: PathBuf,
    /// The module `build.sh` writes (default: the folder's name, `.wasm`, in it).
    #[arg(long)]
    module: Option<PathBuf>,
    /// Make a build live by itself once it has decided this many ticks as a shadow,
    /// rather than on Enter.
    #[arg(long, value_name = "TICKS")]
    live_after: Option<u64>,
    /// gRPC address, overriding the config.
    #[arg(long)]
    grpc: Option<SocketAddr>,
    /// HTTP/REST and metrics address, overriding the config.
    #[arg(long)]
    http: Option<SocketAddr>,
}

/// A build waiting in the shadow to go live.
struct Candidate {
    module: PathBuf,
    saved: SystemTime,
    ticks_before: u64,
    printed_tick: u64,
    asked: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let source = args.source.canonicalize().with_context(|| format!("no folder {}", args.source.display()))?;
    let name = source.file_name().map_or_else(|| "policy".into(), |n| n.to_string_lossy().into_owned());
    let built = args.module.clone().unwrap_or_else(|| source.join(format!("{name}.wasm")));
    let config = RuntimeConfig::from_file(&args.config)?;
    let server = crate::serve::endpoints(&config, args.grpc, args.http);
    let runtime = Arc::new(RuntimeBuilder::default().with_config(config).build()?);
    let tokio = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let endpoints = tokio.block_on(runtime.clone().serve(&server)).context("starting the endpoints")?;
    println!("serving: gRPC on {}, HTTP and /metrics on {}", endpoints.grpc_address(), endpoints.http_address());
    let stop = Arc::new(AtomicBool::new(false));
    let stopping = stop.clone();
    tokio.spawn(async move {
        modelless::kserve::shutdown_signal().await;
        stopping.store(true, Ordering::Relaxed);
    });
    // Each build is copied aside, so that a build running while one is in the shadow
    // does not change the module that goes live.
    let versions = std::env::temp_dir().join(format!("modelless-policy-dev-{}", std::process::id()));
    std::fs::create_dir_all(&versions)?;
    let enter = enter_presses();
    let mut seen = newest_change(&source)?;
    let mut builds = 1;
    let mut candidate = build(&runtime, &source, &built, &versions.join(format!("{name}-1.wasm")), seen)?;
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(POLL);
        let newest = newest_change(&source)?;
        if newest > seen {
            (seen, builds) = (newest, builds + 1);
            let version = versions.join(format!("{name}-{builds}.wasm"));
            candidate = build(&runtime, &source, &built, &version, seen)?.or(candidate);
        }
        if let Some(waiting) = candidate.as_mut()
            && ready(&runtime, waiting, args.live_after, &enter)
        {
            go_live(&runtime, waiting)?;
            candidate = None;
        }
    }
    println!("stopping");
    tokio.block_on(endpoints.shutdown());
    runtime.stop_policy();
    let _ = std::fs::remove_dir_all(&versions);
    Ok(())
}

/// Runs `build.sh`; on success, copies the module to `version` and starts it: as the
/// shadow of the live policy (the candidate returned), or live where none runs.
fn build(
    runtime: &Runtime,
    source: &Path,
    built: &Path,
    version: &Path,
    saved: SystemTime,
) -> anyhow::Result<Option<Candidate>> {
    let started = Instant::now();
    println!("building {} ...", source.display());
    let output = Command::new("bash").arg("build.sh").current_dir(source).output().context("running build.sh")?;
    if !output.status.success() {
        println!("build failed; the policies running keep running:");
        println!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        return Ok(None);
    }
    let Some(bytes) = module_bytes(built) else {
        println!("build.sh wrote no module at {}; the policies running keep running", built.display());
        return Ok(None);
    };
    std::fs::write(version, &bytes)?;
    println!("built in {:.1} s ({:.1} MB)", started.elapsed().as_secs_f64(), bytes.len() as f64 / 1e6);
    if runtime.policy_status().is_none() {
        runtime.start_policy(PolicyConfig::new(version))?;
        println!("live (no policy ran before): {} {}", version.display(), since(saved));
        return Ok(None);
    }
    if let Err(e) = runtime.shadow_policy(Some(version)) {
        println!("the module is refused, the policies running keep running: {e}");
        return Ok(None);
    }
    let ticks_before = runtime.policy_status().map_or(0, |s| s.ticks);
    println!("shadow: {} {}", version.display(), since(saved));
    Ok(Some(Candidate { module: version.to_path_buf(), saved, ticks_before, printed_tick: 0, asked: false }))
}

/// Whether `candidate` may go live: Enter pressed, or `live_after` ticks decided in
/// the shadow. Prints the shadow's decision where it differs from the live one.
fn ready(runtime: &Runtime, candidate: &mut Candidate, live_after: Option<u64>, enter: &Receiver<()>) -> bool {
    let Some(status) = runtime.policy_status() else { return false };
    let Some(shadow) = status.shadow_decision.as_ref() else { return false };
    let decided = status.ticks.saturating_sub(candidate.ticks_before);
    if shadow != &status.last_decision && status.ticks > candidate.printed_tick {
        candidate.printed_tick = status.ticks;
        let json = |d| serde_json::to_string(d).unwrap_or_default();
        println!("tick {}: live {} | shadow {}", status.ticks, json(&status.last_decision), json(shadow));
    }
    match live_after {
        Some(ticks) => decided >= ticks,
        None => {
            if !candidate.asked {
                println!("press Enter to make it live");
                candidate.asked = true;
            }
            enter.try_recv().is_ok()
        }
    }
}

fn go_live(runtime: &Runtime, candidate: &Candidate) -> anyhow::Result<()> {
    runtime.shadow_policy(None)?;
    match runtime.reload_policy(&candidate.module) {
        Ok(_) => {
            let digest = runtime.policy_status().map(|s| s.policy_digest).unwrap_or_default();
            println!("live: {digest} {}", since(candidate.saved));
        }
        Err(e) => println!("the reload failed, the live policy stays: {e}"),
    }
    Ok(())
}

/// The module's bytes once they start as a binary module does: some toolchains'
/// output reaches the disk a moment after their process ends. `None` after 5 s.
fn module_bytes(path: &Path) -> Option<Vec<u8>> {
    let started = Instant::now();
    loop {
        match std::fs::read(path) {
            Ok(bytes) if bytes.starts_with(b"\0asm") => return Some(bytes),
            _ if started.elapsed() > Duration::from_secs(5) => return None,
            _ => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// The latest modification of the folder's sources: every file but build outputs.
fn newest_change(dir: &Path) -> anyhow::Result<SystemTime> {
    let mut newest = SystemTime::UNIX_EPOCH;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let skipped = name.starts_with('.')
            || matches!(name.as_str(), "target" | "node_modules" | "__pycache__")
            || name.ends_with("-cache")
            || name.ends_with(".wasm");
        if skipped {
            continue;
        }
        let kind = entry.file_type()?;
        let modified = if kind.is_dir() { newest_change(&entry.path())? } else { entry.metadata()?.modified()? };
        newest = newest.max(modified);
    }
    Ok(newest)
}

/// A channel that gets a message each time Enter is pressed.
fn enter_presses() -> Receiver<()> {
    let (pressed, presses) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for _ in std::io::stdin().lines() {
            if pressed.send(()).is_err() {
                return;
            }
        }
    });
    presses
}

/// "(N s from the save)".
fn since(saved: SystemTime) -> String {
    let took = SystemTime::now().duration_since(saved).unwrap_or_default();
    format!("({:.1} s from the save)", took.as_secs_f64())
}
