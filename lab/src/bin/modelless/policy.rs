//! `modelless policy check P.wasm`: is this module a policy the runtime would run?

use std::path::PathBuf;
use std::time::Instant;

use modelless::policy::{HostConfig, PolicyEngine, read_ticks};
use modelless::policy_abi::{ABI_VERSION, Snapshot};

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
    },
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
        Command::Check { module, snapshots, parameters } => check(module, snapshots, parameters),
        Command::Replay { policy, snapshots, parameters } => replay(policy, snapshots, parameters),
    }
}

fn replay(path: PathBuf, snapshots: PathBuf, parameters: Option<String>) -> anyhow::Result<()> {
    let engine = PolicyEngine::new(HostConfig::default())?;
    let parameters = parameters.map(|p| serde_json::from_str::<serde_json::Value>(&p)).transpose()?;
    let mut instance = engine.compile_file(&path)?.instantiate(parameters.as_ref())?;
    let ticks = read_ticks(&snapshots)?;
    let replayed = modelless::policy::replay(&mut instance, &ticks);
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

fn check(path: PathBuf, snapshots: Option<PathBuf>, parameters: Option<String>) -> anyhow::Result<()> {
    let engine = PolicyEngine::new(HostConfig::default())?;
    let started = Instant::now();
    let module = engine.compile_file(&path)?;
    println!("{}: a policy of ABI version {ABI_VERSION}, compiled in {:.0} ms", path.display(), ms(started));
    println!("carries state across reloads: {}", if module.carries_state() { "yes" } else { "no" });
    let parameters = parameters.map(|p| serde_json::from_str::<serde_json::Value>(&p)).transpose()?;
    let mut instance = module.instantiate(parameters.as_ref())?;
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
        let decision = instance.decide(snapshot)?;
        println!("tick {tick}: {} in {:.3} ms", serde_json::to_string(&decision)?, ms(started));
        for log in instance.take_logs() {
            println!("  log {}: {}", log.level, log.message);
        }
    }
    println!("ok");
    Ok(())
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1e3
}
