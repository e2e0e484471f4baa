//! `troupe worker`: the worker's side of remote teammates (`remote`
//! is the Lead's). A worker runs on any host with a checkout of the project
//! and access to the store. It registers its host, heartbeats (its host's
//! lease, its jobs' leases and their teammates' agent leases, in one
//! store write plus one per teammate), and claims the spawn jobs its host can
//! run. For each job: a worktree of its own clone of the shared remote
//! (under `--dir`, fetched before each job) on the job's branch at its base
//! commit, the spec files the Lead sent written in, and the teammate
//! started there by the Lead's own [`launch::launch`] and
//! `teammate::start` (hooks, gateway, sandbox, environment: the hooks and
//! gateway run here against the shared store). Every report of the
//! teammate goes to the store as a `job_report` event; at its end the
//! Builder's owned files are committed and pushed to the job's branch,
//! then the end is reported and the job finished.
//!
//! Draining (`troupe worker stop`, or SIGINT/SIGTERM here): no new job, the
//! running teammates finish, then the worker leaves. A second signal stops
//! them at once. The agents' guardian stops them if the worker itself dies.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::mpsc::{self, UnboundedSender};
use troupe_core::config::Config;
use troupe_engine::supervisor::StopMode;
use troupe_project::Project;
use troupe_store::lock::host_name;
use troupe_store::worker::{Job, NewHost};
use troupe_store::{AgentUpdate, Store, StoreError};

use super::git::git;
use super::launch::{self, LaunchEnv};
use super::remote::{Payload, Wire};
use super::teammate::{self, Report};
use crate::machine::Event;

/// What `troupe worker` was asked for.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// The host's name in the store.
    pub name: String,
    /// Engines it runs (empty: any).
    pub engines: Vec<String>,
    /// Labels it offers.
    pub labels: Vec<String>,
    /// At most this many teammates at once.
    pub max: u32,
    /// Where its clone and job worktrees live.
    pub dir: PathBuf,
    /// The `troupe` executable (hooks, the gateway and the scripted engine run through it).
    pub troupe: PathBuf,
}

/// What a worker did, for its summary.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct WorkerSummary {
    /// The host's name.
    pub name: String,
    /// Jobs it ran, by id, with how each ended (`done`, `failed`, `lost`).
    pub jobs: Vec<(String, String)>,
}

/// The live side of a job: how to stop its teammate.
#[derive(Default)]
struct Stopper {
    sender: Option<UnboundedSender<StopMode>>,
    asked: bool,
}

impl Stopper {
    /// Stop the teammate now, or as soon as its process runs.
    fn stop(&mut self) {
        self.asked = true;
        if let Some(s) = &self.sender {
            super::shutdown::force_stop(s);
        }
    }
}

type Shared = Arc<Mutex<Stopper>>;

/// What every job of a worker shares.
struct Ctx {
    store: Arc<dyn Store>,
    config: Config,
    root: PathBuf,
    logs: PathBuf,
    repo: PathBuf,
    jobs_dir: PathBuf,
    troupe: PathBuf,
    host: String,
    prices: Arc<troupe_core::usage::PriceTable>,
}

/// Run a worker for `project` until it drained (see the module docs).
pub async fn run(
    project: &Project,
    opts: WorkerOptions,
    say: &mut (dyn FnMut(&str) + Send),
) -> Result<WorkerSummary, String> {
    let layout = project.layout().clone();
    let config = troupe_project::config::load(&layout).map_err(|e| e.to_string())?;
    let remote = config.workers.remote.clone().ok_or(
        "this project names no shared git remote for workers: set [workers] remote = \"origin\" (or a git URL) in .troupe/config.toml",
    )?;
    let store: Arc<dyn Store> = Arc::from(
        troupe_store::open_checked(&layout, &config.store).map_err(|e| format!("cannot open the store: {e}"))?,
    );
    let root = project.root().to_path_buf();
    let url = remote_url(&root, &remote).await;
    let repo = opts.dir.join("repo");
    ensure_clone(&url, &repo).await?;
    std::fs::create_dir_all(layout.logs_dir())
        .map_err(|e| format!("cannot create {}: {e}", layout.logs_dir().display()))?;
    let (lease, poll) = (config.store.lease(), Duration::from_millis(config.workers.poll_ms));
    let host =
        NewHost { name: opts.name.clone(), engines: opts.engines.clone(), labels: opts.labels.clone(), max: opts.max };
    store.register_host(host.clone(), lease).map_err(|e| format!("cannot register host {}: {e}", opts.name))?;
    say(&format!("worker {} registered (max {}), waiting for jobs", opts.name, opts.max));
    let ctx = Arc::new(Ctx {
        prices: Arc::new(troupe_core::usage::PriceTable::with_overrides(&config.prices)),
        store: store.clone(),
        config,
        root,
        logs: layout.logs_dir(),
        repo,
        jobs_dir: opts.dir.join("jobs"),
        troupe: opts.troupe.clone(),
        host: opts.name.clone(),
    });
    let (sig_tx, mut sig_rx) = mpsc::unbounded_channel::<Report>();
    let signals = super::signals::Signals::install(sig_tx).map_err(|e| e.to_string())?;
    let forced = signals.forced(true);
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<(String, String)>();
    let mut running: HashMap<String, (String, Shared)> = HashMap::new();
    let mut summary = WorkerSummary { name: opts.name.clone(), jobs: Vec::new() };
    let beat_every = super::leases::interval(lease, poll);
    let (mut next_beat, mut draining, mut stopped_all) = (Instant::now(), false, false);
    loop {
        if Instant::now() >= next_beat {
            next_beat = Instant::now() + beat_every;
            draining |= heartbeat(&ctx, &host, lease, &running, say);
        }
        if forced.now() && !stopped_all {
            stopped_all = true;
            say("a second signal: stopping every teammate now");
            running.values().for_each(|(_, s)| s.lock().unwrap_or_else(|e| e.into_inner()).stop());
        }
        if draining && running.is_empty() {
            break;
        }
        while !draining && running.len() < opts.max as usize {
            match store.claim_job(&opts.name, lease) {
                Ok(Some(job)) => {
                    say(&format!("took job {} ({} on {})", job.queued.id, job.queued.agent, job.queued.engine));
                    let stopper = Shared::default();
                    running.insert(job.queued.id.clone(), (job.queued.agent.clone(), stopper.clone()));
                    let (ctx, done) = (ctx.clone(), done_tx.clone());
                    tokio::spawn(async move {
                        let id = job.queued.id.clone();
                        let outcome = run_job(&ctx, job, stopper).await;
                        let _ = done.send((id, outcome));
                    });
                }
                Ok(None) => break,
                Err(e) => {
                    say(&format!("cannot claim a job: {e}"));
                    break;
                }
            }
        }
        let after = store.last_event_id().unwrap_or(0);
        let waiter = store.clone();
        let wait = tokio::task::spawn_blocking(move || waiter.wait_for_event(after, poll));
        tokio::select! {
            Some((id, outcome)) = done_rx.recv() => {
                running.remove(&id);
                say(&format!("job {id} {outcome}"));
                summary.jobs.push((id, outcome));
            }
            Some(_) = sig_rx.recv() => {
                if !draining {
                    say("draining: the running teammates finish, no new job is taken (a second signal stops them)");
                }
                draining = true;
                let _ = store.drain_host(&opts.name);
            }
            _ = wait => {}
        }
    }
    drop(signals);
    store.leave_host(&opts.name).map_err(|e| format!("cannot leave: {e}"))?;
    say(&format!("worker {} drained and left", opts.name));
    Ok(summary)
}

/// Renew the host's lease and its jobs', and their teammates' agent leases;
/// stop the teammates whose job is to stop or was lost; sweep lost workers.
/// Returns whether the host is to drain. A host swept as lost registers again.
fn heartbeat(
    ctx: &Ctx,
    host: &NewHost,
    lease: Duration,
    running: &HashMap<String, (String, Shared)>,
    say: &mut (dyn FnMut(&str) + Send),
) -> bool {
    let _ = ctx.store.expire_workers();
    let (me, held) = match ctx.store.renew_host(&host.name, lease, load_average()) {
        Ok(renewed) => renewed,
        Err(StoreError::HostNotFound(_)) => {
            say("this host's lease had passed: its jobs were failed; registering again");
            running.values().for_each(|(_, s)| s.lock().unwrap_or_else(|e| e.into_inner()).stop());
            let _ = ctx.store.register_host(host.clone(), lease);
            return false;
        }
        Err(e) => {
            say(&format!("heartbeat failed (retried at the next one): {e}"));
            return false;
        }
    };
    for (id, (agent, stopper)) in running {
        match held.iter().find(|j| &j.queued.id == id) {
            Some(j) if !j.stop => {
                let _ = ctx.store.renew_lease(agent, lease);
            }
            // A stop asked for, or the job is no longer ours.
            _ => stopper.lock().unwrap_or_else(|e| e.into_inner()).stop(),
        }
    }
    me.draining
}

/// The 1-minute load average, where the system tells it.
fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg").ok()?.split_whitespace().next()?.parse().ok()
}

/// The URL of `remote`: a remote name of the checkout's repository, or already a URL.
async fn remote_url(root: &Path, remote: &str) -> String {
    git(root, &["remote", "get-url", remote]).await.unwrap_or_else(|_| remote.to_string())
}

/// The worker's own clone of the shared remote (made once, fetched per job).
async fn ensure_clone(url: &str, repo: &Path) -> Result<(), String> {
    if repo.join(".git").exists() {
        return Ok(());
    }
    std::fs::create_dir_all(repo).map_err(|e| format!("cannot create {}: {e}", repo.display()))?;
    git(repo, &["clone", "-q", "--no-checkout", url, "."])
        .await
        .map(drop)
        .map_err(|e| format!("cannot clone the shared remote {url}: {e}"))
}

/// One job, start to end; returns how it ended.
async fn run_job(ctx: &Ctx, job: Job, stopper: Shared) -> String {
    let payload: Payload = match serde_json::from_value(job.queued.payload.clone()) {
        Ok(p) => p,
        Err(e) => return fail(ctx, &job, format!("unreadable launch payload: {e}")),
    };
    let top = ctx.jobs_dir.join(job.queued.id.replace(['/', '\\'], "_"));
    let workdir = match checkout(ctx, &job, &payload, &top).await {
        Ok(w) => w,
        Err(e) => return fail(ctx, &job, e),
    };
    let outcome = launch_and_follow(ctx, &job, &payload, &workdir, stopper).await;
    remove_worktree(&ctx.repo, &top, &job.queued.branch).await;
    outcome
}

/// The job's worktree on its branch at its base, with the Lead's spec files in it.
async fn checkout(ctx: &Ctx, job: &Job, payload: &Payload, top: &Path) -> Result<PathBuf, String> {
    let branch = format!("refs/heads/{}", job.queued.branch);
    git(&ctx.repo, &["fetch", "-q", "origin", &branch]).await?;
    git(&ctx.repo, &["cat-file", "-e", &format!("{}^{{commit}}", job.queued.base)]).await?;
    remove_worktree(&ctx.repo, top, &job.queued.branch).await;
    let at = top.to_string_lossy().into_owned();
    git(&ctx.repo, &["worktree", "add", "-q", "-f", "-B", &job.queued.branch, &at, &job.queued.base]).await?;
    let workdir = top.join(&payload.prefix);
    for (rel, text) in &payload.files {
        let path = workdir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        }
        std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(workdir)
}

/// Best effort: the worktree at `top` and its branch gone.
async fn remove_worktree(repo: &Path, top: &Path, branch: &str) {
    if top.exists() {
        let _ = git(repo, &["worktree", "remove", "--force", "--force", &top.to_string_lossy()]).await;
        let _ = std::fs::remove_dir_all(top);
    }
    let _ = git(repo, &["worktree", "prune"]).await;
    let _ = git(repo, &["branch", "-q", "-D", branch]).await;
}

/// Launch the teammate, stream its reports to the store, and at its end
/// push its work and finish the job.
async fn launch_and_follow(ctx: &Ctx, job: &Job, p: &Payload, workdir: &Path, stopper: Shared) -> String {
    let script = ctx.root.join(&p.script);
    let env = LaunchEnv {
        root: &ctx.root,
        troupe: &ctx.troupe,
        script: &script,
        config: &ctx.config,
        workdir: Some(workdir),
    };
    let l = match launch::launch(&job.queued.engine, &p.request, &p.prompt, p.turn, p.session.as_deref(), &env) {
        Ok(l) => l,
        Err(e) => return fail(ctx, job, e),
    };
    if let Err(e) = ctx.store.start_job(&job.queued.id, &ctx.host) {
        return format!("lost before it started ({e})");
    }
    let (tx, mut rx) = mpsc::unbounded_channel();
    let ledger = teammate::ledger(&p.request, &l, &p.run, p.turn, ctx.prices.clone());
    let log = ctx.logs.join(format!("{}.jsonl", job.queued.agent));
    let activity = Duration::from_millis(p.activity_ms.max(1));
    teammate::start(job.queued.agent.clone(), l, workdir.to_path_buf(), log, tx, activity, ledger);
    let mut lost = false;
    let report = |wire: Wire, lost: &mut bool| {
        if *lost {
            return;
        }
        let data = serde_json::to_value(&wire).unwrap_or_default();
        if let Err(e) = ctx.store.report_job(&job.queued.id, &ctx.host, data) {
            // The job is no longer this host's (its lease passed, or it was
            // stopped and failed): nothing more of it may reach the Lead.
            *lost = matches!(e, StoreError::JobNotHeld { .. });
            if *lost {
                stopper.lock().unwrap_or_else(|e| e.into_inner()).stop();
            }
        }
    };
    let end = loop {
        let Some(r) = rx.recv().await else {
            let error = "its supervisor ended without a result".to_string();
            break Event::TeammateExited { id: job.queued.agent.clone(), error, stats: Default::default() };
        };
        match r {
            Report::Started(_, pid, sender) => {
                // As the Lead does for a local teammate, with this host's
                // name: the gateway serves the teammate's token only beneath
                // this pid, and the pid is believed only on this host. Not
                // recorded, the gateway refuses the teammate, which says why.
                let update = AgentUpdate { pid: Some(Some(pid)), host: Some(host_name()), ..AgentUpdate::default() };
                let _ = ctx.store.update_agent(&job.queued.agent, update);
                let mut s = stopper.lock().unwrap_or_else(|e| e.into_inner());
                if s.asked {
                    super::shutdown::force_stop(&sender);
                }
                s.sender = Some(sender);
            }
            Report::Lead(
                e @ (Event::TeammateEnded { .. } | Event::TeammateExited { .. } | Event::SpawnFailed { .. }),
            ) => {
                break e;
            }
            Report::Lead(e) => report(Wire::Lead(e), &mut lost),
            Report::Agent(_, e) => report(Wire::Agent(e), &mut lost),
            Report::Usage(row) => {
                let spent =
                    Event::TurnSpent { id: job.queued.agent.clone(), cost_usd: row.cost_usd, tokens: row.tokens() };
                let _ = ctx.store.record_usage(row);
                report(Wire::Lead(spent), &mut lost);
            }
            Report::Note(_) | Report::GateStep(..) => {}
        }
    };
    if lost {
        return "lost (its lease passed or it was stopped)".into();
    }
    let end = match end {
        Event::TeammateEnded { id, ending, stats } => match push(ctx, job, p, workdir).await {
            Ok(()) => Event::TeammateEnded { id, ending, stats },
            Err(error) => Event::TeammateExited { id, error, stats },
        },
        other => other,
    };
    let done = matches!(end, Event::TeammateEnded { .. });
    report(Wire::Lead(end), &mut lost);
    if lost {
        return "lost (its lease passed or it was stopped)".into();
    }
    let result = serde_json::json!({"agent": job.queued.agent, "branch": job.queued.branch, "ended": done});
    match ctx.store.finish_job(&job.queued.id, &ctx.host, done, result) {
        Ok(_) if done => "done".into(),
        Ok(_) => "failed".into(),
        Err(e) => format!("lost at its end ({e})"),
    }
}

/// Commit the Builder's owned changes on the job's branch and push it.
async fn push(ctx: &Ctx, job: &Job, p: &Payload, workdir: &Path) -> Result<(), String> {
    let message = format!("{}: the work of {} (worker {})", p.request.context.feature, job.queued.agent, ctx.host);
    super::worktree::commit_owned(workdir, &p.request.context.feature, &p.request.context.write, &message).await?;
    let refspec = format!("HEAD:refs/heads/{}", job.queued.branch);
    git(workdir, &["push", "-q", "origin", &refspec])
        .await
        .map(drop)
        .map_err(|e| format!("cannot push {} to the shared remote: {e}", job.queued.branch))
}

/// The job could not run: its teammate's start failed, as the Lead hears it.
fn fail(ctx: &Ctx, job: &Job, error: String) -> String {
    let spawn = Wire::Lead(Event::SpawnFailed { id: job.queued.agent.clone(), error: error.clone() });
    let _ = ctx.store.report_job(&job.queued.id, &ctx.host, serde_json::to_value(&spawn).unwrap_or_default());
    let _ = ctx.store.finish_job(&job.queued.id, &ctx.host, false, serde_json::json!({"error": error}));
    format!("failed: {error}")
}
