//! Backend MCP servers: started lazily the first time a role needs one, over
//! stdio, with stderr captured (never leaked to the gateway's own stdio, which
//! may be the MCP channel), and every request bounded by a timeout so a dead
//! or hung backend is reported instead of waited on.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation, JsonObject, Tool,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde::Serialize;
use tokio::io::AsyncBufReadExt;
use tokio::sync::{Mutex as AsyncMutex, broadcast};
use troupe_core::config::McpServer;
use troupe_core::rbac::names;

/// Lines of a backend's stderr kept for `troupe mcp status` and error reports.
const STDERR_LINES: usize = 200;

/// A backend that could not serve a request.
#[derive(Debug, Clone, thiserror::Error)]
pub enum BackendError {
    /// No backend of that name is configured.
    #[error("no backend server named {0:?} is configured")]
    Unknown(String),
    /// The process could not be started.
    #[error("backend {server:?} could not be started ({command}): {message}")]
    Spawn {
        /// The server.
        server: String,
        /// Its command line.
        command: String,
        /// The OS error.
        message: String,
    },
    /// The MCP handshake failed or the process exited during it.
    #[error("backend {server:?} failed its MCP handshake: {message}{}", stderr_hint(stderr))]
    Handshake {
        /// The server.
        server: String,
        /// What went wrong.
        message: String,
        /// The last lines of its stderr.
        stderr: Vec<String>,
    },
    /// It did not answer in time.
    #[error(
        "backend {server:?} did not answer {what} within {seconds} s; it was stopped and will be restarted on the next call{}",
        stderr_hint(stderr)
    )]
    Hung {
        /// The server.
        server: String,
        /// The request.
        what: String,
        /// The limit.
        seconds: u64,
        /// The last lines of its stderr.
        stderr: Vec<String>,
    },
    /// The process exited or closed its stdio.
    #[error("backend {server:?} is gone ({message}); it will be restarted on the next call{}", stderr_hint(stderr))]
    Dead {
        /// The server.
        server: String,
        /// What the transport said.
        message: String,
        /// The last lines of its stderr.
        stderr: Vec<String>,
    },
    /// It answered with a protocol error.
    #[error("backend {server:?} refused the request: {message}")]
    Protocol {
        /// The server.
        server: String,
        /// Its error.
        message: String,
    },
}

fn stderr_hint(lines: &[String]) -> String {
    match lines.last() {
        Some(last) => format!("; last stderr line: {last}"),
        None => String::new(),
    }
}

/// Reacts to a backend's notifications: a changed tool list marks the cached
/// list stale and tells the sessions.
struct BackendClient {
    server: String,
    stale: Arc<AtomicBool>,
    changes: broadcast::Sender<String>,
}

impl ClientHandler for BackendClient {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.stale.store(true, Ordering::SeqCst);
        let _ = self.changes.send(self.server.clone());
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("troupe-gateway", env!("CARGO_PKG_VERSION")),
        )
    }
}

/// A connected backend.
struct Connection {
    service: RunningService<RoleClient, BackendClient>,
    tools: AsyncMutex<Option<Arc<Vec<Tool>>>>,
    stale: Arc<AtomicBool>,
}

/// What `troupe mcp status` shows for one backend.
#[derive(Debug, Clone, Serialize)]
pub struct BackendStatus {
    /// The server name.
    pub name: String,
    /// Its command line.
    pub command: String,
    /// `not-started`, `connected`, `failed`.
    pub state: String,
    /// Its tools, when connected.
    pub tools: Vec<String>,
    /// The last error, when failed.
    pub error: Option<String>,
    /// The last lines of its stderr.
    pub stderr_tail: Vec<String>,
}

type Slot = Arc<AsyncMutex<Option<Arc<Connection>>>>;

/// All backends of one gateway.
pub struct Backends {
    specs: BTreeMap<String, McpServer>,
    /// One slot per server, each locked only while that server is started, so
    /// a slow or hung backend never holds up the others.
    slots: Mutex<HashMap<String, Slot>>,
    stderr: Mutex<HashMap<String, Arc<Mutex<VecDeque<String>>>>>,
    errors: Mutex<HashMap<String, String>>,
    changes: broadcast::Sender<String>,
    connect_timeout: Duration,
    call_timeout: Duration,
}

impl Backends {
    /// Backends from validated specs; nothing is started yet.
    pub fn new(specs: BTreeMap<String, McpServer>, connect_timeout: Duration, call_timeout: Duration) -> Backends {
        let (changes, _) = broadcast::channel(64);
        Backends {
            specs,
            slots: Mutex::new(HashMap::new()),
            stderr: Mutex::new(HashMap::new()),
            errors: Mutex::new(HashMap::new()),
            changes,
            connect_timeout,
            call_timeout,
        }
    }

    /// The configured server names.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.specs.keys().map(String::as_str)
    }

    /// True when `server` is configured.
    pub fn has(&self, server: &str) -> bool {
        self.specs.contains_key(server)
    }

    /// Server names whose tool list changed, as they change.
    pub fn subscribe_changes(&self) -> broadcast::Receiver<String> {
        self.changes.subscribe()
    }

    fn stderr_tail(&self, server: &str) -> Vec<String> {
        let map = self.stderr.lock().unwrap_or_else(|e| e.into_inner());
        map.get(server)
            .map(|lines| lines.lock().unwrap_or_else(|e| e.into_inner()).iter().rev().take(5).rev().cloned().collect())
            .unwrap_or_default()
    }

    fn command_line(spec: &McpServer) -> String {
        std::iter::once(spec.command.as_str()).chain(spec.args.iter().map(String::as_str)).collect::<Vec<_>>().join(" ")
    }

    fn record_error(&self, server: &str, error: &BackendError) {
        self.errors.lock().unwrap_or_else(|e| e.into_inner()).insert(server.to_string(), error.to_string());
    }

    fn slot(&self, server: &str) -> Slot {
        self.slots.lock().unwrap_or_else(|e| e.into_inner()).entry(server.to_string()).or_default().clone()
    }

    async fn connect(&self, server: &str) -> Result<Arc<Connection>, BackendError> {
        let slot = self.slot(server);
        let mut current = slot.lock().await;
        if let Some(c) = current.as_ref() {
            if !c.service.is_transport_closed() {
                return Ok(c.clone());
            }
            *current = None;
        }
        let spec = self.specs.get(server).ok_or_else(|| BackendError::Unknown(server.to_string()))?;
        let mut command = tokio::process::Command::new(&spec.command);
        command.args(&spec.args).envs(&spec.env).kill_on_drop(true);
        let spawned = TokioChildProcess::builder(command).stderr(Stdio::piped()).spawn();
        let (transport, stderr) = match spawned {
            Ok(parts) => parts,
            Err(e) => {
                let error = BackendError::Spawn {
                    server: server.to_string(),
                    command: Self::command_line(spec),
                    message: e.to_string(),
                };
                self.record_error(server, &error);
                return Err(error);
            }
        };
        let lines = Arc::new(Mutex::new(VecDeque::new()));
        self.stderr.lock().unwrap_or_else(|e| e.into_inner()).insert(server.to_string(), lines.clone());
        let stderr_reader = stderr.map(|stderr| {
            tokio::spawn(async move {
                let mut reader = tokio::io::BufReader::new(stderr).lines();
                while let Ok(Some(line)) = reader.next_line().await {
                    let mut lines = lines.lock().unwrap_or_else(|e| e.into_inner());
                    if lines.len() == STDERR_LINES {
                        lines.pop_front();
                    }
                    lines.push_back(line);
                }
            })
        });
        let stale = Arc::new(AtomicBool::new(true));
        let client = BackendClient { server: server.to_string(), stale: stale.clone(), changes: self.changes.clone() };
        let service = match tokio::time::timeout(self.connect_timeout, client.serve(transport)).await {
            Ok(Ok(service)) => service,
            Ok(Err(e)) => {
                // A backend that failed its handshake is usually exiting: its
                // last words (the reason) are still in the pipe. Read them first.
                if let Some(reader) = stderr_reader {
                    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), reader).await;
                }
                let error = BackendError::Handshake {
                    server: server.to_string(),
                    message: e.to_string(),
                    stderr: self.stderr_tail(server),
                };
                self.record_error(server, &error);
                return Err(error);
            }
            Err(_) => {
                let error = BackendError::Hung {
                    server: server.to_string(),
                    what: "the MCP handshake".into(),
                    seconds: self.connect_timeout.as_secs(),
                    stderr: self.stderr_tail(server),
                };
                self.record_error(server, &error);
                return Err(error);
            }
        };
        self.errors.lock().unwrap_or_else(|e| e.into_inner()).remove(server);
        let connection = Arc::new(Connection { service, tools: AsyncMutex::new(None), stale });
        *current = Some(connection.clone());
        Ok(connection)
    }

    async fn drop_connection(&self, server: &str) {
        if let Some(c) = self.slot(server).lock().await.take() {
            c.service.cancellation_token().cancel();
        }
    }

    fn classify(&self, server: &str, what: &str, error: rmcp::ServiceError) -> BackendError {
        match error {
            rmcp::ServiceError::McpError(e) => {
                BackendError::Protocol { server: server.to_string(), message: e.message.to_string() }
            }
            rmcp::ServiceError::Timeout { timeout } => BackendError::Hung {
                server: server.to_string(),
                what: what.to_string(),
                seconds: timeout.as_secs(),
                stderr: self.stderr_tail(server),
            },
            other => BackendError::Dead {
                server: server.to_string(),
                message: other.to_string(),
                stderr: self.stderr_tail(server),
            },
        }
    }

    /// The tools of `server`, as it names them (without the prefix), started
    /// if needed. Tools whose names are invalid are left out.
    pub async fn tools(&self, server: &str) -> Result<Arc<Vec<Tool>>, BackendError> {
        let connection = self.connect(server).await?;
        let mut cached = connection.tools.lock().await;
        if !connection.stale.swap(false, Ordering::SeqCst)
            && let Some(tools) = cached.as_ref()
        {
            return Ok(tools.clone());
        }
        let listed = tokio::time::timeout(self.call_timeout, connection.service.peer().list_all_tools()).await;
        let tools = match listed {
            Ok(Ok(tools)) => tools,
            Ok(Err(e)) => {
                let error = self.classify(server, "tools/list", e);
                drop(cached);
                self.fail(server, &error).await;
                return Err(error);
            }
            Err(_) => {
                let error = BackendError::Hung {
                    server: server.to_string(),
                    what: "tools/list".into(),
                    seconds: self.call_timeout.as_secs(),
                    stderr: self.stderr_tail(server),
                };
                drop(cached);
                self.fail(server, &error).await;
                return Err(error);
            }
        };
        let mut valid = Vec::with_capacity(tools.len());
        for tool in tools {
            match names::validate_tool_name(&tool.name) {
                Ok(()) => valid.push(tool),
                Err(e) => tracing::warn!(server, "hiding a backend tool: {e}"),
            }
        }
        let tools = Arc::new(valid);
        *cached = Some(tools.clone());
        Ok(tools)
    }

    async fn fail(&self, server: &str, error: &BackendError) {
        self.record_error(server, error);
        if matches!(error, BackendError::Hung { .. } | BackendError::Dead { .. }) {
            self.drop_connection(server).await;
        }
    }

    /// Calls `tool` (as the backend names it) on `server`.
    pub async fn call(
        &self,
        server: &str,
        tool: &str,
        arguments: Option<JsonObject>,
    ) -> Result<CallToolResult, BackendError> {
        let connection = self.connect(server).await?;
        let mut params = CallToolRequestParams::new(tool.to_string());
        params.arguments = arguments;
        let called = tokio::time::timeout(self.call_timeout, connection.service.peer().call_tool(params)).await;
        let error = match called {
            Ok(Ok(result)) => return Ok(result),
            Ok(Err(e)) => self.classify(server, &format!("tools/call {tool}"), e),
            Err(_) => BackendError::Hung {
                server: server.to_string(),
                what: format!("tools/call {tool}"),
                seconds: self.call_timeout.as_secs(),
                stderr: self.stderr_tail(server),
            },
        };
        self.fail(server, &error).await;
        Err(error)
    }

    /// The status of every backend; with `connect`, each is started (and its
    /// tools listed) first.
    pub async fn status(&self, connect: bool) -> Vec<BackendStatus> {
        let mut out = Vec::new();
        for (name, spec) in &self.specs {
            let tools = if connect { Some(self.tools(name).await) } else { None };
            let connected = self.slot(name).try_lock().map(|c| c.is_some()).unwrap_or(false);
            let error = self.errors.lock().unwrap_or_else(|e| e.into_inner()).get(name).cloned();
            let (state, tools) = match tools {
                Some(Ok(tools)) => ("connected", tools.iter().map(|t| t.name.to_string()).collect()),
                Some(Err(_)) => ("failed", Vec::new()),
                None if connected => ("connected", Vec::new()),
                None if error.is_some() => ("failed", Vec::new()),
                None => ("not-started", Vec::new()),
            };
            out.push(BackendStatus {
                name: name.clone(),
                command: Self::command_line(spec),
                state: state.to_string(),
                tools,
                error,
                stderr_tail: self.stderr_tail(name),
            });
        }
        out
    }

    /// Adds an already-running backend reached over `transport` (an in-process
    /// server for embedding and benchmarks), as if it had been started.
    pub async fn attach<T, E, A>(&mut self, server: &str, transport: T) -> Result<(), BackendError>
    where
        T: rmcp::transport::IntoTransport<RoleClient, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        names::validate_server_name(server).map_err(|e| BackendError::Handshake {
            server: server.to_string(),
            message: e.to_string(),
            stderr: Vec::new(),
        })?;
        let stale = Arc::new(AtomicBool::new(true));
        let client = BackendClient { server: server.to_string(), stale: stale.clone(), changes: self.changes.clone() };
        let service = client.serve(transport).await.map_err(|e| BackendError::Handshake {
            server: server.to_string(),
            message: e.to_string(),
            stderr: Vec::new(),
        })?;
        self.specs.insert(
            server.to_string(),
            McpServer { command: "(in-process)".into(), args: Vec::new(), env: Default::default() },
        );
        let connection = Arc::new(Connection { service, tools: AsyncMutex::new(None), stale });
        *self.slot(server).lock().await = Some(connection);
        Ok(())
    }

    /// Stops every backend.
    pub async fn shutdown(&self) {
        let slots: Vec<Slot> = self.slots.lock().unwrap_or_else(|e| e.into_inner()).values().cloned().collect();
        for slot in slots {
            if let Some(c) = slot.lock().await.take() {
                c.service.cancellation_token().cancel();
            }
        }
    }
}
