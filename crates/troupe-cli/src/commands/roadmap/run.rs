use std::process::ExitCode;

use clap::Args;
use troupe_core::phase::Phase;
use troupe_core::roadmap::FeatureStatus;
use troupe_lead::driver::{self, DriverError, RunOptions, RunReport, Sharing};
use troupe_lead::machine::Job;
use troupe_project::Project;
use troupe_project::roadmap as rm;
use troupe_project::specs::Specs;

use crate::cli::GlobalArgs;
use crate::commands::lead::progress::Progress;
use crate::commands::lead::{LeadFlags, ReviewFlags, driver_error, print_report, run_options, runtime};
use crate::error::{CliError, CliResult};
use crate::output::{note, print_json};
use crate::project::{find, spec_error};

/// Run the roadmap: every feature whose dependencies are done (or skipped)
/// runs its full pipeline (design, design review, implementation, impl review),
/// wave by wave, the features of a wave at the same time, committing as
/// `Wave {N}: ...`. When a feature fails, every feature downstream is blocked
/// (`troupe roadmap fix|skip` unblocks them) and independent features go on.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Whether and how each feature is reviewed (`[review]` in config.toml, as for `troupe run`).
    #[command(flatten)]
    pub reviews: ReviewFlags,
    #[command(flatten)]
    pub flags: LeadFlags,
}

pub fn run(g: &GlobalArgs, args: RunArgs) -> CliResult<ExitCode> {
    let project = find(g)?;
    crate::commands::lead::preflight(&project, &args.flags)?;
    // No roadmap, no run: refused before anything is recorded for `troupe replay`.
    rm::require(&project).map_err(super::roadmap_error)?;
    // What `troupe replay` needs, taken before any feature's run.
    let recording = super::record::start(&project, &args.reviews, &args.flags);
    let result = waves(g, &project, &args);
    super::record::finish(&project, recording, &result);
    result
}

/// Every wave, then the roadmap's state.
fn waves(g: &GlobalArgs, project: &Project, args: &RunArgs) -> CliResult<ExitCode> {
    let project = project.clone();
    let cap = driver::load_config(&project).map_err(driver_error)?.team.max_concurrent as usize;
    let runtime = runtime()?;
    // One server for every wave: it lives on the runtime between `block_on`s.
    let hosted = crate::commands::serve::host_if(&project, &runtime, args.flags.serve.as_deref())?;
    let mut ran: Vec<serde_json::Value> = Vec::new();
    let mut interrupted = false;
    while let Some((wave, features)) = next_wave(&project)? {
        // Everything that can fail before a run starts is checked for the whole wave first.
        let mut runs = Vec::new();
        for feature in &features {
            let reviews = args.reviews.resolve(&project, feature)?;
            runs.push(run_options(feature, Job::InRoadmap { wave, reviews }, &args.flags)?);
        }
        note(&format!("roadmap: wave {wave}: {}", features.join(", ")));
        let mut failure = None;
        let mut done = |feature: String, result: Result<RunReport, DriverError>| -> CliResult<()> {
            let report = match result {
                Ok(r) => r,
                Err(e) => {
                    // Its siblings run on; the first such error ends the command after the wave.
                    failure.get_or_insert(driver_error(e));
                    return Ok(());
                }
            };
            if !g.json {
                print_report(g, &report);
            }
            let blocked = match report.outcome.as_str() {
                "completed" => {
                    rm::set_status(&project, &feature, FeatureStatus::Done).map_err(super::roadmap_error)?;
                    Vec::new()
                }
                // Stopped by the user, not failed: it stays pending for the next `troupe roadmap run`.
                "interrupted" => {
                    interrupted = true;
                    Vec::new()
                }
                _ => {
                    let out = rm::fail(&project, &feature, troupe_project::now()).map_err(super::roadmap_error)?;
                    for o in &out {
                        note(&format!("roadmap: {}", super::outcome_line(o)));
                    }
                    out
                }
            };
            ran.push(serde_json::json!({
                "feature": feature,
                "wave": wave,
                "outcome": report.outcome,
                "blocked": super::outcomes_json(&blocked),
            }));
            Ok(())
        };
        runtime.block_on(run_wave(&project, runs, cap, !g.json, &mut done))?;
        if let Some(e) = failure {
            return Err(e);
        }
        if interrupted {
            // The wave's gates still running are the interrupted runs': stop them.
            troupe_gate::quality::kill_running();
            break;
        }
    }
    if let Some(server) = hosted {
        server.stop(&runtime);
    }
    let view = rm::status(&project).map_err(super::roadmap_error)?;
    let complete = view.iter().all(|f| matches!(f.status, FeatureStatus::Done | FeatureStatus::Skipped));
    if g.json {
        print_json(&serde_json::json!({ "ran": ran, "status": view, "complete": complete }));
    }
    if interrupted {
        return Ok(ExitCode::from(130));
    }
    if complete {
        return Ok(ExitCode::SUCCESS);
    }
    let stuck: Vec<String> = view
        .iter()
        .filter(|f| !matches!(f.status, FeatureStatus::Done | FeatureStatus::Skipped))
        .map(|f| format!("{} ({}, {})", f.feature, f.status, f.phase))
        .collect();
    let err = CliError::user(format!("the roadmap is not complete: {}", stuck.join(", ")))
        .with_hint("see `troupe roadmap status`; after fixing a failed feature run `troupe roadmap fix <feature>` (or `skip`), then `troupe roadmap run`");
    if g.json {
        // The JSON document above already says where it stands.
        return Ok(ExitCode::from(1));
    }
    Err(err)
}

/// The features to run next: those ready (dependencies done or skipped) and
/// runnable, of the lowest wave among them. Ready features already built (before
/// or outside this run) are recorded as done on the way.
fn next_wave(project: &Project) -> CliResult<Option<(u32, Vec<String>)>> {
    let specs = Specs::new(project);
    loop {
        let roadmap = rm::require(project).map_err(super::roadmap_error)?;
        let mut runnable: Vec<(u32, String)> = Vec::new();
        let mut recorded = false;
        for feature in roadmap.ready() {
            let spec = specs.load(feature).map_err(spec_error)?;
            if spec.phase == Phase::ImplementationComplete {
                rm::set_status(project, feature, FeatureStatus::Done).map_err(super::roadmap_error)?;
                recorded = true;
                break;
            }
            if rm::runnable(&spec) {
                runnable.push((roadmap.wave_of(feature).unwrap_or(1), feature.to_string()));
            }
        }
        if recorded {
            // Done features may make more ready.
            continue;
        }
        let Some(wave) = runnable.iter().map(|(w, _)| *w).min() else { return Ok(None) };
        let features = runnable.into_iter().filter(|(w, _)| *w == wave).map(|(_, f)| f).collect();
        return Ok(Some((wave, features)));
    }
}

/// Run the features of one wave at the same time, `team.max_concurrent` split
/// between them ([`rm::split_cap`]); `done` hears of each as it ends, in the
/// order they end. With more than one feature, each commits only its own paths.
async fn run_wave(
    project: &Project,
    runs: Vec<RunOptions>,
    cap: usize,
    show: bool,
    done: &mut dyn FnMut(String, Result<RunReport, DriverError>) -> CliResult<()>,
) -> CliResult<()> {
    let several = runs.len() > 1;
    let mut queue = runs.into_iter();
    let mut set = tokio::task::JoinSet::new();
    let start = |set: &mut tokio::task::JoinSet<_>, share: usize, opts: RunOptions| {
        let project = project.clone();
        set.spawn(async move {
            let feature = opts.feature.clone();
            let mut progress = if several {
                Progress::for_feature(show, &feature, project.root())
            } else {
                Progress::new(show, project.root())
            };
            let sharing = Sharing { max_concurrent: Some(share) };
            let result = driver::run_shared(&project, opts, sharing, &mut progress).await;
            progress.finish();
            (feature, share, result)
        });
    };
    for share in rm::split_cap(cap, queue.len()) {
        let opts = queue.next().expect("no more parts than features");
        start(&mut set, share, opts);
    }
    let mut first_error = None;
    while let Some(joined) = set.join_next().await {
        let (feature, share, result) =
            joined.map_err(|e| CliError::internal("a feature's run ended abnormally").with_source(&e))?;
        // Its part of the cap goes to the next feature of the wave.
        if let Some(opts) = queue.next() {
            start(&mut set, share, opts);
        }
        if let Err(e) = done(feature, result) {
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}
