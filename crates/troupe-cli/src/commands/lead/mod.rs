//! The Lead's commands: `troupe design`, `impl`, `run`, `resume`, `status`,
//! `demo`, and the hidden `scripted-agent` (the built-in scripted engine).
//! Each runs the Lead's driver and prints a summary; the decisions are all in
//! `troupe-lead`'s machine.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use troupe_lead::driver::{self, DriverError, RunOptions, RunReport};
use troupe_lead::machine::Job;
use troupe_lead::review::ReviewOptions;
use troupe_project::Project;

use crate::cli::GlobalArgs;
use crate::error::{CliError, CliResult};
use crate::output::{paint, print_json, print_line};

pub mod choices;
pub mod demo;
pub mod design;
pub mod implement;
pub(crate) mod progress;
pub mod resume;
pub mod run;
pub mod scripted_agent;
pub mod status;

/// Flags every Lead command shares.
#[derive(Debug, Args, Clone)]
pub struct LeadFlags {
    /// Run every teammate on this engine (scripted, claude, gemini, codex, opencode, or a custom one),
    /// overriding spec.yaml's engine_override and `[engines]` in config.toml.
    #[arg(long, value_name = "ID")]
    pub engine: Option<String>,
    /// Do not commit (by default troupe commits after design and after implementation).
    #[arg(long)]
    pub no_commit: bool,
    /// Commit, although the run `troupe resume` continues was started with --no-commit.
    #[arg(long, conflicts_with = "no_commit")]
    pub commit: bool,
    /// The scripted engine's script (default: .troupe/scripted.yaml).
    #[arg(long, value_name = "FILE")]
    pub script: Option<PathBuf>,
    /// Serve the HTTP API (REST, live events, A2A) from this process while it runs, so a dashboard
    /// sees the run live; at ADDR, or `[server] bind` without one (token rules as for `troupe serve`).
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "")]
    pub serve: Option<String>,
    /// Spend this much more than `[budgets]` allows: `+5` lets this run spend five dollars more than
    /// the cost limits of the run and the feature (after a run paused on its budget), `5` caps this
    /// run at five dollars.
    #[arg(long, value_name = "[+]USD", allow_hyphen_values = false)]
    pub budget: Option<troupe_lead::machine::Raise>,
}

/// Whether `troupe run` and `troupe resume` include the design and impl
/// reviews, and how: `[review]` in config.toml, overridden per run.
#[derive(Debug, Args, Clone, Default)]
pub struct ReviewFlags {
    /// Review even when `[review] in_run = false` in .troupe/config.toml.
    #[arg(long, conflicts_with = "no_review")]
    pub review: bool,
    /// Skip the design and impl reviews this time (`[review] in_run = false` skips them always).
    #[arg(long)]
    pub no_review: bool,
    /// Review pipelines per review, consensus mode above 1 (default: `[review] consensus`, 1).
    #[arg(long, value_name = "N", conflicts_with = "no_review")]
    pub consensus: Option<usize>,
    /// How many of the N pipelines must agree (default: `[review] threshold`, or a majority).
    #[arg(long, value_name = "K", conflicts_with = "no_review")]
    pub threshold: Option<usize>,
}

impl ReviewFlags {
    /// The review options for `feature`, or `None` when this run does not review.
    pub fn resolve(&self, project: &Project, feature: &str) -> CliResult<Option<ReviewOptions>> {
        let config = driver::load_config(project).map_err(driver_error)?.review;
        if self.no_review || !(self.review || config.in_run) {
            return Ok(None);
        }
        let consensus = self.consensus.unwrap_or(config.consensus);
        // A configured K belongs to the configured N; with another N given here,
        // the default (a majority) is the safe reading.
        let threshold = self.threshold.or(if consensus == config.consensus { config.threshold } else { None });
        crate::commands::review::options(project, feature, consensus, threshold, true).map(Some)
    }
}

/// Checks that need no change on disk, made before a spec is created: with
/// commits on, the project must be a git repository.
pub fn preflight(project: &Project, flags: &LeadFlags) -> CliResult<()> {
    check_state(project)?;
    if flags.no_commit {
        return Ok(());
    }
    let inside = troupe_project::git::command(project.root())
        .args(["rev-parse", "--is-inside-work-tree"])
        .output()
        .is_ok_and(|o| o.status.success());
    if inside { Ok(()) } else { Err(driver_error(DriverError::NotARepo(project.root().to_path_buf()))) }
}

/// The files a run depends on, checked before it writes anything (its
/// choices, a new spec): the config through the one loader, and the store,
/// damaged pages included. The driver checks them again when it starts.
pub fn check_state(project: &Project) -> CliResult<()> {
    let config = crate::project::load_config(project)?;
    troupe_store::open_checked(project.layout(), &config.store).map(drop).map_err(crate::commands::board::store_error)
}

/// Run `job` on `feature` with the driver and print the outcome.
pub fn drive(g: &GlobalArgs, project: &Project, feature: &str, job: Job, flags: &LeadFlags) -> CliResult<ExitCode> {
    let report = drive_report(g, project, feature, job, flags)?;
    print_report(g, &report);
    exit_for(g, &report)
}

/// Run the driver and return its report (errors before the start become CLI errors).
pub fn drive_report(
    g: &GlobalArgs,
    project: &Project,
    feature: &str,
    job: Job,
    flags: &LeadFlags,
) -> CliResult<RunReport> {
    let opts = run_options(feature, job, flags)?;
    let runtime = runtime()?;
    let hosted = crate::commands::serve::host_if(project, &runtime, flags.serve.as_deref())?;
    let mut progress = progress::Progress::new(!g.json, project.root());
    let result = runtime.block_on(driver::run(project, opts, &mut progress));
    if let Some(server) = hosted {
        server.stop(&runtime);
    }
    if result.as_ref().is_ok_and(|r| r.outcome == "interrupted") {
        // A gate still running belongs to the interrupted run: stop it rather
        // than wait for it when the runtime ends (no gate starts after this).
        troupe_gate::quality::kill_running();
    }
    progress.finish();
    result.map_err(driver_error)
}

/// The driver's options for `job` on `feature` under `flags`.
pub fn run_options(feature: &str, job: Job, flags: &LeadFlags) -> CliResult<RunOptions> {
    let troupe =
        std::env::current_exe().map_err(|e| CliError::internal("cannot find the troupe executable").with_source(&e))?;
    Ok(RunOptions {
        feature: feature.to_string(),
        job,
        engine: flags.engine.clone(),
        commit: !flags.no_commit,
        troupe,
        script: flags.script.clone(),
        budget: flags.budget,
    })
}

/// The async runtime runs are driven on.
pub fn runtime() -> CliResult<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| CliError::internal("cannot start the async runtime").with_source(&e))
}

/// A driver error as the user sees it.
pub(crate) fn driver_error(e: DriverError) -> CliError {
    match e {
        DriverError::Spec(s) => {
            let hint = if matches!(s, troupe_project::specs::SpecFileError::NotFound { .. }) {
                "create it with `troupe spec new <feature>`, or use `troupe run <feature> \"<description>\"`"
            } else {
                "fix spec.yaml, then run the command again"
            };
            crate::project::spec_error(s).with_hint(hint)
        }
        DriverError::Config(error) => crate::project::config_file_error(error),
        DriverError::NotARepo(_) => {
            CliError::user(e.to_string()).with_hint("run `git init` (and commit your files), or pass --no-commit")
        }
        DriverError::Engine(ref engine) => CliError::user(e.to_string()).with_hint(engine.hint()),
        // A damaged, foreign or newer database is the user's to fix (exit 3), as
        // every store command reports it.
        DriverError::Store(err) => crate::commands::board::store_error(err),
        DriverError::Io(..) | DriverError::Read(..) | DriverError::Signal(_) => {
            CliError::internal(e.to_string()).with_source(&e)
        }
        DriverError::Events(_) => CliError::internal(e.to_string()).with_hint("check the store with `troupe doctor`"),
        DriverError::Git(_) => {
            CliError::user(e.to_string()).with_hint("check `git status` in the project, or pass --no-commit")
        }
    }
}

/// Exit status: 0 completed, 1 refused or escalated, 130 interrupted. Under
/// `--json` the report already printed is the one document: it carries the
/// refusal or the escalations, so no error document follows it.
pub fn exit_for(g: &GlobalArgs, report: &RunReport) -> CliResult<ExitCode> {
    match report.outcome.as_str() {
        "completed" => Ok(ExitCode::SUCCESS),
        "interrupted" => Ok(ExitCode::from(130)),
        _ if g.json => Ok(ExitCode::from(1)),
        "paused" | "stopped" => {
            let reason = report.budget.clone().unwrap_or_default();
            Err(CliError::user(format!("{} {}: budget reached: {reason}", report.feature, report.outcome)).with_hint(
                format!(
                    "continue with `troupe resume {} --budget +5`, or raise the limit in [budgets] of .troupe/config.toml",
                    report.feature
                ),
            ))
        }
        "refused" => {
            let msg = report.refused.clone().unwrap_or_default();
            Err(CliError::user(msg).with_hint("see `troupe status` for where the feature stands"))
        }
        _ => {
            let (reason, hint) = report.escalations.first().cloned().unwrap_or_default();
            Err(CliError::user(format!("{} needs you: {reason}", report.feature)).with_hint(hint))
        }
    }
}

/// The final summary: outcome, commits, and per teammate its engine, status,
/// turns, cost, files and tests.
pub fn print_report(g: &GlobalArgs, r: &RunReport) {
    if g.json {
        print_json(r);
        return;
    }
    let mut out = vec![format!("{}: {} (phase {})", paint(&r.feature, "1"), r.outcome, r.phase)];
    if !r.teammates.is_empty() {
        out.push(String::new());
        let w = r.teammates.iter().map(|t| t.id.len()).max().unwrap_or(0).max("TEAMMATE".len());
        out.push(format!(
            "{:<w$} {:<14} {:<9} {:<9} {:>5} {:>8} {:>7}  {}",
            "TEAMMATE", "ROLE", "ENGINE", "STATUS", "TURNS", "COST", "TIME", "FILES / TESTS"
        ));
        for t in &r.teammates {
            let cost = t.cost_usd.map(|c| format!("${c:.3}")).unwrap_or_else(|| "-".into());
            let mut detail = t.files.join(", ");
            if let Some(tests) = &t.tests {
                detail = format!("{detail}{}tests: {tests}", if detail.is_empty() { "" } else { "; " });
            }
            out.push(format!(
                "{:<w$} {:<14} {:<9} {:<9} {:>5} {:>8} {:>6.1}s  {detail}",
                t.id,
                t.role,
                t.engine,
                t.status,
                t.turns,
                cost,
                t.duration_ms as f64 / 1000.0
            ));
        }
        let turns: u64 = r.teammates.iter().map(|t| t.turns).sum();
        let costs: Vec<f64> = r.teammates.iter().filter_map(|t| t.cost_usd).collect();
        let cost = if costs.is_empty() {
            "no cost reported".to_string()
        } else {
            format!("${:.3}", costs.iter().sum::<f64>())
        };
        out.push(format!(
            "{}, {}, {cost}",
            crate::output::count(r.teammates.len() as u64, "teammate"),
            crate::output::count(turns, "turn")
        ));
    }
    if !r.files.is_empty() {
        out.push(format!("\nfiles: {}", r.files.join(", ")));
    }
    if !r.commits.is_empty() {
        out.push("\ncommits:".into());
        for c in &r.commits {
            out.push(format!("  {c}"));
        }
    }
    print_line(&out.join("\n"));
}
