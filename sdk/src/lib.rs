//! modelless: an embeddable runtime for serving ML models.
//!
//! Link it into your application, load ONNX models, and send requests from as many
//! threads or tasks as you like: requests to one model are batched dynamically and
//! run on ONNX Runtime, each instance of a model on its own thread.
//!
//! Or ask a *task* rather than a model: a task has variants that trade accuracy for
//! cost; requests say how fast and how accurate the answer must be ([`Slo`]), the
//! runtime picks the variant, and variants and versions are switched while requests
//! flow without failing any ([`Runtime::switch_variant`], [`Runtime::load_version`]).
//!
//! ```no_run
//! use modelless::{ModelConfig, Runtime, Tensor};
//!
//! # async fn run() -> Result<(), modelless::Error> {
//! let runtime = Runtime::builder()
//!     .with_model(ModelConfig::new("classifier", "models/mobilenetv2_1.0.onnx"))
//!     .build()?;
//! let image = Tensor::full([1, 3, 224, 224], 0.5f32);
//! let output = runtime.infer("classifier", image).await?;
//! println!("{:?} in a batch of {}", output.first().map(|t| t.shape()), output.batch_size);
//! # Ok(())
//! # }
//! ```
//!
//! ONNX Runtime is loaded from a shared library at run time: see
//! the repository's `docs/devices.md` for where it is looked for, and
//! [`OrtEnvironmentConfig`] for the sessions' settings.

#[cfg(feature = "server")]
mod overrides;
mod pipeline_config;
mod policy_config;
mod runtime;
#[cfg(feature = "server")]
mod serving;
#[cfg(feature = "policies")]
mod steering;

// The fuzz targets assert on the largest allocation a decoder makes.
#[cfg(test)]
#[global_allocator]
static ALLOCATOR: modelless_runtime::fuzzing::PeakAllocator = modelless_runtime::fuzzing::PeakAllocator;

pub use modelless_runtime::backend::onnx::{OptimizationLevel, OrtEnvironmentConfig, OrtSessionConfig};
pub use modelless_runtime::backend::{ConvAlgoSearch, CudaOptions};
pub use modelless_runtime::classify::Class;
pub use modelless_runtime::policy_abi;
pub use modelless_runtime::profile::{
    BatchPoint, FirstRunSample, ImageCapacity, ImageProfile, LatencyFit, MIN_FIT_R2, Profile, ProfileKey, Throughput,
};
pub use modelless_runtime::registry::{
    ImageCapacityOptions, ImageSizeClass, PipelineAnswer, PipelineGlue, PipelineOutput, PipelineSignature,
    PipelineValue, StageTime, Stages,
};
/// The target of the runtime's request spans, one per request with a child per stage:
/// `modelless::request=info` in a filter turns them on (see docs/serving.md, "Tracing").
pub use modelless_runtime::trace::TARGET as TRACE_TARGET;
pub use modelless_runtime::{
    BackendError, BackendFactory, BatchingConfig, Cause, DType, Device, Element, Error, ErrorKind, InferOptions,
    Inputs, MakeBackend, Model, ModelConfig, ModelFormat, ModelMetadata, Output, Priority, ProfileMode,
    SignatureConfig, SignatureMismatch, Slo, StartOptions, SwitchReport, TaskConfig, TaskStatus, Tensor, TensorData,
    TensorDeclaration, TensorMaps, TensorSpec, Ticket, Timings, VariantConfig, VariantState, VariantStatus,
    VersionStatus, WarmupConfig,
};
pub use pipeline_config::{GlueKind, LinePaddingKind, PipelineConfig};
pub use policy_config::PolicyConfig;
pub use runtime::{ModelInfo, Runtime, RuntimeBuilder, RuntimeConfig};

/// Reading text (feature `ocr`): the `read-text` pipeline's glue around PP-OCR's
/// detection, direction and recognition models, and its parts.
#[cfg(feature = "ocr")]
pub mod ocr {
    pub use modelless_runtime::ocr::ctc::Alphabet;
    pub use modelless_runtime::ocr::detect::DbConfig;
    pub use modelless_runtime::ocr::{FindLines, Line, LinePadding, ReadLine, ReadText, ReadTextConfig};
}

/// Models as the runtime runs them: the backend trait for sessions of your own, and
/// the tensors and devices they declare.
pub mod backend {
    /// The fake backend (sleep, echo, fail) for tests of code built on modelless
    /// (feature `test-util`).
    #[cfg(feature = "test-util")]
    pub use modelless_runtime::backend::fake;
    pub use modelless_runtime::backend::torchscript::TorchScriptConfig;
    pub use modelless_runtime::backend::{
        Backend, BackendFactory, Batch, BatchOutput, Device, ModelMetadata, TensorDeclaration, TensorSpec,
    };
}

/// Images in: how a variant decodes, resizes and normalises them.
pub mod preprocess {
    pub use modelless_runtime::preprocess::{
        ChannelOrder, DecodeLimits, Decoded, ImageData, ImagePreprocess, ImageSize, Interpolation, Layout,
        PreprocessConfig, PreprocessError, ResizeMode,
    };
    /// Decoding and preprocessing one image outside a runtime (feature `images`).
    #[cfg(feature = "images")]
    pub use modelless_runtime::preprocess::{decode, image_tensor, to_tensor};
}

/// Policy modules outside a running runtime: compile, call, record and replay them
/// (feature `policies`).
#[cfg(feature = "policies")]
pub mod policy {
    pub use modelless_runtime::policy::{
        ControlStatus, DecidedBy, EarlyTick, HostConfig, PolicyEngine, PolicyError, PolicyInstance, PolicyModule,
        RecordedTick, Recorder, Replayed, read_ticks, replay,
    };
}

/// The statistics the runtime reports with.
pub mod stats {
    pub use modelless_runtime::stats::percentile;
}

/// KServe V2 endpoints (feature `server`): see [`Runtime::serve`].
#[cfg(feature = "server")]
pub mod kserve {
    pub use modelless_runtime::kserve::{
        Code, ModelControlMode, OverrideLimits, RequestLimits, ServeError, Server, ServerConfig, ServerError,
        TlsConfig, proto, tensors, tonic,
    };
}
