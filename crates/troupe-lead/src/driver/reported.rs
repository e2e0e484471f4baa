//! Completion reports made through the gateway's `report` tool (seed 000 Spec
//! 6.3). The gateway records each call as a store event of kind
//! `agent_report` (actor: the agent); when a teammate's run ends, the driver
//! looks up its latest one here and hands it to the machine as data, with the
//! final text and the Inspector's CPF file, in an `Event::TeammateEnded`. Which
//! of them counts is the machine's decision (`machine::Ending::choose`).
//!
//! The lookup reads the store directly when the teammate's process has ended
//! (the gateway commits the event before the tool call returns), so it never
//! races the watcher's polling.

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;
use troupe_core::report::ReportCall;
use troupe_store::{Event as StoreEvent, EventLog};

use crate::machine::{AgentId, Event};

/// The event kind the gateway's `report` tool appends (`troupe_gateway::tools::REPORT_EVENT`;
/// troupe-lead does not depend on the gateway, and the gateway's tests pin the name).
pub const REPORT_EVENT: &str = "agent_report";

/// Where each teammate's launches start in the event log, and the latest
/// `report` call of each teammate seen so far.
#[derive(Debug, Default)]
pub struct ToolReports {
    /// The last event id read.
    seen: i64,
    /// Per agent: the event id at its first launch and at its latest launch.
    launches: HashMap<AgentId, (i64, i64)>,
    /// Per agent: its latest `report` call (event id, data).
    latest: HashMap<AgentId, (i64, Value)>,
}

impl ToolReports {
    /// Start after everything already in the log: earlier runs' reports are not this run's.
    pub fn start(store: &dyn EventLog) -> Result<ToolReports, String> {
        let mut r = ToolReports::default();
        r.read(store, false)?;
        Ok(r)
    }

    /// `id` was launched (spawned, or resumed): only reports from now on belong to this launch.
    pub fn launched(&mut self, store: &dyn EventLog, id: &str) -> Result<(), String> {
        if self.launches.contains_key(id) {
            // A resume: its earlier launches' reports are behind the mark.
            self.read(store, true)?;
            let seen = self.seen;
            self.launches.entry(id.to_string()).and_modify(|l| l.1 = seen);
        } else {
            // A first launch needs no read: agent ids are never reused within a run, so
            // nothing between the last read and now can be this teammate's.
            self.launches.insert(id.to_string(), (self.seen, self.seen));
        }
        Ok(())
    }

    /// A `TeammateEnded` with the teammate's latest `report` call of this run
    /// (and whether it was made in its latest launch) and its
    /// `active_reviews/<id>.cpf`, when it wrote one; every other event as it was.
    /// When the log cannot be read, the event without a call, and why.
    pub fn apply(&mut self, store: &dyn EventLog, event: Event, active_reviews: &Path) -> (Event, Option<String>) {
        let Event::TeammateEnded { id, mut ending, stats } = event else { return (event, None) };
        if let Err(e) = self.read(store, true) {
            return (Event::TeammateEnded { id, ending, stats }, Some(e));
        }
        let (first, last) = self.launches.get(&id).copied().unwrap_or((0, 0));
        if let Some((at, data)) = self.latest.get(&id).filter(|(at, _)| *at > first) {
            ending.call = ReportCall::from_args(data);
            ending.call_is_current = *at > last;
        }
        ending.cpf_file = std::fs::read_to_string(active_reviews.join(format!("{id}.cpf"))).ok();
        (Event::TeammateEnded { id, ending, stats }, None)
    }

    /// Read the log up to its end; `keep` records the `report` calls met on the way.
    fn read(&mut self, store: &dyn EventLog, keep: bool) -> Result<(), String> {
        loop {
            let page = store.events_since(self.seen, 1000).map_err(|e| format!("cannot read the event log: {e}"))?;
            let Some(last) = page.last() else { return Ok(()) };
            self.seen = last.id;
            if keep {
                for e in page.iter().filter(|e| e.kind == REPORT_EVENT) {
                    self.record(e);
                }
            }
        }
    }

    fn record(&mut self, e: &StoreEvent) {
        if let Some(actor) = &e.actor {
            self.latest.insert(actor.clone(), (e.id, e.data.clone()));
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use troupe_store::{NewEvent, SqliteStore};

    use super::*;
    use crate::machine::{Ending, RunStats};

    fn call() -> Value {
        json!({"status": "complete", "summary": "adder done", "files": ["src/add.sh"], "tests": ["1 passed"]})
    }

    #[test]
    fn the_store_lookup_keeps_to_the_teammate_and_its_launches() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("s.db")).unwrap();
        let append = |actor: &str, data: Value| {
            store
                .append_event(NewEvent { kind: REPORT_EVENT.into(), actor: Some(actor.into()), subject: None, data })
                .unwrap();
        };
        append("builder-1", call()); // An earlier run's: not this run's.
        let mut reports = ToolReports::start(&store).unwrap();
        let ended = |id: &str| Event::TeammateEnded {
            id: id.into(),
            ending: Box::new(Ending { text: Some("done".into()), ..Ending::default() }),
            stats: RunStats::default(),
        };
        reports.launched(&store, "builder-1").unwrap();
        reports.launched(&store, "builder-2").unwrap();
        let ending_of = |reports: &mut ToolReports, id: &str| match reports.apply(&store, ended(id), dir.path()) {
            (Event::TeammateEnded { ending, .. }, None) => *ending,
            other => panic!("{other:?}"),
        };
        let e = ending_of(&mut reports, "builder-1");
        assert_eq!((e.text.as_deref(), e.call), (Some("done"), None));
        append("builder-2", call());
        append("builder-1", json!({"status": "blocked", "summary": "stuck"}));
        let e = ending_of(&mut reports, "builder-1");
        assert!(e.call.as_ref().is_some_and(|c| c.blocked) && e.call_is_current, "{e:?}");
        let e = ending_of(&mut reports, "builder-2");
        assert_eq!(e.call.as_ref().map(|c| c.files.clone()), Some(vec!["src/add.sh".to_string()]));
        // Resumed without a new call: the call is there, but from an earlier launch.
        reports.launched(&store, "builder-2").unwrap();
        let e = ending_of(&mut reports, "builder-2");
        assert!(e.call.is_some() && !e.call_is_current, "{e:?}");
        // A CPF file in the active review directory comes along.
        std::fs::write(dir.path().join("builder-2.cpf"), "VERDICT:GO\n").unwrap();
        assert_eq!(ending_of(&mut reports, "builder-2").cpf_file.as_deref(), Some("VERDICT:GO\n"));
        // Other events pass through untouched.
        let e = Event::TeammateStarted { id: "builder-2".into() };
        assert!(matches!(reports.apply(&store, e, dir.path()), (Event::TeammateStarted { .. }, None)));
    }
}
