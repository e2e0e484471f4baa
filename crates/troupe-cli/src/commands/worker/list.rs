//! `troupe worker list`.

use std::process::ExitCode;

use clap::Args;
use troupe_store::worker::{Host, Job};

use crate::cli::GlobalArgs;
use crate::error::CliResult;
use crate::output::{ago, note, print_json, print_table};

/// List the worker hosts.
#[derive(Debug, Args)]
pub struct ListArgs {}

/// A host as listed: the store's, with its teammates and whether its lease passed.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct Listed {
    #[serde(flatten)]
    host: Host,
    /// Its teammates now (agent ids of the jobs it holds).
    teammates: Vec<String>,
    /// `up`, `draining`, `stale` (its lease passed: lost) or `left`.
    state: &'static str,
}

/// Every host with its teammates, from `hosts` and `jobs`.
pub(crate) fn listed(hosts: Vec<Host>, jobs: &[Job]) -> Vec<Listed> {
    let now = jiff::Timestamp::now();
    hosts
        .into_iter()
        .map(|host| {
            let teammates = jobs
                .iter()
                .filter(|j| j.host.as_deref() == Some(host.name.as_str()) && !j.state.is_final())
                .map(|j| j.queued.agent.clone())
                .collect();
            let state = match (&host.lease_until, host.draining) {
                (None, _) => "left",
                _ if host.stale(now) => "stale",
                (_, true) => "draining",
                _ => "up",
            };
            Listed { host, teammates, state }
        })
        .collect()
}

/// The text lines of `hosts` (for `worker list` and `status`).
pub(crate) fn rows(hosts: &[Listed]) -> Vec<Vec<String>> {
    let now = jiff::Timestamp::now();
    hosts
        .iter()
        .map(|l| {
            let h = &l.host;
            vec![
                h.name.clone(),
                l.state.to_string(),
                format!("{}/{}", h.running, h.max),
                h.load.map(|v| format!("{v:.2}")).unwrap_or_else(|| "-".into()),
                if h.engines.is_empty() { "any".into() } else { h.engines.join(",") },
                l.teammates.join(","),
                ago(h.seen_at, now),
            ]
        })
        .collect()
}

/// The header of [`rows`].
pub(crate) const HEADER: [&str; 7] = ["host", "state", "teammates", "load", "engines", "running", "seen"];

pub fn run(g: &GlobalArgs, _args: ListArgs) -> CliResult<ExitCode> {
    let store = crate::commands::board::open_store(g)?;
    let store_error = crate::commands::board::store_error;
    let jobs = store.jobs(None).map_err(store_error)?;
    let hosts = listed(store.hosts().map_err(store_error)?, &jobs);
    if g.json {
        print_json(&hosts);
    } else if hosts.is_empty() {
        note("no worker has registered; start one with `troupe worker` on a host with a checkout of the project");
    } else {
        print_table(&HEADER, &rows(&hosts), &[2, 3]);
    }
    Ok(ExitCode::SUCCESS)
}
