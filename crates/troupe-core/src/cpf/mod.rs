//! CPF, the Compact Pipe-delimited Format of review findings (seed 000, Spec 7
//! and 11): what Inspectors send the Auditor, and the Auditor's `verdict.cpf`.
//!
//! ```text
//! VERDICT:CONDITIONAL
//! SCOPE:login
//! ISSUES:
//! H|error-handling|src/auth.rs:42|token parse error is ignored
//! L|naming|src/auth.rs|`tok` should be `token`
//! NOTES:
//! tests pass
//! ```
//!
//! Metadata lines are `KEY:VALUE`; a section header is `KEY:` followed by one
//! row per line; records are `sev|category|location|description` with severity
//! `C`, `H`, `M` or `L`; agent lists are joined by `+`; empty sections are
//! omitted. The last field of a row takes the rest of the line, so it may
//! contain `|`. The Auditor's file has `VERIFIED:`
//! (`agents|sev|category|location|description`), `REMOVED:`
//! (`agent|reason|original issue`), `RESOLVED:` (`agents|resolution|conflicting
//! findings`), `SPEC_FEEDBACK:` (`phase|spec|description`), `STEERING:`
//! (`CODIFY|PROPOSE` `|file|text`) and `NOTES:` (free lines).
//!
//! Parsing is tolerant where that is safe — prose (or a draft) before the last `VERDICT:` line,
//! code fences around the block, blank lines, `KEY: VALUE` with a space,
//! severities and verdicts in any case, prose after a blank line at the end —
//! and strict where it is not: a row it cannot read is an error with its line
//! number. Writing ([`fmt::Display`]) gives the canonical form, which parses
//! back to the same document.
//!
//! # Usage
//!
//! ```
//! use troupe_core::cpf::{InspectorReport, Verdict, merge, conservative_verdict};
//!
//! let a: InspectorReport = "VERDICT:NO-GO\nSCOPE:login\nISSUES:\nC|security|src/a.rs:3|password logged\n".parse().unwrap();
//! let b: InspectorReport = "Here are my findings:\n```\nVERDICT: GO\nSCOPE: login\nISSUES:\nm|security|src/a.rs:3|secret in log\n```".parse().unwrap();
//! let merged = merge(&[("inspector-security", &a), ("inspector-quality", &b)]);
//! assert_eq!(merged[0].to_string(), "inspector-security+inspector-quality|C|security|src/a.rs:3|password logged");
//! assert_eq!(conservative_verdict(&merged), Verdict::NoGo);
//! assert_eq!(a.to_string().parse::<InspectorReport>().unwrap(), a);
//! ```

use std::fmt;

use serde::{Deserialize, Serialize};

mod merge;
mod parse;
mod write;

pub use merge::{
    AUDITOR_UNAVAILABLE_NOTE, SeverityCounts, conservative_verdict, lead_derived_verdict, merge, severity_counts,
};
pub use parse::CpfError;

/// How bad a finding is. Ordered: `Low < Medium < High < Critical`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Severity {
    /// `L`
    Low,
    /// `M`
    Medium,
    /// `H`
    High,
    /// `C`
    Critical,
}

/// The outcome of a review.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Verdict {
    /// `GO`: proceed.
    #[serde(rename = "GO")]
    Go,
    /// `CONDITIONAL`: proceed, tracking the remaining issues.
    #[serde(rename = "CONDITIONAL")]
    Conditional,
    /// `NO-GO`: fix and review again.
    #[serde(rename = "NO-GO")]
    NoGo,
    /// `SPEC-UPDATE-NEEDED`: the spec itself is wrong; redo from design.
    #[serde(rename = "SPEC-UPDATE-NEEDED")]
    SpecUpdateNeeded,
}

/// One finding of an Inspector: `sev|category|location|description`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Issue {
    /// How bad it is.
    pub severity: Severity,
    /// What kind of problem (`error-handling`, `naming`, ...).
    pub category: String,
    /// Where (`src/auth.rs:42`).
    pub location: String,
    /// What is wrong.
    pub description: String,
}

/// An Inspector's file, `reviews/active/{inspector}.cpf`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InspectorReport {
    /// The Inspector's verdict.
    pub verdict: Verdict,
    /// Words after the verdict on its line (`partial coverage`), or empty.
    pub qualifier: String,
    /// What was reviewed: a feature, `cross-check`, `wave-1..N`.
    pub scope: String,
    /// `ISSUES:` rows.
    pub issues: Vec<Issue>,
    /// `NOTES:` lines.
    pub notes: Vec<String>,
}

/// A verified finding: `agents|sev|category|location|description`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// The Inspectors that reported it (`+`-joined in the file).
    pub agents: Vec<String>,
    /// How bad it is.
    pub severity: Severity,
    /// What kind of problem.
    pub category: String,
    /// Where.
    pub location: String,
    /// What is wrong.
    pub description: String,
}

/// A finding the Auditor dropped: `agent|reason|original issue`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Removed {
    /// The Inspector that reported it.
    pub agent: String,
    /// Why it was dropped (`false-positive`, ...).
    pub reason: String,
    /// The original row, as the Inspector wrote it.
    pub original: String,
}

/// A conflict between Inspectors the Auditor settled: `agents|resolution|conflicting findings`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resolved {
    /// The Inspectors in conflict.
    pub agents: Vec<String>,
    /// How it was settled.
    pub resolution: String,
    /// The findings that conflicted.
    pub conflicting: String,
}

/// A defect in the spec itself: `phase|spec|description`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpecFeedback {
    /// The phase to redo (`design`, `specifications`).
    pub phase: String,
    /// Which spec or section.
    pub spec: String,
    /// What is wrong.
    pub description: String,
}

/// Whether a steering decision is applied or proposed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SteeringAction {
    /// `CODIFY`: the Lead applies it to the steering file.
    #[serde(rename = "CODIFY")]
    Codify,
    /// `PROPOSE`: the Lead asks the user.
    #[serde(rename = "PROPOSE")]
    Propose,
}

/// A steering decision: `CODIFY|PROPOSE` `|file|text`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Steering {
    /// Apply or ask.
    pub action: SteeringAction,
    /// The steering file (`tech.md`).
    pub file: String,
    /// The decision.
    pub text: String,
}

/// The Auditor's `verdict.cpf`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditVerdict {
    /// The final verdict.
    pub verdict: Verdict,
    /// Words after the verdict on its line (`partial coverage`), or empty.
    pub qualifier: String,
    /// What was reviewed.
    pub scope: String,
    /// `VERIFIED:` rows.
    pub verified: Vec<Finding>,
    /// `REMOVED:` rows.
    pub removed: Vec<Removed>,
    /// `RESOLVED:` rows.
    pub resolved: Vec<Resolved>,
    /// `SPEC_FEEDBACK:` rows.
    pub spec_feedback: Vec<SpecFeedback>,
    /// `STEERING:` rows.
    pub steering: Vec<Steering>,
    /// `NOTES:` lines.
    pub notes: Vec<String>,
}

impl Severity {
    /// The one-letter code used in CPF.
    pub fn code(self) -> char {
        match self {
            Severity::Critical => 'C',
            Severity::High => 'H',
            Severity::Medium => 'M',
            Severity::Low => 'L',
        }
    }

    /// Read `C`/`H`/`M`/`L` or the full word, in any case.
    pub fn from_code(s: &str) -> Option<Severity> {
        match s.trim().to_ascii_lowercase().as_str() {
            "c" | "critical" => Some(Severity::Critical),
            "h" | "high" => Some(Severity::High),
            "m" | "medium" => Some(Severity::Medium),
            "l" | "low" => Some(Severity::Low),
            _ => None,
        }
    }
}

impl Verdict {
    /// The word used in CPF.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Go => "GO",
            Verdict::Conditional => "CONDITIONAL",
            Verdict::NoGo => "NO-GO",
            Verdict::SpecUpdateNeeded => "SPEC-UPDATE-NEEDED",
        }
    }

    /// Read a verdict in any case, with `-` or `_`.
    pub fn from_word(s: &str) -> Option<Verdict> {
        match s.trim().to_ascii_uppercase().replace('_', "-").as_str() {
            "GO" => Some(Verdict::Go),
            "CONDITIONAL" => Some(Verdict::Conditional),
            "NO-GO" | "NOGO" => Some(Verdict::NoGo),
            "SPEC-UPDATE-NEEDED" => Some(Verdict::SpecUpdateNeeded),
            _ => None,
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.code())
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl SteeringAction {
    /// The word used in CPF.
    pub fn as_str(self) -> &'static str {
        match self {
            SteeringAction::Codify => "CODIFY",
            SteeringAction::Propose => "PROPOSE",
        }
    }
}

impl std::str::FromStr for InspectorReport {
    type Err = CpfError;
    fn from_str(text: &str) -> Result<Self, CpfError> {
        parse::inspector(text)
    }
}

impl std::str::FromStr for AuditVerdict {
    type Err = CpfError;
    fn from_str(text: &str) -> Result<Self, CpfError> {
        parse::audit(text)
    }
}

#[cfg(test)]
mod tests;
