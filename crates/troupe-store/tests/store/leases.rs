//! Leases, not pids: a holder that stops heartbeating (its host lost) has its
//! tasks and file locks released once its lease passes, on both backends.

use std::time::{Duration, Instant};

use troupe_store::lease::{LEASE_EXPIRED, LEASE_SWEEPER};
use troupe_store::{AgentStatus, LockOutcome, NewAgent, NewLock, NewTask, StoreError, TaskStatus};

use crate::{assert_sound, conformance};

/// Short, so the test waits little; the sweep polls far more often.
const LEASE: Duration = Duration::from_millis(300);

fn leased(id: &str) -> NewAgent {
    NewAgent { lease: Some(LEASE), ..NewAgent::new(id, "builder", "claude") }
}

conformance! {
fn a_lost_holders_tasks_and_locks_are_released_once_its_lease_passes(s) {
    // The lost host: its own handle on the database, as its processes had.
    let host = s.place().open();
    let held = s.create_task(NewTask::new("build the parser", "lead")).unwrap();
    let reserved = s.create_task(NewTask::new("test the parser", "lead")).unwrap();
    let other = s.create_task(NewTask::new("someone else's", "lead")).unwrap();
    let agent = host.register(leased("builder-9")).unwrap();
    assert!(agent.host.is_some() && agent.lease_until.is_some(), "{agent:?}");
    host.register(NewAgent::new("builder-2", "builder", "claude")).unwrap();
    host.set_status("builder-9", AgentStatus::Processing).unwrap();
    host.claim(&held.id, "builder-9").unwrap();
    s.assign(&reserved.id, "builder-9", "lead").unwrap();
    s.claim(&other.id, "builder-2").unwrap();
    let lock = NewLock { path: "src/parser.rs".into(), agent: "builder-9".into(), pid: None, task: None, ttl_seconds: 600 };
    assert!(matches!(host.lock_file(lock).unwrap(), LockOutcome::Acquired { .. }));

    // Its heartbeat moves the lease; then the host goes silent.
    let renewed = host.renew_lease("builder-9", LEASE).unwrap();
    let last_beat = Instant::now();
    let until = renewed.lease_until.unwrap();
    assert!(until >= agent.lease_until.unwrap());
    drop(host);

    // The Lead's sweep, from another handle, until the lease has passed.
    let deadline = Instant::now() + Duration::from_secs(20);
    let expired = loop {
        let swept = s.expire_leases().unwrap();
        if !swept.is_empty() {
            break swept;
        }
        assert!(Instant::now() < deadline, "the lease never expired");
        std::thread::sleep(Duration::from_millis(10));
    };
    eprintln!("released {:?} after the last heartbeat (lease {LEASE:?})", last_beat.elapsed());
    assert_eq!(expired.len(), 1, "{expired:#?}");
    let e = &expired[0];
    assert_eq!((e.agent.as_str(), e.lease_until), ("builder-9", until));
    assert_eq!(e.tasks, [held.id.clone(), reserved.id.clone()]);
    assert_eq!(e.locks, ["src/parser.rs"]);

    // Not before the lease ended: the events are stamped at or after it.
    let events = s.events_since(0, 1000).unwrap();
    let ended = events.iter().find(|ev| ev.kind == LEASE_EXPIRED).expect("a lease_expired event");
    assert!(ended.at >= until, "released at {} before the lease ended at {until}", ended.at);
    assert_eq!((ended.subject.as_deref(), ended.actor.as_deref()), (Some("builder-9"), Some(LEASE_SWEEPER)));
    assert_eq!(ended.data["tasks"], serde_json::json!([held.id, reserved.id]));
    let released: Vec<_> = events.iter().filter(|ev| ev.kind == "task_released").collect();
    assert_eq!(released.len(), 2);
    assert!(released.iter().all(|ev| ev.data["reason"] == LEASE_EXPIRED && ev.data["previous"] == "builder-9"));
    assert!(events.iter().any(|ev| ev.kind == "lock_released" && ev.data["reason"] == LEASE_EXPIRED));

    // Its work is free for others; another holder's is untouched.
    for id in [&held.id, &reserved.id] {
        let t = s.task(id).unwrap();
        assert_eq!((t.status, t.assignee), (TaskStatus::Pending, None), "{id}");
    }
    assert_eq!(s.task(&other.id).unwrap().assignee.as_deref(), Some("builder-2"));
    assert_eq!(s.file_lock("src/parser.rs").unwrap(), None);
    // It comes back too late: what it held is no longer its.
    assert!(matches!(s.complete(&held.id, "builder-9"), Err(StoreError::NotAssignee { assignee: None, .. })));
    assert!(s.claim(&held.id, "builder-3").is_ok());

    // Swept once; still stale (its lease passed) until it beats again.
    assert!(s.expire_leases().unwrap().is_empty());
    let stale: Vec<_> = s.stale_agents().unwrap().into_iter().map(|a| a.agent.id).collect();
    assert_eq!(stale, ["builder-9"]);
    s.renew_lease("builder-9", Duration::from_secs(60)).unwrap();
    assert!(s.stale_agents().unwrap().is_empty());
    assert!(s.expire_leases().unwrap().is_empty());
    assert_sound(&s);
}
}

conformance! {
fn a_finished_holder_keeps_no_lease_and_an_unleased_one_never_expires(s) {
    s.register(leased("done-1")).unwrap();
    let done = s.set_status("done-1", AgentStatus::Done).unwrap();
    assert_eq!(done.lease_until, None, "a finished agent holds nothing");
    assert_eq!(s.renew_lease("done-1", LEASE).unwrap().lease_until, None, "nor does a late heartbeat give it a lease");
    let t = s.create_task(NewTask::new("by hand", "user")).unwrap();
    s.register(NewAgent::new("person-1", "builder", "claude")).unwrap();
    s.claim(&t.id, "person-1").unwrap();
    std::thread::sleep(LEASE);
    assert!(s.expire_leases().unwrap().is_empty());
    assert_eq!(s.task(&t.id).unwrap().assignee.as_deref(), Some("person-1"));
    assert!(matches!(s.renew_lease("ghost", LEASE), Err(StoreError::AgentNotFound(_))));
}
}

conformance! {
fn racing_sweepers_release_each_lost_holder_once(s) {
    for i in 0..12 {
        let t = s.create_task(NewTask::new(format!("task {i}"), "lead")).unwrap();
        s.register(NewAgent { lease: Some(Duration::from_millis(1)), ..NewAgent::new(format!("b-{i}"), "builder", "x") })
            .unwrap();
        s.claim(&t.id, &format!("b-{i}")).unwrap();
    }
    std::thread::sleep(Duration::from_millis(5));
    let place = s.place().clone();
    let swept: usize = std::thread::scope(|scope| {
        let sweepers: Vec<_> = (0..4)
            .map(|_| {
                let place = place.clone();
                scope.spawn(move || place.open().expire_leases().unwrap().len())
            })
            .collect();
        sweepers.into_iter().map(|t| t.join().unwrap()).sum()
    });
    assert_eq!(swept, 12);
    let events = s.events_since(0, 1000).unwrap();
    assert_eq!(events.iter().filter(|e| e.kind == LEASE_EXPIRED).count(), 12);
    assert_eq!(events.iter().filter(|e| e.kind == "task_released").count(), 12);
    assert_sound(&s);
}
}
