//! The remote executor (`[team] executors = "workers"`): the Lead's side of
//! teammates that `troupe worker` runs on other hosts ([`super::worker`] is
//! the worker's side).
//!
//! Instead of starting a Builder's process, the driver pushes the group's
//! worktree branch (at its base commit) to the shared remote and queues a
//! spawn job in the store with everything the worker needs to launch it
//! through the same [`super::launch`] code: the request, the rendered
//! prompt, the engine, the turn and session (a resume is a new job), and the
//! spec and steering files a local worktree gets copied in. What the worker
//! reports (`job_report` events) is the machine's own events, fed back here
//! unchanged: the machine never knows where a teammate runs. Before a
//! teammate's end reaches the machine, its pushed branch is fetched into
//! the group's local worktree, so the gate and the merge of worktree
//! isolation ([`super::worktree`]) run as for a local Builder. Forced stops
//! go through the store (the worker stops the process); a lost worker is the
//! teammate's lease passing (`TeammateLeaseExpired`, seed 000 Spec 10/11).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::sync::mpsc::UnboundedSender;
use troupe_core::config::{StoreConfig, WorkersConfig};
use troupe_core::event::AgentEvent;
use troupe_core::layout::Layout;
use troupe_store::Store;
use troupe_store::worker::{self, NewJob};

use super::git::git;
use super::teammate::Report;
use crate::machine::{AgentId, Event, RunStats, SpawnRequest};

/// What a worker reports of its teammate: the data of a `job_report` event.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Wire {
    /// A machine event, exactly as a local teammate's would be.
    Lead(Event),
    /// A normalised event of its stream (tool calls and results), for progress displays.
    Agent(AgentEvent),
}

/// What a worker needs to launch a job's teammate (the job's payload).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Payload {
    /// The teammate.
    pub request: SpawnRequest,
    /// Its rendered prompt.
    pub prompt: String,
    /// 0 for its first launch, then one more per resume.
    pub turn: usize,
    /// The engine session a resume continues.
    pub session: Option<String>,
    /// The run's name in the usage ledger.
    pub run: String,
    /// The project's folder inside the repository (`git rev-parse --show-prefix`).
    pub prefix: String,
    /// The scripted engine's script, relative to the project when it is inside it.
    pub script: String,
    /// Files copied into the worktree for the teammate to read (the spec
    /// folder and steering), by path relative to the project.
    pub files: BTreeMap<String, String>,
    /// How often its events other than tool calls reach the machine, in ms.
    pub activity_ms: u64,
}

/// A queued or running remote teammate, as the watcher follows it.
#[derive(Debug, Clone)]
struct Follow {
    agent: AgentId,
    workdir: PathBuf,
    branch: String,
    started: bool,
    engine: String,
    labels: Vec<String>,
    /// The watcher said no live worker can take it (said once).
    unplaceable: bool,
}

/// The jobs of this run, by id: shared by the driver (which queues) and the watcher.
type Jobs = Arc<Mutex<HashMap<String, Follow>>>;

/// The remote executor of one run.
pub(super) struct Remote {
    remote: String,
    feature: String,
    config: WorkersConfig,
    jobs: Jobs,
    /// Each remote teammate's latest job.
    by_agent: HashMap<AgentId, String>,
    /// Branches pushed to the shared remote and not deleted yet, by group.
    pushed: BTreeMap<String, String>,
}

/// Where a job's spec files come from, and what else [`Remote::queue`] needs.
pub(super) struct Queue<'a> {
    pub(super) req: &'a SpawnRequest,
    pub(super) engine: &'a str,
    pub(super) prompt: String,
    pub(super) turn: usize,
    pub(super) session: Option<String>,
    pub(super) layout: &'a Layout,
    pub(super) root: &'a Path,
    pub(super) workdir: &'a Path,
    pub(super) script: &'a Path,
    pub(super) run: &'a str,
    pub(super) activity: Duration,
}

impl Remote {
    /// The executor of `feature`'s run, pushing to `config.remote` (a
    /// remote name or URL; `None` is no remote executor).
    pub(super) fn new(config: &WorkersConfig, feature: String) -> Option<Remote> {
        Some(Remote {
            remote: config.remote.clone()?,
            feature,
            config: config.clone(),
            jobs: Arc::default(),
            by_agent: HashMap::new(),
            pushed: BTreeMap::new(),
        })
    }

    /// Whether `id` runs on a worker.
    pub(super) fn runs(&self, id: &str) -> bool {
        self.by_agent.contains_key(id)
    }

    /// Push the group's branch at its worktree's `HEAD` and queue the job.
    pub(super) async fn queue(&mut self, store: &dyn Store, q: Queue<'_>) -> Result<(), String> {
        let group = q.req.group.as_deref().ok_or("only a Builder group runs on a worker")?;
        let branch = super::worktree::branch(&self.feature, group);
        let base = git(q.workdir, &["rev-parse", "HEAD"]).await?;
        let refspec = format!("+HEAD:refs/heads/{branch}");
        git(q.workdir, &["push", "-q", &self.remote, &refspec])
            .await
            .map_err(|e| format!("cannot push {branch} to the shared remote `{}`: {e}", self.remote))?;
        self.pushed.insert(group.to_string(), branch.clone());
        let prefix = git(q.workdir, &["rev-parse", "--show-prefix"]).await?;
        let mut files = BTreeMap::new();
        for dir in [q.layout.spec_dir(&self.feature), q.layout.steering_dir()] {
            let rel = dir.strip_prefix(q.root).unwrap_or(&dir);
            collect(&q.workdir.join(rel), rel, &mut files)?;
        }
        let script = q.script.strip_prefix(q.root).unwrap_or(q.script).display().to_string();
        let payload = Payload {
            request: q.req.clone(),
            prompt: q.prompt,
            turn: q.turn,
            session: q.session,
            run: q.run.to_string(),
            prefix,
            script,
            files,
            activity_ms: q.activity.as_millis() as u64,
        };
        let id = format!("{}/{}/{}", self.feature, q.req.id, q.turn);
        let job = NewJob {
            id: id.clone(),
            feature: self.feature.clone(),
            agent: q.req.id.clone(),
            role: q.req.role.as_str().to_string(),
            engine: q.engine.to_string(),
            labels: self.config.labels_for(q.engine),
            branch: branch.clone(),
            base,
            payload: serde_json::to_value(&payload).map_err(|e| e.to_string())?,
        };
        let follow = Follow {
            agent: q.req.id.clone(),
            workdir: q.workdir.to_path_buf(),
            branch,
            started: false,
            engine: job.engine.clone(),
            labels: job.labels.clone(),
            unplaceable: false,
        };
        self.jobs.lock().unwrap_or_else(|e| e.into_inner()).insert(id.clone(), follow);
        if let Err(e) = store.queue_job(job) {
            self.jobs.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
            return Err(format!("cannot queue the spawn job {id}: {e}"));
        }
        self.by_agent.insert(q.req.id.clone(), id);
        Ok(())
    }

    /// A forced stop of `id`: its worker stops the process (through the
    /// store). Returns whether its job had ended already (its worker was
    /// lost, or it never started): nothing will report its end then.
    pub(super) fn stop(&self, store: &dyn Store, id: &str) -> Result<bool, String> {
        match self.by_agent.get(id) {
            Some(job) => {
                store.stop_job(job, super::plan_io::LEAD).map(|j| j.state.is_final()).map_err(|e| e.to_string())
            }
            None => Ok(false),
        }
    }

    /// Group `group` is merged: its branch on the shared remote goes (seed
    /// 000 Spec 14: every branch deleted right after its merge).
    pub(super) async fn merged(&mut self, root: &Path, group: &str) -> Result<(), String> {
        match self.pushed.remove(group) {
            Some(branch) => delete_branches(root, &self.remote, &[branch]).await,
            None => Ok(()),
        }
    }

    /// The run ends: its jobs still queued fail (no worker may start a
    /// teammate of an ended run; held ones were stopped with their
    /// teammates), the branches it pushed and did not merge go (a resume
    /// pushes them again), and ended jobs older than `[workers]
    /// keep_jobs_hours` are deleted. Returns what could not be done.
    pub(super) async fn finish(&mut self, store: &dyn Store, root: &Path) -> Vec<String> {
        let mut errors = Vec::new();
        for job in self.by_agent.values() {
            match store.job(job) {
                Ok(j) if j.state == worker::JobState::Queued => {
                    if let Err(e) = store.stop_job(job, super::plan_io::LEAD) {
                        errors.push(format!("cannot withdraw spawn job {job}: {e}"));
                    }
                }
                Ok(_) => {}
                Err(e) => errors.push(format!("cannot read spawn job {job}: {e}")),
            }
        }
        let left: Vec<String> = std::mem::take(&mut self.pushed).into_values().collect();
        if !left.is_empty()
            && let Err(e) = delete_branches(root, &self.remote, &left).await
        {
            errors.push(e);
        }
        let keep = Duration::from_secs(self.config.keep_jobs_hours.saturating_mul(3600));
        let before = jiff::Timestamp::now() - jiff::SignedDuration::try_from(keep).unwrap_or(jiff::SignedDuration::MAX);
        if let Err(e) = store.prune_jobs(before) {
            errors.push(format!("cannot delete ended spawn jobs: {e}"));
        }
        errors
    }

    /// Follow the workers' reports of this run's jobs until the task is
    /// aborted, feeding the machine; every `every`, sweep lost workers and
    /// keep the leases of teammates whose job waits in the queue (waiting
    /// for a free worker is not hanging: the start-up allowance covers it).
    pub(super) fn watch(
        &self,
        layout: Layout,
        config: StoreConfig,
        tx: UnboundedSender<Report>,
        every: Duration,
    ) -> tokio::task::JoinHandle<()> {
        let (jobs, remote) = (self.jobs.clone(), self.remote.clone());
        tokio::task::spawn_blocking(move || {
            let lease = config.lease();
            let store = match troupe_store::open(&layout, &config) {
                Ok(store) => store,
                Err(e) => {
                    let error = format!("cannot open the store to follow the workers: {e}");
                    let _ = tx.send(Report::Lead(Event::CommandFailed { command: "watch-workers".into(), error }));
                    return;
                }
            };
            let mut after = store.last_event_id().unwrap_or(0);
            let sweep_every = super::leases::interval(lease, every);
            let mut next_sweep = Instant::now();
            let follower = Follower { jobs, remote, tx };
            loop {
                let _ = store.wait_for_event(after, every);
                if follower.tx.is_closed() {
                    return;
                }
                if Instant::now() >= next_sweep {
                    next_sweep = Instant::now() + sweep_every;
                    let _ = store.expire_workers();
                    for agent in follower.queued() {
                        let _ = store.renew_lease(&agent, lease);
                    }
                    follower.unplaceable(store.as_ref());
                }
                let Ok(events) = store.events_since(after, 500) else { continue };
                for e in events {
                    after = e.id;
                    follower.on_event(&e);
                }
            }
        })
    }
}

/// The watcher's side: from a job's events to the machine's.
struct Follower {
    jobs: Jobs,
    remote: String,
    tx: UnboundedSender<Report>,
}

impl Follower {
    /// Say once of each queued job that no live worker can take it (its
    /// engine or labels offered by none), rather than wait in silence.
    fn unplaceable(&self, store: &dyn Store) {
        let Ok(hosts) = store.hosts() else { return };
        let now = jiff::Timestamp::now();
        let mut jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        for (id, f) in jobs.iter_mut().filter(|(_, f)| !f.started && !f.unplaceable) {
            if hosts.iter().any(|h| h.can_take(&f.engine, &f.labels, now)) {
                continue;
            }
            f.unplaceable = true;
            let _ = self.tx.send(Report::Note(worker::unplaceable(id, &f.engine, &f.labels)));
        }
    }

    fn queued(&self) -> Vec<AgentId> {
        self.jobs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .filter(|f| !f.started)
            .map(|f| f.agent.clone())
            .collect()
    }

    fn on_event(&self, e: &troupe_store::Event) {
        let Some(job) = e.subject.as_deref() else { return };
        let Some(follow) = self.jobs.lock().unwrap_or_else(|e| e.into_inner()).get(job).cloned() else { return };
        let send = |event: Event| {
            let _ = self.tx.send(Report::Lead(event));
        };
        match e.kind.as_str() {
            worker::JOB_REPORT => match serde_json::from_value::<Wire>(e.data.clone()) {
                Ok(Wire::Agent(a)) => {
                    let _ = self.tx.send(Report::Agent(follow.agent.clone(), a));
                }
                Ok(Wire::Lead(event)) => {
                    let event = match event {
                        Event::TeammateStarted { .. } => {
                            self.update(job, |f| f.started = true);
                            event
                        }
                        Event::TeammateEnded { id, ending, stats } => {
                            self.forget(job);
                            // The branch is in the local worktree before the machine gates and merges it.
                            match fetch(&follow, &self.remote) {
                                Ok(()) => Event::TeammateEnded { id, ending, stats },
                                Err(error) => Event::TeammateExited { id, error, stats },
                            }
                        }
                        Event::TeammateExited { .. } | Event::SpawnFailed { .. } => {
                            self.forget(job);
                            event
                        }
                        other => other,
                    };
                    send(event);
                }
                Err(err) => {
                    let _ = self.tx.send(Report::Note(format!("an unreadable report of spawn job {job}: {err}")));
                }
            },
            // Ended without reporting its teammate's end: the worker could
            // not start it, or a stop came before it did. A job lost with its
            // worker is its teammate's passed lease, which the run's watcher
            // hands on as `TeammateLeaseExpired`.
            worker::JOB_FINISHED => {
                self.forget(job);
                if e.actor.as_deref() == Some(worker::WORKER_SWEEPER) {
                    return;
                }
                let error = e.data["result"]["error"].as_str().unwrap_or("its spawn job failed").to_string();
                let id = follow.agent.clone();
                send(match follow.started {
                    true => Event::TeammateExited { id, error, stats: RunStats::default() },
                    false => Event::SpawnFailed { id, error },
                });
            }
            _ => {}
        }
    }

    fn update(&self, job: &str, f: impl FnOnce(&mut Follow)) {
        if let Some(follow) = self.jobs.lock().unwrap_or_else(|e| e.into_inner()).get_mut(job) {
            f(follow);
        }
    }

    fn forget(&self, job: &str) {
        self.jobs.lock().unwrap_or_else(|e| e.into_inner()).remove(job);
    }
}

/// Bring the teammate's pushed branch into the group's local worktree (a
/// fast-forward: the worker's commit descends from the base it was given).
fn fetch(follow: &Follow, remote: &str) -> Result<(), String> {
    let run = |args: &[&str]| -> Result<(), String> {
        let out = std::process::Command::new("git")
            .current_dir(&follow.workdir)
            .args(troupe_project::git::hardened_args(&follow.workdir))
            .args(args)
            .env("GIT_TERMINAL_PROMPT", "0")
            .output()
            .map_err(|e| format!("cannot run git: {e}"))?;
        match out.status.success() {
            true => Ok(()),
            false => Err(format!("git {} failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim())),
        }
    };
    let refspec = format!("refs/heads/{}", follow.branch);
    run(&["fetch", "-q", remote, &refspec])
        .and_then(|()| run(&["merge", "-q", "--ff-only", "FETCH_HEAD"]))
        .map_err(|e| format!("cannot bring the worker's branch {} into its worktree: {e}", follow.branch))
}

/// Delete `branches` on the shared remote (from the repository at `root`).
async fn delete_branches(root: &Path, remote: &str, branches: &[String]) -> Result<(), String> {
    let mut args = vec!["push", "-q", remote, "--delete"];
    args.extend(branches.iter().map(String::as_str));
    git(root, &args)
        .await
        .map(drop)
        .map_err(|e| format!("cannot delete {} on the shared remote `{remote}`: {e}", branches.join(", ")))
}

/// The files under `dir` (recursively) as text, keyed by their path under `rel`.
fn collect(dir: &Path, rel: &Path, into: &mut BTreeMap<String, String>) -> Result<(), String> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Ok(()) };
    for entry in entries.flatten() {
        let (path, name) = (entry.path(), rel.join(entry.file_name()));
        if path.is_dir() {
            collect(&path, &name, into)?;
        } else if let Ok(text) = std::fs::read_to_string(&path) {
            into.insert(name.display().to_string(), text);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use troupe_store::worker::NewHost;
    use troupe_store::{SqliteStore, Workers};

    use super::*;

    fn follow(engine: &str, labels: &[&str]) -> Follow {
        Follow {
            agent: "builder-g1-1".into(),
            workdir: PathBuf::from("/nowhere"),
            branch: "troupe/f/G1".into(),
            started: false,
            engine: engine.into(),
            labels: labels.iter().map(|l| l.to_string()).collect(),
            unplaceable: false,
        }
    }

    fn notes(rx: &mut tokio::sync::mpsc::UnboundedReceiver<Report>) -> Vec<String> {
        std::iter::from_fn(|| rx.try_recv().ok())
            .filter_map(|r| match r {
                Report::Note(n) => Some(n),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_queued_job_no_live_worker_can_take_is_said_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("t.db")).unwrap();
        let host = |name: &str, labels: &[&str]| NewHost {
            name: name.into(),
            engines: vec!["claude".into()],
            labels: labels.iter().map(|l| l.to_string()).collect(),
            max: 1,
        };
        store.register_host(host("small", &["linux"]), Duration::from_secs(60)).unwrap();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let jobs: Jobs = Arc::default();
        jobs.lock().unwrap().insert("f/a/0".into(), follow("claude", &["linux"]));
        jobs.lock().unwrap().insert("f/b/0".into(), follow("claude", &["linux", "gpu"]));
        jobs.lock().unwrap().insert("f/c/0".into(), follow("codex", &[]));
        let follower = Follower { jobs, remote: "origin".into(), tx };
        follower.unplaceable(&store);
        let mut said = notes(&mut rx);
        said.sort();
        assert_eq!(said.len(), 2, "{said:?}");
        assert!(
            said[0].starts_with("spawn job f/b/0 waits") && said[0].contains("--engines claude --labels linux,gpu")
        );
        assert!(said[1].contains("f/c/0") && said[1].contains("--engines codex`"), "{said:?}");
        follower.unplaceable(&store);
        assert!(notes(&mut rx).is_empty(), "said once");
        // A draining host takes nothing: the placeable job becomes unplaceable.
        store.drain_host("small").unwrap();
        follower.unplaceable(&store);
        assert_eq!(notes(&mut rx).len(), 1);
    }
}
