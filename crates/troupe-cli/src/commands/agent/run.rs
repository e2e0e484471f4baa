use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use troupe_core::config::ENGINE_PHASES;
use troupe_core::event::{AgentEvent, ResultType};
use troupe_engine::supervisor::{Body, StopMode, spawn};
use troupe_lead::driver::launch::cleanup;

use super::display::{Detail, line};
use crate::cli::GlobalArgs;
use crate::error::{CliError, CliResult};
use crate::output::{note, print_line, try_print_line};

/// Run one teammate to completion: resolve its engine and model, spawn it in
/// its own process group with the TROUPE_* environment, register it, show its
/// tool calls as they happen, and print its final report. Ctrl-C or SIGTERM stops it
/// gracefully (twice: at once). With `--json`, every log record is printed as
/// one JSON line as it happens. Exit status: 0 on success, 1 otherwise.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The teammate's role: architect, auditor, task-generator, builder, inspector, coordinator,
    /// or any role the project's skills define (`allowedRoles`).
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
    /// Agent id (default: `<role>-<random>`).
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
    /// Report the agent unresponsive after this many seconds without output (default: `[team] hang_timeout_ms` or `hang_timeout_seconds`); before its first output the start-up allowance applies instead, and while a tool call runs the tool allowance (`[team] startup_timeout_*`, `tool_timeout_*`), each when longer.
    #[arg(long, value_name = "SECONDS")]
    pub hang_timeout: Option<u64>,
    /// Run the bare engine: without the role prompt, troupe's per-run hooks, gate
    /// skills, gateway and TROUPE_* environment (by default the teammate gets all
    /// of them, as under the Lead, so its role is enforced).
    #[arg(long)]
    pub bare: bool,
    /// Delegate mode (seed 003 B5): the teammate coordinates through the board and messages;
    /// troupe refuses its file writes, shell commands and file locks.
    #[arg(long, conflicts_with = "bare")]
    pub delegate_mode: bool,
    /// The prompt; read from standard input when omitted or `-`.
    pub prompt: Option<String>,
}

pub fn run(g: &GlobalArgs, args: RunArgs) -> CliResult<ExitCode> {
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
    let prompt = super::launch::read_prompt(args.prompt.as_deref())?;
    let mcp_config = args.mcp_config.as_ref().map(super::launch::read_mcp_config).transpose()?;
    let project = crate::project::find(g)?;
    let role = super::role::resolve(&project, &args.role)?;
    let bare = args.bare;
    let prepared = super::launch::prepare(
        &project,
        super::launch::Request {
            role: Some(role),
            engine: args.engine,
            model: args.model,
            feature: args.feature,
            task: args.task,
            phase: args.phase,
            id: args.id,
            max_turns: args.max_turns,
            settings: args.settings,
            mcp_config,
            append_system_prompt: args.append_system_prompt,
            resume: args.resume,
            hang_timeout: args.hang_timeout,
            bare,
            raw_prompt: false,
            prompt,
            env: Vec::new(),
            delegate: args.delegate_mode,
        },
    )?;
    let super::launch::Prepared { spec, sink, grace, agent_id, engine, model, role } = prepared;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::internal("cannot start the async runtime").with_source(&e))?;
    let json = g.json;
    // Progress on stderr unless `--json` (then the records on stdout are the
    // progress): plain lines when piped, with the ticking footer on a terminal.
    let live = crate::live::Live::start(!json, Some(project.root()));
    live.teammate(&agent_id, &role.to_string(), &engine);
    let live_ref = &live;
    let me = agent_id.as_str();
    let outcome = rt.block_on(async move {
        // Ctrl-C is ours from before the agent starts: a SIGINT that arrived
        // between the spawn and the first poll of a lazily installed handler
        // killed troupe itself and left the agent to the guardian.
        // SIGTERM (kill, a service manager) is handled as Ctrl-C is.
        let mut signals = super::turn::Interrupts::install()?;
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
                _ = signals.recv() => {
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
    if !bare {
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
            note(&format!("{agent_id}: done ({engine}{})", model.map(|m| format!(", {m}")).unwrap_or_default()));
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
