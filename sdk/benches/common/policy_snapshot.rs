//! A busy snapshot of any size, for the policy benchmarks.

use modelless::policy_abi::{
    Budget, Demand, InstanceShare, LatencyFit, LatencySummary, RunTotals, ServingKnobs, Snapshot, SystemSnapshot,
    TaskSnapshot, Throughput, VariantCost, VariantSnapshot, VariantState,
};

/// `tasks` tasks of `variants` variants each: every task busy, every variant profiled.
pub fn busy_snapshot(tasks: usize, variants: usize) -> Snapshot {
    let tasks = (0..tasks)
        .map(|t| {
            let variants: Vec<VariantSnapshot> = (0..variants)
                .map(|v| {
                    let a_ms = 1.5 * (v + 1) as f64;
                    VariantSnapshot {
                        name: format!("task{t}-variant{v}"),
                        accuracy: 60.0 + 3.0 * v as f64,
                        state: if v == 2 { VariantState::Ready } else { VariantState::Unloaded },
                        device: "cpu".into(),
                        profile: Some(VariantCost {
                            fit: Some(LatencyFit { a_ms, c_ms: 0.8, r2: 0.998 }),
                            // At the precision snapshots carry measured rates: 0.1 request/s.
                            max_throughput: Some(Throughput {
                                requests_per_s: (1000.0 / a_ms * 10.0).round() / 10.0,
                                batch_size: 8,
                            }),
                            load_ms: Some(250.0),
                            memory_bytes: Some(14 << 20),
                            max_safe_batch: Some(32),
                            photos: Vec::new(),
                        }),
                        // The variant serving has run batches.
                        runs: (v == 2).then_some(RunTotals { batches: 5_000, rows: 32_000, run_ms: 61_234.5 }),
                        batch_ceiling: Some(32),
                        refused: None,
                        instances: u32::from(v == 2),
                        instances_starting: 0,
                        instances_set: 1,
                        share: Some(InstanceShare { cores: 1.0, memory_bytes: 28 << 20, gpu_memory_bytes: 0 }),
                        idle_ms: Some(if v == 2 { 0 } else { 12_345 }),
                    }
                })
                .collect();
            TaskSnapshot {
                name: format!("task{t}"),
                demand: Demand { per_s_1s: 120.0, per_s_10s: 110.0, per_s_60s: 90.0 },
                queue_length: 3,
                in_flight: 5,
                latency_ms: Some(LatencySummary { p50: 12.0, p95: 30.0, p99: 45.0 }),
                completed: 120,
                slo_violations: 1,
                rejections: 0,
                refusals: Default::default(),
                slo_latency_ms: Some(100.0),
                active: ServingKnobs {
                    variant: variants[2].name.clone(),
                    max_batch_size: 8,
                    max_queue_delay_us: 500,
                    instances: 1,
                },
                variants,
                photos: None,
            }
        })
        .collect();
    let system = SystemSnapshot {
        cores: 2,
        cpu_host_percent: Some(55.0),
        cpu_process_percent: Some(50.0),
        memory_total_bytes: Some(24 << 30),
        memory_available_bytes: Some(20 << 30),
        gpus: Vec::new(),
        preprocessing: None,
        budget: Some(Budget {
            cores: 2.0,
            cores_free: 0.0,
            shared_pool_cores: 2.0,
            memory_bytes: 24 << 30,
            memory_free_bytes: 23 << 30,
            gpus: Vec::new(),
            unload_idle: true,
        }),
    };
    Snapshot { abi_version: 1, tick: 7, now_ms: 7000, tasks, system }
}
