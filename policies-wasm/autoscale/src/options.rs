//! What a task may be served with: each variant that may serve it, at each number of
//! instances the budget allows, priced in cores held and in what must be loaded first,
//! with what it serves within the latency target.

use modelless_policy_abi::{
    Budget, LatencyFit, TaskSnapshot, VariantSnapshot, VariantState, capacity_within_slo, instances_within,
};

/// One way to serve a task.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Allocation {
    /// The variant (an index into the task's variants).
    pub variant: usize,
    /// Its accuracy.
    pub accuracy: f64,
    /// Its instances.
    pub instances: u32,
    /// The cores they hold while serving.
    pub cores: f64,
    /// Seconds of loading before they all serve (0 where they are warm).
    pub load_s: f64,
    /// Requests a second it answers within the target.
    pub capacity: f64,
}

impl Allocation {
    /// Its cost: cores held, plus `lambda` cores for each second of loading.
    pub fn cost(&self, lambda: f64) -> f64 {
        self.cores + lambda * self.load_s
    }
}

/// A variant's line: its profile's, or, where it has none, its mean time a row as its
/// sessions ran it (in proportion: totals cannot tell a cost per batch).
pub fn line(variant: &VariantSnapshot) -> Option<LatencyFit> {
    if let Some(fit) = variant.profile.as_ref().and_then(|p| p.fit) {
        return Some(fit);
    }
    let runs = variant.runs?;
    (runs.batches > 0 && runs.rows > 0 && runs.run_ms > 0.0).then(|| LatencyFit {
        a_ms: runs.run_ms / runs.rows as f64,
        c_ms: 0.0,
        r2: 0.0,
    })
}

/// The cores one instance of `variant` holds: its own threads, or, on the pool
/// sessions share, the pool (which more instances do not grow).
fn cores_of(variant: &VariantSnapshot, budget: Option<&Budget>) -> (f64, bool) {
    match variant.share.map(|s| s.cores) {
        Some(cores) if cores > 0.0 => (cores, false),
        _ => (budget.map_or(1.0, |b| b.shared_pool_cores.max(1.0)), true),
    }
}

/// What bounds a task's options besides the budget.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Limits {
    /// The machine's cores.
    pub machine_cores: f64,
    /// Most instances of one variant.
    pub max_instances: u32,
    /// Largest batch capacity is priced with.
    pub max_batch: u32,
}

/// Every option of `task` within `limits` and the budget's cores, for `slo_ms`, with
/// profiled lines at the machine's `pace` ([`crate::pace`]); each variant's options in
/// order of instances. A budget may hold more cores than the machine has (instances
/// that wait hold their threads, not the cores), but one task's instances beyond the
/// machine's cores would wait on each other: they add no capacity.
pub fn options(
    task: &TaskSnapshot,
    slo_ms: f64,
    budget: Option<&Budget>,
    limits: &Limits,
    pace: f64,
) -> Vec<Allocation> {
    let Limits { machine_cores, max_instances, max_batch } = *limits;
    let mut all = Vec::new();
    for (index, variant) in task.variants.iter().enumerate() {
        let Some(fit) = line(variant).filter(|_| variant.may_serve()) else { continue };
        let profiled = variant.profile.as_ref().is_some_and(|p| p.fit.is_some());
        let fit = if profiled { crate::pace::paced(fit, pace) } else { fit };
        let (per_instance, shared) = cores_of(variant, budget);
        let most = if shared {
            1
        } else {
            let held = instances_within(budget.map(|b| b.cores), per_instance, max_instances);
            held.min(instances_within(Some(machine_cores), per_instance, max_instances))
        };
        let ceiling = variant.batch_ceiling.unwrap_or(max_batch).min(max_batch).max(1);
        let load_s = variant.profile.as_ref().and_then(|p| p.load_ms).unwrap_or(1_000.0) / 1e3;
        let loaded = matches!(variant.state, VariantState::Ready);
        for instances in 1..=most {
            let warm = loaded && variant.instances >= instances;
            all.push(Allocation {
                variant: index,
                accuracy: variant.accuracy,
                instances,
                cores: if shared { per_instance } else { per_instance * f64::from(instances) },
                load_s: if warm { 0.0 } else { load_s },
                capacity: capacity_within_slo(&fit, ceiling, instances, slo_ms),
            });
        }
    }
    all
}
