use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use troupe_core::config::ENGINE_PHASES;
use troupe_core::event::{AgentEvent, ResultType};
use troupe_core::role::Role;
use troupe_engine::resolve::resolve;
use troupe_engine::supervisor::{AgentSink, Body, Grace, NoSink, SpawnSpec, StopMode, StoreSink, spawn};
use troupe_engine::{Registry, RunOptions};
use troupe_project::specs::{SpecFileError, Specs};

use troupe_lead::driver::launch::{LaunchEnv, Who, cleanup, forget_markers, wire};

use super::display::{Detail, line};
use crate::cli::GlobalArgs;
use crate::error::{CliError, CliResult};
use crate::output::{note, print_line, try_print_line};

/// Run one teammate to completion: resolve its engine and model, spawn it in
/// its own process group with the TROUPE_* environment, register it, show its
/// tool calls as they happen, and print its final report. Ctrl-C stops it
/// gracefully (twice: at once). With `--json`, every log record is printed as
/// one JSON line as it happens. Exit status: 0 on success, 1 otherwise.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The teammate's role: architect, auditor, task-generator, builder, inspector or coordinator.
    #[arg(long)]
    pub role: String,
    /// Engine id (claude, gemini, codex, opencode, scripted or a custom one; an unknown id is an
    /// error); default: resolved for the phase, where an unknown id runs claude with a warning.
    #[arg(long)]
    pub engine: Option<String>,
    /// Model id; default: the role tier's model for the engine.
    #[arg(long)]
    pub model: Option<String>,
    /// The feature the teammate works on: its spec.yaml `engine_override` is
    /// honoured and the phase gate applies (an Architect before implementation,
    /// a Builder after the design, ...).
    #[arg(long)]
    pub feature: Option<String>,
    /// The task the teammate works on.
    #[arg(long)]
    pub task: Option<String>,
    /// Pipeline phase used to choose the engine; default from the role.
    #[arg(long)]
    pub phase: Option<String>,
    /// Agent id (default: <role>-<random>).
    #[arg(long)]
    pub id: Option<String>,
    /// Turn limit, where the engine has one.
    #[arg(long)]
    pub max_turns: Option<u32>,
    /// Claude `--settings` for this run (a file or inline JSON, e.g. hooks).
    #[arg(long, value_name = "FILE|JSON")]
    pub settings: Option<String>,
    /// MCP servers for this run: a JSON file with `{"mcpServers": {...}}`.
    #[arg(long, value_name = "FILE")]
    pub mcp_config: Option<PathBuf>,
    /// Text appended to the engine's system prompt.
    #[arg(long)]
    pub append_system_prompt: Option<String>,
    /// Continue this engine session with the new prompt.
    #[arg(long, value_name = "SESSION")]
    pub resume: Option<String>,
    /// Report the agent unresponsive after this many seconds without output (default: [team] hang_timeout_ms or hang_timeout_seconds).
    #[arg(long, value_name = "SECONDS")]
    pub hang_timeout: Option<u64>,
    /// Run the bare engine: without the role prompt, troupe's per-run hooks, gate
    /// skills, gateway and TROUPE_* environment (by default the teammate gets all
    /// of them, as under the Lead, so its role is enforced).
    #[arg(long)]
    pub bare: bool,
    /// The prompt; read from standard input when omitted or `-`.
    pub prompt: Option<String>,
}

/// The phase a role's engine is chosen for, when `--phase` is not given.
fn default_phase(role: Role) -> &'static str {
    match role {
        Role::Architect => "design",
        Role::TaskGenerator => "tasks",
        Role::Auditor | Role::Inspector => "inspection",
        Role::Builder | Role::Coordinator | Role::Lead => "impl",
    }
}

/// The phase gate a Lead applies before it spawns `role` on a feature: the
/// role runs only in a phase where one of its operations may.
fn phase_gate(spec: &troupe_core::spec::Spec, role: Role) -> CliResult<()> {
    use troupe_core::gate::{Operation, check};
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

fn new_agent_id(role: Role) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    let mix = (nanos as u64) ^ ((std::process::id() as u64) << 32);
    format!("{}-{:06x}", role.as_str(), mix & 0xff_ffff)
}

pub fn run(g: &GlobalArgs, args: RunArgs) -> CliResult<ExitCode> {
    let role: Role = args.role.parse().map_err(|_| {
        CliError::usage(format!("unknown role '{}'", args.role))
            .with_hint("roles: architect, auditor, task-generator, builder, inspector, coordinator")
    })?;
    if role == Role::Lead {
        return Err(CliError::usage("the Lead is troupe itself and is not run as an agent")
            .with_hint("pick a teammate role: architect, auditor, task-generator, builder, inspector, coordinator"));
    }
    if let Some(p) = &args.phase
        && !ENGINE_PHASES.contains(&p.as_str())
    {
        return Err(
            CliError::usage(format!("unknown phase '{p}'")).with_hint(format!("phases: {}", ENGINE_PHASES.join(", ")))
        );
    }
    if let Some(id) = &args.id {
        super::check_agent_id(id)?;
    }
    let prompt = match args.prompt.as_deref() {
        Some("-") | None => {
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .map_err(|e| CliError::user("cannot read the prompt from standard input").with_source(&e))?;
            s
        }
        Some(p) => p.to_string(),
    };
    if prompt.trim().is_empty() {
        return Err(CliError::usage("the prompt is empty").with_hint("pass it as an argument or on standard input"));
    }
    let mcp_config = match &args.mcp_config {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                CliError::user(format!("cannot read the MCP config {}", path.display())).with_source(&e)
            })?;
            serde_json::from_str::<serde_json::Value>(&text).map_err(|e| {
                CliError::user(format!("the MCP config {} is not JSON", path.display()))
                    .with_source(&e)
                    .with_hint("it holds {\"mcpServers\": {\"name\": {\"command\": ..., \"args\": [...]}}}")
            })?;
            Some(text)
        }
        None => None,
    };

    let project = crate::project::find(g)?;
    let config = crate::project::load_config(&project)?;
    let phase = args.phase.clone().unwrap_or_else(|| default_phase(role).to_string());
    let spec = match &args.feature {
        Some(f) => match Specs::new(&project).load(f) {
            Ok(spec) => Some(spec),
            Err(SpecFileError::NotFound { .. }) => None,
            Err(e) => return Err(crate::project::spec_error(e)),
        },
        None => None,
    };
    if let Some(spec) = &spec {
        phase_gate(spec, role)?;
    }
    let spec_override = spec.map(|s| s.engine_override);
    let resolution = resolve(&phase, spec_override.as_ref(), Ok(&config.engines));
    let registry = Registry::from_config(&config.engines);
    let engine = match &args.engine {
        // Named on the command line: a typo is an error, never another engine.
        Some(id) => registry.requested(id).map_err(|e| CliError::usage(e.to_string()).with_hint(e.hint()))?,
        // From config or spec.yaml: an unknown id runs claude, said once.
        None => match registry.lookup(&resolution.engine) {
            Some(e) => e,
            None => {
                note(&format!(
                    "warning: unknown engine '{}' in {}: using 'claude' instead",
                    resolution.engine,
                    match resolution.source {
                        troupe_engine::resolve::Source::SpecOverride => "spec.yaml engine_override",
                        _ => ".troupe/config.toml [engines]",
                    }
                ));
                registry.get(troupe_engine::registry::DEFAULT_ENGINE).0
            }
        },
    };
    let scripted = engine.kind == troupe_engine::EngineKind::Scripted;
    let model = args.model.clone().or_else(|| engine.model_for(role.tier(), &config.engines));
    let program = engine.installed().map_err(|e| CliError::user(e.to_string()).with_hint(e.hint()))?;
    let agent_id = args.id.clone().unwrap_or_else(|| new_agent_id(role));
    let layout = project.layout();
    let prompt = if args.bare {
        prompt
    } else {
        // The role prompt a Lead teammate gets, then the caller's prompt as the assignment.
        let (template, source) = troupe_lead::driver::read_template(&layout.roles_dir(), role);
        // Its placeholders are filled as for a Lead teammate of this engine.
        let request = troupe_lead::machine::SpawnRequest {
            id: agent_id.clone(),
            role,
            engine_phase: String::new(),
            group: None,
            tasks: args.task.iter().cloned().collect(),
            context: troupe_lead::machine::SpawnContext {
                feature: args.feature.clone().unwrap_or_default(),
                read: Vec::new(),
                write: Vec::new(),
                scope: String::new(),
                instructions: Vec::new(),
            },
            attempt: 1,
        };
        let me = std::env::current_exe().unwrap_or_else(|_| "troupe".into());
        let env = troupe_lead::roles::RenderEnv { engine: &engine.id, troupe: &me, skills: &config.gates.skills };
        let template = troupe_lead::roles::fill(template.trim_end(), &source, &request, &env).map_err(|e| {
            CliError::config(e.to_string()).with_hint("fix the placeholder in the role template, or pass --bare")
        })?;
        let feature = args.feature.as_deref().map(|f| format!("Feature: {f}\n")).unwrap_or_default();
        let task = args.task.as_deref().map(|t| format!("Task: {t}\n")).unwrap_or_default();
        format!("{template}\n\n---\n\n# Your assignment\n\n{feature}{task}Your id: {agent_id}\n\n{prompt}")
    };
    let mut opts = RunOptions {
        prompt,
        skip_permissions: true,
        model: model.clone(),
        max_turns: args.max_turns,
        settings: args.settings.clone(),
        mcp_config,
        append_system_prompt: args.append_system_prompt.clone(),
        resume_session: args.resume.clone(),
        cwd: Some(project.root().to_path_buf()),
        script: scripted.then(|| project.layout().troupe_dir().join("scripted.yaml")),
        ..RunOptions::default()
    };
    let mut env: Vec<(std::ffi::OsString, std::ffi::OsString)> = Vec::new();
    if !args.bare {
        // The same per-run hooks, gate skills, gateway and TROUPE_* environment
        // as a Lead teammate, so that the role is enforced, not only described.
        let troupe = std::env::current_exe()
            .map_err(|e| CliError::internal("cannot find the running troupe binary").with_source(&e))?;
        let script = layout.troupe_dir().join("scripted.yaml");
        let launch_env = LaunchEnv { root: project.root(), troupe: &troupe, script: &script, config: &config };
        forget_markers(&agent_id);
        let who = Who { id: &agent_id, role };
        if engine.kind == troupe_engine::EngineKind::Claude && (opts.settings.is_some() || opts.mcp_config.is_some()) {
            return Err(CliError::usage("--settings and --mcp-config would replace troupe's hooks and gateway")
                .with_hint("add --bare to run without troupe's wiring"));
        }
        wire(engine, &launch_env, who, &mut opts).map_err(CliError::user)?;
        let mut vars = vec![
            ("TROUPE_AGENT_ID".to_string(), agent_id.clone()),
            ("TROUPE_AGENT_NAME".to_string(), agent_id.clone()),
            ("TROUPE_ROLE".to_string(), role.as_str().to_string()),
            ("TROUPE_PROJECT".to_string(), project.root().display().to_string()),
            ("TROUPE_BIN".to_string(), troupe.display().to_string()),
        ];
        if let Some(f) = &args.feature {
            vars.push(("TROUPE_FEATURE".into(), f.clone()));
        }
        if let Some(t) = &args.task {
            vars.push(("TROUPE_TASK_ID".into(), t.clone()));
        }
        if let Some(dir) = troupe.parent() {
            let rest = std::env::var_os("PATH").unwrap_or_default();
            if let Ok(path) =
                std::env::join_paths(std::iter::once(dir.to_path_buf()).chain(std::env::split_paths(&rest)))
            {
                env.push(("PATH".into(), path));
            }
        }
        env.extend(vars.into_iter().map(|(k, v)| (k.into(), v.into())));
    }
    let mut invocation = engine.build(&opts);
    invocation.program = program.to_string_lossy().into_owned();
    env.extend(invocation.env.iter().map(|(k, v)| (k.into(), v.into())));
    for o in &invocation.ignored {
        tracing::debug!("engine {} has no option for {o}; ignored", engine.id);
    }
    // Every teammate but a --bare engine runs in its Landlock sandbox (fails closed).
    let sandbox = if args.bare {
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
        feature: args.feature.clone(),
        task_id: args.task.clone(),
        project: project.root().to_path_buf(),
        cwd: project.root().to_path_buf(),
        engine: engine.id.clone(),
        model: model.clone(),
        invocation,
        env,
        log_path: Some(layout.logs_dir().join(format!("{agent_id}.jsonl"))),
        hang_timeout: Some(args.hang_timeout.map_or(config.team.hang_timeout(), |s| Duration::from_secs(s.max(1)))),
        sandbox,
    };
    let sink: Arc<dyn AgentSink> = match super::super::board::open_store_in(&project) {
        // One `agent run` is one run of the usage ledger, named by its agent
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
    let grace = Grace::from_total(config.shutdown.timeout());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::internal("cannot start the async runtime").with_source(&e))?;
    let json = g.json;
    // Progress on stderr unless `--json` (then the records on stdout are the
    // progress): plain lines when piped, with the ticking footer on a terminal.
    let live = crate::live::Live::start(!json, Some(project.root()));
    live.teammate(&agent_id, role.title(), &engine.id);
    let live_ref = &live;
    let me = agent_id.as_str();
    let outcome = rt.block_on(async move {
        // Ctrl-C is ours from before the agent starts: a SIGINT that arrived
        // between the spawn and the first poll of a lazily installed handler
        // killed troupe itself and left the agent to the guardian.
        let mut sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
            .map_err(|e| CliError::internal("cannot handle Ctrl-C").with_source(&e))?;
        let mut handle = spawn(spec, sink).map_err(|e| CliError::user(e.to_string()).with_source(&e))?;
        let mut rx = handle.records().expect("a new handle's records");
        let mut interrupts = 0;
        // Standard output closed under us (`| head`): the agent is stopped, and
        // its records are still read to the end (the supervisor waits for
        // them), just no longer printed.
        let mut stdout_closed = false;
        loop {
            tokio::select! {
                r = rx.recv() => match r {
                    Some(record) => {
                        if json && !stdout_closed {
                            if let Err(e) = try_print_line(&serde_json::to_string(&*record).unwrap_or_default()) {
                                stdout_closed = true;
                                tracing::debug!("standard output closed ({e}); stopping the agent");
                                handle.stop(StopMode::Graceful(grace));
                            }
                        } else if !json {
                            if let Body::Event { event: AgentEvent::ToolUse { name, input, .. } } = &record.body {
                                live_ref.tool(me, &crate::commands::lead::progress::tool_call(name, input));
                            }
                            if let Some(l) = line(&record, Detail::Progress) {
                                live_ref.line(&l);
                            }
                        }
                        if matches!(record.body, Body::Exited { .. }) {
                            break;
                        }
                    }
                    None => break,
                },
                _ = sigint.recv() => {
                    interrupts += 1;
                    if interrupts == 1 {
                        let text = "stopping the agent (Ctrl-C again to kill it at once)";
                        if live_ref.enabled() { live_ref.line(text) } else { note(text) }
                        handle.stop(StopMode::Graceful(grace));
                    } else {
                        handle.stop(StopMode::Force);
                    }
                }
            }
        }
        Ok::<_, CliError>((handle.wait().await, interrupts > 0, stdout_closed))
    })?;
    let (outcome, interrupted, stdout_closed) = outcome;
    live.teammate_ended(&agent_id);
    // The denials its last tool calls got, then no footer under the report.
    live.finish();
    if !args.bare {
        // The run's hook, skill and gateway files go with it.
        cleanup(project.root(), [&agent_id]);
    }
    let out = &outcome.output;
    // Cut short from outside: never 0, and the registry says INTERRUPTED.
    if stdout_closed {
        return Ok(ExitCode::from(141));
    }
    if interrupted && out.kind == ResultType::Interrupted {
        if !json {
            note(&format!("{agent_id}: interrupted; its log: troupe agent logs {agent_id}"));
        }
        return Ok(ExitCode::from(130));
    }
    if out.kind == ResultType::Success {
        if !json {
            if let Some(report) = &out.result {
                print_line(report);
            }
            note(&format!("{agent_id}: done ({}{})", engine.id, model.map(|m| format!(", {m}")).unwrap_or_default()));
        }
        return Ok(ExitCode::SUCCESS);
    }
    if json {
        // The `exited` record already said why; a second JSON document would
        // break the JSON-lines stream.
        return Ok(ExitCode::from(1));
    }
    let message = out.error_message.clone().unwrap_or_else(|| out.kind.as_str().to_string());
    Err(CliError::user(format!("agent {agent_id} ended with {}: {message}", out.kind.as_str()))
        .with_hint(format!("its full log: troupe agent logs {agent_id}")))
}
