use modelless_policy_abi::{ProfileKey, Throughput};

use super::*;
use crate::backend::fake::{BatchLog, FakeBackend, FakeConfig};
use crate::profile::MemoryProbe;
use crate::tensor::Tensor;
use crate::warmup::WarmupConfig;

/// Variants v0, v1, v2 of accuracy 60, 70, 80, all loaded, v0 active.
fn task(find_profile: Option<FindProfile>) -> Task {
    let mut config = TaskConfig::new("classify");
    for (i, accuracy) in [60.0, 70.0, 80.0].into_iter().enumerate() {
        let variant = VariantConfig::new(format!("v{i}"), "fake", accuracy).with_warmup(WarmupConfig::disabled());
        config = config.with_variant(variant.with_preload(true));
    }
    let make: MakeBackend = Arc::new(|_, _| FakeBackend::factory(FakeConfig::default(), BatchLog::default()));
    Task::start_profiled(config, make, find_profile).unwrap()
}

/// Profiles with these maximal throughputs by variant name; none for the others.
fn profiles(throughputs: &'static [(&'static str, f64)]) -> FindProfile {
    Arc::new(move |variant, _, _| {
        let (_, per_s) = throughputs.iter().find(|(name, _)| *name == variant.name)?;
        Some(Profile {
            key: ProfileKey { model_sha256: "00".into(), device: "cpu".into(), settings: "{}".into() },
            points: Vec::new(),
            fit: None,
            fit_refused: None,
            max_throughput: Some(Throughput { requests_per_s: *per_s, batch_size: 1 }),
            memory_budget_bytes: None,
            max_safe_batch: None,
            first_runs: Vec::new(),
        })
    })
}

#[test]
fn batches_are_capped_to_what_fits_the_measured_memory_and_larger_requests_run_split() {
    let fake = FakeConfig { memory_per_row: 1 << 20, per_batch: Duration::from_millis(20), ..FakeConfig::default() };
    let log = BatchLog::default();
    let make: MakeBackend = {
        let log = log.clone();
        Arc::new(move |_, _| FakeBackend::factory(fake.clone(), log.clone()))
    };
    let batching = BatchingConfig::default().with_max_batch_size(8);
    let variant = VariantConfig::new("v", "fake", 50.0).with_batching(batching).with_warmup(WarmupConfig::disabled());
    // What the profiler stores for a memory budget that fits 3 rows.
    let find: FindProfile = Arc::new(|_, _, _| {
        Some(Profile {
            key: ProfileKey { model_sha256: "00".into(), device: "cuda:0".into(), settings: "{}".into() },
            points: Vec::new(),
            fit: None,
            fit_refused: None,
            max_throughput: None,
            memory_budget_bytes: Some(3 << 20),
            max_safe_batch: Some(3),
            first_runs: Vec::new(),
        })
    });
    let task = Task::start_profiled(TaskConfig::new("gpu").with_variant(variant), make, Some(find)).unwrap();
    let row = || Inputs::from(Tensor::new([1, 4], vec![1.0f32; 4]).unwrap());
    let tickets: Vec<_> = (0..10).map(|_| task.submit(row(), &Slo::default()).unwrap()).collect();
    tickets.into_iter().for_each(|t| drop(t.wait().unwrap()));
    assert!(log.sizes().iter().all(|&rows| rows <= 3), "{:?}", log.sizes());
    assert!(log.sizes().contains(&3), "batches grow to the cap: {:?}", log.sizes());
    assert!(log.bytes_in_use().unwrap() <= 3 << 20);
    let seven_rows: Vec<f32> = (0..7 * 4).map(|i| i as f32).collect();
    let answer = task.submit(Inputs::from(Tensor::new([7, 4], seven_rows.clone()).unwrap()), &Slo::default());
    let answer = answer.unwrap().wait().unwrap();
    // The fake backend answers its input: the parts come back joined in order.
    assert_eq!(answer.first().unwrap().as_slice::<f32>().unwrap(), &seven_rows[..]);
    assert!(log.sizes().iter().all(|&rows| rows <= 3), "{:?}", log.sizes());
    assert!(log.bytes_in_use().unwrap() <= 3 << 20);
    let nine_rows = Inputs::from(Tensor::new([9, 4], vec![1.0f32; 36]).unwrap());
    let refused = task.submit(nine_rows, &Slo::default()).err();
    assert!(matches!(refused, Some(Error::RequestTooLarge { rows: 9, max_batch_size: 8, .. })), "{refused:?}");
    // A policy asking for more than fits gets what fits.
    let asked = BatchingKnobs { max_batch_size: Some(8), ..BatchingKnobs::default() };
    assert_eq!(task.configure_variant("v", asked).unwrap().max_batch_size, 3);
    assert_eq!(task.batch_ceilings(), [("v".to_string(), 3)]);
}

#[test]
fn knobs_set_for_a_variant_not_loaded_are_those_it_loads_and_serves_with() {
    let mut config = TaskConfig::new("knobs");
    for name in ["v0", "v1"] {
        config = config.with_variant(VariantConfig::new(name, "fake", 70.0).with_warmup(WarmupConfig::disabled()));
    }
    let make: MakeBackend = Arc::new(|_, _| FakeBackend::factory(FakeConfig::default(), BatchLog::default()));
    let task = Task::start(config, make).unwrap();
    let one = BatchingKnobs { max_batch_size: Some(1), max_queue_delay_us: Some(250) };
    let set = task.configure_variant("v1", one).unwrap();
    assert_eq!((set.max_batch_size, set.max_queue_delay_us), (1, 250));
    assert_eq!(task.serving().0.max_batch_size, 8, "the active variant keeps its own");
    task.switch_to("v1").unwrap();
    let (knobs, _) = task.serving();
    assert_eq!((knobs.variant.as_str(), knobs.max_batch_size, knobs.max_queue_delay_us), ("v1", 1, 250));
    let unknown = task.configure_variant("v9", one).err();
    assert!(matches!(unknown, Some(Error::UnknownVariant { .. })), "{unknown:?}");
}

#[test]
fn a_variant_not_loaded_is_priced_by_its_stored_profile_and_never_measured_for_it() {
    let mut config = TaskConfig::new("priced");
    for name in ["v0", "v1", "v2"] {
        config = config.with_variant(VariantConfig::new(name, "fake", 70.0).with_warmup(WarmupConfig::disabled()));
    }
    let asked = Arc::new(Mutex::new(Vec::new()));
    let stored = profiles(&[("v0", 50.0), ("v1", 120.0)]);
    let find: FindProfile = {
        let asked = asked.clone();
        Arc::new(move |variant, path, lookup| {
            asked.lock().unwrap().push((variant.name.clone(), lookup));
            stored(variant, path, lookup)
        })
    };
    let make: MakeBackend = Arc::new(|_, _| FakeBackend::factory(FakeConfig::default(), BatchLog::default()));
    let task = Task::start_profiled(config, make, Some(find)).unwrap();
    let throughput = |name: &str| {
        let snapshot = task.variant_snapshots().into_iter().find(|v| v.name == name).unwrap();
        (snapshot.state, snapshot.profile.and_then(|p| p.max_throughput).map(|t| t.requests_per_s))
    };
    assert_eq!(throughput("v1"), (VariantState::Unloaded, Some(120.0)), "priced though not loaded");
    assert_eq!(throughput("v2"), (VariantState::Unloaded, None), "nothing stored, nothing priced");
    assert!(task.profile("v1").unwrap().is_some());
    let asked = asked.lock().unwrap().clone();
    let lookup = |name: &str| asked.iter().filter(|(n, _)| n == name).map(|(_, l)| *l).collect::<Vec<_>>();
    assert_eq!(lookup("v0"), [ProfileLookup::AsConfigured], "the active one as it loads");
    assert_eq!(lookup("v1"), [ProfileLookup::Stored], "the others: stored only, nothing measured at start");
    // Loaded, then unloaded: still priced by what its version had.
    task.switch_to("v1").unwrap();
    task.switch_to("v0").unwrap();
    task.unload_variant("v1").unwrap();
    assert_eq!(throughput("v1"), (VariantState::Unloaded, Some(120.0)));
}

#[test]
fn a_profile_without_a_memory_limit_leaves_the_batching_as_configured() {
    let batching = BatchingConfig::default().with_max_batch_size(8).with_preferred_batch_sizes([8, 4]);
    let mut profile =
        profiles(&[("v", 100.0)])(&VariantConfig::new("v", "fake", 1.0), Path::new("fake"), ProfileLookup::Stored)
            .unwrap();
    assert_eq!(memory_capped(batching.clone(), Some(&profile)), batching);
    profile.max_safe_batch = Some(16);
    assert_eq!(memory_capped(batching.clone(), Some(&profile)), batching);
    profile.max_safe_batch = Some(5);
    let capped = memory_capped(batching, Some(&profile));
    assert_eq!((capped.max_batch_size, capped.preferred_batch_sizes), (5, vec![4]));
}

fn served(task: &Task, min_accuracy: f64) -> String {
    let input = Inputs::from(Tensor::new([1, 4], vec![1.0f32; 4]).unwrap());
    let slo = Slo::default().with_min_accuracy(min_accuracy);
    task.submit(input, &slo).unwrap().wait().unwrap().model.to_string()
}

#[test]
fn with_every_variant_profiled_the_cheapest_by_throughput_serves_accuracy_requests() {
    // v2 is listed last but answers four times as many requests a second as v1.
    let task = task(Some(profiles(&[("v0", 500.0), ("v1", 100.0), ("v2", 400.0)])));
    assert_eq!(served(&task, 65.0), "v2");
    assert_eq!(served(&task, 55.0), "v0", "the active variant is accurate enough");
    let status = task.status();
    let v1 = status.variant("v1").unwrap();
    assert_eq!(v1.versions[0].max_throughput_per_s, Some(100.0));
    assert_eq!(task.profile("v2").unwrap().and_then(|p| p.max_throughput).map(|t| t.requests_per_s), Some(400.0));
}

#[test]
fn the_task_counts_its_traffic_as_requests_end() {
    let task = task(None);
    for _ in 0..5 {
        served(&task, 50.0);
    }
    let input = Inputs::from(Tensor::new([1, 4], vec![1.0f32; 4]).unwrap());
    assert!(task.submit(input, &Slo::default().with_min_accuracy(99.0)).is_err());
    let reading = task.traffic().read();
    assert_eq!(reading.in_flight, 0);
    assert_eq!(reading.tick.latencies_ms.len(), 5);
    assert_eq!(reading.tick.rejections, 1);
    assert!(task.traffic().read().tick.latencies_ms.is_empty(), "a reading takes the tick's answers");
}

#[test]
fn without_a_profile_for_every_variant_the_configured_order_decides() {
    let task = task(Some(profiles(&[("v0", 500.0), ("v2", 400.0)])));
    assert_eq!(served(&task, 65.0), "v1");
    assert!(task.profile("v1").unwrap().is_none());
    assert_eq!(served(&self::task(None), 65.0), "v1");
}

#[test]
fn a_variant_snapshot_counts_the_batches_its_sessions_ran() {
    let variant = VariantConfig::new("only", "fake", 70.0).with_warmup(WarmupConfig::disabled());
    let config = TaskConfig::new("runs-counted").with_variant(variant.with_preload(true));
    let slow =
        FakeConfig { per_batch: Duration::from_millis(2), per_row: Duration::from_millis(1), ..FakeConfig::default() };
    let make: MakeBackend = Arc::new(move |_, _| FakeBackend::factory(slow.clone(), BatchLog::default()));
    let task = Task::start_profiled(config, make, None).unwrap();
    for rows in [1, 3] {
        let input = Inputs::from(Tensor::new([rows, 4], vec![1.0f32; 4 * rows]).unwrap());
        task.submit(input, &Slo::default()).unwrap().wait().unwrap();
    }
    let runs = task.variant_snapshots()[0].runs.unwrap();
    assert_eq!((runs.batches, runs.rows), (2, 4));
    assert!(runs.run_ms >= 2.0 * 2.0 + 4.0, "two batches of 2 ms and four rows of 1 ms: {runs:?}");
}

#[test]
fn a_switch_moves_the_requests_waiting_for_the_replaced_variant() {
    // `slow` runs one row at a time, 100 ms each; `fast` takes no time.
    let one_row = BatchingConfig::default().with_max_batch_size(1);
    let mut config = TaskConfig::new("moves-waiting");
    for name in ["slow", "fast"] {
        let variant = VariantConfig::new(name, "fake", 70.0).with_warmup(WarmupConfig::disabled());
        config = config.with_variant(variant.with_preload(true).with_batching(one_row.clone()));
    }
    let make: MakeBackend = Arc::new(|variant, _| {
        let per_batch = if variant.name == "slow" { Duration::from_millis(100) } else { Duration::ZERO };
        FakeBackend::factory(FakeConfig { per_batch, ..FakeConfig::default() }, BatchLog::default())
    });
    let task = Task::start_profiled(config, make, None).unwrap();
    let input = || Inputs::from(Tensor::new([1, 4], vec![1.0f32; 4]).unwrap());
    let tickets: Vec<_> = (0..4).map(|_| task.submit(input(), &Slo::default()).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(task.switch_to("fast").unwrap().moved, 3, "one runs on `slow`, three wait");
    let served: Vec<String> = tickets.into_iter().map(|t| t.wait().unwrap().model.to_string()).collect();
    assert_eq!(served, ["slow", "fast", "fast", "fast"]);
    assert_eq!(task.traffic().read().in_flight, 0, "each counted once as it ended");
}

#[test]
fn a_batch_waiting_for_its_turn_takes_in_the_requests_that_arrive_meanwhile() {
    let log = BatchLog::default();
    let variant = VariantConfig::new("v", "fake", 70.0).with_warmup(WarmupConfig::disabled()).with_preload(true);
    let config = TaskConfig::new("tops-up").with_variant(variant);
    let fake = FakeConfig { takes_turns: true, ..FakeConfig::default() };
    let sizes = log.clone();
    let make: MakeBackend = Arc::new(move |_, _| FakeBackend::factory(fake.clone(), sizes.clone()));
    let task = Task::start_profiled(config, make, None).unwrap();
    let input = || Inputs::from(Tensor::new([1, 4], vec![1.0f32; 4]).unwrap());
    // Another task's batch holds the turn: the first request's batch waits for it,
    // and three more arrive meanwhile.
    let other = crate::backend::turns::RUN_TURNS.take();
    let first = task.submit(input(), &Slo::default()).unwrap();
    std::thread::sleep(Duration::from_millis(30));
    let more: Vec<_> = (0..3).map(|_| task.submit(input(), &Slo::default()).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(30));
    drop(other);
    let batch_sizes: Vec<usize> = std::iter::once(first).chain(more).map(|t| t.wait().unwrap().batch_size).collect();
    assert_eq!(batch_sizes, [4, 4, 4, 4]);
    assert_eq!(log.sizes(), [4], "one run, not one for the first request and one for the rest");
}

#[test]
fn a_variant_whose_fit_was_refused_shows_what_it_ran_even_once_unloaded() {
    // A profile that kept no line (its R² was too low): a policy prices the variant by
    // the batches it ran.
    let refused: FindProfile = Arc::new(|_, _, _| {
        Some(Profile {
            key: ProfileKey { model_sha256: "00".into(), device: "cpu".into(), settings: "{}".into() },
            points: Vec::new(),
            fit: None,
            fit_refused: Some("R² 0.306 below 0.9".into()),
            max_throughput: Some(Throughput { requests_per_s: 100.0, batch_size: 1 }),
            memory_budget_bytes: None,
            max_safe_batch: None,
            first_runs: Vec::new(),
        })
    });
    // A name of its own: the counters are the process's, by task and variant.
    let mut config = TaskConfig::new("refused-fit");
    for (i, accuracy) in [60.0, 70.0].into_iter().enumerate() {
        let variant = VariantConfig::new(format!("v{i}"), "fake", accuracy).with_warmup(WarmupConfig::disabled());
        config = config.with_variant(variant.with_preload(true));
    }
    let make: MakeBackend = Arc::new(|_, _| FakeBackend::factory(FakeConfig::default(), BatchLog::default()));
    let task = Task::start_profiled(config, make, Some(refused)).unwrap();
    let row = || Inputs::from(Tensor::new([1, 4], vec![1.0f32; 4]).unwrap());
    for _ in 0..5 {
        task.submit(row(), &Slo::default()).unwrap().wait().unwrap();
    }
    let v0 = |task: &Task| task.variant_snapshots().into_iter().find(|v| v.name == "v0").unwrap();
    let seen = v0(&task);
    assert_eq!(seen.profile.as_ref().and_then(|p| p.fit), None);
    let runs = seen.runs.expect("what it ran");
    assert!(runs.batches >= 1 && runs.rows == 5, "{runs:?}");
    task.switch_to("v1").unwrap();
    task.unload_variant("v0").unwrap();
    let unloaded = v0(&task);
    assert!(matches!(unloaded.state, VariantState::Draining | VariantState::Unloaded), "{:?}", unloaded.state);
    assert_eq!(unloaded.runs, Some(runs), "the totals it last showed");
}

#[test]
fn demand_is_held_against_what_the_best_allocation_serves_within_the_target() {
    // 4 ms a row and 4 a batch of up to 8, on one thread of its own: 2 cores fit 2
    // instances, each at 0.85 × 8 rows / 36 ms.
    let line: FindProfile = Arc::new(|_, _, _| {
        Some(Profile {
            key: ProfileKey { model_sha256: "00".into(), device: "cpu".into(), settings: "{}".into() },
            points: Vec::new(),
            fit: Some(LatencyFit { a_ms: 4.0, c_ms: 4.0, r2: 0.999 }),
            fit_refused: None,
            max_throughput: None,
            memory_budget_bytes: None,
            max_safe_batch: None,
            first_runs: Vec::new(),
        })
    });
    let mut variant = VariantConfig::new("v", "fake", 70.0)
        .with_warmup(WarmupConfig::disabled())
        .with_batching(BatchingConfig::default().with_max_batch_size(8));
    variant.onnx.intra_op_threads = Some(1);
    let mut config = TaskConfig::new("demand-ratio").with_variant(variant);
    let make: MakeBackend = Arc::new(|_, _| FakeBackend::factory(FakeConfig::default(), BatchLog::default()));
    let untargeted = Task::start_profiled(config.clone(), make.clone(), Some(line.clone())).unwrap();
    assert_eq!(untargeted.demand_ratio(2.0), None, "no target, nothing to hold demand against");
    config.latency_slo_ms = Some(100.0);
    let task = Task::start_profiled(config, make, Some(line)).unwrap();
    let one = 0.85 * 1e3 * 8.0 / 36.0;
    assert!((task.capacity_per_s(1.0).unwrap() - one).abs() < 1e-9);
    assert!((task.capacity_per_s(2.5).unwrap() - 2.0 * one).abs() < 1e-9, "two instances fit 2.5 cores");
    let row = || Inputs::from(Tensor::new([1, 4], vec![1.0f32; 4]).unwrap());
    for _ in 0..30 {
        task.submit(row(), &Slo::default()).unwrap().wait().unwrap();
    }
    // Demand counts whole seconds: wait (boundedly) for the one they arrived in to end.
    for _ in 0..300 {
        if task.traffic().demand().per_s_10s > 0.0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let ratio = task.demand_ratio(2.0).unwrap();
    // 30 requests within a second or two: the last second stands out of the 10 s rate.
    let demand = crate::profile::arriving_per_s(&task.traffic().demand());
    assert!(demand > 0.0 && (ratio - demand / (2.0 * one)).abs() < 1e-9, "{ratio} for {demand}/s");
}

#[test]
fn a_variant_switched_to_starts_unstretched() {
    // Both profiled at 10 ms a batch; `b`'s fake takes 40 ms, so its answers overrun.
    let fit = LatencyFit { a_ms: 0.0, c_ms: 10.0, r2: 1.0 };
    let find: FindProfile = Arc::new(move |_, _, _| {
        Some(Profile {
            key: ProfileKey { model_sha256: "00".into(), device: "cpu".into(), settings: "{}".into() },
            points: Vec::new(),
            fit: Some(fit),
            fit_refused: None,
            max_throughput: None,
            memory_budget_bytes: None,
            max_safe_batch: None,
            first_runs: Vec::new(),
        })
    });
    let one_row = BatchingConfig::default().with_max_batch_size(1);
    let mut config = TaskConfig::new("switched-unstretched").with_active("b");
    for name in ["a", "b"] {
        let variant = VariantConfig::new(name, "fake", 70.0).with_warmup(WarmupConfig::disabled());
        config = config.with_variant(variant.with_preload(true).with_batching(one_row.clone()));
    }
    let make: MakeBackend = Arc::new(|variant, _| {
        let per_batch = Duration::from_millis(if variant.name == "b" { 40 } else { 1 });
        FakeBackend::factory(FakeConfig { per_batch, ..FakeConfig::default() }, BatchLog::default())
    });
    let task = Task::start_profiled(config, make, Some(find)).unwrap();
    let margin_of = |task: &Task, variant: &str| {
        let status = task.status();
        let version = status.variant(variant).and_then(|v| v.versions.last().cloned()).unwrap();
        match version.admission {
            Some(Admission::Predictive { margin, .. }) => margin,
            other => panic!("{variant} is not admitted by prediction: {other:?}"),
        }
    };
    let input = || Inputs::from(Tensor::new([1, 4], vec![1.0f32; 4]).unwrap());
    // Due in 30 ms, predicted in 10, answered at 40 (or given up): late, three times,
    // which is more than a stall.
    let due = Slo::default().with_latency(Duration::from_millis(30));
    for _ in 0..3 {
        let _ = task.submit(input(), &due).unwrap().wait();
    }
    let noted = Instant::now() + Duration::from_secs(5);
    while margin_of(&task, "b") <= 1.0 && Instant::now() < noted {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(margin_of(&task, "b") > 2.0, "`b` overran: {}", margin_of(&task, "b"));
    task.switch_to("a").unwrap();
    task.switch_to("b").unwrap();
    assert_eq!(margin_of(&task, "b"), 1.0, "switched to, `b` starts from its profile");
}

/// Profiles of `slow` and `fast` taking `slow_ms` and `fast_ms` a batch.
fn slow_and_fast_profiles(slow_ms: u64, fast_ms: u64) -> FindProfile {
    Arc::new(move |variant, _, _| {
        let batch_ms = if variant.name == "slow" { slow_ms } else { fast_ms } as f64;
        Some(Profile {
            key: ProfileKey { model_sha256: "00".into(), device: "cpu".into(), settings: "{}".into() },
            points: Vec::new(),
            fit: Some(LatencyFit { a_ms: 0.0, c_ms: batch_ms, r2: 1.0 }),
            fit_refused: None,
            max_throughput: Some(Throughput { requests_per_s: 1e3 / batch_ms, batch_size: 1 }),
            memory_budget_bytes: None,
            max_safe_batch: None,
            first_runs: Vec::new(),
        })
    })
}

/// `slow` (accuracy 80, active) and `fast` (70, 1 ms a batch), both loaded, batches of one.
fn slow_and_fast(spill: bool) -> Task {
    slow_and_fast_at(spill, 100, 1)
}

/// Like [`slow_and_fast`], with `slow` and `fast` taking `slow_ms` and `fast_ms` a batch.
fn slow_and_fast_at(spill: bool, slow_ms: u64, fast_ms: u64) -> Task {
    let one_row = BatchingConfig::default().with_max_batch_size(1);
    let mut config = TaskConfig::new(format!("spill-{spill}")).with_active("slow").with_spill(spill);
    for (name, accuracy) in [("fast", 70.0), ("slow", 80.0)] {
        let variant = VariantConfig::new(name, "fake", accuracy).with_warmup(WarmupConfig::disabled());
        config = config.with_variant(variant.with_preload(true).with_batching(one_row.clone()));
    }
    let make: MakeBackend = Arc::new(move |variant, _| {
        let per_batch = Duration::from_millis(if variant.name == "slow" { slow_ms } else { fast_ms });
        FakeBackend::factory(FakeConfig { per_batch, ..FakeConfig::default() }, BatchLog::default())
    });
    Task::start_profiled(config, make, Some(slow_and_fast_profiles(slow_ms, fast_ms))).unwrap()
}

#[test]
fn a_request_the_active_variant_would_refuse_goes_to_a_cheaper_warm_one_that_answers_in_time() {
    let input = || Inputs::from(Tensor::new([1, 4], vec![1.0f32; 4]).unwrap());
    let due = Slo::default().with_latency(Duration::from_millis(250));
    for spill in [true, false] {
        let task = slow_and_fast(spill);
        // `slow` answers two in time (100 and 200 ms); a third would come at 300.
        let tickets: Vec<_> = (0..3).map(|_| task.submit(input(), &due)).collect();
        let served: Vec<String> = tickets
            .into_iter()
            .map(|t| match t.map(|t| t.wait()) {
                Ok(Ok(output)) => output.model.to_string(),
                Ok(Err(e)) | Err(e) => e.kind().as_str().to_string(),
            })
            .collect();
        let third = if spill { "fast" } else { "would_miss_deadline" };
        assert_eq!(served, ["slow", "slow", third], "spill {spill}");
        // One that asks for more accuracy than the cheaper one has is not moved there.
        let accurate = Slo::default().with_latency(Duration::from_millis(150)).with_min_accuracy(75.0);
        let _ahead = task.submit(input(), &due).unwrap();
        let refused = task.submit(input(), &accurate).map(drop);
        assert!(matches!(refused, Err(Error::WouldMissDeadline { .. })), "{refused:?}");
    }
}

#[test]
fn a_cheaper_variant_is_judged_as_running_beside_the_busy_one() {
    let input = || Inputs::from(Tensor::new([1, 4], vec![1.0f32; 4]).unwrap());
    // `slow` takes 200 ms a batch, `fast` 130. With one request of `slow`'s running,
    // a second due in 250 ms would come from `slow` at 400; `fast` alone would answer
    // it at 130, but beside `slow`, on the same cores, at about twice that: it is
    // refused, not spilled.
    let task = slow_and_fast_at(true, 200, 130);
    let due = Slo::default().with_latency(Duration::from_millis(250));
    let first = task.submit(input(), &due).unwrap();
    let second = task.submit(input(), &due).map(drop);
    assert!(matches!(second, Err(Error::WouldMissDeadline { .. })), "{second:?}");
    // One due in 290 ms, which `fast` beside `slow` answers at about 260, goes there.
    let later = Slo::default().with_latency(Duration::from_millis(290));
    let spilled = task.submit(input(), &later).unwrap().wait().unwrap();
    assert_eq!(spilled.model.as_ref(), "fast");
    assert_eq!(first.wait().unwrap().model.as_ref(), "slow");
}
