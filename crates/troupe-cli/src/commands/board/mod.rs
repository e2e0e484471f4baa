//! `troupe board …`: the shared task board (seed 003, B1).

use std::process::ExitCode;

use clap::Subcommand;
use troupe_store::{Store, StoreError, Task};

use crate::cli::GlobalArgs;
use crate::error::{CliError, CliResult};

mod assign;
mod claim;
mod complete;
mod create;
mod gate;
mod import;
mod list;
mod release;
mod show;

#[derive(Debug, Subcommand)]
pub enum BoardCommand {
    /// List tasks (all, or filtered), or those available to an agent.
    List(list::ListArgs),
    /// Create a task; prints its id.
    Create(create::CreateArgs),
    /// Reserve a pending task for an agent.
    Assign(assign::AssignArgs),
    /// Claim a task (or the next available one) for an agent; prints its id.
    Claim(claim::ClaimArgs),
    /// Complete a task you hold; prints the tasks it unblocked.
    Complete(complete::CompleteArgs),
    /// Put a task back to pending and unassigned.
    Release(release::ReleaseArgs),
    /// Show one task.
    Show(show::ShowArgs),
    /// Load a feature's tasks.yaml onto the board (the same plan again is a no-op).
    Import(import::ImportArgs),
}

pub fn run(g: &GlobalArgs, cmd: BoardCommand) -> CliResult<ExitCode> {
    match cmd {
        BoardCommand::List(a) => list::run(g, a),
        BoardCommand::Create(a) => create::run(g, a),
        BoardCommand::Assign(a) => assign::run(g, a),
        BoardCommand::Claim(a) => claim::run(g, a),
        BoardCommand::Complete(a) => complete::run(g, a),
        BoardCommand::Release(a) => release::run(g, a),
        BoardCommand::Show(a) => show::run(g, a),
        BoardCommand::Import(a) => import::run(g, a),
    }
}

/// The environment variable every teammate is spawned with: its agent id.
pub const AGENT_ENV: &str = "TROUPE_AGENT_ID";

/// Who is acting when a command names nobody: the agent from the environment,
/// or `user` for a person at a terminal.
pub(crate) fn actor() -> String {
    std::env::var(AGENT_ENV).ok().filter(|a| !a.trim().is_empty()).unwrap_or_else(|| "user".to_string())
}

/// The agent a command acts for: `--agent` (which clap fills from
/// `$TROUPE_AGENT_ID` when absent), or a usage error that says how to give one.
pub(crate) fn require_agent(agent: Option<String>, verb: &str) -> CliResult<String> {
    match agent.filter(|a| !a.trim().is_empty()) {
        Some(a) => Ok(a),
        None => Err(CliError::usage(format!("`troupe {verb}` needs an agent id, and none was given")).with_hint(
            format!("pass `--agent <id>`, or set {AGENT_ENV} (troupe sets it for every teammate it spawns)"),
        )),
    }
}

/// Open the project's store (SQLite at `.troupe/state/troupe.db` unless
/// `[store]` in `.troupe/config.toml` says otherwise), every page checked
/// first: a damaged database is refused by `board`, `msg` and every other
/// store command exactly as a run refuses it (exit 3, the file, the fix),
/// never read half or written to.
pub(crate) fn open_store(g: &GlobalArgs) -> CliResult<Box<dyn Store>> {
    open_store_in(&crate::project::find(g)?)
}

/// [`open_store`] for a project already found.
pub(crate) fn open_store_in(project: &troupe_project::Project) -> CliResult<Box<dyn Store>> {
    let store_config = crate::project::load_config(project)?.store;
    troupe_store::open_checked(project.layout(), &store_config).map_err(store_error)
}

/// Turn a store error into what the user sees, with a hint for each kind.
pub(crate) fn store_error(err: StoreError) -> CliError {
    use StoreError as E;
    let message = err.to_string();
    match &err {
        E::TaskNotFound(_) => CliError::user(message).with_hint("`troupe board list` shows the tasks on the board"),
        E::NotClaimable { reason: troupe_store::ClaimRefusal::Blocked(_), .. } => CliError::user(message)
            .with_hint("complete the blocking tasks first; `troupe board list --available` shows what can be claimed"),
        E::NotClaimable { .. } => {
            CliError::user(message).with_hint("`troupe board list --available --agent <id>` shows what can be claimed")
        }
        E::NotAssignee { .. } => CliError::user(message)
            .with_hint("only the agent holding a task may do this; `troupe board show <id>` shows who holds it"),
        E::Cycle { .. } | E::UnknownBlocker { .. } => {
            CliError::user(message).with_hint("`troupe board list` shows the existing task ids")
        }
        E::MessageNotFound(_) | E::NotRecipient { .. } => {
            CliError::user(message).with_hint("`troupe msg inbox --agent <id>` lists an agent's messages")
        }
        E::AgentNotFound(_) => CliError::user(message).with_hint("`troupe agent list` shows the registered agents"),
        E::HostNotFound(_) => CliError::user(message).with_hint("`troupe worker list` shows the registered workers"),
        E::SessionNotFound(_) => {
            CliError::user(message).with_hint("`/sessions` (or `troupe chat --sessions`) lists the saved sessions")
        }
        E::PlanChanged { feature, changes } => {
            let mut e = CliError::user(format!("the plan of `{feature}` changed since it was imported"));
            e.causes.extend(changes.iter().cloned());
            e.with_hint(
                "the board keeps the plan it imported and never merges a changed one; \
                 `troupe board import <feature> --replace` puts the new plan in its place, \
                 or create tasks for the changes with `troupe board create --feature`",
            )
        }
        _ if err.is_refusal() => CliError::user(message),
        E::Corrupt { .. } | E::Foreign { .. } => CliError::config(message).with_source(&err).with_hint(
            "move the file aside (it is recreated empty on next use), or restore it from a backup; \
             `sqlite3 <file> .recover` may save its contents",
        ),
        E::NewerSchema { .. } => CliError::config(message).with_hint("upgrade troupe to use this project"),
        E::UnsupportedBackend(_) => CliError::config(message).with_hint("set `backend = \"sqlite\"` under [store]"),
        E::PostgresUnavailable { .. } => CliError::config(message).with_hint(
            "check `[store] url` in .troupe/config.toml (or TROUPE_DATABASE_URL) and that the server is reachable",
        ),
        _ if err.is_busy() => CliError::internal(message)
            .with_source(&err)
            .with_hint("another troupe process held the database too long; try again"),
        _ => CliError::internal(message).with_source(&err),
    }
}

/// One task as a row of `board list`'s table: id, status, assignee, subject.
pub(crate) fn task_row(t: &Task) -> Vec<String> {
    let state = if t.blocked && t.status == troupe_store::TaskStatus::Pending {
        "blocked".to_string()
    } else {
        t.status.to_string()
    };
    vec![t.id.clone(), state, t.assignee.clone().unwrap_or_else(|| "-".into()), t.subject.clone()]
}
