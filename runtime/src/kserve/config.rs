//! How the endpoints listen: addresses, message limits, HTTP/2 windows, TLS.

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The `[server]` section of the config.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// Where gRPC is served (Triton's port 8001 by default).
    #[serde(default = "default_grpc_address")]
    pub grpc_address: SocketAddr,
    /// Where HTTP/REST and `/metrics` are served (Triton's port 8000 by default).
    #[serde(default = "default_http_address")]
    pub http_address: SocketAddr,
    /// Largest request or response message, in MiB; larger requests are refused.
    #[serde(default = "default_max_message_mib")]
    pub max_message_mib: usize,
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

fn default_grpc_address() -> SocketAddr {
    SocketAddr::from(([0, 0, 0, 0], 8001))
}

fn default_http_address() -> SocketAddr {
    SocketAddr::from(([0, 0, 0, 0], 8000))
}

fn default_max_message_mib() -> usize {
    64
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
            http2_stream_window_kib: default_stream_window_kib(),
            http2_connection_window_kib: default_connection_window_kib(),
            http2_max_frame_kib: default_max_frame_kib(),
            drain_timeout_s: default_drain_timeout_s(),
            tls: None,
            model_repository: None,
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

    /// Lets repository calls load model files found under `root`.
    pub fn with_model_repository(mut self, root: impl Into<PathBuf>) -> Self {
        self.model_repository = Some(root.into());
        self
    }

    /// The largest message, in bytes.
    pub fn max_message_bytes(&self) -> usize {
        self.max_message_mib.saturating_mul(1 << 20)
    }
}
