//! Helpers shared by the gateway's integration tests: a policy from skill
//! texts, a gateway over real backends, and an rmcp client connected to it
//! in memory.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult, JsonObject};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::Value;
use troupe_core::config::{McpServer, RateLimit};
use troupe_core::rbac::policy::{Policy, RoleSettings};
use troupe_core::rbac::skill::Skill;
use troupe_gateway::memory::MemoryDir;
use troupe_gateway::server::GatewayHandler;
use troupe_gateway::{Gateway, GatewayParts, Session};
use troupe_store::{SqliteStore, Store};

pub fn policy(skills: &[&str], inherits: &[(&str, &str)]) -> Policy {
    let skills = skills.iter().map(|s| Skill::parse(&format!("---\n{s}\n---\n")).expect("test skill")).collect();
    let settings = inherits
        .iter()
        .map(|(r, p)| (r.to_string(), RoleSettings { inherits: Some(p.to_string()), description: None }))
        .collect();
    Policy::build(skills, &settings).expect("test policy")
}

pub fn everything() -> McpServer {
    McpServer {
        command: troupe_testkit::peers::bin("mcp-server-everything").display().to_string(),
        args: vec!["stdio".into()],
        env: BTreeMap::new(),
    }
}

pub fn filesystem(dir: &std::path::Path) -> McpServer {
    McpServer {
        command: troupe_testkit::peers::bin("mcp-server-filesystem").display().to_string(),
        args: vec![dir.display().to_string()],
        env: BTreeMap::new(),
    }
}

pub fn changing_backend() -> McpServer {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/changing-backend.mjs");
    let sdk = troupe_testkit::peers::dir().join("node_modules/@modelcontextprotocol/sdk");
    assert!(sdk.exists(), "the MCP TypeScript SDK is missing at {}: run scripts/install-peers", sdk.display());
    McpServer {
        command: "node".into(),
        args: vec![script.display().to_string()],
        env: [("MCP_SDK_DIR".to_string(), sdk.display().to_string())].into(),
    }
}

pub struct Harness {
    pub gateway: Arc<Gateway>,
    pub dir: tempfile::TempDir,
    pub store: Arc<dyn Store>,
}

pub fn harness(policy: Policy, servers: &[(&str, McpServer)], limits: &[(&str, RateLimit)]) -> Harness {
    let dir = tempfile::tempdir().expect("temp dir");
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("troupe.db")).expect("store"));
    let gateway = Gateway::new(GatewayParts {
        policy,
        servers: servers.iter().map(|(n, s)| (n.to_string(), s.clone())).collect(),
        limits: limits.iter().map(|(r, l)| (r.to_string(), l.clone())).collect(),
        store: Some(store.clone()),
        memory: Some(MemoryDir::new(dir.path().join("memory"))),
        root: None,
        audit_values: false,
        connect_timeout: Duration::from_secs(30),
        call_timeout: Duration::from_secs(30),
    });
    Harness { gateway: Arc::new(gateway), dir, store }
}

/// Counts `notifications/tools/list_changed`.
#[derive(Clone, Default)]
pub struct Counter(pub Arc<AtomicUsize>);

impl ClientHandler for Counter {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

pub struct Client {
    pub service: RunningService<RoleClient, Counter>,
    pub changes: Arc<AtomicUsize>,
    pub session: Arc<Session>,
}

impl Client {
    pub async fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .service
            .peer()
            .list_all_tools()
            .await
            .expect("tools/list")
            .into_iter()
            .map(|t| t.name.to_string())
            .collect();
        names.sort();
        names
    }

    pub async fn call(&self, name: &str, args: Value) -> CallToolResult {
        let mut params = CallToolRequestParams::new(name.to_string());
        params.arguments = match args {
            Value::Object(map) => Some(map),
            Value::Null => None,
            other => Some(JsonObject::from_iter([("value".to_string(), other)])),
        };
        self.service.peer().call_tool(params).await.expect("tools/call answered")
    }

    /// Waits (up to 10 s, for loaded machines) until at least `n` notifications arrived; returns the count.
    pub async fn wait_for_changes(&self, n: usize) -> usize {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while self.changes.load(Ordering::SeqCst) < n && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Give a duplicate a moment to show up, so "exactly n" is meaningful.
        tokio::time::sleep(Duration::from_millis(100)).await;
        self.changes.load(Ordering::SeqCst)
    }

    pub async fn changes_after(&self, settle: Duration) -> usize {
        tokio::time::sleep(settle).await;
        self.changes.load(Ordering::SeqCst)
    }
}

pub async fn connect(gateway: &Arc<Gateway>, agent: &str, role: &str) -> Client {
    connect_session(gateway, Session::new(agent, role)).await
}

/// A client for a session set up by the caller (its feature, its task).
pub async fn connect_session(gateway: &Arc<Gateway>, session: Session) -> Client {
    let session = Arc::new(session);
    let handler = GatewayHandler::new(gateway.clone(), session.clone());
    handler.watch_backends();
    let (client_io, server_io) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        if let Ok(running) = handler.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    let counter = Counter::default();
    let changes = counter.0.clone();
    let service = counter.serve(client_io).await.expect("client handshake");
    Client { service, changes, session }
}

pub fn text(result: &CallToolResult) -> String {
    result.content.iter().filter_map(|c| c.as_text().map(|t| t.text.clone())).collect::<Vec<_>>().join("\n")
}

pub fn is_error(result: &CallToolResult) -> bool {
    result.is_error == Some(true)
}
