//! Completion reports made through the gateway's `report` tool (seed 000 Spec
//! 6.3: "the teammate's `report` tool call if it made one, otherwise its final
//! text"). The gateway records each call as a store event of kind
//! `agent_report` (actor: the agent); when a teammate finishes, the driver looks
//! up its latest one here and renders it into the completion-report text the
//! machine parses with `troupe_core::report`, so the machine has one input
//! either way.
//!
//! The lookup reads the store directly when the teammate's process has ended
//! (the gateway commits the event before the tool call returns), so it never
//! races the watcher's polling.

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;
use troupe_core::cpf::InspectorReport;
use troupe_core::report::{self, BuilderReport, Completion, marker_of};
use troupe_core::role::Role;
use troupe_store::{Event as StoreEvent, EventLog};

use crate::machine::{AgentId, Event};

/// The event kind the gateway's `report` tool appends (`troupe_gateway::tools::REPORT_EVENT`;
/// troupe-lead does not depend on the gateway, and the gateway's tests pin the name).
pub const REPORT_EVENT: &str = "agent_report";

/// Where each teammate's launches start in the event log, and the latest
/// `report` call of each teammate seen so far.
#[derive(Debug, Default)]
pub struct ToolReports {
    /// The run's feature, for reports whose call did not name it.
    feature: String,
    /// The last event id read.
    seen: i64,
    /// Per agent: the event id at its first launch and at its latest launch.
    launches: HashMap<AgentId, (i64, i64)>,
    /// Per agent: its latest `report` call (event id, data).
    latest: HashMap<AgentId, (i64, Value)>,
}

impl ToolReports {
    /// Start after everything already in the log: earlier runs' reports are not this run's.
    pub fn start(store: &impl EventLog, feature: &str) -> ToolReports {
        let mut r = ToolReports { feature: feature.to_string(), ..ToolReports::default() };
        r.read(store, false);
        r
    }

    /// `id` was launched (spawned, or resumed): only reports from now on belong to this launch.
    pub fn launched(&mut self, store: &impl EventLog, id: &str) {
        if self.launches.contains_key(id) {
            // A resume: its earlier launches' reports are behind the mark.
            self.read(store, true);
            let seen = self.seen;
            self.launches.entry(id.to_string()).and_modify(|l| l.1 = seen);
        } else {
            // A first launch needs no read: agent ids are never reused within a run, so
            // nothing between the last read and now can be this teammate's.
            self.launches.insert(id.to_string(), (self.seen, self.seen));
        }
    }

    /// A `TeammateFinished` with its report replaced by the teammate's `report`
    /// call when it made one (see [`choose`]); an Inspector's by its CPF file
    /// in `active_reviews` when neither is CPF (see [`inspector_findings`]);
    /// every other event as it was.
    pub fn apply(&mut self, store: &impl EventLog, event: Event, role: Option<Role>, active_reviews: &Path) -> Event {
        let Event::TeammateFinished { id, report, stats } = event else { return event };
        let Some(role) = role else { return Event::TeammateFinished { id, report, stats } };
        self.read(store, true);
        let (first, last) = self.launches.get(&id).copied().unwrap_or((0, 0));
        let call = self.latest.get(&id).filter(|(at, _)| *at > first);
        let mut report = match call {
            Some((at, data)) => {
                let mut data = data.clone();
                if data.get("feature").and_then(Value::as_str).is_none_or(str::is_empty) {
                    data["feature"] = Value::from(self.feature.clone());
                }
                choose(role, report, &data, *at > last)
            }
            None => report,
        };
        if role == Role::Inspector {
            let on_disk = std::fs::read_to_string(active_reviews.join(format!("{id}.cpf"))).ok();
            report = inspector_findings(report, on_disk);
        }
        Event::TeammateFinished { id, report, stats }
    }

    /// Read the log up to its end; `keep` records the `report` calls met on the way.
    fn read(&mut self, store: &impl EventLog, keep: bool) {
        while let Ok(page) = store.events_since(self.seen, 1000) {
            let Some(last) = page.last() else { return };
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

/// The report the machine gets, given the final text and a `report` call
/// (`current`: made during the latest launch, not an earlier one).
///
/// - Roles whose report is a completion report (Architect, TaskGenerator,
///   Builder): the call made in this launch wins; a call from an earlier launch
///   (a resumed teammate that did not report again) is used only when the final
///   text is not a report itself.
/// - Inspector and Auditor end with CPF: the call's summary is used only when it
///   is CPF (starts with `VERDICT:`); otherwise the final text stays.
/// - Other roles: the final text.
pub fn choose(role: Role, text: Option<String>, call: &Value, current: bool) -> Option<String> {
    match marker_of(role) {
        Some(marker) => {
            let text_is_report = text.as_deref().is_some_and(|t| match role {
                Role::Builder => BuilderReport::parse(t).is_ok(),
                _ => Completion::for_role(t, marker).is_ok(),
            });
            if current || !text_is_report { render(marker, call).or(text) } else { text }
        }
        None if matches!(role, Role::Inspector | Role::Auditor) => {
            let summary = call.get("summary").and_then(Value::as_str).map(str::trim);
            match summary.filter(|s| s.starts_with("VERDICT:")) {
                Some(cpf) => Some(cpf.to_string()),
                None => text,
            }
        }
        None => text,
    }
}

/// An Inspector's findings: its final text when that is CPF, otherwise the
/// `.cpf` file it wrote (`on_disk`) when that parses, otherwise the final text
/// (which the review stage refuses, saying why). An Inspector that wrote and
/// sent valid CPF but ended with prose still counts.
pub fn inspector_findings(text: Option<String>, on_disk: Option<String>) -> Option<String> {
    let is_cpf = |t: &str| t.parse::<InspectorReport>().is_ok();
    if text.as_deref().is_some_and(is_cpf) {
        return text;
    }
    on_disk.filter(|t| is_cpf(t)).or(text)
}

/// A `report` call's data as completion-report text: the marker line, then
/// `Feature`, `Summary`, `Status` (the summary), `Tasks completed`, `Files`,
/// `Tests`, `Blocker` and the knowledge lines, under the field names of
/// `troupe_core::report`.
/// `None` when the call's status is neither `complete` nor `blocked`.
pub fn render(marker: &str, data: &Value) -> Option<String> {
    let status = match data.get("status").and_then(Value::as_str)? {
        "complete" => "COMPLETE",
        "blocked" => "BLOCKED",
        _ => return None,
    };
    let text = |key: &str| data.get(key).and_then(Value::as_str).map(one_line).filter(|s| !s.is_empty());
    let list = |key: &str| -> Vec<String> {
        data.get(key)
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).map(one_line).filter(|s| !s.is_empty()).collect())
            .unwrap_or_default()
    };
    let mut out = format!("{marker}_{status}\n");
    if let Some(f) = text("feature") {
        out.push_str(&format!("{}: {f}\n", report::FEATURE));
    }
    let summary = text("summary");
    if let Some(s) = &summary {
        out.push_str(&format!("Summary: {s}\n{}: {s}\n", report::STATUS));
    }
    // A call names at most one task; `none` says so rather than leaving the field out.
    out.push_str(&format!("{}: {}\n", report::TASKS_COMPLETED, text("task_id").unwrap_or_else(|| "none".into())));
    let files = list("files");
    out.push_str(&format!("{}: {}\n", report::FILES, if files.is_empty() { "none".into() } else { files.join(", ") }));
    let tests = list("tests");
    if !tests.is_empty() {
        out.push_str(&format!("{}: {}\n", report::TESTS, tests.join("; ")));
    }
    // A blocked report without a blocker still says why: its summary.
    if let Some(b) = text("blocker").or(if status == "BLOCKED" { summary } else { None }) {
        out.push_str(&format!("{}: {b}\n", report::BLOCKER));
    }
    for k in data.get("knowledge").and_then(Value::as_array).into_iter().flatten() {
        let tag = k.get("tag").and_then(Value::as_str).unwrap_or_default().trim().to_ascii_uppercase();
        let body = k.get("text").and_then(Value::as_str).map(one_line).unwrap_or_default();
        if matches!(tag.as_str(), "PATTERN" | "INCIDENT" | "REFERENCE") && !body.is_empty() {
            out.push_str(&format!("[{tag}] {body}\n"));
        }
    }
    Some(out)
}

/// Newlines would start new report lines (or fake a marker): values stay on one line.
fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use troupe_store::{NewEvent, SqliteStore};

    use troupe_core::report::{Knowledge, Outcome, Tag};

    use super::*;
    use crate::machine::RunStats;

    fn parse(text: &str, marker: &str) -> Completion {
        Completion::for_role(text, marker).unwrap_or_else(|e| panic!("{e}: {text}"))
    }

    fn call() -> Value {
        json!({
            "status": "complete", "summary": "adder\ndone", "task_id": "login/1.1", "feature": "login",
            "files": ["src/add.sh", "tests/test_add.sh"], "tests": ["1 passed"],
            "knowledge": [{"tag": "PATTERN", "text": "one\nfunction per file"}, {"tag": "bogus", "text": "x"}],
            "role": "builder",
        })
    }

    #[test]
    fn a_call_renders_into_what_the_parser_reads() {
        let text = render("BUILDER", &call()).unwrap();
        // The Builder parser the machine uses accepts it: every required field is there.
        let r = BuilderReport::parse(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
        assert_eq!(r.outcome, Outcome::Complete);
        assert_eq!(r.feature, "login");
        assert_eq!(r.status, "adder done");
        assert_eq!(r.files, vec!["src/add.sh", "tests/test_add.sh"]);
        assert_eq!(r.tests, "1 passed");
        assert_eq!(r.tasks_completed, vec!["login/1.1"]);
        assert_eq!(r.knowledge, vec![Knowledge { tag: Tag::Pattern, text: "one function per file".to_string() }]);
        // A call without tests is refused as a Builder report, as README says.
        let mut untested = call();
        untested["tests"] = json!([]);
        let e = BuilderReport::parse(&render("BUILDER", &untested).unwrap()).unwrap_err();
        assert!(e.to_string().contains("Tests:"), "{e}");
    }

    #[test]
    fn a_blocked_call_always_names_its_blocker() {
        let r =
            parse(&render("ARCHITECT", &json!({"status": "blocked", "summary": "no API key"})).unwrap(), "ARCHITECT");
        assert!(r.is_blocked());
        assert_eq!(r.field("blocker"), Some("no API key"));
        let blocked = json!({"status": "blocked", "summary": "stuck", "blocker": "flaky CI", "feature": "login"});
        let r = BuilderReport::parse(&render("BUILDER", &blocked).unwrap()).unwrap();
        assert_eq!(r.outcome, Outcome::Blocked { blocker: "flaky CI".into() });
        assert!(render("BUILDER", &json!({"status": "maybe", "summary": "?"})).is_none());
    }

    #[test]
    fn which_report_wins() {
        let prose = Some("All done, thanks!".to_string());
        let text_report = Some(
            "BUILDER_COMPLETE\nFeature: login\nTasks completed: 1.1\nFiles: other.rs\nTests: 1 passed\nStatus: done\n"
                .to_string(),
        );
        let files = |t: Option<String>| parse(&t.unwrap(), "BUILDER").list("files");
        // A call in this launch wins over anything.
        assert_eq!(files(choose(Role::Builder, prose.clone(), &call(), true))[0], "src/add.sh");
        assert_eq!(files(choose(Role::Builder, text_report.clone(), &call(), true))[0], "src/add.sh");
        // A call from an earlier launch only stands in for a missing report.
        assert_eq!(files(choose(Role::Builder, prose.clone(), &call(), false))[0], "src/add.sh");
        assert_eq!(files(choose(Role::Builder, text_report.clone(), &call(), false))[0], "other.rs");
        assert_eq!(files(choose(Role::Builder, None, &call(), true))[0], "src/add.sh");
        // CPF roles: only a CPF summary replaces the final text.
        let cpf = json!({"status": "complete", "summary": "  VERDICT:GO\nSCOPE:login\n"});
        assert_eq!(choose(Role::Inspector, prose.clone(), &cpf, true).as_deref(), Some("VERDICT:GO\nSCOPE:login"));
        assert_eq!(choose(Role::Auditor, prose.clone(), &call(), true), prose);
        assert_eq!(choose(Role::Lead, prose.clone(), &call(), true), prose);
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
        let mut reports = ToolReports::start(&store, "login");
        let finished = |id: &str, text: &str| Event::TeammateFinished {
            id: id.into(),
            report: Some(text.into()),
            stats: RunStats::default(),
        };
        let report_of = |e: Event| match e {
            Event::TeammateFinished { report, .. } => report.unwrap(),
            _ => unreachable!(),
        };
        reports.launched(&store, "builder-1");
        reports.launched(&store, "builder-2");
        assert_eq!(
            report_of(reports.apply(&store, finished("builder-1", "done"), Some(Role::Builder), dir.path())),
            "done"
        );
        append("builder-2", call());
        append("builder-1", json!({"status": "blocked", "summary": "stuck"}));
        let r = report_of(reports.apply(&store, finished("builder-1", "done"), Some(Role::Builder), dir.path()));
        assert!(r.starts_with("BUILDER_BLOCKED"), "{r}");
        let r = report_of(reports.apply(&store, finished("builder-2", "done"), Some(Role::Builder), dir.path()));
        assert!(r.starts_with("BUILDER_COMPLETE\nFeature: login\nSummary: adder done"), "{r}");
        // Resumed without a new call: the final text's own report wins.
        reports.launched(&store, "builder-2");
        let text =
            "BUILDER_COMPLETE\nFeature: login\nTasks completed: none\nFiles: fixed.rs\nTests: 1 passed\nStatus: done";
        assert_eq!(
            report_of(reports.apply(&store, finished("builder-2", text), Some(Role::Builder), dir.path())),
            text
        );
        // Other events pass through untouched.
        let e = Event::TeammateStarted { id: "builder-2".into() };
        assert!(matches!(reports.apply(&store, e, Some(Role::Builder), dir.path()), Event::TeammateStarted { .. }));
    }

    #[test]
    fn an_inspector_cpf_file_counts_when_its_final_text_is_not_cpf() {
        let cpf = "VERDICT:NO-GO\nSCOPE:login\nISSUES:\nH|security|src/a.rs:3|token logged\nNOTES:\nnone\n";
        let prose = Some("INSPECTOR_COMPLETE\nFindings: 1".to_string());
        assert_eq!(inspector_findings(prose.clone(), Some(cpf.into())).as_deref(), Some(cpf));
        assert_eq!(inspector_findings(Some(cpf.into()), Some("VERDICT:GO\n".into())).as_deref(), Some(cpf));
        assert_eq!(inspector_findings(prose.clone(), Some("not cpf".into())), prose);
        assert_eq!(inspector_findings(prose.clone(), None), prose);
        // Through the driver's lookup: the file in the active review directory.
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("s.db")).unwrap();
        std::fs::write(dir.path().join("inspector-security-1.cpf"), cpf).unwrap();
        let mut reports = ToolReports::start(&store, "login");
        reports.launched(&store, "inspector-security-1");
        let e =
            Event::TeammateFinished { id: "inspector-security-1".into(), report: prose, stats: RunStats::default() };
        match reports.apply(&store, e, Some(Role::Inspector), dir.path()) {
            Event::TeammateFinished { report, .. } => assert_eq!(report.as_deref(), Some(cpf)),
            other => panic!("{other:?}"),
        }
    }
}
