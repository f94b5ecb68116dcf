//! The measurer: each setting measured in a measuring process of its own (ONNX
//! Runtime's threads are set once per process, and no evaluation inherits another's
//! caches), for `seconds` after its warm-up.
//!
//! When paired (closed-loop objectives), the reference (the configured default)
//! instead stays loaded in a process of its own for the whole run, and each
//! candidate's one-second slices alternate with the reference's (candidate first in
//! one pair, reference first in the next, so that a steady drift falls on both
//! alike). A candidate's cost is then the median of its slices' ratios to the
//! reference's, times the reference's level when it was first measured. That cancels
//! a drift that slows every setting alike; where a busy host slows settings unlike
//! the default more or less than it, the ratio carries the difference, and on a
//! 2-core VM it made remeasured settings spread more, not less.

use std::cell::RefCell;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use super::slices::{Failed, Pair, SLICE_SECONDS, SliceChild, Slicer, measure_pairs};
use super::{MeasureCommand, MeasureRequest};
use crate::stats::median;
use crate::tune::{Objective, ServingSetting};

/// What is measured: a variant under an objective, against a reference setting.
#[derive(Clone, Copy, Debug)]
pub struct Bench<'a> {
    /// The variant.
    pub variant: &'a str,
    /// What it is judged by.
    pub objective: &'a Objective,
    /// The setting every closed-loop measurement is paired with.
    pub reference: &'a ServingSetting,
}

/// How measurements are taken: the command that starts a measuring process, what it
/// measures and for how long.
#[derive(Clone, Debug)]
pub struct MeasureSetup {
    /// What starts a measuring process.
    pub command: MeasureCommand,
    /// The runtime's TOML config.
    pub config: PathBuf,
    /// The task whose variants are measured.
    pub task: String,
    /// Seconds each setting is measured (in slices, when paired).
    pub seconds: u32,
    /// Seconds of load before each measurement, not counted.
    pub warmup_seconds: u32,
    /// Photo-like JPEGs of these sizes for tasks that take images.
    pub image_sizes: String,
    /// Whether closed-loop measurements are paired with the reference.
    pub paired: bool,
}

/// Runs measurements in measuring processes.
#[derive(Debug)]
pub struct Measurer {
    setup: MeasureSetup,
    /// The reference's process, kept between measurements of one bench.
    reference: RefCell<Option<Reference>>,
}

/// The reference's process and its level.
#[derive(Debug)]
struct Reference {
    /// Which bench it serves.
    key: String,
    /// Its process, started when first needed and again after it failed.
    child: Option<SliceChild>,
    /// Its cost when first measured: what ratios to it are scaled by.
    level: Option<f64>,
}

impl Measurer {
    /// A measurer that measures as `setup` says.
    pub fn new(setup: MeasureSetup) -> Self {
        Measurer { setup, reference: RefCell::new(None) }
    }

    /// How it measures.
    pub fn setup(&self) -> &MeasureSetup {
        &self.setup
    }

    /// The objective's cost of `setting`, or why it could not be had.
    pub fn cost(&self, bench: &Bench, setting: &ServingSetting) -> Result<f64, String> {
        self.cost_of(bench, setting, false)
    }

    /// The model alone's closed-loop latency (see [`crate::tune::reference`]), the
    /// better of one session on every core and one single-threaded session per core.
    pub fn model_alone_ms(&self, bench: &Bench, setting: &ServingSetting) -> Result<f64, String> {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut best: Option<f64> = None;
        let mut error = None;
        for (sessions, threads) in [(1, cores), (cores, 1)] {
            let arranged = ServingSetting { instances: sessions, intra_op_threads: threads, ..setting.clone() };
            match self.cost_of(bench, &arranged, true) {
                Ok(cost) => best = Some(best.map_or(cost, |b| b.min(cost))),
                Err(e) => error = Some(e),
            }
        }
        best.ok_or_else(|| error.unwrap_or_default())
    }

    /// Whether measurements under `objective` are paired with the reference: those in
    /// a closed loop, where pairing is on.
    pub fn pairs(&self, objective: &Objective) -> bool {
        self.setup.paired && objective.concurrency.is_some()
    }

    fn cost_of(&self, bench: &Bench, setting: &ServingSetting, model_alone: bool) -> Result<f64, String> {
        if !self.pairs(bench.objective) {
            let mut candidate = self.start(bench, setting, model_alone)?;
            return bench.objective.cost(&candidate.slice(self.setup.seconds)?);
        }
        let mut held = self.reference.borrow_mut();
        let key = format!("{}/{}/{:?}", bench.variant, bench.objective.slug(), bench.reference);
        let reference = match held.as_mut() {
            Some(reference) if reference.key == key => reference,
            _ => held.insert(Reference { key, child: None, level: None }),
        };
        let reference_child = match reference.child.as_mut() {
            Some(child) => child,
            None => reference.child.insert(self.start(bench, bench.reference, false)?),
        };
        let mut candidate = self.start(bench, setting, model_alone)?;
        let pairs = (self.setup.seconds / SLICE_SECONDS).max(1) as usize;
        match measure_pairs(&mut candidate, reference_child, pairs, |m| bench.objective.cost(m)) {
            Ok(pairs) => {
                let references: Vec<f64> = pairs.iter().map(|p| p.reference).collect();
                let ratios: Vec<f64> = pairs.iter().map(Pair::ratio).collect();
                let level = *reference.level.get_or_insert_with(|| median(&references).unwrap_or(f64::NAN));
                Ok(median(&ratios).unwrap_or(f64::NAN) * level)
            }
            Err(Failed::Candidate(e)) => Err(e),
            Err(Failed::Reference(e)) => {
                // Started afresh for the next measurement; its level stays.
                reference.child = None;
                Err(format!("the reference failed: {e}"))
            }
        }
    }

    fn start(&self, bench: &Bench, setting: &ServingSetting, model_alone: bool) -> Result<SliceChild, String> {
        let setup = &self.setup;
        let request = MeasureRequest {
            config: setup.config.clone(),
            task: setup.task.clone(),
            variant: bench.variant.to_string(),
            setting: setting.clone(),
            objective: bench.objective.clone(),
            warmup_seconds: setup.warmup_seconds,
            image_sizes: setup.image_sizes.clone(),
            model_alone,
        };
        let mut command = Command::new(&setup.command.program);
        command.args(&setup.command.args).args(request.args().map_err(|e| e.to_string())?);
        // Loading and warming a variant takes seconds; a child far past that is stuck.
        SliceChild::start(command, Duration::from_secs(u64::from(setup.warmup_seconds) * 3 + 180))
    }
}
