//! `troupe team start claude gemini codex`: one pane per agent.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use serde_json::json;
use troupe_core::layout::Layout;
use troupe_engine::{Registry, RunOptions};

use super::tmux::{SESSION, Socket, Tmux};
use super::{Member, error_file, member};
use crate::cli::GlobalArgs;
use crate::commands::board::open_store_in;
use crate::error::{CliError, CliResult};
use crate::output::{note, print_json, print_table};

/// How long `team start` waits for each pane to register its agent
/// (`TROUPE_TEAM_START_TIMEOUT_MS` overrides; agent CLIs start in seconds).
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// How the panes are arranged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PaneLayout {
    /// The first agent (the coordinator, if any) on the left, the others stacked on the right.
    Split,
    /// Side by side.
    Horizontal,
    /// Stacked.
    Vertical,
    /// A grid.
    Tiled,
}

impl PaneLayout {
    /// tmux's name for it.
    pub fn tmux(self) -> &'static str {
        match self {
            PaneLayout::Split => "main-vertical",
            PaneLayout::Horizontal => "even-horizontal",
            PaneLayout::Vertical => "even-vertical",
            PaneLayout::Tiled => "tiled",
        }
    }
}

/// Start agent CLIs side by side in tmux panes, each wired like a Lead
/// teammate (hooks, gateway, role, sandbox) and registered with its pane.
/// Outside tmux they run on troupe's own tmux server for the project
/// (`troupe team attach` shows them); inside a tmux session the panes are
/// added to the current window.
#[derive(Debug, Args)]
pub struct StartArgs {
    /// The agents' engines, one pane each (claude, gemini, codex, or a custom
    /// engine); each agent is named after its engine (`claude`, `claude-2`, …).
    #[arg(required = true, value_name = "ENGINE")]
    pub engines: Vec<String>,
    /// How the panes are arranged.
    #[arg(long, value_enum, default_value = "split")]
    pub layout: PaneLayout,
    /// An agent's role (builder by default), e.g. `--role gemini=inspector`:
    /// a built-in role, or any role the project's skills define (`allowedRoles`).
    #[arg(long = "role", value_name = "NAME=ROLE")]
    pub roles: Vec<String>,
    /// The agent that coordinates the others (its role is coordinator; it gets the first pane).
    #[arg(long, value_name = "NAME")]
    pub coordinator: Option<String>,
    /// The coordinator delegates only (seed 003 B5): every file write, shell
    /// command and file lock is refused to it; the board and messages stay.
    #[arg(long, requires = "coordinator")]
    pub delegate_mode: bool,
}

/// One agent to start.
struct Planned {
    agent: String,
    engine: String,
    role: String,
}

pub fn run(g: &GlobalArgs, args: StartArgs) -> CliResult<ExitCode> {
    let project = crate::project::find(g)?;
    let layout = project.layout();
    let config = crate::project::load_config(&project)?;
    let store = open_store_in(&project)?;
    let taken = |id: &str| {
        member(layout, id).is_some()
            || store
                .agent(id)
                .is_ok_and(|a| !a.status.is_terminal() && a.pid.is_some_and(troupe_engine::supervisor::group_alive))
    };
    let mut planned = plan(&project, &args, &Registry::from_config(&config.engines), &taken)?;
    // The coordinator gets the first pane (the large one of `split`).
    planned.sort_by_key(|p| Some(&p.agent) != args.coordinator.as_ref());
    let (tmux, target, fresh) = match Socket::from_env() {
        Some(socket) => (Tmux::new(socket), std::env::var("TMUX_PANE").ok(), false),
        None => {
            let tmux = Tmux::new(Socket::for_project(project.root()));
            let fresh = !tmux.has_session(SESSION);
            (tmux, (!fresh).then(|| format!("{SESSION}:")), fresh)
        }
    };
    let troupe = std::env::current_exe()
        .map_err(|e| CliError::internal("cannot find the running troupe binary").with_source(&e))?;
    let team: Vec<String> = planned.iter().map(|p| p.agent.clone()).collect();
    for p in &planned {
        let _ = std::fs::remove_file(error_file(layout, &p.agent));
    }
    let tmux_error = |e: super::tmux::TmuxError| {
        CliError::user(e.to_string()).with_hint("troupe runs the `tmux` binary; check that it is installed and works")
    };
    let mut target = target;
    for (i, p) in planned.iter().enumerate() {
        let mut argv = vec![
            troupe.display().to_string(),
            "-C".into(),
            project.root().display().to_string(),
            "team".into(),
            "pane".into(),
            "--agent".into(),
            p.agent.clone(),
            "--engine".into(),
            p.engine.clone(),
            "--role".into(),
            p.role.clone(),
            format!("--team={}", team.join(",")),
        ];
        if let Some(c) = &args.coordinator {
            argv.push(format!("--coordinator={c}"));
            if args.delegate_mode && c == &p.agent {
                argv.push("--delegate-mode".into());
            }
        }
        // Not a secret: lets `troupe kill` tell the pane's process is this agent's.
        let argv = [vec!["env".to_string(), format!("TROUPE_AGENT_ID={}", p.agent)], argv].concat();
        let pane = match (&target, i == 0 && fresh) {
            (_, true) => tmux.new_session(SESSION, project.root(), &argv).map_err(tmux_error)?,
            (Some(t), false) => tmux.split(t, project.root(), &argv).map_err(tmux_error)?,
            (None, false) => unreachable!("a target exists unless the session is new"),
        };
        target.get_or_insert(pane);
    }
    let window = target.expect("at least one pane");
    tmux.layout(&window, args.layout.tmux()).map_err(tmux_error)?;
    let members = wait_for_panes(layout, &planned)?;
    if g.json {
        print_json(&json!({ "socket": tmux.socket(), "agents": members }));
    } else {
        let rows: Vec<Vec<String>> = members
            .iter()
            .map(|m| vec![m.agent.clone(), m.engine.clone(), m.role.clone(), m.pane.clone(), m.pid.to_string()])
            .collect();
        print_table(&["AGENT", "ENGINE", "ROLE", "PANE", "PID"], &rows, &[4]);
        if Socket::from_env().is_none() {
            note("see them with `troupe team attach`; message one with `troupe msg send <agent> \"…\"`");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Names, engines and roles, checked before any pane is made.
fn plan(
    project: &troupe_project::Project,
    args: &StartArgs,
    registry: &Registry,
    taken: &dyn Fn(&str) -> bool,
) -> CliResult<Vec<Planned>> {
    let mut roles: BTreeMap<String, String> = BTreeMap::new();
    for r in &args.roles {
        let Some((name, role)) = r.split_once('=').filter(|(n, r)| !n.is_empty() && !r.is_empty()) else {
            return Err(
                CliError::usage(format!("--role takes NAME=ROLE, not '{r}'")).with_hint("e.g. --role gemini=inspector")
            );
        };
        roles.insert(name.to_string(), role.to_string());
    }
    let mut planned: Vec<Planned> = Vec::new();
    for id in &args.engines {
        let engine = registry.requested(id).map_err(|e| CliError::usage(e.to_string()).with_hint(e.hint()))?;
        if engine.build_interactive(&RunOptions::default()).is_none() {
            return Err(CliError::usage(format!("engine '{id}' has no interactive session troupe can run in a pane"))
                .with_hint("team agents run claude, gemini, codex or a custom engine"));
        }
        engine.installed().map_err(|e| CliError::user(e.to_string()).with_hint(e.hint()))?;
        let agent = (1..)
            .map(|n| if n == 1 { engine.id.clone() } else { format!("{}-{n}", engine.id) })
            .find(|a| !taken(a) && !planned.iter().any(|p| &p.agent == a))
            .expect("a free name");
        planned.push(Planned { agent, engine: engine.id.clone(), role: "builder".into() });
    }
    for (name, role) in &roles {
        let i = planned.iter().position(|p| &p.agent == name).ok_or_else(|| unknown(name, &planned, "--role"))?;
        // The roles `agent run --role` takes: built-in, or defined by the project's skills.
        let resolved = crate::commands::agent::role::resolve(project, role)
            .map_err(|e| CliError { message: format!("{} for {name}", e.message), ..e })?;
        planned[i].role = resolved.as_str().to_string();
    }
    if let Some(c) = &args.coordinator {
        let i = planned.iter().position(|p| &p.agent == c).ok_or_else(|| unknown(c, &planned, "--coordinator"))?;
        planned[i].role = "coordinator".into();
    }
    Ok(planned)
}

fn unknown(name: &str, planned: &[Planned], flag: &str) -> CliError {
    let names: Vec<&str> = planned.iter().map(|p| p.agent.as_str()).collect();
    CliError::usage(format!("{flag} names '{name}', which is not one of this team's agents"))
        .with_hint(format!("the agents are {}", names.join(", ")))
}

/// Waits until every pane recorded its member, or one gave up.
fn wait_for_panes(layout: &Layout, planned: &[Planned]) -> CliResult<Vec<Member>> {
    let timeout = std::env::var("TROUPE_TEAM_START_TIMEOUT_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(START_TIMEOUT, Duration::from_millis);
    let deadline = Instant::now() + timeout;
    let mut members = Vec::new();
    for p in planned {
        loop {
            if let Some(m) = member(layout, &p.agent) {
                members.push(m);
                break;
            }
            if let Ok(reason) = std::fs::read_to_string(error_file(layout, &p.agent)) {
                return Err(CliError::user(format!("agent {} did not start: {reason}", p.agent))
                    .with_hint("`troupe team stop` closes the panes that did start"));
            }
            if Instant::now() > deadline {
                return Err(CliError::user(format!("agent {} did not start within {timeout:?}", p.agent))
                    .with_hint("`troupe team attach` shows its pane; `troupe team stop` closes the team"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    Ok(members)
}
