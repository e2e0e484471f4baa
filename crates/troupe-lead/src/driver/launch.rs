//! Turning a [`SpawnRequest`] into an engine process: engine resolution (seed
//! 002), the command line of each engine, and the `TROUPE_*` environment.
//!
//! Every teammate also gets troupe's hooks (`troupe hook <engine> <event>`) for
//! its run only, never by editing the user's or the project's engine settings:
//! Claude Code through `--settings`, Gemini CLI through a `~/.gemini` of its
//! own (`GEMINI_CLI_HOME`), Codex through `-c hooks.*`
//! config overrides, OpenCode through troupe's bridge plugin added with
//! `OPENCODE_CONFIG_CONTENT`. The per-run files live under
//! `.troupe/state/hooks/<agent>/`.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use troupe_core::config::Config;
use troupe_core::layout::Layout;
use troupe_core::role::{Role, Tier};
use troupe_core::spec::Spec;
use troupe_engine::parse::StreamFormat;
use troupe_gate::Engine;
use troupe_gate::install::InstallOptions;

use crate::machine::SpawnRequest;

/// How an engine's stdout is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// troupe's own normalised events, one JSON object per line (the scripted engine).
    Troupe,
    /// An agent CLI's stream, normalised by troupe-engine.
    Stream(StreamFormat),
}

/// A process to start for a teammate.
#[derive(Debug, Clone)]
pub struct Launch {
    /// The engine id (`scripted`, `claude`, ...).
    pub engine: String,
    /// The model, when one was chosen.
    pub model: Option<String>,
    /// The executable.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Extra environment.
    pub env: Vec<(String, String)>,
    /// Text for standard input, if the engine reads its prompt there.
    pub stdin: Option<String>,
    /// How to read its output.
    pub format: Format,
}

/// Engine resolution of seed 002: `--engine` > `spec.yaml engine_override.<phase>` >
/// `[engines.phases].<phase>` > `[engines].default` > `claude`.
pub fn resolve_engine(forced: Option<&str>, spec: &Spec, config: &Config, phase: &str) -> String {
    forced
        .map(str::to_string)
        .or_else(|| spec.engine_override.get(phase).cloned())
        .or_else(|| config.engines.phases.get(phase).cloned())
        .or_else(|| config.engines.default.clone())
        .unwrap_or_else(|| "claude".to_string())
}

/// The model for `role` on `engine`: `[engines.models.<engine>]` t2/t3, with
/// Claude's defaults (opus for T2, sonnet for T3, seed 000 Spec 1.7–1.8).
pub fn model_for(config: &Config, engine: &str, role: Role) -> Option<String> {
    let configured = config.engines.models.get(engine).and_then(|m| match role.tier() {
        Tier::T2 => m.t2.clone(),
        _ => m.t3.clone(),
    });
    configured.or_else(|| match (engine, role.tier()) {
        ("claude", Tier::T2) => Some("opus".into()),
        ("claude", _) => Some("sonnet".into()),
        _ => None,
    })
}

/// Everything the launcher needs besides the request.
#[derive(Debug, Clone)]
pub struct LaunchEnv<'a> {
    /// The project root.
    pub root: &'a Path,
    /// The `troupe` executable (for the scripted engine, hooks and the gateway).
    pub troupe: &'a Path,
    /// The scripted engine's script.
    pub script: &'a Path,
    /// The project's config.
    pub config: &'a Config,
}

/// The `TROUPE_*` environment of a teammate.
pub fn teammate_env(req: &SpawnRequest, root: &Path) -> Vec<(String, String)> {
    let mut env = vec![
        ("TROUPE_AGENT_ID".to_string(), req.id.clone()),
        ("TROUPE_AGENT_NAME".to_string(), req.id.clone()),
        ("TROUPE_ROLE".to_string(), req.role.as_str().to_string()),
        ("TROUPE_FEATURE".to_string(), req.context.feature.clone()),
        ("TROUPE_PROJECT".to_string(), root.display().to_string()),
    ];
    if let Some(t) = req.tasks.first() {
        env.push(("TROUPE_TASK_ID".into(), t.clone()));
    }
    if let Some(g) = &req.group {
        env.push(("TROUPE_GROUP".into(), g.clone()));
    }
    if req.role == Role::Builder {
        env.push(("TROUPE_OWNED_FILES".into(), req.context.write.join("\n")));
    }
    env
}

/// The command line for `engine`. `turn` counts resumes (0 on the first run);
/// `session` is the engine session to resume.
pub fn launch(
    engine: &str,
    req: &SpawnRequest,
    prompt: &str,
    turn: usize,
    session: Option<&str>,
    env: &LaunchEnv<'_>,
) -> Result<Launch, String> {
    if turn == 0 {
        forget_markers(&req.id);
    }
    let model = model_for(env.config, engine, req.role);
    let command =
        |name: &str| PathBuf::from(env.config.engines.commands.get(name).cloned().unwrap_or_else(|| name.to_string()));
    let mut l = Launch {
        engine: engine.to_string(),
        model: model.clone(),
        program: PathBuf::new(),
        args: Vec::new(),
        env: teammate_env(req, env.root),
        stdin: None,
        format: Format::Troupe,
    };
    match engine {
        "scripted" => {
            l.program = env.troupe.to_path_buf();
            l.args = vec![
                "scripted-agent".into(),
                "--script".into(),
                env.script.display().to_string(),
                "--turn".into(),
                turn.to_string(),
            ];
        }
        "claude" => {
            l.program = command("claude");
            l.format = Format::Stream(StreamFormat::Claude);
            l.args =
                vec!["-p".into(), prompt.into(), "--output-format".into(), "stream-json".into(), "--verbose".into()];
            l.args.push("--dangerously-skip-permissions".into());
            l.args.push("--disallowedTools=AskUserQuestion".into());
            if let Some(m) = &model {
                l.args.extend(["--model".into(), m.clone()]);
            }
            if let Some(s) = session {
                l.args.extend(["--resume".into(), s.to_string()]);
            }
            l.args.extend(["--settings".into(), hooks(Engine::Claude, env).to_string()]);
            l.args.extend(["--mcp-config".into(), mcp_config(env.troupe, env.root, req)]);
        }
        "gemini" => {
            l.program = command("gemini");
            l.format = Format::Stream(StreamFormat::Gemini);
            if let Some(m) = &model {
                l.args.extend(["-m".into(), m.clone()]);
            }
            if let Some(s) = session {
                l.args.extend(["-r".into(), s.to_string()]);
            }
            l.args.extend([
                "-p".into(),
                prompt.into(),
                "--output-format".into(),
                "stream-json".into(),
                "--yolo".into(),
                "--skip-trust".into(),
            ]);
            let home = gemini_home(env, &req.id)?;
            l.env.push(("GEMINI_CLI_HOME".into(), home.display().to_string()));
        }
        "codex" => {
            l.program = command("codex");
            l.format = Format::Stream(StreamFormat::Codex);
            l.args = vec!["exec".into()];
            if let Some(s) = session {
                l.args.extend(["resume".into(), s.to_string()]);
            }
            l.args.extend([
                "--json".into(),
                "--skip-git-repo-check".into(),
                "--dangerously-bypass-approvals-and-sandbox".into(),
                // Hooks from `-c` are untrusted config: without this Codex skips them silently.
                "--dangerously-bypass-hook-trust".into(),
            ]);
            l.args.extend(codex_hooks(env));
            if let Some(m) = &model {
                l.args.extend(["-m".into(), m.clone()]);
            }
            l.args.push(prompt.into());
        }
        "opencode" => {
            l.program = command("opencode");
            l.format = Format::Stream(StreamFormat::OpenCode);
            l.args = vec!["run".into(), "--format".into(), "json".into()];
            if let Some(s) = session {
                l.args.extend(["-s".into(), s.to_string()]);
            }
            l.args.push(prompt.into());
            let plugin = opencode_plugin(env, &req.id)?;
            let inherited = std::env::var("OPENCODE_CONFIG_CONTENT").ok();
            l.env.push(("OPENCODE_CONFIG_CONTENT".into(), opencode_config(&plugin, inherited.as_deref())));
        }
        custom => {
            let Some(c) = env.config.engines.custom.get(custom) else {
                return Err(format!(
                    "unknown engine '{custom}' (expected scripted, claude, gemini, codex, opencode, or one of [engines.custom] in .troupe/config.toml)"
                ));
            };
            l.program = PathBuf::from(&c.command);
            l.args = c.args.clone();
            l.format =
                StreamFormat::from_name(&c.format).map(Format::Stream).unwrap_or(Format::Stream(StreamFormat::Text));
            match c.prompt {
                troupe_core::config::PromptPassing::Argument => l.args.push(prompt.into()),
                troupe_core::config::PromptPassing::Stdin => l.stdin = Some(prompt.into()),
            }
        }
    }
    Ok(l)
}

/// A new teammate starts with no session markers: its hooks key them by agent
/// id, and an id from an earlier run of the project must not lend it the skills
/// that run invoked. Best effort: without a state folder the hooks refuse anyway.
fn forget_markers(id: &str) {
    use troupe_gate::markers::{MarkerStore, default_dir};
    if let Ok(store) = default_dir(|k| std::env::var(k).ok()).and_then(MarkerStore::open) {
        let _ = store.clear(id);
    }
}

/// troupe's hooks for one teammate run on `engine` (`{"hooks": …}`).
fn hooks(engine: Engine, env: &LaunchEnv<'_>) -> Value {
    let options = InstallOptions {
        troupe: env.troupe.to_path_buf(),
        gates: env.config.gates.clone(),
        commands: Default::default(),
    };
    troupe_gate::install::teammate_hooks(engine, &options).unwrap_or_else(|| json!({}))
}

/// The folder of a teammate's per-run hook files.
fn hooks_dir(env: &LaunchEnv<'_>, id: &str) -> Result<PathBuf, String> {
    let dir = Layout::new(env.root).state_dir().join("hooks").join(id);
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    Ok(dir)
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// A Gemini CLI home for this run (`GEMINI_CLI_HOME`, which moves only Gemini's
/// `~/.gemini`): the user's `settings.json` with troupe's hooks added, and every
/// other entry of the user's `~/.gemini` (credentials, trusted folders, session
/// history) linked, so the run sees the user's setup and its sessions can be
/// resumed. User-level hooks run in untrusted folders too, where a project's
/// `.gemini/settings.json` hooks do not; Gemini's system settings file cannot
/// be used instead, as it is skipped unless root owns it and every folder above it.
fn gemini_home(env: &LaunchEnv<'_>, id: &str) -> Result<PathBuf, String> {
    let home = hooks_dir(env, id)?.join("gemini-home");
    let user = std::env::var_os("GEMINI_CLI_HOME")
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var_os("HOME"))
        .map(|h| PathBuf::from(h).join(".gemini"));
    fill_gemini_home(&home, user.as_deref(), &hooks(Engine::Gemini, env))?;
    Ok(home)
}

/// Make `home/.gemini` from the user's Gemini folder `user` and troupe's `ours` hooks.
fn fill_gemini_home(home: &Path, user: Option<&Path>, ours: &Value) -> Result<(), String> {
    let dir = home.join(".gemini");
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let mut settings = json!({});
    if let Some(user) = user.filter(|u| u.is_dir()) {
        for entry in std::fs::read_dir(user).map_err(|e| format!("cannot read {}: {e}", user.display()))?.flatten() {
            let link = dir.join(entry.file_name());
            if entry.file_name() == "settings.json" || link.symlink_metadata().is_ok() {
                continue;
            }
            std::os::unix::fs::symlink(entry.path(), &link)
                .map_err(|e| format!("cannot link {}: {e}", link.display()))?;
        }
        let file = user.join("settings.json");
        if let Ok(text) = std::fs::read_to_string(&file) {
            settings = serde_json::from_str::<Value>(&text).ok().filter(Value::is_object).ok_or_else(|| {
                format!("{} is not a JSON object; fix it so troupe can add its hooks", file.display())
            })?;
        }
    }
    let groups = settings.as_object_mut().expect("an object").entry("hooks").or_insert_with(|| json!({}));
    if !groups.is_object() {
        *groups = json!({});
    }
    for (event, list) in ours["hooks"].as_object().into_iter().flatten() {
        let slot = groups.as_object_mut().expect("an object").entry(event.clone()).or_insert_with(|| json!([]));
        match (slot.as_array_mut(), list.as_array()) {
            (Some(have), Some(add)) => have.extend(add.iter().cloned()),
            _ => *slot = list.clone(),
        }
    }
    write(&dir.join("settings.json"), &settings.to_string())
}

/// Codex `-c hooks.<Event>=<inline TOML>` overrides, one per event.
fn codex_hooks(env: &LaunchEnv<'_>) -> Vec<String> {
    let ours = hooks(Engine::Codex, env);
    let mut args = Vec::new();
    for (event, list) in ours["hooks"].as_object().into_iter().flatten() {
        args.extend(["-c".to_string(), format!("hooks.{event}={}", inline_toml(list))]);
    }
    args
}

/// A JSON value as TOML inline syntax (JSON strings are valid TOML basic strings).
fn inline_toml(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let fields: Vec<String> =
                m.iter().map(|(k, v)| format!("{}={}", Value::from(k.as_str()), inline_toml(v))).collect();
            format!("{{{}}}", fields.join(","))
        }
        Value::Array(a) => format!("[{}]", a.iter().map(inline_toml).collect::<Vec<_>>().join(",")),
        Value::Null => "\"\"".into(),
        other => other.to_string(),
    }
}

/// troupe's OpenCode bridge plugin, written for this run.
fn opencode_plugin(env: &LaunchEnv<'_>, id: &str) -> Result<PathBuf, String> {
    let options = InstallOptions {
        troupe: env.troupe.to_path_buf(),
        gates: env.config.gates.clone(),
        commands: Default::default(),
    };
    let path = hooks_dir(env, id)?.join("troupe-gates.js");
    write(&path, &troupe_gate::install::opencode_plugin(&options))?;
    Ok(path)
}

/// `OPENCODE_CONFIG_CONTENT` with the plugin added: OpenCode merges it over the
/// user's and the project's config, adding to their `plugin` lists. An inherited
/// value keeps everything it says.
fn opencode_config(plugin: &Path, inherited: Option<&str>) -> String {
    let mut config = inherited
        .and_then(|t| serde_json::from_str::<Value>(t).ok())
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({}));
    let url = format!("file://{}", plugin.display());
    let list = config.as_object_mut().expect("an object").entry("plugin").or_insert_with(|| json!([]));
    match list.as_array_mut() {
        Some(l) => l.push(json!(url)),
        None => *list = json!([url]),
    }
    config.to_string()
}

/// The MCP config of a teammate: troupe's gateway for its role and identity
/// (`troupe mcp serve --role R --agent ID`), as inline JSON.
pub fn mcp_config(troupe: &Path, root: &Path, req: &SpawnRequest) -> String {
    serde_json::json!({ "mcpServers": { "troupe": {
        "command": troupe.display().to_string(),
        "args": ["mcp", "serve", "-C", root.display().to_string(), "--role", req.role.as_str(), "--agent", req.id],
    } } })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolution_order() {
        let now = jiff::Timestamp::UNIX_EPOCH;
        let mut spec = Spec::new("f", now);
        let mut config = Config::default();
        assert_eq!(resolve_engine(None, &spec, &config, "design"), "claude");
        config.engines.default = Some("codex".into());
        assert_eq!(resolve_engine(None, &spec, &config, "design"), "codex");
        config.engines.phases.insert("design".into(), "gemini".into());
        assert_eq!(resolve_engine(None, &spec, &config, "design"), "gemini");
        assert_eq!(resolve_engine(None, &spec, &config, "impl"), "codex");
        spec.engine_override.insert("design".into(), "opencode".into());
        assert_eq!(resolve_engine(None, &spec, &config, "design"), "opencode");
        assert_eq!(resolve_engine(Some("scripted"), &spec, &config, "design"), "scripted");
    }

    fn env_in<'a>(root: &'a Path, config: &'a Config) -> LaunchEnv<'a> {
        LaunchEnv { root, troupe: Path::new("/bin/troupe"), script: Path::new("s.yaml"), config }
    }

    #[test]
    fn claude_and_codex_get_every_teammate_hook_on_their_command_line() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config::default();
        let env = env_in(dir.path(), &config);
        let claude = hooks(Engine::Claude, &env);
        for event in ["SessionStart", "PreToolUse", "PostToolUse", "Stop"] {
            let command = claude["hooks"][event][0]["hooks"][0]["command"].as_str().unwrap();
            assert_eq!(command, format!("/bin/troupe hook claude {event}"));
        }
        let args = codex_hooks(&env);
        let overrides: Vec<&String> = args.iter().skip(1).step_by(2).collect();
        assert_eq!(overrides.len(), 4, "{args:?}");
        // Each override is `key=<TOML>` the way Codex's `-c` parses it.
        for o in overrides {
            let doc: toml::Table = toml::from_str(o).unwrap_or_else(|e| panic!("{o}: {e}"));
            let hook = &doc["hooks"].as_table().unwrap().values().next().unwrap()[0]["hooks"][0];
            assert!(hook["command"].as_str().unwrap().starts_with("/bin/troupe hook codex "), "{o}");
        }
        assert!(args.iter().any(|a| a == "hooks.Stop=[{\"hooks\"=[{\"type\"=\"command\",\"command\"=\"/bin/troupe hook codex Stop\",\"timeout\"=630}]}]"), "{args:?}");
    }

    #[test]
    fn a_gemini_home_keeps_the_users_settings_and_files() {
        let dir = tempfile::tempdir().unwrap();
        let user = dir.path().join("user/.gemini");
        std::fs::create_dir_all(&user).unwrap();
        std::fs::write(user.join("oauth_creds.json"), "{}").unwrap();
        let mine = json!({"security": {"auth": {"selectedType": "gemini-api-key"}},
            "hooks": {"BeforeTool": [{"matcher": "x", "hooks": [{"type": "command", "command": "mine"}]}]}});
        std::fs::write(user.join("settings.json"), mine.to_string()).unwrap();
        let config = Config::default();
        let env = env_in(dir.path(), &config);
        let home = dir.path().join("run");
        fill_gemini_home(&home, Some(&user), &hooks(Engine::Gemini, &env)).unwrap();
        let written: Value =
            serde_json::from_str(&std::fs::read_to_string(home.join(".gemini/settings.json")).unwrap()).unwrap();
        assert_eq!(written["security"], mine["security"]);
        let before: Vec<&str> = written["hooks"]["BeforeTool"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["hooks"][0]["command"].as_str().unwrap())
            .collect();
        assert_eq!(before, ["mine", "/bin/troupe hook gemini BeforeTool"]);
        assert!(written["hooks"]["AfterAgent"].is_array());
        assert!(home.join(".gemini/oauth_creds.json").symlink_metadata().unwrap().file_type().is_symlink());
        // Run again (a resume): the same result, links kept.
        fill_gemini_home(&home, Some(&user), &hooks(Engine::Gemini, &env)).unwrap();
        let again: Value =
            serde_json::from_str(&std::fs::read_to_string(home.join(".gemini/settings.json")).unwrap()).unwrap();
        assert_eq!(again, written);
        // A broken user settings file is named, not overwritten.
        std::fs::write(user.join("settings.json"), "{oops").unwrap();
        let err = fill_gemini_home(&home, Some(&user), &json!({})).unwrap_err();
        assert!(err.contains("settings.json is not a JSON object"), "{err}");
    }

    #[test]
    fn opencode_config_adds_the_plugin_to_what_it_inherits() {
        let plugin = Path::new("/p/troupe-gates.js");
        let fresh: Value = serde_json::from_str(&opencode_config(plugin, None)).unwrap();
        assert_eq!(fresh, json!({"plugin": ["file:///p/troupe-gates.js"]}));
        let inherited = r#"{"model": "m/x", "plugin": ["theirs"]}"#;
        let merged: Value = serde_json::from_str(&opencode_config(plugin, Some(inherited))).unwrap();
        assert_eq!(merged, json!({"model": "m/x", "plugin": ["theirs", "file:///p/troupe-gates.js"]}));
    }

    #[test]
    fn models_by_tier() {
        let config = Config::default();
        assert_eq!(model_for(&config, "claude", Role::Architect).as_deref(), Some("opus"));
        assert_eq!(model_for(&config, "claude", Role::Builder).as_deref(), Some("sonnet"));
        assert_eq!(model_for(&config, "gemini", Role::Builder), None);
    }
}
