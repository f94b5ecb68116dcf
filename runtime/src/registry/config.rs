//! Configuration of tasks and their variants.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::backend::BackendFactory;
pub use crate::backend::Device;
use crate::backend::onnx::{self, OrtBackend, OrtEnvironmentConfig, OrtSessionConfig};
use crate::backend::torchscript::{self, TorchScriptConfig};
use crate::batching::BatchingConfig;
use crate::error::{Cause, Error};
use crate::preprocess::ImagePreprocess;
use crate::signature::{SignatureConfig, TensorMaps};
use crate::warmup::WarmupConfig;

/// What kind of model file a variant serves, and so which runtime runs it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelFormat {
    /// ONNX, on ONNX Runtime.
    #[default]
    Onnx,
    /// TorchScript, on libtorch (the `tch` feature); its `torchscript` section
    /// declares inputs and outputs.
    Torchscript,
}

/// What loading a variant does about its profile (what it costs on this machine, which
/// orders variants for routing and which policies read).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProfileMode {
    /// Use the stored profile when one matches the model and settings (`modelless
    /// profile` stores them); go without one otherwise.
    #[default]
    Stored,
    /// Like `stored`, but measure one at load when none matches (this takes the CPU
    /// for tens of seconds per variant, and measures the machine as busy as it is).
    Measure,
    /// No profile.
    Off,
}

/// A task: something callers ask for ("classify-image") and the variants that can
/// answer it, trading accuracy for cost.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskConfig {
    /// Name requests use.
    pub name: String,
    /// The variants, cheapest first: until profiles measure cost, this order is what
    /// "cheapest" means when a request needs more accuracy than the active variant has.
    pub variants: Vec<VariantConfig>,
    /// Variant serving at start; the first listed by default.
    #[serde(default)]
    pub active: Option<String>,
    /// Memory (MiB) for loaded variants that are not active, kept warm so that
    /// switching back is nearly free; the least recently active go first. 0 unloads a
    /// variant as soon as another takes over.
    #[serde(default = "default_keep_warm_mib")]
    pub keep_warm_mib: u64,
    /// The latency target its callers expect, in ms: what policies steer towards.
    #[serde(default)]
    pub latency_slo_ms: Option<f64>,
    /// Of the largest surge of arrivals heard in the last 10 minutes (the last
    /// second's rate over the 10 s one, at most 4×), the share its
    /// `modelless_task_demand_ratio` adds to the demand as headroom: traffic that jumps
    /// asks a fleet's autoscaler for replicas before the jump it cannot follow. 0 exports
    /// the demand alone.
    #[serde(default = "default_demand_surge_weight")]
    pub demand_surge_weight: f64,
    /// How far ahead, in seconds, its `modelless_task_demand_ratio` carries a rising
    /// rate (its 10 s rate's rise over its 60 s one): about the time a fleet's
    /// autoscaler takes to sync and start a replica, so that replicas asked for now
    /// serve the rate that has arrived by then. 0 exports the demand of now.
    #[serde(default = "default_demand_lead_s")]
    pub demand_lead_s: f64,
    /// What its callers send and get, whatever variant serves: every variant is bound
    /// onto it or refused. Without one, the variant that serves first sets it, leaving
    /// open the batch dimension and, where that variant preprocesses images, the height
    /// and width of the input they fill (each variant resizes to its own).
    #[serde(default)]
    pub signature: Option<SignatureConfig>,
    /// Class labels, one per line (line n names class n), for classification answers.
    #[serde(default)]
    pub labels: Option<PathBuf>,
    /// Whether a request the variant it is routed to would refuse as unable to answer
    /// in time goes to a cheaper loaded variant that can (the most accurate such one,
    /// accurate enough for the request), rather than being refused. On by default: a
    /// warm variant that answers in time is better than a refusal. Off, every request
    /// is served by the active variant, or the one its accuracy asks for, or refused.
    #[serde(default = "default_spill")]
    pub spill: bool,
}

fn default_spill() -> bool {
    true
}

/// The most tensors a variant's name map may list.
const MAX_MAPPED: usize = 256;

fn default_keep_warm_mib() -> u64 {
    1024
}

fn default_demand_surge_weight() -> f64 {
    modelless_policy_abi::DEMAND_SURGE_WEIGHT
}

fn default_demand_lead_s() -> f64 {
    modelless_policy_abi::DEMAND_LEAD_S
}

impl TaskConfig {
    /// A task with no variants yet.
    pub fn new(name: impl Into<String>) -> Self {
        TaskConfig {
            name: name.into(),
            variants: Vec::new(),
            active: None,
            keep_warm_mib: default_keep_warm_mib(),
            latency_slo_ms: None,
            demand_surge_weight: default_demand_surge_weight(),
            demand_lead_s: default_demand_lead_s(),
            signature: None,
            labels: None,
            spill: default_spill(),
        }
    }

    /// Sets whether requests the routed variant would refuse go to a cheaper loaded
    /// variant that can answer them in time (on by default).
    pub fn with_spill(mut self, spill: bool) -> Self {
        self.spill = spill;
        self
    }

    /// Names the label file of classification answers.
    pub fn with_labels(mut self, path: impl Into<PathBuf>) -> Self {
        self.labels = Some(path.into());
        self
    }

    /// Declares what the task's callers send and get.
    pub fn with_signature(mut self, signature: SignatureConfig) -> Self {
        self.signature = Some(signature);
        self
    }

    /// Adds a variant, costlier than those before it.
    pub fn with_variant(mut self, variant: VariantConfig) -> Self {
        self.variants.push(variant);
        self
    }

    /// Sets the latency target policies steer towards.
    pub fn with_latency_slo_ms(mut self, ms: f64) -> Self {
        self.latency_slo_ms = Some(ms);
        self
    }

    /// Sets the share of recent surges the demand ratio adds as headroom.
    pub fn with_demand_surge_weight(mut self, weight: f64) -> Self {
        self.demand_surge_weight = weight;
        self
    }

    /// Sets how far ahead, s, the demand ratio carries a rising rate.
    pub fn with_demand_lead_s(mut self, lead_s: f64) -> Self {
        self.demand_lead_s = lead_s;
        self
    }

    /// Sets the variant serving at start.
    pub fn with_active(mut self, variant: impl Into<String>) -> Self {
        self.active = Some(variant.into());
        self
    }

    /// Sets the memory for inactive variants kept warm.
    pub fn with_keep_warm_mib(mut self, mib: u64) -> Self {
        self.keep_warm_mib = mib;
        self
    }

    /// Index of the variant called `name`.
    pub fn variant_index(&self, name: &str) -> Option<usize> {
        self.variants.iter().position(|v| v.name == name)
    }

    /// Checks names, accuracies, the latency target, batching and the active variant.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |what: String| Err(Error::Config(format!("task `{}`: {what}", self.name)));
        if self.variants.is_empty() {
            return bad("has no variants".into());
        }
        if let Some(signature) = &self.signature {
            signature.validate(&self.name)?;
        }
        if let Some(slo) = self.latency_slo_ms.filter(|slo| !(slo.is_finite() && *slo > 0.0)) {
            return bad(format!("latency_slo_ms {slo} is not a positive number of ms"));
        }
        if !(self.demand_surge_weight.is_finite() && self.demand_surge_weight >= 0.0) {
            return bad(format!("demand_surge_weight {} is not a share of 0 or more", self.demand_surge_weight));
        }
        if !(self.demand_lead_s.is_finite() && self.demand_lead_s >= 0.0) {
            return bad(format!("demand_lead_s {} is not a number of seconds of 0 or more", self.demand_lead_s));
        }
        for (i, v) in self.variants.iter().enumerate() {
            if self.variants[..i].iter().any(|w| w.name == v.name) {
                return bad(format!("variant `{}` is listed twice", v.name));
            }
            if !v.accuracy.is_some_and(f64::is_finite) {
                return bad(format!("variant `{}` has no finite accuracy", v.name));
            }
            crate::model::check_instances(&v.name, v.instances)?;
            if v.input_map.len().max(v.output_map.len()) > MAX_MAPPED {
                return bad(format!("variant `{}` maps more than {MAX_MAPPED} tensors", v.name));
            }
            v.batching.validate()?;
            if let Some(preprocess) = &v.preprocess {
                if cfg!(not(feature = "images")) {
                    return bad(format!(
                        "variant `{}` declares `preprocess`: {}",
                        v.name,
                        crate::preprocess::NO_IMAGES
                    ));
                }
                preprocess.validate().map_err(|e| Error::ConfigRefused {
                    what: format!("task `{}`: variant `{}`", self.name, v.name),
                    source: Cause::new(e),
                })?;
            }
        }
        let with_images = self.variants.iter().filter(|v| v.preprocess.is_some()).count();
        if with_images != 0 && with_images != self.variants.len() {
            return bad("either every variant declares `preprocess` or none does: a request with images may be \
                        routed or moved to any of them"
                .into());
        }
        match &self.active {
            Some(active) if self.variant_index(active).is_none() => {
                bad(format!("active variant `{active}` is not listed"))
            }
            _ => Ok(()),
        }
    }
}

/// How a model is loaded and served: one way of answering a task (a variant, with
/// its accuracy), or a model served on its own under its name,
/// which takes only its file, instances, batching, session settings and warm-up
/// ([`VariantConfig::validate_as_model`] refuses the rest).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VariantConfig {
    /// Its name, unique within the task.
    pub name: String,
    /// The model file of its first version; or, fetched into the blob cache, an
    /// `oci://registry/repository:tag` (followed: each new digest is loaded as a new
    /// version) or `@sha256:…` reference, or an `https://` URL with its `sha256`.
    pub path: PathBuf,
    /// What an `https://` `path` must hash to (64 hex digits, `sha256:` optional).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// What kind of file it is.
    #[serde(default)]
    pub format: ModelFormat,
    /// Accuracy, in whatever unit the task's variants share (e.g. ImageNet top-1 %).
    /// Every variant of a task has one; a model served on its own has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accuracy: Option<f64>,
    /// How `accuracy` was had, where it was measured or estimated rather than
    /// published: `modelless variants make` writes it for the copies it makes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accuracy_source: Option<String>,
    /// Where it runs: `cpu` or `cuda:N`.
    #[serde(default)]
    pub device: Device,
    /// Load it on the CPU when its device cannot be had (no GPU, no driver, a build of
    /// ONNX Runtime without CUDA), rather than fail to load.
    #[serde(default)]
    pub fallback_to_cpu: bool,
    /// Memory (MiB) on its device that its batches may take. Profiling then finds the
    /// largest batch within it (on a GPU, as NVML counts this process's memory); larger
    /// batches are never formed, and larger requests run split.
    #[serde(default)]
    pub memory_budget_mib: Option<u64>,
    /// Sessions serving it.
    #[serde(default = "one")]
    pub instances: usize,
    /// Dynamic batching knobs.
    #[serde(default)]
    pub batching: BatchingConfig,
    /// ONNX Runtime session settings.
    #[serde(default)]
    pub onnx: OrtSessionConfig,
    /// A TorchScript module's inputs, outputs and threads.
    #[serde(default)]
    pub torchscript: TorchScriptConfig,
    /// Warm-up before it is routed to.
    #[serde(default)]
    pub warmup: WarmupConfig,
    /// Load it at start even when it is not active, so that requests asking for more
    /// accuracy than the active variant has find it ready.
    #[serde(default)]
    pub preload: bool,
    /// What loading it does about its profile.
    #[serde(default)]
    pub profile: ProfileMode,
    /// Its own input names → the task's, where they differ and position cannot tell.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub input_map: BTreeMap<String, String>,
    /// Its own output names → the task's.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub output_map: BTreeMap<String, String>,
    /// How images become its image input: requests to the task may then send images
    /// (JPEG or PNG) instead of tensors, preprocessed for the variant that serves them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preprocess: Option<ImagePreprocess>,
    /// The shape, without the batch, that each named input with an open side besides
    /// the batch is profiled at (`{ x = [3, 48, 320] }`: a recogniser that takes lines
    /// of any width, profiled on lines 320 wide). Without it such a model has no
    /// profile; an image input with a `preprocess` is profiled at a typical image's size.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub profile_shapes: BTreeMap<String, Vec<usize>>,
}

fn one() -> usize {
    1
}

/// How to load and serve one model on its own: the settings a variant has, of which
/// it takes its file, instances, batching, session settings and warm-up.
pub type ModelConfig = VariantConfig;

impl VariantConfig {
    /// A variant with default settings.
    pub fn new(name: impl Into<String>, path: impl Into<PathBuf>, accuracy: f64) -> Self {
        VariantConfig {
            name: name.into(),
            path: path.into(),
            sha256: None,
            format: ModelFormat::Onnx,
            accuracy: Some(accuracy),
            accuracy_source: None,
            device: Device::Cpu,
            fallback_to_cpu: false,
            memory_budget_mib: None,
            instances: 1,
            batching: BatchingConfig::default(),
            onnx: OrtSessionConfig::default(),
            torchscript: TorchScriptConfig::default(),
            warmup: WarmupConfig::default(),
            preload: false,
            profile: ProfileMode::Stored,
            input_map: BTreeMap::new(),
            output_map: BTreeMap::new(),
            preprocess: None,
            profile_shapes: BTreeMap::new(),
        }
    }

    /// A model served on its own as `name`, loaded from the ONNX file at `path`, with
    /// default settings.
    pub fn plain(name: impl Into<String>, path: impl Into<PathBuf>) -> Self {
        VariantConfig { accuracy: None, ..VariantConfig::new(name, path, 0.0) }
    }

    /// Its accuracy as a task's variant: a task refuses a variant without one, so NaN
    /// stands only for a config no task has checked.
    pub fn variant_accuracy(&self) -> f64 {
        self.accuracy.unwrap_or(f64::NAN)
    }

    /// Sets the ONNX Runtime session settings.
    pub fn with_onnx(mut self, onnx: OrtSessionConfig) -> Self {
        self.onnx = onnx;
        self
    }

    /// Checks it as a model served on its own: its instances and batching within
    /// bounds, and none of what only a task's variant takes (accuracy, device, format,
    /// maps, preprocessing, profiling, preload) set, naming the first that is.
    pub fn validate_as_model(&self) -> Result<(), Error> {
        crate::model::check_instances(&self.name, self.instances)?;
        self.batching.validate()?;
        let set = [
            ("format", self.format != ModelFormat::default()),
            ("accuracy", self.accuracy.is_some()),
            ("accuracy_source", self.accuracy_source.is_some()),
            ("device", self.device != Device::default()),
            ("fallback_to_cpu", self.fallback_to_cpu),
            ("memory_budget_mib", self.memory_budget_mib.is_some()),
            ("torchscript", self.torchscript != TorchScriptConfig::default()),
            ("preload", self.preload),
            ("profile", self.profile != ProfileMode::default()),
            ("input_map", !self.input_map.is_empty()),
            ("output_map", !self.output_map.is_empty()),
            ("preprocess", self.preprocess.is_some()),
        ];
        match set.iter().find(|(_, set)| *set) {
            Some((field, _)) => Err(Error::Config(format!(
                "model `{}`: `{field}` is for a task's variants; a model served on its own takes only \
                 path, instances, batching, onnx and warmup (declare a task to use it)",
                self.name
            ))),
            None => Ok(()),
        }
    }

    /// Takes images, made into its input as `preprocess` says.
    pub fn with_preprocess(mut self, preprocess: ImagePreprocess) -> Self {
        self.preprocess = Some(preprocess);
        self
    }

    /// Maps its input `own` onto the task's input `task`.
    pub fn with_input_map(mut self, own: impl Into<String>, task: impl Into<String>) -> Self {
        self.input_map.insert(own.into(), task.into());
        self
    }

    /// Maps its output `own` onto the task's output `task`.
    pub fn with_output_map(mut self, own: impl Into<String>, task: impl Into<String>) -> Self {
        self.output_map.insert(own.into(), task.into());
        self
    }

    /// Its name maps, as binding takes them.
    pub fn tensor_maps(&self) -> TensorMaps {
        TensorMaps { input_map: self.input_map.clone(), output_map: self.output_map.clone() }
    }

    /// Sets the batching knobs.
    pub fn with_batching(mut self, batching: BatchingConfig) -> Self {
        self.batching = batching;
        self
    }

    /// Sets the number of instances.
    pub fn with_instances(mut self, instances: usize) -> Self {
        self.instances = instances;
        self
    }

    /// Sets where it runs, and whether it loads on the CPU when that device cannot be had.
    pub fn with_device(mut self, device: Device, fallback_to_cpu: bool) -> Self {
        self.device = device;
        self.fallback_to_cpu = fallback_to_cpu;
        self
    }

    /// Sets the device memory (MiB) its batches may take; see `memory_budget_mib`.
    pub fn with_memory_budget_mib(mut self, mib: u64) -> Self {
        self.memory_budget_mib = Some(mib);
        self
    }

    /// Sessions of the model file at `path` (one of its versions) on its device, by
    /// ONNX Runtime or libtorch as its format says.
    pub fn backend_factory(&self, onnxruntime: &OrtEnvironmentConfig, path: &Path) -> BackendFactory {
        let (path, device, fallback) = (path.to_path_buf(), self.device, self.fallback_to_cpu);
        match self.format {
            ModelFormat::Onnx => OrtBackend::factory_on(onnxruntime.clone(), path, self.onnx.clone(), device, fallback),
            ModelFormat::Torchscript => torchscript::factory(path, self.torchscript.clone(), device, fallback),
        }
    }

    /// The device its sessions load on: its own, or the CPU where that cannot be had
    /// and it may fall back.
    pub fn device_to_load(&self, onnxruntime: &OrtEnvironmentConfig) -> Device {
        match self.format {
            ModelFormat::Onnx => onnx::device_to_load(onnxruntime, self.device, self.fallback_to_cpu),
            ModelFormat::Torchscript => torchscript::device_to_load(self.device, self.fallback_to_cpu),
        }
    }

    /// Sets the model file of its first version.
    pub fn with_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.path = path.into();
        self
    }

    /// Serves a TorchScript module that takes and gives what `config` declares.
    pub fn with_torchscript(mut self, config: TorchScriptConfig) -> Self {
        self.format = ModelFormat::Torchscript;
        self.torchscript = config;
        self
    }

    /// Sets the warm-up.
    pub fn with_warmup(mut self, warmup: WarmupConfig) -> Self {
        self.warmup = warmup;
        self
    }

    /// Loads it at start.
    pub fn with_preload(mut self, preload: bool) -> Self {
        self.preload = preload;
        self
    }

    /// Sets what loading it does about its profile.
    pub fn with_profile(mut self, profile: ProfileMode) -> Self {
        self.profile = profile;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taking_images() -> TaskConfig {
        let images = ImagePreprocess::new(224, [0.0; 3], [1.0; 3]);
        let mut task = TaskConfig::new("photos");
        task.variants.push(VariantConfig::new("small", "small.onnx", 70.0).with_preprocess(images));
        task
    }

    #[test]
    fn a_model_on_its_own_takes_only_what_serves_it_and_a_variant_needs_its_accuracy() {
        let plain = ModelConfig::plain("m", "m.onnx").with_instances(2);
        assert!(plain.validate_as_model().is_ok());
        let on_gpu = ModelConfig::plain("m", "m.onnx").with_device(Device::Cuda(0), false);
        let refused = on_gpu.validate_as_model().unwrap_err().to_string();
        assert!(refused.contains("`device` is for a task's variants"), "{refused}");
        let rated = VariantConfig::new("m", "m.onnx", 70.0);
        assert!(rated.validate_as_model().unwrap_err().to_string().contains("`accuracy`"));
        // The same table, read as a model and as a task's variant.
        let table = r#"{"name": "m", "path": "m.onnx", "instances": 2}"#;
        let model: ModelConfig = serde_json::from_str(table).unwrap();
        assert_eq!(model, plain);
        let mut task = TaskConfig::new("t");
        task.variants.push(model);
        assert!(task.validate().unwrap_err().to_string().contains("no finite accuracy"));
    }

    #[test]
    fn a_surge_weight_and_a_lead_are_the_runtimes_unless_set_and_never_below_zero() {
        let table = r#"{"name": "t", "variants": [{"name": "v", "path": "v.onnx", "accuracy": 70}]}"#;
        let task: TaskConfig = serde_json::from_str(table).unwrap();
        assert_eq!(task.demand_surge_weight, modelless_policy_abi::DEMAND_SURGE_WEIGHT);
        assert_eq!(task.demand_lead_s, modelless_policy_abi::DEMAND_LEAD_S);
        assert!(task.clone().with_demand_surge_weight(0.0).with_demand_lead_s(0.0).validate().is_ok());
        for bad in [-0.5, f64::NAN, f64::INFINITY] {
            let refused = task.clone().with_demand_surge_weight(bad).validate().unwrap_err().to_string();
            assert!(refused.contains("demand_surge_weight"), "{refused}");
            let refused = task.clone().with_demand_lead_s(bad).validate().unwrap_err().to_string();
            assert!(refused.contains("demand_lead_s"), "{refused}");
        }
    }

    #[cfg(feature = "images")]
    #[test]
    fn a_task_that_takes_images_is_valid_where_images_are_built_in() {
        assert!(taking_images().validate().is_ok());
    }

    #[cfg(not(feature = "images"))]
    #[test]
    fn a_task_that_takes_images_is_refused_naming_the_feature_where_they_are_not() {
        let refused = taking_images().validate().unwrap_err().to_string();
        assert!(refused.contains("variant `small` declares `preprocess`"), "{refused}");
        assert!(refused.contains("feature `images`"), "{refused}");
    }
}
