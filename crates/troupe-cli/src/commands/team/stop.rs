//! `troupe team stop` and `troupe team attach`.
//!
//! A stop leaves nothing behind: every process of the stopped panes (those in
//! each pane's session, and those that left it but carry the agent's
//! identity) is asked at once — SIGINT, then SIGTERM, then SIGKILL, each step
//! sent in parallel to every group still running (no SIGINT when `[shutdown]
//! graceful_enabled = false`); SIGKILL at once with `--force` — then the panes are closed and, when the whole team stops,
//! troupe's tmux server with them: 0 panes, 0 processes, within 10 s. The
//! panes' guardians are spared the signals: each ends by itself once what it
//! guards is gone, after removing the agent's sandbox folder (killed, it would
//! leave that folder behind), and is killed only if it has not ended in 3 s.
//! A zombie counts as ended: an agent whose pane process went first is
//! reparented to init, which may reap it a second or more later.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Args;
use nix::sys::signal::Signal;
use serde_json::json;
use troupe_core::config::ShutdownConfig;
use troupe_engine::supervisor::{Grace, StopMode, is_agent_process, signal_group};
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
    let mode = stop_mode(args.force, &crate::project::load_config(&project)?.shutdown);
    let started = Instant::now();
    let root = project.root();
    escalate(&chosen, root, mode);
    let guardians = guardians(&chosen);
    end_guardians(&guardians);
    tracing::debug!(ms = started.elapsed().as_millis() as u64, "the team's processes ended");
    let store = open_store_in(&project).ok();
    let own = Socket::for_project(root);
    for m in &chosen {
        // The whole team's own server goes below, with every pane on it.
        if !args.agents.is_empty() || m.socket != own {
            let _ = Tmux::new(m.socket.clone()).kill_pane(&m.pane);
        }
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
        let _ = Tmux::new(own).kill_server();
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

/// How the team's agents are asked to end: SIGKILL at once with `--force`;
/// without the interrupt an agent may answer (its Ctrl-C) when `[shutdown]
/// graceful_enabled = false`, as `troupe kill` then skips its request; else
/// SIGINT and SIGTERM share `[shutdown]`'s timeout, at most [`MOST_GRACE`].
fn stop_mode(force: bool, shutdown: &ShutdownConfig) -> StopMode {
    let grace = shutdown.timeout().min(MOST_GRACE);
    match (force, shutdown.graceful_enabled) {
        (true, _) => StopMode::Force,
        (false, false) => StopMode::Graceful(Grace { interrupt: Duration::ZERO, terminate: grace }),
        (false, true) => StopMode::Graceful(Grace::from_total(grace)),
    }
}

/// After SIGKILL: how long the kernel gets to end what it signalled.
const KILL_WAIT: Duration = Duration::from_secs(1);

/// Ends every process of `members`: each step signals the group of every
/// process still running and waits its grace, or until none runs. A final
/// SIGKILL catches what started meanwhile.
fn escalate(members: &[Member], root: &Path, mode: StopMode) {
    let steps: &[(Signal, Duration)] = match mode {
        StopMode::Force => &[(Signal::SIGKILL, KILL_WAIT), (Signal::SIGKILL, KILL_WAIT)],
        StopMode::Graceful(g) => &[
            (Signal::SIGINT, g.interrupt),
            (Signal::SIGTERM, g.terminate),
            (Signal::SIGKILL, KILL_WAIT),
            (Signal::SIGKILL, KILL_WAIT),
        ],
    };
    // A step with no grace (the interrupt when graceful stops are off) is not sent.
    for &(signal, grace) in steps.iter().filter(|(_, grace)| !grace.is_zero()) {
        let running = processes(members, root);
        if running.is_empty() {
            return;
        }
        for pgid in running.values().collect::<BTreeSet<_>>() {
            let _ = signal_group(*pgid, signal);
        }
        tracing::debug!(%signal, processes = running.len(), "team stop");
        let until = Instant::now() + grace;
        while Instant::now() < until && running.keys().any(|pid| state(*pid).is_some_and(|s| s.running)) {
            std::thread::sleep(Duration::from_millis(25));
        }
    }
}

/// What `/proc/<pid>/stat` says of a process.
struct State {
    /// Not a zombie.
    running: bool,
    pgrp: u32,
    session: u32,
}

fn state(pid: u32) -> Option<State> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command name in parentheses: state ppid pgrp session …
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    Some(State {
        running: *fields.first()? != "Z",
        pgrp: fields.get(2)?.parse().ok()?,
        session: fields.get(3)?.parse().ok()?,
    })
}

/// The running processes of `members`, with their process groups: those in
/// the session of a member's pane (its process leads it), and those that
/// left it but carry the agent's identity in their environment (Claude
/// Code's Bash tool starts a session of its own), read from `/proc`.
fn processes(members: &[Member], root: &Path) -> BTreeMap<u32, u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return BTreeMap::new() };
    let sessions: BTreeSet<u32> = members.iter().map(|m| m.pid).collect();
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        // Not this stop itself, should an agent of the team have run it.
        .filter(|pid| *pid != std::process::id())
        .filter_map(|pid| {
            let s = state(pid).filter(|s| s.running)?;
            let ours = sessions.contains(&s.session) || members.iter().any(|m| is_agent_process(pid, &m.agent, root));
            (ours && !is_guardian(pid)).then_some((pid, s.pgrp))
        })
        .collect()
}

/// The guardians (`troupe __guard`) in the sessions of `members`' panes.
fn guardians(members: &[Member]) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    let sessions: BTreeSet<u32> = members.iter().map(|m| m.pid).collect();
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| state(*pid).is_some_and(|s| s.running && sessions.contains(&s.session)) && is_guardian(*pid))
        .collect()
}

/// Whether `pid` runs `troupe __guard`, an agent process's guardian. A stop
/// spares it: once the process it guards is gone it stops what that left
/// running and removes its sandbox's temporary folders, then ends; killed
/// with the rest (`--force`), it would leave those folders behind.
fn is_guardian(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|c| c.split(|b| *b == 0).nth(1) == Some(crate::GUARD_VERB.as_bytes()))
}

/// How long the guardians get to clean up after the processes they guard.
const GUARDIAN_WAIT: Duration = Duration::from_secs(3);

/// Wait for `guardians`, whose guarded processes ended, to end too; kill
/// any still running after [`GUARDIAN_WAIT`].
fn end_guardians(guardians: &[u32]) {
    let until = Instant::now() + GUARDIAN_WAIT;
    let running = || guardians.iter().copied().filter(|pid| state(*pid).is_some_and(|s| s.running)).collect::<Vec<_>>();
    while Instant::now() < until && !running().is_empty() {
        std::thread::sleep(Duration::from_millis(10));
    }
    for pid in running() {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), Signal::SIGKILL);
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn shutdown(seconds: u64, graceful_enabled: bool) -> ShutdownConfig {
        ShutdownConfig { timeout_seconds: seconds, timeout_ms: None, graceful_enabled }
    }

    #[test]
    fn force_kills_at_once_whatever_the_config_says() {
        assert_eq!(stop_mode(true, &shutdown(30, true)), StopMode::Force);
        assert_eq!(stop_mode(true, &shutdown(30, false)), StopMode::Force);
    }

    #[test]
    fn a_graceful_stop_splits_the_timeout_capped_so_the_team_ends_within_10_s() {
        let g = Grace { interrupt: Duration::from_secs(3), terminate: Duration::from_secs(3) };
        assert_eq!(stop_mode(false, &shutdown(30, true)), StopMode::Graceful(g));
        let g = Grace { interrupt: Duration::from_secs(1), terminate: Duration::from_secs(1) };
        assert_eq!(stop_mode(false, &shutdown(2, true)), StopMode::Graceful(g));
    }

    #[test]
    fn graceful_stops_off_skip_the_interrupt_and_terminate_at_once() {
        let g = Grace { interrupt: Duration::ZERO, terminate: Duration::from_secs(6) };
        assert_eq!(stop_mode(false, &shutdown(30, false)), StopMode::Graceful(g));
    }
}
