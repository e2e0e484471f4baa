//! `troupe team stop` and `troupe team attach`.
//!
//! A stop leaves nothing behind: each pane's process group is signalled
//! (SIGINT, SIGTERM, then SIGKILL; at once with `--force`), then every
//! process still in the pane's session (a child that made a group of its
//! own) is killed, the pane closed and, when the whole team stops, troupe's
//! tmux server with it: 0 panes, 0 processes, well within 10 s.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Args;
use serde_json::json;
use troupe_engine::supervisor::{Grace, StopMode, is_agent_process, stop_group_blocking};
use troupe_store::AgentStatus;

use super::tmux::{Socket, Tmux};
use super::{Member, members, remove_member};
use crate::cli::GlobalArgs;
use crate::commands::board::open_store_in;
use crate::error::{CliError, CliResult};
use crate::output::{note, print_json};

/// The longest a graceful stop waits for an agent before SIGKILL, so that
/// the whole stop ends within 10 s whatever `[shutdown]` says.
const MOST_GRACE: Duration = Duration::from_secs(6);

/// Stop the team's agents and close their panes.
#[derive(Debug, Args)]
pub struct StopArgs {
    /// Only these agents (default: the whole team, and troupe's tmux server).
    #[arg(value_name = "AGENT")]
    pub agents: Vec<String>,
    /// SIGKILL at once, without asking the agents to end.
    #[arg(long, short)]
    pub force: bool,
}

/// Attach this terminal to the team's tmux session (switch to it inside tmux).
#[derive(Debug, Args)]
pub struct AttachArgs {}

pub fn run(g: &GlobalArgs, args: StopArgs) -> CliResult<ExitCode> {
    let project = crate::project::find(g)?;
    let layout = project.layout();
    let all = members(layout);
    for name in &args.agents {
        if !all.iter().any(|m| &m.agent == name) {
            return Err(CliError::user(format!("no team agent '{name}'"))
                .with_hint("`troupe team list` shows the team's agents"));
        }
    }
    let chosen: Vec<Member> =
        all.into_iter().filter(|m| args.agents.is_empty() || args.agents.contains(&m.agent)).collect();
    let grace = crate::project::load_config(&project)?.shutdown.timeout().min(MOST_GRACE);
    let mode = if args.force { StopMode::Force } else { StopMode::Graceful(Grace::from_total(grace)) };
    let started = Instant::now();
    let root = project.root();
    std::thread::scope(|s| {
        for m in &chosen {
            s.spawn(move || stop_member(m, root, mode));
        }
    });
    let store = open_store_in(&project).ok();
    for m in &chosen {
        let _ = Tmux::new(m.socket.clone()).kill_pane(&m.pane);
        remove_member(layout, &m.agent);
        if let Some(store) = &store
            && store.agent(&m.agent).is_ok_and(|a| !a.status.is_terminal())
        {
            let _ = store.set_status(&m.agent, AgentStatus::Done);
        }
    }
    // The whole team: troupe's own server goes too (a pane that never
    // registered, or one a person opened there, included).
    if args.agents.is_empty() {
        let own = Tmux::new(Socket::for_project(project.root()));
        let _ = own.kill_server();
    }
    let took = started.elapsed();
    if g.json {
        let stopped: Vec<&str> = chosen.iter().map(|m| m.agent.as_str()).collect();
        print_json(&json!({ "stopped": stopped, "ms": took.as_millis() as u64 }));
    } else if chosen.is_empty() {
        note("no team agent was running");
    } else {
        note(&format!("stopped {} in {:.1} s", chosen.len(), took.as_secs_f64()));
    }
    Ok(ExitCode::SUCCESS)
}

/// Stops one pane's processes: its group, then whatever is left of its
/// session, and what its agent started in sessions of their own.
fn stop_member(m: &Member, root: &Path, mode: StopMode) {
    let before = leftovers(m, root);
    let _ = stop_group_blocking(m.pid, mode);
    // A child in a group of its own, or one that started meanwhile.
    for pgid in before.union(&leftovers(m, root)) {
        let _ = stop_group_blocking(*pgid, StopMode::Force);
    }
}

/// The process groups of the processes in the pane's session (its process
/// leads it), and of those that left it but carry the agent's identity in
/// their environment (Claude Code's Bash tool starts a session of its own),
/// read from `/proc`.
fn leftovers(m: &Member, root: &Path) -> BTreeSet<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return BTreeSet::new() };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // After the command name in parentheses: state ppid pgrp session …
            let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
            let (pgrp, session) = (fields.get(2)?.parse::<u32>().ok()?, fields.get(3)?.parse::<u32>().ok()?);
            (session == m.pid || is_agent_process(pid, &m.agent, root)).then_some(pgrp)
        })
        .collect()
}

pub fn attach(g: &GlobalArgs, _args: AttachArgs) -> CliResult<ExitCode> {
    use std::os::unix::process::CommandExt;
    let project = crate::project::find(g)?;
    let own = Tmux::new(Socket::for_project(project.root()));
    if !own.has_session(super::tmux::SESSION) {
        return Err(CliError::user("no team session is running for this project")
            .with_hint("`troupe team start claude gemini codex` starts one"));
    }
    let Socket::Name(name) = own.socket() else { unreachable!("a project's socket is a name") };
    if Socket::from_env().is_some() {
        // Inside tmux: attaching would nest; tell the person how to reach it instead.
        note(&format!("inside tmux: run `TMUX= tmux -L {name} attach -t {}` in a new window", super::tmux::SESSION));
        return Ok(ExitCode::SUCCESS);
    }
    let err = std::process::Command::new("tmux").args(["-L", name, "attach", "-t", super::tmux::SESSION]).exec();
    Err(CliError::user("cannot run tmux attach").with_source(&err))
}
