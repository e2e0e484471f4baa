//! What a tool call does, whatever the engine calls the tool: write files, run a
//! shell command, invoke a skill, or something the gates do not look at.

use serde_json::Value;

use crate::engine::Engine;

/// A tool call, as the gates see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolCall {
    /// Writes (creates, edits, patches, deletes) these files, as given (maybe relative).
    Write {
        /// The tool's name.
        tool: String,
        /// The files it touches.
        paths: Vec<String>,
    },
    /// Runs a shell command.
    Shell {
        /// The command line.
        command: String,
        /// The folder the tool runs it in, when the call names one (Codex
        /// `workdir`, Gemini `dir_path`): relative paths are read from there.
        dir: Option<String>,
    },
    /// Invokes a skill.
    Skill {
        /// The skill's name, without a plugin prefix.
        name: String,
    },
    /// Anything else (reads, searches, MCP tools): the file gates pass it.
    Other,
}

/// A write or skill tool whose input lacks what troupe must check.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the {tool} call's tool_input has no {what}")]
pub struct ToolError {
    /// The tool.
    pub tool: String,
    /// What is missing.
    pub what: &'static str,
}

/// The write tools of every engine, lower case. Claude: Write, Edit, MultiEdit,
/// NotebookEdit; Gemini: write_file, replace; Codex: apply_patch; OpenCode:
/// write, edit, multiedit, patch.
const WRITE_TOOLS: &[&str] =
    &["write", "edit", "multiedit", "notebookedit", "write_file", "replace", "edit_file", "apply_patch", "patch"];
const SHELL_TOOLS: &[&str] = &["bash", "run_shell_command", "exec_command", "shell", "local_shell"];
const SKILL_TOOLS: &[&str] = &["skill", "activate_skill"];
const PATH_KEYS: &[&str] = &["file_path", "filePath", "notebook_path", "path", "absolute_path"];

/// Classify a call of `tool` with `input`.
pub fn classify(_engine: Engine, tool: &str, input: &Value) -> Result<ToolCall, ToolError> {
    let lower = tool.to_ascii_lowercase();
    if WRITE_TOOLS.contains(&lower.as_str()) {
        let mut paths: Vec<String> =
            PATH_KEYS.iter().filter_map(|k| input.get(*k).and_then(Value::as_str)).map(str::to_string).collect();
        paths.extend(patch_paths(input));
        paths.dedup();
        if paths.is_empty() {
            return Err(ToolError { tool: tool.into(), what: "file path" });
        }
        return Ok(ToolCall::Write { tool: tool.into(), paths });
    }
    if SHELL_TOOLS.contains(&lower.as_str()) {
        let command = match input.get("command").or_else(|| input.get("cmd")) {
            Some(Value::String(s)) => s.clone(),
            // Codex's local shell passes argv: quoted back into one command line, so
            // `["bash", "-lc", "rm -rf .codex"]` keeps its program as one word.
            Some(Value::Array(argv)) => {
                argv.iter().filter_map(Value::as_str).map(shell_quote).collect::<Vec<_>>().join(" ")
            }
            _ => return Err(ToolError { tool: tool.into(), what: "command" }),
        };
        // A shell tool may run in a folder of the model's choosing (Codex `workdir`,
        // Gemini `dir_path`): relative paths are read from there.
        let dir = ["workdir", "dir_path", "directory", "cwd"]
            .iter()
            .find_map(|k| input.get(*k).and_then(Value::as_str))
            .filter(|d| !d.is_empty())
            .map(str::to_string);
        return Ok(ToolCall::Shell { command, dir });
    }
    if SKILL_TOOLS.contains(&lower.as_str()) {
        let name = ["skill", "name", "command"]
            .iter()
            .find_map(|k| input.get(*k).and_then(Value::as_str))
            .ok_or(ToolError { tool: tool.into(), what: "skill name" })?;
        return Ok(ToolCall::Skill { name: skill_name(name) });
    }
    Ok(ToolCall::Other)
}

/// `tool` in Claude Code's MCP naming (`mcp__<server>__<tool>`) when it is one
/// of troupe's gateway tools as `engine` names them — Gemini CLI
/// `mcp_troupe_<tool>`, OpenCode `troupe_<tool>` — so the role policy treats it
/// as the gateway's (which checks every call itself), not as an unknown
/// built-in tool. Other names are returned as they are.
pub fn gateway_tool_name(engine: Engine, tool: &str) -> std::borrow::Cow<'_, str> {
    troupe_core::tools::gateway_tool(troupe_core::tools::McpNaming::of_engine(engine.as_str()), tool)
}

impl ToolCall {
    /// A shell call's command as run from the hook's cwd: prefixed with `cd <dir> &&`
    /// when the call names a folder. `None` for other calls.
    pub fn shell_from_cwd(&self) -> Option<String> {
        match self {
            ToolCall::Shell { command, dir: Some(dir) } => Some(format!("cd {} && {command}", shell_quote(dir))),
            ToolCall::Shell { command, dir: None } => Some(command.clone()),
            _ => None,
        }
    }
}

/// `word` as one shell word: as it is when it has nothing special, else in single quotes.
fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty() && word.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b));
    if plain { word.to_string() } else { format!("'{}'", word.replace('\'', "'\\''")) }
}

/// `/troupe:code-quality-rules args` → `code-quality-rules`.
pub fn skill_name(raw: &str) -> String {
    let first = raw.trim().trim_start_matches('/').split_whitespace().next().unwrap_or("");
    first.rsplit(':').next().unwrap_or(first).to_string()
}

/// The files named in an apply_patch body (`*** Add File: x`, `*** Update File:`,
/// `*** Delete File:`, `*** Move to:`), wherever the engine put the patch text.
fn patch_paths(input: &Value) -> Vec<String> {
    let mut texts = Vec::new();
    match input {
        Value::String(s) => texts.push(s.as_str()),
        Value::Object(map) => texts.extend(map.values().filter_map(Value::as_str)),
        _ => {}
    }
    let mut out = Vec::new();
    for text in texts.into_iter().filter(|t| t.contains("*** Begin Patch")) {
        for line in text.lines() {
            for prefix in ["*** Add File:", "*** Update File:", "*** Delete File:", "*** Move to:"] {
                if let Some(path) = line.strip_prefix(prefix) {
                    out.push(path.trim().to_string());
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn c(tool: &str, input: Value) -> ToolCall {
        classify(Engine::Claude, tool, &input).unwrap()
    }

    #[test]
    fn gateway_tools_take_claudes_mcp_name_on_every_engine() {
        let name = |e, t| gateway_tool_name(e, t).into_owned();
        assert_eq!(name(Engine::Gemini, "mcp_troupe_troupe__report"), "mcp__troupe__troupe__report");
        assert_eq!(name(Engine::Gemini, "mcp_troupe_set_role"), "mcp__troupe__set_role");
        assert_eq!(name(Engine::OpenCode, "troupe_troupe__report"), "mcp__troupe__troupe__report");
        assert_eq!(name(Engine::Claude, "mcp__troupe__troupe__report"), "mcp__troupe__troupe__report");
        // Not the gateway's: as they are.
        for (e, t) in [
            (Engine::Gemini, "mcp_other_tool"),
            (Engine::Gemini, "mcp_troupe_"),
            (Engine::Gemini, "write_file"),
            (Engine::OpenCode, "troupe"),
            (Engine::OpenCode, "write"),
            (Engine::Codex, "troupe_x"),
        ] {
            assert_eq!(name(e, t), t);
        }
    }

    #[test]
    fn every_engines_write_tools() {
        let w = |paths: &[&str], tool: &str| ToolCall::Write {
            tool: tool.into(),
            paths: paths.iter().map(|s| s.to_string()).collect(),
        };
        assert_eq!(c("Write", json!({"file_path":"/p/a.rs","content":""})), w(&["/p/a.rs"], "Write"));
        assert_eq!(c("NotebookEdit", json!({"notebook_path":"n.ipynb"})), w(&["n.ipynb"], "NotebookEdit"));
        assert_eq!(c("replace", json!({"file_path":"a.py"})), w(&["a.py"], "replace"));
        assert_eq!(c("write", json!({"filePath":"a.ts"})), w(&["a.ts"], "write"));
        let patch = "*** Begin Patch\n*** Add File: src/new.rs\n+x\n*** Update File: src/old.rs\n*** Move to: src/moved.rs\n*** End Patch\n";
        assert_eq!(
            c("apply_patch", json!({"command": patch})),
            w(&["src/new.rs", "src/old.rs", "src/moved.rs"], "apply_patch")
        );
        assert_eq!(c("apply_patch", json!(patch)), w(&["src/new.rs", "src/old.rs", "src/moved.rs"], "apply_patch"));
        assert_eq!(
            classify(Engine::Claude, "Write", &json!({"content":"x"})).unwrap_err().to_string(),
            "the Write call's tool_input has no file path"
        );
    }

    #[test]
    fn shells_skills_and_the_rest() {
        assert_eq!(c("Bash", json!({"command":"ls"})), ToolCall::Shell { command: "ls".into(), dir: None });
        assert_eq!(c("exec_command", json!({"cmd":"ls"})), ToolCall::Shell { command: "ls".into(), dir: None });
        let in_dir = c("shell", json!({"command": ["touch", "hooks.json"], "workdir": ".codex"}));
        assert_eq!(in_dir, ToolCall::Shell { command: "touch hooks.json".into(), dir: Some(".codex".into()) });
        assert_eq!(in_dir.shell_from_cwd().unwrap(), "cd .codex && touch hooks.json");
        assert_eq!(
            c("shell", json!({"command": ["bash", "-lc", "echo 'a' > x"]})),
            ToolCall::Shell { command: r#"bash -lc 'echo '\''a'\'' > x'"#.into(), dir: None }
        );
        assert_eq!(
            c("Skill", json!({"skill":"troupe:code-quality-rules"})),
            ToolCall::Skill { name: "code-quality-rules".into() }
        );
        assert_eq!(
            c("skill", json!({"name":"/verification-before-completion"})),
            ToolCall::Skill { name: "verification-before-completion".into() }
        );
        assert_eq!(c("Read", json!({"file_path":"a"})), ToolCall::Other);
        assert_eq!(c("mcp__troupe__report", json!({})), ToolCall::Other);
        assert!(classify(Engine::Claude, "Bash", &json!({})).is_err());
    }
}
