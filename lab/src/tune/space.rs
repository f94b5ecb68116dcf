//! The knobs a search turns and the bounds it turns them within. A point of the space
//! is one number per knob (integers as whole floats), which both search strategies
//! share; [`KnobSpace::decode`] makes it a [`ServingSetting`] the runtime can apply.

use rand::Rng;
use serde::{Deserialize, Serialize};

use modelless::{RuntimeConfig, VariantConfig};

use super::cuda::{CudaSetting, SEARCHES};

/// The longest queue delay searched, µs: past it a batch waits longer than a
/// MobileNet batch runs here, and only latency is lost.
pub const MAX_QUEUE_DELAY_US: f64 = 10_000.0;
/// The largest batch searched where nothing smaller bounds it.
pub const MAX_SEARCHED_BATCH: usize = 32;
/// The most instances searched: each is a session with its own memory and thread.
pub const MAX_INSTANCES: usize = 4;

/// What bounds the space on this machine for one variant.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpaceLimits {
    /// The largest batch worth searching: [`MAX_SEARCHED_BATCH`], or less where the
    /// variant's profile found a smaller batch safe for its memory budget.
    pub max_batch: usize,
    /// Cores of this machine: intra-op threads range up to twice this.
    pub cores: usize,
    /// Whether the task takes images (the preprocessing pool's size is then a knob).
    pub images: bool,
    /// Whether the variant runs on a GPU (the CUDA provider's settings are then knobs).
    /// Left out of the JSON on a CPU, so that searches stored before it still match.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub gpu: bool,
}

impl SpaceLimits {
    /// The limits for a variant whose memory-safe batch is `memory_safe_batch` (if its
    /// profile measured one), on this machine.
    pub fn new(memory_safe_batch: Option<usize>, images: bool, gpu: bool) -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let max_batch = memory_safe_batch.map_or(MAX_SEARCHED_BATCH, |safe| safe.clamp(1, MAX_SEARCHED_BATCH));
        SpaceLimits { max_batch, cores, images, gpu }
    }
}

/// Which batch sizes the batcher prefers, given the largest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PreferredSizes {
    /// None: every batch goes as soon as its delay is up or it is full.
    None,
    /// Only the largest.
    Largest,
    /// The powers of two up to the largest, and the largest.
    PowersOfTwo,
}

impl PreferredSizes {
    const ALL: [PreferredSizes; 3] = [PreferredSizes::None, PreferredSizes::Largest, PreferredSizes::PowersOfTwo];

    /// The sizes, for a largest batch of `max`.
    pub fn sizes(self, max: usize) -> Vec<usize> {
        match self {
            PreferredSizes::None => Vec::new(),
            PreferredSizes::Largest => vec![max],
            PreferredSizes::PowersOfTwo => {
                let mut sizes: Vec<usize> = (0..).map(|p| 1usize << p).take_while(|&s| s < max).collect();
                sizes.push(max);
                sizes
            }
        }
    }
}

/// One point of the space as the runtime takes it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServingSetting {
    /// The variant's `max_batch_size`.
    pub max_batch_size: usize,
    /// The variant's `max_queue_delay_us`.
    pub max_queue_delay_us: u64,
    /// The variant's `preferred_batch_sizes`, as a rule.
    pub preferred_batch_sizes: PreferredSizes,
    /// The variant's `instances`.
    pub instances: usize,
    /// ONNX Runtime's intra-op threads.
    pub intra_op_threads: usize,
    /// Whether batches of all sessions take turns.
    pub one_run_at_a_time: bool,
    /// Whether ONNX Runtime's threads spin while they wait for work.
    pub spinning: bool,
    /// Threads of the preprocessing pool, where the task takes images.
    pub preprocessing_threads: Option<usize>,
    /// The CUDA provider's settings, where the variant runs on a GPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda: Option<CudaSetting>,
}

impl ServingSetting {
    /// What `config` says for `variant` of `task` today, within `limits` (what the
    /// tuned settings are compared with).
    pub fn of(config: &RuntimeConfig, variant: &VariantConfig, limits: &SpaceLimits) -> Self {
        let batching = &variant.batching;
        let preferred = match batching.preferred_batch_sizes.as_slice() {
            [] => PreferredSizes::None,
            [only] if *only == batching.max_batch_size => PreferredSizes::Largest,
            _ => PreferredSizes::PowersOfTwo,
        };
        ServingSetting {
            max_batch_size: batching.max_batch_size,
            max_queue_delay_us: batching.max_queue_delay_us,
            preferred_batch_sizes: preferred,
            instances: variant.instances,
            // 0 lets ONNX Runtime choose: one thread per core.
            intra_op_threads: match config.onnxruntime.intra_op_threads {
                0 => limits.cores,
                threads => threads,
            },
            one_run_at_a_time: config.onnxruntime.one_run_at_a_time,
            spinning: config.onnxruntime.spinning.unwrap_or(true),
            preprocessing_threads: limits.images.then(|| config.preprocessing.thread_count()),
            cuda: limits.gpu.then(|| CudaSetting::of(&variant.onnx.cuda)),
        }
    }

    /// Applies it to `variant` of `task` in `config`: the variant's batching and
    /// instances, the process's ONNX Runtime and preprocessing settings.
    pub fn apply(&self, config: &mut RuntimeConfig, task: &str, variant: &str) {
        config.onnxruntime.intra_op_threads = self.intra_op_threads;
        config.onnxruntime.one_run_at_a_time = self.one_run_at_a_time;
        config.onnxruntime.spinning = Some(self.spinning);
        if let Some(threads) = self.preprocessing_threads {
            config.preprocessing.threads = Some(threads);
        }
        let variants = config.tasks.iter_mut().filter(|t| t.name == task).flat_map(|t| t.variants.iter_mut());
        for configured in variants.filter(|v| v.name == variant) {
            configured.instances = self.instances;
            configured.batching.max_batch_size = self.max_batch_size;
            configured.batching.max_queue_delay_us = self.max_queue_delay_us;
            configured.batching.preferred_batch_sizes = self.preferred_batch_sizes.sizes(self.max_batch_size);
            if let Some(cuda) = &self.cuda {
                cuda.apply(&mut configured.onnx.cuda);
            }
        }
    }

    /// One line saying it, for progress and tables.
    pub fn brief(&self) -> String {
        let mut line = format!(
            "batch {} delay {} µs preferred {:?} instances {} threads {}{}{}",
            self.max_batch_size,
            self.max_queue_delay_us,
            self.preferred_batch_sizes,
            self.instances,
            self.intra_op_threads,
            if self.one_run_at_a_time { " turns" } else { "" },
            if self.spinning { " spin" } else { "" },
        );
        if let Some(threads) = self.preprocessing_threads {
            line.push_str(&format!(" preprocessing {threads}"));
        }
        if let Some(cuda) = &self.cuda {
            line.push(' ');
            line.push_str(&cuda.brief());
        }
        line
    }
}

/// A knob's range in the space.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum KnobRange {
    /// Whole numbers from `low` to `high`, both included.
    Int(i32, i32),
    /// Any number from `low` to `high`.
    Float(f64, f64),
}

/// The knobs, in the order of a point's numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Knob {
    MaxBatch,
    QueueDelay,
    Preferred,
    Instances,
    IntraOpThreads,
    Turns,
    Spinning,
    PreprocessingThreads,
    ConvAlgoSearch,
    Tf32,
    Nhwc,
    ConvMaxWorkspace,
    PinnedInputs,
    CudaGraph,
}

/// The space searched for one variant.
#[derive(Clone, Debug, PartialEq)]
pub struct KnobSpace {
    limits: SpaceLimits,
    knobs: Vec<Knob>,
}

impl KnobSpace {
    /// The space within `limits`.
    pub fn new(limits: SpaceLimits) -> Self {
        let mut knobs = vec![
            Knob::MaxBatch,
            Knob::QueueDelay,
            Knob::Preferred,
            Knob::Instances,
            Knob::IntraOpThreads,
            Knob::Turns,
            Knob::Spinning,
        ];
        if limits.images {
            knobs.push(Knob::PreprocessingThreads);
        }
        if limits.gpu {
            knobs.extend([
                Knob::ConvAlgoSearch,
                Knob::Tf32,
                Knob::Nhwc,
                Knob::ConvMaxWorkspace,
                Knob::PinnedInputs,
                Knob::CudaGraph,
            ]);
        }
        KnobSpace { limits, knobs }
    }

    /// Its limits.
    pub fn limits(&self) -> &SpaceLimits {
        &self.limits
    }

    /// Numbers in a point.
    pub fn dimensions(&self) -> usize {
        self.knobs.len()
    }

    /// Each knob's name and range, in a point's order.
    pub fn ranges(&self) -> Vec<(&'static str, KnobRange)> {
        let limits = &self.limits;
        let int = |high: usize| KnobRange::Int(1, high.min(i32::MAX as usize) as i32);
        self.knobs
            .iter()
            .map(|knob| match knob {
                Knob::MaxBatch => ("max_batch_size", int(limits.max_batch)),
                Knob::QueueDelay => ("max_queue_delay_us", KnobRange::Float(0.0, MAX_QUEUE_DELAY_US)),
                Knob::Preferred => ("preferred_batch_sizes", KnobRange::Int(0, PreferredSizes::ALL.len() as i32 - 1)),
                Knob::Instances => ("instances", int(MAX_INSTANCES)),
                Knob::IntraOpThreads => ("intra_op_threads", int(2 * limits.cores)),
                Knob::Turns => ("one_run_at_a_time", KnobRange::Int(0, 1)),
                Knob::Spinning => ("spinning", KnobRange::Int(0, 1)),
                Knob::PreprocessingThreads => ("preprocessing_threads", int(limits.cores)),
                Knob::ConvAlgoSearch => ("conv_algo_search", KnobRange::Int(0, SEARCHES.len() as i32 - 1)),
                Knob::Tf32 => ("tf32", KnobRange::Int(0, 1)),
                Knob::Nhwc => ("prefer_nhwc", KnobRange::Int(0, 1)),
                Knob::ConvMaxWorkspace => ("conv_max_workspace", KnobRange::Int(0, 1)),
                Knob::PinnedInputs => ("pinned_inputs", KnobRange::Int(0, 1)),
                Knob::CudaGraph => ("cuda_graph", KnobRange::Int(0, 1)),
            })
            .collect()
    }

    /// A point drawn uniformly from the space.
    pub fn sample(&self, rng: &mut impl Rng) -> Vec<f64> {
        self.ranges()
            .into_iter()
            .map(|(_, range)| match range {
                KnobRange::Int(low, high) => f64::from(rng.random_range(low..=high)),
                KnobRange::Float(low, high) => rng.random_range(low..=high),
            })
            .collect()
    }

    /// The point nearest `point` within the space: each number within its range,
    /// integers rounded.
    pub fn clamp(&self, point: &[f64]) -> Vec<f64> {
        self.ranges()
            .into_iter()
            .zip(point.iter().copied().chain(std::iter::repeat(0.0)))
            .map(|((_, range), x)| {
                let x = if x.is_finite() { x } else { 0.0 };
                match range {
                    KnobRange::Int(low, high) => x.round().clamp(f64::from(low), f64::from(high)),
                    KnobRange::Float(low, high) => x.clamp(low, high),
                }
            })
            .collect()
    }

    /// The setting at `point` (clamped into the space first).
    pub fn decode(&self, point: &[f64]) -> ServingSetting {
        let point = self.clamp(point);
        let value = |knob: Knob| self.knobs.iter().position(|&k| k == knob).map(|i| point[i]);
        let whole = |knob: Knob| value(knob).map_or(1, |x| x as usize);
        let on = |knob: Knob| value(knob).unwrap_or(0.0) >= 0.5;
        let max_batch_size = whole(Knob::MaxBatch);
        ServingSetting {
            max_batch_size,
            max_queue_delay_us: value(Knob::QueueDelay).unwrap_or(0.0).round() as u64,
            preferred_batch_sizes: PreferredSizes::ALL
                .get(value(Knob::Preferred).unwrap_or(0.0) as usize)
                .copied()
                .unwrap_or(PreferredSizes::None),
            instances: whole(Knob::Instances),
            intra_op_threads: whole(Knob::IntraOpThreads),
            one_run_at_a_time: on(Knob::Turns),
            spinning: on(Knob::Spinning),
            preprocessing_threads: value(Knob::PreprocessingThreads).map(|x| x as usize),
            cuda: value(Knob::ConvAlgoSearch).map(|search| CudaSetting {
                conv_algo_search: SEARCHES[(search as usize).min(SEARCHES.len() - 1)],
                tf32: on(Knob::Tf32),
                prefer_nhwc: on(Knob::Nhwc),
                conv_max_workspace: on(Knob::ConvMaxWorkspace),
                pinned_inputs: on(Knob::PinnedInputs),
                cuda_graph: on(Knob::CudaGraph),
            }),
        }
    }

    /// The point of `setting`, clamped into the space (a default configuration may lie
    /// outside it).
    pub fn encode(&self, setting: &ServingSetting) -> Vec<f64> {
        let cuda = setting.cuda.unwrap_or(CudaSetting::DEFAULT);
        let point: Vec<f64> = self
            .knobs
            .iter()
            .map(|knob| match knob {
                Knob::MaxBatch => setting.max_batch_size as f64,
                Knob::QueueDelay => setting.max_queue_delay_us as f64,
                Knob::Preferred => {
                    PreferredSizes::ALL.iter().position(|&p| p == setting.preferred_batch_sizes).unwrap_or(0) as f64
                }
                Knob::Instances => setting.instances as f64,
                Knob::IntraOpThreads => setting.intra_op_threads as f64,
                Knob::Turns => f64::from(u8::from(setting.one_run_at_a_time)),
                Knob::Spinning => f64::from(u8::from(setting.spinning)),
                Knob::PreprocessingThreads => setting.preprocessing_threads.unwrap_or(1) as f64,
                Knob::ConvAlgoSearch => SEARCHES.iter().position(|&s| s == cuda.conv_algo_search).unwrap_or(0) as f64,
                Knob::Tf32 => f64::from(u8::from(cuda.tf32)),
                Knob::Nhwc => f64::from(u8::from(cuda.prefer_nhwc)),
                Knob::ConvMaxWorkspace => f64::from(u8::from(cuda.conv_max_workspace)),
                Knob::PinnedInputs => f64::from(u8::from(cuda.pinned_inputs)),
                Knob::CudaGraph => f64::from(u8::from(cuda.cuda_graph)),
            })
            .collect();
        self.clamp(&point)
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    use super::*;

    fn limits(max_batch: usize, images: bool) -> SpaceLimits {
        SpaceLimits { max_batch, cores: 2, images, gpu: false }
    }

    /// A config of one task, `classify`, with one variant of these TOML lines.
    fn classify(variant: &str) -> RuntimeConfig {
        let text = format!("[[tasks]]\nname = \"classify\"\n[[tasks.variants]]\n{variant}\n");
        RuntimeConfig::from_toml(&text, std::path::Path::new("/models")).unwrap()
    }

    #[test]
    fn every_sampled_setting_keeps_within_the_bounds_and_the_memory_safe_batch() {
        let space = KnobSpace::new(SpaceLimits { cores: 2, ..SpaceLimits::new(Some(6), true, false) });
        let mut rng = StdRng::seed_from_u64(7);
        let mut seen_batches = std::collections::BTreeSet::new();
        for _ in 0..2000 {
            let setting = space.decode(&space.sample(&mut rng));
            seen_batches.insert(setting.max_batch_size);
            assert!((1..=6).contains(&setting.max_batch_size), "{setting:?}");
            assert!(setting.max_queue_delay_us <= MAX_QUEUE_DELAY_US as u64);
            assert!((1..=MAX_INSTANCES).contains(&setting.instances));
            assert!((1..=4).contains(&setting.intra_op_threads));
            assert!(matches!(setting.preprocessing_threads, Some(1..=2)));
            let sizes = setting.preferred_batch_sizes.sizes(setting.max_batch_size);
            assert!(sizes.iter().all(|&s| (1..=setting.max_batch_size).contains(&s)), "{sizes:?}");
            assert!(sizes.windows(2).all(|w| w[0] < w[1]), "{sizes:?}");
        }
        assert_eq!(seen_batches.len(), 6, "every batch size up to the safe one is reached");
    }

    #[test]
    fn without_images_there_is_no_preprocessing_knob_and_without_a_profile_the_batch_is_capped() {
        let space = KnobSpace::new(SpaceLimits::new(None, false, false));
        assert_eq!(space.limits().max_batch, MAX_SEARCHED_BATCH);
        assert!(space.ranges().iter().all(|(name, _)| *name != "preprocessing_threads"));
        let setting = space.decode(&space.sample(&mut StdRng::seed_from_u64(1)));
        assert_eq!(setting.preprocessing_threads, None);
        // A profile that measured a huge safe batch still leaves the search's cap.
        assert_eq!(SpaceLimits::new(Some(4096), false, false).max_batch, MAX_SEARCHED_BATCH);
    }

    #[test]
    fn the_default_is_what_the_config_serves_with() {
        let config = classify(
            r#"name = "small"
path = "small.onnx"
accuracy = 60.0
batching = { max_batch_size = 8, max_queue_delay_us = 2000, preferred_batch_sizes = [8] }"#,
        );
        let limits = limits(32, false);
        let default = ServingSetting::of(&config, &config.tasks[0].variants[0], &limits);
        // No thread count configured: ONNX Runtime takes one per core, and so does the default.
        assert_eq!(default.intra_op_threads, limits.cores);
        assert_eq!((default.max_batch_size, default.max_queue_delay_us), (8, 2000));
        assert_eq!(default.preferred_batch_sizes, PreferredSizes::Largest);
        assert_eq!((default.instances, default.one_run_at_a_time, default.spinning), (1, false, true));
        let mut applied = config.clone();
        default.apply(&mut applied, "classify", "small");
        assert_eq!(applied.tasks[0].variants[0].batching, config.tasks[0].variants[0].batching);
    }

    #[test]
    fn a_setting_survives_encoding_and_points_outside_are_pulled_in() {
        let space = KnobSpace::new(limits(16, false));
        let setting = ServingSetting {
            max_batch_size: 12,
            max_queue_delay_us: 2500,
            preferred_batch_sizes: PreferredSizes::PowersOfTwo,
            instances: 2,
            intra_op_threads: 3,
            one_run_at_a_time: true,
            spinning: false,
            preprocessing_threads: None,
            cuda: None,
        };
        assert_eq!(space.decode(&space.encode(&setting)), setting);
        assert_eq!(PreferredSizes::PowersOfTwo.sizes(12), vec![1, 2, 4, 8, 12]);
        let outside = space.decode(&[100.0, -5.0, 9.0, 0.0, f64::NAN, 0.7, 0.2]);
        assert_eq!(outside.max_batch_size, 16);
        assert_eq!(outside.max_queue_delay_us, 0);
        assert_eq!(outside.preferred_batch_sizes, PreferredSizes::PowersOfTwo);
        assert_eq!((outside.instances, outside.intra_op_threads), (1, 1));
        assert!(outside.one_run_at_a_time && !outside.spinning);
    }

    #[test]
    fn a_cpu_variants_space_and_setting_read_as_they_did_before_gpus_had_knobs() {
        let limits = limits(8, false);
        assert_eq!(
            serde_json::to_value(&limits).unwrap(),
            serde_json::json!({"max_batch": 8, "cores": 2, "images": false})
        );
        let stored: SpaceLimits = serde_json::from_str(r#"{"max_batch": 8, "cores": 2, "images": false}"#).unwrap();
        assert_eq!(stored, limits);
        let setting = KnobSpace::new(limits).decode(&[4.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0]);
        assert!(serde_json::to_value(&setting).unwrap().get("cuda").is_none());
    }

    #[test]
    fn a_gpu_variant_searches_the_cuda_providers_settings_from_what_its_config_serves_with() {
        let config = classify(
            r#"name = "resnet"
path = "resnet.onnx"
accuracy = 76.0
device = "cuda:0"
[tasks.variants.onnx.cuda]
conv_algo_search = "heuristic""#,
        );
        let variant = &config.tasks[0].variants[0];
        let gpu = SpaceLimits { gpu: true, ..limits(32, false) };
        let default = ServingSetting::of(&config, variant, &gpu);
        let configured =
            CudaSetting { conv_algo_search: modelless::backend::ConvAlgoSearch::Heuristic, ..CudaSetting::DEFAULT };
        assert_eq!(default.cuda, Some(configured), "the config's search, ONNX Runtime's defaults for the rest");
        assert_eq!(ServingSetting::of(&config, variant, &limits(32, false)).cuda, None, "on the CPU: none");
        let space = KnobSpace::new(gpu);
        let names: Vec<&str> = space.ranges().iter().map(|(name, _)| *name).collect();
        let cuda_knobs =
            ["conv_algo_search", "tf32", "prefer_nhwc", "conv_max_workspace", "pinned_inputs", "cuda_graph"];
        assert!(names.ends_with(&cuda_knobs), "{names:?}");
        assert_eq!(space.decode(&space.encode(&default)), default);
        let mut rng = StdRng::seed_from_u64(3);
        let seen: std::collections::BTreeSet<String> =
            (0..1000).filter_map(|_| space.decode(&space.sample(&mut rng)).cuda).map(|c| c.brief()).collect();
        assert_eq!(seen.len(), 3 * 32, "every search with every flag: {seen:?}");
        let chosen = ServingSetting {
            cuda: Some(CudaSetting { prefer_nhwc: true, tf32: false, ..CudaSetting::DEFAULT }),
            ..default
        };
        let mut applied = config.clone();
        chosen.apply(&mut applied, "classify", "resnet");
        assert_eq!(CudaSetting::of(&applied.tasks[0].variants[0].onnx.cuda), chosen.cuda.unwrap());
        assert!(chosen.brief().ends_with("cuDNN exhaustive nhwc"), "{}", chosen.brief());
    }
}
