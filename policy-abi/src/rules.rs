//! The rules a policy must read the snapshot by to agree with the host: which variant
//! serves a task, whether a variant may serve, and the cores and memory instances
//! hold. The host computes the budget with these same functions, so a policy that
//! uses them counts as the host does.

use crate::snapshot::{InstanceShare, TaskSnapshot, VariantSnapshot, VariantState};

impl TaskSnapshot {
    /// The variant named `name`.
    pub fn variant(&self, name: &str) -> Option<&VariantSnapshot> {
        self.variants.iter().find(|v| v.name == name)
    }

    /// Whether the task has a variant named `name`.
    pub fn has_variant(&self, name: &str) -> bool {
        self.variant(name).is_some()
    }

    /// The variant serving the task: the one `active` names.
    pub fn active_variant(&self) -> Option<&VariantSnapshot> {
        self.variant(&self.active.variant)
    }

    /// The index of the serving variant in `variants`.
    pub fn active_index(&self) -> Option<usize> {
        self.variants.iter().position(|v| v.name == self.active.variant)
    }

    /// The cores the task's serving instances hold on their own, and whether they run
    /// on the intra-op pool sessions share (whose cores [`cores_held`] counts once
    /// for all tasks).
    pub fn serving_cores(&self) -> ServingCores {
        let Some(variant) = self.active_variant() else { return ServingCores::default() };
        let Some(share) = variant.share else { return ServingCores::default() };
        let serving = variant.serving_instances();
        ServingCores { own: share.serving_cores(serving), on_shared_pool: share.on_shared_pool() && serving > 0 }
    }

    /// The cores the task's serving instances hold, the shared pool
    /// (`shared_pool_cores`) counted where they run on it.
    pub fn cores_held(&self, shared_pool_cores: f64) -> f64 {
        self.serving_cores().with_pool(shared_pool_cores)
    }
}

/// What a task's serving instances hold of the cores: see
/// [`TaskSnapshot::serving_cores`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ServingCores {
    /// Cores of instances with threads of their own.
    pub own: f64,
    /// Whether they run on the pool sessions share.
    pub on_shared_pool: bool,
}

impl ServingCores {
    /// The cores in all, the shared pool holding `shared_pool_cores`.
    pub fn with_pool(self, shared_pool_cores: f64) -> f64 {
        self.own + if self.on_shared_pool { shared_pool_cores } else { 0.0 }
    }
}

/// The cores the serving instances of `tasks` hold: each task's own, and the pool
/// sessions share (`shared_pool_cores`) once, however many tasks run on it.
pub fn cores_held<'a>(tasks: impl IntoIterator<Item = &'a TaskSnapshot>, shared_pool_cores: f64) -> f64 {
    let mut all = ServingCores::default();
    for task in tasks {
        let held = task.serving_cores();
        all.own += held.own;
        all.on_shared_pool |= held.on_shared_pool;
    }
    all.with_pool(shared_pool_cores)
}

impl VariantSnapshot {
    /// Whether the variant may serve its task: it fits the task and did not fail to
    /// load. The host refuses a switch to any other.
    pub fn may_serve(&self) -> bool {
        self.refused.is_none() && self.state != VariantState::Failed
    }

    /// Instances serving and starting.
    pub fn serving_instances(&self) -> u32 {
        self.instances + self.instances_starting
    }

    /// Whether the variant holds memory: it is loaded, or loading.
    pub fn holds_memory(&self) -> bool {
        matches!(self.state, VariantState::Ready | VariantState::Loading | VariantState::Warming)
    }

    /// The instances a loaded variant holds memory for: those serving and starting,
    /// or, while it loads, those it loads with.
    pub fn loaded_instances(&self) -> u32 {
        match self.state {
            VariantState::Loading | VariantState::Warming if self.instances == 0 => self.instances_set.max(1),
            _ => self.serving_instances(),
        }
    }
}

impl InstanceShare {
    /// Whether instances run on the intra-op pool sessions share rather than threads
    /// of their own.
    pub fn on_shared_pool(&self) -> bool {
        self.cores == 0.0
    }

    /// The cores `instances` instances hold of their own while they serve.
    pub fn serving_cores(&self, instances: u32) -> f64 {
        self.cores * f64::from(instances)
    }

    /// The host and GPU memory `instances` instances hold, bytes.
    pub fn memory_of(&self, instances: u32) -> (u64, u64) {
        let n = u64::from(instances);
        (self.memory_bytes * n, self.gpu_memory_bytes * n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::ServingKnobs;

    fn task(name: &str, cores: f64, instances: u32) -> TaskSnapshot {
        let variant = |name: &str| VariantSnapshot {
            name: name.into(),
            state: VariantState::Ready,
            instances,
            share: Some(InstanceShare { cores, ..InstanceShare::default() }),
            ..VariantSnapshot::default()
        };
        TaskSnapshot {
            name: name.into(),
            active: ServingKnobs { variant: "small".into(), ..ServingKnobs::default() },
            variants: vec![variant("large"), variant("small")],
            ..TaskSnapshot::default()
        }
    }

    #[test]
    fn the_active_variant_is_the_one_active_names() {
        let task = task("t", 1.0, 1);
        assert_eq!(task.active_variant().map(|v| v.name.as_str()), Some("small"));
        assert_eq!(task.active_index(), Some(1));
        assert!(task.has_variant("large") && !task.has_variant("medium"));
    }

    #[test]
    fn the_shared_pool_is_counted_once_for_all_tasks() {
        let own = task("own", 1.0, 2);
        let pooled = [task("a", 0.0, 1), task("b", 0.0, 3)];
        assert_eq!(own.cores_held(4.0), 2.0);
        assert_eq!(pooled[0].cores_held(4.0), 4.0);
        assert_eq!(cores_held(&pooled, 4.0), 4.0, "two tasks on the pool hold it once");
        assert_eq!(cores_held(pooled.iter().chain([&own]), 4.0), 6.0);
        assert_eq!(cores_held([&task("idle", 0.0, 0)], 4.0), 0.0, "no instance on the pool holds none of it");
    }

    #[test]
    fn a_refused_or_failed_variant_may_not_serve() {
        let mut variant = task("t", 1.0, 1).variants.remove(0);
        assert!(variant.may_serve());
        variant.state = VariantState::Failed;
        assert!(!variant.may_serve());
        variant.state = VariantState::Ready;
        variant.refused = Some("outputs do not match".into());
        assert!(!variant.may_serve());
    }

    #[test]
    fn a_loading_variant_holds_memory_for_the_instances_it_loads_with() {
        let mut variant = VariantSnapshot { state: VariantState::Loading, instances_set: 3, ..Default::default() };
        assert!(variant.holds_memory());
        assert_eq!(variant.loaded_instances(), 3);
        variant.state = VariantState::Unloaded;
        assert!(!variant.holds_memory());
    }
}
