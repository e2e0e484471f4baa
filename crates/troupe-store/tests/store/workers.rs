//! Workers on other hosts and their spawn jobs (`troupe worker`), on both
//! backends: what a host may claim, a job's life, racing claimers, and a lost
//! worker whose jobs fail and whose teammates' leases are swept.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use serde_json::json;
use troupe_store::lease::LEASE_EXPIRED;
use troupe_store::worker::{self, JobState, NewHost, NewJob};
use troupe_store::{AgentStatus, NewAgent, NewTask, StoreError};

use crate::conformance;

const LONG: Duration = Duration::from_secs(60);

fn host(name: &str, engines: &[&str], labels: &[&str], max: u32) -> NewHost {
    NewHost {
        name: name.into(),
        engines: engines.iter().map(|s| s.to_string()).collect(),
        labels: labels.iter().map(|s| s.to_string()).collect(),
        max,
    }
}

fn job(id: &str, engine: &str, labels: &[&str]) -> NewJob {
    NewJob {
        id: id.into(),
        feature: "login".into(),
        agent: format!("builder-{id}"),
        role: "builder".into(),
        engine: engine.into(),
        labels: labels.iter().map(|s| s.to_string()).collect(),
        branch: format!("troupe/login/{id}"),
        base: "abc123".into(),
        payload: json!({"prompt": "build it"}),
    }
}

conformance! {
fn a_host_claims_only_what_it_can_run_and_a_job_lives_to_its_end(s) {
    s.register_host(host("gpu", &["claude"], &["gpu", "big"], 2), LONG).unwrap();
    s.register_host(host("small", &[], &[], 1), LONG).unwrap();
    for j in [job("a", "codex", &[]), job("b", "claude", &["gpu"]), job("c", "claude", &[]), job("d", "codex", &[])] {
        assert_eq!(s.queue_job(j).unwrap().state, JobState::Queued);
    }
    assert!(matches!(s.queue_job(job("a", "codex", &[])), Err(StoreError::BadValue { .. })), "ids are unique");

    // `gpu` runs claude only: not a, but b (its labels) then c; then its max of 2 is reached.
    let b = s.claim_job("gpu", LONG).unwrap().unwrap();
    assert_eq!((b.queued.id.as_str(), b.state, b.host.as_deref()), ("b", JobState::Claimed, Some("gpu")));
    assert!(b.lease_until.is_some());
    assert_eq!(s.claim_job("gpu", LONG).unwrap().unwrap().queued.id, "c");
    assert_eq!(s.claim_job("gpu", LONG).unwrap(), None, "max 2");
    // `small` names no engine (any) and no label: a, then its max of 1.
    assert_eq!(s.claim_job("small", LONG).unwrap().unwrap().queued.id, "a");
    assert_eq!(s.claim_job("small", LONG).unwrap(), None);
    assert!(matches!(s.claim_job("nobody", LONG), Ok(None)), "an unknown host claims nothing");

    // Only its holder acts on a job.
    assert!(matches!(s.start_job("b", "small"), Err(StoreError::JobNotHeld { .. })));
    assert_eq!(s.start_job("b", "gpu").unwrap().state, JobState::Running);
    s.report_job("b", "gpu", json!({"event": "started"})).unwrap();
    let done = s.finish_job("b", "gpu", true, json!({"exit": 0, "text": "BUILDER_COMPLETE"})).unwrap();
    assert_eq!((done.state, done.result.clone()), (JobState::Done, Some(json!({"exit": 0, "text": "BUILDER_COMPLETE"}))));
    assert!(matches!(s.report_job("b", "gpu", json!({})), Err(StoreError::JobNotHeld { .. })), "ended");
    assert!(matches!(s.finish_job("b", "gpu", true, json!({})), Err(StoreError::JobNotHeld { .. })));

    // Its load counts the jobs it holds; the heartbeat returns them, with a stop asked for.
    s.stop_job("c", "lead").unwrap();
    let (gpu, held) = s.renew_host("gpu", LONG, Some(1.25)).unwrap();
    assert_eq!((gpu.running, gpu.load), (1, Some(1.25)));
    assert_eq!(held.iter().map(|j| (j.queued.id.as_str(), j.stop)).collect::<Vec<_>>(), [("c", true)]);
    // A queued job stopped fails at once; an ended one is left as it is.
    assert_eq!(s.stop_job("d", "lead").unwrap().state, JobState::Failed);
    assert_eq!(s.stop_job("b", "lead").unwrap().state, JobState::Done);

    // A draining host takes nothing new.
    s.queue_job(job("e", "claude", &[])).unwrap();
    assert!(s.drain_host("gpu").unwrap().draining);
    s.finish_job("c", "gpu", false, json!({"error": "stopped"})).unwrap();
    assert_eq!(s.claim_job("gpu", LONG).unwrap(), None, "draining");
    assert!(!s.register_host(host("gpu", &["claude"], &["gpu"], 2), LONG).unwrap().draining, "registered again");
    assert_eq!(s.claim_job("gpu", LONG).unwrap().unwrap().queued.id, "e");

    // Leaving fails what it still holds.
    s.leave_host("gpu").unwrap();
    assert_eq!(s.job("e").unwrap().state, JobState::Failed);
    assert!(s.hosts().unwrap().iter().any(|h| h.name == "gpu" && h.lease_until.is_none()));
    assert!(matches!(s.renew_host("gpu", LONG, None), Err(StoreError::HostNotFound(_))), "it left: register again");

    let ids: Vec<String> = s.jobs(Some("login")).unwrap().into_iter().map(|j| j.queued.id).collect();
    assert_eq!(ids, ["a", "b", "c", "d", "e"]);
    assert!(s.jobs(Some("cart")).unwrap().is_empty());

    // Every change recorded its event, in order.
    let kinds: Vec<(String, String)> = s
        .events_since(0, 1000)
        .unwrap()
        .into_iter()
        .filter(|e| e.kind.starts_with("job_") || e.kind.starts_with("worker_"))
        .map(|e| (e.kind, e.subject.unwrap_or_default()))
        .collect();
    let claims: Vec<&str> =
        kinds.iter().filter(|(k, _)| k == worker::JOB_CLAIMED).map(|(_, s)| s.as_str()).collect();
    assert_eq!(claims, ["b", "c", "a", "e"]);
    assert!(kinds.contains(&(worker::JOB_REPORT.into(), "b".into())));
    assert_eq!(kinds.iter().filter(|(k, _)| k == worker::JOB_FINISHED).count(), 4, "{kinds:#?}");
    assert!(kinds.contains(&(worker::HOST_GONE.into(), "gpu".into())));
}

fn racing_claimers_take_each_job_exactly_once(s) {
    const HOSTS: usize = 4;
    const JOBS: usize = 60;
    for i in 0..JOBS {
        s.queue_job(job(&format!("j{i:03}"), "claude", &[])).unwrap();
    }
    let place = s.place().clone();
    let claimed: Vec<Vec<String>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..HOSTS)
            .map(|h| {
                let place = place.clone();
                scope.spawn(move || {
                    // Each worker its own connection, as on its own host.
                    let store = place.open();
                    let name = format!("host-{h}");
                    store.register_host(host(&name, &[], &[], JOBS as u32), LONG).unwrap();
                    let mut mine = Vec::new();
                    while let Some(j) = store.claim_job(&name, LONG).unwrap() {
                        assert_eq!(j.host.as_deref(), Some(name.as_str()));
                        mine.push(j.queued.id);
                    }
                    mine
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let all: Vec<&String> = claimed.iter().flatten().collect();
    let unique: HashSet<&String> = all.iter().copied().collect();
    assert_eq!((all.len(), unique.len()), (JOBS, JOBS), "every job claimed once: {claimed:?}");
    let events = s.events_since(0, 10_000).unwrap();
    assert_eq!(events.iter().filter(|e| e.kind == worker::JOB_CLAIMED).count(), JOBS, "one event per claim");
}

fn a_lost_workers_jobs_fail_and_their_teammates_leases_are_swept(s) {
    let lease = Duration::from_millis(300);
    let lost = s.place().open();
    // A long lease while the test sets up (on a busy machine that takes more
    // than the short one), cut short by the worker's last renewal below.
    lost.register_host(host("lost", &[], &[], 2), LONG).unwrap();
    s.register_host(host("alive", &[], &[], 2), LONG).unwrap();
    let task = s.create_task(NewTask::new("build the parser", "lead")).unwrap();
    s.register(NewAgent { lease: Some(lease), ..NewAgent::new("builder-a", "builder", "claude") }).unwrap();
    s.set_status("builder-a", AgentStatus::Processing).unwrap();
    s.claim(&task.id, "builder-a").unwrap();
    s.queue_job(job("a", "claude", &[])).unwrap();
    assert_eq!(lost.claim_job("lost", lease).unwrap().unwrap().queued.id, "a");
    lost.start_job("a", "lost").unwrap();
    lost.renew_host("lost", lease, None).unwrap();
    drop(lost);

    // Whoever sweeps (the Lead, another worker), until the lease passed.
    let deadline = Instant::now() + Duration::from_secs(20);
    let expired = loop {
        let swept = s.expire_workers().unwrap();
        if !swept.jobs.is_empty() {
            break swept;
        }
        assert!(Instant::now() < deadline, "the lost worker's lease never expired");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(expired.jobs, ["a"]);
    assert_eq!(expired.hosts, ["lost"], "the host and its job, in one sweep");
    assert!(s.expire_workers().unwrap() == Default::default(), "swept once");
    let a = s.job("a").unwrap();
    assert_eq!(a.state, JobState::Failed, "failed, never queued again: the Lead's recovery retries");
    assert!(a.result.unwrap()["error"].as_str().unwrap().contains("lease"));
    // Its teammate is a lost holder: the Lead hears `lease_expired`, its task is free.
    let events = s.events_since(0, 1000).unwrap();
    assert!(events.iter().any(|e| e.kind == LEASE_EXPIRED && e.subject.as_deref() == Some("builder-a")));
    assert_eq!(s.task(&task.id).unwrap().assignee, None);
    assert!(s.expire_leases().unwrap().is_empty(), "the teammate was swept with its job, once");
    // The lost worker, back, learns it lost its job and its host.
    assert!(matches!(s.report_job("a", "lost", json!({})), Err(StoreError::JobNotHeld { .. })));
    assert!(matches!(s.renew_host("lost", lease, None), Err(StoreError::HostNotFound(_))));
    let hosts = s.hosts().unwrap();
    let stale: Vec<&str> =
        hosts.iter().filter(|h| h.stale(jiff::Timestamp::now())).map(|h| h.name.as_str()).collect();
    assert_eq!(stale, ["lost"]);
}

fn pruning_deletes_only_jobs_that_ended_before_the_cutoff(s) {
    s.register_host(host("h", &[], &[], 3), LONG).unwrap();
    for id in ["done", "failed", "running", "queued"] {
        s.queue_job(job(id, "claude", &[])).unwrap();
    }
    for id in ["done", "failed", "running"] {
        assert_eq!(s.claim_job("h", LONG).unwrap().unwrap().queued.id, id);
    }
    s.finish_job("done", "h", true, json!({})).unwrap();
    s.finish_job("failed", "h", false, json!({})).unwrap();
    s.start_job("running", "h").unwrap();
    let before = s.events_since(0, 1000).unwrap().len();
    // A cutoff before they ended keeps them (the retention); one after removes the ended ones only.
    assert_eq!(s.prune_jobs(jiff::Timestamp::now() - jiff::SignedDuration::from_secs(3600)).unwrap(), 0);
    assert_eq!(s.jobs(None).unwrap().len(), 4);
    assert_eq!(s.prune_jobs(jiff::Timestamp::now() + jiff::SignedDuration::from_secs(1)).unwrap(), 2);
    let left: Vec<(String, JobState)> = s.jobs(None).unwrap().into_iter().map(|j| (j.queued.id, j.state)).collect();
    assert_eq!(left, [("running".to_string(), JobState::Running), ("queued".to_string(), JobState::Queued)]);
    assert_eq!(s.events_since(0, 1000).unwrap().len(), before, "their events stay; pruning adds none");
    // An id that was pruned can be queued again.
    s.queue_job(job("done", "claude", &[])).unwrap();
}
}
