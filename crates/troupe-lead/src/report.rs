//! Completion reports: the structured text a teammate ends with (seed 000
//! Spec 2.3, 6.3). First a marker line (`BUILDER_COMPLETE`, `BUILDER_BLOCKED`,
//! `ARCHITECT_COMPLETE`, `TASKGEN_COMPLETE`, ...), then `Key: value` lines and
//! `[PATTERN]` / `[INCIDENT]` / `[REFERENCE]` tagged lines.
//!
//! The parser is tolerant: models wrap reports in prose and code fences, so the
//! marker may appear anywhere, keys are matched case-insensitively, and list
//! values may be separated by commas or spread over `- item` lines.

use crate::machine::KnowledgeTag;

/// Whether the teammate finished or is stuck.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportStatus {
    /// `{ROLE}_COMPLETE`.
    Complete,
    /// `{ROLE}_BLOCKED`.
    Blocked,
}

/// A parsed completion report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// Complete or blocked.
    pub status: ReportStatus,
    /// `Key: value` fields in order, keys lowercased, list continuations joined with ", ".
    pub fields: Vec<(String, String)>,
    /// Tagged knowledge lines, in order.
    pub knowledge: Vec<(KnowledgeTag, String)>,
}

impl Report {
    /// The value of `key` (case-insensitive), if present and non-empty.
    pub fn field(&self, key: &str) -> Option<&str> {
        let key = key.to_ascii_lowercase();
        self.fields.iter().find(|(k, v)| *k == key && !v.is_empty()).map(|(_, v)| v.as_str())
    }

    /// A comma-separated field as a list (`Files: a.rs, b.rs`); `none` and `-` mean empty.
    pub fn list(&self, key: &str) -> Vec<String> {
        self.field(key)
            .map(|v| {
                v.split(',')
                    .map(|s| s.trim().trim_matches('`').to_string())
                    .filter(|s| !s.is_empty() && !s.eq_ignore_ascii_case("none") && s != "-")
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Find and parse the report with marker `{marker}_COMPLETE` or `{marker}_BLOCKED`
/// (`marker` is `BUILDER`, `ARCHITECT`, `TASKGEN`, ...). `None` when there is no marker.
pub fn parse(text: &str, marker: &str) -> Option<Report> {
    let complete = format!("{marker}_COMPLETE");
    let blocked = format!("{marker}_BLOCKED");
    let mut lines = text.lines().map(clean);
    let status = loop {
        let line = lines.next()?;
        if line.starts_with(&complete) {
            break ReportStatus::Complete;
        }
        if line.starts_with(&blocked) {
            break ReportStatus::Blocked;
        }
    };
    let mut report = Report { status, fields: Vec::new(), knowledge: Vec::new() };
    for line in lines {
        if line.is_empty() {
            continue;
        }
        if let Some((tag, rest)) = tagged(line) {
            report.knowledge.push((tag, rest.to_string()));
        } else if let Some(item) = line.strip_prefix("- ").or_else(|| line.strip_prefix("* ")) {
            // A list continuation of the last field.
            if let Some((_, v)) = report.fields.last_mut() {
                if !v.is_empty() {
                    v.push_str(", ");
                }
                v.push_str(item.trim());
            }
        } else if let Some((k, v)) = line.split_once(':') {
            let key = k.trim().trim_matches('*').to_ascii_lowercase();
            if !key.is_empty() && key.len() <= 40 && !key.contains(' ') || known_key(&key) {
                report.fields.push((key, v.trim().to_string()));
            }
        }
    }
    Some(report)
}

fn known_key(key: &str) -> bool {
    matches!(key, "tasks completed" | "files created")
}

/// Strip markdown decoration models put around report lines.
fn clean(line: &str) -> &str {
    line.trim().trim_start_matches(['#', '>', '`']).trim().trim_matches('*').trim()
}

fn tagged(line: &str) -> Option<(KnowledgeTag, &str)> {
    for tag in [KnowledgeTag::Pattern, KnowledgeTag::Incident, KnowledgeTag::Reference] {
        if let Some(rest) = line.strip_prefix(tag.as_str()) {
            return Some((tag, rest.trim()));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builder_report_with_prose_and_fences() {
        let text = "Done! Here is my report:\n```\nBUILDER_COMPLETE\nFeature: login\nTasks completed: 1.1, 1.2\nFiles: src/a.rs, tests/a.rs\nTests: 4 passed\nStatus: all green\n[PATTERN] keep parsers pure\n[INCIDENT] flaky port, fixed by binding :0\n```\n";
        let r = parse(text, "BUILDER").unwrap();
        assert_eq!(r.status, ReportStatus::Complete);
        assert_eq!(r.list("tasks completed"), vec!["1.1", "1.2"]);
        assert_eq!(r.list("Files"), vec!["src/a.rs", "tests/a.rs"]);
        assert_eq!(r.field("tests"), Some("4 passed"));
        assert_eq!(r.knowledge.len(), 2);
        assert_eq!(r.knowledge[0], (KnowledgeTag::Pattern, "keep parsers pure".to_string()));
    }

    #[test]
    fn list_continuation_lines() {
        let r = parse("BUILDER_COMPLETE\nFiles:\n- a.rs\n- b.rs\nTests: ok\n", "BUILDER").unwrap();
        assert_eq!(r.list("files"), vec!["a.rs", "b.rs"]);
    }

    #[test]
    fn blocked_and_missing() {
        let r = parse("**BUILDER_BLOCKED**\nBlocker: the API key is missing\n", "BUILDER").unwrap();
        assert_eq!(r.status, ReportStatus::Blocked);
        assert_eq!(r.field("blocker"), Some("the API key is missing"));
        assert!(parse("I did it all.", "BUILDER").is_none());
        assert!(parse("ARCHITECT_COMPLETE", "BUILDER").is_none());
        assert_eq!(r.list("files"), Vec::<String>::new());
    }
}
