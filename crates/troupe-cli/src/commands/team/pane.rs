//! `troupe team pane`: what runs in each pane `team start` makes. It wires
//! its agent as the Lead wires a teammate (`wire_live`: the teammate's hooks
//! plus the prompt hook, the gateway and its token, `teammate_env`, the
//! Landlock sandbox), registers it with its pane, then runs the agent CLI as
//! its child, in its own process group, so `team stop` and `troupe kill`
//! reach both, and records the end.
//!
//! It stays the agent's parent rather than becoming it, for two reasons: the
//! store stays open while the agent runs (the sandbox grants the database's
//! `-wal` and `-shm` files only while they exist, and the hooks write the
//! store), and someone is left to record the agent's end in the registry.

use std::path::Path;
use std::process::ExitCode;

use clap::Args;
use troupe_core::role::{Role, TeamRole};
use troupe_engine::{EngineKind, Registry, RunOptions};
use troupe_lead::driver::launch::{LaunchEnv, Who, forget_markers, teammate_env, wire_live};
use troupe_store::{AgentStatus, NewAgent, NewEvent};

use super::{Member, error_file, remove_member, tmux::Socket, write_member};
use crate::cli::GlobalArgs;
use crate::commands::agent::launch::{Request, render_prompt};
use crate::commands::board::{open_store_in, store_error};
use crate::error::{CliError, CliResult};

/// Set in a live agent's environment: its hooks deliver messages (`troupe_gate::delivery`).
pub(crate) const LIVE_ENV: &str = "TROUPE_LIVE";

/// Run one team agent in this pane (started by `troupe team start`).
#[derive(Debug, Args)]
pub struct PaneArgs {
    /// The agent id.
    #[arg(long)]
    pub agent: String,
    /// The engine.
    #[arg(long)]
    pub engine: String,
    /// The role.
    #[arg(long)]
    pub role: String,
    /// The other agents of the team (for the first prompt).
    #[arg(long, value_delimiter = ',')]
    pub team: Vec<String>,
    /// The coordinator, when there is one.
    #[arg(long)]
    pub coordinator: Option<String>,
    /// This agent delegates only (`team start --delegate-mode` for the coordinator).
    #[arg(long)]
    pub delegate_mode: bool,
}

pub fn run(g: &GlobalArgs, args: PaneArgs) -> CliResult<ExitCode> {
    let project = crate::project::find(g)?;
    let layout = project.layout();
    match launch(&project, &args) {
        Ok(code) => Ok(code),
        Err(e) => {
            // The pane closes with this process: `team start` shows the reason from here.
            let text = match &e.hint {
                Some(h) => format!("{}\nhint: {h}", e.message),
                None => e.message.clone(),
            };
            let _ = std::fs::create_dir_all(super::members_dir(layout));
            let _ = std::fs::write(error_file(layout, &args.agent), text);
            Err(e)
        }
    }
}

/// The first prompt of a team agent: its role's instructions, then who it works with.
fn assignment(args: &PaneArgs) -> String {
    let others: Vec<&str> = args.team.iter().map(String::as_str).filter(|a| *a != args.agent).collect();
    let coordinator = match &args.coordinator {
        Some(c) if *c == args.agent => "You coordinate this team: assign work to the others through the board \
            and messages."
            .to_string(),
        Some(c) => format!("{c} coordinates this team."),
        None => String::new(),
    };
    format!(
        "You are {id}, one agent of a live team a person started with `troupe team start`{with}. {coordinator}\n\
         Wait at your prompt for work. Messages from the person and your team arrive with your prompts and when \
         you stop (most urgent first, each with its id and sender); act on them and reply with the send_message \
         tool (`in_reply_to` the message id). Until then, answer this prompt with one short line saying you are ready.",
        id = args.agent,
        with = if others.is_empty() { String::new() } else { format!(" with {}", others.join(", ")) },
    )
}

fn launch(project: &troupe_project::Project, args: &PaneArgs) -> CliResult<ExitCode> {
    let layout = project.layout();
    let root = project.root();
    let config = crate::project::load_config(project)?;
    let registry = Registry::from_config(&config.engines);
    let engine = registry.requested(&args.engine).map_err(|e| CliError::usage(e.to_string()).with_hint(e.hint()))?;
    let program = engine.installed().map_err(|e| CliError::user(e.to_string()).with_hint(e.hint()))?;
    let role = crate::commands::agent::role::resolve(project, &args.role)?;
    let req = Request {
        role: Some(role.clone()),
        prompt: assignment(args),
        delegate: args.delegate_mode,
        ..Request::default()
    };
    let prompt = render_prompt(project, &config, &engine.id, &args.agent, &req)?;
    let troupe = std::env::current_exe()
        .map_err(|e| CliError::internal("cannot find the running troupe binary").with_source(&e))?;
    let script = layout.troupe_dir().join("scripted.yaml");
    let env = LaunchEnv { root, troupe: &troupe, script: &script, config: &config, workdir: None };
    let model = engine.model_for(role.tier(), &config.engines);
    let mut opts = RunOptions {
        prompt,
        skip_permissions: true,
        model: model.clone(),
        cwd: Some(root.to_path_buf()),
        ..RunOptions::default()
    };
    forget_markers(&args.agent);
    let who = Who { id: &args.agent, role: role.as_str(), delegate: args.delegate_mode };
    let secret = wire_live(engine, &env, who, &mut opts).map_err(CliError::user)?;
    if engine.kind == EngineKind::Claude
        && let Some(dir) = &opts.engine_home
    {
        accept_for_claude(dir, root)?;
    }
    let invocation = engine.build_interactive(&opts).ok_or_else(|| {
        CliError::usage(format!("engine '{}' has no interactive session troupe can run in a pane", engine.id))
            .with_hint("team agents run claude, gemini, codex or a custom engine")
    })?;
    let spawn_request = troupe_lead::machine::SpawnRequest {
        id: args.agent.clone(),
        // A skill role is no built-in one: named as itself below, it owns
        // what its role policy grants, not a Builder's files.
        role: role.builtin().unwrap_or(Role::Coordinator),
        engine_phase: String::new(),
        group: None,
        tasks: Vec::new(),
        context: troupe_lead::machine::SpawnContext {
            feature: String::new(),
            read: Vec::new(),
            write: Vec::new(),
            scope: String::new(),
            instructions: Vec::new(),
        },
        attempt: 1,
    };
    let mut vars = teammate_env(&spawn_request, root, &troupe);
    if let TeamRole::Skill(name) = &role {
        for (key, value) in &mut vars {
            if key == "TROUPE_ROLE" {
                value.clone_from(name);
            }
        }
    }
    vars.push((LIVE_ENV.to_string(), "1".to_string()));
    if args.delegate_mode {
        vars.push((troupe_gate::modes::DELEGATE_ENV.to_string(), "1".to_string()));
    }
    vars.extend(secret);
    vars.extend(invocation.env.iter().cloned());
    // Opened before the sandbox is built and kept open while the agent runs (see the module docs).
    let store = open_store_in(project)?;
    let sandbox = troupe_lead::driver::sandbox::policy(root, &config, &vars).map_err(CliError::user)?;
    let prepared = sandbox
        .as_ref()
        .map(|p| p.prepare())
        .transpose()
        .map_err(|e| CliError::user(format!("cannot sandbox {}: {e}", args.agent)))?;
    let me = std::process::id();
    let mut agent = NewAgent::new(&args.agent, role.as_str(), &engine.id);
    agent.model = model;
    agent.pid = Some(me);
    store.register(agent).map_err(store_error)?;
    let pane = std::env::var("TMUX_PANE").unwrap_or_default();
    let socket = Socket::from_env().ok_or_else(|| CliError::usage("`troupe team pane` runs inside a tmux pane"))?;
    let member = Member {
        agent: args.agent.clone(),
        engine: engine.id.clone(),
        role: role.as_str().to_string(),
        socket,
        pane: pane.clone(),
        pid: me,
    };
    write_member(layout, &member).map_err(|e| CliError::internal("cannot record the team member").with_source(&e))?;
    let _ = store.append_event(NewEvent {
        kind: "team_pane".into(),
        actor: Some(args.agent.clone()),
        subject: Some(args.agent.clone()),
        data: serde_json::json!({ "pane": pane, "pid": me, "engine": engine.id, "role": role.as_str() }),
    });
    let mut command = std::process::Command::new(&program);
    command.args(&invocation.args).envs(vars.iter().map(|(k, v)| (k, v))).current_dir(root);
    if let (Some(p), Some(policy)) = (&prepared, &sandbox) {
        p.apply_to_std(&mut command);
        command.envs(policy.env());
    }
    // A Claude agent that refreshes its login hands it back to the user (see
    // `claude_credentials`); no Lead watches a pane, so this process does.
    let credentials = (engine.kind == EngineKind::Claude)
        .then(|| Some((layout.state_dir().join("hooks"), troupe_lead::driver::launch::user_claude_dir()?)))
        .flatten();
    let status = wait_for(command, &args.agent, credentials);
    remove_member(layout, &args.agent);
    // Its temporary folder was its alone, and it has ended.
    if let Some(tmp) = sandbox.as_ref().and_then(|s| s.tmp.as_ref()) {
        let _ = std::fs::remove_dir_all(tmp);
    }
    let ended = match &status {
        Ok(s) if s.success() => AgentStatus::Done,
        _ => AgentStatus::Failed,
    };
    let _ = store.set_status(&args.agent, ended);
    match status {
        Ok(s) if s.success() => Ok(ExitCode::SUCCESS),
        Ok(s) => Err(CliError::user(format!("{} ended: {s}", args.agent))),
        Err(e) => Err(CliError::user(format!("cannot start {}: {e}", args.agent))),
    }
}

/// Runs the agent and waits for it. Ctrl-C in the pane is the agent's (its
/// TUI interrupts its turn): this process only outlives it.
/// Meanwhile, every 2 s, a refreshed Claude login under `credentials`
/// (hooks folder, user's Claude folder) goes back to the user.
fn wait_for(
    command: std::process::Command,
    agent: &str,
    credentials: Option<(std::path::PathBuf, std::path::PathBuf)>,
) -> std::io::Result<std::process::ExitStatus> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async {
        let mut interrupts = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
        let mut child = tokio::process::Command::from(command).spawn()?;
        tracing::debug!(agent, pid = child.id(), "team agent started");
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(2));
        loop {
            tokio::select! {
                _ = interrupts.recv() => {}
                _ = tick.tick(), if credentials.is_some() => {
                    let (hooks, user) = credentials.as_ref().expect("checked");
                    for (id, outcome) in troupe_lead::driver::claude_credentials::sync(hooks, user) {
                        if let Err(e) = outcome {
                            tracing::warn!(agent = id, "a refreshed Claude login was not handed back: {e}");
                        }
                    }
                }
                status = child.wait() => return status,
            }
        }
    })
}

/// Claude Code's TUI asks two things `claude -p` takes as given: whether to
/// trust a folder it was never started in, and whether to run in the
/// permission-bypass mode troupe starts every teammate in (troupe's hooks and
/// sandbox are what stop it). The per-run config folder troupe made for this
/// agent (`CLAUDE_CONFIG_DIR`, a copy of the user's) records both answers, as
/// given by the person who started the team in the project; the user's own
/// `~/.claude.json` is not changed.
fn accept_for_claude(dir: &Path, root: &Path) -> CliResult<()> {
    let file = dir.join(".claude.json");
    let mut config = std::fs::read_to_string(&file)
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .filter(serde_json::Value::is_object)
        .unwrap_or_else(|| serde_json::json!({}));
    let projects =
        config.as_object_mut().expect("an object").entry("projects").or_insert_with(|| serde_json::json!({}));
    if !projects.is_object() {
        *projects = serde_json::json!({});
    }
    let entry = projects
        .as_object_mut()
        .expect("an object")
        .entry(root.display().to_string())
        .or_insert_with(|| serde_json::json!({}));
    if !entry.is_object() {
        *entry = serde_json::json!({});
    }
    entry["hasTrustDialogAccepted"] = serde_json::json!(true);
    config["bypassPermissionsModeAccepted"] = serde_json::json!(true);
    troupe_project::write_atomic(&file, config.to_string().as_bytes())
        .map_err(|e| CliError::internal(format!("cannot write {}", file.display())).with_source(&e))
}
