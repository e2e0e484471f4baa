//! The `troupe` binary: parse, run, print the error chain, choose the exit code.

mod cli;
mod commands;
mod error;
mod help;
mod live;
mod output;
mod project;

use std::process::ExitCode;

use clap::{FromArgMatches, Parser};

/// mimalloc instead of glibc's allocator: a plan import of 100,000 work
/// items makes millions of small allocations, and glibc's malloc, free and
/// consolidation were about 15 % of its CPU (BENCHMARKS.md, "Plan import").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The hidden verb that runs the agents' guardian.
pub(crate) const GUARD_VERB: &str = "__guard";

/// The hidden verb that hosts a hook answerer until stdin ends (tests, benchmarks).
const ANSWERER_VERB: &str = "__hook-answerer";

fn main() -> ExitCode {
    // The guardian of this process's agents and gate commands (started at the
    // first spawn): plumbing, never typed by a person.
    if std::env::args_os().nth(1).is_some_and(|a| a == GUARD_VERB) && std::env::args_os().len() == 2 {
        return troupe_engine::supervisor::guard::main();
    }
    // Named before the hook's fast path too: a hook that runs a quality gate
    // and is killed with its engine must not leave the gate's command running.
    if let Ok(me) = std::env::current_exe() {
        troupe_engine::supervisor::guard::install(me, vec![GUARD_VERB.to_string()]);
        use troupe_engine::supervisor::guard;
        troupe_gate::quality::watch_groups_with(troupe_gate::quality::GroupWatcher {
            ready: guard::ready,
            watch: guard::watch,
            unwatch: guard::unwatch,
        });
    }
    // `troupe hook <engine> <event>` runs on every tool call of every agent: answer it
    // before building the command tree and the logger.
    if let Some(code) = commands::hook::fast_path() {
        return code;
    }
    if std::env::args_os().nth(1).is_some_and(|a| a == ANSWERER_VERB) && std::env::args_os().len() == 2 {
        return commands::hook::answerer::serve_until_stdin_ends();
    }
    // Help is rendered from the derived tree decorated with the grouped root
    // help and every command's examples; other calls skip building that.
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let wants_help = args.len() == 1 || args.iter().skip(1).any(|a| a == "-h" || a == "--help" || a == "help");
    let parsed = if wants_help {
        help::command().try_get_matches_from(args).and_then(|m| cli::Cli::from_arg_matches(&m))
    } else {
        cli::Cli::try_parse_from(args)
    };
    let cli = match parsed {
        Ok(cli) => cli,
        Err(e) => return usage_error(e),
    };
    output::init_logging(cli.global.verbose);
    match commands::dispatch(cli) {
        Ok(code) => code,
        Err(err) => err.report(),
    }
}

/// A command line clap refused. Help and version go to stdout as usual; a
/// usage error under `--json` is also one JSON document on stdout, so a script
/// always gets exactly one.
fn usage_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    let code = u8::try_from(e.exit_code()).unwrap_or(2);
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        let _ = e.print();
        return ExitCode::from(code);
    }
    if std::env::args_os().skip(1).take_while(|a| a != "--").any(|a| a == "--json") {
        output::set_json_mode(true);
        let text = e.render().to_string();
        // clap's message up to its usage block, on one line.
        let head = text.split("\n\n").next().unwrap_or_default().trim_start_matches("error: ");
        let message = head.split_whitespace().collect::<Vec<_>>().join(" ");
        let err = error::CliError::usage(message).with_hint("run the command with --help for its usage");
        // The JSON document, then clap's full text (with its suggestions) on stderr.
        err.report_json_only();
        let _ = e.print();
        return ExitCode::from(code);
    }
    let _ = e.print();
    ExitCode::from(code)
}
