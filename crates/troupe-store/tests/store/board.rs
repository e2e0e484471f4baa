use troupe_store::{ClaimRefusal, ListFilter, NewTask, StoreError, TaskFilter, TaskStatus};

use crate::{assert_sound, conformance};

fn all() -> TaskFilter {
    TaskFilter::default()
}

conformance! {
    fn create_generates_ids_and_keeps_fields(s) {
        let mut new = NewTask::new("  write tests  ", "lead");
        new.description = "for the parser".into();
        new.feature = Some("login".into());
        new.wave = Some(2);
        new.group = Some("g1".into());
        new.files = vec!["src/a.rs".into()];
        let a = s.create_task(new).unwrap();
        let b = s.create_task(NewTask::new("second", "lead").blocked_by([a.id.clone()])).unwrap();
        assert_eq!(a.id, "t1");
        assert_eq!(b.id, "t2");
        assert_eq!(a.subject, "write tests");
        assert_eq!(a.status, TaskStatus::Pending);
        assert_eq!((a.feature.as_deref(), a.wave, a.group.as_deref()), (Some("login"), Some(2), Some("g1")));
        assert_eq!(a.files, ["src/a.rs"]);
        assert_eq!(b.blocked_by, [a.id.as_str()]);
        assert!(b.blocked);
        assert!(!a.blocked);
        assert_eq!(s.task("t2").unwrap(), b);
        assert_sound(&s);
    }
}

conformance! {
    fn create_refuses_bad_input_and_changes_nothing(s) {
        s.create_task(NewTask::new("a", "lead").with_id("a")).unwrap();
        let cases: Vec<(NewTask, &str)> = vec![
            (NewTask::new("", "lead"), "non-empty subject"),
            (NewTask::new("x", ""), "agent id cannot be empty"),
            (NewTask::new("x", "lead").with_id("a"), "exists already"),
            (NewTask::new("x", "lead").with_id("has space"), "cannot be a task id"),
            (NewTask::new("x", "lead").blocked_by(["nope"]), "blocked by `nope`, which is not on the board"),
            (NewTask::new("x", "lead").with_id("x").blocked_by(["x"]), "would close a cycle: x -> x"),
        ];
        for (new, message) in cases {
            let err = s.create_task(new).unwrap_err();
            assert!(err.to_string().contains(message), "{err} should mention {message}");
            assert!(err.is_refusal());
        }
        assert_eq!(s.list(&ListFilter::default()).unwrap().len(), 1);
        assert_eq!(s.events_since(0, 100).unwrap().len(), 1);
    }
}

conformance! {
    fn a_batch_with_a_cycle_is_refused_whole(s) {
        let batch = vec![
            NewTask::new("a", "lead").with_id("a").blocked_by(["c"]),
            NewTask::new("b", "lead").with_id("b").blocked_by(["a"]),
            NewTask::new("c", "lead").with_id("c").blocked_by(["b"]),
            NewTask::new("d", "lead").with_id("d"),
        ];
        let err = s.create_tasks(batch).unwrap_err();
        match &err {
            StoreError::Cycle { cycle, .. } => {
                assert_eq!(cycle.first(), cycle.last());
                assert_eq!(cycle.len(), 4, "{cycle:?}");
            }
            other => panic!("expected a cycle, got {other}"),
        }
        assert!(s.list(&ListFilter::default()).unwrap().is_empty());
    }
}

conformance! {
    fn a_batch_may_reference_itself_in_any_order(s) {
        let batch =
            vec![NewTask::new("b", "lead").with_id("f/b").blocked_by(["f/a"]), NewTask::new("a", "lead").with_id("f/a")];
        let tasks = s.create_tasks(batch).unwrap();
        assert!(tasks[0].blocked);
        let avail: Vec<_> = s.available("x", &all()).unwrap().into_iter().map(|t| t.id).collect();
        assert_eq!(avail, ["f/a"]);
        assert_sound(&s);
    }
}

conformance! {
    fn add_blocker_refuses_cycles_and_counts_open_blockers(s) {
        let a = s.create_task(NewTask::new("a", "lead")).unwrap();
        let b = s.create_task(NewTask::new("b", "lead").blocked_by([a.id.clone()])).unwrap();
        let c = s.create_task(NewTask::new("c", "lead").blocked_by([b.id.clone()])).unwrap();
        let err = s.add_blocker(&a.id, &c.id, "lead").unwrap_err();
        assert_eq!(err.to_string(), "making `t1` wait for `t3` would close a cycle: t1 -> t3 -> t2 -> t1");
        let d = s.create_task(NewTask::new("d", "lead")).unwrap();
        let a2 = s.add_blocker(&a.id, &d.id, "lead").unwrap();
        assert!(a2.blocked);
        assert_eq!(a2.blocked_by, [d.id.as_str()]);
        // Adding the same edge twice changes nothing.
        assert_eq!(s.add_blocker(&a.id, &d.id, "lead").unwrap(), a2);
        assert!(s.available("x", &all()).unwrap().iter().all(|t| t.id == d.id));
        assert_sound(&s);
    }
}

conformance! {
    fn claim_is_a_compare_and_swap_and_idempotent_for_the_holder(s) {
        let t = s.create_task(NewTask::new("a", "lead")).unwrap();
        let first = s.claim(&t.id, "alice").unwrap();
        assert!(!first.already_held);
        assert_eq!(first.task.status, TaskStatus::InProgress);
        assert_eq!(first.task.assignee.as_deref(), Some("alice"));
        let again = s.claim(&t.id, "alice").unwrap();
        assert!(again.already_held);
        assert_eq!(again.task, first.task);
        match s.claim(&t.id, "bob").unwrap_err() {
            StoreError::NotClaimable { reason: ClaimRefusal::HeldBy(h), .. } => assert_eq!(h, "alice"),
            other => panic!("{other}"),
        }
        let claims = s.events_since(0, 100).unwrap().into_iter().filter(|e| e.kind == "task_claimed").count();
        assert_eq!(claims, 1, "an idempotent claim records nothing");
    }
}

conformance! {
    fn blocked_and_unknown_and_completed_tasks_cannot_be_claimed(s) {
        let a = s.create_task(NewTask::new("a", "lead")).unwrap();
        let b = s.create_task(NewTask::new("b", "lead").blocked_by([a.id.clone()])).unwrap();
        let err = s.claim(&b.id, "bob").unwrap_err();
        assert_eq!(err.to_string(), "cannot claim task `t2` for `bob`: it is blocked by t1");
        assert!(matches!(s.claim("t9", "bob").unwrap_err(), StoreError::TaskNotFound(id) if id == "t9"));
        s.claim(&a.id, "alice").unwrap();
        s.complete(&a.id, "alice").unwrap();
        let err = s.claim(&a.id, "alice").unwrap_err();
        assert!(matches!(err, StoreError::NotClaimable { reason: ClaimRefusal::Completed, .. }), "{err}");
        assert!(matches!(s.claim(&a.id, "").unwrap_err(), StoreError::EmptyAgentId));
    }
}

conformance! {
    fn complete_only_by_the_assignee_and_reports_unblocked(s) {
        let a = s.create_task(NewTask::new("a", "lead")).unwrap();
        let b = s.create_task(NewTask::new("b", "lead")).unwrap();
        let c = s.create_task(NewTask::new("c", "lead").blocked_by([a.id.clone(), b.id.clone()])).unwrap();
        let d = s.create_task(NewTask::new("d", "lead").blocked_by([a.id.clone()])).unwrap();
        let err = s.complete(&a.id, "alice").unwrap_err();
        assert_eq!(err.to_string(), "`alice` cannot complete task `t1`: nobody holds it");
        s.claim(&a.id, "alice").unwrap();
        let err = s.complete(&a.id, "bob").unwrap_err();
        assert_eq!(err.to_string(), "`bob` cannot complete task `t1`: it is held by `alice`");
        let done = s.complete(&a.id, "alice").unwrap();
        assert_eq!(done.task.status, TaskStatus::Completed);
        assert!(done.task.completed_at.is_some());
        assert_eq!(done.unblocked, [d.id.as_str()], "c still waits for b");
        let err = s.complete(&a.id, "alice").unwrap_err();
        assert_eq!(err.to_string(), "cannot complete task `t1`: it is completed");
        s.claim(&b.id, "bob").unwrap();
        assert_eq!(s.complete(&b.id, "bob").unwrap().unblocked, [c.id.as_str()]);
        let kinds: Vec<String> = s.events_since(0, 100).unwrap().into_iter().map(|e| e.kind).collect();
        assert_eq!(kinds.iter().filter(|k| *k == "task_unblocked").count(), 2);
        assert_sound(&s);
    }
}

conformance! {
    fn a_reserved_but_unclaimed_task_cannot_be_completed(s) {
        let a = s.create_task(NewTask::new("a", "lead")).unwrap();
        s.assign(&a.id, "alice", "lead").unwrap();
        let err = s.complete(&a.id, "alice").unwrap_err();
        assert_eq!(err.to_string(), "cannot complete task `t1`: it is pending");
    }
}

conformance! {
    fn assign_reserves_a_pending_task(s) {
        let a = s.create_task(NewTask::new("a", "lead")).unwrap();
        let b = s.create_task(NewTask::new("b", "lead")).unwrap();
        let t = s.assign(&b.id, "alice", "lead").unwrap();
        assert_eq!((t.status, t.assignee.as_deref()), (TaskStatus::Pending, Some("alice")));
        // Reserved tasks are offered to their agent, first, and to nobody else.
        let for_bob: Vec<_> = s.available("bob", &all()).unwrap().into_iter().map(|t| t.id).collect();
        assert_eq!(for_bob, [a.id.as_str()]);
        assert_eq!(s.claim_next("alice", &all()).unwrap().unwrap().id, b.id);
        match s.claim(&b.id, "bob").unwrap_err() {
            StoreError::NotClaimable { reason: ClaimRefusal::HeldBy(h), .. } => assert_eq!(h, "alice"),
            other => panic!("{other}"),
        }
        let err = s.assign(&b.id, "bob", "lead").unwrap_err();
        assert!(err.to_string().contains("in progress by `alice`"), "{err}");
        // A pending reservation can be moved.
        s.assign(&a.id, "carol", "lead").unwrap();
        let t = s.assign(&a.id, "dave", "lead").unwrap();
        assert_eq!(t.assignee.as_deref(), Some("dave"));
        match s.claim(&a.id, "carol").unwrap_err() {
            StoreError::NotClaimable { reason: ClaimRefusal::AssignedTo(h), .. } => assert_eq!(h, "dave"),
            other => panic!("{other}"),
        }
        assert!(matches!(s.assign("nope", "x", "lead").unwrap_err(), StoreError::TaskNotFound(_)));
    }
}

conformance! {
    fn release_puts_a_task_back(s) {
        let a = s.create_task(NewTask::new("a", "lead")).unwrap();
        let err = s.release(&a.id, None, "lead").unwrap_err();
        assert_eq!(err.to_string(), "`lead` cannot release task `t1`: nobody holds it");
        s.claim(&a.id, "alice").unwrap();
        let err = s.release(&a.id, Some("bob"), "bob").unwrap_err();
        assert_eq!(err.to_string(), "`bob` cannot release task `t1`: it is held by `alice`");
        let t = s.release(&a.id, Some("alice"), "alice").unwrap();
        assert_eq!((t.status, t.assignee), (TaskStatus::Pending, None));
        assert_eq!(s.claim_next("bob", &all()).unwrap().unwrap().id, a.id);
        let t = s.release(&a.id, None, "lead").unwrap();
        assert_eq!(t.status, TaskStatus::Pending);
        s.claim(&a.id, "bob").unwrap();
        s.complete(&a.id, "bob").unwrap();
        let err = s.release(&a.id, None, "lead").unwrap_err();
        assert_eq!(err.to_string(), "cannot release task `t1`: it is completed");
        assert_sound(&s);
    }
}

conformance! {
    fn claim_next_takes_creation_order_and_honours_filters(s) {
        let mut tasks = Vec::new();
        for (i, (feature, wave)) in [("a", 1), ("b", 1), ("a", 2), ("b", 2)].into_iter().enumerate() {
            let mut n = NewTask::new(format!("task {i}"), "lead");
            n.feature = Some(feature.into());
            n.wave = Some(wave);
            n.group = Some(format!("g{wave}"));
            tasks.push(s.create_task(n).unwrap().id);
        }
        let f = |feature: Option<&str>, wave: Option<u32>, group: Option<&str>| TaskFilter {
            feature: feature.map(Into::into),
            wave,
            group: group.map(Into::into),
        };
        assert_eq!(s.claim_next("x", &f(Some("b"), Some(2), None)).unwrap().unwrap().id, tasks[3]);
        assert_eq!(s.claim_next("x", &f(None, None, Some("g2"))).unwrap().unwrap().id, tasks[2]);
        assert_eq!(s.claim_next("x", &f(Some("b"), None, None)).unwrap().unwrap().id, tasks[1]);
        assert!(s.claim_next("x", &f(Some("b"), None, None)).unwrap().is_none());
        assert_eq!(s.claim_next("x", &all()).unwrap().unwrap().id, tasks[0]);
        assert!(s.claim_next("x", &all()).unwrap().is_none());
    }
}

conformance! {
    fn list_filters_by_status_assignee_feature_and_wave(s) {
        for i in 0..6u32 {
            let mut n = NewTask::new(format!("t{i}"), "lead");
            n.feature = Some(if i % 2 == 0 { "even" } else { "odd" }.into());
            n.wave = Some(i / 2);
            s.create_task(n).unwrap();
        }
        s.claim("t1", "alice").unwrap();
        s.claim("t2", "bob").unwrap();
        s.complete("t2", "bob").unwrap();
        let ids = |f: ListFilter| s.list(&f).unwrap().into_iter().map(|t| t.id).collect::<Vec<_>>();
        assert_eq!(ids(ListFilter::default()).len(), 6);
        assert_eq!(ids(ListFilter { status: Some(TaskStatus::Pending), ..Default::default() }), ["t3", "t4", "t5", "t6"]);
        assert_eq!(ids(ListFilter { assignee: Some("alice".into()), ..Default::default() }), ["t1"]);
        assert_eq!(ids(ListFilter { feature: Some("odd".into()), ..Default::default() }), ["t2", "t4", "t6"]);
        assert_eq!(ids(ListFilter { feature: Some("odd".into()), wave: Some(1), ..Default::default() }), ["t4"]);
        assert_eq!(ids(ListFilter { status: Some(TaskStatus::Completed), ..Default::default() }), ["t2"]);
    }
}

conformance! {
    fn available_excludes_blocked_held_and_done_tasks(s) {
        let a = s.create_task(NewTask::new("a", "lead")).unwrap();
        let b = s.create_task(NewTask::new("b", "lead").blocked_by([a.id.clone()])).unwrap();
        let c = s.create_task(NewTask::new("c", "lead")).unwrap();
        let ids = |agent: &str| s.available(agent, &all()).unwrap().into_iter().map(|t| t.id).collect::<Vec<_>>();
        assert_eq!(ids("x"), [a.id.clone(), c.id.clone()]);
        s.claim(&c.id, "y").unwrap();
        assert_eq!(ids("x"), [a.id.as_str()]);
        s.claim(&a.id, "x").unwrap();
        assert!(ids("x").is_empty());
        s.complete(&a.id, "x").unwrap();
        assert_eq!(ids("x"), [b.id.as_str()]);
    }
}

conformance! {
    fn every_change_leaves_an_event(s) {
        let a = s.create_task(NewTask::new("a", "lead")).unwrap();
        s.assign(&a.id, "alice", "lead").unwrap();
        s.claim(&a.id, "alice").unwrap();
        s.release(&a.id, Some("alice"), "alice").unwrap();
        s.claim(&a.id, "bob").unwrap();
        s.complete(&a.id, "bob").unwrap();
        let events = s.events_since(0, 100).unwrap();
        let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
        assert_eq!(
            kinds,
            ["task_created", "task_assigned", "task_claimed", "task_released", "task_claimed", "task_completed"]
        );
        assert!(events.iter().all(|e| e.subject.as_deref() == Some("t1")));
        assert_eq!(events[3].data["previous"], "alice");
        assert_eq!(s.events_since(events[2].id, 2).unwrap().len(), 2);
    }
}

conformance! {
    fn racing_claimers_each_take_every_task_exactly_once(s) {
        // 8 claimers, each with its own opener (as separate processes
        // would), over 200 tasks half of which wait for another: every task
        // is claimed and completed once, by one claimer, with one event each.
        let batch: Vec<NewTask> = (0..200)
            .map(|i| {
                let t = NewTask::new(format!("task {i}"), "lead").with_id(format!("r/{i}"));
                if i % 2 == 1 { t.blocked_by([format!("r/{}", i - 1)]) } else { t }
            })
            .collect();
        s.create_tasks(batch).unwrap();
        let place = s.place().clone();
        let done: Vec<Vec<String>> = std::thread::scope(|scope| {
            let claimers: Vec<_> = (0..8)
                .map(|n| {
                    let place = place.clone();
                    scope.spawn(move || {
                        let store = place.open();
                        let me = format!("claimer-{n}");
                        let mut mine = Vec::new();
                        let mut idle = 0;
                        // A task may be blocked right now and free a moment later.
                        while idle < 50 {
                            match store.claim_next(&me, &TaskFilter::default()).unwrap() {
                                Some(t) => {
                                    store.complete(&t.id, &me).unwrap();
                                    mine.push(t.id);
                                    idle = 0;
                                }
                                None if store.list(&ListFilter::default()).unwrap().iter().all(|t| t.status == TaskStatus::Completed) => break,
                                None => {
                                    idle += 1;
                                    std::thread::yield_now();
                                }
                            }
                        }
                        mine
                    })
                })
                .collect();
            claimers.into_iter().map(|c| c.join().unwrap()).collect()
        });
        let mut all_done: Vec<String> = done.into_iter().flatten().collect();
        assert_eq!(all_done.len(), 200, "every task once");
        all_done.sort();
        all_done.dedup();
        assert_eq!(all_done.len(), 200, "no task twice");
        let events = s.events_since(0, u32::MAX).unwrap();
        let claimed = events.iter().filter(|e| e.kind == "task_claimed").count();
        assert_eq!(claimed, 200);
        // Event ids are the order of commits: strictly increasing, no gaps seen by a reader.
        assert!(events.windows(2).all(|w| w[0].id < w[1].id));
        assert_sound(&s);
    }
}

/// Reads never wait for a write in progress: once a read finds the writer's
/// connection busy, the store reads on connections of its own (WAL), and a
/// write that finished before a read is visible to it.
#[test]
fn reads_do_not_wait_for_a_write_in_progress() {
    use std::sync::{Arc, mpsc};
    use std::time::Duration;
    use troupe_store::{Board, GatewayAccess};
    // SQLite only: PostgreSQL's readers never wait for a writer.
    let (_d, s) = crate::store();
    let s = Arc::new(s);
    let t = s.create_task(NewTask::new("listed", "lead")).unwrap();
    let (held_tx, held_rx) = mpsc::channel::<()>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let writer = {
        let s = s.clone();
        std::thread::spawn(move || {
            // `admit` runs inside the write transaction, on the writer's connection.
            s.count_call("a", "tool", &|_| {
                held_tx.send(()).unwrap();
                go_rx.recv().unwrap();
                None
            })
        })
    };
    held_rx.recv().unwrap();
    let (read_tx, read_rx) = mpsc::channel();
    let reader = s.clone();
    let id = t.id.clone();
    std::thread::spawn(move || read_tx.send(reader.task(&id).map(|t| t.subject)).unwrap());
    let read = read_rx.recv_timeout(Duration::from_secs(10)).expect("the read waited for the write");
    assert_eq!(read.unwrap(), "listed");
    go_tx.send(()).unwrap();
    assert_eq!(writer.join().unwrap().unwrap(), None);
    s.claim(&t.id, "a").unwrap();
    assert_eq!(s.task(&t.id).unwrap().assignee.as_deref(), Some("a"), "a finished write is seen by later reads");
    assert!(s.verify().unwrap().is_empty());
}
