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
//!     .with_model(ModelConfig::plain("classifier", "models/mobilenetv2_1.0.onnx"))
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
mod declared;
mod off_thread;
#[cfg(feature = "server")]
mod overrides;
mod pipeline_config;
mod policy_config;
mod runtime;
#[cfg(feature = "server")]
mod serving;
#[cfg(feature = "server")]
mod shutdown;
#[cfg(feature = "policies")]
mod steering;
mod task_handle;

// The fuzz targets assert on the largest allocation a decoder makes.
#[cfg(test)]
#[global_allocator]
static ALLOCATOR: modelless_runtime::fuzzing::PeakAllocator = modelless_runtime::fuzzing::PeakAllocator;

pub use modelless_runtime::backend::onnx::{OptimizationLevel, OrtEnvironmentConfig, OrtSessionConfig};
pub use modelless_runtime::backend::{ConvAlgoSearch, CudaOptions};
pub use modelless_runtime::policy::ResourcesConfig;
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
    BackendError, BackendFactory, BatchingConfig, Cause, Class, DType, Device, Element, Error, ErrorKind, InferOptions,
    Inputs, MakeBackend, Model, ModelConfig, ModelFormat, ModelMetadata, Outcome, Output, Priority, ProfileMode,
    SignatureConfig, SignatureMismatch, Slo, StartOptions, SwitchReport, TaskConfig, TaskStatus, Tensor, TensorData,
    TensorDeclaration, TensorMaps, TensorSpec, Ticket, Timings, VariantConfig, VariantState, VariantStatus,
    VersionStatus, WarmupConfig,
};
pub use pipeline_config::{GlueKind, LinePaddingKind, PipelineConfig};
pub use policy_config::PolicyConfig;
pub use runtime::{ModelInfo, Runtime, RuntimeBuilder, RuntimeConfig};
pub use task_handle::TaskHandle;

/// Reading text (feature `ocr`): the `read-text` pipeline's glue around PP-OCR's
/// detection, direction and recognition models, and its parts.
#[cfg(feature = "ocr")]
pub mod ocr {
    pub use modelless_runtime::ocr::{
        Alphabet, DbConfig, FindLines, Line, LinePadding, ReadLine, ReadText, ReadTextConfig, recognition_inputs,
    };
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
        Backend, BackendFactory, Batch, BatchOutput, BatchParts, Device, ModelMetadata, TensorDeclaration, TensorSpec,
    };

    /// ONNX Runtime: its sessions' environment, and where its shared library is
    /// looked for and which version it is (what `modelless setup` installs).
    pub mod onnx {
        pub use modelless_runtime::backend::onnx::{
            OptimizationLevel, OrtBackend, OrtEnvironmentConfig, OrtSessionConfig, environment,
        };
        pub use modelless_runtime::backend::onnx_library::{
            LIBRARY_NAME, SearchRoots, TESTED_VERSION, file_version, user_library_dir,
        };
    }
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

/// Policy modules outside a running runtime: compile and call them, and replay the
/// ticks a runtime recorded (feature `policies`).
#[cfg(feature = "policies")]
pub mod policy {
    pub use modelless_runtime::policy::{
        COMPONENT_MEMORY_LIMIT_BYTES, CORE_MEMORY_LIMIT_BYTES, ControlStatus, DecidedBy, HostConfig, Loaded,
        ModuleKind, PolicyEngine, PolicyError, PolicyInstance, PolicyLog, PolicyModule, RecordedTick, Replayed,
        default_compiled_cache, read_ticks, replay,
    };
}

/// KServe V2 endpoints (feature `server`): see [`Runtime::serve`].
#[cfg(feature = "server")]
pub mod kserve {
    pub use crate::shutdown::shutdown_signal;
    pub use modelless_runtime::kserve::{
        Code, ModelControlMode, OverrideLimits, RequestLimits, ServeError, Server, ServerConfig, ServerError, TlsConfig,
    };
}
