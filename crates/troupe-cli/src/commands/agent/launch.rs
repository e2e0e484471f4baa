//! Everything between a command's arguments and a spawned agent, shared by
//! `agent run`, `ask`, `chat`, `workflow` and `adhoc`: the role, engine and
//! model resolved, the prompt rendered, troupe's per-run hooks, gateway and
//! `TROUPE_*` environment wired, the sandbox built, the registry sink opened.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use troupe_core::liveness::QuietLimits;
use troupe_core::role::{Role, TeamRole};
use troupe_engine::resolve::resolve;
use troupe_engine::supervisor::{AgentSink, Grace, NoSink, SpawnSpec, StoreSink};
use troupe_engine::{Registry, RunOptions};
use troupe_lead::driver::launch::{LaunchEnv, Who, forget_markers, wire};
use troupe_project::Project;
use troupe_project::specs::{SpecFileError, Specs};

use crate::error::{CliError, CliResult};
use crate::output::note;

/// What to start.
#[derive(Debug, Default)]
pub(crate) struct Request {
    /// The role, from [`super::role::resolve`].
    pub role: Option<TeamRole>,
    /// `--engine`.
    pub engine: Option<String>,
    /// `--model`.
    pub model: Option<String>,
    /// `--feature`.
    pub feature: Option<String>,
    /// `--task`.
    pub task: Option<String>,
    /// `--phase` (checked by the caller).
    pub phase: Option<String>,
    /// `--id` (checked by the caller).
    pub id: Option<String>,
    /// `--max-turns`.
    pub max_turns: Option<u32>,
    /// Claude `--settings`.
    pub settings: Option<String>,
    /// The MCP config's text.
    pub mcp_config: Option<String>,
    /// Text appended to the system prompt (the workflow's failure context goes here).
    pub append_system_prompt: Option<String>,
    /// An engine session to continue.
    pub resume: Option<String>,
    /// `--hang-timeout` in seconds.
    pub hang_timeout: Option<u64>,
    /// Run without troupe's wiring.
    pub bare: bool,
    /// Send the prompt as it is, without the role's instructions around it,
    /// wiring kept (a chat turn continuing an engine session that already
    /// has them).
    pub raw_prompt: bool,
    /// The caller's prompt (the assignment).
    pub prompt: String,
    /// Extra `TROUPE_*`-style variables for the agent and its hooks.
    pub env: Vec<(String, String)>,
    /// Delegate mode (seed 003 B5, `--delegate-mode`; `team start --coordinator`
    /// sets it): the delegate instructions in its prompt, and its writes,
    /// commands and file locks refused by the hooks and the gateway.
    pub delegate: bool,
}

/// A spawn ready to go.
pub(crate) struct Prepared {
    /// What the supervisor starts.
    pub spec: SpawnSpec,
    /// Where registry updates go.
    pub sink: Arc<dyn AgentSink>,
    /// How long a graceful stop waits.
    pub grace: Grace,
    /// The agent id.
    pub agent_id: String,
    /// The engine id.
    pub engine: String,
    /// The model, when chosen.
    pub model: Option<String>,
    /// The role.
    pub role: TeamRole,
}

/// The phase a role's engine is chosen for, when `--phase` is not given.
fn default_phase(role: &TeamRole) -> &'static str {
    match role.builtin() {
        Some(Role::Architect) => "design",
        Some(Role::TaskGenerator) => "tasks",
        Some(Role::Auditor | Role::Inspector) => "inspection",
        Some(Role::Builder | Role::Coordinator | Role::Lead) | None => "impl",
    }
}

/// The phase gate a Lead applies before it spawns `role` on a feature: the
/// role runs only in a phase where one of its operations may. Skill roles
/// have no phase rules.
fn phase_gate(spec: &troupe_core::spec::Spec, role: &TeamRole) -> CliResult<()> {
    use troupe_core::gate::{Operation, check};
    let Some(role) = role.builtin() else { return Ok(()) };
    let ops: &[Operation] = match role {
        Role::Architect => &[Operation::Design, Operation::ReviewDesign],
        Role::TaskGenerator | Role::Coordinator => &[Operation::Impl],
        Role::Builder => &[Operation::Impl, Operation::Revise],
        Role::Inspector | Role::Auditor | Role::Lead => &[Operation::ReviewDesign, Operation::ReviewImpl],
    };
    let mut first = None;
    for op in ops {
        match check(spec, *op) {
            Ok(()) => return Ok(()),
            Err(e) => {
                first.get_or_insert(e);
            }
        }
    }
    match first {
        Some(e) => Err(CliError::user(format!("the {} may not run on {} now: {e}", role.title(), spec.feature_name))
            .with_hint("follow the phase gate's advice, or run without --feature")),
        None => Ok(()),
    }
}

/// A fresh agent id: `<role>-<6 hex digits>`.
pub(crate) fn new_agent_id(role: &str) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    let mix = (nanos as u64) ^ ((std::process::id() as u64) << 32);
    format!("{role}-{:06x}", mix & 0xff_ffff)
}

/// The role's instructions and the caller's prompt as its assignment.
pub(crate) fn render_prompt(
    project: &Project,
    config: &troupe_core::config::Config,
    engine: &str,
    agent_id: &str,
    req: &Request,
) -> CliResult<String> {
    let role = req.role.as_ref().expect("a role");
    let template = match role {
        TeamRole::Skill(name) => super::role::skill_role_prompt(&super::role::policy(project)?, name),
        TeamRole::Builtin(role) => {
            // The role prompt a Lead teammate gets, its placeholders filled as for a Lead teammate of this engine.
            let (template, source) =
                troupe_lead::driver::read_template(&project.layout().roles_dir(), *role).map_err(|e| {
                    CliError::config(e.to_string())
                        .with_hint("fix or remove the file (without it the built-in template is used), or pass --bare")
                })?;
            let request = troupe_lead::machine::SpawnRequest {
                id: agent_id.to_string(),
                role: *role,
                engine_phase: String::new(),
                group: None,
                tasks: req.task.iter().cloned().collect(),
                context: troupe_lead::machine::SpawnContext {
                    feature: req.feature.clone().unwrap_or_default(),
                    read: Vec::new(),
                    write: Vec::new(),
                    scope: String::new(),
                    instructions: Vec::new(),
                },
                attempt: 1,
            };
            let me = std::env::current_exe().unwrap_or_else(|_| "troupe".into());
            let env = troupe_lead::roles::RenderEnv { engine, troupe: &me, skills: &config.gates.skills };
            troupe_lead::roles::fill(template.trim_end(), &source, &request, &env).map_err(|e| {
                CliError::config(e.to_string()).with_hint("fix the placeholder in the role template, or pass --bare")
            })?
        }
    };
    let feature = req.feature.as_deref().map(|f| format!("Feature: {f}\n")).unwrap_or_default();
    let task = req.task.as_deref().map(|t| format!("Task: {t}\n")).unwrap_or_default();
    let delegate = if req.delegate {
        let naming = troupe_core::tools::McpNaming::of_engine(engine);
        format!("\n\n{}", troupe_gate::modes::delegate_instructions(naming))
    } else {
        String::new()
    };
    Ok(format!(
        "{template}{delegate}\n\n---\n\n# Your assignment\n\n{feature}{task}Your id: {agent_id}\n\n{}",
        req.prompt
    ))
}

/// The engine of a launch: `requested` (`--engine`; a typo is an error, never
/// another engine), else the one config.toml or spec.yaml resolves, where an
/// unknown id runs claude (said once when `warn`).
fn pick_engine<'a>(
    registry: &'a Registry,
    resolution: &troupe_engine::resolve::Resolution,
    requested: Option<&str>,
    warn: bool,
) -> CliResult<&'a troupe_engine::registry::Engine> {
    if let Some(id) = requested {
        return registry.requested(id).map_err(|e| CliError::usage(e.to_string()).with_hint(e.hint()));
    }
    Ok(match registry.lookup(&resolution.engine) {
        Some(e) => e,
        None => {
            if warn {
                note(&format!(
                    "warning: unknown engine '{}' in {}: using 'claude' instead",
                    resolution.engine,
                    match resolution.source {
                        troupe_engine::resolve::Source::SpecOverride => "spec.yaml engine_override",
                        _ => ".troupe/config.toml [engines]",
                    }
                ));
            }
            registry.get(troupe_engine::registry::DEFAULT_ENGINE).0
        }
    })
}

/// The id of the engine [`prepare`] would start for `role` with no feature
/// (`--engine` as `requested`): what the chat REPL shows and matches saved
/// engine sessions against.
pub(crate) fn engine_id(project: &Project, role: &TeamRole, requested: Option<&str>) -> CliResult<String> {
    let config = crate::project::load_config(project)?;
    let resolution = resolve(default_phase(role), None, Ok(&config.engines));
    let registry = Registry::from_config(&config.engines);
    Ok(pick_engine(&registry, &resolution, requested, false)?.id.clone())
}

/// Resolve, render and wire `req` into a spawn of the project's agent.
pub(crate) fn prepare(project: &Project, req: Request) -> CliResult<Prepared> {
    let role = req.role.clone().expect("the caller resolved a role");
    let config = crate::project::load_config(project)?;
    let phase = req.phase.clone().unwrap_or_else(|| default_phase(&role).to_string());
    let spec = match &req.feature {
        Some(f) => match Specs::new(project).load(f) {
            Ok(spec) => Some(spec),
            Err(SpecFileError::NotFound { .. }) => None,
            Err(e) => return Err(crate::project::spec_error(e)),
        },
        None => None,
    };
    if let Some(spec) = &spec {
        phase_gate(spec, &role)?;
    }
    let spec_override = spec.map(|s| s.engine_override);
    let resolution = resolve(&phase, spec_override.as_ref(), Ok(&config.engines));
    let registry = Registry::from_config(&config.engines);
    let engine = pick_engine(&registry, &resolution, req.engine.as_deref(), true)?;
    let scripted = engine.kind == troupe_engine::EngineKind::Scripted;
    let model = req.model.clone().or_else(|| engine.model_for(role.tier(), &config.engines));
    let program = engine.installed().map_err(|e| CliError::user(e.to_string()).with_hint(e.hint()))?;
    let agent_id = req.id.clone().unwrap_or_else(|| new_agent_id(role.as_str()));
    let layout = project.layout();
    let prompt = if req.bare || req.raw_prompt {
        req.prompt.clone()
    } else {
        render_prompt(project, &config, &engine.id, &agent_id, &req)?
    };
    let mut opts = RunOptions {
        prompt,
        skip_permissions: true,
        model: model.clone(),
        max_turns: req.max_turns,
        settings: req.settings.clone(),
        mcp_config: req.mcp_config.clone(),
        append_system_prompt: req.append_system_prompt.clone(),
        resume_session: req.resume.clone(),
        cwd: Some(project.root().to_path_buf()),
        script: scripted.then(|| layout.troupe_dir().join("scripted.yaml")),
        ..RunOptions::default()
    };
    let mut env: Vec<(std::ffi::OsString, std::ffi::OsString)> = Vec::new();
    if !req.bare {
        // The same per-run hooks, gate skills, gateway and TROUPE_* environment
        // as a Lead teammate, so that the role is enforced, not only described.
        let troupe = std::env::current_exe()
            .map_err(|e| CliError::internal("cannot find the running troupe binary").with_source(&e))?;
        let script = layout.troupe_dir().join("scripted.yaml");
        let launch_env =
            LaunchEnv { root: project.root(), troupe: &troupe, script: &script, config: &config, workdir: None };
        forget_markers(&agent_id);
        let who = Who { id: &agent_id, role: role.as_str(), delegate: req.delegate };
        if engine.kind == troupe_engine::EngineKind::Claude && (opts.settings.is_some() || opts.mcp_config.is_some()) {
            return Err(CliError::usage("--settings and --mcp-config would replace troupe's hooks and gateway")
                .with_hint("add --bare to run without troupe's wiring"));
        }
        let secret = wire(engine, &launch_env, who, &mut opts).map_err(CliError::user)?;
        let mut vars = vec![
            ("TROUPE_AGENT_ID".to_string(), agent_id.clone()),
            ("TROUPE_AGENT_NAME".to_string(), agent_id.clone()),
            ("TROUPE_ROLE".to_string(), role.as_str().to_string()),
            ("TROUPE_PROJECT".to_string(), project.root().display().to_string()),
            ("TROUPE_BIN".to_string(), troupe.display().to_string()),
        ];
        if let Some(f) = &req.feature {
            vars.push(("TROUPE_FEATURE".into(), f.clone()));
        }
        if let Some(t) = &req.task {
            vars.push(("TROUPE_TASK_ID".into(), t.clone()));
        }
        if req.delegate {
            vars.push((troupe_gate::modes::DELEGATE_ENV.into(), "1".into()));
        }
        vars.extend(req.env.iter().cloned());
        if let Some(dir) = troupe.parent() {
            let rest = std::env::var_os("PATH").unwrap_or_default();
            if let Ok(path) =
                std::env::join_paths(std::iter::once(dir.to_path_buf()).chain(std::env::split_paths(&rest)))
            {
                env.push(("PATH".into(), path));
            }
        }
        vars.extend(secret);
        env.extend(vars.into_iter().map(|(k, v)| (k.into(), v.into())));
    }
    let mut invocation = engine.build(&opts);
    invocation.program = program.to_string_lossy().into_owned();
    env.extend(invocation.env.iter().map(|(k, v)| (k.into(), v.into())));
    for o in &invocation.ignored {
        tracing::debug!("engine {} has no option for {o}; ignored", engine.id);
    }
    // Opened before the sandbox is built, and open while the agent runs: the
    // database's -wal and -shm files exist only while a connection is open,
    // and Landlock grants only files that exist, so the agent's hooks and
    // gateway can write the store (audit, approvals) only if they are there.
    let sink: Arc<dyn AgentSink> = match super::super::board::open_store_in(project) {
        // One launch is one run of the usage ledger, named by its agent
        // (ids never repeat within a project).
        Ok(store) => Arc::new(
            StoreSink::new(Arc::from(store), format!("agent:{agent_id}"))
                .with_prices(troupe_core::usage::PriceTable::with_overrides(&config.prices)),
        ),
        Err(e) => {
            note(&format!("warning: the agent is not registered in the store: {}", e.message));
            Arc::new(NoSink)
        }
    };
    // Every teammate but a --bare engine runs in its Landlock sandbox (fails closed).
    let sandbox = if req.bare {
        None
    } else {
        troupe_lead::driver::sandbox::check(&config, &agent_id)
            .map_err(|e| CliError::user(e.to_string()).with_hint(e.hint()))?;
        let vars: Vec<(String, String)> =
            env.iter().map(|(k, v)| (k.to_string_lossy().into_owned(), v.to_string_lossy().into_owned())).collect();
        troupe_lead::driver::sandbox::policy(project.root(), &config, &vars).map_err(CliError::user)?
    };
    let spec = SpawnSpec {
        agent_id: agent_id.clone(),
        role: role.as_str().to_string(),
        feature: req.feature.clone(),
        task_id: req.task.clone(),
        project: project.root().to_path_buf(),
        cwd: project.root().to_path_buf(),
        engine: engine.id.clone(),
        model: model.clone(),
        invocation,
        env,
        log_path: Some(layout.logs_dir().join(format!("{agent_id}.jsonl"))),
        // The Lead's rule: `--hang-timeout` replaces the hang timeout only; the
        // start-up and tool allowances stay those of `[team]`.
        quiet_limits: Some(QuietLimits {
            hang: req.hang_timeout.map_or(config.team.hang_timeout(), |s| Duration::from_secs(s.max(1))),
            ..config.team.quiet_limits()
        }),
        sandbox,
    };
    let grace = Grace::from_total(config.shutdown.timeout());
    Ok(Prepared { spec, sink, grace, agent_id, engine: engine.id.clone(), model, role })
}

/// The text of `--mcp-config FILE`, checked to be JSON.
pub(crate) fn read_mcp_config(path: &PathBuf) -> CliResult<String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::user(format!("cannot read the MCP config {}", path.display())).with_source(&e))?;
    serde_json::from_str::<serde_json::Value>(&text).map_err(|e| {
        CliError::user(format!("the MCP config {} is not JSON", path.display()))
            .with_source(&e)
            .with_hint("it holds {\"mcpServers\": {\"name\": {\"command\": ..., \"args\": [...]}}}")
    })?;
    Ok(text)
}

/// The prompt argument, or standard input when it is absent or `-`; never empty.
pub(crate) fn read_prompt(arg: Option<&str>) -> CliResult<String> {
    let prompt = match arg {
        Some("-") | None => {
            let mut s = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)
                .map_err(|e| CliError::user("cannot read the prompt from standard input").with_source(&e))?;
            s
        }
        Some(p) => p.to_string(),
    };
    if prompt.trim().is_empty() {
        return Err(CliError::usage("the prompt is empty").with_hint("pass it as an argument or on standard input"));
    }
    Ok(prompt)
}
