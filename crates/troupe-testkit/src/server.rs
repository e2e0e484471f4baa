//! A stub server running on its own thread and runtime, so that synchronous
//! tests (assert_cmd) and async tests can both use it.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use axum::Router;
use serde_json::Value;
use tokio::sync::oneshot;

/// One request a stub received.
#[derive(Clone, Debug)]
pub struct Recorded {
    /// Request path with query, e.g. `/v1/messages`.
    pub path: String,
    /// The JSON body (`Null` when it was not JSON).
    pub body: Value,
}

/// Shared request log.
pub(crate) type Log = Arc<Mutex<Vec<Recorded>>>;

/// A running stub server bound to `127.0.0.1` (or an address the test
/// names) on a free port; stops on drop.
pub struct StubServer {
    addr: SocketAddr,
    log: Log,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl StubServer {
    pub(crate) fn spawn(router: Router, log: Log) -> Self {
        Self::spawn_on(IpAddr::V4(Ipv4Addr::LOCALHOST), router, log)
    }

    /// As [`StubServer::spawn`], listening on `ip` (an address of this
    /// machine that processes in a test's network namespaces reach).
    pub(crate) fn spawn_on(ip: IpAddr, router: Router, log: Log) -> Self {
        let listener = std::net::TcpListener::bind((ip, 0)).expect("bind a port for the stub server");
        listener.set_nonblocking(true).expect("set the stub listener non-blocking");
        let addr = listener.local_addr().expect("stub listener address");
        let (tx, rx) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(format!("stub-{}", addr.port()))
            .spawn(move || {
                let rt =
                    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("stub server runtime");
                rt.block_on(async move {
                    let listener = tokio::net::TcpListener::from_std(listener).expect("stub listener");
                    let _ = axum::serve(listener, router)
                        .with_graceful_shutdown(async {
                            let _ = rx.await;
                        })
                        .await;
                });
            })
            .expect("spawn the stub server thread");
        StubServer { addr, log, shutdown: Some(tx), thread: Some(thread) }
    }

    /// `http://ADDRESS:PORT` (`127.0.0.1` unless told), no trailing slash.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.log.lock().expect("stub log").clone()
    }
}

impl Drop for StubServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        // Do not join: a CLI that still holds a keep-alive connection would
        // block graceful shutdown; the thread ends with the runtime.
        drop(self.thread.take());
    }
}

/// Records a request and returns its body as JSON.
pub(crate) fn record(log: &Log, path: String, bytes: &[u8]) -> Value {
    let body: Value = serde_json::from_slice(bytes).unwrap_or(Value::Null);
    log.lock().expect("stub log").push(Recorded { path, body: body.clone() });
    body
}

/// Formats one server-sent event.
pub(crate) fn sse(event: Option<&str>, data: &Value) -> String {
    match event {
        Some(e) => format!("event: {e}\ndata: {data}\n\n"),
        None => format!("data: {data}\n\n"),
    }
}

/// A complete SSE response body.
pub(crate) fn sse_response(body: String) -> axum::response::Response {
    axum::response::Response::builder()
        .status(200)
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(axum::body::Body::from(body))
        .expect("sse response")
}

/// A JSON response with a status.
pub(crate) fn json_response(status: u16, body: &Value) -> axum::response::Response {
    axum::response::Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(axum::body::Body::from(body.to_string()))
        .expect("json response")
}

/// The responder's turn for `conversation`, on a blocking thread: a responder
/// may read files or wait for another teammate without stalling the server.
pub(crate) async fn answer(responder: &Arc<dyn crate::Responder>, conversation: crate::Conversation) -> crate::Turn {
    let r = responder.clone();
    tokio::task::spawn_blocking(move || r.respond(&conversation))
        .await
        .unwrap_or_else(|e| crate::Turn::http_error(500, format!("the stub's responder panicked: {e}")))
}
