//! TLS for both endpoints from one certificate and key (PEM files).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::server::TlsStream;
use tonic::transport::{Identity, ServerTlsConfig};

use super::config::TlsConfig;
use crate::error::Cause;

/// Why the certificate and key cannot serve TLS.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// A file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file is not the PEM it should be.
    #[error("{}: {source}", path.display())]
    Pem {
        /// The file.
        path: std::path::PathBuf,
        /// The PEM parser's error.
        #[source]
        source: Cause,
    },
    /// rustls or tonic refused the certificate and key.
    #[error("{endpoint}: {source}")]
    Refused {
        /// The endpoint whose TLS library refused them: `HTTP`, `gRPC`.
        endpoint: &'static str,
        /// Its error.
        #[source]
        source: Cause,
    },
}

/// The certificate, ready for each endpoint.
pub struct LoadedTls {
    /// For tonic.
    pub grpc: ServerTlsConfig,
    /// For the HTTP listener.
    pub http: Arc<rustls::ServerConfig>,
}

/// Reads and checks the certificate and key.
pub fn load(files: &TlsConfig) -> Result<LoadedTls, TlsError> {
    let read = |path: &std::path::Path| {
        std::fs::read(path).map_err(|source| TlsError::Read { path: path.to_path_buf(), source })
    };
    let pem = |path: &std::path::Path| {
        let path = path.to_path_buf();
        move |e: tokio_rustls::rustls::pki_types::pem::Error| TlsError::Pem { path, source: Cause::new(e) }
    };
    let (cert_pem, key_pem) = (read(&files.cert)?, read(&files.key)?);
    let certs = CertificateDer::pem_slice_iter(&cert_pem).collect::<Result<Vec<_>, _>>().map_err(pem(&files.cert))?;
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(pem(&files.key))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut http = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_no_client_auth().with_single_cert(certs, key))
        .map_err(|e| TlsError::Refused { endpoint: "HTTP", source: Cause::new(e) })?;
    http.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(LoadedTls { grpc: ServerTlsConfig::new().identity(Identity::from_pem(cert_pem, key_pem)), http: Arc::new(http) })
}

/// Accepts TCP connections and hands on those whose TLS handshake completed; each
/// handshake runs on its own task, so a slow client holds up nobody else.
pub struct TlsListener {
    accepted: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
}

const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

impl TlsListener {
    /// Starts accepting on `listener`.
    pub fn spawn(listener: TcpListener, config: Arc<rustls::ServerConfig>) -> TlsListener {
        let local = listener.local_addr().unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
        let (handed, accepted) = mpsc::channel(64);
        let acceptor = TlsAcceptor::from(config);
        tokio::spawn(async move {
            loop {
                let (tcp, peer) = tokio::select! {
                    _ = handed.closed() => return,
                    accepted = listener.accept() => match accepted {
                        Ok(accepted) => accepted,
                        Err(e) => {
                            tracing::warn!(error = %e, "accept failed");
                            tokio::time::sleep(Duration::from_millis(10)).await;
                            continue;
                        }
                    },
                };
                let _ = tcp.set_nodelay(true);
                let (acceptor, handed) = (acceptor.clone(), handed.clone());
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                        Ok(Ok(stream)) => drop(handed.send((stream, peer)).await),
                        Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                });
            }
        });
        TlsListener { accepted, local }
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.accepted.recv().await {
            Some(accepted) => accepted,
            // The accepting task ended: nothing more will come.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}
