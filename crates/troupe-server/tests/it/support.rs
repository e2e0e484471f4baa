//! A server per test, on its own thread and runtime, stopped when dropped.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;
use troupe_core::layout::Layout;
use troupe_server::AppState;
use troupe_server::auth::Auth;
use troupe_store::{SqliteStore, Store};

/// A running server over a temporary project.
pub struct Server {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// The project's store, for arranging and checking state directly.
    pub store: Arc<dyn Store>,
    dir: tempfile::TempDir,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    /// An open loopback server.
    pub fn start() -> Server {
        Server::start_with(Auth::open())
    }

    /// A server that answers by `auth`.
    pub fn start_with(auth: Auth) -> Server {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".troupe/state")).unwrap();
        Server::start_in(dir, auth)
    }

    /// A server over the project in `dir`.
    pub fn start_in(dir: tempfile::TempDir, auth: Auth) -> Server {
        let layout = Layout::new(dir.path());
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open_project(&layout).unwrap());
        let state = AppState::new(layout, store.clone(), Default::default(), auth);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (ready, addr) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                ready.send(listener.local_addr().unwrap()).unwrap();
                troupe_server::serve(listener, state, async move {
                    let _ = stopped.await;
                })
                .await
                .unwrap();
            });
        });
        let addr = addr.recv().unwrap();
        Server { url: format!("http://{addr}"), store, dir, stop: Some(stop), thread: Some(thread) }
    }

    /// The project root.
    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// A file of the project.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// GET `path`: (status, JSON body).
    pub fn get(&self, path: &str) -> (u16, Value) {
        answer(agent().get(&format!("{}{path}", self.url)).call())
    }

    /// POST `body` as JSON to `path`: (status, JSON body).
    pub fn post(&self, path: &str, body: Value) -> (u16, Value) {
        answer(agent().post(&format!("{}{path}", self.url)).send_json(body))
    }

    /// Stop the server gracefully and wait for it.
    pub fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A client that hands back 4xx and 5xx answers instead of failing on them.
pub fn agent() -> ureq::Agent {
    ureq::Agent::config_builder().http_status_as_error(false).build().into()
}

/// Status and JSON body of an answer (`null` for an empty or non-JSON body).
pub fn answer(res: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> (u16, Value) {
    let mut res = res.unwrap();
    let status = res.status().as_u16();
    let text = res.body_mut().read_to_string().unwrap_or_default();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// Asserts `body` is the one error shape with `kind`.
pub fn assert_error(body: &Value, kind: &str) {
    let e = &body["error"];
    assert_eq!(e["kind"], kind, "{body}");
    assert!(e["message"].as_str().is_some_and(|m| !m.is_empty()), "{body}");
    assert!(e.get("hint").is_some(), "hint is always present (null or text): {body}");
}

/// A documented path with every `{param}` filled with `value`.
pub fn fill(path: &str, value: &str) -> String {
    let mut out = String::new();
    let mut rest = path;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        out.push_str(value);
        rest = rest[open..].split_once('}').map_or("", |(_, after)| after);
    }
    out.push_str(rest);
    out
}
