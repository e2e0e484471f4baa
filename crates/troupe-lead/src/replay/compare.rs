//! How replay compares two runs' event logs: per actor and subject, in
//! order, modulo what differs between any two runs of the same decisions.

use std::collections::BTreeMap;

use serde_json::Value;
use troupe_store::Event;

/// The keys of an event's data that differ between any two runs of the same
/// decisions: process ids, clocks, the engine that ran a teammate (a replay
/// runs every teammate on the scripted engine), and which of two parallel
/// completions unblocked a task (the board's end state is compared instead).
const VOLATILE: [&str; 8] = ["pid", "at", "ts", "engine", "model", "duration_ms", "elapsed_ms", "unblocked"];

/// Kinds of event that come from how an engine is wired, not from what the
/// Lead decided: a model CLI is given a gateway token for its MCP
/// connection, the scripted engine needs none.
const WIRING: [&str; 1] = ["gateway_token"];

/// The events replay compares: all but the engine's wiring (`WIRING`).
pub fn compared(events: Vec<Event>) -> Vec<Event> {
    events.into_iter().filter(|e| !WIRING.contains(&e.kind.as_str())).collect()
}

/// An event as replay compares it: kind, actor, subject and data, without
/// its id, time and `VOLATILE` data, and without a message's id.
pub fn normalise(e: &Event) -> Value {
    let mut data = e.data.clone();
    let mut subject = e.subject.clone();
    if let Some(map) = data.as_object_mut() {
        for k in VOLATILE {
            map.remove(k);
        }
        if e.kind == troupe_store::event::kind::MESSAGE_SENT {
            // A message's id (its subject, and its thread when it starts one) is
            // numbered in the order parallel senders got there, like an event's.
            subject = None;
            map.remove("thread");
            if let Some(reply) = map.get_mut("in_reply_to") {
                *reply = Value::Bool(!reply.is_null());
            }
        }
        if e.kind == troupe_store::event::kind::TASK_UNBLOCKED {
            map.remove("by");
        }
    }
    serde_json::json!({"kind": e.kind, "actor": e.actor, "subject": subject, "data": data})
}

/// Where two runs' events differ: for each actor (the Lead, each teammate,
/// none) and each subject it acts on (a task, an agent, a group), its events
/// in order must be the same. Events of different actors may interleave
/// differently, as parallel teammates finish in any order, and so may one
/// actor's events about different subjects (the Lead's bookkeeping of a task
/// and of its group are written by different threads).
pub fn differences(original: &[Event], replay: &[Event]) -> Vec<String> {
    let by_actor = |events: &[Event]| {
        let mut m: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        for e in events {
            let actor = e.actor.clone().unwrap_or_else(|| "-".into());
            let key = match &e.subject {
                Some(s) if e.kind != troupe_store::event::kind::MESSAGE_SENT => format!("{actor} (about {s})"),
                _ => actor,
            };
            m.entry(key).or_default().push(normalise(e));
        }
        m
    };
    let (a, b) = (by_actor(original), by_actor(replay));
    let mut out = Vec::new();
    for actor in a.keys().chain(b.keys().filter(|k| !a.contains_key(*k))) {
        let (x, y) = (a.get(actor).map_or(&[][..], Vec::as_slice), b.get(actor).map_or(&[][..], Vec::as_slice));
        if let Some(i) = (0..x.len().max(y.len())).find(|&i| x.get(i) != y.get(i)) {
            let show = |v: Option<&Value>| v.map_or("nothing".to_string(), Value::to_string);
            out.push(format!(
                "{actor}'s event {} was {} and is {} in the replay",
                i + 1,
                show(x.get(i)),
                show(y.get(i))
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use jiff::Timestamp;

    use super::*;

    #[test]
    fn events_compare_per_actor_without_ids_times_and_pids() {
        let e = |id, actor: &str, kind: &str, pid: u32| Event {
            id,
            at: Timestamp::from_second(id).unwrap(),
            kind: kind.into(),
            actor: Some(actor.into()),
            subject: None,
            data: serde_json::json!({"pid": pid, "role": "builder"}),
        };
        let original = vec![e(1, "a", "x", 10), e(2, "b", "y", 11), e(3, "a", "z", 12)];
        let interleaved = vec![e(7, "b", "y", 99), e(8, "a", "x", 98), e(9, "a", "z", 97)];
        assert!(differences(&original, &interleaved).is_empty());
        let reordered = vec![e(7, "a", "z", 1), e(8, "b", "y", 1), e(9, "a", "x", 1)];
        let diff = differences(&original, &reordered);
        assert_eq!(diff.len(), 1, "{diff:?}");
        assert!(diff[0].starts_with("a's event 1"), "{diff:?}");
        assert_eq!(differences(&original, &original[..2]).len(), 1, "a missing event is a difference");
        // Parallel Inspectors' findings get their message ids in the order they arrive.
        let sent = |id, subject: &str, to: &str| Event {
            kind: troupe_store::event::kind::MESSAGE_SENT.into(),
            subject: Some(subject.into()),
            data: serde_json::json!({"to": to, "thread": subject.parse::<u64>().unwrap(), "in_reply_to": null}),
            ..e(id, "a", "x", 1)
        };
        assert!(differences(&[sent(1, "7", "auditor-8")], &[sent(2, "8", "auditor-8")]).is_empty());
        assert_eq!(differences(&[sent(1, "7", "auditor-8")], &[sent(2, "7", "lead")]).len(), 1, "the recipient counts");
    }
}
