//! The `troupe` binary: parse, run, print the error chain, choose the exit code.

mod cli;
mod commands;
mod error;
mod help;
mod output;
mod project;

use std::process::ExitCode;

use clap::FromArgMatches;

fn main() -> ExitCode {
    // `troupe hook <engine> <event>` runs on every tool call of every agent: answer it
    // before building the command tree and the logger.
    if let Some(code) = commands::hook::fast_path() {
        return code;
    }
    // The derived tree, with the grouped root help and every command's examples.
    let cli = cli::Cli::from_arg_matches(&help::command().get_matches()).unwrap_or_else(|e| e.exit());
    output::init_logging(cli.global.verbose);
    match commands::dispatch(cli) {
        Ok(code) => code,
        Err(err) => err.report(),
    }
}
