use troupe_store::{BROADCAST, MessageKind, NewAgent, NewMessage, StoreError};

use crate::{assert_sound, conformance};

fn msg(from: &str, to: &str, priority: u8, body: &str) -> NewMessage {
    NewMessage { priority, ..NewMessage::text(from, to, body) }
}

conformance! {
    fn inbox_orders_by_priority_then_age_and_marks_delivery(s) {
        s.send(msg("lead", "bob", 1, "low")).unwrap();
        s.send(msg("lead", "bob", 5, "urgent")).unwrap();
        s.send(msg("lead", "bob", 3, "normal 1")).unwrap();
        s.send(msg("lead", "bob", 3, "normal 2")).unwrap();
        s.send(msg("lead", "carol", 5, "not bob's")).unwrap();
        let inbox = s.inbox("bob", false).unwrap();
        let bodies: Vec<&str> = inbox.iter().map(|m| m.body.as_str()).collect();
        assert_eq!(bodies, ["urgent", "normal 1", "normal 2", "low"]);
        assert!(inbox.iter().all(|m| m.delivered_at.is_some() && m.read_at.is_none()));
        assert_eq!(s.mark_read("bob", &[inbox[0].id, inbox[1].id]).unwrap(), 2);
        assert_eq!(s.mark_read("bob", &[inbox[0].id]).unwrap(), 0, "already read");
        let unread: Vec<String> = s.inbox("bob", true).unwrap().into_iter().map(|m| m.body).collect();
        assert_eq!(unread, ["normal 2", "low"]);
        assert_eq!(s.inbox("bob", false).unwrap().len(), 4);
    }
}

conformance! {
    fn bad_messages_are_refused(s) {
        assert!(matches!(s.send(msg("a", "b", 0, "x")).unwrap_err(), StoreError::InvalidPriority(0)));
        assert!(matches!(s.send(msg("a", "b", 6, "x")).unwrap_err(), StoreError::InvalidPriority(6)));
        assert!(matches!(s.send(msg("", "b", 3, "x")).unwrap_err(), StoreError::MissingParty));
        let reply = NewMessage { in_reply_to: Some(42), ..msg("a", "b", 3, "x") };
        assert!(matches!(s.send(reply).unwrap_err(), StoreError::MessageNotFound(42)));
        let m = s.send(msg("a", "b", 3, "x")).unwrap().remove(0);
        let err = s.mark_read("c", &[m.id]).unwrap_err();
        assert_eq!(err.to_string(), format!("message {} is addressed to `b`, not `c`", m.id));
        assert!(matches!(s.mark_read("b", &[999]).unwrap_err(), StoreError::MessageNotFound(999)));
        assert_eq!(s.events_since(0, 100).unwrap().len(), 1);
    }
}

conformance! {
    fn replies_form_threads(s) {
        let q = s.send(msg("alice", "bob", 3, "question")).unwrap().remove(0);
        assert_eq!(q.thread, q.id);
        let mut answer = NewMessage { in_reply_to: Some(q.id), ..msg("bob", "alice", 3, "answer") };
        answer.kind = MessageKind::Text;
        let a = s.send(answer).unwrap().remove(0);
        let f = s.send(NewMessage { in_reply_to: Some(a.id), ..msg("alice", "bob", 3, "thanks") }).unwrap().remove(0);
        s.send(msg("alice", "bob", 3, "another topic")).unwrap();
        assert_eq!((a.thread, f.thread), (q.id, q.id));
        let bodies: Vec<String> = s.thread(f.id).unwrap().into_iter().map(|m| m.body).collect();
        assert_eq!(bodies, ["question", "answer", "thanks"]);
        assert_eq!(s.thread(q.id).unwrap().len(), 3);
        assert!(matches!(s.thread(77).unwrap_err(), StoreError::MessageNotFound(77)));
        assert_eq!(s.message(a.id).unwrap().in_reply_to, Some(q.id));
        assert_sound(&s);
    }
}

conformance! {
    fn broadcast_reaches_every_unfinished_agent_but_the_sender(s) {
        for id in ["lead", "a", "b", "c"] {
            s.register(NewAgent::new(id, "builder", "claude")).unwrap();
        }
        s.set_status("c", troupe_store::AgentStatus::Done).unwrap();
        let mut shutdown = msg("lead", BROADCAST, 5, "wrap up");
        shutdown.kind = MessageKind::ShutdownRequest;
        let sent = s.send(shutdown).unwrap();
        let to: Vec<&str> = sent.iter().map(|m| m.to.as_str()).collect();
        assert_eq!(to, ["a", "b"]);
        assert!(sent.iter().all(|m| m.broadcast && m.thread == sent[0].id));
        assert_eq!(s.inbox("a", true).unwrap()[0].kind, MessageKind::ShutdownRequest);
        s.mark_read("a", &[sent[0].id]).unwrap();
        assert_eq!(s.inbox("b", true).unwrap().len(), 1, "each recipient has its own read state");
        assert!(s.inbox("lead", false).unwrap().is_empty());
    }
}

conformance! {
    fn kinds_round_trip(s) {
        for kind in MessageKind::ALL {
            let m = s.send(NewMessage { kind, ..msg("a", "b", 2, kind.as_str()) }).unwrap().remove(0);
            assert_eq!(s.message(m.id).unwrap().kind, kind);
            assert_eq!(kind.as_str().parse::<MessageKind>().unwrap(), kind);
        }
        assert!("shout".parse::<MessageKind>().is_err());
    }
}

conformance! {
    fn a_waiter_wakes_when_a_message_is_sent_from_another_process(s) {
        let last = s.last_event_id().unwrap();
        assert!(!s.wait_for_event(last, std::time::Duration::from_millis(30)).unwrap(), "nothing new yet");
        let sender = s.place().open();
        let (woke, sent_id) = std::thread::scope(|scope| {
            let waiter = scope.spawn(|| s.wait_for_event(last, std::time::Duration::from_secs(30)).unwrap());
            let sent = sender.send(troupe_store::NewMessage::text("lead", "builder-1", "wake up")).unwrap();
            (waiter.join().unwrap(), sent[0].id)
        });
        assert!(woke, "woken by the message, not the timeout");
        assert!(s.last_event_id().unwrap() > last);
        assert!(s.wait_for_event(last, std::time::Duration::ZERO).unwrap(), "an event already there");
        assert_eq!(s.inbox("builder-1", true).unwrap()[0].id, sent_id);
    }
}
