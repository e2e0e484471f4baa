//! The command tree. Each verb's arguments live beside its implementation in
//! `commands/<noun>/`; this file only names the nouns.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::commands;

/// Spec-driven development with teams of AI coding agents, enforced by program.
#[derive(Debug, Parser)]
#[command(name = "troupe", version, about, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// Flags every command accepts.
#[derive(Debug, Args, Clone)]
pub struct GlobalArgs {
    /// Print machine-readable JSON on stdout instead of text.
    #[arg(long, global = true, help_heading = "Global options")]
    pub json: bool,
    /// Run as if troupe was started in DIR (the project root or any folder below it).
    #[arg(short = 'C', long = "project", global = true, value_name = "DIR", help_heading = "Global options")]
    pub project: Option<PathBuf>,
    /// Log more (repeat for more detail). Logs go to stderr.
    #[arg(short, long, global = true, action = clap::ArgAction::Count, help_heading = "Global options")]
    pub verbose: u8,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create the .troupe/ layout in a project (idempotent; never overwrites your files).
    Init(commands::init::InitArgs),
    /// Specs: create, inspect, gate, block, unblock and revise features.
    #[command(subcommand)]
    Spec(commands::spec::SpecCommand),
    /// Policies: who may write which artifact.
    #[command(subcommand)]
    Policy(commands::policy::PolicyCommand),
    /// Task plans: validate a feature's tasks.yaml and show its waves.
    #[command(subcommand)]
    Tasks(commands::tasks::TasksCommand),
    /// The MCP gateway: serve it for an agent, check its backends.
    #[command(subcommand)]
    Mcp(commands::mcp::McpCommand),
    /// The gateway's audit log: stats, denials, export, thinking.
    #[command(subcommand)]
    Audit(commands::audit::AuditCommand),
    /// The shared task board: list, create, assign, claim, complete, release, show, import.
    #[command(subcommand)]
    Board(commands::board::BoardCommand),
    /// The project's store: copy it to PostgreSQL (or back) with `store migrate --to`.
    #[command(subcommand)]
    Store(commands::store::StoreCommand),
    /// Run teammates on this host for a Lead elsewhere (`[team] executors = "workers"`); `list`, `stop`.
    Worker(commands::worker::WorkerArgs),
    /// Messages between agents: send, inbox.
    #[command(subcommand)]
    Msg(commands::msg::MsgCommand),
    /// Live teams: agent CLIs side by side in tmux panes (start, list, attach, stop).
    #[command(subcommand)]
    Team(commands::team::TeamCommand),
    /// Engines: the agent CLIs troupe can run, installed or not, and their versions.
    #[command(subcommand)]
    Engines(commands::engines::EnginesCommand),
    /// Serve the HTTP API (REST, live events, A2A); loopback by default, a token anywhere else.
    Serve(commands::serve::ServeArgs),
    /// One teammate: run it, list agents, read their logs, stop them.
    #[command(subcommand)]
    Agent(commands::agent::AgentCommand),
    /// Ask an agent one question under a role (prompt or stdin); one answer, or one JSON document.
    Ask(commands::ask::AskArgs),
    /// Talk with an agent in a REPL: switch roles and models, save, resume, fork and export sessions.
    Chat(commands::chat::ChatArgs),
    /// Restricted mode: carry out a task with skill scripts only; a failure's context is saved for adhoc.
    Workflow(commands::workflow::WorkflowArgs),
    /// Full-access mode: investigate and fix, optionally from a workflow's failure context.
    Adhoc(commands::adhoc::AdhocArgs),
    /// Stop an agent gracefully: ask it (shutdown_request), then SIGTERM; `-f` at once.
    Kill(commands::agent::kill::KillArgs),
    /// Approve a teammate's plan (`--list`: the plans waiting for a decision).
    Approve(commands::plans::ApproveArgs),
    /// Reject a teammate's plan with the reason to revise it by.
    Reject(commands::plans::RejectArgs),
    /// Lock a file for an agent: the hooks deny other agents' writes to it.
    Lock(commands::locks::lock::LockArgs),
    /// Release a file lock.
    Unlock(commands::locks::unlock::UnlockArgs),
    /// The file locks held now, or a file's write history (`--history <path>`).
    Locks(commands::locks::list::LocksArgs),
    /// Answer an engine's hook call (stdin: the event JSON). Installed by `troupe init --claude` etc.
    #[command(hide = true)]
    Hook(commands::hook::HookArgs),
    /// Skills: print one and record it as invoked (`troupe skill use <name>`).
    #[command(subcommand)]
    Skill(commands::skill::SkillCommand),
    /// Release: bump the version, commit, tag v{version}, branch release/v{version}.
    Release(commands::release::ReleaseArgs),
    /// Review a feature: Inspectors and an Auditor, recovery, consensus, auto-fix loop.
    #[command(subcommand)]
    Review(commands::review::ReviewCommand),
    /// Roadmaps: several features in dependency waves; blocked features; fix and skip.
    #[command(subcommand)]
    Roadmap(commands::roadmap::RoadmapCommand),
    /// Revise an implemented feature and run the pipeline again (through the roadmap when it has one).
    Revise(commands::revise::ReviseArgs),
    /// Design a feature: the Architect writes design.md and research.md (phase gate first).
    Design(commands::lead::design::DesignArgs),
    /// Implement a designed feature: tasks.yaml, then Builders in waves, quality gates, commit.
    Impl(commands::lead::implement::ImplArgs),
    /// Design and implement a feature in one go, with live progress and a summary.
    Run(commands::lead::run::RunArgs),
    /// Continue a feature from spec.yaml and the board, never redoing completed tasks.
    Resume(commands::lead::resume::ResumeArgs),
    /// What the team cost: tokens and dollars by run, feature, role, agent, model, day or 5-hour block.
    Cost(commands::cost::CostArgs),
    /// Run a recorded run again with no model calls, in a scratch copy, and compare its decisions.
    Replay(commands::replay::ReplayArgs),
    /// Where features stand: phase, board progress, running teammates, last error.
    Status(commands::lead::status::StatusArgs),
    /// Run troupe's main job on a sample project with the built-in scripted engine.
    Demo(commands::lead::demo::DemoArgs),
    /// Check that this project can run: config, engines, Common Commands, git, hooks, store, specs.
    Doctor(commands::doctor::DoctorArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) on stdout.
    Completions(commands::shell::CompletionsArgs),
    /// Print troupe's man page (roff) on stdout.
    Man,
    /// The built-in scripted engine, as a teammate process (used by troupe itself).
    #[command(hide = true)]
    ScriptedAgent(commands::lead::scripted_agent::ScriptedAgentArgs),
}
