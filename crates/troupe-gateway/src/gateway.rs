//! The gateway proper: one policy, the backends, troupe's tools, rate limits
//! and the audit log, shared by every client connection. [`Gateway::call`] is
//! the one path every `tools/call` takes: validate the name, check the rate
//! limit, check the permission, find the tool, forward, audit.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::{CallToolResult, ContentBlock, JsonObject, ResultType, Tool};
use serde_json::json;
use troupe_core::config::{McpServer, RateLimit};
use troupe_core::rbac::names::{self, GATEWAY_TOOLS};
use troupe_core::rbac::policy::{Decision, Policy};
use troupe_store::Store;
use troupe_store::audit::Decision as Audited;

use crate::audit::{AuditLog, Entry};
use crate::backend::{BackendStatus, Backends};
use crate::memory::MemoryDir;
use crate::ratelimit::{CallBudgets, RateLimiter, Refused};
use crate::session::Session;
use crate::setup::Setup;
use crate::tools::{self, TROUPE_SERVER};

/// Everything shared by the connections of one gateway.
pub struct Gateway {
    /// The role policy.
    pub policy: Policy,
    /// Backend servers.
    pub backends: Backends,
    /// The store (board, mailbox, audit); `None` outside a project.
    pub store: Option<Arc<dyn Store>>,
    /// Role memory files; `None` outside a project.
    pub memory: Option<MemoryDir>,
    /// The project root, for the quality gates; `None` outside a project.
    pub root: Option<std::path::PathBuf>,
    limits: BTreeMap<String, RateLimit>,
    limiter: Arc<RateLimiter>,
    call_budgets: CallBudgets,
    audit: AuditLog,
    beats: crate::lease::Beats,
}

/// How a gateway is put together, for embedding and tests.
pub struct GatewayParts {
    /// The policy.
    pub policy: Policy,
    /// Backends by name (names already validated).
    pub servers: BTreeMap<String, McpServer>,
    /// Rate limits per role.
    pub limits: BTreeMap<String, RateLimit>,
    /// The store, if any.
    pub store: Option<Arc<dyn Store>>,
    /// The memory folder, if any.
    pub memory: Option<MemoryDir>,
    /// The project root, if any (runs the `on_task_completed` gate).
    pub root: Option<std::path::PathBuf>,
    /// Record argument values, not only shapes.
    pub audit_values: bool,
    /// Backend start timeout.
    pub connect_timeout: Duration,
    /// Backend call timeout.
    pub call_timeout: Duration,
}

/// What the audit log needs to know about the call being decided.
struct CallContext<'a> {
    session: &'a Session,
    role: &'a str,
    tool: &'a str,
    arguments: &'a Option<JsonObject>,
    started: Instant,
}

/// The text of every refusal of a tool call. The same words for a tool that
/// exists but is hidden and one that does not exist, so a denial reveals nothing.
pub fn not_available(tool: &str, role: &str) -> String {
    format!("tool {tool:?} is not available to role {role:?}")
}

fn text_result(text: String, is_error: bool) -> CallToolResult {
    let content = vec![ContentBlock::text(text)];
    if is_error { CallToolResult::error(content) } else { CallToolResult::success(content) }
}

/// The troupe tools delegate mode refuses whatever the role allows (seed 003
/// B5 `deny_file_locks`; its writes are the hooks' to refuse).
const DELEGATE_REFUSED: [&str; 2] = [troupe_core::tools::LOCK_FILE, troupe_core::tools::UNLOCK_FILE];

impl Gateway {
    /// A gateway from parts.
    pub fn new(parts: GatewayParts) -> Gateway {
        Gateway {
            policy: parts.policy,
            backends: Backends::new(parts.servers, parts.connect_timeout, parts.call_timeout),
            audit: AuditLog::new(parts.store.clone(), parts.audit_values),
            store: parts.store,
            memory: parts.memory,
            root: parts.root,
            limits: parts.limits,
            limiter: Arc::new(RateLimiter::default()),
            beats: crate::lease::Beats::new(troupe_store::lease::DEFAULT_LEASE),
            call_budgets: CallBudgets::default(),
        }
    }

    /// A gateway for a loaded project setup, with its store.
    pub fn from_setup(setup: Setup, store: Option<Arc<dyn Store>>) -> Gateway {
        let memory = Some(MemoryDir::new(setup.layout.memory_dir()));
        let budgets = setup.call_budgets.clone();
        let gateway = Gateway::new(GatewayParts {
            policy: setup.policy,
            servers: setup.servers,
            limits: setup.gateway.rate_limits,
            store,
            memory,
            root: Some(setup.layout.root().to_path_buf()),
            audit_values: setup.gateway.audit_argument_values,
            connect_timeout: Duration::from_secs(setup.gateway.connect_timeout_seconds),
            call_timeout: Duration::from_secs(setup.gateway.call_timeout_seconds),
        });
        gateway.with_lease(setup.lease).with_call_budgets(budgets)
    }

    /// Each call renews its agent's lease by `lease` (`[store] lease_seconds`).
    pub fn with_lease(mut self, lease: Duration) -> Gateway {
        self.beats = crate::lease::Beats::new(lease);
        self
    }

    /// The same gateway with these budgets of gateway calls.
    pub fn with_call_budgets(mut self, budgets: CallBudgets) -> Gateway {
        self.call_budgets = budgets;
        self
    }

    /// The tools `role` sees: `set_role`, troupe's tools it may call, and the
    /// tools of every backend it may reach (started on first need). A backend
    /// that fails to start contributes nothing; `troupe mcp status` says why.
    pub async fn visible_tools(&self, role: &str) -> Vec<Tool> {
        let mut out = vec![tools::set_role_tool()];
        out.extend(tools::troupe_tools().into_iter().filter(|t| self.policy.check_tool(role, &t.name).is_allowed()));
        let servers: Vec<String> =
            self.backends.names().filter(|s| self.policy.may_reach_server(role, s)).map(str::to_string).collect();
        // Start (or list) the backends side by side: one hung backend costs one timeout, not one each.
        let listed = futures::future::join_all(servers.iter().map(|s| self.backends.tools(s))).await;
        for (server, listed) in servers.into_iter().zip(listed) {
            match listed {
                Ok(list) => {
                    for tool in list.iter() {
                        let full = names::full_tool_name(&server, &tool.name);
                        if self.policy.check_tool(role, &full).is_allowed() {
                            let mut exposed = tool.clone();
                            exposed.name = full.into();
                            out.push(exposed);
                        }
                    }
                }
                Err(e) => tracing::warn!("{e}"),
            }
        }
        out
    }

    /// The names `role` sees.
    pub async fn visible_names(&self, role: &str) -> BTreeSet<String> {
        self.visible_tools(role).await.into_iter().map(|t| t.name.to_string()).collect()
    }

    fn limits_for<'a>(&'a self, session: &Session, role: &str) -> Vec<(&'a str, &'a RateLimit)> {
        let mut roles = vec![session.ceiling.as_str(), role];
        roles.dedup();
        roles.into_iter().filter_map(|r| self.limits.get_key_value(r)).map(|(k, v)| (k.as_str(), v)).collect()
    }

    fn audit(&self, call: &CallContext<'_>, decision: Audited, reason: Option<String>, timed: bool) {
        // A refusal is also the project's denial log's, which live displays follow.
        if let (Audited::Denied | Audited::RateLimited, Some(root)) = (decision, &self.root) {
            let why = reason.as_deref().unwrap_or("refused");
            let denial = troupe_gate::denials::Denial::now(&call.session.identity, call.tool, why);
            troupe_gate::denials::record(root, &denial);
        }
        self.audit.record(Entry {
            agent: call.session.identity.clone(),
            role: call.role.to_string(),
            tool: call.tool.to_string(),
            decision,
            reason,
            duration_ms: timed.then(|| call.started.elapsed().as_millis() as u64),
            arguments: call.arguments.clone(),
        });
    }

    /// Handles one `tools/call` for `session`. Always answers with a result:
    /// refusals and backend failures are tool errors the agent can read.
    pub async fn call(&self, session: &Session, name: &str, arguments: Option<JsonObject>) -> CallToolResult {
        let started = Instant::now();
        let role = session.role();
        let ctx = CallContext { session, role: &role, tool: name, arguments: &arguments, started };
        let limits = self.limits_for(session, &role);
        // set_role is counted too: each switch lists every backend and writes an audit row.
        // The budget is the agent's own, by the role it was started as: a switch cannot widen it.
        let budget = self.call_budgets.for_role(&session.ceiling);
        let store = self.store.as_deref();
        let _in_flight =
            match self.limiter.admit_budgeted(store, &session.identity, name, &limits, budget.as_ref(), started) {
                Ok(guard) => guard,
                Err(Refused::Limited(limited)) => {
                    self.audit(&ctx, Audited::RateLimited, Some(limited.to_string()), false);
                    return text_result(format!("{limited}; try again later"), true);
                }
                Err(Refused::Budget(over)) => {
                    self.audit(&ctx, Audited::RateLimited, Some(over.to_string()), false);
                    // The Lead hears of it through the event log and pauses the run.
                    if let Some(store) = &self.store {
                        let data =
                            serde_json::json!({"made": over.made, "max": over.budget.max, "key": over.budget.key});
                        let event = troupe_store::NewEvent {
                            kind: troupe_store::event::kind::GATEWAY_BUDGET_SPENT.into(),
                            actor: Some(over.agent.clone()),
                            subject: None,
                            data,
                        };
                        if let Err(e) = store.append_event(event) {
                            tracing::warn!("cannot record that {} spent its gateway calls: {e}", over.agent);
                        }
                    }
                    return text_result(over.to_string(), true);
                }
                Err(refused @ Refused::Store(_)) => {
                    self.audit(&ctx, Audited::Denied, Some(refused.to_string()), false);
                    return text_result(refused.to_string(), true);
                }
            };
        // A call is its agent's heartbeat, wherever the gateway runs.
        if let Some(store) = &self.store {
            self.beats.beat(store.as_ref(), &session.identity, started);
        }
        if name == GATEWAY_TOOLS[0] {
            return self.set_role(session, &role, arguments).await;
        }
        if let Decision::Deny(reason) = self.policy.check_tool(&role, name) {
            self.audit(&ctx, Audited::Denied, Some(reason.to_string()), false);
            return text_result(not_available(name, &role), true);
        }
        let (server, tool) = names::split_tool_name(name).unwrap_or((name, ""));
        let args = arguments.clone().unwrap_or_default();

        if server == TROUPE_SERVER && session.delegate && DELEGATE_REFUSED.contains(&tool) {
            let reason = format!(
                "delegate mode: a coordinator takes no file locks ({tool} refused); assign the work to a teammate \
                 (board_create, board_assign) and let it lock what it edits"
            );
            self.audit(&ctx, Audited::Denied, Some(reason.clone()), false);
            return text_result(reason, true);
        }
        if server == TROUPE_SERVER {
            let Some(outcome) = tools::call(self, session, tool, &args).await else {
                self.audit(&ctx, Audited::Denied, Some("no such troupe tool".into()), false);
                return text_result(not_available(name, &role), true);
            };
            self.audit(&ctx, Audited::Allowed, outcome.as_ref().err().cloned(), true);
            return match outcome {
                Ok(value) => {
                    let mut result = text_result(value.to_string(), false);
                    result.structured_content = Some(value);
                    result
                }
                Err(message) => text_result(message, true),
            };
        }

        if !self.backends.has(server) {
            self.audit(&ctx, Audited::Denied, Some("no such backend server".into()), false);
            return text_result(not_available(name, &role), true);
        }
        // The tool must be one the backend lists now: names are matched exactly,
        // so a case or separator trick cannot reach a tool under another name.
        let listed = match self.backends.tools(server).await {
            Ok(list) => list.iter().any(|t| t.name == tool),
            Err(e) => {
                self.audit(&ctx, Audited::Allowed, Some(e.to_string()), true);
                return text_result(e.to_string(), true);
            }
        };
        if !listed {
            self.audit(&ctx, Audited::Denied, Some("the backend does not list this tool".into()), false);
            return text_result(not_available(name, &role), true);
        }
        let result = self.backends.call(server, tool, arguments.clone()).await;
        match result {
            Ok(mut result) => {
                self.audit(&ctx, Audited::Allowed, None, true);
                // 2026-07-28 clients require resultType on every result; older backends omit it.
                result.result_type = Some(ResultType::COMPLETE);
                result
            }
            Err(e) => {
                self.audit(&ctx, Audited::Allowed, Some(e.to_string()), true);
                text_result(e.to_string(), true)
            }
        }
    }

    async fn set_role(&self, session: &Session, current: &str, arguments: Option<JsonObject>) -> CallToolResult {
        let args = arguments.clone().unwrap_or_default();
        let ctx =
            CallContext { session, role: current, tool: "set_role", arguments: &arguments, started: Instant::now() };
        let target = args.get("role_id").or_else(|| args.get("role")).and_then(|v| v.as_str()).unwrap_or("");
        let refusal = if names::validate_role_name(target).is_err() || self.policy.role(target).is_none() {
            Some(format!("{target:?} is not a role"))
        } else if !self.policy.within_ceiling(target, &session.ceiling) {
            Some(format!("role {target:?} is above this connection's role {:?}", session.ceiling))
        } else {
            None
        };
        if let Some(reason) = refusal {
            self.audit(&ctx, Audited::Denied, Some(reason.clone()), false);
            return text_result(format!("cannot switch to role {target:?}: {reason}"), true);
        }
        if !session.has_snapshot() {
            let before = self.visible_names(current).await;
            session.update_visible(before);
        }
        session.set_role(target);
        let visible = self.visible_names(target).await;
        let count = visible.len();
        let changed = session.update_visible(visible);
        if changed {
            session.notify_tools_changed().await;
        }
        self.audit(&ctx, Audited::Allowed, Some(format!("{current} -> {target}")), false);
        let value = json!({"role": target, "previous": current, "visibleTools": count, "toolsChanged": changed});
        let mut result = text_result(value.to_string(), false);
        result.structured_content = Some(value);
        result
    }

    /// Recomputes what `session` sees and notifies it when that changed (after
    /// a backend's tool list changed).
    pub async fn refresh(&self, session: &Session) {
        let visible = self.visible_names(&session.role()).await;
        if session.update_visible(visible) {
            session.notify_tools_changed().await;
        }
    }

    /// The status of every backend.
    pub async fn status(&self, connect: bool) -> Vec<BackendStatus> {
        self.backends.status(connect).await
    }
}
