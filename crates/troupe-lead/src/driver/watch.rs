//! Following the store's event log during a run, so that what teammates do
//! through the board and the mailbox reaches the machine: task completions (a
//! Builder's `complete_task`, already gated by the gateway) become
//! `TasksUnblocked`, messages to the Lead become `MessageArrived`.

use std::time::Duration;

use tokio::sync::mpsc::UnboundedSender;
use troupe_core::layout::Layout;
use troupe_store::{EventLog, Mailbox, SqliteStore, event::kind};

use crate::driver::plan_io::LEAD;
use crate::driver::teammate::Report;
use crate::machine::{Event, IncomingMessage};

/// Poll every `every` until the task is aborted.
pub fn start(
    layout: Layout,
    feature: String,
    tx: UnboundedSender<Report>,
    every: Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::task::spawn_blocking(move || {
        let Ok(store) = SqliteStore::open_project(&layout) else { return };
        // Only what happens from now on.
        let mut after = 0;
        while let Ok(page) = store.events_since(after, 1000) {
            match page.last() {
                Some(e) => after = e.id,
                None => break,
            }
        }
        let prefix = format!("{feature}/");
        loop {
            std::thread::sleep(every);
            if tx.is_closed() {
                return;
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
                    kind::MESSAGE_SENT if !by_lead && e.data.get("to").and_then(|v| v.as_str()) == Some(LEAD) => {
                        let Some(id) = e.subject.as_deref().and_then(|s| s.parse::<i64>().ok()) else { continue };
                        if let Ok(m) = store.message(id) {
                            let message = IncomingMessage { from: m.from, kind: m.kind.to_string(), body: m.body };
                            let _ = tx.send(Report::Lead(Event::MessageArrived(message)));
                        }
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
