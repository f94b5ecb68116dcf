//! What the simulator knows of a machine: its tasks, each with a latency target and
//! variants, and what each variant costs there, from its stored profile.

use std::path::Path;

use modelless::policy_abi::{LatencyFit, VariantSnapshot, VariantState};
use rand::Rng;
use rand_distr::StandardNormal;
use serde::{Deserialize, Serialize};

use super::ratio_line::RatioLine;
use crate::load::LoadError;
use modelless::{Runtime, RuntimeConfig};

/// The z-score of the 99th percentile of a normal distribution.
const Z99: f64 = 2.326;

/// The machine: its cores, the budget its instances are held to, and the tasks it
/// serves.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SimModel {
    /// Logical cores, as the snapshot reports them.
    pub cores: u32,
    /// The tasks, in configured order.
    pub tasks: Vec<SimTask>,
    /// What instances may hold, as the runtime's `[resources]`; `None`: decisions are
    /// held to no budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<SimBudget>,
}

/// The budget of a simulated machine.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct SimBudget {
    /// Cores instances may hold.
    pub cores: f64,
    /// Host memory they may hold, bytes.
    pub memory_bytes: u64,
    /// Whether a load short of memory unloads idle variants.
    pub unload_idle: bool,
}

impl SimBudget {
    /// The totals of a machine of `cores` cores, its shared pool holding all of them.
    pub fn totals(&self, cores: u32) -> modelless_runtime::policy::ResourceTotals {
        modelless_runtime::policy::ResourceTotals {
            cores: self.cores,
            memory_bytes: self.memory_bytes,
            gpus: Vec::new(),
            shared_pool_cores: f64::from(cores.max(1)),
            unload_idle: self.unload_idle,
        }
    }
}

/// One task.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SimTask {
    /// Its name.
    pub name: String,
    /// Its latency target, ms.
    pub slo_ms: Option<f64>,
    /// The variant serving at the start (index into `variants`).
    pub active: usize,
    /// Its variants, in configured order.
    pub variants: Vec<SimVariant>,
    /// Whether a request the active variant would refuse goes to a cheaper loaded
    /// variant that would answer it in time, as the runtime's `spill` does.
    #[serde(default = "spills")]
    pub spill: bool,
}

fn spills() -> bool {
    true
}

/// One variant and what it costs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SimVariant {
    /// Its name.
    pub name: String,
    /// Its accuracy.
    pub accuracy: f64,
    /// Warm batch latency, `a·b + c` ms.
    pub fit: LatencyFit,
    /// Spread of the warm latency: the standard deviation of its logarithm, from the
    /// profile's p99 against its p50.
    pub spread: f64,
    /// What loading it costs while it is not loaded, ms.
    pub load_ms: f64,
    /// Whether it is loaded at the start.
    pub loaded: bool,
    /// The batching it was configured with.
    pub max_batch_size: u32,
    /// Longest a request waits for a batch to fill, µs, as configured.
    pub max_queue_delay_us: u64,
    /// Requests its queue holds before it refuses more.
    pub max_queue_size: usize,
    /// How much slower or faster than its line the machine ran its batches, where the
    /// model was calibrated on real runs ([`SimModel::calibrated`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<RatioLine>,
    /// What a policy sees of it (its profile's figures).
    pub snapshot: VariantSnapshot,
}

impl SimVariant {
    /// One run of a batch of `rows`, in µs: the fit's latency spread log-normally
    /// around it as the profile measured.
    pub fn batch_us(&self, rows: u32, rng: &mut impl Rng) -> u64 {
        let z: f64 = rng.sample(StandardNormal);
        (self.median_ms(rows) * (self.spread * z).exp() * 1e3).round().max(1.0) as u64
    }

    /// The median time of a batch of `rows`, ms: its line, calibrated where it was.
    pub fn median_ms(&self, rows: u32) -> f64 {
        let ratio = self.calibration.map_or(1.0, |c| c.at(f64::from(rows)));
        self.fit.predict_ms(rows).max(0.05) * ratio
    }

    /// Executor time a request takes at full batches, ms: `a + c/B` of its
    /// [`SimVariant::cost_fit`], the least it can cost.
    pub fn row_ms(&self) -> f64 {
        let fit = self.cost_fit();
        (fit.a_ms + fit.c_ms.max(0.0) / f64::from(self.max_batch_size.max(1))).max(0.0)
    }

    /// Whole seconds from asking for it until it can serve, when it is not loaded:
    /// its load time, rounded up, and the tick that asks.
    pub fn load_s(&self) -> usize {
        (self.load_ms / 1e3).ceil() as usize + 1
    }

    /// The line the runtime prices its batches by: what a policy sees, slowed on an
    /// oversubscribed machine; its measured line where the snapshot has none.
    pub fn priced_fit(&self) -> LatencyFit {
        self.snapshot.profile.as_ref().and_then(|p| p.fit).unwrap_or(self.fit)
    }

    /// The line its batches take in this model: the profile's, or where calibrated,
    /// the chord of the calibrated times at one row and at its largest batch.
    pub fn cost_fit(&self) -> LatencyFit {
        let largest = self.max_batch_size.max(2);
        let (one, most) = (self.median_ms(1), self.median_ms(largest));
        match self.calibration {
            None => self.fit,
            Some(_) => {
                let a_ms = (most - one) / f64::from(largest - 1);
                LatencyFit { a_ms, c_ms: one - a_ms, r2: self.fit.r2 }
            }
        }
    }
}

impl SimModel {
    /// Reads a model written by [`SimModel::save`].
    pub fn from_file(path: &Path) -> Result<SimModel, LoadError> {
        let text = std::fs::read_to_string(path).map_err(|e| LoadError::io(path, e))?;
        serde_json::from_str(&text).map_err(|e| LoadError::invalid(format!("{}: {e}", path.display())))
    }

    /// Writes the model as JSON, to simulate later without the models.
    pub fn save(&self, path: &Path) -> Result<(), LoadError> {
        let json = serde_json::to_string_pretty(self).map_err(|e| LoadError::invalid(e.to_string()))?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| LoadError::io(dir, e))?;
        }
        std::fs::write(path, json).map_err(|e| LoadError::io(path, e))
    }

    /// The model of the tasks `config` declares, as `runtime` (built from it) loaded
    /// and profiled them. Every variant needs a profile with a latency fit.
    pub fn from_runtime(runtime: &Runtime, config: &RuntimeConfig) -> Result<SimModel, LoadError> {
        let target = |e: modelless::Error| LoadError::Target(e.to_string());
        let price_scale = config.resources.price_scale();
        let mut tasks = Vec::new();
        for task in &config.tasks {
            let snapshots = runtime.variant_snapshots(&task.name).map_err(target)?;
            let status = runtime.task_status(&task.name).map_err(target)?;
            let mut variants = Vec::new();
            for (configured, mut snapshot) in task.variants.iter().zip(snapshots) {
                // What it ran so far is the simulation's to count.
                snapshot.runs = None;
                let profile = runtime.variant_profile(&task.name, &configured.name).map_err(target)?;
                let (fit, spread) =
                    profile.as_ref().and_then(|p| Some((p.fit?, spread(&p.points)))).ok_or_else(|| {
                        LoadError::Target(format!(
                            "variant `{}` of `{}` has no profile with a latency fit: set `profile = \"measure\"` \
                             or run `modelless profile` first",
                            configured.name, task.name
                        ))
                    })?;
                // The runtime prices an oversubscribed machine's profiles slower; a
                // simulated batch runs at its measured line, crowded by what runs beside it.
                let fit = measured(fit, price_scale);
                let load_ms = snapshot.profile.as_ref().and_then(|c| c.load_ms).unwrap_or(0.0);
                variants.push(SimVariant {
                    name: configured.name.clone(),
                    accuracy: configured.variant_accuracy(),
                    fit,
                    spread,
                    load_ms,
                    loaded: snapshot.state == VariantState::Ready,
                    max_batch_size: configured.batching.max_batch_size as u32,
                    max_queue_delay_us: configured.batching.max_queue_delay_us,
                    max_queue_size: configured.batching.max_queue_size,
                    calibration: None,
                    snapshot,
                });
            }
            let active = variants.iter().position(|v| v.name == status.active).unwrap_or(0);
            tasks.push(SimTask {
                name: task.name.clone(),
                slo_ms: task.latency_slo_ms,
                active,
                variants,
                spill: task.spill,
            });
        }
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
        let totals = config.resources.totals(config.onnxruntime.intra_op_threads);
        let budget =
            SimBudget { cores: totals.cores, memory_bytes: totals.memory_bytes, unload_idle: totals.unload_idle };
        Ok(SimModel { cores, tasks, budget: Some(budget) })
    }

    /// The task called `name`.
    pub fn task_index(&self, name: &str) -> Option<usize> {
        self.tasks.iter().position(|t| t.name == name)
    }
}

/// The line `priced` was measured at, before the runtime slowed it by `price_scale`.
fn measured(priced: LatencyFit, price_scale: f64) -> LatencyFit {
    let scale = price_scale.max(1.0);
    LatencyFit { a_ms: priced.a_ms / scale, c_ms: priced.c_ms / scale, r2: priced.r2 }
}

/// The median over batch sizes of `ln(p99/p50) / z₉₉`: how widely warm runs spread.
fn spread(points: &[modelless::profile::BatchPoint]) -> f64 {
    let spreads: Vec<f64> = points
        .iter()
        .filter(|p| p.warm_p50_ms > 0.0 && p.warm_p99_ms >= p.warm_p50_ms)
        .map(|p| (p.warm_p99_ms / p.warm_p50_ms).ln() / Z99)
        .collect();
    crate::stats::median(&spreads).unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    use super::*;

    fn point(batch_size: u32, p50: f64, p99: f64) -> modelless::profile::BatchPoint {
        modelless::profile::BatchPoint {
            batch_size,
            first_run_ms: p99,
            warm_p50_ms: p50,
            warm_p99_ms: p99,
            warm_runs: 20,
            memory_bytes: None,
        }
    }

    #[test]
    fn batch_times_centre_on_the_fit_and_spread_as_the_profile_measured() {
        // p99 twice the p50 at every size.
        let spread = spread(&[point(1, 10.0, 20.0), point(2, 12.0, 24.0), point(4, 20.0, 40.0)]);
        assert!((spread - 2f64.ln() / Z99).abs() < 1e-12);
        let variant = SimVariant {
            name: "v".into(),
            accuracy: 70.0,
            fit: LatencyFit { a_ms: 2.0, c_ms: 4.0, r2: 1.0 },
            spread,
            load_ms: 0.0,
            loaded: true,
            max_batch_size: 8,
            max_queue_delay_us: 0,
            max_queue_size: 16,
            calibration: None,
            snapshot: VariantSnapshot::default(),
        };
        let mut rng = StdRng::seed_from_u64(1);
        let mut runs: Vec<u64> = (0..20_000).map(|_| variant.batch_us(3, &mut rng)).collect();
        runs.sort_unstable();
        let (p50, p99) = (runs[10_000] as f64, runs[19_800] as f64);
        assert!((p50 / 10_000.0 - 1.0).abs() < 0.02, "p50 {p50} µs for a fit of 10 ms");
        assert!((p99 / p50 / 2.0 - 1.0).abs() < 0.05, "p99/p50 {}", p99 / p50);
        let exact = SimVariant { spread: 0.0, ..variant };
        assert_eq!(exact.batch_us(3, &mut rng), 10_000);
        assert_eq!(exact.cost_fit(), exact.fit);
        // Calibrated: twice its line at one row, 1.3 times at eight.
        let calibrated = SimVariant { calibration: Some(RatioLine { at_one: 2.0, per_row: -0.1 }), ..exact };
        assert_eq!(calibrated.batch_us(1, &mut rng), 12_000);
        assert_eq!(calibrated.batch_us(3, &mut rng), 18_000);
        let chord = calibrated.cost_fit();
        assert!((chord.predict_ms(1) - 12.0).abs() < 1e-9 && (chord.predict_ms(8) - 26.0).abs() < 1e-9, "{chord:?}");
    }
}
