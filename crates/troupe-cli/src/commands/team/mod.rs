//! `troupe team …` (seed 003 B6): agent CLIs side by side in tmux panes, each
//! wired like a Lead teammate, that a person watches and talks to.
//!
//! `start` makes the panes (`tmux.rs`: troupe's own server per project, or
//! the session troupe runs in); each pane runs `troupe team pane` (`pane.rs`),
//! which wires, sandboxes and registers its agent, runs the agent CLI as its
//! child and records the end. What troupe knows of a pane is its member file
//! (`.troupe/state/team/<agent>.json`, written by the pane itself) and the
//! registry, whose status the hooks keep (`READY` at the prompt,
//! `PROCESSING` at work): never the pane's text.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;
use serde::{Deserialize, Serialize};
use troupe_core::layout::Layout;

use crate::cli::GlobalArgs;
use crate::error::CliResult;

mod list;
pub(crate) mod pane;
mod start;
mod stop;
pub(crate) mod tmux;

#[derive(Debug, Subcommand)]
pub enum TeamCommand {
    /// Start agent CLIs in tmux panes, each wired like a Lead teammate.
    Start(start::StartArgs),
    /// The team's agents: pane, process, status.
    List(list::ListArgs),
    /// Attach this terminal to the team's tmux session.
    Attach(stop::AttachArgs),
    /// Stop the team: no pane and no process of it is left.
    Stop(stop::StopArgs),
    /// Run one agent in the pane it was started in (used by `team start`).
    #[command(hide = true)]
    Pane(pane::PaneArgs),
}

pub fn run(g: &GlobalArgs, cmd: TeamCommand) -> CliResult<ExitCode> {
    match cmd {
        TeamCommand::Start(a) => start::run(g, a),
        TeamCommand::List(a) => list::run(g, a),
        TeamCommand::Attach(a) => stop::attach(g, a),
        TeamCommand::Stop(a) => stop::run(g, a),
        TeamCommand::Pane(a) => pane::run(g, a),
    }
}

/// One agent of the team, as its pane recorded it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Member {
    /// Its agent id (the registry's, `$TROUPE_AGENT_ID`).
    pub agent: String,
    /// Its engine.
    pub engine: String,
    /// Its role.
    pub role: String,
    /// The tmux server of its pane.
    pub socket: tmux::Socket,
    /// Its pane (`%N`).
    pub pane: String,
    /// The pane's process (`troupe team pane`), leader of its process group.
    pub pid: u32,
}

/// Where the member files are.
pub(crate) fn members_dir(layout: &Layout) -> PathBuf {
    layout.state_dir().join("team")
}

fn member_file(layout: &Layout, agent: &str) -> PathBuf {
    members_dir(layout).join(format!("{agent}.json"))
}

/// Why the pane of `agent` could not start its agent (written by the pane).
fn error_file(layout: &Layout, agent: &str) -> PathBuf {
    members_dir(layout).join(format!("{agent}.error"))
}

/// The member `agent`, if its pane recorded one.
pub(crate) fn member(layout: &Layout, agent: &str) -> Option<Member> {
    let text = std::fs::read_to_string(member_file(layout, agent)).ok()?;
    serde_json::from_str(&text).ok()
}

/// Every member, by agent id.
pub(crate) fn members(layout: &Layout) -> Vec<Member> {
    let Ok(dir) = std::fs::read_dir(members_dir(layout)) else { return Vec::new() };
    let mut out: Vec<Member> = dir
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
        .filter_map(|e| serde_json::from_str(&std::fs::read_to_string(e.path()).ok()?).ok())
        .collect();
    out.sort_by(|a: &Member, b| a.agent.cmp(&b.agent));
    out
}

fn write_member(layout: &Layout, m: &Member) -> std::io::Result<()> {
    std::fs::create_dir_all(members_dir(layout))?;
    let text = serde_json::to_string_pretty(m).map_err(std::io::Error::other)?;
    troupe_project::write_atomic(&member_file(layout, &m.agent), text.as_bytes())
}

fn remove_member(layout: &Layout, agent: &str) {
    let _ = std::fs::remove_file(member_file(layout, agent));
}
