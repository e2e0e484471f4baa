//! What the Lead does with a verdict (seed 000 Spec 1.3 and the auto-fix loop):
//!
//! | verdict | action |
//! |---|---|
//! | GO | continue |
//! | CONDITIONAL | continue; the verified findings go to the handover buffer |
//! | NO-GO | auto-fix: count `orchestration.retry_count` (at most 5) and fix, then review again; past the limit, escalate with the open findings |
//! | SPEC-UPDATE-NEEDED | count `orchestration.spec_update_count` (at most 2) and go back through design revision; past the limit, escalate |
//!
//! Pure: it changes the counters of the `Spec` it is given (through
//! [`Spec::count_retry`] and [`Spec::count_spec_update`], which record changelog
//! entries) and says what to do next.

use jiff::Timestamp;
use troupe_core::cpf::{AuditVerdict, Finding, Verdict};
use troupe_core::spec::{MAX_RETRY_COUNT, MAX_SPEC_UPDATE_COUNT, Spec};

use crate::review::perspectives::ReviewKind;

/// The Lead's next step after a verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VerdictAction {
    /// GO: the pipeline goes on.
    Continue,
    /// CONDITIONAL: the pipeline goes on; these lines go to the handover buffer.
    ContinueWithFindings(Vec<String>),
    /// NO-GO: fix round `round` (1-based, counted in `retry_count`), then review again.
    AutoFix {
        /// The auto-fix round this is.
        round: u32,
    },
    /// SPEC-UPDATE-NEEDED: spec update `round` (counted in `spec_update_count`);
    /// back through design revision.
    SpecUpdate {
        /// The spec update this is.
        round: u32,
    },
    /// Stop and hand it to the user.
    Escalate {
        /// What happened.
        reason: String,
        /// What to do about it.
        hint: String,
    },
}

/// One finding as a line for buffer.md or an escalation.
pub fn finding_line(f: &Finding) -> String {
    format!("{}|{}|{}|{}", f.severity, f.category, f.location, f.description)
}

fn open_findings(v: &AuditVerdict) -> String {
    if v.verified.is_empty() {
        return "no verified findings were listed".to_string();
    }
    let mut lines: Vec<String> = v.verified.iter().take(10).map(finding_line).collect();
    if v.verified.len() > 10 {
        lines.push(format!("... and {} more", v.verified.len() - 10));
    }
    format!("open findings: {}", lines.join("; "))
}

/// Decide what follows `verdict` of a `kind` review archived as `B{seq}`.
/// `auto_fix: false` (`--no-fix`) turns NO-GO and SPEC-UPDATE-NEEDED into an
/// escalation without touching the counters.
pub fn decide(
    spec: &mut Spec,
    kind: ReviewKind,
    seq: u32,
    verdict: &AuditVerdict,
    auto_fix: bool,
    now: Timestamp,
) -> VerdictAction {
    let f = spec.feature_name.clone();
    let again = format!("fix them, then run `troupe review {kind} {f}`");
    match verdict.verdict {
        Verdict::Go => VerdictAction::Continue,
        Verdict::Conditional => VerdictAction::ContinueWithFindings(
            verdict.verified.iter().map(|x| format!("review {kind} B{seq} CONDITIONAL: {}", finding_line(x))).collect(),
        ),
        Verdict::NoGo if !auto_fix => VerdictAction::Escalate {
            reason: format!("the {kind} review of {f} (B{seq}) is NO-GO; {}", open_findings(verdict)),
            hint: again,
        },
        Verdict::NoGo => {
            if spec.count_retry(now, &format!("auto-fix after {kind} review B{seq} (NO-GO)")) {
                VerdictAction::AutoFix { round: spec.orchestration.retry_count }
            } else {
                VerdictAction::Escalate {
                    reason: format!(
                        "the {kind} review of {f} (B{seq}) is still NO-GO after {MAX_RETRY_COUNT} auto-fix rounds; {}",
                        open_findings(verdict)
                    ),
                    hint: format!(
                        "{again}; reset orchestration.retry_count with `troupe spec` if you want more rounds"
                    ),
                }
            }
        }
        Verdict::SpecUpdateNeeded if !auto_fix => VerdictAction::Escalate {
            reason: format!("the {kind} review of {f} (B{seq}) says the spec needs an update"),
            hint: format!("run `troupe revise {f} \"<change>\"`"),
        },
        Verdict::SpecUpdateNeeded => {
            if spec.count_spec_update(now, &format!("spec update after {kind} review B{seq}")) {
                VerdictAction::SpecUpdate { round: spec.orchestration.spec_update_count }
            } else {
                VerdictAction::Escalate {
                    reason: format!(
                        "the {kind} review of {f} (B{seq}) asks for a spec update again after {MAX_SPEC_UPDATE_COUNT} updates; {}",
                        spec_feedback(verdict)
                    ),
                    hint: format!("settle the spec yourself, then run `troupe revise {f} \"<change>\"`"),
                }
            }
        }
    }
}

fn spec_feedback(v: &AuditVerdict) -> String {
    if v.spec_feedback.is_empty() {
        return "no SPEC_FEEDBACK was given".to_string();
    }
    let rows: Vec<String> =
        v.spec_feedback.iter().map(|s| format!("{}|{}|{}", s.phase, s.spec, s.description)).collect();
    format!("spec feedback: {}", rows.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t() -> Timestamp {
        "2026-01-01T00:00:00Z".parse().unwrap()
    }

    fn verdict(v: &str) -> AuditVerdict {
        format!("VERDICT:{v}\nSCOPE:login\nVERIFIED:\ni1|H|security|src/a.rs:3|token logged\n").parse().unwrap()
    }

    fn check(v: &str, auto_fix: bool, retry: u32, updates: u32) -> (VerdictAction, Spec) {
        let mut s = Spec::new("login", t());
        s.orchestration.retry_count = retry;
        s.orchestration.spec_update_count = updates;
        let a = decide(&mut s, ReviewKind::Impl, 3, &verdict(v), auto_fix, t());
        (a, s)
    }

    #[test]
    fn go_continues_and_conditional_buffers_its_findings() {
        assert_eq!(check("GO", true, 0, 0).0, VerdictAction::Continue);
        assert_eq!(
            check("CONDITIONAL", true, 0, 0).0,
            VerdictAction::ContinueWithFindings(vec![
                "review impl B3 CONDITIONAL: H|security|src/a.rs:3|token logged".into()
            ])
        );
    }

    #[test]
    fn no_go_counts_retries_up_to_five_then_escalates() {
        let (a, s) = check("NO-GO", true, 0, 0);
        assert_eq!(a, VerdictAction::AutoFix { round: 1 });
        assert_eq!(s.orchestration.retry_count, 1);
        assert_eq!(s.changelog.last().unwrap().action, "auto-fix");
        assert_eq!(check("NO-GO", true, 4, 0).0, VerdictAction::AutoFix { round: 5 });
        let (a, s) = check("NO-GO", true, 5, 0);
        let VerdictAction::Escalate { reason, .. } = a else { panic!("{a:?}") };
        assert!(reason.contains("after 5 auto-fix rounds"), "{reason}");
        assert!(reason.contains("H|security|src/a.rs:3|token logged"), "{reason}");
        assert_eq!(s.orchestration.retry_count, 5);
    }

    #[test]
    fn spec_update_counts_up_to_two_then_escalates() {
        assert_eq!(check("SPEC-UPDATE-NEEDED", true, 0, 0).0, VerdictAction::SpecUpdate { round: 1 });
        assert_eq!(check("SPEC-UPDATE-NEEDED", true, 0, 1).0, VerdictAction::SpecUpdate { round: 2 });
        assert!(matches!(check("SPEC-UPDATE-NEEDED", true, 0, 2).0, VerdictAction::Escalate { .. }));
    }

    #[test]
    fn without_auto_fix_nothing_is_counted() {
        let (a, s) = check("NO-GO", false, 0, 0);
        assert!(matches!(a, VerdictAction::Escalate { .. }));
        assert_eq!(s.orchestration.retry_count, 0);
        let (a, s) = check("SPEC-UPDATE-NEEDED", false, 0, 0);
        assert!(matches!(a, VerdictAction::Escalate { .. }));
        assert_eq!(s.orchestration.spec_update_count, 0);
    }
}
