use troupe_store::{AgentStatus, AgentUpdate, NewAgent, NewTask, StoreError};

use crate::conformance;

conformance! {
    fn register_update_and_remove(s) {
        let mut new = NewAgent::new("builder-1", "builder", "claude");
        new.model = Some("sonnet".into());
        new.feature = Some("login".into());
        new.pid = Some(std::process::id());
        let a = s.register(new).unwrap();
        assert_eq!(a.status, AgentStatus::Ready);
        assert_eq!(a.name, "builder-1");
        let a = s.set_status("builder-1", AgentStatus::Processing).unwrap();
        assert_eq!(a.status, AgentStatus::Processing);
        s.set_status("builder-1", AgentStatus::Processing).unwrap();
        let a = s
            .update_agent(
                "builder-1",
                AgentUpdate { task: Some(Some("t1".into())), session_id: Some(Some("s-1".into())), ..Default::default() },
            )
            .unwrap();
        assert_eq!((a.task.as_deref(), a.session_id.as_deref()), (Some("t1"), Some("s-1")));
        assert!(a.last_event_at >= a.started_at);
        // A pid recorded on another host (a worker's teammate) carries that host: believed only there.
        let here = a.host.clone();
        assert_eq!(s.update_agent("builder-1", AgentUpdate::default()).unwrap().host, here, "kept when not given");
        let update = AgentUpdate { pid: Some(Some(4_000_000)), host: Some("build-3".into()), ..Default::default() };
        let a = s.update_agent("builder-1", update).unwrap();
        assert_eq!((a.pid, a.host.as_deref()), (Some(4_000_000), Some("build-3")));
        assert_eq!(troupe_store::lease::stale(&a, 0, "lead-host"), None, "another host's pid is not checked here");
        let changes: Vec<_> =
            s.events_since(0, 100).unwrap().into_iter().filter(|e| e.kind == "agent_status_changed").collect();
        assert_eq!(changes.len(), 1, "an unchanged status records nothing");
        assert_eq!(changes[0].data["from"], "READY");
        assert_eq!(changes[0].data["to"], "PROCESSING");
        assert_eq!(s.agents().unwrap().len(), 1);
        s.remove_agent("builder-1").unwrap();
        assert!(matches!(s.agent("builder-1").unwrap_err(), StoreError::AgentNotFound(_)));
        assert!(matches!(s.remove_agent("builder-1").unwrap_err(), StoreError::AgentNotFound(_)));
        assert!(matches!(s.set_status("ghost", AgentStatus::Done).unwrap_err(), StoreError::AgentNotFound(_)));
    }
}

conformance! {
    fn a_live_agent_cannot_be_registered_twice_but_a_dead_one_is_replaced(s) {
        let mut live = NewAgent::new("a", "builder", "claude");
        live.pid = Some(std::process::id());
        s.register(live.clone()).unwrap();
        let err = s.register(live).unwrap_err();
        assert!(err.to_string().starts_with("agent `a` is already registered and running (READY, pid"), "{err}");

        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead_pid = child.id();
        child.wait().unwrap();
        let mut dead = NewAgent::new("b", "builder", "claude");
        dead.pid = Some(dead_pid);
        s.register(dead.clone()).unwrap();
        s.set_status("b", AgentStatus::Processing).unwrap();
        dead.engine = "gemini".into();
        let b = s.register(dead).unwrap();
        assert_eq!((b.engine.as_str(), b.status), ("gemini", AgentStatus::Ready));
    }
}

conformance! {
    fn stale_agents_are_the_unfinished_ones_whose_process_is_gone(s) {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead_pid = child.id();
        child.wait().unwrap();
        for (id, pid, status) in [
            ("alive", Some(std::process::id()), AgentStatus::Processing),
            ("gone", Some(dead_pid), AgentStatus::Processing),
            ("gone-but-done", Some(dead_pid), AgentStatus::Done),
            ("no-pid", None, AgentStatus::Waiting),
        ] {
            let mut n = NewAgent::new(id, "builder", "claude");
            n.pid = pid;
            s.register(n).unwrap();
            s.set_status(id, status).unwrap();
        }
        let t = s.create_task(NewTask::new("work", "lead")).unwrap();
        s.claim(&t.id, "gone").unwrap();
        let stale = s.stale_agents().unwrap();
        assert_eq!(stale.len(), 1);
        assert_eq!(stale[0].agent.id, "gone");
        assert_eq!(stale[0].held_tasks, [t.id]);
    }
}

#[test]
fn statuses_parse_case_insensitively() {
    for st in AgentStatus::ALL {
        assert_eq!(st.as_str().parse::<AgentStatus>().unwrap(), st);
        assert_eq!(st.as_str().to_lowercase().parse::<AgentStatus>().unwrap(), st);
    }
    assert_eq!("shutting-down".parse::<AgentStatus>().unwrap(), AgentStatus::ShuttingDown);
    assert!("sleeping".parse::<AgentStatus>().is_err());
}

conformance! {
    fn agent_number_blocks_never_overlap_and_start_above_registered_ids(s) {
        // A project from before reservations: ids restarted at 1 in every run.
        for id in ["architect-1", "builder-g1-12", "auditor-7", "lead"] {
            s.register(NewAgent::new(id, "builder", "scripted")).unwrap();
        }
        let first = s.reserve_agent_numbers(1000).unwrap();
        assert_eq!(first, 13, "above builder-g1-12");
        let second = s.reserve_agent_numbers(1000).unwrap();
        assert_eq!(second, 1013);
        s.remove_agent("builder-g1-12").unwrap();
        // A roadmap's replay registers its recorded ids (pinned) before a
        // sibling reserves: later blocks follow the last block alone, as in
        // the original run.
        s.register(NewAgent::new("builder-pay-g1-2100", "builder", "scripted")).unwrap();
        assert_eq!(s.reserve_agent_numbers(10).unwrap(), 2013, "blocks never go back");

        // Racing runs of one project (separate processes open the file) get disjoint blocks.
        let place = s.place().clone();
        let firsts: Vec<u64> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..8)
                .map(|_| {
                    let place = place.clone();
                    scope.spawn(move || place.open().reserve_agent_numbers(100).unwrap())
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut sorted = firsts.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), 8, "{firsts:?}");
        assert!(sorted.windows(2).all(|w| w[1] - w[0] >= 100), "{sorted:?}");
        assert!(sorted[0] >= 2023);
    }
}
