//! Serving the gateway over stdio (one client: the engine that spawned it) or
//! Streamable HTTP (any number of requests, one session: a gateway process
//! serves one agent identity).
//!
//! Both transports put [`wire::check`] in front of rmcp, so a malformed
//! message gets a JSON-RPC error answer instead of silence. Over stdio a
//! reader task reads bounded lines and either passes a line to rmcp (through
//! an in-memory pipe) or answers it; one writer task puts rmcp's answers and
//! those on stdout a whole line at a time. Over HTTP every request must carry
//! the agent's bearer token (`Authorization: Bearer …`, checked against the
//! hash in the store), on loopback too: another local user can reach a
//! loopback port.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::ServiceExt;
use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
};
use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::gateway::Gateway;
use crate::server::GatewayHandler;
use crate::session::Session;
use crate::wire;

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
}

/// Serves one client over stdin/stdout until it disconnects.
pub async fn serve_stdio(gateway: Arc<Gateway>, session: Arc<Session>) -> Result<(), ServeError> {
    serve_io(gateway, session, tokio::io::stdin(), tokio::io::stdout()).await
}

/// Serves one client reading newline-delimited JSON-RPC from `input` and
/// answering on `output` (stdio, or an in-memory pipe in tests).
pub async fn serve_io<R, W>(gateway: Arc<Gateway>, session: Arc<Session>, input: R, output: W) -> Result<(), ServeError>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (to_rmcp, rmcp_in) = tokio::io::duplex(1 << 16);
    let (rmcp_out, from_rmcp) = tokio::io::duplex(1 << 16);
    let (lines, mut outbox) = mpsc::channel::<Vec<u8>>(64);

    let writer = tokio::spawn(async move {
        let mut output = output;
        while let Some(line) = outbox.recv().await {
            if output.write_all(&line).await.is_err() || output.flush().await.is_err() {
                break;
            }
        }
    });
    let answers = lines.clone();
    let relay = tokio::spawn(async move {
        let mut from_rmcp = BufReader::new(from_rmcp);
        loop {
            let mut line = Vec::new();
            match from_rmcp.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    if answers.send(line).await.is_err() {
                        break;
                    }
                }
            }
        }
    });
    let reader = tokio::spawn(read_requests(BufReader::new(input), to_rmcp, lines));

    let handler = GatewayHandler::new(gateway.clone(), session);
    let watcher = handler.watch_backends();
    let result = match handler.serve((rmcp_in, rmcp_out)).await {
        Ok(running) => {
            let _ = running.waiting().await;
            Ok(())
        }
        Err(e) => Err(ServeError::Mcp(e.to_string())),
    };
    reader.abort();
    // rmcp's side of the pipe is closed now: the relay drains what it wrote
    // and ends, and the writer ends with the last sender.
    let _ = relay.await;
    let _ = writer.await;
    watcher.abort();
    gateway.backends.shutdown().await;
    result
}

/// Reads lines from `input` (each at most [`wire::MAX_MESSAGE`] bytes kept),
/// passing the well-formed ones to rmcp and answering the others. Ends at EOF,
/// which closes rmcp's input and so the session.
async fn read_requests<R: AsyncBufRead + Unpin>(
    mut input: R,
    mut to_rmcp: tokio::io::DuplexStream,
    answers: mpsc::Sender<Vec<u8>>,
) {
    let mut line = Vec::new();
    loop {
        line.clear();
        let oversized = match read_bounded_line(&mut input, &mut line).await {
            Ok(Some(oversized)) => oversized,
            Ok(None) | Err(_) => break,
        };
        let verdict = if oversized { Err(wire::too_large()) } else { check_line(&line) };
        match verdict {
            Ok(None) => {}
            Ok(Some(message)) => {
                if to_rmcp.write_all(message).await.is_err() || to_rmcp.write_all(b"\n").await.is_err() {
                    break;
                }
            }
            Err(answer) => {
                let mut text = answer.to_string().into_bytes();
                text.push(b'\n');
                if answers.send(text).await.is_err() {
                    break;
                }
            }
        }
    }
    let _ = to_rmcp.shutdown().await;
}

/// A line without its line end: `Ok(None)` for a blank line, else the message
/// to forward, or the error answer.
fn check_line(line: &[u8]) -> Result<Option<&[u8]>, Value> {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    wire::check(line).map(|()| Some(line))
}

/// Reads one line into `buf`, keeping at most [`wire::MAX_MESSAGE`] + 1 bytes
/// of it (the rest is read and dropped, so a huge line costs no memory).
/// `Ok(None)` at end of input; `Ok(Some(true))` when the line was too long.
async fn read_bounded_line<R: AsyncBufRead + Unpin>(input: &mut R, buf: &mut Vec<u8>) -> std::io::Result<Option<bool>> {
    let mut oversized = false;
    let mut any = false;
    loop {
        let available = input.fill_buf().await?;
        if available.is_empty() {
            // End of input: a last line without a line end still counts.
            return Ok(any.then_some(oversized));
        }
        any = true;
        let (chunk, done) = match available.iter().position(|b| *b == b'\n') {
            Some(i) => (&available[..=i], true),
            None => (available, false),
        };
        let take = chunk.len();
        if !oversized {
            if buf.len() + take > wire::MAX_MESSAGE + 1 {
                oversized = true;
                buf.clear();
            } else {
                buf.extend_from_slice(chunk);
            }
        }
        input.consume(take);
        if done {
            return Ok(Some(oversized));
        }
    }
}

/// Who may use an HTTP gateway: the holder of the token whose hash this is.
#[derive(Clone)]
pub struct Auth {
    token_hash: String,
}

impl Auth {
    /// Requests must carry the token that hashes to `token_hash` (see `troupe_store::token`).
    pub fn new(token_hash: impl Into<String>) -> Auth {
        Auth { token_hash: token_hash.into() }
    }
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

/// Refuses a request without the agent's token (401), then answers a malformed
/// JSON-RPC body itself; everything else goes on to rmcp.
async fn guard(State(auth): State<Arc<Auth>>, request: Request, next: Next) -> Response {
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    if !presented.is_some_and(|t| troupe_store::token::matches(t, &auth.token_hash)) {
        let body = wire::error(Value::Null, wire::INVALID_REQUEST, "Unauthorized: a valid bearer token is required");
        let mut response = json_response(StatusCode::UNAUTHORIZED, &body);
        response.headers_mut().insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer"));
        return response;
    }
    if request.method() != axum::http::Method::POST {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, wire::MAX_MESSAGE + 3).await {
        Ok(bytes) => bytes,
        Err(_) => return json_response(StatusCode::PAYLOAD_TOO_LARGE, &wire::too_large()),
    };
    let trimmed = bytes.trim_ascii();
    if let Err(answer) = wire::check(trimmed) {
        let status =
            if answer["error"]["code"] == wire::INVALID_PARAMS { StatusCode::OK } else { StatusCode::BAD_REQUEST };
        return json_response(status, &answer);
    }
    next.run(Request::from_parts(parts, Body::from(bytes))).await
}

/// Binds `addr` and returns the bound address and a future serving
/// Streamable HTTP at `/mcp` until `cancel` fires. Every request must carry
/// the token `auth` names. Off loopback, rmcp's `Host` check (against DNS
/// rebinding from a browser) is off: the bearer token, which a browser never
/// adds on its own, is the guard there.
pub async fn bind_http(
    gateway: Arc<Gateway>,
    session: Arc<Session>,
    addr: SocketAddr,
    auth: Auth,
    cancel: CancellationToken,
) -> Result<(SocketAddr, impl Future<Output = ()>), ServeError> {
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|source| ServeError::Listen { addr, source })?;
    let bound = listener.local_addr().map_err(|source| ServeError::Listen { addr, source })?;
    let watcher_handler = GatewayHandler::new(gateway.clone(), session.clone());
    let mut config = StreamableHttpServerConfig::default()
        .with_cancellation_token(cancel.child_token())
        .with_max_request_body_bytes(wire::MAX_MESSAGE + 3);
    if !addr.ip().is_loopback() {
        config = config.disable_allowed_hosts();
    }
    let service = StreamableHttpService::new(
        move || Ok(GatewayHandler::new(gateway.clone(), session.clone())),
        LocalSessionManager::default().into(),
        config,
    );
    let router = axum::Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn_with_state(Arc::new(auth), guard));
    let serve = async move {
        let watcher = watcher_handler.watch_backends();
        let _ = axum::serve(listener, router).with_graceful_shutdown(async move { cancel.cancelled().await }).await;
        watcher.abort();
    };
    Ok((bound, serve))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_huge_line_is_read_through_and_dropped() {
        let mut input = vec![b'x'; wire::MAX_MESSAGE + 10];
        input.extend_from_slice(b"\n{\"a\":1}\nlast");
        let mut reader = BufReader::with_capacity(4096, &input[..]);
        let mut buf = Vec::new();
        assert_eq!(read_bounded_line(&mut reader, &mut buf).await.unwrap(), Some(true));
        assert!(buf.is_empty());
        buf.clear();
        assert_eq!(read_bounded_line(&mut reader, &mut buf).await.unwrap(), Some(false));
        assert_eq!(buf, b"{\"a\":1}\n");
        buf.clear();
        assert_eq!(read_bounded_line(&mut reader, &mut buf).await.unwrap(), Some(false));
        assert_eq!(buf, b"last");
        buf.clear();
        assert_eq!(read_bounded_line(&mut reader, &mut buf).await.unwrap(), None);
    }
}
