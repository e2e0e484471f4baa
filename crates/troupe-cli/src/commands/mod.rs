//! One module per noun, one file per verb. `dispatch` is a flat match.

use std::process::ExitCode;

use crate::cli::{Cli, Command};
use crate::error::CliError;

pub mod agent;
pub mod audit;
pub mod board;
pub mod cost;
pub mod doctor;
pub mod engines;
pub mod hook;
pub mod init;
pub mod lead;
pub mod mcp;
pub mod msg;
pub mod policy;
pub mod release;
pub mod review;
pub mod revise;
pub mod roadmap;
pub mod serve;
pub mod shell;
pub mod skill;
pub mod spec;
pub mod tasks;

/// Run the parsed command line.
pub fn dispatch(cli: Cli) -> Result<ExitCode, CliError> {
    let g = &cli.global;
    crate::output::set_json_mode(g.json);
    match cli.command {
        Command::Init(args) => init::run(g, args),
        Command::Spec(cmd) => spec::run(g, cmd),
        Command::Policy(cmd) => policy::run(g, cmd),
        Command::Tasks(cmd) => tasks::run(g, cmd),
        Command::Mcp(cmd) => mcp::run(g, cmd),
        Command::Audit(cmd) => audit::run(g, cmd),
        Command::Board(cmd) => board::run(g, cmd),
        Command::Msg(cmd) => msg::run(g, cmd),
        Command::Engines(cmd) => engines::run(g, cmd),
        Command::Agent(cmd) => agent::run(g, cmd),
        Command::Serve(args) => serve::run(g, args),
        Command::Hook(args) => hook::run(g, args),
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
        Command::Demo(args) => lead::demo::run(g, args),
        Command::Doctor(args) => doctor::run(g, args),
        Command::Completions(args) => shell::completions(args),
        Command::Man => shell::man(),
        Command::ScriptedAgent(args) => lead::scripted_agent::run_agent(g, args),
    }
}
