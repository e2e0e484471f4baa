//! troupe's own tools, served under the server name `troupe`: the teammates'
//! side of the board, the mailbox, completion reports, plan approval, shutdown
//! answers, context, roles, skills and role memory.

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool};
use serde_json::{Value, json};
use troupe_core::rbac::memory::MemoryType;
use troupe_core::tools as names;
use troupe_store::{ListFilter, MessageKind, NewEvent, NewMessage, NewTask, Store, TaskFilter, TaskStatus};

use crate::gateway::Gateway;
use crate::session::Session;

/// The server name of troupe's own tools (`troupe_core::tools::TROUPE_SERVER`).
pub use troupe_core::tools::TROUPE_SERVER;

/// The event kind a `report` call appends (actor = the agent, subject = its task).
pub const REPORT_EVENT: &str = "agent_report";

/// The agent the Lead reads plans and reports as.
pub const LEAD_AGENT: &str = "lead";

fn schema(properties: Value, required: &[&str]) -> Arc<JsonObject> {
    let mut object = JsonObject::new();
    object.insert("type".into(), json!("object"));
    object.insert("properties".into(), properties);
    object.insert("required".into(), json!(required));
    Arc::new(object)
}

fn tool(name: &str, description: &str, input: Arc<JsonObject>) -> Tool {
    Tool::new(format!("{TROUPE_SERVER}__{name}"), description.to_string(), input)
}

/// The gateway tool `set_role`, always visible.
pub fn set_role_tool() -> Tool {
    Tool::new(
        "set_role",
        "Switch this connection to another role, within the role it was started with. The tool list changes accordingly.",
        schema(json!({"role_id": {"type": "string", "description": "The role to switch to"}}), &["role_id"]),
    )
}

/// Every troupe tool, before role filtering.
pub fn troupe_tools() -> Vec<Tool> {
    let s = |v| v;
    vec![
        tool(
            names::SEND_MESSAGE,
            "Send a message to another agent (or `*` for everyone).",
            schema(
                s(json!({
                    "to": {"type": "string"},
                    "body": {"type": "string"},
                    "priority": {"type": "integer", "minimum": 1, "maximum": 5},
                    "kind": {"type": "string", "enum": ["text", "findings"]},
                    "in_reply_to": {"type": "integer"}
                })),
                &["to", "body"],
            ),
        ),
        tool(
            names::READ_MESSAGES,
            "Read your inbox (highest priority first) and mark the messages read. With `wait_for`, first wait up to `wait_seconds` (default 30, at most 60) until that many unread messages are there: one call instead of polling.",
            schema(
                json!({
                    "unread_only": {"type": "boolean"},
                    "wait_for": {"type": "integer", "minimum": 1, "description": "Wait until at least this many unread messages are in the inbox"},
                    "wait_seconds": {"type": "integer", "minimum": 0, "maximum": 60, "description": "How long to wait for them (default 30)"}
                }),
                &[],
            ),
        ),
        tool(
            names::BOARD_LIST,
            "List tasks on the board.",
            schema(
                json!({"status": {"type": "string"}, "feature": {"type": "string"}, "mine": {"type": "boolean"}}),
                &[],
            ),
        ),
        tool(
            names::BOARD_CLAIM,
            "Claim a task (by id, or the next available one).",
            schema(json!({"task_id": {"type": "string"}, "feature": {"type": "string"}}), &[]),
        ),
        tool(
            names::BOARD_COMPLETE,
            "Complete a task you hold.",
            schema(json!({"task_id": {"type": "string"}}), &["task_id"]),
        ),
        tool(
            names::BOARD_CREATE,
            "Create a task on the board (in your feature unless you name one); it may wait for other tasks.",
            schema(
                json!({
                    "summary": {"type": "string", "description": "One line: what to do"},
                    "description": {"type": "string"},
                    "task_id": {"type": "string", "description": "An id of your choosing; generated when absent"},
                    "blocked_by": {"type": "array", "items": {"type": "string"}, "description": "Ids of tasks that must be completed first"},
                    "feature": {"type": "string"}
                }),
                &["summary"],
            ),
        ),
        tool(
            names::BOARD_ASSIGN,
            "Reserve a pending task for a teammate (it may then claim it before anyone else).",
            schema(json!({"task_id": {"type": "string"}, "agent": {"type": "string"}}), &["task_id", "agent"]),
        ),
        tool(
            names::REPORT,
            "Send your structured completion report to the Lead.",
            schema(
                json!({
                    "status": {"type": "string", "enum": ["complete", "blocked"]},
                    "summary": {"type": "string"},
                    "task_id": {"type": "string"},
                    "files": {"type": "array", "items": {"type": "string"}},
                    "tests": {"type": "array", "items": {"type": "string"}},
                    "knowledge": {"type": "array", "items": {"type": "object", "properties": {"tag": {"type": "string", "enum": ["PATTERN", "INCIDENT", "REFERENCE"]}, "text": {"type": "string"}}}},
                    "blocker": {"type": "string"}
                }),
                &["status", "summary"],
            ),
        ),
        tool(
            names::REQUEST_PLAN_APPROVAL,
            "Submit a plan for approval and wait for the decision. In plan mode (a message asked you for a plan first) it goes to whoever asked, and your file writes and shell commands are refused until a plan is approved; a rejection says what to revise before you submit again. In a troupe run the Lead decides at once by policy (approve, recorded in decisions.md) unless a person decides. When no decision arrives in time, it arrives later as a plan_decision message (read_messages).",
            schema(
                json!({
                    "plan": {"type": "string"},
                    "approver": {"type": "string", "description": "Who decides (default: the Lead)"},
                    "wait_seconds": {"type": "integer", "minimum": 0, "maximum": 60, "description": "How long to wait for the decision (default 15)"}
                }),
                &["plan"],
            ),
        ),
        tool(
            names::RESPOND_SHUTDOWN,
            "Answer a shutdown request: approve, or refuse with a reason.",
            schema(
                json!({"request_id": {"type": "integer"}, "approve": {"type": "boolean"}, "reason": {"type": "string"}}),
                &["request_id", "approve"],
            ),
        ),
        tool(names::GET_CONTEXT, "Your agent id, role, feature, task and visible tools.", schema(json!({}), &[])),
        tool(names::LIST_ROLES, "Roles, and which of them you may switch to.", schema(json!({}), &[])),
        tool(names::LIST_SKILLS, "The skills of your current role.", schema(json!({}), &[])),
        tool(
            names::SAVE_MEMORY,
            "Save a memory to your role's memory file.",
            schema(
                json!({
                    "content": {"type": "string"},
                    "type": {"type": "string", "enum": ["fact", "preference", "context", "episode", "learned"]},
                    "tags": {"type": "array", "items": {"type": "string"}}
                }),
                &["content"],
            ),
        ),
        tool(
            names::RECALL_MEMORY,
            "Search memories (your role's; with all_roles, every role your memory policy lets you read).",
            schema(
                json!({
                    "query": {"type": "string"},
                    "type": {"type": "string"},
                    "limit": {"type": "integer"},
                    "all_roles": {"type": "boolean"},
                    "role": {"type": "string"}
                }),
                &[],
            ),
        ),
        tool(names::LIST_MEMORIES, "Memory statistics for the roles you may read.", schema(json!({}), &[])),
        tool(
            names::GET_SKILL,
            "One skill of your current role: its instructions and the scripts it ships (for run_script).",
            schema(json!({"skill": {"type": "string", "description": "The skill id (list_skills)"}}), &["skill"]),
        ),
        tool(
            names::RUN_SCRIPT,
            "Run a script of one of your role's skills with arguments (no shell); returns its exit code, stdout and stderr.",
            schema(
                json!({
                    "skill": {"type": "string", "description": "The skill id"},
                    "script": {"type": "string", "description": "A script name from get_skill"},
                    "args": {"type": "array", "items": {"type": "string"}},
                    "timeout_seconds": {"type": "number", "description": "Stop it after this long (default 60, at most 600)"}
                }),
                &["skill", "script"],
            ),
        ),
        tool(
            names::LOCK_FILE,
            "Lock a project file before editing it: other agents' writes to it are denied until you unlock it, your lease ends, or your process ends. Locking it again renews the lease. Fails, naming the holder, when another agent holds it.",
            schema(
                json!({
                    "path": {"type": "string", "description": "The file, relative to the project root"},
                    "ttl_seconds": {"type": "integer", "minimum": 1, "description": "The lease (default 600)"}
                }),
                &["path"],
            ),
        ),
        tool(
            names::UNLOCK_FILE,
            "Release a file lock you hold.",
            schema(json!({"path": {"type": "string"}}), &["path"]),
        ),
        tool(names::LIST_LOCKS, "The file locks held now: path, holder, since, lease end.", schema(json!({}), &[])),
    ]
}

/// A troupe tool that could not do its job; the text goes back to the agent.
pub type ToolOutcome = Result<Value, String>;

pub(crate) fn arg_str<'a>(args: &'a JsonObject, key: &str) -> Option<&'a str> {
    args.get(key).and_then(Value::as_str)
}

pub(crate) fn need_str<'a>(args: &'a JsonObject, key: &str) -> Result<&'a str, String> {
    arg_str(args, key).ok_or_else(|| format!("missing string argument `{key}`"))
}

pub(crate) fn store(gateway: &Gateway) -> Result<&Arc<dyn Store>, String> {
    gateway.store.as_ref().ok_or_else(|| "no project store: run `troupe mcp serve` inside a troupe project".to_string())
}

pub(crate) fn json_of<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// Runs troupe tool `name` (without the `troupe__` prefix). The caller has
/// already checked the role's permission.
pub async fn call(gateway: &Gateway, session: &Session, name: &str, args: &JsonObject) -> Option<ToolOutcome> {
    let agent = session.identity.as_str();
    let role = session.role();
    let outcome = match name {
        names::SEND_MESSAGE => (|| {
            let kind = match arg_str(args, "kind").unwrap_or("text") {
                "text" => MessageKind::Text,
                "findings" => MessageKind::Findings,
                other => return Err(format!("kind {other:?} cannot be sent with send_message (text or findings)")),
            };
            let priority = args.get("priority").and_then(Value::as_u64).unwrap_or(3);
            let message = NewMessage {
                from: agent.to_string(),
                to: need_str(args, "to")?.to_string(),
                priority: u8::try_from(priority).map_err(|_| "priority must be 1 to 5".to_string())?,
                kind,
                body: need_str(args, "body")?.to_string(),
                in_reply_to: args.get("in_reply_to").and_then(Value::as_i64),
            };
            let sent = store(gateway)?.send(message).map_err(|e| e.to_string())?;
            Ok(json!({"sent": sent.len(), "ids": sent.iter().map(|m| m.id).collect::<Vec<_>>()}))
        })(),
        names::READ_MESSAGES => read_messages(gateway, agent, args).await,
        names::BOARD_LIST => (|| {
            let status = match arg_str(args, "status") {
                Some(s) => Some(s.parse::<TaskStatus>().map_err(|e| e.to_string())?),
                None => None,
            };
            let mine = args.get("mine").and_then(Value::as_bool).unwrap_or(false);
            let filter = ListFilter {
                status,
                assignee: mine.then(|| agent.to_string()),
                feature: arg_str(args, "feature").map(str::to_string).or_else(|| session.feature.clone()),
                ..ListFilter::default()
            };
            let tasks = store(gateway)?.list(&filter).map_err(|e| e.to_string())?;
            Ok(json!({"tasks": json_of(&tasks)}))
        })(),
        names::BOARD_CLAIM => (|| {
            let store = store(gateway)?;
            match arg_str(args, "task_id") {
                Some(id) => {
                    let id = board_task_id(store.as_ref(), session, id);
                    let claim = store.claim(&id, agent).map_err(|e| e.to_string())?;
                    Ok(json!({"task": json_of(&claim.task), "already_held": claim.already_held}))
                }
                None => {
                    let filter = TaskFilter {
                        feature: arg_str(args, "feature").map(str::to_string).or_else(|| session.feature.clone()),
                        ..TaskFilter::default()
                    };
                    let task = store.claim_next(agent, &filter).map_err(|e| e.to_string())?;
                    Ok(json!({"task": json_of(&task)}))
                }
            }
        })(),
        names::BOARD_COMPLETE => board_complete(gateway, session, args).await,
        names::BOARD_CREATE => (|| {
            let summary = need_str(args, "summary")?;
            let blocked_by = match args.get("blocked_by") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(ids)) => ids
                    .iter()
                    .map(|v| v.as_str().map(str::to_string).ok_or("`blocked_by` must be a list of task ids"))
                    .collect::<Result<_, _>>()?,
                Some(_) => return Err("`blocked_by` must be a list of task ids".into()),
            };
            let task = NewTask {
                id: arg_str(args, "task_id").map(str::to_string),
                description: arg_str(args, "description").unwrap_or_default().to_string(),
                feature: arg_str(args, "feature").map(str::to_string).or_else(|| session.feature.clone()),
                blocked_by,
                ..NewTask::new(summary, agent)
            };
            let task = store(gateway)?.create_task(task).map_err(|e| e.to_string())?;
            Ok(json!({"task": json_of(&task)}))
        })(),
        names::BOARD_ASSIGN => (|| {
            let store = store(gateway)?;
            let id = board_task_id(store.as_ref(), session, need_str(args, "task_id")?);
            let task = store.assign(&id, need_str(args, "agent")?, agent).map_err(|e| e.to_string())?;
            Ok(json!({"task": json_of(&task)}))
        })(),
        names::REPORT => (|| {
            let status = need_str(args, "status")?;
            if status != "complete" && status != "blocked" {
                return Err("status must be `complete` or `blocked`".into());
            }
            need_str(args, "summary")?;
            let mut data = Value::Object(args.clone());
            data["role"] = json!(role);
            if arg_str(args, "feature").is_none() {
                data["feature"] = json!(session.feature);
            }
            let event = NewEvent {
                kind: REPORT_EVENT.to_string(),
                actor: Some(agent.to_string()),
                subject: arg_str(args, "task_id").map(str::to_string).or_else(|| session.task.clone()),
                data,
            };
            let event = store(gateway)?.append_event(event).map_err(|e| e.to_string())?;
            Ok(json!({"recorded": event.id}))
        })(),
        names::REQUEST_PLAN_APPROVAL => request_plan_approval(gateway, agent, args).await,
        names::RESPOND_SHUTDOWN => (|| {
            let store = store(gateway)?;
            let request_id =
                args.get("request_id").and_then(Value::as_i64).ok_or("missing integer argument `request_id`")?;
            let approve = args.get("approve").and_then(Value::as_bool).ok_or("missing boolean argument `approve`")?;
            let reason = arg_str(args, "reason").unwrap_or("");
            if !approve && reason.trim().is_empty() {
                return Err("refusing a shutdown needs a `reason`".into());
            }
            let request = store.message(request_id).map_err(|e| e.to_string())?;
            if request.kind != MessageKind::ShutdownRequest || request.to != agent {
                return Err(format!("message {request_id} is not a shutdown request to you"));
            }
            let message = NewMessage {
                from: agent.to_string(),
                to: request.from,
                priority: 5,
                kind: MessageKind::ShutdownResponse,
                body: json!({"approve": approve, "reason": reason}).to_string(),
                in_reply_to: Some(request_id),
            };
            let sent = store.send(message).map_err(|e| e.to_string())?;
            Ok(json!({"answered": request_id, "approve": approve, "id": sent.first().map(|m| m.id)}))
        })(),
        names::GET_CONTEXT => {
            let tools: Vec<String> = gateway.visible_tools(&role).await.iter().map(|t| t.name.to_string()).collect();
            Ok(json!({
                "agent": agent,
                "role": role,
                "ceiling": session.ceiling,
                "feature": session.feature,
                "task": session.task,
                "visibleTools": tools,
            }))
        }
        names::LIST_ROLES => {
            let roles: Vec<Value> = gateway
                .policy
                .roles()
                .values()
                .map(|r| {
                    json!({
                        "id": r.id,
                        "description": r.description,
                        "inherits": r.inherits,
                        "current": r.id == role,
                        "switchable": gateway.policy.within_ceiling(&r.id, &session.ceiling),
                    })
                })
                .collect();
            Ok(json!({"roles": roles}))
        }
        names::LIST_SKILLS => {
            let skills: Vec<Value> = gateway
                .policy
                .skills_for_role(&role)
                .into_iter()
                .map(|s| json!({"id": s.id, "displayName": s.display_name, "description": s.description, "allowedTools": s.allowed_tools}))
                .collect();
            Ok(json!({"role": role, "skills": skills}))
        }
        names::SAVE_MEMORY => memory_save(gateway, &role, args),
        names::RECALL_MEMORY => memory_recall(gateway, &role, args),
        names::LIST_MEMORIES => memory_list(gateway, &role),
        names::GET_SKILL => crate::scripts::get_skill(gateway, &role, args),
        names::RUN_SCRIPT => crate::scripts::run_script(gateway, session, &role, args).await,
        names::LOCK_FILE | names::UNLOCK_FILE | names::LIST_LOCKS => crate::locks::call(gateway, session, name, args),
        _ => return None,
    };
    Some(outcome)
}

/// Reads the inbox of `agent`; with `wait_for`, after waiting up to
/// `wait_seconds` for that many unread messages, so that an Auditor waiting
/// for its Inspectors makes one call instead of the same call again and again
/// (which engines' loop detectors stop: Gemini CLI ends such a turn).
async fn read_messages(gateway: &Gateway, agent: &str, args: &JsonObject) -> ToolOutcome {
    let unread_only = args.get("unread_only").and_then(Value::as_bool).unwrap_or(true);
    let store = store(gateway)?;
    if let Some(want) = args.get("wait_for").and_then(Value::as_u64) {
        let wait = args.get("wait_seconds").and_then(Value::as_u64).unwrap_or(30).min(60);
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(wait);
        loop {
            // The newest event before looking: a message sent after the look wakes the wait.
            let seen = store.last_event_id().map_err(|e| e.to_string())?;
            if store.inbox(agent, true).map_err(|e| e.to_string())?.len() as u64 >= want
                || !wait_for_change(store, seen, deadline).await
            {
                break;
            }
        }
    }
    let messages = store.inbox(agent, unread_only).map_err(|e| e.to_string())?;
    let ids: Vec<i64> = messages.iter().map(|m| m.id).collect();
    store.mark_read(agent, &ids).map_err(|e| e.to_string())?;
    Ok(json!({"messages": json_of(&messages)}))
}

/// Wait, off the async threads, until the store's event log grows past
/// `seen` (a message, a decision: every change appends an event) or
/// `deadline` passes; false at the deadline (or when the store fails). On PostgreSQL the wait wakes on
/// NOTIFY; nothing polls the mailbox.
async fn wait_for_change(store: &Arc<dyn Store>, seen: i64, deadline: tokio::time::Instant) -> bool {
    let left = deadline.saturating_duration_since(tokio::time::Instant::now());
    if left.is_zero() {
        return false;
    }
    let store = store.clone();
    // A store error ends the wait like its deadline: the caller reads the inbox once more.
    tokio::task::spawn_blocking(move || store.wait_for_event(seen, left).unwrap_or(false)).await.unwrap_or(false)
}

/// Submits a plan (a `plan` message to the approver, the Lead by default) and
/// waits up to `wait_seconds` for the `plan_decision` that answers it, so that
/// a teammate that asks before it acts learns the decision in one call. The
/// answer always says what happens next.
async fn request_plan_approval(gateway: &Gateway, agent: &str, args: &JsonObject) -> ToolOutcome {
    let store = store(gateway)?;
    // In plan mode the plan answers the message that asked for it, and goes to its sender.
    let gate = store.plan_gate(agent).map_err(|e| e.to_string())?.filter(|g| !g.approved());
    let approver = match (arg_str(args, "approver"), &gate) {
        (Some(a), _) => a.to_string(),
        (None, Some(g)) => g.request.from.clone(),
        (None, None) => LEAD_AGENT.to_string(),
    };
    let plan = need_str(args, "plan")?;
    if plan.trim().is_empty() {
        return Err("`plan` is empty: describe what you will do, step by step".into());
    }
    let wait = args.get("wait_seconds").and_then(Value::as_u64).unwrap_or(15).min(60);
    let message = NewMessage {
        from: agent.to_string(),
        to: approver.clone(),
        priority: 4,
        kind: MessageKind::Plan,
        body: plan.to_string(),
        in_reply_to: gate.as_ref().map(|g| g.request.id),
    };
    let sent = store.send(message).map_err(|e| e.to_string())?;
    let id = sent.first().map(|m| m.id).ok_or("the plan was not sent")?;
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(wait);
    loop {
        let seen = store.last_event_id().map_err(|e| e.to_string())?;
        let inbox = store.inbox(agent, true).map_err(|e| e.to_string())?;
        if let Some(decision) = inbox.iter().find(|m| m.kind == MessageKind::PlanDecision && m.in_reply_to == Some(id))
        {
            store.mark_read(agent, &[decision.id]).map_err(|e| e.to_string())?;
            let body: Value = serde_json::from_str(&decision.body).unwrap_or_else(|_| json!({"reason": decision.body}));
            let approved = body.get("approved").and_then(Value::as_bool).unwrap_or(false);
            let next = if approved {
                "approved: go ahead with the plan"
            } else {
                "rejected: revise the plan with the reason given, then submit it again"
            };
            return Ok(
                json!({"submitted": id, "decided_by": decision.from, "approved": approved, "decision": body, "next": next}),
            );
        }
        if !wait_for_change(store, seen, deadline).await {
            break;
        }
    }
    let next = if gate.is_some() {
        format!(
            "no decision from {approver} within {wait}s. You are in plan mode: your file writes and shell commands \
             stay refused until the plan is approved; wait for its plan_decision with read_messages (wait_for 1) \
             instead of submitting it again"
        )
    } else if approver == LEAD_AGENT {
        format!(
            "no decision within {wait}s. In a troupe run the Lead answers plans by policy within a second, so no Lead is running for you (for example under `troupe agent run`): nobody will answer; go ahead"
        )
    } else {
        format!("no decision from {approver} within {wait}s: call read_messages later for its plan_decision")
    };
    Ok(json!({"submitted": id, "approved": null, "next": next}))
}

/// Completes a task behind the `on_task_completed` quality gate (troupe-gate's
/// one runner): a refusal leaves the task in progress, a `[gates]` command's
/// other ends and a command that cannot run complete with a warning.
async fn board_complete(gateway: &Gateway, session: &Session, args: &JsonObject) -> ToolOutcome {
    let agent = session.identity.as_str();
    let store = store(gateway)?;
    let task_id = board_task_id(store.as_ref(), session, need_str(args, "task_id")?);
    let task = store.task(&task_id).map_err(|e| e.to_string())?;
    if task.assignee.as_deref() != Some(agent) || task.status != TaskStatus::InProgress {
        // Let the store give its exact refusal before any gate runs.
        store.complete(&task_id, agent).map_err(|e| e.to_string())?;
    }
    let mut warning = None;
    if let Some(root) = gateway.root.clone() {
        use troupe_gate::run::{CompletionRefused, gate_task_completion};
        let (task, who) = (task_id.clone(), agent.to_string());
        let engine = std::env::var("TROUPE_ENGINE").ok();
        let name = std::env::var("TROUPE_AGENT_NAME").ok();
        let ran =
            tokio::task::spawn_blocking(move || gate_task_completion(&root, &task, &who, name, engine.as_deref()))
                .await
                .map_err(|e| format!("the on_task_completed quality gate did not finish: {e}"))?;
        match ran {
            Ok(w) => warning = w,
            Err(CompletionRefused::Config(e)) => {
                return Err(format!("cannot run the on_task_completed quality gate: {e}"));
            }
            Err(CompletionRefused::Failed(run)) => {
                return Err(format!(
                    "the on_task_completed quality gate refused to complete {task_id}: {} `{}` failed ({}); the task stays in progress\n{}",
                    run.label, run.command, run.detail, run.tail
                ));
            }
        }
    }
    let done = store.complete(&task_id, agent).map_err(|e| e.to_string())?;
    Ok(json!({"task": json_of(&done.task), "unblocked": done.unblocked, "warning": warning}))
}

/// The board id of the task a teammate names: the board stores a plan's tasks
/// as `<feature>/<id>` (`login/1.1`), and a teammate may name one by its plan id
/// (`1.1`) as tasks.yaml does. A bare id is resolved within the session's
/// feature (`TROUPE_FEATURE`) when that task exists; anything else is used as
/// given, so the store's refusal names what the teammate wrote.
fn board_task_id(store: &dyn Store, session: &Session, id: &str) -> String {
    let id = id.trim();
    let scoped = session.feature.as_deref().filter(|f| !f.is_empty() && !id.contains('/')).map(|f| format!("{f}/{id}"));
    match scoped {
        Some(scoped) if store.task(&scoped).is_ok() => scoped,
        _ => id.to_string(),
    }
}

fn memory_save(gateway: &Gateway, role: &str, args: &JsonObject) -> ToolOutcome {
    let memory = gateway.memory.as_ref().ok_or("no project: memory needs a troupe project")?;
    let content = need_str(args, "content")?;
    if content.trim().is_empty() {
        return Err("`content` is empty".into());
    }
    let kind = match arg_str(args, "type") {
        Some(t) => MemoryType::parse(t)
            .ok_or_else(|| format!("unknown memory type {t:?} (fact, preference, context, episode, learned)"))?,
        None => MemoryType::Fact,
    };
    let tags = args
        .get("tags")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default();
    let entry = memory.save(role, kind, content, tags).map_err(|e| e.to_string())?;
    Ok(json!({"saved": entry.id, "role": role}))
}

fn memory_recall(gateway: &Gateway, role: &str, args: &JsonObject) -> ToolOutcome {
    let memory = gateway.memory.as_ref().ok_or("no project: memory needs a troupe project")?;
    let permission = gateway.policy.effective_memory(role);
    let query = arg_str(args, "query").unwrap_or("");
    let kind = match arg_str(args, "type") {
        Some(t) => Some(MemoryType::parse(t).ok_or_else(|| format!("unknown memory type {t:?}"))?),
        None => None,
    };
    let limit = args.get("limit").and_then(Value::as_u64).unwrap_or(20) as usize;
    let roles: Vec<String> = if let Some(other) = arg_str(args, "role") {
        vec![other.to_string()]
    } else if args.get("all_roles").and_then(Value::as_bool).unwrap_or(false) {
        gateway.policy.roles().keys().filter(|r| permission.may_read(role, r)).cloned().collect()
    } else {
        vec![role.to_string()]
    };
    let mut found = Vec::new();
    for target in roles {
        if !permission.may_read(role, &target) {
            return Err(format!("role {role:?} may not read the memory of role {target:?}"));
        }
        let file = memory.read(&target).map_err(|e| e.to_string())?;
        for entry in file.recall(query, kind, limit) {
            let mut v = json_of(entry);
            v["role"] = json!(target);
            found.push(v);
        }
    }
    found.truncate(limit);
    Ok(json!({"memories": found}))
}

fn memory_list(gateway: &Gateway, role: &str) -> ToolOutcome {
    let memory = gateway.memory.as_ref().ok_or("no project: memory needs a troupe project")?;
    let permission = gateway.policy.effective_memory(role);
    let mut out = Vec::new();
    for target in gateway.policy.roles().keys().filter(|r| permission.may_read(role, r)) {
        let file = memory.read(target).map_err(|e| e.to_string())?;
        let by_type: serde_json::Map<String, Value> =
            file.stats().into_iter().map(|(k, n)| (k.as_str().to_string(), json!(n))).collect();
        out.push(json!({"role": target, "total": file.entries.len(), "byType": by_type}));
    }
    Ok(json!({"policy": permission.policy.as_str(), "memories": out}))
}
