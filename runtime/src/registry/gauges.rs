//! What the metrics' gauges show, read from the registry's models and tasks.

use super::Registry;
use crate::metrics::{GaugeReading, PoolGauges};

impl Registry {
    /// The requests waiting per model and task, each task's variants and which one
    /// serves, each task's demand against what it can serve within its target, and the
    /// preprocessing pool's figures, as the gauges show them.
    pub fn gauge_reading(&self) -> GaugeReading {
        let mut reading = GaugeReading::default();
        for name in self.names() {
            if let Ok(model) = self.get(&name) {
                reading.pending.push((name.clone(), name, model.queued() as u64));
            }
        }
        let tasks = self.tasks();
        let cores = self.budget_cores();
        if let Some(task) = tasks.first() {
            let pool = task.preprocess_pool().read();
            reading.preprocessing =
                Some(PoolGauges { queued: pool.queued, threads: pool.threads, busy_seconds: pool.busy_seconds });
        }
        for task in &tasks {
            let status = task.status();
            for variant in &status.variants {
                reading.variants.push((task.name().to_string(), variant.name.clone(), variant.name == status.active));
            }
            let (_, queued) = task.serving();
            reading.pending.push((task.name().to_string(), status.active.clone(), queued));
            if let Some(ratio) = task.demand_ratio(cores) {
                reading.demand_ratios.push((task.name().to_string(), ratio));
            }
        }
        reading
    }
}
