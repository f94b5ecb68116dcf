//! Adding a metric to the process's registry.

use prometheus::Registry as PromRegistry;
use prometheus::core::Collector;

/// Adds a metric to `registry`. Names and labels are constants of the metrics module, each
/// registered once, so neither step can fail.
pub(super) fn register<M: Collector + Clone + 'static>(registry: &PromRegistry, metric: prometheus::Result<M>) -> M {
    let metric = metric.unwrap_or_else(|e| unreachable!("metric definition: {e}"));
    registry.register(Box::new(metric.clone())).unwrap_or_else(|e| unreachable!("metric registration: {e}"));
    metric
}
