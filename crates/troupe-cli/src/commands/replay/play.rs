//! The replayed run itself: a child `troupe replay --play` in the scratch
//! copy (its own process group, every teammate on the scripted engine with
//! the replay script), watched by the parent, which stops the whole run at
//! `--until`'s event. The scratch store refuses every event past it
//! (`TROUPE_REPLAY_LAST_EVENT`), so the board and mailbox stay as they were
//! at that event while the processes are stopped.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

use nix::sys::signal::Signal;
use troupe_core::layout::Layout;
use troupe_lead::driver::record::{RECORD_FILE, RunRecord};
use troupe_scripted::Script;
use troupe_store::{SqliteStore, Store};

use crate::cli::GlobalArgs;
use crate::commands::lead::LeadFlags;
use crate::error::{CliError, CliResult};

/// The replay script in the scratch copy (its state folder: never committed).
fn script_in(scratch: &Path) -> std::path::PathBuf {
    Layout::new(scratch).state_dir().join("replay-script.yaml")
}

/// The scratch copy's store (always the snapshot's SQLite file).
pub fn scratch_store(scratch: &Path) -> CliResult<Box<dyn Store>> {
    SqliteStore::open(&Layout::new(scratch).database_file())
        .map(|s| Box::new(s) as Box<dyn Store>)
        .map_err(crate::commands::board::store_error)
}

/// How the child run ended.
pub struct Played {
    /// The run's outcome, or `stopped` at `--until`.
    pub outcome: String,
}

/// Start the replayed run in `scratch` and wait for it, or stop it at event `until`.
pub fn spawn(
    scratch: &Path,
    run_dir: &Path,
    record: &RunRecord,
    script: &Script,
    until: Option<u64>,
) -> CliResult<Played> {
    let io = |what: &str, e: std::io::Error| CliError::internal(format!("replay: cannot {what}")).with_source(&e);
    // JSON is YAML: the scripted engine reads it as it reads any script.
    let text = serde_json::to_string_pretty(script).expect("a script serializes");
    std::fs::write(script_in(scratch), text).map_err(|e| io("write the replay script", e))?;
    std::fs::copy(run_dir.join(RECORD_FILE), super::record_in(scratch)).map_err(|e| io("copy the run's record", e))?;
    let log = std::fs::File::create(Layout::new(scratch).state_dir().join("replay.log"))
        .map_err(|e| io("create the replay's log", e))?;
    let troupe = std::env::current_exe().map_err(|e| io("find the troupe executable", e))?;
    let mut cmd = Command::new(troupe);
    cmd.arg("--json")
        .arg("-C")
        .arg(scratch)
        .args(["replay", &record.run, "--play"])
        .arg(super::record_in(scratch))
        .current_dir(scratch)
        // Never the user's PostgreSQL: the scratch copy's store is the snapshot.
        .env_remove(troupe_store::DATABASE_URL_ENV)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log)
        .process_group(0);
    let last = until.map(|n| record.events_before + n as i64);
    if let Some(last) = last {
        cmd.env(troupe_store::sqlite::REPLAY_LAST_EVENT_ENV, last.to_string());
    }
    if let Some(roadmap) = &record.roadmap {
        cmd.env(troupe_lead::driver::record::AGENT_NUMBERS_ENV, roadmap.pinned_numbers());
    }
    let mut child = cmd.spawn().map_err(|e| io("start the replayed run", e))?;
    let mut stdout = child.stdout.take().expect("stdout is piped");
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        let _ = stdout.read_to_string(&mut out);
        out
    });
    loop {
        if let Some(last) = last
            && reached(scratch, last)
        {
            stop(scratch, child.id());
            let _ = child.wait();
            return Ok(Played { outcome: "stopped".into() });
        }
        if child.try_wait().map_err(|e| io("wait for the replayed run", e))?.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = reader.join().unwrap_or_default();
    let report: serde_json::Value = serde_json::from_str(out.trim()).map_err(|_| {
        let log = std::fs::read_to_string(Layout::new(scratch).state_dir().join("replay.log")).unwrap_or_default();
        CliError::internal("the replayed run did not finish with a report")
            .with_hint(format!("its output: {}", troupe_scripted::tail(&log, 20)))
    })?;
    // A roadmap run says whether it is complete.
    let complete = report.get("complete").and_then(|c| c.as_bool()).map(|c| if c { "completed" } else { "incomplete" });
    let outcome = report.get("outcome").and_then(|o| o.as_str()).or(complete).unwrap_or("unknown").to_string();
    Ok(Played { outcome })
}

/// True once the scratch store holds event `last`.
fn reached(scratch: &Path, last: i64) -> bool {
    scratch_store(scratch).ok().and_then(|s| s.events_since(last - 1, 1).ok()).is_some_and(|p| !p.is_empty())
}

/// Kill the replayed Lead (its process group) and every teammate it started
/// (each its own process group, checked to be that agent's in this copy).
fn stop(scratch: &Path, lead: u32) {
    use troupe_engine::supervisor::{is_agent_process, signal_group};
    let _ = signal_group(lead, Signal::SIGKILL);
    let agents = scratch_store(scratch).ok().and_then(|s| s.agents().ok()).unwrap_or_default();
    for a in agents {
        if let Some(pid) = a.pid
            && is_agent_process(pid, &a.id, scratch)
        {
            let _ = signal_group(pid, Signal::SIGKILL);
        }
    }
}

/// The child's side: run the recorded job here, every teammate on the
/// scripted engine with the replay script.
pub fn play(g: &GlobalArgs, record_file: &Path) -> CliResult<ExitCode> {
    let project = crate::project::find(g)?;
    let text = std::fs::read_to_string(record_file)
        .map_err(|e| CliError::internal(format!("cannot read {}", record_file.display())).with_source(&e))?;
    let record: RunRecord = serde_json::from_str(&text)
        .map_err(|e| CliError::internal(format!("{} is not a run record", record_file.display())).with_source(&e))?;
    let flags = LeadFlags {
        engine: Some("scripted".into()),
        no_commit: !record.commit,
        commit: false,
        script: Some(script_in(project.root())),
        serve: None,
        budget: record.budget,
    };
    match (record.job, record.roadmap) {
        (Some(job), _) => crate::commands::lead::drive(g, &project, &record.feature, job, &flags),
        (None, Some(roadmap)) => {
            let reviews = crate::commands::roadmap::record::review_flags(&roadmap.review_args)
                .map_err(|e| CliError::internal(format!("the roadmap run's review flags: {e}")))?;
            crate::commands::roadmap::run::run(g, crate::commands::roadmap::run::RunArgs { reviews, flags })
        }
        (None, None) => {
            Err(CliError::internal(format!("{} records neither a job nor a roadmap", record_file.display())))
        }
    }
}
