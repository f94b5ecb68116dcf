//! How the endpoints listen: addresses, message and tensor limits, read timeouts,
//! HTTP/2 windows, TLS, and what repository calls may do.

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::admin_token::AdminToken;
use super::limits::RequestLimits;

/// The `[server]` section of the config.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// Where gRPC is served (`127.0.0.1:8001` by default: Triton's port, on loopback).
    #[serde(default = "default_grpc_address")]
    pub grpc_address: SocketAddr,
    /// Where HTTP/REST and `/metrics` are served (`127.0.0.1:8000` by default).
    #[serde(default = "default_http_address")]
    pub http_address: SocketAddr,
    /// Largest request or response message, in MiB; larger requests are refused.
    #[serde(default = "default_max_message_mib")]
    pub max_message_mib: usize,
    /// Most elements one tensor of a request may claim; a larger shape is refused
    /// before anything is allocated for it.
    #[serde(default = "default_max_tensor_elements")]
    pub max_tensor_elements: usize,
    /// Most tensors (inputs, and outputs asked for) one request may name.
    #[serde(default = "default_max_request_tensors")]
    pub max_request_tensors: usize,
    /// How long a client may take to send a request, in ms: its headers over HTTP/1,
    /// its body over HTTP and gRPC. A slower one is cut off.
    #[serde(default = "default_request_read_timeout_ms")]
    pub request_read_timeout_ms: u64,
    /// What repository calls may do (Triton's `--model-control-mode`).
    #[serde(default)]
    pub model_control_mode: ModelControlMode,
    /// Ceilings on what a repository load's `config` override may ask for.
    #[serde(default)]
    pub override_limits: OverrideLimits,
    /// HTTP/2 flow-control window of each gRPC stream, in KiB. The default lets a
    /// request of several MiB arrive without waiting for window updates.
    #[serde(default = "default_stream_window_kib")]
    pub http2_stream_window_kib: u32,
    /// HTTP/2 flow-control window of each gRPC connection, in KiB.
    #[serde(default = "default_connection_window_kib")]
    pub http2_connection_window_kib: u32,
    /// Largest HTTP/2 frame a gRPC client may send, in KiB (16 to 16383): a tensor of
    /// several hundred KiB then crosses in one frame instead of dozens.
    #[serde(default = "default_max_frame_kib")]
    pub http2_max_frame_kib: u32,
    /// How long a shutdown waits for requests under way, in seconds.
    #[serde(default = "default_drain_timeout_s")]
    pub drain_timeout_s: u64,
    /// Serve both endpoints over TLS.
    #[serde(default)]
    pub tls: Option<TlsConfig>,
    /// Folder of model files that repository calls may load by name
    /// (`<name>.onnx`, `<name>/model.onnx`, or `<name>/<version>/model.onnx`); nothing
    /// outside it, or outside what the config declares, is ever loaded.
    #[serde(default)]
    pub model_repository: Option<PathBuf>,
    /// A file holding the bearer token repository load and unload calls must present
    /// under `model_control_mode = "explicit"` (HTTP `Authorization: Bearer …`, gRPC
    /// metadata `authorization`); read at every call, so a rotated Secret takes effect.
    #[serde(default)]
    pub admin_token_file: Option<PathBuf>,
    /// Lets explicit model control run without an admin token: anyone who reaches the
    /// port may then load and unload models. Without a token file or this, the server
    /// does not start in explicit mode.
    #[serde(default)]
    pub insecure_model_control: bool,
}

/// Whether repository calls may load and unload models, as Triton's
/// `--model-control-mode` says it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelControlMode {
    /// Load and unload calls are refused (`FAILED_PRECONDITION`); the index is served.
    /// The default: whoever reaches the port cannot load models or change how they
    /// are served unless the operator says so.
    #[default]
    None,
    /// Load (with a bounded `config` override) and unload calls are served.
    Explicit,
}

/// Ceilings on a repository load's `config` override: a peer asks, the server bounds.
/// An override beyond one is refused with the bound named.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OverrideLimits {
    /// Largest `batching.max_batch_size` (and warm-up batch); lowered further to the
    /// memory-safe batch of the model's stored profile where there is one.
    pub max_batch_size: usize,
    /// Largest `batching.max_queue_size`.
    pub max_queue_size: usize,
    /// Longest `batching.max_queue_delay_us`.
    pub max_queue_delay_us: u64,
    /// Most `instances` (and ONNX Runtime threads per session); by default the cores.
    pub max_instances: Option<usize>,
}

impl Default for OverrideLimits {
    fn default() -> Self {
        OverrideLimits { max_batch_size: 64, max_queue_size: 4096, max_queue_delay_us: 1_000_000, max_instances: None }
    }
}

impl OverrideLimits {
    /// Most instances: the configured ceiling, or the cores of this machine.
    pub fn instances(&self) -> usize {
        self.max_instances.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
    }
}

/// Certificate and key of the server, PEM files.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// The certificate chain.
    pub cert: PathBuf,
    /// Its private key.
    pub key: PathBuf,
}

// Loopback: a server reachable from other machines is the operator's choice.
fn default_grpc_address() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 8001))
}

fn default_http_address() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 8000))
}

fn default_max_message_mib() -> usize {
    64
}

fn default_max_tensor_elements() -> usize {
    // 64 MiB of FP32: as large as the default message.
    16 << 20
}

fn default_max_request_tensors() -> usize {
    64
}

fn default_request_read_timeout_ms() -> u64 {
    30_000
}

fn default_stream_window_kib() -> u32 {
    4 * 1024
}

fn default_connection_window_kib() -> u32 {
    16 * 1024
}

fn default_max_frame_kib() -> u32 {
    1024
}

fn default_drain_timeout_s() -> u64 {
    30
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            grpc_address: default_grpc_address(),
            http_address: default_http_address(),
            max_message_mib: default_max_message_mib(),
            max_tensor_elements: default_max_tensor_elements(),
            max_request_tensors: default_max_request_tensors(),
            request_read_timeout_ms: default_request_read_timeout_ms(),
            model_control_mode: ModelControlMode::default(),
            override_limits: OverrideLimits::default(),
            http2_stream_window_kib: default_stream_window_kib(),
            http2_connection_window_kib: default_connection_window_kib(),
            http2_max_frame_kib: default_max_frame_kib(),
            drain_timeout_s: default_drain_timeout_s(),
            tls: None,
            model_repository: None,
            admin_token_file: None,
            insecure_model_control: false,
        }
    }
}

impl ServerConfig {
    /// Both endpoints on loopback, on ports the system picks.
    pub fn loopback() -> Self {
        ServerConfig {
            grpc_address: SocketAddr::from(([127, 0, 0, 1], 0)),
            http_address: SocketAddr::from(([127, 0, 0, 1], 0)),
            ..ServerConfig::default()
        }
    }

    /// Sets the gRPC address.
    pub fn with_grpc_address(mut self, address: SocketAddr) -> Self {
        self.grpc_address = address;
        self
    }

    /// Sets the HTTP address.
    pub fn with_http_address(mut self, address: SocketAddr) -> Self {
        self.http_address = address;
        self
    }

    /// Sets the largest message, in MiB.
    pub fn with_max_message_mib(mut self, mib: usize) -> Self {
        self.max_message_mib = mib;
        self
    }

    /// Serves over TLS with this certificate and key.
    pub fn with_tls(mut self, tls: TlsConfig) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Sets what repository calls may do.
    pub fn with_model_control_mode(mut self, mode: ModelControlMode) -> Self {
        self.model_control_mode = mode;
        self
    }

    /// Sets the file of the bearer token repository calls must present.
    pub fn with_admin_token_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.admin_token_file = Some(path.into());
        self
    }

    /// Lets explicit model control run without an admin token.
    pub fn with_insecure_model_control(mut self) -> Self {
        self.insecure_model_control = true;
        self
    }

    /// The admin token repository calls must present: `None` where model control is
    /// off, or explicit and insecure by the operator's say. Refused in explicit mode
    /// without a readable token file or `insecure_model_control`.
    // The runtime's own: `modelless` does not offer it.
    #[doc(hidden)]
    pub fn admin_token(&self) -> Result<Option<AdminToken>, String> {
        if self.model_control_mode == ModelControlMode::None {
            return Ok(None);
        }
        match (&self.admin_token_file, self.insecure_model_control) {
            (Some(path), _) => AdminToken::load(path).map(Some),
            (None, true) => Ok(None),
            (None, false) => Err("model_control_mode = \"explicit\" needs admin_token_file (a bearer token for \
                 repository load and unload), or insecure_model_control = true (modelless serve \
                 --insecure-model-control) to let anyone who reaches the port load and unload models"
                .into()),
        }
    }

    /// Sets the most elements a tensor of a request may claim.
    pub fn with_max_tensor_elements(mut self, elements: usize) -> Self {
        self.max_tensor_elements = elements;
        self
    }

    /// Sets how long a client may take to send a request, in ms.
    pub fn with_request_read_timeout_ms(mut self, ms: u64) -> Self {
        self.request_read_timeout_ms = ms;
        self
    }

    /// Sets the ceilings of repository `config` overrides.
    pub fn with_override_limits(mut self, limits: OverrideLimits) -> Self {
        self.override_limits = limits;
        self
    }

    /// The limits every request is decoded within.
    pub fn request_limits(&self) -> RequestLimits {
        RequestLimits {
            max_message_bytes: self.max_message_bytes(),
            max_tensor_elements: self.max_tensor_elements,
            max_request_tensors: self.max_request_tensors,
        }
    }

    /// How long a client may take to send a request.
    pub fn request_read_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.request_read_timeout_ms)
    }

    /// Lets repository calls load model files found under `root`.
    pub fn with_model_repository(mut self, root: impl Into<PathBuf>) -> Self {
        self.model_repository = Some(root.into());
        self
    }

    /// The largest message, in bytes.
    pub fn max_message_bytes(&self) -> usize {
        self.max_message_mib.saturating_mul(1 << 20)
    }

    /// Checks that every setting is one the endpoints can run with: limits of at
    /// least 1, a read timeout, and HTTP/2 windows within the 2 GiB the protocol
    /// allows. The error names the setting.
    pub fn validate(&self) -> Result<(), String> {
        self.admin_token()?;
        let at_least_one = [
            ("max_message_mib", self.max_message_mib as u64),
            ("max_tensor_elements", self.max_tensor_elements as u64),
            ("max_request_tensors", self.max_request_tensors as u64),
            ("request_read_timeout_ms", self.request_read_timeout_ms),
            ("override_limits.max_batch_size", self.override_limits.max_batch_size as u64),
            ("override_limits.max_queue_size", self.override_limits.max_queue_size as u64),
        ];
        if let Some((name, _)) = at_least_one.iter().find(|(_, value)| *value == 0) {
            return Err(format!("server.{name} must be at least 1"));
        }
        let windows = [
            ("http2_stream_window_kib", self.http2_stream_window_kib),
            ("http2_connection_window_kib", self.http2_connection_window_kib),
        ];
        if let Some((name, kib)) = windows.iter().find(|(_, kib)| *kib > MAX_WINDOW_KIB) {
            return Err(format!("server.{name} = {kib} is over HTTP/2's largest window, {MAX_WINDOW_KIB} KiB"));
        }
        Ok(())
    }
}

/// HTTP/2's largest flow-control window, 2^31 - 1 bytes, in whole KiB.
const MAX_WINDOW_KIB: u32 = ((1u32 << 31) - 1) / 1024;
