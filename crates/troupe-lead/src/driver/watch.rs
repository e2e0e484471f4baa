//! Following the store's event log during a run, so that what teammates do
//! through the board and the mailbox reaches the machine: task completions (a
//! Builder's `board_complete`, already gated by the gateway) become
//! `TasksUnblocked`, answers to shutdown requests (`respond_shutdown`) become
//! `ShutdownAnswered`, other messages to the Lead become `MessageArrived`, a
//! gateway call refused for the agent's budget becomes `GatewayBudgetSpent`; a
//! teammate's quality-gate heartbeat becomes `TeammateActivity`; a
//! teammate of this run whose lease passed (`lease_expired`) becomes
//! `TeammateLeaseExpired`. The watcher also keeps its teammates' leases and
//! sweeps passed ones ([`crate::driver::leases`]), at `[store] lease_seconds` / 6,
//! and hands a Claude teammate's refreshed login back to the user
//! (`claude_credentials`).

use std::time::Duration;

use tokio::sync::mpsc::UnboundedSender;
use troupe_core::config::StoreConfig;
use troupe_core::layout::Layout;
use troupe_store::{Message, MessageKind, event::kind};

use crate::driver::heartbeat::Heartbeats;
use crate::driver::leases::LeaseKeeper;
use crate::driver::plan_io::LEAD;
use crate::driver::teammate::Report;
use crate::driver::{claude_credentials, wiring};
use crate::machine::{Event, IncomingMessage};

/// Follow the log (waking at each new event, or after `every`) until the task is aborted. A store that cannot be
/// opened or read at the start is a `CommandFailed` (`watch`): the run would
/// never hear of its teammates' board completions.
pub fn start(
    layout: Layout,
    store: StoreConfig,
    feature: String,
    tx: UnboundedSender<Report>,
    every: Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::task::spawn_blocking(move || {
        let failed = |error: String| {
            let _ = tx.send(Report::Lead(Event::CommandFailed { command: "watch".into(), error }));
        };
        let lease = store.lease();
        let store = match troupe_store::open(&layout, &store) {
            Ok(store) => store,
            Err(e) => return failed(format!("cannot open the store to follow the board: {e}")),
        };
        // Only what happens from now on.
        let mut after = 0;
        loop {
            match store.events_since(after, 1000) {
                Ok(page) => match page.last() {
                    Some(e) => after = e.id,
                    None => break,
                },
                Err(e) => return failed(format!("cannot read the store's event log: {e}")),
            }
        }
        let prefix = format!("{feature}/");
        let mut heartbeats = Heartbeats::start(layout.heartbeats_dir());
        let (hooks, claude_user) = (layout.state_dir().join("hooks"), wiring::user_claude_dir());
        let mut leases = LeaseKeeper::new(lease, every);
        loop {
            // Woken early by the next event (NOTIFY on PostgreSQL); at the
            // latest after `every`, for heartbeat files and leases.
            let _ = store.wait_for_event(after, every);
            if tx.is_closed() {
                return;
            }
            leases.tick(store.as_ref(), &feature);
            for id in heartbeats.beats() {
                let _ = tx.send(Report::Lead(Event::TeammateActivity { id, tool: None }));
            }
            if let Some(user) = &claude_user {
                for (id, outcome) in claude_credentials::sync(&hooks, user) {
                    if let Err(e) = outcome {
                        let _ =
                            tx.send(Report::Note(format!("{id}'s refreshed Claude login was not handed back: {e}")));
                    }
                }
            }
            let Ok(events) = store.events_since(after, 500) else { continue };
            let (mut completed, mut unblocked) = (Vec::new(), Vec::new());
            for e in &events {
                after = e.id;
                let by_lead = e.actor.as_deref() == Some(LEAD);
                match e.kind.as_str() {
                    kind::TASK_COMPLETED if !by_lead => {
                        if let Some(id) = e.subject.as_deref().and_then(|s| s.strip_prefix(&prefix)) {
                            completed.push(id.to_string());
                        }
                        if let Some(list) = e.data.get("unblocked").and_then(|v| v.as_array()) {
                            unblocked.extend(
                                list.iter().filter_map(|v| v.as_str()?.strip_prefix(&prefix).map(str::to_string)),
                            );
                        }
                    }
                    // A person's decision of a plan the Lead left to them.
                    kind::MESSAGE_SENT if !by_lead && e.data["kind"] == MessageKind::PlanDecision.as_str() => {
                        let Some(id) = e.subject.as_deref().and_then(|s| s.parse::<i64>().ok()) else { continue };
                        if let Ok(m) = store.message(id)
                            && let Some(event) = decided(&m)
                        {
                            let _ = tx.send(Report::Lead(event));
                        }
                    }
                    kind::MESSAGE_SENT if !by_lead && e.data.get("to").and_then(|v| v.as_str()) == Some(LEAD) => {
                        let Some(id) = e.subject.as_deref().and_then(|s| s.parse::<i64>().ok()) else { continue };
                        // The features of a roadmap wave share the Lead's mailbox: a
                        // message from another feature's teammate is not for this run.
                        if let Ok(m) = store.message(id)
                            && store.agent(&m.from).map_or(true, |a| a.feature.is_none_or(|f| f == feature))
                        {
                            let _ = tx.send(Report::Lead(incoming(m)));
                        }
                    }
                    troupe_store::lease::LEASE_EXPIRED => {
                        let Some(id) = e.subject.as_deref() else { continue };
                        if store.agent(id).is_ok_and(|a| a.feature.as_deref() == Some(feature.as_str())) {
                            let _ = tx.send(Report::Lead(Event::TeammateLeaseExpired { id: id.to_string() }));
                        }
                    }
                    kind::GATEWAY_BUDGET_SPENT => {
                        let (Some(id), Some(made), Some(max)) =
                            (e.actor.clone(), e.data["made"].as_u64(), e.data["max"].as_u64())
                        else {
                            continue;
                        };
                        let key = e.data["key"].as_str().unwrap_or("max_gateway_calls").to_string();
                        let _ = tx.send(Report::Lead(Event::GatewayBudgetSpent { id, made, max, key }));
                    }
                    _ => {}
                }
            }
            if !completed.is_empty() {
                let _ = tx.send(Report::Lead(Event::TasksUnblocked { completed, unblocked }));
            }
        }
    })
}

/// The event for a message to the Lead. A `shutdown_response` carries
/// `{"approve": bool, "reason": "..."}` (the gateway's `respond_shutdown`);
/// one that does not parse is handed on as a plain message.
fn incoming(m: Message) -> Event {
    if m.kind == MessageKind::ShutdownResponse
        && let Ok(v) = serde_json::from_str::<serde_json::Value>(&m.body)
        && let Some(approve) = v.get("approve").and_then(|a| a.as_bool())
    {
        let reason = v.get("reason").and_then(|r| r.as_str()).unwrap_or_default().to_string();
        return Event::ShutdownAnswered { id: m.from, approve, reason };
    }
    if m.kind == MessageKind::Plan {
        return Event::PlanSubmitted { from: m.from, request: m.id, plan: m.body };
    }
    Event::MessageArrived(IncomingMessage { from: m.from, kind: m.kind.to_string(), body: m.body })
}

/// The event for a `plan_decision` message: the plan it answers, decided
/// for its recipient (`None` when it is not a decision).
fn decided(m: &Message) -> Option<Event> {
    let d = troupe_core::approval::PlanDecision::parse(&m.body)?;
    Some(Event::PlanDecided { id: m.to.clone(), request: m.in_reply_to.unwrap_or(d.request_id), approved: d.approved })
}

#[cfg(test)]
mod tests {
    use troupe_store::{Mailbox, Registry, SqliteStore};

    use super::*;

    fn message(kind: MessageKind, body: &str) -> Message {
        Message {
            id: 7,
            from: "auditor-7".into(),
            to: LEAD.into(),
            broadcast: false,
            priority: 5,
            kind,
            body: body.into(),
            in_reply_to: Some(3),
            thread: 3,
            created_at: jiff::Timestamp::UNIX_EPOCH,
            delivered_at: None,
            read_at: None,
        }
    }

    #[test]
    fn a_shutdown_response_becomes_shutdown_answered() {
        let e = incoming(message(MessageKind::ShutdownResponse, r#"{"approve": false, "reason": "mid-merge"}"#));
        assert_eq!(e, Event::ShutdownAnswered { id: "auditor-7".into(), approve: false, reason: "mid-merge".into() });
        let e = incoming(message(MessageKind::ShutdownResponse, r#"{"approve": true, "reason": ""}"#));
        assert_eq!(e, Event::ShutdownAnswered { id: "auditor-7".into(), approve: true, reason: String::new() });
    }

    #[tokio::test]
    async fn messages_from_another_features_teammates_are_not_this_runs() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        std::fs::create_dir_all(layout.state_dir()).unwrap();
        let store = SqliteStore::open_project(&layout).unwrap();
        for (id, feature) in [("builder-pay-g1-3", "pay"), ("builder-cart-g1-3", "cart")] {
            let mut agent = troupe_store::NewAgent::new(id, "builder", "scripted");
            agent.feature = Some(feature.into());
            store.register(agent).unwrap();
        }
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let watcher = start(layout.clone(), StoreConfig::default(), "cart".into(), tx, Duration::from_millis(20));
        tokio::time::sleep(Duration::from_millis(300)).await;
        for from in ["builder-pay-g1-3", "builder-cart-g1-3", "user"] {
            store.send(troupe_store::NewMessage::text(from, LEAD, "hello")).unwrap();
        }
        let mut from = Vec::new();
        while from.len() < 2 {
            match tokio::time::timeout(Duration::from_secs(10), rx.recv()).await {
                Ok(Some(Report::Lead(Event::MessageArrived(m)))) => from.push(m.from),
                Ok(_) => {}
                Err(_) => panic!("messages did not arrive: {from:?}"),
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        while let Ok(Report::Lead(Event::MessageArrived(m))) = rx.try_recv() {
            from.push(m.from);
        }
        watcher.abort();
        assert_eq!(from, vec!["builder-cart-g1-3", "user"]);
    }

    #[test]
    fn a_persons_plan_decision_becomes_plan_decided_for_its_teammate() {
        let body = troupe_core::approval::PlanDecision {
            request_id: 3,
            approved: false,
            decided_by: "ana".into(),
            reason: "smaller steps".into(),
        }
        .body();
        let m = Message { to: "builder-g1-2".into(), ..message(MessageKind::PlanDecision, &body) };
        assert_eq!(decided(&m), Some(Event::PlanDecided { id: "builder-g1-2".into(), request: 3, approved: false }));
        assert_eq!(decided(&message(MessageKind::PlanDecision, "yes")), None);
    }

    #[test]
    fn a_plan_becomes_plan_submitted_with_its_message_id() {
        let e = incoming(message(MessageKind::Plan, "1. test first"));
        assert_eq!(e, Event::PlanSubmitted { from: "auditor-7".into(), request: 7, plan: "1. test first".into() });
    }

    #[test]
    fn other_messages_and_unreadable_answers_stay_messages() {
        for (kind, body) in [(MessageKind::Text, "hello"), (MessageKind::ShutdownResponse, "yes please")] {
            let e = incoming(message(kind, body));
            assert!(matches!(e, Event::MessageArrived(m) if m.body == body), "{body}");
        }
    }
}
