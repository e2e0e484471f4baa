//! `troupe replay`'s pure parts: a recorded run's teammates as a script for
//! the scripted engine (from their normalised logs), and the comparison of
//! two event logs modulo what differs between any two runs.
//!
//! Each launch of a teammate becomes one turn of the script under the
//! teammate's own id, so a resume plays its next launch. What a launch did to
//! the world is replayed: file writes and edits that succeeded, shell
//! commands, troupe gateway calls (through the gateway, so its policy and
//! side effects are the same), assistant text, usage (so the ledger and the
//! budgets see the same spend) and the final report or error. Reads and
//! searches change nothing and are left out. A launch that ended without a
//! result because it was stopped replays as a hang, so the Lead meets the
//! same silence. Each action keeps its recorded time from the launch's spawn
//! (`at`, the engine's start-up included), so parallel teammates reach the
//! Lead in the recorded order. What a file change did comes from the engine
//! adapter's reading of the tool call
//! ([`StreamFormat::effect`](troupe_engine::parse::StreamFormat::effect)), or,
//! where the stream does not carry it (Codex's `file_change`), from the
//! files as the supervisor logged them after the call ([`Body::Wrote`]).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use jiff::Timestamp;
use serde_json::Value;
use troupe_core::event::{AgentEvent, ResultType, ToolKind};
use troupe_core::rbac::GATEWAY_MCP_NAME;
use troupe_core::tools::{self, McpNaming, gateway_tool};
use troupe_engine::parse::{Change, Effect, FileChange, StreamFormat};
use troupe_engine::supervisor::{Body, Record, WrittenFile};

mod compare;
mod pace;

pub use compare::{compared, differences, normalise};

use crate::driver::record::RunRecord;
use troupe_scripted::{Action, EditFile, Script, SendTo, ShutdownAnswer, ToolCall, WriteFile};

/// The script that replays `record`'s teammates from the logs in `logs`
/// (`.troupe/state/logs/`), with paths made relative to `root`.
pub fn script(logs: &Path, record: &RunRecord, root: &Path) -> Result<Script, String> {
    let entries = std::fs::read_dir(logs).map_err(|e| format!("cannot read {}: {e}", logs.display()))?;
    let mut logs_of = BTreeMap::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(agent) = path.file_name().and_then(|n| n.to_str()).and_then(|n| n.strip_suffix(".jsonl")) else {
            continue;
        };
        if !record.owns_agent(agent) {
            continue;
        }
        let text = std::fs::read_to_string(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let records = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str::<Record>(l).map_err(|e| format!("{}: {e}", path.display())))
            .collect::<Result<Vec<_>, _>>()?;
        logs_of.insert(agent.to_string(), records);
    }
    let origins = pace::origins(&logs_of);
    let agents = logs_of
        .iter()
        .map(|(agent, records)| {
            (agent.clone(), turns(records, root, origins.get(agent).map_or(&[][..], Vec::as_slice)))
        })
        .collect();
    Ok(Script { agents })
}

/// One turn per launch (a `spawned` record starts one), each paced from its
/// origin in `origins` (its batch's first spawn, see `pace`; its own spawn
/// when not given).
pub fn turns(records: &[Record], root: &Path, origins: &[Timestamp]) -> Vec<Vec<Action>> {
    let mut out = Vec::new();
    let mut launch: Option<Launch> = None;
    for r in records {
        match &r.body {
            Body::Spawned { engine, format, .. } => {
                out.extend(launch.take().map(Launch::end));
                let origin = origins.get(out.len()).copied().unwrap_or(r.ts);
                launch = Some(Launch::new(engine, format.as_deref(), root, origin));
            }
            Body::Event { event } => {
                if let Some(l) = &mut launch {
                    // The pace counts from the spawn (of its batch), start-up
                    // included: parallel teammates whose CLIs started at different
                    // speeds reach the Lead in the recorded order only so (a fast
                    // Inspector done before its Auditor, or asked to shut down after it).
                    l.now = r.ts;
                    l.event(event)
                }
            }
            Body::Exited { signal, .. } => {
                if let Some(mut l) = launch.take() {
                    // Stopped before it gave a result: it fell silent, as far as the Lead saw.
                    if !l.ended && signal.is_some() {
                        l.actions.push(Action::Hang);
                    }
                    out.push(l.end());
                }
            }
            Body::Wrote { files, .. } => {
                if let Some(l) = &mut launch {
                    l.now = r.ts;
                    l.wrote(files);
                }
            }
            Body::Unresponsive { .. } | Body::Stopping { .. } => {}
        }
    }
    out.extend(launch.map(Launch::end));
    out
}

/// One launch being turned into actions.
struct Launch<'a> {
    naming: McpNaming,
    /// What its tool calls' names and inputs mean (`None`: an engine of
    /// unknown format, whose file changes and commands are not replayed).
    format: Option<StreamFormat>,
    scripted: bool,
    root: &'a Path,
    /// When the launch started, and when the event at hand was seen.
    start: Timestamp,
    now: Timestamp,
    /// The last `at` given, in milliseconds from the start.
    paced: u64,
    calls: HashMap<String, (String, ToolKind, Value, Timestamp)>,
    actions: Vec<Action>,
    ended: bool,
}

/// Gaps shorter than this are not paced: they are the engine's own overhead.
const PACE_MS: u64 = 20;

impl<'a> Launch<'a> {
    fn new(engine: &str, format: Option<&str>, root: &'a Path, start: Timestamp) -> Launch<'a> {
        Launch {
            naming: McpNaming::of_engine(engine),
            format: format.and_then(StreamFormat::from_name).or_else(|| StreamFormat::of_builtin(engine)),
            scripted: engine == "scripted",
            root,
            start,
            now: start,
            paced: 0,
            calls: HashMap::new(),
            actions: Vec::new(),
            ended: false,
        }
    }

    /// Add `action`, first waiting until `at` (from the launch's start) when that is a pace worth keeping.
    fn push(&mut self, at: Timestamp, action: Action) {
        let ms = at.duration_since(self.start).as_millis().max(0) as u64;
        if ms >= self.paced + PACE_MS {
            self.actions.push(Action::At(ms));
            self.paced = ms;
        }
        self.actions.push(action);
    }

    fn end(self) -> Vec<Action> {
        self.actions
    }

    fn event(&mut self, event: &AgentEvent) {
        if self.ended {
            return;
        }
        match event {
            AgentEvent::Text { text } => self.push(self.now, Action::Say(text.clone())),
            AgentEvent::Usage(u) => self.push(self.now, Action::Usage(u.clone())),
            AgentEvent::ToolUse { id, name, kind, input } => {
                self.calls.insert(id.clone(), (name.clone(), *kind, input.clone(), self.now));
            }
            AgentEvent::ToolResult { id, ok, .. } => {
                if let Some((name, kind, input, at)) = self.calls.remove(id) {
                    for action in self.tool(&name, kind, input, *ok) {
                        self.push(at, action)
                    }
                }
            }
            AgentEvent::Result { output } => {
                self.ended = true;
                match output.kind {
                    ResultType::Success => {
                        if let Some(text) = &output.result {
                            // The report is the last text too: say it once, as the report.
                            if matches!(self.actions.last(), Some(Action::Say(t)) if t == text) {
                                self.actions.pop();
                            }
                            self.push(self.now, Action::Report(text.clone()));
                        }
                    }
                    _ => self
                        .push(self.now, Action::Fail(output.error_message.clone().unwrap_or_else(|| "failed".into()))),
                }
            }
            AgentEvent::Init { .. }
            | AgentEvent::Thinking { .. }
            | AgentEvent::Error { .. }
            | AgentEvent::Raw { .. } => {}
        }
    }

    /// What a finished tool call replays as: its effect as the engine's
    /// adapter reads it (a denied or failed change replays as nothing; a
    /// command runs again whatever it returned, it may have made files), or a
    /// gateway call. Changes the stream does not carry come with the
    /// [`Body::Wrote`] record that follows.
    fn tool(&self, name: &str, kind: ToolKind, input: Value, ok: bool) -> Vec<Action> {
        if kind == ToolKind::Mcp {
            return self.gateway_call(name, input).into_iter().collect();
        }
        match self.format.and_then(|f| f.effect(name, &input)) {
            Some(Effect::Command(command)) => vec![Action::Run(command)],
            Some(Effect::Files(files)) if ok => files.into_iter().filter_map(|f| self.change(f)).collect(),
            _ => Vec::new(),
        }
    }

    fn change(&self, f: FileChange) -> Option<Action> {
        let path = self.relative(&f.path);
        Some(match f.change {
            Change::Write(content) => Action::Write(WriteFile { path, content }),
            Change::Edit { old, new, all } => Action::Edit(EditFile { path, old, new, all }),
            Change::Delete => delete(&path),
            Change::Untold => return None,
        })
    }

    /// The files a change the stream did not carry left, written again.
    fn wrote(&mut self, files: &[WrittenFile]) {
        if self.ended {
            return;
        }
        for f in files {
            let path = self.relative(&f.path);
            let action = match &f.content {
                Some(content) => Action::Write(WriteFile { path, content: content.clone() }),
                None => delete(&path),
            };
            self.push(self.now, action);
        }
    }

    /// A call of troupe's gateway: the scripted engine's own actions for what
    /// it makes itself (a recorded scripted run), the gateway's dispatch for
    /// the rest; a shutdown answer always waits for its request.
    fn gateway_call(&self, name: &str, input: Value) -> Option<Action> {
        let claude = gateway_tool(self.naming, name);
        let tool = claude.strip_prefix(&format!("mcp__{GATEWAY_MCP_NAME}__"))?.to_string();
        let text = |k: &str| input.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let bare = tool.strip_prefix(&format!("{}__", tools::TROUPE_SERVER)).unwrap_or(&tool);
        let action = match bare {
            tools::RESPOND_SHUTDOWN => Action::RespondShutdown(ShutdownAnswer {
                approve: input.get("approve").and_then(Value::as_bool).unwrap_or(false),
                reason: text("reason"),
            }),
            tools::BOARD_COMPLETE if self.scripted => Action::Complete(text("task_id")),
            tools::SEND_MESSAGE if self.scripted => Action::Message(SendTo {
                to: text("to"),
                body: text("body"),
                kind: input.get("kind").and_then(Value::as_str).map(str::to_string),
            }),
            _ => Action::Tool(ToolCall { name: tool.clone(), args: input.as_object().cloned().unwrap_or_default() }),
        };
        Some(action)
    }

    /// `path` relative to where the teammate works (engines log absolute
    /// paths): a Builder's worktree (`.troupe/state/worktrees/<feature>/<group>`,
    /// which the replayed Builder gets as its own, `TROUPE_WORKTREE`), else the
    /// project root.
    fn relative(&self, path: &str) -> String {
        let path = Path::new(path);
        let worktrees = troupe_core::layout::Layout::new(self.root).state_dir().join("worktrees");
        if let Ok(inside) = path.strip_prefix(&worktrees) {
            // Past the feature's and the group's folders.
            let rest: PathBuf = inside.components().skip(2).collect();
            if !rest.as_os_str().is_empty() {
                return rest.display().to_string();
            }
        }
        path.strip_prefix(self.root).map(|p| p.display().to_string()).unwrap_or_else(|_| path.display().to_string())
    }
}

/// A deletion, as a shell command in the teammate's working folder (the
/// scripted engine writes and edits, and runs commands).
fn delete(path: &str) -> Action {
    Action::Run(format!("rm -f -- '{}'", path.replace('\'', r"'\''")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use troupe_core::event::{ParsedOutput, Usage};

    fn rec(seq: u64, body: Body) -> Record {
        Record { seq, ts: Timestamp::UNIX_EPOCH, agent: "builder-g1-4".into(), body }
    }

    fn ev(event: AgentEvent) -> Body {
        Body::Event { event }
    }

    fn spawned(engine: &str) -> Body {
        Body::Spawned { engine: engine.into(), model: None, format: None, pid: 1, command: vec![] }
    }

    #[test]
    fn a_builders_worktree_paths_are_replayed_in_its_own_worktree() {
        let launch = Launch::new("claude", None, Path::new("/p"), Timestamp::UNIX_EPOCH);
        assert_eq!(launch.relative("/p/.troupe/state/worktrees/login/G1/src/a.rs"), "src/a.rs");
        assert_eq!(launch.relative("/p/src/a.rs"), "src/a.rs");
        assert_eq!(launch.relative("/elsewhere/a.rs"), "/elsewhere/a.rs");
    }

    #[test]
    fn a_claude_launch_replays_its_effects_and_a_resume_is_the_next_turn() {
        let root = Path::new("/p");
        let tool = |id: &str, name: &str, kind, input| {
            ev(AgentEvent::ToolUse { id: id.into(), name: name.into(), kind, input })
        };
        let done = |id: &str, ok| ev(AgentEvent::ToolResult { id: id.into(), ok, output: String::new() });
        let mut ok = ParsedOutput::new(ResultType::Success);
        ok.result = Some("BUILDER_COMPLETE".into());
        let records = vec![
            rec(0, spawned("claude")),
            rec(
                1,
                tool("a", "Write", ToolKind::FileEdit, serde_json::json!({"file_path": "/p/src/a.rs", "content": "x"})),
            ),
            rec(2, done("a", true)),
            rec(
                3,
                tool("b", "Write", ToolKind::FileEdit, serde_json::json!({"file_path": "/p/src/b.rs", "content": "y"})),
            ),
            rec(4, done("b", false)),
            rec(5, tool("c", "Read", ToolKind::FileRead, serde_json::json!({"file_path": "/p/src/a.rs"}))),
            rec(6, done("c", true)),
            rec(7, tool("d", "Bash", ToolKind::Command, serde_json::json!({"command": "sh tests/run.sh"}))),
            rec(8, done("d", false)),
            rec(9, tool("e", "mcp__troupe__troupe__report", ToolKind::Mcp, serde_json::json!({"text": "r"}))),
            rec(10, done("e", true)),
            rec(11, ev(AgentEvent::Usage(Usage { input_tokens: 5, ..Default::default() }))),
            rec(12, ev(AgentEvent::Text { text: "BUILDER_COMPLETE".into() })),
            rec(13, ev(AgentEvent::Result { output: ok.clone() })),
            rec(14, Body::Exited { exit_code: Some(0), signal: None, outcome: ok }),
            rec(15, spawned("claude")),
            rec(16, Body::Exited { exit_code: None, signal: Some(9), outcome: ParsedOutput::new(ResultType::Error) }),
        ];
        let turns = turns(&records, root, &[]);
        assert_eq!(turns.len(), 2);
        let mut args = serde_json::Map::new();
        args.insert("text".into(), "r".into());
        assert_eq!(
            turns[0],
            vec![
                Action::Write(WriteFile { path: "src/a.rs".into(), content: "x".into() }),
                Action::Run("sh tests/run.sh".into()),
                Action::Tool(ToolCall { name: "troupe__report".into(), args }),
                Action::Usage(Usage { input_tokens: 5, ..Default::default() }),
                Action::Report("BUILDER_COMPLETE".into()),
            ],
            "a denied write and a read replay as nothing"
        );
        assert_eq!(turns[1], vec![Action::Hang], "a launch killed before its result replays as silence");
    }

    #[test]
    fn a_codex_launch_replays_the_files_its_changes_left_and_opencode_its_edits() {
        let root = Path::new("/p");
        let wt = "/p/.troupe/state/worktrees/login/G1";
        let changes = serde_json::json!({"changes": [{"path": format!("{wt}/src/a.sh"), "kind": "add"}, {"path": format!("{wt}/old.sh"), "kind": "delete"}]});
        let written = |path: &str, content: Option<&str>| WrittenFile {
            path: format!("{wt}/{path}"),
            content: content.map(str::to_string),
        };
        let records = vec![
            rec(0, spawned("codex")),
            rec(
                1,
                ev(AgentEvent::ToolUse {
                    id: "i0".into(),
                    name: "file_change".into(),
                    kind: ToolKind::FileEdit,
                    input: changes,
                }),
            ),
            rec(2, ev(AgentEvent::ToolResult { id: "i0".into(), ok: true, output: String::new() })),
            rec(
                3,
                Body::Wrote {
                    call: "i0".into(),
                    files: vec![written("src/a.sh", Some("a\n")), written("gone.sh", None)],
                },
            ),
            rec(
                4,
                ev(AgentEvent::ToolUse {
                    id: "i1".into(),
                    name: "command_execution".into(),
                    kind: ToolKind::Command,
                    input: serde_json::json!({"command": "sh check.sh"}),
                }),
            ),
            rec(5, ev(AgentEvent::ToolResult { id: "i1".into(), ok: true, output: String::new() })),
            rec(6, spawned("opencode")),
            rec(
                7,
                ev(AgentEvent::ToolUse {
                    id: "c".into(),
                    name: "edit".into(),
                    kind: ToolKind::FileEdit,
                    input: serde_json::json!({"filePath": "/p/src/b.sh", "oldString": "x", "newString": "y"}),
                }),
            ),
            rec(8, ev(AgentEvent::ToolResult { id: "c".into(), ok: true, output: String::new() })),
        ];
        let turns = turns(&records, root, &[]);
        assert_eq!(
            turns[0],
            vec![
                // The deletion Codex names, then what its untold changes left (a file gone since, too).
                Action::Run("rm -f -- 'old.sh'".into()),
                Action::Write(WriteFile { path: "src/a.sh".into(), content: "a\n".into() }),
                Action::Run("rm -f -- 'gone.sh'".into()),
                Action::Run("sh check.sh".into()),
            ],
            "Codex's change replays from the files it left, in the Builder's own worktree"
        );
        assert_eq!(
            turns[1],
            vec![Action::Edit(EditFile { path: "src/b.sh".into(), old: "x".into(), new: "y".into(), all: false })]
        );
    }
}
