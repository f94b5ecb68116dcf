//! `modelless policy check P.wasm`: is this module a policy the runtime would run? And
//! the other `policy` commands: new, push, replay, test, dev.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context as _;
use modelless::policy_abi::{ABI_VERSION, Snapshot};
use modelless_runtime::policy::{HostConfig, ModuleKind, PolicyEngine, default_compiled_cache, read_ticks};

/// What to do with a policy module.
#[derive(clap::Subcommand)]
pub enum Command {
    /// Compile a module, check its ABI marker and exports, instantiate it and dry-run
    /// `decide` on each snapshot given (or an empty one), under the host's limits.
    Check {
        /// The module (`.wasm`, or `.wat` text).
        module: PathBuf,
        /// Snapshots to dry-run it on, JSON Lines (one snapshot per line).
        #[arg(long)]
        snapshots: Option<PathBuf>,
        /// Parameters for its `init`, as JSON.
        #[arg(long)]
        parameters: Option<String>,
        /// The memory cap of its instance, MiB (default: the runtime's for its kind).
        #[arg(long)]
        memory_limit_mib: Option<usize>,
        /// The longest one decision may take, ms, as the config's `deadline_ms` sets
        /// it (an interpreter's first call takes longer than the default 10).
        #[arg(long)]
        deadline_ms: Option<u64>,
    },
    /// Write a starter policy in a language into the folder NAME: its source, the
    /// language's kit and a `build.sh` that builds `NAME.wasm`.
    New {
        /// The language.
        #[arg(long, value_enum)]
        lang: crate::policy_new::Language,
        /// The policy's name, and its folder's.
        name: String,
        /// Where the folder goes (default: here).
        #[arg(long, default_value = ".")]
        parent: PathBuf,
    },
    /// Serve a config and, on every save in a policy's folder, rebuild the policy with
    /// its `build.sh`, run it as a shadow beside the live policy, and make it live on
    /// Enter (or after `--live-after` ticks).
    Dev(crate::policy_dev::Args),
    /// Run a module against expectations files: on their snapshots, what its decisions
    /// must hold, tick by tick and field by field; fails naming each miss.
    Test {
        /// The module.
        module: PathBuf,
        /// The expectations files (TOML: `snapshots`, `parameters`, `[[tick]]`).
        #[arg(required = true)]
        expectations: Vec<PathBuf>,
    },
    /// Check a module as `check` does and, if it passes, push it to an OCI registry
    /// in the Wasm artifact layout, for replicas that follow the tag.
    Push(crate::push::PolicyPushArgs),
    /// Run a policy over recorded ticks (a control loop's recording) or bare
    /// snapshots, print its decisions and where they differ from the recorded ones.
    Replay {
        /// The module.
        #[arg(long)]
        policy: PathBuf,
        /// The recording or snapshots, JSON Lines.
        #[arg(long)]
        snapshots: PathBuf,
        /// Parameters for its `init`, as JSON.
        #[arg(long)]
        parameters: Option<String>,
    },
}

pub fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Check { module, snapshots, parameters, memory_limit_mib, deadline_ms } => {
            check(module, snapshots, parameters, Limits { memory_limit_mib, deadline_ms }).map(drop)
        }
        Command::Push(args) => {
            let limits = Limits { memory_limit_mib: None, deadline_ms: args.deadline_ms };
            let kind = check(args.module.clone(), args.snapshots.clone(), args.parameters.clone(), limits)
                .context("the check refused it; nothing was pushed")?;
            crate::push::push_policy(args, kind)
        }
        Command::Replay { policy, snapshots, parameters } => replay(policy, snapshots, parameters),
        Command::Dev(args) => crate::policy_dev::run(args),
        Command::Test { module, expectations } => {
            crate::policy_test::run(&engine(Limits::default())?, &module, &expectations)
        }
        Command::New { lang, name, parent } => {
            let dir = crate::policy_new::write(lang, &name, &parent)?;
            println!("wrote {}: build it with {}/build.sh", dir.display(), dir.display());
            Ok(())
        }
    }
}

/// The sandbox's limits where they differ from the runtime's defaults.
#[derive(Clone, Copy, Default)]
struct Limits {
    memory_limit_mib: Option<usize>,
    deadline_ms: Option<u64>,
}

/// The host `policy check` and `policy replay` run modules in: the runtime's limits
/// (or those given), and its cache of compiled modules.
fn engine(limits: Limits) -> anyhow::Result<std::sync::Arc<PolicyEngine>> {
    let mut host = HostConfig {
        memory_limit_bytes: limits.memory_limit_mib.map(|mib| mib << 20),
        compiled_cache: default_compiled_cache(),
        ..HostConfig::default()
    };
    if let Some(ms) = limits.deadline_ms {
        host = host.with_deadline(std::time::Duration::from_millis(ms));
    }
    Ok(PolicyEngine::new(host)?)
}

fn replay(path: PathBuf, snapshots: PathBuf, parameters: Option<String>) -> anyhow::Result<()> {
    let engine = engine(Limits::default())?;
    let parameters = parameters.map(|p| serde_json::from_str::<serde_json::Value>(&p)).transpose()?;
    let mut instance = engine.compile_file(&path)?.instantiate(parameters.as_ref())?;
    let ticks = read_ticks(&snapshots)?;
    let replayed = modelless_runtime::policy::replay(&mut instance, &ticks);
    let mut differing = 0;
    for ((snapshot, recorded), now) in ticks.iter().zip(&replayed) {
        let decision = match &now.decision {
            Ok(decision) => serde_json::to_string(decision)?,
            Err(e) => format!("failed ({}): {e}", e.kind()),
        };
        let mark = match now.differs {
            Some(true) => "differs",
            Some(false) => "same",
            None => "-",
        };
        differing += usize::from(now.differs == Some(true));
        println!("tick {:>5} {:>7}  {decision}", snapshot.tick, mark);
        if let (Some(true), Some(recorded)) = (now.differs, recorded) {
            println!("{:>19}{}", "was  ", serde_json::to_string(recorded)?);
        }
    }
    let recorded = ticks.iter().filter(|t| t.1.is_some()).count();
    println!("{} ticks; {differing} of {recorded} recorded decisions differ", ticks.len());
    Ok(())
}

fn check(
    path: PathBuf,
    snapshots: Option<PathBuf>,
    parameters: Option<String>,
    limits: Limits,
) -> anyhow::Result<ModuleKind> {
    let engine = engine(limits)?;
    let module = engine.compile_file(&path)?;
    let loaded = module.loaded();
    println!(
        "{}: {} ({:.1} MB), {} in {:.0} ms",
        path.display(),
        module.kind().label(),
        loaded.bytes as f64 / 1e6,
        if loaded.from_cache { "loaded compiled from the cache" } else { "compiled" },
        loaded.took.as_secs_f64() * 1e3
    );
    println!("digest: {}", module.digest());
    println!("memory cap: {} MiB an instance", module.memory_limit() >> 20);
    println!("carries state across reloads: {}", if module.carries_state() { "yes" } else { "no" });
    let parameters = parameters.map(|p| serde_json::from_str::<serde_json::Value>(&p)).transpose()?;
    let started = Instant::now();
    let mut instance = module
        .instantiate(parameters.as_ref())
        .map_err(|e| anyhow::Error::new(e).context("instantiating it (and its init) failed"))?;
    println!("instantiated in {:.1} ms", ms(started));
    match instance.parameters_schema() {
        Ok(Some(schema)) => println!("parameters: {}", parameters_summary(&schema)),
        Ok(None) => println!("parameters: no schema exported"),
        Err(e) => println!("parameters: its schema could not be read: {e}"),
    }
    let snapshots: Vec<Snapshot> = match snapshots {
        Some(file) => std::fs::read_to_string(&file)?
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(serde_json::from_str)
            .collect::<Result<_, _>>()?,
        None => vec![Snapshot { abi_version: ABI_VERSION, ..Snapshot::default() }],
    };
    for (tick, snapshot) in snapshots.iter().enumerate() {
        let started = Instant::now();
        let decision = instance.decide(snapshot);
        // What it logged comes first: it is often why the call failed.
        for log in instance.take_logs() {
            println!("  log {}: {}", log.level, log.message);
        }
        let decision =
            decision.map_err(|e| anyhow::Error::new(e).context(format!("`decide` failed on tick {tick}")))?;
        println!("tick {tick}: {} in {:.3} ms", serde_json::to_string(&decision)?, ms(started));
    }
    println!(
        "memory held: {:.1} MiB of the cap's {} MiB",
        instance.memory_bytes() as f64 / f64::from(1 << 20),
        module.memory_limit() >> 20
    );
    println!("ok");
    Ok(module.kind())
}

/// One line per parameter of a JSON Schema: name, type, default, description.
fn parameters_summary(schema: &serde_json::Value) -> String {
    let Some(properties) = schema["properties"].as_object().filter(|p| !p.is_empty()) else {
        return "none".into();
    };
    let required: Vec<&str> = schema["required"].as_array().into_iter().flatten().filter_map(|r| r.as_str()).collect();
    let lines = properties.iter().map(|(name, property)| {
        let kind = match &property["type"] {
            serde_json::Value::String(kind) => kind.clone(),
            serde_json::Value::Array(kinds) => kinds.iter().filter_map(|k| k.as_str()).collect::<Vec<_>>().join(" or "),
            _ => "see schema".into(),
        };
        let default = property.get("default").map(|d| format!(", default {d}")).unwrap_or_default();
        let needed = if required.contains(&name.as_str()) { ", required" } else { "" };
        let about = property["description"].as_str().map(|d| format!(": {}", d.replace('\n', " "))).unwrap_or_default();
        format!("\n  {name} ({kind}{needed}{default}){about}")
    });
    lines.collect()
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1e3
}
