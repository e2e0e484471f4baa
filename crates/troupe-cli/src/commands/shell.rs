//! `troupe completions <shell>` and `troupe man`: generated from the same
//! command tree as `--help` (clap_complete, clap_mangen).

use std::io::Write;
use std::process::ExitCode;

use clap::Args;

use crate::error::{CliError, CliResult};

/// Print a completion script for a shell on stdout.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

pub fn completions(args: CompletionsArgs) -> CliResult<ExitCode> {
    let mut out = Vec::new();
    clap_complete::generate(args.shell, &mut crate::help::command(), "troupe", &mut out);
    write_stdout(&out)
}

pub fn man() -> CliResult<ExitCode> {
    let mut out = Vec::new();
    clap_mangen::Man::new(crate::help::command())
        .render(&mut out)
        .map_err(|e| CliError::internal("cannot render the man page").with_source(&e))?;
    write_stdout(&out)
}

fn write_stdout(bytes: &[u8]) -> CliResult<ExitCode> {
    match std::io::stdout().lock().write_all(bytes) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        // `troupe man | head` is not an error.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(e) => Err(CliError::internal("cannot write to stdout").with_source(&e)),
    }
}
