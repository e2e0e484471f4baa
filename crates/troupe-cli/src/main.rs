//! The `troupe` binary: parse, run, print the error chain, choose the exit code.

mod cli;
mod commands;
mod error;
mod help;
mod output;
mod project;

use std::process::ExitCode;

use clap::{FromArgMatches, Parser};

fn main() -> ExitCode {
    // `troupe hook <engine> <event>` runs on every tool call of every agent: answer it
    // before building the command tree and the logger.
    if let Some(code) = commands::hook::fast_path() {
        return code;
    }
    // Help is rendered from the derived tree decorated with the grouped root
    // help and every command's examples; other calls skip building that.
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let wants_help = args.len() == 1 || args.iter().skip(1).any(|a| a == "-h" || a == "--help" || a == "help");
    let cli = if wants_help {
        cli::Cli::from_arg_matches(&help::command().get_matches_from(args)).unwrap_or_else(|e| e.exit())
    } else {
        cli::Cli::parse_from(args)
    };
    output::init_logging(cli.global.verbose);
    match commands::dispatch(cli) {
        Ok(code) => code,
        Err(err) => err.report(),
    }
}
