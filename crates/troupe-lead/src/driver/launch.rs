//! Turning a [`SpawnRequest`] into an engine process: engine resolution (seed
//! 002), the `TROUPE_*` environment, and troupe's per-run wiring handed to the
//! engine's adapter in troupe-engine, which alone knows each CLI's flags.
//!
//! Every teammate also gets troupe's hooks and MCP gateway for its run only
//! (see `wiring`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use troupe_core::config::{Config, ENGINE_PHASES};
use troupe_core::spec::Spec;
use troupe_engine::parse::StreamFormat;
use troupe_engine::registry::DEFAULT_ENGINE;
use troupe_engine::{EngineKind, NotInstalled, Registry, RunOptions, UnknownEngine};
use troupe_gate::Engine;

use crate::driver::wiring;
pub use crate::driver::wiring::{Who, cleanup, forget_markers, user_claude_dir};
use crate::machine::SpawnRequest;

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
    pub format: StreamFormat,
    /// The Landlock sandbox it runs in (`None` only with `[sandbox] required = false`
    /// on a kernel that cannot sandbox).
    pub sandbox: Option<troupe_engine::sandbox::Policy>,
    /// What this launch recorded in the project's `.opencode` folder, for the
    /// run to put back at its end (see `opencode_deps`).
    pub opencode_record: Option<super::opencode_deps::Recorded>,
}

/// Engine resolution of seed 002: `--engine` > `spec.yaml engine_override.<phase>` >
/// `[engines.phases].<phase>` > `[engines].default` > `claude`. An id the
/// registry does not know becomes `claude` (the warning is [`preflight`]'s).
pub fn resolve_engine(forced: Option<&str>, spec: &Spec, config: &Config, phase: &str) -> String {
    let id = requested_engine(forced, spec, config, phase);
    match Registry::from_config(&config.engines).lookup(&id) {
        Some(_) => id,
        None => DEFAULT_ENGINE.to_string(),
    }
}

fn requested_engine(forced: Option<&str>, spec: &Spec, config: &Config, phase: &str) -> String {
    forced
        .map(str::to_string)
        .or_else(|| spec.engine_override.get(phase).cloned())
        .or_else(|| config.engines.phases.get(phase).cloned())
        .or_else(|| config.engines.default.clone())
        .unwrap_or_else(|| DEFAULT_ENGINE.to_string())
}

/// Why a run cannot start its teammates.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// `--engine` names no engine.
    #[error(transparent)]
    Unknown(#[from] UnknownEngine),
    /// An engine a phase runs on cannot be found.
    #[error(transparent)]
    NotInstalled(#[from] NotInstalled),
}

impl EngineError {
    /// How to fix it.
    pub fn hint(&self) -> String {
        match self {
            EngineError::Unknown(e) => e.hint(),
            EngineError::NotInstalled(e) => e.hint(),
        }
    }
}

/// Checked before anything is spawned: `forced` (the command line's
/// `--engine`) must name an engine; an unknown id from config or spec.yaml
/// falls back to `claude` with one warning each; every engine the feature's
/// phases run on must be installed.
pub fn preflight(forced: Option<&str>, spec: &Spec, config: &Config, troupe: &Path) -> Result<(), EngineError> {
    let registry = Registry::from_config(&config.engines);
    if let Some(id) = forced {
        registry.requested(id)?;
    }
    let ids: BTreeSet<String> = ENGINE_PHASES.iter().map(|p| requested_engine(forced, spec, config, p)).collect();
    let mut checked = BTreeSet::new();
    for id in &ids {
        let (engine, _fallback) = registry.get(id);
        if engine.kind == EngineKind::Scripted && troupe.exists() {
            continue;
        }
        if checked.insert(engine.id.clone()) {
            engine.installed()?;
        }
    }
    Ok(())
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
    /// A Builder's own worktree (its project folder there), under
    /// `[team] isolation = "worktree"`: it starts and writes there.
    pub workdir: Option<&'a Path>,
}

/// The `TROUPE_*` environment of a teammate. The folder of the `troupe` that
/// started it comes first on its `PATH` (and `TROUPE_BIN` names the binary), so
/// that `troupe ...` in a teammate's shell is always this troupe.
pub fn teammate_env(req: &SpawnRequest, root: &Path, troupe: &Path) -> Vec<(String, String)> {
    let mut env = vec![
        ("TROUPE_AGENT_ID".to_string(), req.id.clone()),
        ("TROUPE_AGENT_NAME".to_string(), req.id.clone()),
        ("TROUPE_ROLE".to_string(), req.role.as_str().to_string()),
        ("TROUPE_FEATURE".to_string(), req.context.feature.clone()),
        ("TROUPE_PROJECT".to_string(), root.display().to_string()),
        ("TROUPE_BIN".to_string(), troupe.display().to_string()),
    ];
    if let Some(dir) = troupe.parent().filter(|d| !d.as_os_str().is_empty()) {
        let rest = std::env::var_os("PATH").unwrap_or_default();
        let path = std::env::join_paths(std::iter::once(dir.to_path_buf()).chain(std::env::split_paths(&rest)))
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_else(|_| format!("{}:{}", dir.display(), rest.to_string_lossy()));
        env.push(("PATH".to_string(), path));
    }
    if let Some(t) = req.tasks.first() {
        env.push(("TROUPE_TASK_ID".into(), t.clone()));
    }
    if let Some(g) = &req.group {
        env.push(("TROUPE_GROUP".into(), g.clone()));
    }
    if req.role == troupe_core::role::Role::Builder {
        env.push(("TROUPE_OWNED_FILES".into(), req.context.write.join("\n")));
    }
    env
}

/// troupe's per-run wiring for `who` on `engine` (hooks, gateway, gate skills),
/// handed to the engine's adapter as data in `opts`: for that run only, never
/// in the user's or the project's engine settings. Returns what goes into the
/// teammate's environment besides: its gateway token for this launch.
pub fn wire(
    engine: &troupe_engine::Engine,
    env: &LaunchEnv<'_>,
    who: wiring::Who<'_>,
    opts: &mut RunOptions,
) -> Result<Vec<(String, String)>, String> {
    wire_events(engine, env, who, opts, &troupe_gate::install::TEAMMATE_EVENTS)
}

/// [`wire`] for an agent a person works with in a `troupe team` pane: the
/// same hooks, gateway and token, plus the submitted prompt's hook, where
/// messages waiting for it arrive (`troupe_gate::delivery`).
pub fn wire_live(
    engine: &troupe_engine::Engine,
    env: &LaunchEnv<'_>,
    who: wiring::Who<'_>,
    opts: &mut RunOptions,
) -> Result<Vec<(String, String)>, String> {
    wire_events(engine, env, who, opts, &troupe_gate::install::LIVE_EVENTS)
}

fn wire_events(
    engine: &troupe_engine::Engine,
    env: &LaunchEnv<'_>,
    who: wiring::Who<'_>,
    opts: &mut RunOptions,
    events: &[troupe_gate::Event],
) -> Result<Vec<(String, String)>, String> {
    match engine.kind {
        EngineKind::Claude => {
            opts.settings = Some(wiring::hooks_with(Engine::Claude, env, events).to_string());
            opts.mcp_config = Some(wiring::claude_mcp(env, who));
            opts.plugin_dirs = vec![wiring::claude_skills(env, who)?];
            opts.engine_home = Some(wiring::claude_config(env, who)?);
        }
        EngineKind::Gemini => opts.engine_home = Some(wiring::gemini_home_with(env, who, events)?),
        EngineKind::Codex => opts.config_overrides = wiring::codex_config_with(env, who, events)?,
        EngineKind::OpenCode => opts.inline_config = Some(wiring::opencode_config(env, who)?),
        EngineKind::Scripted | EngineKind::Custom { .. } => return Ok(Vec::new()),
    }
    let token = wiring::gateway_token(env, who.id)?;
    let mut vars = vec![(troupe_store::token::ENV.to_string(), token)];
    if engine.kind == EngineKind::OpenCode
        && let Some(db) = wiring::opencode_db(env, who, std::env::var_os("OPENCODE_DB").is_some())
    {
        vars.push(("OPENCODE_DB".to_string(), db));
    }
    Ok(vars)
}

/// The command line for `engine` through its adapter. `turn` counts resumes
/// (0 on the first run); `session` is the engine session to resume.
pub fn launch(
    engine: &str,
    req: &SpawnRequest,
    prompt: &str,
    turn: usize,
    session: Option<&str>,
    env: &LaunchEnv<'_>,
) -> Result<Launch, String> {
    let registry = Registry::from_config(&env.config.engines);
    let engine = registry.lookup(engine).unwrap_or_else(|| registry.get(DEFAULT_ENGINE).0);
    let program = match engine.kind {
        EngineKind::Scripted => env.troupe.to_path_buf(),
        _ => engine.installed().map_err(|e| format!("{e}; {}", e.hint()))?,
    };
    if turn == 0 && engine.kind != EngineKind::Scripted {
        wiring::forget_markers(&req.id);
        // The teammate's hooks run in its sandbox, which cannot write troupe's
        // state: the skill cache they read on every tool call is written here.
        troupe_gate::skill_cache::warm(env.root);
    }
    let model = engine.model_for(req.role.tier(), &env.config.engines);
    let mut opts = RunOptions {
        prompt: prompt.to_string(),
        skip_permissions: true,
        model: model.clone(),
        resume_session: session.map(str::to_string),
        cwd: Some(env.workdir.unwrap_or(env.root).to_path_buf()),
        script: Some(env.script.to_path_buf()),
        turn,
        ..RunOptions::default()
    };
    let secret = wire(engine, env, req.into(), &mut opts)?;
    let inv = engine.build(&opts);
    let mut vars = teammate_env(req, env.root, env.troupe);
    if let Some(dir) = env.workdir {
        vars.push((troupe_gate::teammate::env::WORKTREE.to_string(), dir.display().to_string()));
    }
    vars.extend(secret);
    // Its gates show it alive often enough for the hang timeout in force.
    let beat = env.config.team.heartbeat().as_millis().to_string();
    vars.push((troupe_gate::teammate::env::HEARTBEAT_MS.to_string(), beat));
    vars.extend(inv.env);
    let sandbox = super::sandbox::policy(env.root, env.config, &vars)?;
    let mut opencode_record = None;
    if engine.kind == EngineKind::OpenCode && sandbox.is_some() {
        // Its sandbox refuses OpenCode's install into the project's
        // `.opencode`, which OpenCode would otherwise begin at every start.
        opencode_record = super::opencode_deps::record_plugin_package(env.workdir.unwrap_or(env.root))?;
    }
    Ok(Launch {
        engine: engine.id.clone(),
        model: if engine.kind == EngineKind::Scripted { None } else { model },
        program,
        args: inv.args,
        env: vars,
        stdin: inv.stdin,
        format: inv.format,
        sandbox,
        opencode_record,
    })
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
        spec.engine_override.insert("design".into(), "nope".into());
        assert_eq!(resolve_engine(None, &spec, &config, "design"), "claude", "unknown ids fall back");
    }

    #[test]
    fn preflight_refuses_an_unknown_forced_engine_and_a_missing_binary() {
        let spec = Spec::new("f", jiff::Timestamp::UNIX_EPOCH);
        let mut config = Config::default();
        let troupe = Path::new("/nonexistent/troupe");
        let err = preflight(Some("claud"), &spec, &config, troupe).unwrap_err();
        assert_eq!(err.to_string(), "unknown engine 'claud' (did you mean 'claude'?)");
        config.engines.commands.insert("claude".into(), "/nonexistent/claude".into());
        config.engines.phases.insert("design".into(), "nope".into());
        let err = preflight(None, &spec, &config, troupe).unwrap_err();
        assert!(matches!(err, EngineError::NotInstalled(ref e) if e.engine == "claude"), "{err}");
        assert!(err.hint().contains("[engines.commands] claude"), "{}", err.hint());
    }
}
