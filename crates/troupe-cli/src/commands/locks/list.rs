use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use crate::cli::GlobalArgs;
use crate::commands::board::{open_store_in, store_error};
use crate::error::CliResult;
use crate::output::{ago, escape, print_json, print_table};

/// The file locks held now (stale ones are released on the way); with
/// `--history <path>`, the writes troupe recorded to that file, newest first.
#[derive(Debug, Args)]
pub struct LocksArgs {
    /// Show who wrote this file, when and for which task, instead of the locks.
    #[arg(long, value_name = "PATH")]
    pub history: Option<PathBuf>,
    /// At most this many history entries.
    #[arg(long, default_value_t = 50)]
    pub limit: u32,
}

pub fn run(g: &GlobalArgs, args: LocksArgs) -> CliResult<ExitCode> {
    let project = crate::project::find(g)?;
    let store = open_store_in(&project)?;
    let now = jiff::Timestamp::now();
    let opt = |v: &Option<String>| v.as_deref().map(|s| escape(s).into_owned()).unwrap_or_else(|| "-".into());
    if let Some(path) = &args.history {
        let path = super::key(g, &project, path)?;
        let history = store.file_history(&path, args.limit).map_err(store_error)?;
        if g.json {
            print_json(&history);
        } else {
            let rows: Vec<Vec<String>> = history
                .iter()
                .map(|c| vec![ago(c.at, now), escape(&c.agent).into_owned(), opt(&c.task), c.source.as_str().into()])
                .collect();
            print_table(&["WHEN", "AGENT", "TASK", "SEEN BY"], &rows, &[]);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let locks = store.file_locks().map_err(store_error)?;
    if g.json {
        print_json(&locks);
    } else {
        let rows: Vec<Vec<String>> = locks
            .iter()
            .map(|l| {
                let left = l.expires_at.as_second().saturating_sub(now.as_second());
                vec![
                    escape(&l.path).into_owned(),
                    escape(&l.agent).into_owned(),
                    ago(l.since, now),
                    format!("{}m{:02}s", left / 60, left % 60),
                    opt(&l.task),
                ]
            })
            .collect();
        print_table(&["PATH", "HOLDER", "SINCE", "LEASE LEFT", "TASK"], &rows, &[]);
    }
    Ok(ExitCode::SUCCESS)
}
