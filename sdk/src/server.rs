//! The KServe V2 server a runtime runs ([`crate::Runtime::serve`]): where it listens,
//! and how it stops.

use std::net::SocketAddr;

/// A running KServe V2 server (gRPC and HTTP/REST, with `/metrics`), started by
/// [`crate::Runtime::serve`]. Dropping it stops the endpoints without a drain;
/// [`Server::shutdown`] stops them gracefully.
pub struct Server {
    inner: modelless_runtime::kserve::Server,
}

impl Server {
    pub(crate) fn new(inner: modelless_runtime::kserve::Server) -> Self {
        Server { inner }
    }

    /// The address the gRPC endpoint listens on (its port, where the config asked for
    /// port 0).
    pub fn grpc_address(&self) -> SocketAddr {
        self.inner.grpc_address()
    }

    /// The address the HTTP/REST endpoint listens on.
    pub fn http_address(&self) -> SocketAddr {
        self.inner.http_address()
    }

    /// Stops gracefully: reports not ready, takes no new connections, and answers the
    /// requests under way (up to the config's drain timeout).
    pub async fn shutdown(self) {
        self.inner.shutdown().await;
    }
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("grpc", &self.grpc_address()).field("http", &self.http_address()).finish()
    }
}
