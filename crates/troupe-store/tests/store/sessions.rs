//! Chat sessions: saved whole and read back, saved again over themselves,
//! forked and compressed into new sessions that keep the original, listed
//! most recent first, each save in the event log.

use troupe_store::{ChatMessage, NewSession, SESSION_EVENT, StoreError};

use crate::conformance;

fn talk(n: usize) -> NewSession {
    NewSession {
        name: Some("auth".into()),
        role: "mentor".into(),
        engine: "claude".into(),
        model: Some("claude-sonnet".into()),
        engine_session: Some("sess-1".into()),
        messages: (0..n)
            .map(|i| {
                let mut m = ChatMessage::new(if i % 2 == 0 { "user" } else { "assistant" }, format!("line {i}"));
                if i == 1 {
                    m.tools = vec!["Read".into()];
                }
                m
            })
            .collect(),
        ..NewSession::default()
    }
}

conformance! {
    fn sessions_are_saved_whole_forked_compressed_and_listed(s) {
        let first = s.create_session(talk(2)).unwrap();
        assert_eq!(first.session, talk(2));
        assert_eq!(s.session(first.id).unwrap(), first);

        // A later save of the same conversation replaces it, keeping its id and birth.
        let again = s.update_session(first.id, talk(4)).unwrap();
        assert_eq!((again.id, again.created_at, again.session.messages.len()), (first.id, first.created_at, 4));
        assert!(again.updated_at >= first.updated_at);

        // A fork and a compressed summary are new sessions pointing at the original.
        let mut fork = talk(2);
        fork.parent = Some(first.id);
        fork.engine_session = None;
        let fork = s.create_session(fork).unwrap();
        let summary = NewSession {
            parent: Some(first.id),
            summary: true,
            messages: vec![ChatMessage::new("summary", "they talked about auth")],
            ..talk(0)
        };
        let summary = s.create_session(summary).unwrap();
        assert!(summary.session.summary && !fork.session.summary);
        assert_eq!(s.session(first.id).unwrap().session, talk(4), "the original stays as it was");

        let listed: Vec<i64> = s.sessions().unwrap().iter().map(|x| x.id).collect();
        assert_eq!(listed, vec![summary.id, fork.id, first.id], "most recently saved first");

        assert!(matches!(s.session(999), Err(StoreError::SessionNotFound(999))));
        assert!(matches!(s.update_session(999, talk(1)), Err(StoreError::SessionNotFound(999))));
        let saves = s.events_since(0, 100).unwrap().into_iter().filter(|e| e.kind == SESSION_EVENT).count();
        assert_eq!(saves, 4, "each save is in the event log");
    }
}
