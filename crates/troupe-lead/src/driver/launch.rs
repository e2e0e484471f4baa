//! Turning a [`SpawnRequest`] into an engine process: engine resolution (seed
//! 002), the command line of each engine, and the `TROUPE_*` environment.
//!
//! Every teammate also gets troupe's hooks and MCP gateway for its run only
//! (see [`wiring`]).

use std::path::{Path, PathBuf};

use troupe_core::config::Config;
use troupe_core::role::{Role, Tier};
use troupe_core::spec::Spec;
use troupe_engine::parse::StreamFormat;
use troupe_gate::Engine;

use crate::driver::wiring;
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
    if turn == 0 && matches!(engine, "claude" | "gemini" | "codex" | "opencode") {
        wiring::forget_markers(&req.id);
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
            l.args.extend(["--settings".into(), wiring::hooks(Engine::Claude, env).to_string()]);
            l.args.extend(["--mcp-config".into(), wiring::claude_mcp(env, req)]);
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
            let home = wiring::gemini_home(env, req)?;
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
            l.args.extend(wiring::codex_config(env, req));
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
            l.env.push(("OPENCODE_CONFIG_CONTENT".into(), wiring::opencode_config(env, req)?));
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

    #[test]
    fn models_by_tier() {
        let config = Config::default();
        assert_eq!(model_for(&config, "claude", Role::Architect).as_deref(), Some("opus"));
        assert_eq!(model_for(&config, "claude", Role::Builder).as_deref(), Some("sonnet"));
        assert_eq!(model_for(&config, "gemini", Role::Builder), None);
    }
}
