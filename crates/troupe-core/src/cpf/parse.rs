//! Reading CPF out of a model's output: find the block, split it into
//! metadata and sections, then read each section's rows.

use super::{
    AuditVerdict, Finding, InspectorReport, Issue, Removed, Resolved, Severity, SpecFeedback, Steering, SteeringAction,
    Verdict,
};

/// CPF text that cannot be interpreted. Line numbers count from 1 over the
/// whole text given, prose included.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CpfError {
    /// No `VERDICT:` line anywhere.
    #[error("no VERDICT: line found; a CPF block starts with VERDICT:GO, CONDITIONAL, NO-GO or SPEC-UPDATE-NEEDED")]
    NoVerdict,
    /// The verdict is not one of the four.
    #[error("line {line}: unknown verdict '{value}'; expected GO, CONDITIONAL, NO-GO or SPEC-UPDATE-NEEDED")]
    UnknownVerdict {
        /// Where.
        line: usize,
        /// What was written.
        value: String,
    },
    /// A metadata key given twice.
    #[error("line {line}: {key}: is given a second time")]
    Duplicate {
        /// Where.
        line: usize,
        /// The key.
        key: String,
    },
    /// A row before any section header.
    #[error("line {line}: '{text}' is not under a section header such as {expected}")]
    RowOutsideSection {
        /// Where.
        line: usize,
        /// The row.
        text: String,
        /// The headers this kind of file has.
        expected: &'static str,
    },
    /// A section this kind of file does not have.
    #[error("line {line}: {key}: does not belong in {kind}; it has {expected}")]
    WrongSection {
        /// Where.
        line: usize,
        /// The header.
        key: String,
        /// `an Inspector file` or `verdict.cpf`.
        kind: &'static str,
        /// The headers it has.
        expected: &'static str,
    },
    /// A row with too few fields.
    #[error("line {line}: {section} row '{text}' has too few fields; expected {expected}")]
    BadRow {
        /// Where.
        line: usize,
        /// The section.
        section: String,
        /// The row.
        text: String,
        /// The row's format.
        expected: &'static str,
    },
    /// A severity that is not C, H, M or L.
    #[error("line {line}: unknown severity '{value}'; expected C, H, M or L")]
    UnknownSeverity {
        /// Where.
        line: usize,
        /// What was written.
        value: String,
    },
    /// A STEERING action that is not CODIFY or PROPOSE.
    #[error("line {line}: unknown STEERING action '{value}'; expected CODIFY or PROPOSE")]
    UnknownSteering {
        /// Where.
        line: usize,
        /// What was written.
        value: String,
    },
}

const KEYS: &[&str] =
    &["VERDICT", "SCOPE", "ISSUES", "VERIFIED", "REMOVED", "RESOLVED", "SPEC_FEEDBACK", "STEERING", "NOTES"];
const INSPECTOR_SECTIONS: &str = "ISSUES: and NOTES:";
const AUDIT_SECTIONS: &str = "VERIFIED:, REMOVED:, RESOLVED:, SPEC_FEEDBACK:, STEERING: and NOTES:";

/// A CPF block split up, before rows are read.
struct Raw<'a> {
    verdict: (usize, &'a str),
    scope: String,
    sections: Vec<Section<'a>>,
}

struct Section<'a> {
    key: &'static str,
    line: usize,
    rows: Vec<(usize, &'a str)>,
}

/// `KEY:VALUE` (or `KEY: VALUE`, `**KEY:** VALUE`) with a known key.
fn key_line(line: &str) -> Option<(&'static str, &str)> {
    let t = line.trim().trim_start_matches(['*', '`', '#', ' ']);
    let colon = t.find(':')?;
    let key = t[..colon].trim_end_matches(['*', '`', ' ']);
    let key = KEYS.iter().find(|k| **k == key)?;
    let value = t[colon + 1..].trim();
    // `**VERDICT:** GO`: markdown around the key only; a canonical value keeps its characters.
    let marked = line.trim_start().starts_with(['*', '`', '#']);
    let value = if marked { value.trim_matches(['*', '`']).trim() } else { value };
    Some((key, value))
}

fn split<'a>(text: &'a str, sections: &'static str) -> Result<Raw<'a>, CpfError> {
    let lines: Vec<&str> = text.lines().collect();
    // The last VERDICT line starts the block: a model that drafts its answer
    // before giving it means the final one.
    let start = lines.iter().rposition(|l| matches!(key_line(l), Some(("VERDICT", _)))).ok_or(CpfError::NoVerdict)?;
    let mut raw = Raw { verdict: (start + 1, ""), scope: String::new(), sections: Vec::new() };
    let mut scope_seen = false;
    let mut blank_before = false;
    for (i, line) in lines.iter().enumerate().skip(start) {
        let n = i + 1;
        let t = line.trim();
        // A closing fence ends the block (a row may start with backticks too).
        if t.starts_with("```") && !t.contains('|') {
            break;
        }
        if t.is_empty() {
            blank_before = true;
            continue;
        }
        let after_blank = std::mem::take(&mut blank_before);
        match key_line(line) {
            Some(("VERDICT", v)) => raw.verdict = (n, v),
            Some(("SCOPE", v)) => {
                if std::mem::replace(&mut scope_seen, true) {
                    return Err(CpfError::Duplicate { line: n, key: "SCOPE".into() });
                }
                raw.scope = v.to_string();
            }
            Some((key, v)) => {
                let pos = raw.sections.iter().position(|s| s.key == key);
                let section = match pos {
                    Some(p) => &mut raw.sections[p],
                    None => {
                        raw.sections.push(Section { key, line: n, rows: Vec::new() });
                        raw.sections.last_mut().expect("just pushed")
                    }
                };
                if !v.is_empty() {
                    section.rows.push((n, v));
                }
            }
            None => {
                // Prose after the block, separated by a blank line, is not part of it.
                let current = raw.sections.last();
                if after_blank && current.is_none_or(|s| s.key == "NOTES" || !t.contains('|')) {
                    break;
                }
                match raw.sections.last_mut() {
                    Some(s) => s.rows.push((n, t)),
                    None => {
                        return Err(CpfError::RowOutsideSection { line: n, text: t.to_string(), expected: sections });
                    }
                }
            }
        }
    }
    Ok(raw)
}

fn verdict(raw: &Raw<'_>) -> Result<(Verdict, String), CpfError> {
    let (line, value) = raw.verdict;
    let end = value.find(|c: char| c.is_whitespace() || c == '(').unwrap_or(value.len());
    let word = &value[..end];
    let v = Verdict::from_word(word).ok_or_else(|| CpfError::UnknownVerdict { line, value: value.to_string() })?;
    Ok((v, value[end..].trim().to_string()))
}

/// The `n` fields of a row; the last takes the rest of the line.
fn fields<'a>(
    section: &str,
    (line, text): (usize, &'a str),
    n: usize,
    expected: &'static str,
) -> Result<Vec<&'a str>, CpfError> {
    // A bullet is only dropped where the first field is a code or a name
    // (severity, agents, action), which never starts with one.
    let free_first = section == "SPEC_FEEDBACK";
    let bullet = if free_first { None } else { text.strip_prefix("- ").or_else(|| text.strip_prefix("* ")) };
    let body = bullet.unwrap_or(text);
    let parts: Vec<&str> = body.splitn(n, '|').map(str::trim).collect();
    if parts.len() < n {
        return Err(CpfError::BadRow { line, section: section.to_string(), text: text.to_string(), expected });
    }
    Ok(parts)
}

fn severity(line: usize, s: &str) -> Result<Severity, CpfError> {
    Severity::from_code(s).ok_or_else(|| CpfError::UnknownSeverity { line, value: s.to_string() })
}

fn agents(s: &str) -> Vec<String> {
    s.split('+').map(str::trim).filter(|a| !a.is_empty()).map(str::to_string).collect()
}

fn notes(section: &Section<'_>) -> Vec<String> {
    section.rows.iter().map(|(_, t)| t.to_string()).collect()
}

pub(super) fn inspector(text: &str) -> Result<InspectorReport, CpfError> {
    let raw = split(text, INSPECTOR_SECTIONS)?;
    let (verdict, qualifier) = verdict(&raw)?;
    let mut report =
        InspectorReport { verdict, qualifier, scope: raw.scope.clone(), issues: Vec::new(), notes: Vec::new() };
    for s in &raw.sections {
        match s.key {
            "ISSUES" => {
                for &row in &s.rows {
                    let f = fields("ISSUES", row, 4, "sev|category|location|description")?;
                    report.issues.push(Issue {
                        severity: severity(row.0, f[0])?,
                        category: f[1].into(),
                        location: f[2].into(),
                        description: f[3].into(),
                    });
                }
            }
            "NOTES" => report.notes.extend(notes(s)),
            key => {
                return Err(CpfError::WrongSection {
                    line: s.line,
                    key: key.into(),
                    kind: "an Inspector file",
                    expected: INSPECTOR_SECTIONS,
                });
            }
        }
    }
    Ok(report)
}

pub(super) fn audit(text: &str) -> Result<AuditVerdict, CpfError> {
    let raw = split(text, AUDIT_SECTIONS)?;
    let (verdict, qualifier) = verdict(&raw)?;
    let mut v = AuditVerdict {
        verdict,
        qualifier,
        scope: raw.scope.clone(),
        verified: Vec::new(),
        removed: Vec::new(),
        resolved: Vec::new(),
        spec_feedback: Vec::new(),
        steering: Vec::new(),
        notes: Vec::new(),
    };
    for s in &raw.sections {
        if !matches!(s.key, "VERIFIED" | "REMOVED" | "RESOLVED" | "SPEC_FEEDBACK" | "STEERING" | "NOTES") {
            return Err(CpfError::WrongSection {
                line: s.line,
                key: s.key.into(),
                kind: "verdict.cpf",
                expected: AUDIT_SECTIONS,
            });
        }
        for &row in &s.rows {
            match s.key {
                "VERIFIED" => {
                    let f = fields(s.key, row, 5, "agents|sev|category|location|description")?;
                    v.verified.push(Finding {
                        agents: agents(f[0]),
                        severity: severity(row.0, f[1])?,
                        category: f[2].into(),
                        location: f[3].into(),
                        description: f[4].into(),
                    });
                }
                "REMOVED" => {
                    let f = fields(s.key, row, 3, "agent|reason|original issue")?;
                    v.removed.push(Removed { agent: f[0].into(), reason: f[1].into(), original: f[2].into() });
                }
                "RESOLVED" => {
                    let f = fields(s.key, row, 3, "agents|resolution|conflicting findings")?;
                    v.resolved.push(Resolved {
                        agents: agents(f[0]),
                        resolution: f[1].into(),
                        conflicting: f[2].into(),
                    });
                }
                "SPEC_FEEDBACK" => {
                    let f = fields(s.key, row, 3, "phase|spec|description")?;
                    v.spec_feedback.push(SpecFeedback {
                        phase: f[0].into(),
                        spec: f[1].into(),
                        description: f[2].into(),
                    });
                }
                "STEERING" => {
                    let f = fields(s.key, row, 3, "CODIFY|PROPOSE followed by |file|text")?;
                    let action = match f[0].to_ascii_uppercase().as_str() {
                        "CODIFY" => SteeringAction::Codify,
                        "PROPOSE" => SteeringAction::Propose,
                        _ => return Err(CpfError::UnknownSteering { line: row.0, value: f[0].into() }),
                    };
                    v.steering.push(Steering { action, file: f[1].into(), text: f[2].into() });
                }
                _ => v.notes.push(row.1.to_string()),
            }
        }
    }
    Ok(v)
}
