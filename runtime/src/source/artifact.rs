//! What a policy or a model version looks like in a registry: the media types of its
//! config and its one layer, and the annotations a push writes. Policies use the Wasm
//! OCI artifact layout that `wkg` and Spin use (CNCF TAG Runtime's Wasm working
//! group), so any tool of that layout pushes modules this runtime follows.

/// The config media type of a Wasm artifact.
pub const WASM_CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// The layer media type of a Wasm module or component.
pub const WASM_LAYER_MEDIA_TYPE: &str = "application/wasm";
/// The layer media type of Istio's and wasm-to-oci's older Wasm images, also taken.
pub const WASM_LEGACY_LAYER_MEDIA_TYPE: &str = "application/vnd.module.wasm.content.layer.v1+wasm";
/// The config media type of a model version.
pub const MODEL_CONFIG_MEDIA_TYPE: &str = "application/vnd.modelless.model.config.v1+json";
/// The layer media type of an ONNX model.
pub const ONNX_LAYER_MEDIA_TYPE: &str = "application/vnd.modelless.model.onnx.v1";
/// The layer media type of a TorchScript model.
pub const TORCHSCRIPT_LAYER_MEDIA_TYPE: &str = "application/vnd.modelless.model.torchscript.v1";

/// Annotation: the policy ABI the module speaks (`core-v1`, or the WIT world and its
/// version, `modelless:policy/policy@1.0.0`).
pub const ANNOTATION_ABI: &str = "dev.modelless.policy.abi";
/// Annotation: the language the policy was written in.
pub const ANNOTATION_LANGUAGE: &str = "dev.modelless.policy.language";
/// Annotation: the digest of the source it was built from.
pub const ANNOTATION_SOURCE_DIGEST: &str = "dev.modelless.source.digest";
/// Annotation: a model's format (`onnx`, `torchscript`).
pub const ANNOTATION_MODEL_FORMAT: &str = "dev.modelless.model.format";
/// The OCI annotation of a file's name.
pub const ANNOTATION_TITLE: &str = "org.opencontainers.image.title";
/// The OCI annotation of when it was made.
pub const ANNOTATION_CREATED: &str = "org.opencontainers.image.created";

/// What an artifact is, which decides the layers it may carry and how large it may be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArtifactKind {
    /// A policy module (core module or component).
    Policy,
    /// A model version.
    Model,
}

impl ArtifactKind {
    /// The layer media types it may carry; its one layer of these is the artifact.
    pub fn layer_media_types(self) -> &'static [&'static str] {
        match self {
            ArtifactKind::Policy => &[WASM_LAYER_MEDIA_TYPE, WASM_LEGACY_LAYER_MEDIA_TYPE],
            ArtifactKind::Model => &[ONNX_LAYER_MEDIA_TYPE, TORCHSCRIPT_LAYER_MEDIA_TYPE],
        }
    }

    /// The most bytes it may have: a policy component with its interpreter is tens of
    /// MB; a model on an edge box some GB.
    pub fn size_limit(self) -> u64 {
        match self {
            ArtifactKind::Policy => 256 << 20,
            ArtifactKind::Model => 8 << 30,
        }
    }

    /// Its name in messages.
    pub fn label(self) -> &'static str {
        match self {
            ArtifactKind::Policy => "policy module",
            ArtifactKind::Model => "model",
        }
    }
}
