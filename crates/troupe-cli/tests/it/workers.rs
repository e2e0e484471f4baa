//! `[team] executors = "workers"` end to end, all from the `troupe` binary:
//! a private PostgreSQL cluster as the shared store, a bare repository
//! standing for the shared git remote, three `troupe worker` processes each
//! in its own checkout with its own clone, and a two-wave `troupe run` with
//! the scripted engine whose Builders all run on the workers. The worker
//! running G1 is SIGKILLed mid-task: its lease passes (sub-second here), G1
//! is retried on another worker, and nothing is done twice. The other
//! workers then drain (`troupe worker stop`) and exit.

use std::path::{Path, PathBuf};
use std::process::{Child, Command as Std, Stdio};
use std::time::{Duration, Instant};

use troupe_store::worker::JobState;
use troupe_store::{EventLog, PgStore, Workers};

use crate::lead::{DESIGN, TASKS, git, project};
use crate::support::json;

/// A worker process, killed if the test ends early.
struct Worker {
    name: String,
    child: Child,
    log: PathBuf,
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn troupe_bin() -> PathBuf {
    assert_cmd::cargo::cargo_bin("troupe")
}

fn start_worker(checkout: &Path, name: &str, url: &str, logs: &Path) -> Worker {
    let log = logs.join(format!("{name}.log"));
    let child = Std::new(troupe_bin())
        .arg("-C")
        .arg(checkout)
        .args(["worker", "--name", name, "--max", "1"])
        .env("TROUPE_DATABASE_URL", url)
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    Worker { name: name.into(), child, log }
}

fn builder(group: &str, task: &str, file: &str, before: &str) -> String {
    format!(
        "  builder/{group}:\n    - - {before}write: {{path: {file}, content: \"{group}\\n\"}}\n      - complete: \"{task}\"\n      - report: \"BUILDER_COMPLETE\\nFeature: login\\nStatus: done\\nTasks completed: {task}\\nFiles: {file}\\nTests: ok\"\n"
    )
}

#[test]
fn workers_on_other_clones_build_a_two_wave_run_and_a_lost_workers_group_is_retried_once_elsewhere() {
    let url = troupe_testkit::postgres::database();
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
        + "\n[workers]\nremote = \"origin\"\npoll_ms = 50\n";
    std::fs::write(p.path(".troupe/config.toml"), config).unwrap();
    git(p.root(), &["commit", "-qam", "teammates on workers"]);
    let bare = tmp.path().join("remote.git");
    git(tmp.path(), &["init", "-q", "--bare", &bare.display().to_string()]);
    git(p.root(), &["remote", "add", "origin", &bare.display().to_string()]);
    git(p.root(), &["push", "-q", "origin", "HEAD"]);
    let mut workers: Vec<Worker> = (0..3)
        .map(|i| {
            let checkout = tmp.path().join(format!("host-{i}"));
            git(tmp.path(), &["clone", "-q", &bare.display().to_string(), &checkout.display().to_string()]);
            start_worker(&checkout, &format!("w{i}"), &url, tmp.path())
        })
        .collect();

    let mut lead = Std::new(troupe_bin())
        .arg("-C")
        .arg(p.root())
        .args(["--json", "run", "login", "users log in", "--engine", "scripted", "--no-review"])
        .env("TROUPE_DATABASE_URL", &url)
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();

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
        let held = store
            .jobs(Some("login"))
            .unwrap()
            .into_iter()
            .find(|j| j.agent.starts_with("builder-g1-") && j.state == JobState::Running && j.host.is_some());
        if let Some(j) = held {
            break j.host.unwrap();
        }
        std::thread::sleep(Duration::from_millis(50));
    };
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
    let g1: Vec<_> = jobs.iter().filter(|j| j.agent.starts_with("builder-g1-")).collect();
    assert_eq!(g1.len(), 2, "{jobs:#?}");
    assert_eq!((g1[0].state, g1[0].host.as_deref()), (JobState::Failed, Some(lost.as_str())));
    assert_eq!(g1[1].state, JobState::Done);
    assert_ne!(g1[1].host.as_deref(), Some(lost.as_str()));
    assert_ne!(g1[0].agent, g1[1].agent, "the retry is a new teammate");
    assert_eq!(jobs.iter().filter(|j| j.state == JobState::Done).count(), 3, "{jobs:#?}");

    // The board is complete, each task completed once.
    let board = json(&p.troupe().env("TROUPE_DATABASE_URL", &url).args(["--json", "board", "list"]).output().unwrap());
    let tasks = board.as_array().unwrap();
    assert!(!tasks.is_empty() && tasks.iter().all(|t| t["status"] == "completed"), "{board:#}");
    let events = store.events_since(0, 100_000).unwrap();
    let completed: Vec<&str> =
        events.iter().filter(|e| e.kind == "task_completed").filter_map(|e| e.subject.as_deref()).collect();
    assert_eq!(completed.iter().filter(|s| **s == "login/1.1").count(), 1, "{completed:?}");

    // Each finished job's events in order: queued, claimed, its teammate's
    // start before its end, then finished.
    for j in jobs.iter().filter(|j| j.state == JobState::Done) {
        let mine: Vec<String> = events
            .iter()
            .filter(|e| e.subject.as_deref() == Some(j.id.as_str()))
            .map(|e| match e.kind.as_str() {
                "job_report" => e.data["lead"].as_object().and_then(|o| o.keys().next().cloned()).unwrap_or_default(),
                k => k.to_string(),
            })
            .filter(|k| !k.is_empty() && k != "TeammateActivity" && k != "TeammateToolDone")
            .collect();
        assert_eq!(mine, ["job_queued", "job_claimed", "TeammateStarted", "TeammateEnded", "job_finished"], "{}", j.id);
    }

    // The lost host shows as stale; the others drain and exit.
    let hosts = json(&p.troupe().env("TROUPE_DATABASE_URL", &url).args(["--json", "worker", "list"]).output().unwrap());
    let state = |name: &str| hosts.as_array().unwrap().iter().find(|h| h["name"] == name).unwrap()["state"].clone();
    assert_eq!(state(&lost), "stale", "{hosts:#}");
    let status = p.troupe().env("TROUPE_DATABASE_URL", &url).arg("status").output().unwrap();
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(status.contains("workers:") && status.contains(&lost) && status.contains("stale"), "{status}");
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

fn logs(workers: &[Worker]) -> String {
    workers
        .iter()
        .map(|w| format!("--- {}:\n{}", w.name, std::fs::read_to_string(&w.log).unwrap_or_default()))
        .collect()
}

fn wait_with_deadline(mut child: Child, limit: Duration) -> std::process::Output {
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
