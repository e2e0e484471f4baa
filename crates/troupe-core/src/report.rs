//! Completion reports: the structured text a teammate ends with (seed 000,
//! Spec 6), read tolerantly because models wrap it in prose.
//!
//! A Builder's report:
//!
//! ```text
//! BUILDER_COMPLETE
//! Feature: login
//! Tasks completed: 1.1, 1.2
//! Files: src/session.rs, src/login.rs
//! Tests: 14 passed
//! Status: complete
//! [PATTERN] sessions are keyed by an opaque token
//! [INCIDENT] the clock in tests must be injected
//! [REFERENCE] RFC 6265 for cookie attributes
//! ```
//!
//! `BUILDER_BLOCKED` has the same lines plus `Blocker:` saying what stops it.
//!
//! The marker is the last line of the text that is only the marker (markdown
//! such as `**`, `#` or a trailing `:` allowed); everything before it is
//! ignored. After it, `Key: value` lines are read with markdown bold,
//! bullets and code fences tolerated; lists are comma-separated or given as
//! bullet lines under an empty `Key:`; `none` means an empty list. Other lines
//! are prose and ignored.
//!
//! [`Completion`] is the same reading for any role (`ARCHITECT_COMPLETE`,
//! ...): the marker, the fields, the knowledge tags.
//!
//! # Usage
//!
//! ```
//! use troupe_core::report::{BuilderReport, Outcome};
//!
//! let text = "All done! Here is my report:\n\n**BUILDER_COMPLETE**\n- **Feature:** login\n- **Tasks completed:** 1.1, 1.2\n- **Files:**\n  - src/login.rs\n- **Tests:** 3 passed\n- **Status:** complete\n- [PATTERN] inject the clock\n";
//! let report = BuilderReport::parse(text).unwrap();
//! assert_eq!(report.outcome, Outcome::Complete);
//! assert_eq!(report.tasks_completed, ["1.1", "1.2"]);
//! assert_eq!(report.files, ["src/login.rs"]);
//! assert_eq!(report.knowledge[0].text, "inject the clock");
//!
//! let err = BuilderReport::parse("BUILDER_COMPLETE\nFeature: login\n").unwrap_err();
//! assert_eq!(err.to_string(), "the BUILDER_COMPLETE report has no Tasks completed:, Files:, Tests:, Status: line");
//! ```

use std::fmt;

use serde::{Deserialize, Serialize};

/// The kind of a knowledge tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Tag {
    /// `[PATTERN]`: a way of doing things worth repeating.
    Pattern,
    /// `[INCIDENT]`: something that went wrong and how it was handled.
    Incident,
    /// `[REFERENCE]`: a source worth keeping.
    Reference,
}

/// One tagged line of knowledge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Knowledge {
    /// Which tag.
    pub tag: Tag,
    /// The text after the tag.
    pub text: String,
}

/// Any teammate's completion report, before its fields are interpreted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Completion {
    /// The marker line found (`BUILDER_COMPLETE`, ...), as given in `markers`.
    pub marker: String,
    /// `Key: value` fields in order; list fields are joined with `, `. The
    /// first occurrence of a key wins in [`Completion::field`].
    pub fields: Vec<(String, String)>,
    /// Tagged lines.
    pub knowledge: Vec<Knowledge>,
}

/// Whether the Builder finished.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    /// `BUILDER_COMPLETE`
    Complete,
    /// `BUILDER_BLOCKED`, with what stops it.
    Blocked {
        /// The `Blocker:` text.
        blocker: String,
    },
}

/// A Builder's completion report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuilderReport {
    /// Complete or blocked.
    #[serde(flatten)]
    pub outcome: Outcome,
    /// `Feature:`
    pub feature: String,
    /// `Tasks completed:` subtask ids.
    pub tasks_completed: Vec<String>,
    /// `Files:` paths created or changed.
    pub files: Vec<String>,
    /// `Tests:` as written (`14 passed`).
    pub tests: String,
    /// `Status:` as written.
    pub status: String,
    /// `[PATTERN]`, `[INCIDENT]`, `[REFERENCE]` lines.
    pub knowledge: Vec<Knowledge>,
}

/// A report that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReportError {
    /// None of the markers is on a line of its own.
    #[error("no {} line found; the report must start with one of them on a line of its own", .expected.join(" or "))]
    NoMarker {
        /// The markers looked for.
        expected: Vec<String>,
    },
    /// Required fields are absent or empty.
    #[error("the {marker} report has no {} line", .missing.iter().map(|m| format!("{m}:")).collect::<Vec<_>>().join(", "))]
    Missing {
        /// The marker found.
        marker: String,
        /// The missing keys, in report order.
        missing: Vec<&'static str>,
    },
}

/// `Feature:`, the feature the report is about.
pub const FEATURE: &str = "Feature";
/// `Tasks completed:`, a Builder's completed task ids.
pub const TASKS_COMPLETED: &str = "Tasks completed";
/// `Files:`, the files created or changed.
pub const FILES: &str = "Files";
/// `Tests:`, what ran and the result; a Builder report without it is refused.
pub const TESTS: &str = "Tests";
/// `Status:`, one line.
pub const STATUS: &str = "Status";
/// `Blocker:`, what a blocked teammate needs.
pub const BLOCKER: &str = "Blocker";

/// The marker stem of `role`'s completion report (`BUILDER` for
/// `BUILDER_COMPLETE` / `BUILDER_BLOCKED`); `None` for the roles that end with
/// CPF (Inspector, Auditor) and for the Lead.
pub fn marker_of(role: crate::role::Role) -> Option<&'static str> {
    use crate::role::Role;
    match role {
        Role::Architect => Some("ARCHITECT"),
        Role::TaskGenerator => Some("TASKGEN"),
        Role::Builder => Some("BUILDER"),
        Role::Coordinator => Some("COORDINATOR"),
        _ => None,
    }
}

/// The Builder's markers.
pub const BUILDER_COMPLETE: &str = "BUILDER_COMPLETE";
/// The Builder's marker when it cannot go on.
pub const BUILDER_BLOCKED: &str = "BUILDER_BLOCKED";

impl Completion {
    /// Find the last line that is one of `markers` and read what follows it.
    pub fn parse(text: &str, markers: &[&str]) -> Result<Completion, ReportError> {
        let lines: Vec<&str> = text.lines().collect();
        let (start, marker) = lines
            .iter()
            .enumerate()
            .rev()
            .find_map(|(i, l)| {
                let bare = l.trim().trim_matches(['*', '#', '_', '`', ' ']).trim_end_matches(':').trim();
                markers.iter().find(|m| bare.eq_ignore_ascii_case(m)).map(|m| (i, m.to_string()))
            })
            .ok_or_else(|| ReportError::NoMarker { expected: markers.iter().map(|m| m.to_string()).collect() })?;
        let mut report = Completion { marker, fields: Vec::new(), knowledge: Vec::new() };
        let mut open_list: Option<usize> = None;
        for line in &lines[start + 1..] {
            let raw = line.trim();
            if raw.is_empty() || raw.starts_with("```") {
                continue;
            }
            let bullet = strip_bullet(raw);
            let body = bullet.unwrap_or(raw).replace("**", "");
            let body = body.trim();
            if let Some(k) = knowledge(body) {
                report.knowledge.push(k);
                open_list = None;
                continue;
            }
            if let Some((key, value)) = field(body) {
                report.fields.push((key.to_string(), value.to_string()));
                open_list = value.is_empty().then_some(report.fields.len() - 1);
                continue;
            }
            match (open_list, bullet) {
                (Some(i), Some(_)) => {
                    let item = unquote(body);
                    let v = &mut report.fields[i].1;
                    if !v.is_empty() {
                        v.push_str(", ");
                    }
                    v.push_str(item);
                }
                _ => open_list = None,
            }
        }
        Ok(report)
    }

    /// Read the report of a role: `{ROLE}_COMPLETE` or `{ROLE}_BLOCKED`
    /// (`role` is `ARCHITECT`, `TASKGEN`, `INSPECTOR`, `AUDITOR`, ...).
    pub fn for_role(text: &str, role: &str) -> Result<Completion, ReportError> {
        let complete = format!("{role}_COMPLETE");
        let blocked = format!("{role}_BLOCKED");
        Completion::parse(text, &[&complete, &blocked])
    }

    /// Whether the marker says the teammate is blocked (`..._BLOCKED`).
    pub fn is_blocked(&self) -> bool {
        self.marker.ends_with("_BLOCKED")
    }

    /// A list field (`Files: a.rs, b.rs` or bullet lines); `none` is empty.
    pub fn list(&self, key: &str) -> Vec<String> {
        self.field(key).map(list).unwrap_or_default()
    }

    /// The first value of a key, compared without regard to case; empty
    /// values count as absent.
    pub fn field(&self, key: &str) -> Option<&str> {
        self.fields.iter().find(|(k, v)| k.eq_ignore_ascii_case(key) && !v.is_empty()).map(|(_, v)| v.as_str())
    }

    /// The first of several names for one field.
    fn any_field(&self, keys: &[&str]) -> Option<&str> {
        keys.iter().find_map(|k| self.field(k))
    }
}

impl BuilderReport {
    /// Read a Builder's report out of its final output.
    pub fn parse(text: &str) -> Result<BuilderReport, ReportError> {
        let c = Completion::parse(text, &[BUILDER_COMPLETE, BUILDER_BLOCKED])?;
        let blocked = c.marker == BUILDER_BLOCKED;
        let mut missing = Vec::new();
        let mut get = |name: &'static str, keys: &[&str]| match c.any_field(keys) {
            Some(v) => v.to_string(),
            None => {
                missing.push(name);
                String::new()
            }
        };
        let feature = get(FEATURE, &[FEATURE]);
        let tasks = get(TASKS_COMPLETED, &[TASKS_COMPLETED, "Tasks", "Completed tasks", "Tasks done"]);
        let files = get(FILES, &[FILES, "Files changed", "Files created", "Files modified"]);
        let tests = get(TESTS, &[TESTS, "Test results"]);
        let status = get(STATUS, &[STATUS]);
        let blocker = if blocked { get(BLOCKER, &[BLOCKER, "Blocked by", "Blocked", "Reason"]) } else { String::new() };
        BuilderReport {
            outcome: if blocked { Outcome::Blocked { blocker } } else { Outcome::Complete },
            feature,
            tasks_completed: list(&tasks),
            files: list(&files),
            tests,
            status,
            knowledge: c.knowledge,
        }
        .checked(c.marker, missing)
    }

    /// Read a Builder's `report` tool call, with the rule [`BuilderReport::parse`]
    /// applies to text: a complete report without tests is refused.
    pub fn from_call(call: &ReportCall) -> Result<BuilderReport, ReportError> {
        let mut missing = Vec::new();
        let feature = call.feature.clone().unwrap_or_else(|| {
            missing.push(FEATURE);
            String::new()
        });
        let tests = call.tests.join("; ");
        if tests.is_empty() {
            missing.push(TESTS);
        }
        if call.summary.is_empty() {
            missing.push(STATUS);
        }
        let outcome = match call.blocked {
            true => Outcome::Blocked { blocker: call.blocker.clone().unwrap_or_else(|| call.summary.clone()) },
            false => Outcome::Complete,
        };
        let marker = if call.blocked { BUILDER_BLOCKED } else { BUILDER_COMPLETE };
        BuilderReport {
            outcome,
            feature,
            tasks_completed: call.task_id.iter().cloned().collect(),
            files: call.files.clone(),
            tests,
            status: call.summary.clone(),
            knowledge: call.knowledge.clone(),
        }
        .checked(marker.to_string(), missing)
    }

    /// The report, or the fields it lacks. A blocked Builder may have finished
    /// nothing and run no tests.
    fn checked(self, marker: String, mut missing: Vec<&'static str>) -> Result<BuilderReport, ReportError> {
        if matches!(self.outcome, Outcome::Blocked { .. }) {
            missing.retain(|m| ![TASKS_COMPLETED, FILES, TESTS].contains(m));
        }
        if missing.is_empty() { Ok(self) } else { Err(ReportError::Missing { marker, missing }) }
    }
}

/// A completion report made through the gateway's `report` tool (seed 000
/// Spec 6.3): the call's arguments as data, read without being rendered to
/// text and parsed again.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportCall {
    /// `status: "blocked"` (otherwise `"complete"`).
    pub blocked: bool,
    /// `summary`: one line, the report's `Status:`.
    pub summary: String,
    /// `feature`, when the call or the gateway session named one.
    pub feature: Option<String>,
    /// `task_id`: the one task the call reports.
    pub task_id: Option<String>,
    /// `files` created or changed.
    pub files: Vec<String>,
    /// `tests`: what ran and the result.
    pub tests: Vec<String>,
    /// `blocker`: what a blocked teammate needs.
    pub blocker: Option<String>,
    /// `knowledge`: `{tag, text}` entries with a known tag.
    pub knowledge: Vec<Knowledge>,
}

impl ReportCall {
    /// The call from the arguments the gateway recorded; `None` when its
    /// `status` is neither `complete` nor `blocked`. Empty strings count as
    /// absent, and values keep to one line (a newline cannot fake a field).
    pub fn from_args(args: &serde_json::Value) -> Option<ReportCall> {
        let blocked = match args.get("status").and_then(serde_json::Value::as_str)? {
            "complete" => false,
            "blocked" => true,
            _ => return None,
        };
        let text =
            |key: &str| args.get(key).and_then(serde_json::Value::as_str).map(one_line).filter(|s| !s.is_empty());
        let list = |key: &str| -> Vec<String> {
            let items = args.get(key).and_then(serde_json::Value::as_array).into_iter().flatten();
            items.filter_map(serde_json::Value::as_str).map(one_line).filter(|s| !s.is_empty()).collect()
        };
        let knowledge = args.get("knowledge").and_then(serde_json::Value::as_array).into_iter().flatten();
        let knowledge = knowledge
            .filter_map(|k| {
                let tag = match k.get("tag")?.as_str()?.trim().to_ascii_uppercase().as_str() {
                    "PATTERN" => Tag::Pattern,
                    "INCIDENT" => Tag::Incident,
                    "REFERENCE" => Tag::Reference,
                    _ => return None,
                };
                let text = one_line(k.get("text")?.as_str()?);
                (!text.is_empty()).then_some(Knowledge { tag, text })
            })
            .collect();
        Some(ReportCall {
            blocked,
            summary: text("summary").unwrap_or_default(),
            feature: text("feature"),
            task_id: text("task_id"),
            files: list("files"),
            tests: list("tests"),
            blocker: text("blocker"),
            knowledge,
        })
    }

    /// The call as `role`'s completion report (`role` as in
    /// [`Completion::for_role`]): the fields a text report would carry, a
    /// blocked call's `Blocker:` falling back to its summary.
    pub fn completion(&self, role: &str) -> Completion {
        let none = |v: &[String]| if v.is_empty() { "none".to_string() } else { v.join(", ") };
        let mut fields = Vec::new();
        if let Some(f) = &self.feature {
            fields.push((FEATURE.to_string(), f.clone()));
        }
        fields.push(("Summary".to_string(), self.summary.clone()));
        fields.push((STATUS.to_string(), self.summary.clone()));
        fields.push((TASKS_COMPLETED.to_string(), self.task_id.clone().unwrap_or_else(|| "none".into())));
        fields.push((FILES.to_string(), none(&self.files)));
        fields.push((TESTS.to_string(), self.tests.join("; ")));
        if self.blocked {
            fields.push((BLOCKER.to_string(), self.blocker.clone().unwrap_or_else(|| self.summary.clone())));
        }
        let marker = format!("{role}_{}", if self.blocked { "BLOCKED" } else { "COMPLETE" });
        Completion { marker, fields, knowledge: self.knowledge.clone() }
    }
}

/// What a teammate handed in as its report: its final text, or its `report`
/// tool call. Both are read by this module's one set of rules.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Submission {
    /// The final text of its run (a marker-and-fields report, or CPF).
    Text(String),
    /// Its `report` tool call.
    Call(ReportCall),
}

impl Submission {
    /// `role`'s completion report (`ARCHITECT`, `TASKGEN`, ...).
    pub fn completion(&self, role: &str) -> Result<Completion, ReportError> {
        match self {
            Submission::Text(t) => Completion::for_role(t, role),
            Submission::Call(c) => Ok(c.completion(role)),
        }
    }

    /// A Builder's report.
    pub fn builder(&self) -> Result<BuilderReport, ReportError> {
        match self {
            Submission::Text(t) => BuilderReport::parse(t),
            Submission::Call(c) => BuilderReport::from_call(c),
        }
    }

    /// The text: the final text, or a call's summary (where an Inspector or
    /// Auditor puts its CPF).
    pub fn text(&self) -> &str {
        match self {
            Submission::Text(t) => t,
            Submission::Call(c) => &c.summary,
        }
    }
}

impl From<String> for Submission {
    fn from(text: String) -> Submission {
        Submission::Text(text)
    }
}

impl From<&str> for Submission {
    fn from(text: &str) -> Submission {
        Submission::Text(text.to_string())
    }
}

/// Newlines would start new report lines (or fake a marker): values stay on one line.
fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

impl fmt::Display for BuilderReport {
    /// The canonical form, which [`BuilderReport::parse`] reads back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let none = |v: &[String]| if v.is_empty() { "none".to_string() } else { v.join(", ") };
        match &self.outcome {
            Outcome::Complete => writeln!(f, "{BUILDER_COMPLETE}")?,
            Outcome::Blocked { .. } => writeln!(f, "{BUILDER_BLOCKED}")?,
        }
        writeln!(f, "Feature: {}", self.feature)?;
        writeln!(f, "Tasks completed: {}", none(&self.tasks_completed))?;
        writeln!(f, "Files: {}", none(&self.files))?;
        writeln!(f, "Tests: {}", self.tests)?;
        writeln!(f, "Status: {}", self.status)?;
        if let Outcome::Blocked { blocker } = &self.outcome {
            writeln!(f, "Blocker: {blocker}")?;
        }
        for k in &self.knowledge {
            writeln!(f, "{} {}", k.tag, k.text)?;
        }
        Ok(())
    }
}

impl fmt::Display for Tag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Tag::Pattern => "[PATTERN]",
            Tag::Incident => "[INCIDENT]",
            Tag::Reference => "[REFERENCE]",
        })
    }
}

fn strip_bullet(line: &str) -> Option<&str> {
    ["- ", "* ", "+ ", "• "].iter().find_map(|b| line.strip_prefix(b)).map(str::trim_start)
}

fn knowledge(body: &str) -> Option<Knowledge> {
    for (tag, name) in [(Tag::Pattern, "[PATTERN]"), (Tag::Incident, "[INCIDENT]"), (Tag::Reference, "[REFERENCE]")] {
        if body.len() >= name.len()
            && body.is_char_boundary(name.len())
            && body[..name.len()].eq_ignore_ascii_case(name)
        {
            let text = body[name.len()..].trim_start_matches(':').trim();
            return Some(Knowledge { tag, text: text.to_string() });
        }
    }
    None
}

/// `Key: value` where the key is a few words.
fn field(body: &str) -> Option<(&str, &str)> {
    let colon = body.find(':')?;
    let key = body[..colon].trim().trim_matches(['_', '`']);
    let ok = !key.is_empty()
        && key.len() <= 32
        && key.starts_with(|c: char| c.is_ascii_alphabetic())
        && key.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, ' ' | '_' | '-'));
    ok.then(|| (key, unquote(body[colon + 1..].trim())))
}

/// `` `x` `` → `x`, when the backticks wrap the whole value.
fn unquote(s: &str) -> &str {
    let inner = s.strip_prefix('`').and_then(|s| s.strip_suffix('`'));
    inner.filter(|i| !i.contains('`')).unwrap_or(s).trim()
}

/// A comma-separated list; `none` and `-` are empty.
fn list(value: &str) -> Vec<String> {
    let v = value.trim();
    if v.is_empty() || ["none", "-", "(none)", "n/a"].iter().any(|n| v.eq_ignore_ascii_case(n)) {
        return Vec::new();
    }
    v.split(',').map(|s| unquote(s.trim()).to_string()).filter(|s| !s.is_empty()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parse a Builder report and print it canonically, or `error: ...`.
    #[track_caller]
    fn check(input: &str, expected: &str) {
        let got = match BuilderReport::parse(input) {
            Ok(r) => r.to_string(),
            Err(e) => format!("error: {e}"),
        };
        assert_eq!(got.trim_end(), expected.trim(), "\n--- input ---\n{input}");
    }

    const CANONICAL: &str = "\
BUILDER_COMPLETE
Feature: login
Tasks completed: 1.1, 1.2
Files: src/a.rs, src/b.rs
Tests: 4 passed
Status: complete
[PATTERN] inject the clock
[INCIDENT] flaky port; bind :0
[REFERENCE] RFC 6265";

    #[test]
    fn canonical_reports_read_back() {
        check(CANONICAL, CANONICAL);
        let blocked = "BUILDER_BLOCKED\nFeature: login\nTasks completed: none\nFiles: none\nTests: not run\nStatus: blocked\nBlocker: design.md has no session expiry";
        check(blocked, blocked);
    }

    #[test]
    fn models_noise() {
        check(&format!("I implemented everything.\n\n```\n{CANONICAL}\n```\nLet me know!"), CANONICAL);
        check(
            "**BUILDER_COMPLETE**\n\n- **Feature:** login\n- **Tasks completed:** `1.1`, `1.2`\n- **Files:**\n  - `src/a.rs`\n  - src/b.rs\n- **Tests:** 4 passed\n- **Status:** complete\n\n- [PATTERN] inject the clock\n* [incident]: flaky port; bind :0\n[REFERENCE] RFC 6265",
            CANONICAL,
        );
        check(
            &format!(
                "Earlier I said BUILDER_COMPLETE would come.\n## BUILDER_COMPLETE:\n{}",
                &CANONICAL["BUILDER_COMPLETE\n".len()..]
            ),
            CANONICAL,
        );
        // The last marker line wins: a draft earlier in the text is ignored.
        check(&format!("BUILDER_BLOCKED\nFeature: x\n\n{CANONICAL}"), CANONICAL);
        // Prose lines between fields are ignored.
        check(&CANONICAL.replace("Tests:", "I ran the suite twice.\nTests:"), CANONICAL);
    }

    #[test]
    fn precise_errors() {
        check(
            "Done, everything works.",
            "error: no BUILDER_COMPLETE or BUILDER_BLOCKED line found; the report must start with one of them on a line of its own",
        );
        check(
            "I will print BUILDER_COMPLETE when done",
            "error: no BUILDER_COMPLETE or BUILDER_BLOCKED line found; the report must start with one of them on a line of its own",
        );
        check(
            "BUILDER_COMPLETE\nFeature: login\nStatus: ok\n",
            "error: the BUILDER_COMPLETE report has no Tasks completed:, Files:, Tests: line",
        );
        check(
            "BUILDER_COMPLETE\nFeature:\nTasks completed: 1\nFiles: a\nTests: ok\nStatus: ok\n",
            "error: the BUILDER_COMPLETE report has no Feature: line",
        );
        check(
            "BUILDER_BLOCKED\nFeature: login\nStatus: blocked\n",
            "error: the BUILDER_BLOCKED report has no Blocker: line",
        );
    }

    fn arb_report() -> impl proptest::strategy::Strategy<Value = BuilderReport> {
        use proptest::prelude::*;
        let item = "[a-z0-9][a-z0-9./_-]{0,12}";
        let text = "[a-z][a-zA-Z0-9 .,;:()/-]{0,20}[a-z0-9]";
        let tag = prop_oneof![Just(Tag::Pattern), Just(Tag::Incident), Just(Tag::Reference)];
        (
            prop::option::of(text),
            "[a-z][a-z0-9-]{0,10}",
            prop::collection::vec(item, 0..4),
            prop::collection::vec(item, 0..4),
            text,
            text,
            prop::collection::vec((tag, text), 0..4),
        )
            .prop_map(|(blocker, feature, tasks_completed, files, tests, status, knowledge)| BuilderReport {
                outcome: blocker.map_or(Outcome::Complete, |blocker| Outcome::Blocked { blocker }),
                feature,
                tasks_completed,
                files,
                tests,
                status,
                knowledge: knowledge.into_iter().map(|(tag, text)| Knowledge { tag, text }).collect(),
            })
    }

    proptest::proptest! {
        #[test]
        fn round_trip(r in arb_report()) {
            proptest::prop_assert_eq!(BuilderReport::parse(&r.to_string()), Ok(r));
        }

        #[test]
        fn round_trip_through_markdown(r in arb_report()) {
            // What models do: prose, a fence, bold keys, bullets.
            let dressed: String = r
                .to_string()
                .lines()
                .map(|l| match l.split_once(": ") {
                    Some((k, v)) if !l.starts_with('[') => format!("- **{k}:** {v}\n"),
                    _ => format!("{l}\n"),
                })
                .collect();
            let text = format!("I finished the work.\n\n```text\n{dressed}```\n\nAnything else?");
            proptest::prop_assert_eq!(BuilderReport::parse(&text), Ok(r));
        }
    }

    #[test]
    fn generic_completion() {
        let c = Completion::parse(
            "ok\nARCHITECT_COMPLETE\nFeature: login\nFiles: design.md, research.md\n[REFERENCE] OWASP",
            &["ARCHITECT_COMPLETE"],
        )
        .unwrap();
        assert_eq!(c.marker, "ARCHITECT_COMPLETE");
        assert_eq!(c.field("files"), Some("design.md, research.md"));
        assert_eq!(c.knowledge, [Knowledge { tag: Tag::Reference, text: "OWASP".into() }]);
        assert!(!c.is_blocked());
        assert_eq!(c.list("Files"), ["design.md", "research.md"]);
        let c = Completion::for_role("TASKGEN_BLOCKED\nBlocker: design.md is empty\nFiles: none", "TASKGEN").unwrap();
        assert!(c.is_blocked());
        assert_eq!(c.field("blocker"), Some("design.md is empty"));
        assert!(c.list("files").is_empty());
        assert!(Completion::for_role("BUILDER_COMPLETE", "TASKGEN").is_err());
    }

    fn call() -> serde_json::Value {
        serde_json::json!({
            "status": "complete", "summary": "adder\ndone", "task_id": "login/1.1", "feature": "login",
            "files": ["src/add.sh", "tests/test_add.sh"], "tests": ["1 passed"],
            "knowledge": [{"tag": "pattern", "text": "one\nfunction per file"}, {"tag": "bogus", "text": "x"}],
        })
    }

    #[test]
    fn a_report_call_is_read_as_data_by_the_same_rules() {
        let r = BuilderReport::from_call(&ReportCall::from_args(&call()).unwrap()).unwrap();
        assert_eq!(r.outcome, Outcome::Complete);
        assert_eq!(r.feature, "login");
        assert_eq!(r.status, "adder done");
        assert_eq!(r.files, ["src/add.sh", "tests/test_add.sh"]);
        assert_eq!(r.tests, "1 passed");
        assert_eq!(r.tasks_completed, ["login/1.1"]);
        assert_eq!(r.knowledge, [Knowledge { tag: Tag::Pattern, text: "one function per file".into() }]);
        // A file name with a comma stays one file: nothing is split again.
        let mut comma = call();
        comma["files"] = serde_json::json!(["a,b.txt"]);
        assert_eq!(BuilderReport::from_call(&ReportCall::from_args(&comma).unwrap()).unwrap().files, ["a,b.txt"]);
        // Complete without tests is refused, as a text report is.
        let mut untested = call();
        untested["tests"] = serde_json::json!([]);
        let e = BuilderReport::from_call(&ReportCall::from_args(&untested).unwrap()).unwrap_err();
        assert_eq!(e.to_string(), "the BUILDER_COMPLETE report has no Tests: line");
        assert!(ReportCall::from_args(&serde_json::json!({"status": "maybe", "summary": "?"})).is_none());
    }

    #[test]
    fn a_blocked_call_always_names_its_blocker() {
        let stuck = ReportCall::from_args(&serde_json::json!({"status": "blocked", "summary": "no API key"})).unwrap();
        let c = Submission::Call(stuck).completion("ARCHITECT").unwrap();
        assert!(c.is_blocked());
        assert_eq!(c.marker, "ARCHITECT_BLOCKED");
        assert_eq!(c.field("blocker"), Some("no API key"));
        let blocked =
            serde_json::json!({"status": "blocked", "summary": "stuck", "blocker": "flaky CI", "feature": "login"});
        let r = Submission::Call(ReportCall::from_args(&blocked).unwrap()).builder().unwrap();
        assert_eq!(r.outcome, Outcome::Blocked { blocker: "flaky CI".into() });
        // Text goes through the text parser.
        assert!(Submission::from("BUILDER_COMPLETE\nFeature: x").builder().is_err());
    }
}
