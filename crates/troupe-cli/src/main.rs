//! The `troupe` binary: parse, run, print the error chain, choose the exit code.

mod cli;
mod commands;
mod error;
mod output;
mod project;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    output::init_logging(cli.global.verbose);
    match commands::dispatch(cli) {
        Ok(code) => code,
        Err(err) => err.report(),
    }
}
