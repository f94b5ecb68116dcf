//! What a tick's decision may still take of the budget as the control core plans it:
//! the cores and memory free when the snapshot was read, less what the actions
//! planned so far take, plus what they free. Pure, like the core.

use modelless_policy_abi::{Budget, Snapshot};

use super::budget::gpu_index;

/// A loaded variant that serves no task: it may be unloaded to make room.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Idle {
    pub task: String,
    pub variant: String,
    /// Since it last served, ms; the longest idle goes first.
    pub idle_ms: u64,
    pub host_bytes: u64,
    pub gpu_bytes: u64,
    pub gpu: Option<u32>,
}

/// The budget as the plan stands.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Ledger {
    cores: f64,
    cores_free: f64,
    memory_bytes: u64,
    memory_free: u64,
    /// Each GPU's index, memory and memory free.
    gpus: Vec<(u32, u64, u64)>,
    /// Loaded variants serving nothing, the least recently served first; empty where
    /// the budget does not let loads unload them.
    idle: Vec<Idle>,
}

/// Memory a load needs on one device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Need {
    pub host_bytes: u64,
    pub gpu_bytes: u64,
    pub gpu: Option<u32>,
}

impl Ledger {
    /// The ledger of `snapshot`'s budget, if it has one.
    pub(super) fn of(snapshot: &Snapshot) -> Option<Ledger> {
        let budget: &Budget = snapshot.system.budget.as_ref()?;
        let mut idle: Vec<Idle> = if budget.unload_idle {
            snapshot
                .tasks
                .iter()
                .flat_map(|task| task.variants.iter().map(move |v| (task, v)))
                .filter(|(task, v)| v.name != task.active.variant && v.holds_memory())
                .filter(|(_, v)| v.instances_starting == 0 && v.state == modelless_policy_abi::VariantState::Ready)
                .filter_map(|(task, v)| {
                    let (host_bytes, gpu_bytes) = v.share.as_ref()?.memory_of(v.loaded_instances());
                    Some(Idle {
                        task: task.name.clone(),
                        variant: v.name.clone(),
                        idle_ms: v.idle_ms.unwrap_or(u64::MAX),
                        host_bytes,
                        gpu_bytes,
                        gpu: gpu_index(&v.device),
                    })
                })
                .collect()
        } else {
            Vec::new()
        };
        idle.sort_by_key(|i| std::cmp::Reverse(i.idle_ms));
        Some(Ledger {
            cores: budget.cores,
            cores_free: budget.cores_free,
            memory_bytes: budget.memory_bytes,
            memory_free: budget.memory_free_bytes,
            gpus: budget.gpus.iter().map(|g| (g.index, g.memory_bytes, g.memory_free_bytes)).collect(),
            idle,
        })
    }

    /// Takes `cores` more (a negative figure gives cores back), or says why it cannot.
    pub(super) fn take_cores(&mut self, cores: f64) -> Result<(), String> {
        if cores > self.cores_free + 1e-9 {
            return Err(format!(
                "it needs {} more of the budget's {} cores, and {} are free",
                figure(cores),
                figure(self.cores),
                figure(self.cores_free.max(0.0))
            ));
        }
        self.cores_free -= cores;
        Ok(())
    }

    /// Takes the memory `need` asks, unloading idle variants for room (the least
    /// recently served first, never `keep`'s, given as task and variant) where free
    /// memory is short: the variants to unload, or why it cannot be had.
    pub(super) fn take_memory(&mut self, need: Need, keep: (&str, &str)) -> Result<Vec<Idle>, String> {
        let mut unloaded = Vec::new();
        while let Some(short) = self.shortfall(need) {
            let at = self
                .idle
                .iter()
                .position(|idle| (idle.task.as_str(), idle.variant.as_str()) != keep && frees(idle, need, short));
            let Some(at) = at else {
                // What was unloaded for this load is not unloaded after all.
                for idle in unloaded.drain(..).rev() {
                    self.give_back(&idle);
                    self.idle.insert(0, idle);
                }
                return Err(self.memory_refusal(need));
            };
            let idle = self.idle.remove(at);
            self.memory_free += idle.host_bytes;
            if let Some(gpu) = self.gpu_mut(idle.gpu) {
                gpu.2 += idle.gpu_bytes;
            }
            unloaded.push(idle);
        }
        self.memory_free -= need.host_bytes;
        if let Some(gpu) = self.gpu_mut(need.gpu) {
            gpu.2 -= need.gpu_bytes;
        }
        Ok(unloaded)
    }

    /// Memory `variant` of `task` frees, unloaded by the decision: it is no longer
    /// there to unload for room.
    pub(super) fn unloaded(&mut self, task: &str, variant: &str) {
        if let Some(at) = self.idle.iter().position(|i| i.task == task && i.variant == variant) {
            let idle = self.idle.remove(at);
            self.memory_free += idle.host_bytes;
            if let Some(gpu) = self.gpu_mut(idle.gpu) {
                gpu.2 += idle.gpu_bytes;
            }
        }
    }

    /// Where memory falls short of `need`: host memory, or its GPU's.
    fn shortfall(&self, need: Need) -> Option<Short> {
        if need.host_bytes > self.memory_free {
            return Some(Short::Host);
        }
        let gpu_free = need.gpu.map(|i| self.gpus.iter().find(|g| g.0 == i).map_or(0, |g| g.2));
        gpu_free.filter(|&free| need.gpu_bytes > free).map(|_| Short::Gpu)
    }

    fn give_back(&mut self, idle: &Idle) {
        self.memory_free -= idle.host_bytes;
        if let Some(gpu) = self.gpu_mut(idle.gpu) {
            gpu.2 -= idle.gpu_bytes;
        }
    }

    fn gpu_mut(&mut self, index: Option<u32>) -> Option<&mut (u32, u64, u64)> {
        let index = index?;
        self.gpus.iter_mut().find(|g| g.0 == index)
    }

    fn memory_refusal(&self, need: Need) -> String {
        let mib = |bytes: u64| bytes >> 20;
        match (self.shortfall(need), need.gpu.and_then(|i| self.gpus.iter().find(|g| g.0 == i))) {
            (Some(Short::Gpu), Some(&(index, total, free))) => format!(
                "it needs {} MiB of cuda:{index}'s memory, and {} MiB of its {} MiB budget are free with no idle \
                 variant to unload",
                mib(need.gpu_bytes),
                mib(free),
                mib(total)
            ),
            _ => format!(
                "it needs {} MiB of host memory, and {} MiB of the {} MiB budget are free with no idle variant to \
                 unload",
                mib(need.host_bytes),
                mib(self.memory_free),
                mib(self.memory_bytes)
            ),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Short {
    Host,
    Gpu,
}

/// Whether unloading `idle` frees memory where `need` falls `short`.
fn frees(idle: &Idle, need: Need, short: Short) -> bool {
    match short {
        Short::Host => idle.host_bytes > 0,
        Short::Gpu => idle.gpu == need.gpu && idle.gpu_bytes > 0,
    }
}

/// Cores as a report says them: whole where they are.
fn figure(cores: f64) -> String {
    if cores.fract() == 0.0 { format!("{cores:.0}") } else { format!("{cores:.2}") }
}
