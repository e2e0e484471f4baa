//! `troupe replay`: run a recorded run again with zero model calls, in a
//! scratch copy of the project, and say whether the Lead made the same
//! decisions (the same events, the same board).

mod play;
mod scratch;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use serde::Serialize;
use troupe_lead::driver::record::{BoardTask, RunRecord, run_dir};
use troupe_store::{Event, Store};

use crate::cli::GlobalArgs;
use crate::error::{CliError, CliResult};
use crate::output::{print_json, print_line};
use crate::project::find;

/// Run a recorded run again with no model: each teammate is replaced by a
/// scripted agent that replays what its normalised log recorded (its file
/// writes and edits, shell commands, troupe gateway calls, usage and report),
/// so the Lead meets the same teammates and makes the same decisions. The
/// replay runs in a scratch copy (the files and the store as the run found
/// them; the project, its git refs and its store are never written) and
/// compares its events and board with the original's: each actor's events
/// about each subject in order, modulo ids, times, pids and engine names.
///
/// `--until N` stops at the run's Nth event (as `--json` numbers them) and
/// leaves the scratch copy as it was then (its board exactly; its files as
/// the run left them when it was stopped, a moment after) for inspection:
///
///   troupe replay calculator --until 40 --dir /tmp/at40 && troupe -C /tmp/at40 board list
///
/// Every run of `troupe run`, `design`, `impl`, `resume` and `review` is
/// recorded in `.troupe/state/runs/`.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The run: its id as `troupe cost --by run` shows it (`calculator@2026-11-26T07:13:18Z`),
    /// a feature (its latest run; in a roadmap wave, that roadmap run), `roadmap` (the latest
    /// `troupe roadmap run`), or `last` (the latest run).
    pub run: String,
    /// Stop at the run's Nth event (from 1) and leave the scratch copy as it was then.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub until: Option<u64>,
    /// The scratch copy goes here (a new or empty folder); default: a new temporary folder, kept.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Internal: run the recorded job in this (scratch) project, from this record.
    #[arg(long, hide = true, value_name = "RECORD")]
    pub play: Option<PathBuf>,
}

/// What `troupe replay` says.
#[derive(Debug, Serialize)]
pub struct ReplayReport {
    /// The run replayed.
    pub run: String,
    /// The scratch copy.
    pub dir: PathBuf,
    /// How the replayed run ended (`stopped` when `--until` stopped it).
    pub outcome: String,
    /// The replay's events (normalised), numbered from 1.
    pub events: Vec<serde_json::Value>,
    /// `--until`'s event, when given.
    pub until: Option<u64>,
    /// How many events the original run had.
    pub original_events: usize,
    /// Where the events differ (empty: the same; not compared with `--until`).
    pub event_differences: Vec<String>,
    /// Where the boards differ (empty: the same; not compared with `--until`).
    pub board_differences: Vec<String>,
}

pub fn run(g: &GlobalArgs, args: ReplayArgs) -> CliResult<ExitCode> {
    if let Some(record) = &args.play {
        return play::play(g, record);
    }
    let project = find(g)?;
    let layout = project.layout();
    let (dir, record) = resolve(layout, &args.run)?;
    let scratch = scratch::folder(args.dir.clone())?;
    scratch::prepare(project.root(), &dir, &record, &scratch)?;
    let script = troupe_lead::replay::script(&layout.logs_dir(), &record, project.root())
        .map_err(|e| CliError::user(format!("cannot read the run's teammate logs: {e}")))?;
    let played = play::spawn(&scratch, &dir, &record, &script, args.until)?;
    let replayed = events_after(play::scratch_store(&scratch)?.as_ref(), record.events_before, None)?;
    let replayed = troupe_lead::replay::compared(replayed);
    let mut report = ReplayReport {
        run: record.run.clone(),
        dir: scratch.clone(),
        outcome: played.outcome,
        events: replayed.iter().map(troupe_lead::replay::normalise).collect(),
        until: args.until,
        original_events: 0,
        event_differences: Vec::new(),
        board_differences: Vec::new(),
    };
    let original = events_after(user_store(&project)?.as_ref(), record.events_before, record.events_after)?;
    let original = troupe_lead::replay::compared(original);
    report.original_events = original.len();
    if args.until.is_none() {
        report.event_differences = troupe_lead::replay::differences(&original, &replayed);
        let store = play::scratch_store(&scratch)?;
        let board =
            |feature: &str| troupe_lead::driver::record::board(store.as_ref(), feature).map_err(CliError::internal);
        match &record.roadmap {
            Some(roadmap) => {
                for (feature, original) in &roadmap.boards {
                    report.board_differences.extend(board_differences(original, &board(feature)?));
                }
            }
            None => {
                report.board_differences =
                    board_differences(record.board.as_deref().unwrap_or_default(), &board(&record.feature)?)
            }
        }
    }
    show(g, &report);
    let same = report.event_differences.is_empty() && report.board_differences.is_empty();
    Ok(if same { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// The run folder and record `run` names.
fn resolve(layout: &troupe_core::layout::Layout, run: &str) -> CliResult<(PathBuf, RunRecord)> {
    let exact = run_dir(layout, run);
    if exact.join(troupe_lead::driver::record::RECORD_FILE).exists() {
        let record = RunRecord::load(&exact).map_err(CliError::internal)?;
        return Ok((exact, record));
    }
    let mut runs: Vec<(PathBuf, RunRecord)> = std::fs::read_dir(layout.runs_dir())
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| Some((e.path(), RunRecord::load(&e.path()).ok()?)))
        .collect();
    runs.sort_by_key(|(_, r)| r.started);
    let found = runs
        .iter()
        .rposition(|(_, r)| match run {
            "last" => true,
            "roadmap" => r.roadmap.is_some(),
            _ => r.feature == run,
        })
        .ok_or_else(|| {
            CliError::user(format!("no recorded run matches '{run}'"))
                .with_hint("name a run as `troupe cost --by run` shows it, a feature, `roadmap` or `last`")
        })?;
    // A feature's run in a roadmap wave ran beside its siblings: it replays as its roadmap run.
    let id = runs[found].1.run.clone();
    let whole = runs.iter().rposition(|(_, r)| r.roadmap.as_ref().is_some_and(|m| m.runs.iter().any(|f| f.run == id)));
    Ok(runs.swap_remove(whole.unwrap_or(found)))
}

/// The project's own store, read only.
fn user_store(project: &troupe_project::Project) -> CliResult<Box<dyn Store>> {
    let config = crate::project::load_config(project)?;
    troupe_store::open(project.layout(), &config.store).map_err(crate::commands::board::store_error)
}

/// The events after `after`, up to `until` when given.
fn events_after(store: &dyn Store, after: i64, until: Option<i64>) -> CliResult<Vec<Event>> {
    let mut out: Vec<Event> = Vec::new();
    loop {
        let from = out.last().map_or(after, |e| e.id);
        let page = store.events_since(from, 5_000).map_err(crate::commands::board::store_error)?;
        let Some(last) = page.last().map(|e| e.id) else { break };
        out.extend(page.into_iter().filter(|e| until.is_none_or(|u| e.id <= u)));
        if until.is_some_and(|u| last >= u) {
            break;
        }
    }
    Ok(out)
}

fn board_differences(original: &[BoardTask], replay: &[BoardTask]) -> Vec<String> {
    let mut out = Vec::new();
    for t in original {
        match replay.iter().find(|r| r.id == t.id) {
            None => out.push(format!("task {} is missing from the replay's board", t.id)),
            Some(r) if r != t => out.push(format!(
                "task {} was {} ({}) and is {} ({}) in the replay",
                t.id,
                t.status,
                t.assignee.as_deref().unwrap_or("unassigned"),
                r.status,
                r.assignee.as_deref().unwrap_or("unassigned")
            )),
            Some(_) => {}
        }
    }
    out.extend(
        replay
            .iter()
            .filter(|r| !original.iter().any(|t| t.id == r.id))
            .map(|r| format!("task {} is new in the replay", r.id)),
    );
    out
}

fn show(g: &GlobalArgs, r: &ReplayReport) {
    if g.json {
        return print_json(r);
    }
    let mut out = vec![format!("replayed {} in {}: {} ({} events)", r.run, r.dir.display(), r.outcome, r.events.len())];
    match r.until {
        Some(n) => out.push(format!("stopped at event {n}: look around with `troupe -C {} status`", r.dir.display())),
        None if r.event_differences.is_empty() && r.board_differences.is_empty() => {
            out.push(format!("the same {} events and the same board as the original", r.original_events))
        }
        None => {
            out.push("the replay differs from the original:".into());
            out.extend(r.event_differences.iter().chain(&r.board_differences).map(|d| format!("  {d}")));
        }
    }
    print_line(&out.join("\n"));
}

/// The run's record file as the scratch copy holds it.
fn record_in(scratch: &Path) -> PathBuf {
    troupe_core::layout::Layout::new(scratch).state_dir().join("replay-run.json")
}
