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
//! use modelless::{Runtime, Tensor, VariantConfig};
//!
//! # async fn run() -> Result<(), modelless::Error> {
//! let runtime = Runtime::builder()
//!     .with_model(VariantConfig::plain("classifier", "models/mobilenetv2_1.0.onnx"))
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
//! [`backend::onnx::OrtEnvironmentConfig`] for the sessions' settings.

#[cfg(feature = "server")]
mod declared;
mod model_info;
mod off_thread;
#[cfg(feature = "server")]
mod overrides;
mod pipeline_config;
mod policy_config;
mod runtime;
#[cfg(feature = "server")]
mod server;
#[cfg(feature = "server")]
mod serving;
#[cfg(feature = "server")]
mod shutdown;
mod sources;
#[cfg(feature = "policies")]
mod steering;
mod task_handle;

// The fuzz targets assert on the largest allocation a decoder makes.
#[cfg(test)]
#[global_allocator]
static ALLOCATOR: modelless_runtime::fuzzing::PeakAllocator = modelless_runtime::fuzzing::PeakAllocator;

pub use modelless_runtime::policy::ResourcesConfig;
pub use modelless_runtime::policy_abi;
pub use modelless_runtime::{
    BatchingConfig, Cause, Class, DType, Element, Error, ErrorKind, InferOptions, Inputs, Output, Priority,
    SignatureConfig, SignatureMismatch, Slo, TaskConfig, Tensor, TensorData, TensorMaps, Ticket, Timings,
    VariantConfig, WarmupConfig,
};
pub use policy_config::{PolicyConfig, RollbackConfig};
pub use runtime::{Runtime, RuntimeBuilder, RuntimeConfig};
pub use task_handle::TaskHandle;

/// What a runtime reports of its tasks, variants, versions and models, and of a
/// switch.
pub mod status {
    pub use crate::model_info::ModelInfo;
    pub use modelless_runtime::Admission;
    pub use modelless_runtime::{SwitchReport, TaskStatus, VariantState, VariantStatus, VersionStatus};
}

/// What a variant costs on this machine: its latency per batch size, warm-up and
/// throughput ([`Runtime::variant_profile`]), and the images it keeps up with
/// ([`Runtime::measure_image_capacity`]).
pub mod profile {
    pub use modelless_runtime::ProfileMode;
    pub use modelless_runtime::profile::{
        BatchPoint, FirstRunSample, ImageCapacity, ImageProfile, LatencyFit, Profile, ProfileKey, Throughput,
    };
    pub use modelless_runtime::registry::{ImageCapacityOptions, ImageSizeClass};
}

/// Pipelines: glue that calls tasks in turn ([`Runtime::add_pipeline`]), as configured
/// or of your own, and what they answer stage by stage.
pub mod pipeline {
    pub use crate::pipeline_config::{GlueKind, LinePaddingKind, PipelineConfig};
    pub use modelless_runtime::registry::{
        PipelineAnswer, PipelineGlue, PipelineOutput, PipelineSignature, PipelineValue, StageTime, Stages,
    };
}

/// Reading text (feature `ocr`): the `read-text` pipeline's glue around PP-OCR's
/// detection, direction and recognition models, and its parts.
#[cfg(feature = "ocr")]
pub mod ocr {
    pub use modelless_runtime::ocr::{
        Alphabet, DbConfig, FindLines, Line, LinePadding, ReadLine, ReadText, ReadTextConfig,
    };
}

/// Models as the runtime runs them: the backend trait for sessions of your own, the
/// tensors and devices they declare, and ONNX Runtime's and TorchScript's settings.
pub mod backend {
    /// The fake backend (sleep, echo, fail) for tests of code built on modelless
    /// (feature `test-util`).
    #[cfg(feature = "test-util")]
    pub use modelless_runtime::backend::fake;
    pub use modelless_runtime::backend::torchscript::TorchScriptConfig;
    pub use modelless_runtime::backend::{
        Backend, BackendFactory, Batch, BatchOutput, BatchParts, ConvAlgoSearch, CudaOptions, Device, ModelMetadata,
        TensorDeclaration, TensorSpec,
    };
    pub use modelless_runtime::{BackendError, MakeBackend, ModelFormat, SearchedPlace};

    /// ONNX Runtime: its sessions' environment and settings.
    pub mod onnx {
        pub use modelless_runtime::backend::onnx::{OptimizationLevel, OrtEnvironmentConfig, OrtSessionConfig};
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

/// A policy's parameters, and (feature `policies`) what the policy steering a runtime
/// did last ([`Runtime::policy_status`]) and how a policy module fails.
pub mod policy {
    #[cfg(feature = "policies")]
    pub use modelless_runtime::policy::{
        ControlStatus, DecidedBy, Judgement, PolicyError, PolicyLog, Served, WatchOutcome, WatchStatus,
    };
    /// A policy's parameters, as [`crate::PolicyConfig::with_parameters`] takes them.
    pub use serde_json::Value as Parameters;
}

/// Where policies and model versions come from: files, OCI registries and `https://`
/// URLs ([`RuntimeConfig::sources`]); and (feature `oci`) what a followed tag serves.
pub mod source {
    #[cfg(feature = "oci")]
    pub use crate::sources::FollowedVariant;
    pub use modelless_runtime::FetchError;
    #[cfg(feature = "oci")]
    pub use modelless_runtime::source::FollowStatus;
    pub use modelless_runtime::source::SourcesConfig;
}

/// KServe V2 endpoints (feature `server`): see [`Runtime::serve`].
#[cfg(feature = "server")]
pub mod kserve {
    pub use crate::server::Server;
    pub use crate::shutdown::shutdown_signal;
    pub use modelless_runtime::kserve::{
        Code, ModelControlMode, OverrideLimits, RequestLimits, ServeError, ServerConfig, ServerError, TlsConfig,
        TlsError,
    };
}
