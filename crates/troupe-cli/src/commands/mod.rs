//! One module per noun, one file per verb. `dispatch` is a flat match.

use std::process::ExitCode;

use crate::cli::{Cli, Command};
use crate::error::CliError;

pub mod adhoc;
pub mod agent;
pub mod ask;
pub mod audit;
pub mod board;
pub mod chat;
pub mod cost;
pub mod doctor;
pub mod engines;
pub mod hook;
pub mod init;
pub mod lead;
pub mod locks;
pub mod mcp;
pub mod msg;
pub mod plans;
pub mod policy;
pub mod release;
pub mod replay;
pub mod review;
pub mod revise;
pub mod roadmap;
pub mod serve;
pub mod shell;
pub mod skill;
pub mod spec;
pub mod store;
pub mod tasks;
pub mod team;
pub mod worker;
pub mod workflow;

/// Whether `command` may start agents whose hooks its answerer should answer
/// (`hook::answerer`): the Lead's commands, live teams, single agents.
fn spawns_teammates(command: &Command) -> bool {
    matches!(
        command,
        Command::Worker(_)
            | Command::Team(_)
            | Command::Agent(_)
            | Command::Ask(_)
            | Command::Chat(_)
            | Command::Workflow(_)
            | Command::Adhoc(_)
            | Command::Serve(_)
            | Command::Review(_)
            | Command::Roadmap(_)
            | Command::Revise(_)
            | Command::Design(_)
            | Command::Impl(_)
            | Command::Run(_)
            | Command::Resume(_)
            | Command::Demo(_)
            | Command::Replay(_)
    )
}

/// Run the parsed command line.
pub fn dispatch(cli: Cli) -> Result<ExitCode, CliError> {
    let g = &cli.global;
    crate::output::set_json_mode(g.json);
    let answerer = if spawns_teammates(&cli.command) { hook::answerer::host() } else { None };
    let result = match cli.command {
        Command::Init(args) => init::run(g, args),
        Command::Spec(cmd) => spec::run(g, cmd),
        Command::Policy(cmd) => policy::run(g, cmd),
        Command::Tasks(cmd) => tasks::run(g, cmd),
        Command::Mcp(cmd) => mcp::run(g, cmd),
        Command::Audit(cmd) => audit::run(g, cmd),
        Command::Board(cmd) => board::run(g, cmd),
        Command::Store(cmd) => store::run(g, cmd),
        Command::Worker(args) => worker::run(g, args),
        Command::Msg(cmd) => msg::run(g, cmd),
        Command::Team(cmd) => team::run(g, cmd),
        Command::Engines(cmd) => engines::run(g, cmd),
        Command::Agent(cmd) => agent::run(g, cmd),
        Command::Ask(args) => ask::run(g, args),
        Command::Chat(args) => chat::run(g, args),
        Command::Workflow(args) => workflow::run(g, args),
        Command::Adhoc(args) => adhoc::run(g, args),
        Command::Serve(args) => serve::run(g, args),
        Command::Hook(args) => hook::run(g, args),
        Command::Kill(args) => agent::kill::run(g, args),
        Command::Approve(args) => plans::approve(g, args),
        Command::Reject(args) => plans::reject(g, args),
        Command::Lock(args) => locks::lock::run(g, args),
        Command::Unlock(args) => locks::unlock::run(g, args),
        Command::Locks(args) => locks::list::run(g, args),
        Command::Skill(cmd) => skill::run(g, cmd),
        Command::Release(args) => release::run(g, args),
        Command::Review(cmd) => review::run(g, cmd),
        Command::Roadmap(cmd) => roadmap::run(g, cmd),
        Command::Revise(args) => revise::run(g, args),
        Command::Design(args) => lead::design::run(g, args),
        Command::Impl(args) => lead::implement::run(g, args),
        Command::Run(args) => lead::run::run(g, args),
        Command::Resume(args) => lead::resume::run(g, args),
        Command::Status(args) => lead::status::run(g, args),
        Command::Cost(args) => cost::run(g, args),
        Command::Replay(args) => replay::run(g, args),
        Command::Demo(args) => lead::demo::run(g, args),
        Command::Doctor(args) => doctor::run(g, args),
        Command::Completions(args) => shell::completions(args),
        Command::Man => shell::man(),
        Command::ScriptedAgent(args) => lead::scripted_agent::run_agent(g, args),
    };
    if let Some(answerer) = answerer {
        let (answered, declined) = answerer.counts.load();
        tracing::debug!(target: "hook_answerer", answered, declined, "hook calls of this command's agents");
    }
    result
}
