//! The built-in `scripted` engine: a teammate that performs a scripted sequence
//! of actions (write files, run commands, send messages, complete board tasks,
//! report) and prints troupe's normalised event stream, one
//! [`AgentEvent`] JSON object per line. `troupe demo` and fast tests use it; it
//! also replays a workflow without any model.
//!
//! It runs as a real child process (`troupe scripted-agent --script FILE --turn N`)
//! through the same driver as every other engine, so the Lead cannot tell it
//! apart from a model. Writes are checked against the ownership matrix with the
//! same rule the hooks apply to real engines, and a denied write is reported to
//! the "model" as a failed tool call, as Claude Code does.
//!
//! # Script format (`.troupe/scripted.yaml`)
//!
//! ```yaml
//! agents:
//!   architect:              # key: role, or role/group for Builders (builder/G1)
//!     - - write: {path: ".troupe/specs/{feature}/design.md", content: "# Design"}
//!       - report: "ARCHITECT_COMPLETE\nSummary: a design"
//!   builder/G1:
//!     - - write: {path: src/a.rs, content: "..."}   # turn 0: the first run
//!       - run: "cargo test"
//!       - report: "BUILDER_COMPLETE\n..."
//!     - - write: {path: src/a.rs, content: "..."}   # turn 1: after a resume
//!       - report: "BUILDER_COMPLETE\n..."
//! ```
//!
//! `{feature}` and `{agent}` in any string are replaced with `TROUPE_FEATURE` and
//! `TROUPE_AGENT_ID`. A turn past the last one repeats the last. A key may
//! also be an agent id (`builder-g1-3`), which wins over its role's key:
//! `troupe replay` writes one such key per teammate of the recorded run, with
//! one turn per launch, from its normalised log (`edit` and `tool` actions
//! replay what a model's Edit and gateway calls did).

#![deny(missing_docs)]

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use troupe_core::event::{AgentEvent, ParsedOutput, ResultType, Stats, ToolKind};
use troupe_core::ownership::{Decision, Writer, may_write};
use troupe_core::role::Role;
use troupe_core::tools::{self, McpNaming, engine_tool_name};

/// A whole script: the turns of each agent key.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// Agent key (`architect`, `task-generator`, `builder/G1`) → turns → actions.
    pub agents: BTreeMap<String, Vec<Vec<Action>>>,
}

/// A file to write.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriteFile {
    /// Relative to the project root.
    pub path: String,
    /// The whole new content.
    pub content: String,
}

/// An in-place edit of a file, as Claude Code's `Edit` and Gemini CLI's `replace` make it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EditFile {
    /// Relative to the project root.
    pub path: String,
    /// The text replaced (must occur in the file).
    pub old: String,
    /// The text put in its place.
    pub new: String,
    /// Replace every occurrence, not only the first.
    #[serde(default)]
    pub all: bool,
}

/// A call of a tool of troupe's MCP gateway, as a model makes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    /// The gateway's name of the tool (`troupe__report`).
    pub name: String,
    /// Its arguments.
    #[serde(default)]
    pub args: serde_json::Map<String, serde_json::Value>,
}

/// A message to put in another agent's mailbox.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SendTo {
    /// The recipient agent id (`lead` for the Lead).
    pub to: String,
    /// The text.
    pub body: String,
    /// Mailbox kind; `text` when absent.
    #[serde(default)]
    pub kind: Option<String>,
}

/// One scripted step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Action {
    /// Write a file (checked against ownership first).
    Write(WriteFile),
    /// Edit a file in place (checked against ownership first).
    Edit(EditFile),
    /// Call a tool of troupe's gateway (its policy, rate limits and audit
    /// apply as to a model's call).
    Tool(ToolCall),
    /// Run a shell command in the project root; a failing command does not stop the script.
    Run(String),
    /// Say something (assistant text).
    Say(String),
    /// Send a message through the mailbox.
    Message(SendTo),
    /// Complete a board task (`1.1`; the feature prefix is added).
    Complete(String),
    /// Wait this many milliseconds.
    Sleep(u64),
    /// Wait until this many milliseconds after the launch started (at once
    /// when that is past): a replay keeps its teammates' recorded pace, so
    /// the Lead sees their events in the same order.
    At(u64),
    /// End the run with this completion report as the final text.
    Report(String),
    /// End the run with an error result (a crash).
    Fail(String),
    /// Stop producing output and never end (a hang).
    Hang,
    /// Stay silent (hung, as the Lead sees it) until a shutdown request is in
    /// this agent's mailbox, answer it as the gateway's `respond_shutdown`
    /// tool does, then go on with the next action.
    RespondShutdown(ShutdownAnswer),
    /// Report a model turn's usage, as engines do (`{input_tokens: 100,
    /// output_tokens: 20, cost_usd: 0.25}`): the Lead books it in the usage
    /// ledger and checks the budgets.
    Usage(troupe_core::event::Usage),
}

/// The answer to a shutdown request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShutdownAnswer {
    /// Agree to stop.
    pub approve: bool,
    /// Why not (required by the gateway when refusing).
    #[serde(default)]
    pub reason: String,
}

/// Why a script could not be run.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    /// The script file could not be read.
    #[error("cannot read the script {}", .path.display())]
    Read {
        /// The script file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The script file is not valid.
    #[error("{}: {message}", .path.display())]
    Parse {
        /// The script file.
        path: PathBuf,
        /// What the YAML parser said.
        message: String,
    },
    /// The script has nothing for this agent.
    #[error("{}: no turns for '{key}' (add `agents: {{{key}: [...]}}`)", .path.display())]
    NoTurns {
        /// The script file.
        path: PathBuf,
        /// The key looked up.
        key: String,
    },
}

impl Script {
    /// Parse script text.
    pub fn from_yaml(text: &str) -> Result<Script, String> {
        // Through JSON's data model, so that actions are written `write: {...}`
        // rather than with YAML tags (`!write`).
        let value: serde_json::Value = yaml_serde::from_str(text).map_err(|e| e.to_string())?;
        serde_json::from_value(value).map_err(|e| e.to_string())
    }

    /// Load a script file.
    pub fn load(path: &Path) -> Result<Script, ScriptError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| ScriptError::Read { path: path.to_path_buf(), source })?;
        Script::from_yaml(&text).map_err(|message| ScriptError::Parse { path: path.to_path_buf(), message })
    }

    /// The actions of agent `agent` of `role` (and `group`) on `turn`: the
    /// agent's own key first, then `role/group`, then `role`.
    pub fn turn(&self, agent: &str, role: &str, group: Option<&str>, turn: usize) -> Option<&[Action]> {
        let by_group = group.map(|g| format!("{role}/{g}"));
        let turns = self
            .agents
            .get(agent)
            .or_else(|| by_group.as_ref().and_then(|k| self.agents.get(k)))
            .or_else(|| self.agents.get(role))?;
        let last = turns.len().checked_sub(1)?;
        Some(&turns[turn.min(last)])
    }
}

/// Who the scripted agent is, from its `TROUPE_*` environment.
#[derive(Debug, Clone, Default)]
pub struct Identity {
    /// `TROUPE_AGENT_ID`.
    pub agent: String,
    /// `TROUPE_ROLE`.
    pub role: String,
    /// `TROUPE_FEATURE`.
    pub feature: Option<String>,
    /// `TROUPE_GROUP`.
    pub group: Option<String>,
    /// `TROUPE_OWNED_FILES` (newline-separated).
    pub owned_files: Vec<String>,
    /// `TROUPE_PROJECT`: the project root.
    pub project: PathBuf,
    /// `TROUPE_WORKTREE` (a Builder's own worktree), else the project root:
    /// where its files are written and its commands run.
    pub workdir: PathBuf,
}

impl Identity {
    /// Read the identity from the environment; the project defaults to the working directory.
    pub fn from_env() -> Identity {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        Identity {
            agent: var("TROUPE_AGENT_ID").unwrap_or_else(|| "scripted".into()),
            role: var("TROUPE_ROLE").unwrap_or_else(|| "builder".into()),
            feature: var("TROUPE_FEATURE"),
            group: var("TROUPE_GROUP"),
            owned_files: var("TROUPE_OWNED_FILES")
                .map(|v| v.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_string).collect())
                .unwrap_or_default(),
            project: var("TROUPE_PROJECT").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(".")),
            workdir: var("TROUPE_WORKTREE")
                .or_else(|| var("TROUPE_PROJECT"))
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(".")),
        }
    }
}

/// Side effects the scripted agent needs beyond files and commands: the
/// mailbox and the board. The CLI passes the project's store.
pub trait Outbox {
    /// Send a message; returns an error text on failure.
    fn send(&mut self, from: &str, to: &str, kind: &str, body: &str) -> Result<(), String>;
    /// Complete a board task as `agent`.
    fn complete(&mut self, agent: &str, task: &str) -> Result<(), String>;
    /// Call gateway tool `call.name` as `who`; its answer, or the error it gave.
    fn call_tool(&mut self, who: &Identity, call: &ToolCall) -> Result<String, String>;
}

/// Run `turn` of the script for `who`, printing events to `out`. Returns the
/// process exit code (0 after a report, 1 after `fail`).
pub fn run(script: &Script, who: &Identity, turn: usize, outbox: &mut dyn Outbox, out: &mut dyn Write) -> i32 {
    let started = Instant::now();
    let session = format!("{}-t{turn}", who.agent);
    let mut emit = |e: &AgentEvent| {
        // A closed stdout means the Lead is gone; nothing left to do but stop.
        if writeln!(out, "{}", serde_json::to_string(e).expect("events serialize")).and_then(|_| out.flush()).is_err() {
            std::process::exit(0);
        }
    };
    emit(&AgentEvent::Init { session_id: Some(session.clone()), model: Some("scripted".into()) });
    let Some(actions) = script.turn(&who.agent, &who.role, who.group.as_deref(), turn) else {
        let msg = format!(
            "the script has no turns for '{}'",
            who.group.as_ref().map(|g| format!("{}/{g}", who.role)).unwrap_or(who.role.clone())
        );
        emit(&AgentEvent::Error { message: msg.clone(), retry: false });
        emit(&result(ResultType::Error, &session, 0, started, Some(msg), None));
        return 1;
    };
    let subst = |s: &str| s.replace("{feature}", who.feature.as_deref().unwrap_or("")).replace("{agent}", &who.agent);
    let mut turns = 0u64;
    for (n, action) in actions.iter().enumerate() {
        let call = format!("call-{turn}-{n}");
        turns += 1;
        match action {
            Action::Write(w) => {
                let path = subst(&w.path);
                let input = serde_json::json!({"file_path": path, "content": subst(&w.content)});
                emit(&AgentEvent::ToolUse { id: call.clone(), name: "Write".into(), kind: ToolKind::FileEdit, input });
                let (ok, output) = write(who, &path, &subst(&w.content));
                emit(&AgentEvent::ToolResult { id: call, ok, output });
            }
            Action::Edit(e) => {
                let path = subst(&e.path);
                let input = serde_json::json!({"file_path": path, "old_string": e.old, "new_string": e.new, "replace_all": e.all});
                emit(&AgentEvent::ToolUse { id: call.clone(), name: "Edit".into(), kind: ToolKind::FileEdit, input });
                let (ok, output) = edit(who, &path, e);
                emit(&AgentEvent::ToolResult { id: call, ok, output });
            }
            Action::Tool(t) => {
                let input = serde_json::Value::Object(t.args.clone());
                let name = format!("mcp__{}__{}", troupe_core::rbac::GATEWAY_MCP_NAME, t.name);
                emit(&AgentEvent::ToolUse { id: call.clone(), name, kind: ToolKind::Mcp, input });
                let (ok, output) = match outbox.call_tool(who, t) {
                    Ok(out) => (true, out),
                    Err(e) => (false, e),
                };
                emit(&AgentEvent::ToolResult { id: call, ok, output });
            }
            Action::Run(cmd) => {
                let cmd = subst(cmd);
                let input = serde_json::json!({"command": cmd});
                emit(&AgentEvent::ToolUse { id: call.clone(), name: "Bash".into(), kind: ToolKind::Command, input });
                let (ok, output) = shell(&who.workdir, &cmd);
                emit(&AgentEvent::ToolResult { id: call, ok, output });
            }
            Action::Say(text) => emit(&AgentEvent::Text { text: subst(text) }),
            Action::Message(m) => {
                let input = serde_json::json!({"to": m.to, "body": subst(&m.body)});
                emit(&AgentEvent::ToolUse {
                    id: call.clone(),
                    name: engine_tool_name(McpNaming::Claude, tools::SEND_MESSAGE),
                    kind: ToolKind::Mcp,
                    input,
                });
                let kind = m.kind.as_deref().unwrap_or("text");
                let r = outbox.send(&who.agent, &m.to, kind, &subst(&m.body));
                emit(&AgentEvent::ToolResult { id: call, ok: r.is_ok(), output: r.err().unwrap_or_default() });
            }
            Action::Complete(task) => {
                let input = serde_json::json!({"task_id": task});
                emit(&AgentEvent::ToolUse {
                    id: call.clone(),
                    name: engine_tool_name(McpNaming::Claude, tools::BOARD_COMPLETE),
                    kind: ToolKind::Mcp,
                    input,
                });
                let r = outbox.complete(&who.agent, task);
                emit(&AgentEvent::ToolResult { id: call, ok: r.is_ok(), output: r.err().unwrap_or_default() });
            }
            Action::Sleep(ms) => std::thread::sleep(Duration::from_millis(*ms)),
            Action::At(ms) => std::thread::sleep(Duration::from_millis(*ms).saturating_sub(started.elapsed())),
            Action::Report(text) => {
                let text = subst(text);
                emit(&AgentEvent::Text { text: text.clone() });
                emit(&result(ResultType::Success, &session, turns, started, None, Some(text)));
                return 0;
            }
            Action::Fail(message) => {
                emit(&AgentEvent::Error { message: message.clone(), retry: false });
                emit(&result(ResultType::Error, &session, turns, started, Some(message.clone()), None));
                return 1;
            }
            Action::Hang => loop {
                std::thread::sleep(Duration::from_secs(3600));
            },
            Action::Usage(u) => {
                let mut u = u.clone();
                // Each scripted turn is one model message of its launch.
                u.message_id.get_or_insert_with(|| format!("{session}-{call}"));
                emit(&AgentEvent::Usage(u));
            }
            Action::RespondShutdown(answer) => {
                let (ok, output, input) = match respond_shutdown(who, answer) {
                    Ok((id, json)) => (true, json, serde_json::json!({"request_id": id})),
                    Err(e) => (false, e, serde_json::json!({})),
                };
                let mut input = input;
                input["approve"] = answer.approve.into();
                input["reason"] = answer.reason.clone().into();
                emit(&AgentEvent::ToolUse {
                    id: call.clone(),
                    name: engine_tool_name(McpNaming::Claude, tools::RESPOND_SHUTDOWN),
                    kind: ToolKind::Mcp,
                    input,
                });
                emit(&AgentEvent::ToolResult { id: call, ok, output });
            }
        }
    }
    // Ran out of actions without a report: a run that ends with no completion report.
    emit(&result(ResultType::Success, &session, turns, started, None, None));
    0
}

/// The project's store through `[store] backend` of its config, read by the
/// one loader: a config that cannot be used is an error, never the default
/// store in its place (which may not be the project's).
pub fn open_store(root: &std::path::Path) -> Result<Box<dyn troupe_store::Store>, String> {
    let layout = troupe_core::layout::Layout::new(root);
    let config = troupe_project::config::load(&layout).map_err(|e| e.to_string())?;
    troupe_store::open(&layout, &config.store).map_err(|e| e.to_string())
}

/// Wait for a shutdown request to `who`, then answer it with the message the
/// gateway's `respond_shutdown` sends. Returns the request id and the tool's answer.
fn respond_shutdown(who: &Identity, answer: &ShutdownAnswer) -> Result<(i64, String), String> {
    use troupe_store::{MessageKind, NewMessage};
    let store = open_store(&who.project)?;
    let request = loop {
        let inbox = store.inbox(&who.agent, true).map_err(|e| e.to_string())?;
        if let Some(m) = inbox.into_iter().find(|m| m.kind == MessageKind::ShutdownRequest) {
            break m;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let body = serde_json::json!({"approve": answer.approve, "reason": answer.reason}).to_string();
    let message = NewMessage {
        from: who.agent.clone(),
        to: request.from.clone(),
        priority: 5,
        kind: MessageKind::ShutdownResponse,
        body,
        in_reply_to: Some(request.id),
    };
    let sent = store.send(message).map_err(|e| e.to_string())?;
    let json = serde_json::json!({"answered": request.id, "approve": answer.approve, "id": sent.first().map(|m| m.id)});
    Ok((request.id, json.to_string()))
}

fn result(
    kind: ResultType,
    session: &str,
    turns: u64,
    started: Instant,
    error: Option<String>,
    text: Option<String>,
) -> AgentEvent {
    AgentEvent::Result {
        output: ParsedOutput {
            kind,
            session_id: Some(session.to_string()),
            stats: Some(Stats {
                num_turns: turns,
                duration_ms: started.elapsed().as_millis() as u64,
                total_cost_usd: 0.0,
            }),
            error_message: error,
            result: text,
        },
    }
}

/// The ownership check a write or an edit passes first: the reason it is denied.
fn denied(who: &Identity, path: &str) -> Option<String> {
    let role: Role = who.role.parse().unwrap_or(Role::Builder);
    let writer =
        Writer { role, feature: who.feature.as_deref(), owned_files: &who.owned_files, agent_name: Some(&who.agent) };
    let Decision::Deny { rule } = may_write(&who.workdir, Path::new(path), &writer) else { return None };
    // The same log a real engine's hooks write, so displays read one source.
    troupe_gate::denials::record(&who.project, &troupe_gate::denials::Denial::now(&who.agent, "write", &rule));
    Some(format!("denied by troupe: {rule}"))
}

fn edit(who: &Identity, path: &str, e: &EditFile) -> (bool, String) {
    if let Some(reason) = denied(who, path) {
        return (false, reason);
    }
    let full = who.workdir.join(path);
    let text = match std::fs::read_to_string(&full) {
        Ok(t) => t,
        Err(err) => return (false, format!("cannot read {path}: {err}")),
    };
    if !text.contains(&e.old) {
        return (false, format!("{path} does not contain the text to replace"));
    }
    let changed = if e.all { text.replace(&e.old, &e.new) } else { text.replacen(&e.old, &e.new, 1) };
    match std::fs::write(&full, changed) {
        Ok(()) => (true, format!("edited {path}")),
        Err(err) => (false, format!("cannot write {path}: {err}")),
    }
}

fn write(who: &Identity, path: &str, content: &str) -> (bool, String) {
    if let Some(reason) = denied(who, path) {
        return (false, reason);
    }
    let full = who.workdir.join(path);
    if let Some(dir) = full.parent()
        && let Err(e) = std::fs::create_dir_all(dir)
    {
        return (false, format!("cannot create {}: {e}", dir.display()));
    }
    match std::fs::write(&full, content) {
        Ok(()) => (true, format!("wrote {path}")),
        Err(e) => (false, format!("cannot write {path}: {e}")),
    }
}

fn shell(root: &Path, cmd: &str) -> (bool, String) {
    match std::process::Command::new("sh").arg("-c").arg(cmd).current_dir(root).output() {
        Ok(o) => {
            let mut text = String::from_utf8_lossy(&o.stdout).into_owned();
            text.push_str(&String::from_utf8_lossy(&o.stderr));
            (o.status.success(), tail(&text, 40))
        }
        Err(e) => (false, format!("cannot run sh: {e}")),
    }
}

/// The last `n` lines of `text`.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Recorder(Vec<String>);
    impl Outbox for Recorder {
        fn send(&mut self, from: &str, to: &str, kind: &str, body: &str) -> Result<(), String> {
            self.0.push(format!("{from}->{to} {kind}: {body}"));
            Ok(())
        }
        fn complete(&mut self, agent: &str, task: &str) -> Result<(), String> {
            self.0.push(format!("{agent} completes {task}"));
            Ok(())
        }
        fn call_tool(&mut self, who: &Identity, call: &ToolCall) -> Result<String, String> {
            self.0.push(format!("{} calls {} {}", who.agent, call.name, serde_json::Value::Object(call.args.clone())));
            Ok("{}".into())
        }
    }

    fn events(out: &[u8]) -> Vec<AgentEvent> {
        out.split(|b| *b == b'\n').filter(|l| !l.is_empty()).map(|l| serde_json::from_slice(l).unwrap()).collect()
    }

    const SCRIPT: &str = r#"
agents:
  builder/G1:
    - - write: {path: src/a.rs, content: "fn a() {}"}
      - write: {path: src/other.rs, content: "nope"}
      - run: "echo hello from {agent}"
      - message: {to: lead, body: "done with {feature}"}
      - complete: "1.1"
      - report: "BUILDER_COMPLETE\nFeature: {feature}"
    - - fail: "boom"
"#;

    fn who(dir: &Path) -> Identity {
        Identity {
            agent: "builder-g1-1".into(),
            role: "builder".into(),
            feature: Some("login".into()),
            group: Some("G1".into()),
            owned_files: vec!["src/a.rs".into()],
            project: dir.to_path_buf(),
            workdir: dir.to_path_buf(),
        }
    }

    #[test]
    fn runs_actions_enforces_ownership_and_reports() {
        let dir = tempfile::tempdir().unwrap();
        let script = Script::from_yaml(SCRIPT).unwrap();
        let mut out = Vec::new();
        let mut outbox = Recorder::default();
        assert_eq!(run(&script, &who(dir.path()), 0, &mut outbox, &mut out), 0);
        assert_eq!(std::fs::read_to_string(dir.path().join("src/a.rs")).unwrap(), "fn a() {}");
        assert!(!dir.path().join("src/other.rs").exists(), "a write outside the group is denied");
        let ev = events(&out);
        let results: Vec<(bool, String)> = ev
            .iter()
            .filter_map(|e| match e {
                AgentEvent::ToolResult { ok, output, .. } => Some((*ok, output.clone())),
                _ => None,
            })
            .collect();
        assert!(results[0].0);
        assert!(!results[1].0 && results[1].1.starts_with("denied by troupe"), "{:?}", results[1]);
        assert_eq!(results[2], (true, "hello from builder-g1-1".into()));
        assert_eq!(outbox.0, vec!["builder-g1-1->lead text: done with login", "builder-g1-1 completes 1.1"]);
        match ev.last().unwrap() {
            AgentEvent::Result { output } => {
                assert_eq!(output.kind, ResultType::Success);
                assert_eq!(output.result.as_deref(), Some("BUILDER_COMPLETE\nFeature: login"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn later_turns_and_failures() {
        let dir = tempfile::tempdir().unwrap();
        let script = Script::from_yaml(SCRIPT).unwrap();
        let mut out = Vec::new();
        assert_eq!(run(&script, &who(dir.path()), 5, &mut Recorder::default(), &mut out), 1);
        assert!(matches!(events(&out).last(), Some(AgentEvent::Result { output }) if output.kind == ResultType::Error));
        let mut w = who(dir.path());
        w.role = "architect".into();
        let mut out = Vec::new();
        assert_eq!(run(&script, &w, 0, &mut Recorder::default(), &mut out), 1, "no turns for the architect");
    }

    #[test]
    fn an_agent_key_wins_and_edits_and_tool_calls_replay() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src")).unwrap();
        std::fs::write(dir.path().join("src/a.rs"), "fn a() { 1 }").unwrap();
        let script = Script::from_yaml(
            r#"
agents:
  builder/G1:
    - - fail: "the role's key is not used"
  builder-g1-1:
    - - edit: {path: src/a.rs, old: "1", new: "2"}
      - edit: {path: src/a.rs, old: "absent", new: "x"}
      - tool: {name: troupe__report, args: {text: "BUILDER_COMPLETE"}}
"#,
        )
        .unwrap();
        let (mut out, mut outbox) = (Vec::new(), Recorder::default());
        assert_eq!(run(&script, &who(dir.path()), 0, &mut outbox, &mut out), 0);
        assert_eq!(std::fs::read_to_string(dir.path().join("src/a.rs")).unwrap(), "fn a() { 2 }");
        let oks: Vec<bool> = events(&out)
            .iter()
            .filter_map(|e| match e {
                AgentEvent::ToolResult { ok, .. } => Some(*ok),
                _ => None,
            })
            .collect();
        assert_eq!(oks, vec![true, false, true], "an edit whose text is absent fails");
        assert_eq!(outbox.0, vec![r#"builder-g1-1 calls troupe__report {"text":"BUILDER_COMPLETE"}"#]);
    }

    #[test]
    fn bad_scripts_are_named() {
        assert!(Script::from_yaml("agents:\n  x:\n    - - explode: 1\n").unwrap_err().contains("explode"));
    }
}
