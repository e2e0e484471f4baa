//! Serving the gateway over stdio (one client: the engine that spawned it) or
//! Streamable HTTP on loopback (any number of requests, one session: a
//! gateway process serves one agent identity).

use std::net::SocketAddr;
use std::sync::Arc;

use rmcp::ServiceExt;
use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
};
use tokio_util::sync::CancellationToken;

use crate::gateway::Gateway;
use crate::server::GatewayHandler;
use crate::session::Session;

/// A failure to serve.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The MCP session could not start.
    #[error("MCP session failed: {0}")]
    Mcp(String),
    /// The HTTP listener failed.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
    /// A non-loopback address was asked for.
    #[error("refusing to listen on {0}: the gateway binds to loopback only (127.0.0.1 or ::1)")]
    NotLoopback(SocketAddr),
}

/// Serves one client over stdin/stdout until it disconnects.
pub async fn serve_stdio(gateway: Arc<Gateway>, session: Arc<Session>) -> Result<(), ServeError> {
    let handler = GatewayHandler::new(gateway.clone(), session);
    let watcher = handler.watch_backends();
    let running = handler.serve(rmcp::transport::stdio()).await.map_err(|e| ServeError::Mcp(e.to_string()))?;
    let _ = running.waiting().await;
    watcher.abort();
    gateway.backends.shutdown().await;
    Ok(())
}

/// Binds `addr` (loopback only) and returns the bound address and a future
/// serving Streamable HTTP at `/mcp` until `cancel` fires.
pub async fn bind_http(
    gateway: Arc<Gateway>,
    session: Arc<Session>,
    addr: SocketAddr,
    cancel: CancellationToken,
) -> Result<(SocketAddr, impl Future<Output = ()>), ServeError> {
    if !addr.ip().is_loopback() {
        return Err(ServeError::NotLoopback(addr));
    }
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|source| ServeError::Listen { addr, source })?;
    let bound = listener.local_addr().map_err(|source| ServeError::Listen { addr, source })?;
    let watcher_handler = GatewayHandler::new(gateway.clone(), session.clone());
    let config = StreamableHttpServerConfig::default().with_cancellation_token(cancel.child_token());
    let service = StreamableHttpService::new(
        move || Ok(GatewayHandler::new(gateway.clone(), session.clone())),
        LocalSessionManager::default().into(),
        config,
    );
    let router = axum::Router::new().nest_service("/mcp", service);
    let serve = async move {
        let watcher = watcher_handler.watch_backends();
        let _ = axum::serve(listener, router).with_graceful_shutdown(async move { cancel.cancelled().await }).await;
        watcher.abort();
    };
    Ok((bound, serve))
}
