//! Merging Inspectors' findings and the Lead's fallback verdict (seed 000,
//! Spec 11: when the Auditor cannot be recovered, the Lead derives a
//! conservative verdict from the Inspectors' results).

use super::{AuditVerdict, Finding, InspectorReport, Severity, Verdict};

/// The note the Lead adds to a verdict it derived itself.
pub const AUDITOR_UNAVAILABLE_NOTE: &str = "AUDITOR_UNAVAILABLE|lead-derived verdict";

/// Merge the issues of several Inspectors, given as `(inspector name, report)`.
///
/// Issues with the same location and category (compared trimmed, the
/// category without regard to case) count once: their agents are joined in
/// the order given, the highest severity is kept, and the description of the
/// first issue with that severity. Findings come out most severe first, then
/// in the order they were first reported.
pub fn merge(reports: &[(&str, &InspectorReport)]) -> Vec<Finding> {
    let mut out: Vec<Finding> = Vec::new();
    for (agent, report) in reports {
        for issue in &report.issues {
            let same = |f: &&mut Finding| {
                f.location.trim() == issue.location.trim()
                    && f.category.trim().eq_ignore_ascii_case(issue.category.trim())
            };
            match out.iter_mut().find(same) {
                Some(f) => {
                    if !f.agents.iter().any(|a| a == agent) {
                        f.agents.push(agent.to_string());
                    }
                    if issue.severity > f.severity {
                        f.severity = issue.severity;
                        f.description = issue.description.clone();
                    }
                }
                None => out.push(Finding {
                    agents: vec![agent.to_string()],
                    severity: issue.severity,
                    category: issue.category.clone(),
                    location: issue.location.clone(),
                    description: issue.description.clone(),
                }),
            }
        }
    }
    out.sort_by_key(|f| std::cmp::Reverse(f.severity));
    out
}

/// How many findings of each severity.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct SeverityCounts {
    /// `C`
    pub critical: usize,
    /// `H`
    pub high: usize,
    /// `M`
    pub medium: usize,
    /// `L`
    pub low: usize,
}

/// Count findings by severity (for the Lead's summary of a verdict).
pub fn severity_counts(findings: &[Finding]) -> SeverityCounts {
    let mut c = SeverityCounts::default();
    for f in findings {
        match f.severity {
            Severity::Critical => c.critical += 1,
            Severity::High => c.high += 1,
            Severity::Medium => c.medium += 1,
            Severity::Low => c.low += 1,
        }
    }
    c
}

/// Any Critical → `NO-GO`, any High → `CONDITIONAL`, otherwise `GO`.
pub fn conservative_verdict(findings: &[Finding]) -> Verdict {
    match findings.iter().map(|f| f.severity).max() {
        Some(Severity::Critical) => Verdict::NoGo,
        Some(Severity::High) => Verdict::Conditional,
        _ => Verdict::Go,
    }
}

/// The `verdict.cpf` the Lead writes when no Auditor produced one: the merged
/// findings as VERIFIED, the conservative verdict, and the
/// `AUDITOR_UNAVAILABLE|lead-derived verdict` note.
pub fn lead_derived_verdict(scope: &str, reports: &[(&str, &InspectorReport)]) -> AuditVerdict {
    let verified = merge(reports);
    AuditVerdict {
        verdict: conservative_verdict(&verified),
        qualifier: String::new(),
        scope: scope.to_string(),
        verified,
        removed: Vec::new(),
        resolved: Vec::new(),
        spec_feedback: Vec::new(),
        steering: Vec::new(),
        notes: vec![AUDITOR_UNAVAILABLE_NOTE.to_string()],
    }
}
