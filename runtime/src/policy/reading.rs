//! The snapshot the control loop hands its policy: the running tasks as their
//! traffic, queues and variants read now, and the machine (cores, CPU, memory, GPUs,
//! the preprocessing pool).

use std::sync::Arc;

use modelless_policy_abi::{ABI_VERSION, PreprocessingSnapshot, Snapshot, SystemSnapshot};

use super::budget::{ResourceTotals, budget};
use super::snapshot::{TaskReading, round, task_snapshot};
use crate::metrics::{CpuSample, machine_memory};
use crate::preprocess::PoolReading;
use crate::registry::Task;

/// The snapshot of `tasks` and the machine now, the CPU's use read between the
/// samples `cpu`, and the budget of `totals` where one is kept (the controller stamps
/// its tick and time).
pub(super) fn snapshot(
    tasks: &[Arc<Task>],
    cpu: Option<(CpuSample, CpuSample)>,
    totals: Option<&ResourceTotals>,
) -> Snapshot {
    let tasks: Vec<_> = tasks.iter().map(|task| task_snapshot(task_reading(task))).collect();
    let utilisation = cpu.and_then(|(now, before)| now.since(&before));
    let memory = machine_memory();
    let system = SystemSnapshot {
        cores: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
        cpu_host_percent: utilisation.map(|u| round(u.host_percent)),
        cpu_process_percent: utilisation.map(|u| round(u.process_percent)),
        memory_total_bytes: memory.map(|m| m.0),
        memory_available_bytes: memory.map(|m| m.1),
        gpus: crate::metrics::gpu_snapshots(),
        preprocessing: None,
        budget: totals.map(|totals| budget(totals, &tasks)),
    };
    Snapshot { abi_version: ABI_VERSION, tick: 0, now_ms: 0, tasks, system }
}

/// The preprocessing pool as a policy sees it, over the tick since `before`.
pub(super) fn pool_snapshot(now: &PoolReading, before: &PoolReading) -> PreprocessingSnapshot {
    PreprocessingSnapshot {
        threads: now.threads as u32,
        queue_length: now.queued as u64,
        queue_size: now.queue_size as u64,
        utilisation_percent: round(now.utilisation_since(before) * 100.0),
    }
}

/// What the snapshot reports of a running task.
fn task_reading(task: &Task) -> TaskReading {
    let (active, queue_length) = task.serving();
    TaskReading {
        name: task.name().to_string(),
        traffic: task.traffic().read(),
        queue_length,
        slo_latency_ms: task.latency_slo_ms(),
        active,
        variants: task.variant_snapshots(),
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    #[test]
    fn the_preprocessing_pool_is_reported_busy_as_a_share_of_its_threads_time() {
        let before = PoolReading { at: Instant::now(), threads: 2, queued: 0, queue_size: 64, busy_seconds: 3.0 };
        let now = PoolReading { at: before.at + Duration::from_secs(2), queued: 5, busy_seconds: 6.0, ..before };
        let reported = pool_snapshot(&now, &before);
        assert_eq!((reported.threads, reported.queue_length, reported.queue_size), (2, 5, 64));
        assert_eq!(reported.utilisation_percent, 75.0, "3 s of work in 2 s of 2 threads");
    }
}
