//! Building an engine's command line from one options struct (seed 002
//! `BuildArgsOptions`, extended). Options an engine has no flag for are
//! ignored with a debug log line (seed 2.5), and listed in
//! [`Invocation::ignored`] so callers can show them.

use std::path::PathBuf;

use serde::Serialize;
use troupe_core::config::PromptPassing;

use crate::parse::StreamFormat;
use crate::registry::{Engine, EngineKind};

mod interactive;

/// What the caller wants from a run, engine-neutral.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// The prompt.
    pub prompt: String,
    /// Run without asking for permission (`--dangerously-skip-permissions`, `--yolo`, ...).
    pub skip_permissions: bool,
    /// Print one JSON document at the end instead of a stream (Claude, Gemini only).
    pub single_json: bool,
    /// Tools the agent may use without asking.
    pub allowed_tools: Vec<String>,
    /// Tools the agent may not use (`AskUserQuestion` is always added for Claude).
    pub disallowed_tools: Vec<String>,
    /// The model id.
    pub model: Option<String>,
    /// Text appended to the engine's system prompt.
    pub append_system_prompt: Option<String>,
    /// Continue this engine session instead of starting a new one.
    pub resume_session: Option<String>,
    /// Claude `--settings`: a file or inline JSON with hooks for this run.
    pub settings: Option<String>,
    /// MCP servers as `{"mcpServers": {...}}` JSON text (Claude `--mcp-config`,
    /// Codex `-c mcp_servers...` overrides).
    pub mcp_config: Option<String>,
    /// Turn limit.
    pub max_turns: Option<u32>,
    /// The working directory (OpenCode is told it with `--dir`).
    pub cwd: Option<PathBuf>,
    /// Gemini CLI: a `~/.gemini` of this run's own (`GEMINI_CLI_HOME`), holding
    /// the user's settings plus troupe's hooks and gateway. Claude Code: a
    /// config folder of this run's own (`CLAUDE_CONFIG_DIR`).
    pub engine_home: Option<PathBuf>,
    /// Codex: `key=value` config overrides (`-c`), e.g. troupe's hooks and
    /// gateway for this run; hooks from `-c` also need `--dangerously-bypass-hook-trust`.
    pub config_overrides: Vec<String>,
    /// OpenCode: a config document merged over the user's (`OPENCODE_CONFIG_CONTENT`).
    pub inline_config: Option<String>,
    /// Claude Code: plugin folders loaded for this run only (`--plugin-dir`),
    /// e.g. the project's gate skills.
    pub plugin_dirs: Vec<PathBuf>,
    /// The scripted engine: its script file.
    pub script: Option<PathBuf>,
    /// How many times this teammate was resumed (0 on its first run; the
    /// scripted engine plays that turn of its script).
    pub turn: usize,
}

/// A ready-to-run command line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Invocation {
    /// The executable.
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Text to write to standard input, then close it.
    pub stdin: Option<String>,
    /// The stream format of its standard output.
    #[serde(skip)]
    pub format: StreamFormat,
    /// Options this engine has no way to express, which were left out.
    pub ignored: Vec<&'static str>,
    /// Environment the engine reads its per-run configuration from.
    pub env: Vec<(String, String)>,
}

impl Invocation {
    fn new(program: &str, format: StreamFormat) -> Self {
        Invocation {
            program: program.to_string(),
            args: Vec::new(),
            stdin: None,
            format,
            ignored: Vec::new(),
            env: Vec::new(),
        }
    }

    fn arg(&mut self, a: impl Into<String>) -> &mut Self {
        self.args.push(a.into());
        self
    }

    fn ignore(&mut self, engine: &str, option: &'static str) {
        tracing::debug!(engine, option, "option not supported by this engine; ignored");
        self.ignored.push(option);
    }
}

impl Engine {
    /// The command line for `opts`.
    pub fn build(&self, opts: &RunOptions) -> Invocation {
        match &self.kind {
            EngineKind::Claude => claude(self, opts),
            EngineKind::Gemini => gemini(self, opts),
            EngineKind::Codex => codex(self, opts),
            EngineKind::OpenCode => opencode(self, opts),
            EngineKind::Scripted => scripted(self, opts),
            EngineKind::Custom { args, prompt } => custom(self, args, *prompt, opts),
        }
    }
}

fn claude(e: &Engine, o: &RunOptions) -> Invocation {
    let mut inv = Invocation::new(&e.command, e.format);
    // The prompt goes right after -p: variadic flags such as --mcp-config would
    // swallow a trailing positional. A prompt that looks like a flag goes on stdin.
    inv.arg("-p");
    if o.prompt.starts_with('-') {
        inv.stdin = Some(o.prompt.clone());
    } else {
        inv.arg(o.prompt.clone());
    }
    inv.arg("--verbose").arg("--output-format").arg(if o.single_json { "json" } else { "stream-json" });
    if o.skip_permissions {
        inv.arg("--dangerously-skip-permissions");
    }
    let mut disallowed = vec!["AskUserQuestion".to_string()];
    disallowed.extend(o.disallowed_tools.iter().filter(|t| *t != "AskUserQuestion").cloned());
    inv.arg(format!("--disallowedTools={}", disallowed.join(",")));
    if !o.allowed_tools.is_empty() {
        inv.arg(format!("--allowedTools={}", o.allowed_tools.join(",")));
    }
    if let Some(m) = &o.model {
        inv.arg("--model").arg(m.clone());
    }
    if let Some(s) = &o.append_system_prompt {
        inv.arg("--append-system-prompt").arg(s.clone());
    }
    if let Some(s) = &o.resume_session {
        inv.arg("--resume").arg(s.clone());
    }
    claude_wiring(&mut inv, o);
    if let Some(n) = o.max_turns {
        inv.arg("--max-turns").arg(n.to_string());
    }
    inv
}

/// troupe's per-run wiring of Claude Code, headless or interactive: its
/// settings (hooks), the gateway, its config folder and the gate skills.
fn claude_wiring(inv: &mut Invocation, o: &RunOptions) {
    if let Some(s) = &o.settings {
        inv.arg("--settings").arg(s.clone());
        // troupe's settings only: no user, project or local settings file,
        // which a teammate could have written (`disableAllHooks`) to switch
        // the next teammate's hooks off.
        inv.arg("--setting-sources=");
    }
    if let Some(m) = &o.mcp_config {
        inv.arg("--mcp-config").arg(m.clone());
        // Claude Code connects MCP servers in the background by default, so on
        // a loaded machine its first turn can come before troupe's gateway is
        // connected: the tools the assignment names are then "still
        // connecting". Blocking makes them present from the first turn.
        inv.env.push(("MCP_CONNECTION_NONBLOCKING".into(), "0".into()));
    }
    if let Some(h) = &o.engine_home {
        inv.env.push(("CLAUDE_CONFIG_DIR".into(), h.to_string_lossy().into_owned()));
    }
    for d in &o.plugin_dirs {
        inv.arg("--plugin-dir").arg(d.to_string_lossy().into_owned());
    }
}

fn gemini(e: &Engine, o: &RunOptions) -> Invocation {
    let mut inv = Invocation::new(&e.command, e.format);
    if let Some(m) = &o.model {
        inv.arg("-m").arg(m.clone());
    }
    // `--prompt=` keeps a prompt that starts with '-' from being read as a flag.
    inv.arg(format!("--prompt={}", o.prompt));
    inv.arg("--output-format").arg(if o.single_json { "json" } else { "stream-json" });
    if o.skip_permissions {
        // --skip-trust: yolo is refused in a folder Gemini has not been told to trust.
        inv.arg("--yolo").arg("--skip-trust");
    }
    if let Some(s) = &o.resume_session {
        inv.arg("--resume").arg(s.clone());
    }
    if let Some(h) = &o.engine_home {
        inv.env.push(("GEMINI_CLI_HOME".into(), h.to_string_lossy().into_owned()));
    }
    ignore_unsupported(
        &mut inv,
        "gemini",
        o,
        &["allowed_tools", "disallowed_tools", "append_system_prompt", "settings", "mcp_config", "max_turns"],
    );
    inv
}

/// What every Codex session of troupe's gets, headless or interactive:
/// permissions, troupe's `-c` overrides (hooks and gateway) and the model.
fn codex_wiring(inv: &mut Invocation, o: &RunOptions) {
    if o.skip_permissions {
        inv.arg("--dangerously-bypass-approvals-and-sandbox");
    }
    if !o.config_overrides.is_empty() {
        // Hooks from `-c` are untrusted config: without this Codex skips them silently.
        inv.arg("--dangerously-bypass-hook-trust");
        for c in &o.config_overrides {
            inv.arg("-c").arg(c.clone());
        }
    }
    if let Some(m) = &o.model {
        inv.arg("-m").arg(m.clone());
    }
}

fn codex(e: &Engine, o: &RunOptions) -> Invocation {
    let mut inv = Invocation::new(&e.command, e.format);
    inv.arg("exec");
    if o.resume_session.is_some() {
        inv.arg("resume");
    }
    inv.arg("--json").arg("--skip-git-repo-check");
    codex_wiring(&mut inv, o);
    if let Some(text) = &o.mcp_config {
        match codex_mcp_overrides(text) {
            Some(overrides) => {
                for c in overrides {
                    inv.arg("-c").arg(c);
                }
            }
            None => inv.ignore("codex", "mcp_config"),
        }
    }
    ignore_unsupported(
        &mut inv,
        "codex",
        o,
        &["allowed_tools", "disallowed_tools", "append_system_prompt", "settings", "max_turns", "single_json"],
    );
    if let Some(s) = &o.resume_session {
        inv.arg(s.clone());
    }
    inv.arg("--").arg(o.prompt.clone());
    inv
}

/// `{"mcpServers": {name: {command, args, env}}}` as Codex `-c` overrides.
fn codex_mcp_overrides(text: &str) -> Option<Vec<String>> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    let servers = v.get("mcpServers")?.as_object()?;
    let mut out = Vec::new();
    for (name, s) in servers {
        if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
            return None;
        }
        let command = s.get("command")?.as_str()?;
        out.push(format!("mcp_servers.{name}.command={}", toml_str(command)));
        if let Some(args) = s.get("args").and_then(|a| a.as_array()) {
            let list: Vec<String> = args.iter().filter_map(|a| a.as_str()).map(toml_str).collect();
            out.push(format!("mcp_servers.{name}.args=[{}]", list.join(",")));
        }
        if let Some(env) = s.get("env").and_then(|e| e.as_object()) {
            let pairs: Vec<String> =
                env.iter().filter_map(|(k, v)| Some(format!("{}={}", toml_str(k), toml_str(v.as_str()?)))).collect();
            out.push(format!("mcp_servers.{name}.env={{{}}}", pairs.join(",")));
        }
    }
    Some(out)
}

/// A TOML basic string (JSON string escaping is valid TOML).
fn toml_str(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

fn opencode(e: &Engine, o: &RunOptions) -> Invocation {
    let mut inv = Invocation::new(&e.command, e.format);
    inv.arg("run").arg("--format").arg("json");
    if let Some(d) = &o.cwd {
        // OpenCode does not take its project directory from the process cwd alone.
        inv.arg("--dir").arg(d.to_string_lossy().into_owned());
    }
    if o.skip_permissions {
        inv.arg("--auto");
    }
    if let Some(m) = &o.model {
        inv.arg("-m").arg(m.clone());
    }
    if let Some(s) = &o.resume_session {
        inv.arg("-s").arg(s.clone());
    }
    if let Some(c) = &o.inline_config {
        inv.env.push(("OPENCODE_CONFIG_CONTENT".into(), c.clone()));
    }
    ignore_unsupported(
        &mut inv,
        "opencode",
        o,
        &[
            "allowed_tools",
            "disallowed_tools",
            "append_system_prompt",
            "settings",
            "mcp_config",
            "max_turns",
            "single_json",
        ],
    );
    inv.arg("--").arg(o.prompt.clone());
    inv
}

/// troupe's own scripted teammate (`troupe scripted-agent`): it plays turn
/// `turn` of its script and reads no prompt.
fn scripted(e: &Engine, o: &RunOptions) -> Invocation {
    let mut inv = Invocation::new(&e.command, e.format);
    inv.arg("scripted-agent");
    if let Some(s) = &o.script {
        inv.arg("--script").arg(s.to_string_lossy().into_owned());
    }
    inv.arg("--turn").arg(o.turn.to_string());
    ignore_unsupported(
        &mut inv,
        "scripted",
        o,
        &[
            "allowed_tools",
            "disallowed_tools",
            "model",
            "append_system_prompt",
            "resume_session",
            "settings",
            "mcp_config",
            "max_turns",
            "single_json",
        ],
    );
    inv
}

fn custom(e: &Engine, fixed: &[String], passing: PromptPassing, o: &RunOptions) -> Invocation {
    let mut inv = Invocation::new(&e.command, e.format);
    for a in fixed {
        inv.arg(a.clone());
    }
    match passing {
        PromptPassing::Argument => {
            inv.arg(o.prompt.clone());
        }
        PromptPassing::Stdin => inv.stdin = Some(o.prompt.clone()),
    }
    ignore_unsupported(
        &mut inv,
        &e.id,
        o,
        &[
            "skip_permissions",
            "allowed_tools",
            "disallowed_tools",
            "model",
            "append_system_prompt",
            "resume_session",
            "settings",
            "mcp_config",
            "max_turns",
            "single_json",
        ],
    );
    inv
}

/// Records each of `names` that `o` actually sets as ignored.
fn ignore_unsupported(inv: &mut Invocation, engine: &str, o: &RunOptions, names: &[&'static str]) {
    for &name in names {
        let set = match name {
            "skip_permissions" => o.skip_permissions,
            "single_json" => o.single_json,
            "allowed_tools" => !o.allowed_tools.is_empty(),
            "disallowed_tools" => !o.disallowed_tools.is_empty(),
            "model" => o.model.is_some(),
            "append_system_prompt" => o.append_system_prompt.is_some(),
            "resume_session" => o.resume_session.is_some(),
            "settings" => o.settings.is_some(),
            "mcp_config" => o.mcp_config.is_some(),
            "max_turns" => o.max_turns.is_some(),
            _ => false,
        };
        if set {
            inv.ignore(engine, name);
        }
    }
}
