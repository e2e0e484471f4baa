//! What a normalised tool call did to the world: the files it wrote, edited
//! or deleted, or the shell command it ran. A normalised
//! [`AgentEvent::ToolUse`](troupe_core::event::AgentEvent::ToolUse) keeps the
//! engine's own tool name and input; only this crate knows each engine's
//! tool shapes, so this is the one mapping from a tool call to its effect
//! (`troupe replay` re-does effects; the supervisor records what a file holds
//! after a change whose stream does not carry it).

use serde_json::Value;

use super::StreamFormat;

/// What a tool call did, as far as it changes the project.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Files written, edited or deleted, in order.
    Files(Vec<FileChange>),
    /// A shell command (what it made is made again by running it).
    Command(String),
}

/// One file a tool call changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileChange {
    /// The path as the engine gave it (usually absolute).
    pub path: String,
    /// How it changed.
    pub change: Change,
}

/// How a file changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Its whole new content.
    Write(String),
    /// `old` replaced by `new` (every occurrence with `all`).
    Edit {
        /// The text replaced.
        old: String,
        /// The text put in its place.
        new: String,
        /// Every occurrence, not only the first.
        all: bool,
    },
    /// It was deleted.
    Delete,
    /// It changed in a way the stream does not carry (Codex's `file_change`
    /// names only the paths; a patch's text is not the file): the supervisor
    /// records what it holds once the call returned
    /// ([`Body::Wrote`](crate::supervisor::Body::Wrote)).
    Untold,
}

impl StreamFormat {
    /// The format a log's engine id speaks, for logs that do not name it:
    /// the built-in engines' (`scripted` speaks troupe's own).
    pub fn of_builtin(engine: &str) -> Option<StreamFormat> {
        match engine {
            "scripted" => Some(StreamFormat::Troupe),
            other => StreamFormat::from_name(other).filter(|f| *f != StreamFormat::Text),
        }
    }

    /// What the tool call `name(input)` of this format did; `None` for calls
    /// that change nothing (reads, searches) or that it does not know.
    pub fn effect(self, name: &str, input: &Value) -> Option<Effect> {
        match self {
            // The scripted engine names its tools as Claude Code does.
            StreamFormat::Claude | StreamFormat::Troupe => claude(name, input),
            StreamFormat::Gemini => gemini(name, input),
            StreamFormat::Codex => codex(name, input),
            StreamFormat::OpenCode => opencode(name, input),
            StreamFormat::Text => None,
        }
    }
}

fn text(input: &Value, key: &str) -> Option<String> {
    input.get(key).and_then(Value::as_str).map(str::to_string)
}

fn flag(input: &Value, key: &str) -> bool {
    input.get(key).and_then(Value::as_bool).unwrap_or(false)
}

fn one(path: String, change: Change) -> Option<Effect> {
    Some(Effect::Files(vec![FileChange { path, change }]))
}

/// Claude Code: `Write`, `Edit`, `MultiEdit`, `Bash`, and `NotebookEdit`.
fn claude(name: &str, input: &Value) -> Option<Effect> {
    match name {
        "Write" | "Edit" | "MultiEdit" | "Bash" => common(&name.to_ascii_lowercase(), input, &CLAUDE_KEYS),
        "NotebookEdit" => one(text(input, "notebook_path")?, Change::Untold),
        _ => None,
    }
}

/// The input keys of the tools Claude Code and OpenCode share in shape.
struct Keys {
    path: &'static str,
    old: &'static str,
    new: &'static str,
    all: &'static str,
}

const CLAUDE_KEYS: Keys = Keys { path: "file_path", old: "old_string", new: "new_string", all: "replace_all" };
const OPENCODE_KEYS: Keys = Keys { path: "filePath", old: "oldString", new: "newString", all: "replaceAll" };

/// `write`, `edit`, `multiedit` and `bash` (lower-cased names) with `k`'s input keys.
fn common(name: &str, input: &Value, k: &Keys) -> Option<Effect> {
    let edit_of = |e: &Value| edit(e, k.old, k.new, flag(e, k.all));
    match name {
        "write" => one(text(input, k.path)?, Change::Write(text(input, "content")?)),
        "edit" => one(text(input, k.path)?, edit_of(input)?),
        "multiedit" => multi(text(input, k.path)?, input, edit_of),
        "bash" => text(input, "command").map(Effect::Command),
        _ => None,
    }
}

/// Gemini CLI: `write_file`, `replace` (every occurrence when it expects
/// more than one), `run_shell_command`.
fn gemini(name: &str, input: &Value) -> Option<Effect> {
    match name {
        "write_file" => one(text(input, "file_path")?, Change::Write(text(input, "content")?)),
        "replace" => {
            let all = input.get("expected_replacements").and_then(Value::as_u64).unwrap_or(1) > 1;
            one(text(input, "file_path")?, edit(input, "old_string", "new_string", all)?)
        }
        "run_shell_command" => text(input, "command").map(Effect::Command),
        _ => None,
    }
}

/// Codex `exec --json`: `file_change` (paths and kinds only: `add`,
/// `update`, `delete`), `command_execution`.
fn codex(name: &str, input: &Value) -> Option<Effect> {
    match name {
        "file_change" => {
            let changes = input.get("changes")?.as_array()?;
            let files = changes
                .iter()
                .filter_map(|c| {
                    let change = match c.get("kind").and_then(Value::as_str) {
                        Some("delete") => Change::Delete,
                        _ => Change::Untold,
                    };
                    Some(FileChange { path: text(c, "path")?, change })
                })
                .collect();
            Some(Effect::Files(files))
        }
        "command_execution" => text(input, "command").map(Effect::Command),
        _ => None,
    }
}

/// OpenCode: `write`, `edit`, `multiedit`, `bash` (Claude Code's in
/// camelCase), and `patch` / `apply_patch` (the files its patch text names).
fn opencode(name: &str, input: &Value) -> Option<Effect> {
    match name {
        "patch" | "apply_patch" => Some(Effect::Files(patched(&text(input, "patchText")?))),
        _ => common(name, input, &OPENCODE_KEYS),
    }
}

fn edit(input: &Value, old: &str, new: &str, all: bool) -> Option<Change> {
    Some(Change::Edit { old: text(input, old)?, new: text(input, new)?, all })
}

/// A `MultiEdit`-like call: its `edits`, in order, all of `path`.
fn multi(path: String, input: &Value, each: impl Fn(&Value) -> Option<Change>) -> Option<Effect> {
    let edits = input.get("edits")?.as_array()?;
    let changes = edits.iter().map(|e| Some(FileChange { path: path.clone(), change: each(e)? }));
    changes.collect::<Option<Vec<_>>>().map(Effect::Files)
}

/// The files a `*** Begin Patch` text changes (its file headers; a moved
/// file is deleted where it was and written where it went).
fn patched(patch: &str) -> Vec<FileChange> {
    let mut out: Vec<FileChange> = Vec::new();
    for line in patch.lines() {
        let header = |prefix: &str| line.strip_prefix(prefix).map(|p| p.trim().to_string());
        let change = if let Some(p) = header("*** Add File:").or_else(|| header("*** Update File:")) {
            FileChange { path: p, change: Change::Untold }
        } else if let Some(p) = header("*** Delete File:") {
            FileChange { path: p, change: Change::Delete }
        } else if let Some(p) = header("*** Move to:") {
            // The file updated just before is gone from its old place.
            if let Some(last) = out.last_mut() {
                last.change = Change::Delete;
            }
            FileChange { path: p, change: Change::Untold }
        } else {
            continue;
        };
        out.push(change);
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::parse::parse_events;
    use troupe_core::event::AgentEvent;

    fn write(path: &str, content: &str) -> FileChange {
        FileChange { path: path.into(), change: Change::Write(content.into()) }
    }

    fn edit(path: &str, old: &str, new: &str, all: bool) -> FileChange {
        FileChange { path: path.into(), change: Change::Edit { old: old.into(), new: new.into(), all } }
    }

    /// The effects of every tool call in a captured stream of `format`.
    fn effects(format: StreamFormat, stream: &str) -> Vec<Effect> {
        parse_events(format, stream.as_bytes())
            .iter()
            .filter_map(|e| match e {
                AgentEvent::ToolUse { name, input, .. } => format.effect(name, input),
                _ => None,
            })
            .collect()
    }

    fn captured(name: &str) -> String {
        let path = format!("{}/tests/fixtures/{name}.jsonl", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    #[test]
    fn each_engines_captured_stream_yields_its_write_and_its_command() {
        // (The captured Gemini run made no shell call.)
        let p = "/home/user/project/hello.txt";
        let cases = [
            (StreamFormat::Gemini, "gemini-success", write(p, "hi from fake gemini\n"), None),
            (StreamFormat::OpenCode, "opencode-success", write(p, "hi from fake opencode\n"), Some("cat hello.txt")),
            // Codex's stream names the file, not what it now holds.
            (
                StreamFormat::Codex,
                "codex-success",
                FileChange { path: p.into(), change: Change::Untold },
                Some("cat hello.txt"),
            ),
        ];
        for (format, fixture, file, command) in cases {
            let got = effects(format, &captured(fixture));
            assert_eq!(got.first(), Some(&Effect::Files(vec![file])), "{fixture}: {got:?}");
            let shell = match got.get(1) {
                Some(Effect::Command(c)) => Some(c.as_str()),
                _ => None,
            };
            assert_eq!(shell.map(|c| c.contains(command.unwrap_or("-"))), command.map(|_| true), "{fixture}: {got:?}");
        }
    }

    #[test]
    fn edits_keep_each_engines_arguments() {
        let claude = StreamFormat::Claude.effect(
            "MultiEdit",
            &json!({"file_path": "/p/a", "edits": [{"old_string": "a", "new_string": "b"}, {"old_string": "c", "new_string": "d", "replace_all": true}]}),
        );
        assert_eq!(claude, Some(Effect::Files(vec![edit("/p/a", "a", "b", false), edit("/p/a", "c", "d", true)])));
        let gemini = StreamFormat::Gemini.effect(
            "replace",
            &json!({"file_path": "/p/a", "old_string": "x", "new_string": "y", "expected_replacements": 3}),
        );
        assert_eq!(gemini, Some(Effect::Files(vec![edit("/p/a", "x", "y", true)])));
        let opencode = StreamFormat::OpenCode
            .effect("edit", &json!({"filePath": "/p/a", "oldString": "x", "newString": "y", "replaceAll": false}));
        assert_eq!(opencode, Some(Effect::Files(vec![edit("/p/a", "x", "y", false)])));
        // The scripted engine speaks Claude's names.
        let scripted = StreamFormat::Troupe.effect("Write", &json!({"file_path": "a", "content": "x"}));
        assert_eq!(scripted, Some(Effect::Files(vec![write("a", "x")])));
        // Another engine's names mean nothing in this one's format; reads change nothing.
        assert_eq!(StreamFormat::Codex.effect("Write", &json!({"file_path": "a", "content": "x"})), None);
        assert_eq!(StreamFormat::Claude.effect("Read", &json!({"file_path": "a"})), None);
    }

    #[test]
    fn codex_deletes_and_patches_name_their_files() {
        let changes = json!({"changes": [{"path": "/p/a", "kind": "add"}, {"path": "/p/b", "kind": "delete"}]});
        let untold = |p: &str| FileChange { path: p.into(), change: Change::Untold };
        let delete = |p: &str| FileChange { path: p.into(), change: Change::Delete };
        assert_eq!(
            StreamFormat::Codex.effect("file_change", &changes),
            Some(Effect::Files(vec![untold("/p/a"), delete("/p/b")]))
        );
        let patch = "*** Begin Patch\n*** Add File: a.rs\n+x\n*** Update File: b.rs\n*** Move to: c.rs\n@@\n-y\n+z\n*** Delete File: d.rs\n*** End Patch\n";
        assert_eq!(
            StreamFormat::OpenCode.effect("apply_patch", &json!({"patchText": patch})),
            Some(Effect::Files(vec![untold("a.rs"), delete("b.rs"), untold("c.rs"), delete("d.rs")]))
        );
        assert_eq!(StreamFormat::of_builtin("scripted"), Some(StreamFormat::Troupe));
        assert_eq!(StreamFormat::of_builtin("codex"), Some(StreamFormat::Codex));
        assert_eq!(StreamFormat::of_builtin("my-wrapper"), None);
    }
}
