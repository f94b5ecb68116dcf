//! The process's Prometheus metrics, named the way Triton names its own
//! (`nv_inference_request_success` becomes `modelless_inference_request_success`) and
//! labelled by task and variant (a plain model is its own task and variant).
//!
//! Counters move on the request path through [`ModelCounters`], handles bound to one
//! model's labels once when it starts, so serving a request costs a few atomic adds.
//! Gauges (queue lengths, active variants, CPU, GPUs) are read when the metrics are scraped.
//! Counters live as long as the process: a new version of a variant goes on counting
//! where the old one stopped, as Prometheus expects of a counter.

use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Duration;

use prometheus::{
    Encoder, Gauge, GaugeVec, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry as PromRegistry, TextEncoder,
};

use super::cpu::CpuSample;
use super::failures::ModelFailures;
use super::gpu_gauges::GpuGauges;
use super::model_counters::{ModelCounters, STAGES};
use super::register::register;

/// What the gauges show at one moment, read by whoever owns the models and tasks
/// (the registry), so that metrics need not know them.
#[derive(Clone, Debug, Default)]
pub struct GaugeReading {
    /// Requests waiting, per (model or task, variant serving it).
    pub pending: Vec<(String, String, u64)>,
    /// Each task's variants, and whether each is the one serving.
    pub variants: Vec<(String, String, bool)>,
    /// The preprocessing pool, where there is one.
    pub preprocessing: Option<PoolGauges>,
    /// Each task's demand over what this replica can serve of it within its latency
    /// target at its best allocation, where it has a target and a priced variant.
    pub demand_ratios: Vec<(String, f64)>,
}

/// The preprocessing pool's gauges.
#[derive(Clone, Copy, Debug, Default)]
pub struct PoolGauges {
    /// Images waiting.
    pub queued: usize,
    /// Its threads.
    pub threads: usize,
    /// Seconds its threads have worked.
    pub busy_seconds: f64,
}

/// The most a task's demand ratio reads as.
pub const DEMAND_RATIO_CAP: f64 = 10.0;

/// Every metric the process exports.
pub struct ServingMetrics {
    registry: PromRegistry,
    request_success: IntCounterVec,
    request_failure: IntCounterVec,
    inference_count: IntCounterVec,
    exec_count: IntCounterVec,
    request_duration_us: IntCounterVec,
    queue_duration_us: IntCounterVec,
    compute_infer_duration_us: IntCounterVec,
    compute_io_duration_us: IntCounterVec,
    batch_run_duration_us: IntCounterVec,
    needless_refusals: IntCounterVec,
    request_latency: HistogramVec,
    stage_durations: [HistogramVec; STAGES.len()],
    preprocess_queue: IntGauge,
    preprocess_threads: IntGauge,
    preprocess_busy_seconds: Gauge,
    pending_requests: IntGaugeVec,
    active_variant: IntGaugeVec,
    demand_ratio: GaugeVec,
    variant_switches: IntCounterVec,
    policy_decision: HistogramVec,
    policy_failures: IntCounterVec,
    policy_unknown_fields: IntCounterVec,
    endpoint_refusals: IntCounterVec,
    source_polls: IntCounterVec,
    policy_rollbacks: IntCounterVec,
    source_updates: IntCounterVec,
    panics: IntCounterVec,
    policy_on_fallback: IntGauge,
    pipeline_requests: IntCounterVec,
    pipeline_latency: HistogramVec,
    pipeline_stage_duration: HistogramVec,
    pipeline_stage_items: HistogramVec,
    cpu_utilization: Gauge,
    process_cpu_utilization: Gauge,
    last_cpu: Mutex<Option<CpuSample>>,
    gpu: GpuGauges,
}

// Its parts (sessions, threads, closures, channels) print nothing useful.
impl std::fmt::Debug for ServingMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServingMetrics").finish_non_exhaustive()
    }
}

/// Buckets of a pipeline's and its stages' times, s: pages take tens of ms to seconds.
const PIPELINE_BUCKETS: [f64; 12] = [0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0];

/// Buckets of the stage histograms, in seconds: 20 µs to 5 s.
const STAGE_BUCKETS: [f64; 15] =
    [0.00002, 0.00005, 0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.5, 1.0, 5.0];

/// The process's metrics.
pub fn serving_metrics() -> &'static ServingMetrics {
    static METRICS: OnceLock<ServingMetrics> = OnceLock::new();
    METRICS.get_or_init(ServingMetrics::new)
}

const MODEL_LABELS: [&str; 2] = ["task", "variant"];

impl ServingMetrics {
    fn new() -> Self {
        let registry = PromRegistry::new();
        let counters = |name: &str, help: &str, labels: &[&str]| {
            register(&registry, IntCounterVec::new(Opts::new(name, help), labels))
        };
        let gauges = |name: &str, help: &str, labels: &[&str]| {
            register(&registry, IntGaugeVec::new(Opts::new(name, help), labels))
        };
        let gauge = |name: &str, help: &str| register(&registry, Gauge::new(name, help));
        let request_latency = register(
            &registry,
            HistogramVec::new(
                HistogramOpts::new(
                    "modelless_inference_request_latency_seconds",
                    "Time from admission to answer of successful requests",
                )
                .buckets(vec![0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0]),
                &MODEL_LABELS,
            ),
        );
        let stage_durations = STAGES.map(|(name, help)| {
            let opts = HistogramOpts::new(name, help).buckets(STAGE_BUCKETS.to_vec());
            register(&registry, HistogramVec::new(opts, &MODEL_LABELS))
        });
        let int_gauge = |name: &str, help: &str| register(&registry, IntGauge::new(name, help));
        let preprocess_queue =
            int_gauge("modelless_preprocess_queue_length", "Requests waiting for a preprocessing thread");
        let preprocess_threads = int_gauge("modelless_preprocess_threads", "Threads of the preprocessing pool");
        let preprocess_busy_seconds = gauge(
            "modelless_preprocess_busy_seconds_total",
            "Time the preprocessing pool's threads have spent working (its rate over threads is their utilisation)",
        );
        let policy_decision = register(
            &registry,
            HistogramVec::new(
                HistogramOpts::new(
                    "modelless_policy_decision_duration_seconds",
                    "Time one policy decision took, by the module's digest",
                )
                .buckets(vec![0.00005, 0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.05]),
                &["policy_digest"],
            ),
        );
        let policy_on_fallback = register(
            &registry,
            IntGauge::new(
                "modelless_policy_on_fallback",
                "1 while the native fallback policy decides because the loaded one failed",
            ),
        );
        let histograms = |name: &str, help: &str, labels: &[&str], buckets: &[f64]| {
            register(&registry, HistogramVec::new(HistogramOpts::new(name, help).buckets(buckets.to_vec()), labels))
        };
        let pipeline_latency = histograms(
            "modelless_pipeline_request_latency_seconds",
            "Time from a pipeline request's arrival to its answer, answered or not",
            &["pipeline"],
            &PIPELINE_BUCKETS,
        );
        let pipeline_stage_duration = histograms(
            "modelless_pipeline_stage_duration_seconds",
            "Time one request's items took through one stage of a pipeline, from the first submitted to the \
             last answered",
            &["pipeline", "stage"],
            &PIPELINE_BUCKETS,
        );
        let pipeline_stage_items = histograms(
            "modelless_pipeline_stage_items",
            "Items one request ran through one stage of a pipeline (past the first stage: the fan-out)",
            &["pipeline", "stage"],
            &[0.0, 1.0, 2.0, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0],
        );
        ServingMetrics {
            request_success: counters(
                "modelless_inference_request_success",
                "Requests answered successfully",
                &MODEL_LABELS,
            ),
            request_failure: counters(
                "modelless_inference_request_failure",
                "Requests not answered, by reason",
                &["task", "variant", "reason"],
            ),
            inference_count: counters(
                "modelless_inference_count",
                "Inferences performed (a request of n rows counts n)",
                &MODEL_LABELS,
            ),
            exec_count: counters(
                "modelless_inference_exec_count",
                "Batches executed (one batch runs many requests)",
                &MODEL_LABELS,
            ),
            request_duration_us: counters(
                "modelless_inference_request_duration_us",
                "Cumulative time from admission to answer of successful requests",
                &MODEL_LABELS,
            ),
            queue_duration_us: counters(
                "modelless_inference_queue_duration_us",
                "Cumulative time successful requests waited in the queue",
                &MODEL_LABELS,
            ),
            compute_infer_duration_us: counters(
                "modelless_inference_compute_infer_duration_us",
                "Cumulative time the backend ran the batches of successful requests",
                &MODEL_LABELS,
            ),
            compute_io_duration_us: counters(
                "modelless_inference_compute_io_duration_us",
                "Cumulative time joining inputs into batches and splitting outputs",
                &MODEL_LABELS,
            ),
            batch_run_duration_us: counters(
                "modelless_inference_batch_run_duration_us",
                "Cumulative time sessions ran batches, each batch once, not counting waits for a turn",
                &MODEL_LABELS,
            ),
            needless_refusals: counters(
                "modelless_inference_needless_refusals",
                "Requests refused while the variant could have served them: its queue empty, or it answered \
                 under 0.8 of its profiled capacity in the second of the refusal (also counted by reason in \
                 modelless_inference_request_failure)",
                &MODEL_LABELS,
            ),
            request_latency,
            stage_durations,
            preprocess_queue,
            preprocess_threads,
            preprocess_busy_seconds,
            pending_requests: gauges(
                "modelless_inference_pending_request_count",
                "Requests waiting in the queue",
                &MODEL_LABELS,
            ),
            active_variant: gauges(
                "modelless_task_active_variant",
                "1 for the variant that serves the task, 0 for the others",
                &MODEL_LABELS,
            ),
            demand_ratio: register(
                &registry,
                GaugeVec::new(
                    Opts::new(
                        "modelless_task_demand_ratio",
                        "Requests a second arriving (the 10 s rate, or the last second's where it moved beyond \
                         noise), over the most this replica answers within the task's latency target at its best \
                         allocation (1: all it can; capped at 10)",
                    ),
                    &["task"],
                ),
            ),
            variant_switches: counters(
                "modelless_variant_switches",
                "Switches of a task's active variant",
                &["task", "from", "to"],
            ),
            policy_decision,
            policy_failures: counters(
                "modelless_policy_failures",
                "Policy decisions discarded, by the module's digest and the kind of failure",
                &["policy_digest", "kind"],
            ),
            policy_unknown_fields: counters(
                "modelless_policy_unknown_decision_fields",
                "Fields of policies' decisions this host does not know, ignored (a policy built for a newer ABI, \
                 or a misspelt knob), by the module's digest",
                &["policy_digest"],
            ),
            endpoint_refusals: counters(
                "modelless_endpoint_refusals",
                "Requests an endpoint refused before they reached a model (undecodable, over a limit, \
                 not matching the model), by endpoint and code",
                &["endpoint", "code"],
            ),
            policy_rollbacks: counters(
                "modelless_policy_rollbacks",
                "Policies put back after the one that replaced them served worse within its watch window, by \
                 the digests of the one rolled back and the one put back",
                &["from_digest", "to_digest"],
            ),
            source_polls: counters(
                "modelless_source_polls",
                "Polls of followed tags (policies, model versions), by reference and result: `ok` or `failed`",
                &["reference", "result"],
            ),
            source_updates: counters(
                "modelless_source_updates",
                "New digests a followed tag pointed at, by reference and result: `applied`, or `refused` \
                 (not fetched, not verified, or not loaded)",
                &["reference", "result"],
            ),
            panics: counters(
                "modelless_request_panics",
                "Requests whose handling panicked and was answered INTERNAL, by where it panicked",
                &["site"],
            ),
            policy_on_fallback,
            pipeline_requests: counters(
                "modelless_pipeline_requests",
                "Pipeline requests by outcome: `success`, or the kind of failure",
                &["pipeline", "outcome"],
            ),
            pipeline_latency,
            pipeline_stage_duration,
            pipeline_stage_items,
            cpu_utilization: gauge("modelless_cpu_utilization", "CPU utilisation of the machine, 0 to 1"),
            process_cpu_utilization: gauge(
                "modelless_process_cpu_utilization",
                "CPU utilisation of this process, 0 to 1 of all cores",
            ),
            last_cpu: Mutex::new(CpuSample::now()),
            gpu: GpuGauges::new(&registry),
            registry,
        }
    }

    /// Handles for the counters of one model: `task` and `variant` label them.
    pub fn model_counters(&self, task: &str, variant: &str) -> ModelCounters {
        let labels = [task, variant];
        ModelCounters {
            success: self.request_success.with_label_values(&labels),
            failures: ModelFailures::new(&self.request_failure, task, variant),
            inferences: self.inference_count.with_label_values(&labels),
            executions: self.exec_count.with_label_values(&labels),
            request_us: self.request_duration_us.with_label_values(&labels),
            queue_us: self.queue_duration_us.with_label_values(&labels),
            compute_us: self.compute_infer_duration_us.with_label_values(&labels),
            io_us: self.compute_io_duration_us.with_label_values(&labels),
            batch_run_us: self.batch_run_duration_us.with_label_values(&labels),
            needless_refusals: self.needless_refusals.with_label_values(&labels),
            latency: self.request_latency.with_label_values(&labels),
            stages: self.stage_durations.each_ref().map(|h| h.with_label_values(&labels)),
        }
    }

    /// Refusals of `task`'s `variant` so far that it had the time to serve.
    pub fn needless_refusals(&self, task: &str, variant: &str) -> u64 {
        self.needless_refusals.get_metric_with_label_values(&[task, variant]).map_or(0, |c| c.get())
    }

    /// Counters of the requests `task` refuses before any variant takes them; their
    /// `variant` label is empty.
    pub fn task_refusals(&self, task: &str) -> ModelFailures {
        ModelFailures::unbound(&self.request_failure, task, "")
    }

    /// Counts a switch of `task` from one variant to another.
    pub fn variant_switched(&self, task: &str, from: &str, to: &str) {
        self.variant_switches.with_label_values(&[task, from, to]).inc();
    }

    /// Counts a request `endpoint` (`grpc`, `http`) refused with `code` before it
    /// reached a model.
    pub fn endpoint_refused(&self, endpoint: &str, code: &str) {
        self.endpoint_refusals.with_label_values(&[endpoint, code]).inc();
    }

    /// Counts a rollback from the policy of `from` to the one of `to`.
    pub fn policy_rolled_back(&self, from: &str, to: &str) {
        self.policy_rollbacks.with_label_values(&[from, to]).inc();
    }

    /// Counts a poll of the followed tag `reference`; `ok` when the registry answered.
    pub fn source_polled(&self, reference: &str, ok: bool) {
        self.source_polls.with_label_values(&[reference, if ok { "ok" } else { "failed" }]).inc();
    }

    /// Counts a new digest of the followed tag `reference`, applied or refused.
    pub fn source_updated(&self, reference: &str, applied: bool) {
        self.source_updates.with_label_values(&[reference, if applied { "applied" } else { "refused" }]).inc();
    }

    /// Counts a request whose handling panicked at `site` (`grpc`, `http`, `batch`).
    pub fn request_panicked(&self, site: &str) {
        self.panics.with_label_values(&[site]).inc();
    }

    /// Records how long a decision of the policy of `digest` took, and why it was
    /// discarded if it was.
    pub fn policy_decided(&self, digest: &str, took: Duration, failure: Option<&str>, on_fallback: bool) {
        self.policy_decision.with_label_values(&[digest]).observe(took.as_secs_f64());
        if let Some(kind) = failure {
            self.policy_failures.with_label_values(&[digest, kind]).inc();
        }
        self.policy_on_fallback.set(i64::from(on_fallback));
    }

    /// Counts `fields` fields of a decision of the policy of `digest` that this host
    /// does not know.
    pub fn policy_wrote_unknown_fields(&self, digest: &str, fields: usize) {
        self.policy_unknown_fields.with_label_values(&[digest]).inc_by(fields as u64);
    }

    /// Records one request's run through `stage` of `pipeline`: `items` items in `took`.
    pub fn pipeline_stage_ran(&self, pipeline: &str, stage: &str, items: usize, took: Duration) {
        let labels = [pipeline, stage];
        self.pipeline_stage_duration.with_label_values(&labels).observe(took.as_secs_f64());
        self.pipeline_stage_items.with_label_values(&labels).observe(items as f64);
    }

    /// Counts a request `pipeline` answered after `took`, or failed with the kind of
    /// failure `failure`.
    pub fn pipeline_answered(&self, pipeline: &str, took: Duration, failure: Option<&str>) {
        self.pipeline_requests.with_label_values(&[pipeline, failure.unwrap_or("success")]).inc();
        self.pipeline_latency.with_label_values(&[pipeline]).observe(took.as_secs_f64());
    }

    /// Sets the gauges from `gauges` and the machine, then encodes every metric in
    /// Prometheus' text format.
    pub fn render(&self, gauges: &GaugeReading) -> String {
        self.read_gauges(gauges);
        let mut text = Vec::new();
        if let Err(e) = TextEncoder::new().encode(&self.registry.gather(), &mut text) {
            tracing::warn!(error = %e, "metrics not encoded");
        }
        String::from_utf8_lossy(&text).into_owned()
    }

    fn read_gauges(&self, gauges: &GaugeReading) {
        // Models and variants that went away leave no stale gauge behind.
        self.pending_requests.reset();
        self.active_variant.reset();
        for (model, variant, queued) in &gauges.pending {
            self.pending_requests.with_label_values(&[model, variant]).set(*queued as i64);
        }
        if let Some(pool) = &gauges.preprocessing {
            self.preprocess_queue.set(pool.queued as i64);
            self.preprocess_threads.set(pool.threads as i64);
            self.preprocess_busy_seconds.set(pool.busy_seconds);
        }
        for (task, variant, active) in &gauges.variants {
            self.active_variant.with_label_values(&[task, variant]).set(i64::from(*active));
        }
        self.demand_ratio.reset();
        for (task, ratio) in &gauges.demand_ratios {
            // A demand no capacity meets reads as the cap: autoscalers pass the value on
            // through integers, where +Inf overflows.
            self.demand_ratio.with_label_values(&[task]).set(ratio.min(DEMAND_RATIO_CAP));
        }
        let now = CpuSample::now();
        let mut last = self.last_cpu.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(utilisation) = now.as_ref().zip(last.as_ref()).and_then(|(now, before)| now.since(before)) {
            self.cpu_utilization.set(utilisation.host_percent / 100.0);
            self.process_cpu_utilization.set(utilisation.process_percent / 100.0);
        }
        if now.is_some() {
            *last = now;
        }
        self.gpu.read(&super::gpu_snapshots());
    }
}

#[cfg(test)]
mod tests {
    use modelless_policy_abi::GpuSnapshot;

    use super::*;
    use crate::error::Error;
    use crate::request::Timings;

    #[test]
    fn counters_of_one_model_move_together_and_render_with_labels() {
        let metrics = serving_metrics();
        let counters = metrics.model_counters("exposition-test", "v1");
        let timings = Timings {
            decode: Duration::from_micros(3000),
            preprocess: Duration::from_micros(700),
            queue: Duration::from_micros(100),
            compute_input: Duration::from_micros(6),
            compute: Duration::from_micros(900),
            postprocess: Duration::from_micros(4),
            total: Duration::from_micros(4710),
        };
        counters.served(3, &timings);
        counters.served(1, &timings);
        counters.executed(Duration::from_micros(850));
        counters.failed(&Error::DeadlineExceeded { model: "v1".into() });
        let totals = counters.totals();
        assert_eq!((totals.success, totals.inferences, totals.executions, totals.failure), (2, 4, 1, 1));
        assert_eq!(totals.compute, Duration::from_micros(1800));
        assert_eq!(totals.batch_run, Duration::from_micros(850), "one batch counts once");
        let text = metrics.render(&GaugeReading::default());
        let line = r#"modelless_inference_count{task="exposition-test",variant="v1"} 4"#;
        assert!(text.contains(line), "{text}");
        let line = r#"modelless_inference_request_failure{reason="expired",task="exposition-test",variant="v1"} 1"#;
        assert!(text.contains(line), "{text}");
        // Both decodes took 3 ms: in the 5 ms bucket, not the 2 ms one.
        let decode = r#"modelless_inference_decode_duration_seconds_bucket{task="exposition-test",variant="v1",le="#;
        assert!(text.contains(&format!(r#"{decode}"0.002"}} 0"#)), "{text}");
        assert!(text.contains(&format!(r#"{decode}"0.005"}} 2"#)), "{text}");
    }

    #[test]
    fn each_tasks_demand_ratio_renders_capped_and_a_task_gone_leaves_none() {
        let metrics = ServingMetrics::new();
        let reading = GaugeReading {
            demand_ratios: vec![("ratio-a".into(), 0.75), ("ratio-b".into(), f64::INFINITY)],
            ..GaugeReading::default()
        };
        let text = metrics.render(&reading);
        assert!(text.contains("modelless_task_demand_ratio{task=\"ratio-a\"} 0.75"), "{text}");
        assert!(text.contains("modelless_task_demand_ratio{task=\"ratio-b\"} 10"), "{text}");
        let text = metrics.render(&GaugeReading::default());
        assert!(!text.contains("ratio-a"), "{text}");
    }

    #[test]
    fn gpu_gauges_show_the_figures_a_gpu_gives_and_drop_a_gpu_that_went() {
        let registry = PromRegistry::new();
        let gauges = GpuGauges::new(&registry);
        let gpu = GpuSnapshot {
            index: 1,
            name: "Test GPU".into(),
            utilisation_percent: Some(40.0),
            memory_used_bytes: Some(3 << 30),
            memory_total_bytes: Some(80 << 30),
            temperature_c: None,
            power_w: Some(212.5),
            sm_clock_mhz: Some(1755),
            throttle_reasons: vec!["sw_power_cap".into()],
        };
        gauges.read(std::slice::from_ref(&gpu));
        let mut text = Vec::new();
        TextEncoder::new().encode(&registry.gather(), &mut text).unwrap();
        let text = String::from_utf8(text).unwrap();
        for line in [
            r#"modelless_gpu_utilization{gpu="1",name="Test GPU"} 0.4"#,
            r#"modelless_gpu_memory_used_bytes{gpu="1",name="Test GPU"} 3221225472"#,
            r#"modelless_gpu_power_watts{gpu="1",name="Test GPU"} 212.5"#,
            r#"modelless_gpu_sm_clock_mhz{gpu="1",name="Test GPU"} 1755"#,
            r#"modelless_gpu_clocks_throttled{gpu="1",name="Test GPU",reason="sw_power_cap"} 1"#,
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
        assert!(!text.contains("modelless_gpu_temperature_celsius{"), "a figure the GPU does not give is absent");
        gauges.read(&[]);
        assert!(registry.gather().iter().all(|family| family.get_metric().is_empty()));
    }
}
