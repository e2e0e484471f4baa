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
//! same silence. Each action keeps its recorded time from the launch's start
//! (`at`), so parallel teammates reach the Lead in the recorded order.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use jiff::Timestamp;
use serde_json::Value;
use troupe_core::event::{AgentEvent, ResultType, ToolKind};
use troupe_core::rbac::GATEWAY_MCP_NAME;
use troupe_core::tools::{self, McpNaming, gateway_tool};
use troupe_engine::supervisor::{Body, Record};
use troupe_store::Event;

use crate::driver::record::RunRecord;
use troupe_scripted::{Action, EditFile, Script, SendTo, ShutdownAnswer, ToolCall, WriteFile};

/// The script that replays `record`'s teammates from the logs in `logs`
/// (`.troupe/state/logs/`), with paths made relative to `root`.
pub fn script(logs: &Path, record: &RunRecord, root: &Path) -> Result<Script, String> {
    let entries = std::fs::read_dir(logs).map_err(|e| format!("cannot read {}: {e}", logs.display()))?;
    let mut agents = BTreeMap::new();
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
        agents.insert(agent.to_string(), turns(&records, root));
    }
    Ok(Script { agents })
}

/// One turn per launch (a `spawned` record starts one).
pub fn turns(records: &[Record], root: &Path) -> Vec<Vec<Action>> {
    let mut out = Vec::new();
    let mut launch: Option<Launch> = None;
    for r in records {
        match &r.body {
            Body::Spawned { engine, .. } => {
                out.extend(launch.take().map(Launch::end));
                launch = Some(Launch::new(engine, root, r.ts));
            }
            Body::Event { event } => {
                if let Some(l) = &mut launch {
                    // The pace counts from the engine's first event: a model CLI's
                    // start-up (seconds) is not the scripted engine's.
                    if matches!(event, AgentEvent::Init { .. }) && l.actions.is_empty() {
                        l.start = r.ts;
                    }
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
            Body::Unresponsive { .. } | Body::Stopping { .. } => {}
        }
    }
    out.extend(launch.map(Launch::end));
    out
}

/// One launch being turned into actions.
struct Launch<'a> {
    naming: McpNaming,
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
    fn new(engine: &str, root: &'a Path, start: Timestamp) -> Launch<'a> {
        Launch {
            naming: McpNaming::of_engine(engine),
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
                if let Some((name, kind, input, at)) = self.calls.remove(id)
                    && let Some(action) = self.tool(&name, kind, input, *ok)
                {
                    self.push(at, action)
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

    /// What a finished tool call replays as, if anything.
    fn tool(&self, name: &str, kind: ToolKind, input: Value, ok: bool) -> Option<Action> {
        let text = |k: &str| input.get(k).and_then(Value::as_str).map(str::to_string);
        match kind {
            ToolKind::FileEdit if ok => {
                let path =
                    self.relative(&text("file_path").or_else(|| text("path")).or_else(|| text("absolute_path"))?);
                if let Some(content) = text("content") {
                    return Some(Action::Write(WriteFile { path, content }));
                }
                let all = input.get("replace_all").and_then(Value::as_bool).unwrap_or(false);
                Some(Action::Edit(EditFile { path, old: text("old_string")?, new: text("new_string")?, all }))
            }
            ToolKind::Command => text("command").or_else(|| text("cmd")).map(Action::Run),
            ToolKind::Mcp => self.gateway_call(name, input),
            _ => None,
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

/// The keys of an event's data that differ between any two runs of the same
/// decisions: process ids, clocks, the engine that ran a teammate (a replay
/// runs every teammate on the scripted engine), and which of two parallel
/// completions unblocked a task (the board's end state is compared instead).
const VOLATILE: [&str; 8] = ["pid", "at", "ts", "engine", "model", "duration_ms", "elapsed_ms", "unblocked"];

/// Kinds of event that come from how an engine is wired, not from what the
/// Lead decided: a model CLI is given a gateway token for its MCP
/// connection, the scripted engine needs none.
const WIRING: [&str; 1] = ["gateway_token"];

/// The events replay compares: all but the engine's wiring ([`WIRING`]).
pub fn compared(events: Vec<Event>) -> Vec<Event> {
    events.into_iter().filter(|e| !WIRING.contains(&e.kind.as_str())).collect()
}

/// An event as replay compares it: kind, actor, subject and data, without
/// its id, time and [`VOLATILE`] data.
pub fn normalise(e: &Event) -> Value {
    let mut data = e.data.clone();
    if let Some(map) = data.as_object_mut() {
        for k in VOLATILE {
            map.remove(k);
        }
        if e.kind == troupe_store::event::kind::TASK_UNBLOCKED {
            map.remove("by");
        }
    }
    serde_json::json!({"kind": e.kind, "actor": e.actor, "subject": e.subject, "data": data})
}

/// Where two runs' events differ: for each actor (the Lead, each teammate,
/// none) and each subject it acts on (a task, an agent, a group), its events
/// in order must be the same. Events of different actors may interleave
/// differently, as parallel teammates finish in any order, and so may one
/// actor's events about different subjects (the Lead's bookkeeping of a task
/// and of its group are written by different threads).
pub fn differences(original: &[Event], replay: &[Event]) -> Vec<String> {
    let by_actor = |events: &[Event]| {
        let mut m: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        for e in events {
            let actor = e.actor.clone().unwrap_or_else(|| "-".into());
            let key = match &e.subject {
                Some(s) if e.kind != troupe_store::event::kind::MESSAGE_SENT => format!("{actor} (about {s})"),
                _ => actor,
            };
            m.entry(key).or_default().push(normalise(e));
        }
        m
    };
    let (a, b) = (by_actor(original), by_actor(replay));
    let mut out = Vec::new();
    for actor in a.keys().chain(b.keys().filter(|k| !a.contains_key(*k))) {
        let (x, y) = (a.get(actor).map_or(&[][..], Vec::as_slice), b.get(actor).map_or(&[][..], Vec::as_slice));
        if let Some(i) = (0..x.len().max(y.len())).find(|&i| x.get(i) != y.get(i)) {
            let show = |v: Option<&Value>| v.map_or("nothing".to_string(), Value::to_string);
            out.push(format!(
                "{actor}'s event {} was {} and is {} in the replay",
                i + 1,
                show(x.get(i)),
                show(y.get(i))
            ));
        }
    }
    out
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
        Body::Spawned { engine: engine.into(), model: None, pid: 1, command: vec![] }
    }

    #[test]
    fn a_builders_worktree_paths_are_replayed_in_its_own_worktree() {
        let launch = Launch::new("claude", Path::new("/p"), Timestamp::UNIX_EPOCH);
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
        let turns = turns(&records, root);
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
    fn events_compare_per_actor_without_ids_times_and_pids() {
        let e = |id, actor: &str, kind: &str, pid: u32| Event {
            id,
            at: Timestamp::from_second(id).unwrap(),
            kind: kind.into(),
            actor: Some(actor.into()),
            subject: None,
            data: serde_json::json!({"pid": pid, "role": "builder"}),
        };
        let original = vec![e(1, "a", "x", 10), e(2, "b", "y", 11), e(3, "a", "z", 12)];
        let interleaved = vec![e(7, "b", "y", 99), e(8, "a", "x", 98), e(9, "a", "z", 97)];
        assert!(differences(&original, &interleaved).is_empty());
        let reordered = vec![e(7, "a", "z", 1), e(8, "b", "y", 1), e(9, "a", "x", 1)];
        let diff = differences(&original, &reordered);
        assert_eq!(diff.len(), 1, "{diff:?}");
        assert!(diff[0].starts_with("a's event 1"), "{diff:?}");
        assert_eq!(differences(&original, &original[..2]).len(), 1, "a missing event is a difference");
    }
}
