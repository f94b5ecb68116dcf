//! The machine's budget: what the runtime may allocate to its tasks' instances (cores,
//! host memory, each GPU's memory), and what of it the instances hold now. Pure: the
//! control loop and the simulator both make a snapshot's [`Budget`] with [`budget`]
//! from the variants the snapshot shows, and the control core holds decisions to it.
//!
//! Cores are held by each task's serving variant: its instances times the threads of
//! each one's own intra-op pool, plus the shared pool's threads once while any serving
//! instance runs on that pool. A variant loaded to stand by runs nothing and holds
//! memory only, so a switch moves cores from the variant replaced to the one taking
//! over. Memory is held by every variant loaded, on its device.

use modelless_policy_abi::{Budget, GpuBudget, TaskSnapshot, cores_held};
use serde::{Deserialize, Serialize};

use crate::error::Error;

/// What the runtime may allocate: the `[resources]` table of its config. What is
/// left out is what the process may use.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ResourcesConfig {
    /// Cores instances may hold; default: what the process may run on (its CPU
    /// affinity and its cgroup's CPU quota). More than that is refused unless
    /// `oversubscription` allows it.
    pub cores: Option<f64>,
    /// How many times the cores the process may run on `cores` may claim (at least
    /// 1, the default). Above 1 every profile's prices are scaled by it: instances
    /// that share a core each run that much slower than profiled alone, and the
    /// budget, admission and the policies plan on that.
    pub oversubscription: f64,
    /// Host memory instances may hold, in MiB; default: the cgroup's limit, else the
    /// machine's memory.
    pub memory_mib: Option<u64>,
    /// Memory instances may hold on each GPU, in MiB; default: the GPU's memory.
    pub gpu_memory_mib: Option<u64>,
    /// Whether a variant's load that does not fit may unload variants that do not
    /// serve, least recently served first, to make room.
    pub unload_idle: bool,
}

impl Default for ResourcesConfig {
    fn default() -> Self {
        ResourcesConfig {
            cores: None,
            oversubscription: 1.0,
            memory_mib: None,
            gpu_memory_mib: None,
            unload_idle: true,
        }
    }
}

impl ResourcesConfig {
    /// Sets the cores instances may hold.
    pub fn with_cores(mut self, cores: f64) -> Self {
        self.cores = Some(cores);
        self
    }

    /// Lets `cores` claim up to `factor` times the cores the process may run on, every
    /// profile's prices scaled by it.
    pub fn with_oversubscription(mut self, factor: f64) -> Self {
        self.oversubscription = factor;
        self
    }

    /// Sets the host memory instances may hold, in MiB.
    pub fn with_memory_mib(mut self, mib: u64) -> Self {
        self.memory_mib = Some(mib);
        self
    }

    /// Sets whether loads may unload idle variants for room.
    pub fn with_unload_idle(mut self, unload_idle: bool) -> Self {
        self.unload_idle = unload_idle;
        self
    }

    /// Refuses a budget of no cores or no memory.
    pub fn validate(&self) -> Result<(), Error> {
        if let Some(cores) = self.cores
            && !(cores.is_finite() && cores > 0.0 && cores <= 65_536.0)
        {
            return Err(Error::Config(format!("resources: cores {cores} is not within (0, 65536]")));
        }
        if !(self.oversubscription.is_finite() && self.oversubscription >= 1.0) {
            return Err(Error::Config(format!(
                "resources: oversubscription {} is not a factor of at least 1",
                self.oversubscription
            )));
        }
        if self.memory_mib == Some(0) || self.gpu_memory_mib == Some(0) {
            return Err(Error::Config("resources: a memory budget of 0 MiB holds no instance".into()));
        }
        Ok(())
    }

    /// Refuses `cores` beyond what `oversubscription` allows of the `usable` cores the
    /// process may run on: a plan on cores that do not exist prices every instance
    /// as if it had one to itself.
    pub fn check_cores(&self, usable: f64) -> Result<(), Error> {
        let Some(cores) = self.cores else { return Ok(()) };
        let allowed = usable * self.oversubscription;
        if cores > allowed + 1e-9 {
            return Err(Error::Config(format!(
                "resources: cores {cores} is more than the {usable} this process may run on (its CPU affinity \
                 and quota){}; leave `cores` out to use them all, or set `oversubscription = {:.2}` to plan on \
                 more, every profile's prices then scaled by it",
                if self.oversubscription > 1.0 {
                    format!(" times oversubscription {}", self.oversubscription)
                } else {
                    String::new()
                },
                cores / usable,
            )));
        }
        Ok(())
    }

    /// What each profile's prices are scaled by: the oversubscription factor.
    pub fn price_scale(&self) -> f64 {
        self.oversubscription.max(1.0)
    }

    /// The totals on this machine, the shared intra-op pool having `shared_pool_threads`
    /// threads (0: one per core).
    // The runtime's own: `modelless` does not offer it.
    #[doc(hidden)]
    pub fn totals(&self, shared_pool_threads: usize) -> ResourceTotals {
        let usable_cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        let memory = crate::metrics::cgroup_memory_limit()
            .or_else(|| crate::metrics::machine_memory().map(|(total, _)| total))
            .unwrap_or(0);
        let gpus = crate::metrics::gpu_snapshots()
            .into_iter()
            .filter_map(|gpu| {
                let configured = self.gpu_memory_mib.map(|mib| mib << 20);
                Some((gpu.index, configured.or(gpu.memory_total_bytes)?))
            })
            .collect();
        ResourceTotals {
            cores: self.cores.unwrap_or(usable_cores),
            memory_bytes: self.memory_mib.map_or(memory, |mib| mib << 20),
            gpus,
            shared_pool_cores: if shared_pool_threads == 0 { usable_cores } else { shared_pool_threads as f64 },
            unload_idle: self.unload_idle,
        }
    }
}

/// What instances may hold, in all.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ResourceTotals {
    /// Cores.
    pub cores: f64,
    /// Host memory, bytes.
    pub memory_bytes: u64,
    /// Each GPU's index and memory, bytes.
    pub gpus: Vec<(u32, u64)>,
    /// Threads of the intra-op pool sessions share.
    pub shared_pool_cores: f64,
    /// Whether loads may unload idle variants for room.
    pub unload_idle: bool,
}

/// The budget of `totals`, with what the variants of `tasks` hold taken from it: the
/// cores by the rule policies read them with ([`cores_held`]), the memory of every
/// variant loaded or loading.
pub fn budget(totals: &ResourceTotals, tasks: &[TaskSnapshot]) -> Budget {
    let cores_held = cores_held(tasks, totals.shared_pool_cores);
    let mut host_held = 0u64;
    let mut gpu_held: Vec<u64> = vec![0; totals.gpus.len()];
    for variant in tasks.iter().flat_map(|task| &task.variants).filter(|v| v.holds_memory()) {
        let Some(share) = variant.share else { continue };
        let (host, gpu) = share.memory_of(variant.loaded_instances());
        host_held += host;
        if let Some(at) = gpu_index(&variant.device).and_then(|i| totals.gpus.iter().position(|g| g.0 == i)) {
            gpu_held[at] += gpu;
        }
    }
    Budget {
        cores: totals.cores,
        cores_free: round_cores(totals.cores - cores_held),
        shared_pool_cores: totals.shared_pool_cores,
        memory_bytes: totals.memory_bytes,
        memory_free_bytes: totals.memory_bytes.saturating_sub(host_held),
        gpus: totals
            .gpus
            .iter()
            .zip(gpu_held)
            .map(|(&(index, bytes), held)| GpuBudget {
                index,
                memory_bytes: bytes,
                memory_free_bytes: bytes.saturating_sub(held),
            })
            .collect(),
        unload_idle: totals.unload_idle,
    }
}

/// The GPU a device name is on: `cuda:N`.
pub fn gpu_index(device: &str) -> Option<u32> {
    device.strip_prefix("cuda:")?.parse().ok()
}

/// Cores to a thousandth: sums of shares need not drift into 1.9999999.
fn round_cores(cores: f64) -> f64 {
    (cores * 1e3).round() / 1e3
}

#[cfg(test)]
mod tests {
    use modelless_policy_abi::{InstanceShare, ServingKnobs, VariantSnapshot, VariantState};

    use super::*;

    #[test]
    fn cores_beyond_the_machines_are_refused_unless_oversubscription_allows_them() {
        let four = ResourcesConfig::default().with_cores(4.0);
        let refused = four.check_cores(2.0).unwrap_err().to_string();
        assert!(
            refused.contains("cores 4 is more than the 2") && refused.contains("oversubscription = 2.00"),
            "{refused}"
        );
        assert!(ResourcesConfig::default().with_cores(2.0).check_cores(2.0).is_ok());
        assert!(ResourcesConfig::default().check_cores(2.0).is_ok(), "left out: the machine's");
        let allowed = four.clone().with_oversubscription(2.0);
        assert!(allowed.validate().is_ok() && allowed.check_cores(2.0).is_ok());
        assert_eq!(allowed.price_scale(), 2.0);
        assert!(four.clone().with_oversubscription(1.5).check_cores(2.0).is_err());
        assert!(four.with_oversubscription(0.5).validate().is_err(), "a factor below 1");
    }

    fn variant(name: &str, state: VariantState, instances: u32, share: InstanceShare) -> VariantSnapshot {
        VariantSnapshot {
            name: name.into(),
            state,
            instances,
            instances_set: instances.max(1),
            share: Some(share),
            device: "cpu".into(),
            ..VariantSnapshot::default()
        }
    }

    fn task(name: &str, active: &str, variants: Vec<VariantSnapshot>) -> TaskSnapshot {
        let active = ServingKnobs { variant: active.into(), ..ServingKnobs::default() };
        TaskSnapshot { name: name.into(), active, variants, ..TaskSnapshot::default() }
    }

    const MIB: u64 = 1 << 20;

    #[test]
    fn serving_variants_hold_their_instances_cores_and_every_loaded_one_its_memory() {
        let own = |cores| InstanceShare { cores, memory_bytes: 100 * MIB, gpu_memory_bytes: 0 };
        let totals =
            ResourceTotals { cores: 4.0, memory_bytes: 1000 * MIB, shared_pool_cores: 2.0, ..Default::default() };
        let tasks = [
            // a serves with 2 instances of 1 thread; b stands by loaded.
            task(
                "t",
                "a",
                vec![variant("a", VariantState::Ready, 2, own(1.0)), variant("b", VariantState::Ready, 1, own(2.0))],
            ),
            // c serves with 1 instance of 1 thread, 1 more starting; d is not loaded.
            task(
                "u",
                "c",
                vec![
                    VariantSnapshot { instances_starting: 1, ..variant("c", VariantState::Ready, 1, own(1.0)) },
                    variant("d", VariantState::Unloaded, 0, own(1.0)),
                ],
            ),
        ];
        let budget = budget(&totals, &tasks);
        assert_eq!(budget.cores_free, 0.0, "2 of a, 1 and 1 starting of c; b stands by");
        assert_eq!(budget.memory_free_bytes, 1000 * MIB - 5 * 100 * MIB, "a's 2, b's 1, c's 2");
        // A task on the shared pool holds the pool's threads, once.
        let shared = InstanceShare { cores: 0.0, ..own(0.0) };
        let tasks = [
            task("t", "a", vec![variant("a", VariantState::Ready, 3, shared)]),
            task("u", "c", vec![variant("c", VariantState::Ready, 1, shared)]),
        ];
        assert_eq!(super::budget(&totals, &tasks).cores_free, 2.0);
    }

    #[test]
    fn a_gpu_variant_holds_its_gpus_memory_and_a_loading_one_what_it_loads_with() {
        let on_gpu = InstanceShare { cores: 0.0, memory_bytes: 10 * MIB, gpu_memory_bytes: 500 * MIB };
        let totals =
            ResourceTotals { cores: 2.0, memory_bytes: 1000 * MIB, gpus: vec![(0, 4000 * MIB)], ..Default::default() };
        let loading = VariantSnapshot {
            instances_set: 2,
            device: "cuda:0".into(),
            ..variant("g", VariantState::Loading, 0, on_gpu)
        };
        let budget = budget(&totals, &[task("t", "x", vec![loading])]);
        assert_eq!(budget.gpus[0].memory_free_bytes, 3000 * MIB);
        assert_eq!(budget.memory_free_bytes, 980 * MIB);
        assert_eq!(gpu_index("cuda:3"), Some(3));
        assert_eq!(gpu_index("cpu"), None);
    }

    #[test]
    fn a_budget_of_nothing_is_refused() {
        assert!(ResourcesConfig::default().with_cores(0.0).validate().is_err());
        assert!(ResourcesConfig::default().with_memory_mib(0).validate().is_err());
        assert!(ResourcesConfig::default().with_cores(3.5).validate().is_ok());
        let totals = ResourcesConfig::default().with_cores(3.0).totals(0);
        assert_eq!(totals.cores, 3.0);
        assert!(totals.shared_pool_cores >= 1.0 && totals.memory_bytes > 0, "{totals:?}");
    }
}
