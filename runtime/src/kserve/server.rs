//! Both endpoints started together on the caller's tokio runtime, and stopped
//! together: stop accepting, let requests under way finish, return.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tonic::transport::server::TcpIncoming;

use super::config::{ModelControlMode, ServerConfig};
use super::grpc::GrpcEndpoint;
use super::http::router;
use super::infer_path::InferenceRoutes;
use super::service::InferenceService;
use super::tls::{self, TlsError};
use crate::error::Cause;

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// An address could not be bound.
    #[error("cannot listen on {address}: {source}")]
    Bind {
        /// The address.
        address: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The TLS certificate or key could not be used.
    #[error("TLS: {0}")]
    Tls(#[from] TlsError),
    /// A setting is out of range.
    #[error("config: {0}")]
    Config(String),
}

/// The running endpoints.
pub struct Server {
    grpc_address: SocketAddr,
    http_address: SocketAddr,
    service: Arc<InferenceService>,
    stop: watch::Sender<bool>,
    endpoints: Vec<JoinHandle<()>>,
    drain_timeout: Duration,
}

// Its parts (sessions, threads, closures, channels) print nothing useful.
impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").finish_non_exhaustive()
    }
}

impl Server {
    /// Binds both addresses and serves `service` on them from the current tokio
    /// runtime.
    pub async fn start(service: Arc<InferenceService>, config: &ServerConfig) -> Result<Server, ServerError> {
        config.validate().map_err(ServerError::Config)?;
        if config.model_control_mode == ModelControlMode::Explicit && config.admin_token_file.is_none() {
            tracing::warn!(
                "explicit model control without an admin token: anyone who reaches the port may load and unload models"
            );
        }
        let bind = |address: SocketAddr| async move {
            TcpListener::bind(address).await.map_err(|source| ServerError::Bind { address, source })
        };
        let grpc_listener = bind(config.grpc_address).await?;
        let http_listener = bind(config.http_address).await?;
        let local = |l: &TcpListener, address| l.local_addr().map_err(|source| ServerError::Bind { address, source });
        let grpc_address = local(&grpc_listener, config.grpc_address)?;
        let http_address = local(&http_listener, config.http_address)?;
        let (stop, stopped) = watch::channel(false);
        let until_stopped = move || {
            let mut stopped = stopped.clone();
            async move {
                let _ = stopped.wait_for(|&s| s).await;
            }
        };
        let tls = match &config.tls {
            Some(files) => Some(tls::load(files)?),
            None => None,
        };

        let max = config.max_message_bytes();
        let read_timeout = config.request_read_timeout();
        let grpc_service = InferenceRoutes::new(GrpcEndpoint::new(service.clone()), max, read_timeout);
        // A peer that stops answering HTTP/2 pings (a dead client, or one that opened a
        // connection only to hold it) is disconnected after a read timeout or two.
        let mut builder = tonic::transport::Server::builder()
            .http2_keepalive_interval(Some(read_timeout))
            .http2_keepalive_timeout(Some(read_timeout))
            .initial_stream_window_size(config.http2_stream_window_kib.saturating_mul(1024))
            .initial_connection_window_size(config.http2_connection_window_kib.saturating_mul(1024))
            .max_frame_size(config.http2_max_frame_kib.clamp(16, 16383) * 1024);
        if let Some(tls) = &tls {
            builder = builder
                .tls_config(tls.grpc.clone())
                .map_err(|e| TlsError::Refused { endpoint: "gRPC", source: Cause::new(e) })?;
        }
        let incoming = TcpIncoming::from(grpc_listener).with_nodelay(Some(true));
        let grpc = builder.add_service(grpc_service).serve_with_incoming_shutdown(incoming, until_stopped());
        let grpc = tokio::spawn(async move {
            if let Err(e) = grpc.await {
                tracing::error!(error = %e, "gRPC endpoint stopped");
            }
        });

        let routes = router(service.clone(), read_timeout);
        let http = match tls {
            Some(tls) => {
                let listener = tls::TlsListener::spawn(http_listener, tls.http);
                tokio::spawn(serve_http(listener, routes, read_timeout, until_stopped()))
            }
            None => tokio::spawn(serve_http(http_listener, routes, read_timeout, until_stopped())),
        };
        tracing::info!(%grpc_address, %http_address, "serving KServe V2");
        Ok(Server {
            grpc_address,
            http_address,
            service,
            stop,
            endpoints: vec![grpc, http],
            drain_timeout: Duration::from_secs(config.drain_timeout_s),
        })
    }

    /// Where gRPC is served.
    pub fn grpc_address(&self) -> SocketAddr {
        self.grpc_address
    }

    /// Where HTTP is served.
    pub fn http_address(&self) -> SocketAddr {
        self.http_address
    }

    /// Stops: the server turns not ready, stops accepting connections, and waits (up
    /// to the drain timeout) for the requests under way to be answered.
    pub async fn shutdown(self) {
        self.service.start_draining();
        let _ = self.stop.send(true);
        let all = async {
            for endpoint in self.endpoints {
                let _ = endpoint.await;
            }
        };
        if tokio::time::timeout(self.drain_timeout, all).await.is_err() {
            tracing::warn!(timeout = ?self.drain_timeout, "requests still under way at the end of the drain");
        }
    }
}

/// Serves HTTP/1 and HTTP/2 connections from `listener` until `stopped`, then lets the
/// connections finish what they are answering. A client that has not sent a request's
/// headers within `read_timeout` is disconnected (the body's own timeout is the
/// router's).
async fn serve_http<L>(
    mut listener: L,
    routes: axum::Router,
    read_timeout: Duration,
    stopped: impl Future<Output = ()> + Send + 'static,
) where
    L: axum::serve::Listener,
{
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(read_timeout);
    let connections = GracefulShutdown::new();
    let mut stopped = std::pin::pin!(stopped);
    loop {
        let (io, _) = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut stopped => break,
        };
        let service = TowerToHyperService::new(routes.clone());
        let connection = builder.serve_connection_with_upgrades(TokioIo::new(io), service);
        let connection = connections.watch(connection.into_owned());
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "HTTP connection ended with an error");
            }
        });
    }
    connections.shutdown().await;
}
