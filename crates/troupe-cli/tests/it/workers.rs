//! `[team] executors = "workers"` end to end, all from the `troupe` binary:
//! a private PostgreSQL cluster as the shared store, a bare repository
//! standing for the shared git remote, three `troupe worker` processes each
//! in its own checkout with its own clone and, where the machine allows it,
//! its own network namespace (reaching PostgreSQL over a veth or slirp4netns link, not
//! loopback: `troupe_testkit::netns`), and a two-wave `troupe run` with the
//! scripted engine whose Builders all run on the workers. Jobs ask for the
//! label `[workers] labels` names: the worker started without it takes
//! none. The worker running G1 is SIGKILLed mid-task: its lease passes
//! (sub-second here), G1 is retried on another worker, and nothing is done
//! twice. Nothing is left behind: no group branch on the remote, no job
//! waiting. The other workers then drain (`troupe worker stop`) and exit.
//! `workers_claude` runs the same with real Claude Code Builders.

use std::path::{Path, PathBuf};
use std::process::{Child, Command as Std, Stdio};
use std::time::{Duration, Instant};

use troupe_store::worker::JobState;
use troupe_store::{EventLog, PgStore, Workers};

use crate::lead::{DESIGN, TASKS, git, project};
use crate::support::json;

/// A worker process, killed if the test ends early.
pub(crate) struct Worker {
    pub(crate) name: String,
    pub(crate) child: Child,
    pub(crate) log: PathBuf,
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn troupe_bin() -> PathBuf {
    assert_cmd::cargo::cargo_bin("troupe")
}

/// `troupe worker --name <name> --max 1 <args>` in `checkout`, as `cmd`
/// (the `troupe` program, maybe in a network namespace) starts it.
pub(crate) fn start_worker(mut cmd: Std, checkout: &Path, name: &str, args: &[&str], url: &str, logs: &Path) -> Worker {
    let log = logs.join(format!("{name}.log"));
    let child = cmd
        .arg("-C")
        .arg(checkout)
        .args(["worker", "--name", name, "--max", "1"])
        .args(args)
        .env("TROUPE_DATABASE_URL", url)
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    Worker { name: name.into(), child, log }
}

/// `troupe --json run login <args>` in `root`, the Lead, on the store at `url`.
pub(crate) fn start_lead(root: &Path, url: &str, args: &[&str]) -> Child {
    Std::new(troupe_bin())
        .arg("-C")
        .arg(root)
        .args(["--json", "run", "login"])
        .args(args)
        .env("TROUPE_DATABASE_URL", url)
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// A bare repository at `<tmp>/remote.git` as the project's `origin`, with
/// its commits pushed, and a clone of it per host (`<tmp>/host-<i>`).
pub(crate) fn shared_remote(root: &Path, tmp: &Path, hosts: usize) -> (PathBuf, Vec<PathBuf>) {
    let bare = tmp.join("remote.git");
    git(tmp, &["init", "-q", "--bare", &bare.display().to_string()]);
    git(root, &["remote", "add", "origin", &bare.display().to_string()]);
    git(root, &["push", "-q", "origin", "HEAD"]);
    let checkouts = (0..hosts)
        .map(|i| {
            let checkout = tmp.join(format!("host-{i}"));
            git(tmp, &["clone", "-q", &bare.display().to_string(), &checkout.display().to_string()]);
            checkout
        })
        .collect();
    (bare, checkouts)
}

fn builder(group: &str, task: &str, file: &str, before: &str) -> String {
    format!(
        "  builder/{group}:\n    - - {before}write: {{path: {file}, content: \"{group}\\n\"}}\n      - complete: \"{task}\"\n      - report: \"BUILDER_COMPLETE\\nFeature: login\\nStatus: done\\nTasks completed: {task}\\nFiles: {file}\\nTests: ok\"\n"
    )
}

#[test]
fn workers_on_other_clones_build_a_two_wave_run_and_a_lost_workers_group_is_retried_once_elsewhere() {
    // Declared first, dropped last: the namespaces outlive the workers in them.
    let hosts = troupe_testkit::netns::Hosts::start(3);
    let url = hosts.local_url();
    let tmp = tempfile::tempdir().unwrap();
    // G1's first attempt waits (in a tool call) until the test releases it,
    // after killing its worker; the retry finds the release and goes on.
    let release = tmp.path().join("release");
    let wait =
        format!("run: \"for i in $(seq 600); do [ -e '{}' ] && break; sleep 0.1; done\"\n      - ", release.display());
    let script = format!(
        "agents:{DESIGN}{TASKS}{}{}{}",
        builder("G1", "1.1", "a.txt", &wait),
        builder("G2", "1.2", "b.txt", ""),
        builder("G3", "2", "c.txt", "")
    );
    let p = project(&script);
    let config = std::fs::read_to_string(p.path(".troupe/config.toml")).unwrap();
    let config = config
        .replacen("[team]\n", "[team]\nexecutors = \"workers\"\n", 1)
        .replacen("[store]\n", "[store]\nlease_ms = 600\n", 1)
        .replacen("[shutdown]\n", "[shutdown]\ntimeout_ms = 300\n", 1)
        + "\n[workers]\nremote = \"origin\"\npoll_ms = 50\nlabels = [\"linux\"]\n";
    std::fs::write(p.path(".troupe/config.toml"), config).unwrap();
    git(p.root(), &["commit", "-qam", "teammates on workers"]);
    let (bare, checkouts) = shared_remote(p.root(), tmp.path(), 3);
    // w2 lacks the label every job asks for: it takes none.
    let mut workers: Vec<Worker> = checkouts
        .iter()
        .enumerate()
        .map(|(i, checkout)| {
            let labels: &[&str] = if i < 2 { &["--labels", "linux,big"] } else { &[] };
            start_worker(hosts.command(i, troupe_bin()), checkout, &format!("w{i}"), labels, &hosts.url(i), tmp.path())
        })
        .collect();

    let mut lead = start_lead(p.root(), &url, &["users log in", "--engine", "scripted", "--no-review"]);

    // Whichever worker took G1 is lost, mid-task.
    let store = PgStore::open(&url).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let lost = loop {
        if Instant::now() > deadline || lead.try_wait().unwrap().is_some() {
            let _ = lead.kill();
            let out = lead.wait_with_output().unwrap();
            panic!(
                "no worker took G1: {}\n{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
                logs(&workers)
            );
        }
        let held =
            store.jobs(Some("login")).unwrap().into_iter().find(|j| {
                j.queued.agent.starts_with("builder-g1-") && j.state == JobState::Running && j.host.is_some()
            });
        if let Some(j) = held {
            break j.host.unwrap();
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    hosts.assert_connected_over_links();
    let at = workers.iter().position(|w| w.name == lost).unwrap();
    let mut killed = workers.remove(at);
    killed.child.kill().unwrap();
    killed.child.wait().unwrap();
    std::fs::write(&release, "").unwrap();

    let out = wait_with_deadline(lead, Duration::from_secs(120));
    let report = json(&out);
    assert_eq!(report["outcome"], "completed", "{}\n{}", String::from_utf8_lossy(&out.stderr), logs(&workers));

    // All groups merged, each once, and G1's file written once.
    let merges = git(p.root(), &["log", "--merges", "--format=%(trailers:key=Troupe-Merge,valueonly)"]);
    let mut merged: Vec<&str> = merges.lines().filter(|l| !l.trim().is_empty()).collect();
    merged.sort();
    assert_eq!(merged, ["login/G1@1.0", "login/G2@1.0", "login/G3@1.0"]);
    for (file, text) in [("a.txt", "G1\n"), ("b.txt", "G2\n"), ("c.txt", "G3\n")] {
        assert_eq!(git(p.root(), &["show", &format!("HEAD:{file}")]), text);
    }

    // Every Builder ran on a worker; G1's first job was lost with its host and
    // its retry (a new teammate) ran on another.
    let jobs = store.jobs(Some("login")).unwrap();
    let g1: Vec<_> = jobs.iter().filter(|j| j.queued.agent.starts_with("builder-g1-")).collect();
    assert_eq!(g1.len(), 2, "{jobs:#?}");
    assert_eq!((g1[0].state, g1[0].host.as_deref()), (JobState::Failed, Some(lost.as_str())));
    assert_eq!(g1[1].state, JobState::Done);
    assert_ne!(g1[1].host.as_deref(), Some(lost.as_str()));
    assert_ne!(g1[0].queued.agent, g1[1].queued.agent, "the retry is a new teammate");
    assert_eq!(jobs.iter().filter(|j| j.state == JobState::Done).count(), 3, "{jobs:#?}");
    assert!(jobs.iter().all(|j| j.host.as_deref() != Some("w2") && j.queued.labels == ["linux"]), "{jobs:#?}");

    // The board is complete, each task completed once.
    let board = json(&p.troupe().env("TROUPE_DATABASE_URL", &url).args(["--json", "board", "list"]).output().unwrap());
    let tasks = board.as_array().unwrap();
    assert!(!tasks.is_empty() && tasks.iter().all(|t| t["status"] == "completed"), "{board:#}");
    let events = store.events_since(0, 100_000).unwrap();
    let completed: Vec<&str> =
        events.iter().filter(|e| e.kind == "task_completed").filter_map(|e| e.subject.as_deref()).collect();
    assert_eq!(completed.iter().filter(|s| **s == "login/1.1").count(), 1, "{completed:?}");

    assert_job_events(&events, &jobs);
    assert_nothing_stale(&store, &bare);

    // The lost host shows as stale; the others drain and exit.
    let hosts = json(&p.troupe().env("TROUPE_DATABASE_URL", &url).args(["--json", "worker", "list"]).output().unwrap());
    let state = |name: &str| hosts.as_array().unwrap().iter().find(|h| h["name"] == name).unwrap()["state"].clone();
    assert_eq!(state(&lost), "stale", "{hosts:#}");
    let status = p.troupe().env("TROUPE_DATABASE_URL", &url).arg("status").output().unwrap();
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(status.contains("workers:") && status.contains(&lost) && status.contains("stale"), "{status}");
    // A job no live worker can take is reported, not waited on in silence.
    store.queue_job(gpu_job()).unwrap();
    let status =
        json(&p.troupe().env("TROUPE_DATABASE_URL", &url).args(["--json", "status", "login"]).output().unwrap());
    let listed: Vec<&str> =
        status[0]["workers"].as_array().unwrap().iter().map(|h| h["name"].as_str().unwrap()).collect();
    assert_eq!(listed.len(), 3, "{status:#}");
    assert_eq!(
        status[0]["workers"].as_array().unwrap().iter().find(|h| h["name"] == lost.as_str()).unwrap()["state"],
        "stale"
    );
    let waiting = &status[0]["waiting_jobs"][0];
    assert_eq!(waiting["takers"], serde_json::json!([]), "{status:#}");
    assert!(waiting["problem"].as_str().unwrap().contains("--engines scripted --labels gpu"), "{status:#}");
    store.stop_job("login/gpu", "test").unwrap();
    for w in &workers {
        assert_eq!(state(&w.name), "up");
        p.troupe().env("TROUPE_DATABASE_URL", &url).args(["worker", "stop", &w.name]).assert().success();
    }
    for w in &mut workers {
        let deadline = Instant::now() + Duration::from_secs(20);
        let status = loop {
            if let Some(status) = w.child.try_wait().unwrap() {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "{} did not drain: {}",
                w.name,
                std::fs::read_to_string(&w.log).unwrap()
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(status.success(), "{}", std::fs::read_to_string(&w.log).unwrap());
    }
    assert!(store.hosts().unwrap().iter().filter(|h| h.name != lost).all(|h| h.lease_until.is_none()), "they left");
}

/// A job asking for a label no worker offers.
fn gpu_job() -> troupe_store::worker::NewJob {
    troupe_store::worker::NewJob {
        id: "login/gpu".into(),
        feature: "login".into(),
        agent: "builder-gpu".into(),
        role: "Builder".into(),
        engine: "scripted".into(),
        labels: vec!["gpu".into()],
        branch: "troupe/login/gpu".into(),
        base: "HEAD".into(),
        payload: serde_json::json!({}),
    }
}

/// A finished job's life, in order.
const JOB_LIFE: [&str; 5] = ["job_queued", "job_claimed", "TeammateStarted", "TeammateEnded", "job_finished"];

/// Each finished job's events in order: queued, claimed, its teammate's
/// start before its end, then finished.
pub(crate) fn assert_job_events(events: &[troupe_store::Event], jobs: &[troupe_store::worker::Job]) {
    for j in jobs.iter().filter(|j| j.state == JobState::Done) {
        let mine: Vec<String> = events
            .iter()
            .filter(|e| e.subject.as_deref() == Some(j.queued.id.as_str()))
            .map(|e| match e.kind.as_str() {
                "job_report" => e.data["lead"].as_object().and_then(|o| o.keys().next().cloned()).unwrap_or_default(),
                k => k.to_string(),
            })
            // Progress reports (activity, tool calls, turns spent) come between any of these.
            .filter(|k| JOB_LIFE.contains(&k.as_str()))
            .collect();
        assert_eq!(mine, JOB_LIFE, "{}", j.queued.id);
    }
}

/// After a run: no group branch on the shared remote (each deleted after
/// its merge), no job waiting or held.
pub(crate) fn assert_nothing_stale(store: &PgStore, bare: &Path) {
    let refs = git(bare, &["ls-remote", "."]);
    assert!(!refs.contains("refs/heads/troupe/"), "group branches left on the remote:\n{refs}");
    let jobs = store.jobs(None).unwrap();
    assert!(jobs.iter().all(|j| j.state.is_final()), "{jobs:#?}");
}

pub(crate) fn logs(workers: &[Worker]) -> String {
    workers
        .iter()
        .map(|w| format!("--- {}:\n{}", w.name, std::fs::read_to_string(&w.log).unwrap_or_default()))
        .collect()
}

pub(crate) fn wait_with_deadline(mut child: Child, limit: Duration) -> std::process::Output {
    let deadline = Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!("the run did not end: {}", String::from_utf8_lossy(&out.stderr));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}
