//! File locks and the write history.

use std::sync::{Arc, Barrier};

use troupe_store::{ChangeSource, LockOutcome, NewAgent, NewFileChange, NewLock, StoreError};

use crate::conformance;

fn lock(path: &str, agent: &str) -> NewLock {
    NewLock { path: path.into(), agent: agent.into(), pid: Some(std::process::id()), task: None, ttl_seconds: 600 }
}

conformance! {
fn a_lock_is_held_renewed_refused_to_others_and_released_by_its_holder_only(s) {
    let LockOutcome::Acquired { lock: first } = s.lock_file(lock("src/a.rs", "builder-1")).unwrap() else {
        panic!("not acquired")
    };
    let LockOutcome::Held { lock: held } = s.lock_file(lock("src/a.rs", "builder-2")).unwrap() else {
        panic!("a second agent took a held lock")
    };
    assert_eq!(held.agent, "builder-1");
    // Renewal keeps `since` and moves the lease.
    let LockOutcome::Acquired { lock: renewed } = s.lock_file(lock("src/a.rs", "builder-1")).unwrap() else {
        panic!("renewal refused")
    };
    assert_eq!(renewed.since, first.since);
    assert!(renewed.expires_at >= first.expires_at);
    assert!(matches!(s.unlock_file("src/a.rs", Some("builder-2")), Err(StoreError::LockHeld { .. })));
    assert_eq!(s.file_locks().unwrap().len(), 1);
    assert_eq!(s.unlock_file("src/a.rs", Some("builder-1")).unwrap().unwrap().agent, "builder-1");
    assert_eq!(s.unlock_file("src/a.rs", None).unwrap(), None);
    assert!(s.file_locks().unwrap().is_empty());
    crate::assert_sound(&s);
}

fn locks_of_gone_processes_and_passed_leases_are_released(s) {
    let mut dead = std::process::Command::new("true").spawn().unwrap();
    let pid = dead.id();
    dead.wait().unwrap();
    s.lock_file(NewLock { pid: Some(pid), ..lock("a", "gone") }).unwrap();
    s.lock_file(NewLock { ttl_seconds: 0, ..lock("b", "expired") }).unwrap();
    // Without a pid of its own, a lock takes the registry's pid of its holder.
    let mut agent = NewAgent::new("reg-1", "builder", "claude");
    agent.pid = Some(pid);
    s.register(agent).unwrap();
    let LockOutcome::Acquired { lock: by_registry } = s.lock_file(NewLock { pid: None, ..lock("c", "reg-1") }).unwrap()
    else {
        panic!()
    };
    assert_eq!(by_registry.pid, Some(pid));
    assert_eq!(s.file_lock("a").unwrap(), None);
    assert!(matches!(s.lock_file(lock("b", "other")).unwrap(), LockOutcome::Acquired { .. }));
    assert_eq!(s.file_locks().unwrap().iter().map(|l| l.path.as_str()).collect::<Vec<_>>(), ["b"]);
}

fn two_agents_racing_for_a_lock_end_with_exactly_one_holder(s) {
    let barrier = Arc::new(Barrier::new(8));
    let handles: Vec<_> = (0..8)
        .map(|i| {
            let (place, barrier) = (s.place().clone(), barrier.clone());
            std::thread::spawn(move || {
                let s = place.open();
                barrier.wait();
                matches!(s.lock_file(lock("src/race.rs", &format!("agent-{i}"))).unwrap(), LockOutcome::Acquired { .. })
            })
        })
        .collect();
    let winners = handles.into_iter().map(|h| h.join().unwrap()).filter(|w| *w).count();
    assert_eq!(winners, 1);
}

fn writes_are_recorded_newest_first(s) {
    for (agent, source) in [("a-1", ChangeSource::Hook), ("b-2", ChangeSource::PostRun)] {
        s.record_change(NewFileChange { path: "x.rs".into(), agent: agent.into(), task: Some("f/1".into()), source })
            .unwrap();
    }
    let history = s.file_history("x.rs", 10).unwrap();
    assert_eq!(history.iter().map(|c| c.agent.as_str()).collect::<Vec<_>>(), ["b-2", "a-1"]);
    assert_eq!(history[0].source, ChangeSource::PostRun);
    assert_eq!(s.file_history("x.rs", 1).unwrap().len(), 1);
    assert!(s.file_history("y.rs", 10).unwrap().is_empty());
}
}
