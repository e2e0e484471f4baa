use proptest::prelude::*;

use super::*;

/// Parse as an Inspector file and print canonically, or `error: ...`.
#[track_caller]
fn check(input: &str, expected: &str) {
    let got = match input.parse::<InspectorReport>() {
        Ok(r) => r.to_string(),
        Err(e) => format!("error: {e}"),
    };
    assert_eq!(got.trim_end(), expected.trim(), "\n--- input ---\n{input}");
}

/// The same for `verdict.cpf`.
#[track_caller]
fn check_audit(input: &str, expected: &str) {
    let got = match input.parse::<AuditVerdict>() {
        Ok(r) => r.to_string(),
        Err(e) => format!("error: {e}"),
    };
    assert_eq!(got.trim_end(), expected.trim(), "\n--- input ---\n{input}");
}

#[test]
fn inspector_files() {
    check("VERDICT:GO\nSCOPE:login\n", "VERDICT:GO\nSCOPE:login");
    check("VERDICT:GO\n", "VERDICT:GO");
    check(
        "VERDICT:CONDITIONAL\nSCOPE:login\nISSUES:\nH|naming|src/a.rs:3|bad | name\nNOTES:\nok\n",
        "VERDICT:CONDITIONAL\nSCOPE:login\nISSUES:\nH|naming|src/a.rs:3|bad | name\nNOTES:\nok",
    );
    // Empty sections are omitted.
    check("VERDICT:GO\nSCOPE:x\nISSUES:\nNOTES:\n", "VERDICT:GO\nSCOPE:x");
    // Inline NOTES value, the seed's `NOTES: AUDITOR_UNAVAILABLE|lead-derived verdict`.
    check(
        "VERDICT:NO-GO\nNOTES: PARTIAL:inspector-test|timeout\n",
        "VERDICT:NO-GO\nNOTES:\nPARTIAL:inspector-test|timeout",
    );
    check("VERDICT:GO (partial coverage)\n", "VERDICT:GO (partial coverage)");
}

#[test]
fn tolerated_noise() {
    let canonical = "VERDICT:NO-GO\nSCOPE:login\nISSUES:\nC|security|src/a.rs|leak";
    check("VERDICT: NO-GO\nSCOPE: login\n\nISSUES:\n\nC|security|src/a.rs|leak\n", canonical);
    check(
        "Here is my review.\n\n```cpf\nVERDICT:NO-GO\nSCOPE:login\nISSUES:\nC|security|src/a.rs|leak\n```\nDone!\n",
        canonical,
    );
    check("**VERDICT:** no_go\n**SCOPE:** login\nISSUES:\n- critical | security | src/a.rs | leak\n", canonical);
    check(
        "VERDICT:NO-GO\nSCOPE:login\nISSUES:\nC|security|src/a.rs|leak\n\nLet me know if you need more.\n",
        canonical,
    );
    check("  VERDICT:NO-GO\r\n  SCOPE:login\r\n  ISSUES:\r\n  C|security|src/a.rs|leak\r\n", canonical);
}

#[test]
fn refused_input() {
    check(
        "All good!",
        "error: no VERDICT: line found; a CPF block starts with VERDICT:GO, CONDITIONAL, NO-GO or SPEC-UPDATE-NEEDED",
    );
    check(
        "x\nVERDICT:MAYBE\n",
        "error: line 2: unknown verdict 'MAYBE'; expected GO, CONDITIONAL, NO-GO or SPEC-UPDATE-NEEDED",
    );
    check(
        "VERDICT:GO\nISSUES:\nH|naming|src/a.rs\n",
        "error: line 3: ISSUES row 'H|naming|src/a.rs' has too few fields; expected sev|category|location|description",
    );
    check("VERDICT:GO\nISSUES:\nX|naming|a|b\n", "error: line 3: unknown severity 'X'; expected C, H, M or L");
    check(
        "VERDICT:GO\nH|naming|a|b\n",
        "error: line 2: 'H|naming|a|b' is not under a section header such as ISSUES: and NOTES:",
    );
    check(
        "VERDICT:GO\nVERIFIED:\na|H|x|y|z\n",
        "error: line 2: VERIFIED: does not belong in an Inspector file; it has ISSUES: and NOTES:",
    );
    check("VERDICT:GO\nSCOPE:a\nSCOPE:b\n", "error: line 3: SCOPE: is given a second time");
    // The last VERDICT: line starts the block; a draft before it is ignored.
    check("VERDICT:GO\nISSUES:\nH|a|b|c\n\nVERDICT:NO-GO\nISSUES:\nC|a|b|c\n", "VERDICT:NO-GO\nISSUES:\nC|a|b|c");
    // Without a blank line, trailing prose is a row that cannot be read.
    check(
        "VERDICT:GO\nISSUES:\nH|a|b|c\nthat is all\n",
        "error: line 4: ISSUES row 'that is all' has too few fields; expected sev|category|location|description",
    );
}

const AUDIT: &str = "\
VERDICT:SPEC-UPDATE-NEEDED
SCOPE:login
VERIFIED:
inspector-a+inspector-b|H|error-handling|src/a.rs:3|ignored error
REMOVED:
inspector-c|false-positive|L|naming|src/b.rs|x is fine
RESOLVED:
inspector-a+inspector-c|kept a's reading|a says H, c says L
SPEC_FEEDBACK:
design|login/design.md|session expiry is undefined
STEERING:
CODIFY|tech.md|errors are thiserror enums
PROPOSE|structure.md|one file per verb
NOTES:
PARTIAL:inspector-d|timeout
";

#[test]
fn audit_files() {
    check_audit(AUDIT, AUDIT);
    check_audit("VERDICT:GO\n", "VERDICT:GO");
    check_audit("VERDICT:GO\nSTEERING:\ncodify|tech.md|x\n", "VERDICT:GO\nSTEERING:\nCODIFY|tech.md|x");
    check_audit(
        "VERDICT:GO\nSTEERING:\nIGNORE|tech.md|x\n",
        "error: line 3: unknown STEERING action 'IGNORE'; expected CODIFY or PROPOSE",
    );
    check_audit(
        "VERDICT:GO\nISSUES:\n",
        "error: line 2: ISSUES: does not belong in verdict.cpf; it has VERIFIED:, REMOVED:, RESOLVED:, SPEC_FEEDBACK:, STEERING: and NOTES:",
    );
    check_audit(
        "VERDICT:GO\nVERIFIED:\na|H|x|y\n",
        "error: line 3: VERIFIED row 'a|H|x|y' has too few fields; expected agents|sev|category|location|description",
    );
    check_audit("VERDICT:GO\nVERIFIED:\na|Q|x|y|z\n", "error: line 3: unknown severity 'Q'; expected C, H, M or L");
}

#[test]
fn writing_sanitises() {
    let r = InspectorReport {
        verdict: Verdict::Go,
        qualifier: String::new(),
        scope: " login ".into(),
        issues: vec![Issue {
            severity: Severity::Low,
            category: "a|b".into(),
            location: "x\ny".into(),
            description: "keeps | pipes".into(),
        }],
        notes: vec!["".into(), "two\nlines".into()],
    };
    assert_eq!(r.to_string(), "VERDICT:GO\nSCOPE:login\nISSUES:\nL|a/b|x y|keeps | pipes\nNOTES:\ntwo lines\n");
}

fn report(issues: &[(Severity, &str, &str, &str)]) -> InspectorReport {
    InspectorReport {
        verdict: Verdict::Go,
        qualifier: String::new(),
        scope: "f".into(),
        issues: issues
            .iter()
            .map(|(s, c, l, d)| Issue {
                severity: *s,
                category: c.to_string(),
                location: l.to_string(),
                description: d.to_string(),
            })
            .collect(),
        notes: Vec::new(),
    }
}

/// `(severity, category, location, description)`
type Row<'a> = (Severity, &'a str, &'a str, &'a str);

#[track_caller]
fn check_merge(reports: &[(&str, &[Row<'_>])], expected: &str) {
    let owned: Vec<(&str, InspectorReport)> = reports.iter().map(|(a, i)| (*a, report(i))).collect();
    let refs: Vec<(&str, &InspectorReport)> = owned.iter().map(|(a, r)| (*a, r)).collect();
    let merged = merge(&refs);
    let got: Vec<String> = merged.iter().map(ToString::to_string).collect();
    let verdict = conservative_verdict(&merged);
    let c = severity_counts(&merged);
    assert_eq!(c.critical + c.high + c.medium + c.low, merged.len());
    assert_eq!(c.critical > 0, verdict == Verdict::NoGo);
    assert_eq!(format!("{verdict}\n{}", got.join("\n")).trim(), expected.trim());
}

#[test]
fn merging() {
    use Severity::*;
    check_merge(&[], "GO");
    check_merge(&[("a", &[(Low, "naming", "x.rs", "n")])], "GO\na|L|naming|x.rs|n");
    check_merge(
        &[("a", &[(Medium, "naming", "x.rs", "m")]), ("b", &[(High, "Naming", "x.rs", "h")])],
        "CONDITIONAL\na+b|H|naming|x.rs|h",
    );
    check_merge(
        &[("a", &[(High, "naming", "x.rs", "h")]), ("b", &[(Low, "naming", "x.rs", "l")])],
        "CONDITIONAL\na+b|H|naming|x.rs|h",
    );
    check_merge(
        &[("a", &[(Low, "naming", "x.rs", "1")]), ("b", &[(Low, "naming", "y.rs", "2")])],
        "GO\na|L|naming|x.rs|1\nb|L|naming|y.rs|2",
    );
    check_merge(
        &[("a", &[(Low, "naming", "x.rs", "1"), (Low, "style", "x.rs", "2")])],
        "GO\na|L|naming|x.rs|1\na|L|style|x.rs|2",
    );
    check_merge(
        &[("a", &[(Low, "n", "x", "1")]), ("b", &[(Critical, "sec", "y", "2")]), ("a", &[(Medium, "n", "x", "3")])],
        "NO-GO\nb|C|sec|y|2\na|M|n|x|3",
    );
}

#[test]
fn lead_fallback() {
    let a = report(&[(Severity::High, "sec", "x", "h")]);
    let v = lead_derived_verdict("login", &[("inspector-a", &a)]);
    assert_eq!(
        v.to_string(),
        "VERDICT:CONDITIONAL\nSCOPE:login\nVERIFIED:\ninspector-a|H|sec|x|h\nNOTES:\nAUDITOR_UNAVAILABLE|lead-derived verdict\n"
    );
}

// --- round trips ---

/// Text as the writer leaves it: one trimmed line, non-empty.
fn text() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 ._:/()`'\"#|+*-]{0,20}[a-zA-Z0-9._)]".prop_map(|s| s.trim().to_string())
}

/// A field before the last: no `|`.
fn field() -> impl Strategy<Value = String> {
    text().prop_map(|s| s.replace('|', "/").trim().to_string())
}

fn agent_list() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec("[a-z][a-z0-9-]{0,12}", 1..4)
}

fn severity() -> impl Strategy<Value = Severity> {
    prop_oneof![Just(Severity::Critical), Just(Severity::High), Just(Severity::Medium), Just(Severity::Low)]
}

fn verdict() -> impl Strategy<Value = Verdict> {
    prop_oneof![Just(Verdict::Go), Just(Verdict::Conditional), Just(Verdict::NoGo), Just(Verdict::SpecUpdateNeeded)]
}

/// A note line: anything that is not itself a CPF key line or a code fence.
fn note() -> impl Strategy<Value = String> {
    text().prop_filter("not a key line or fence", |s| {
        if s.starts_with("```") {
            return false;
        }
        let head = s.split(':').next().unwrap_or_default().trim_matches(['*', '`', '#', ' ']);
        !s.contains(':')
            || !["VERDICT", "SCOPE", "ISSUES", "VERIFIED", "REMOVED", "RESOLVED", "SPEC_FEEDBACK", "STEERING", "NOTES"]
                .contains(&head)
    })
}

fn qualifier() -> impl Strategy<Value = String> {
    prop_oneof![Just(String::new()), Just("(partial coverage)".to_string()), "[a-z][a-z ]{0,10}[a-z]"]
}

fn scope() -> impl Strategy<Value = String> {
    prop_oneof![Just(String::new()), text()]
}

prop_compose! {
    fn issue()(severity in severity(), category in field(), location in field(), description in text()) -> Issue {
        Issue { severity, category, location, description }
    }
}

prop_compose! {
    fn inspector_report()(
        verdict in verdict(), qualifier in qualifier(), scope in scope(),
        issues in prop::collection::vec(issue(), 0..5), notes in prop::collection::vec(note(), 0..3),
    ) -> InspectorReport {
        InspectorReport { verdict, qualifier, scope, issues, notes }
    }
}

prop_compose! {
    fn audit_verdict()(
        verdict in verdict(), qualifier in qualifier(), scope in scope(),
        verified in prop::collection::vec((agent_list(), severity(), field(), field(), text()), 0..4),
        removed in prop::collection::vec(("[a-z][a-z0-9-]{0,12}", field(), text()), 0..3),
        resolved in prop::collection::vec((agent_list(), field(), text()), 0..3),
        spec_feedback in prop::collection::vec((field(), field(), text()), 0..3),
        steering in prop::collection::vec((prop::bool::ANY, field(), text()), 0..3),
        notes in prop::collection::vec(note(), 0..3),
    ) -> AuditVerdict {
        AuditVerdict {
            verdict, qualifier, scope,
            verified: verified.into_iter().map(|(agents, severity, category, location, description)| Finding { agents, severity, category, location, description }).collect(),
            removed: removed.into_iter().map(|(agent, reason, original)| Removed { agent, reason, original }).collect(),
            resolved: resolved.into_iter().map(|(agents, resolution, conflicting)| Resolved { agents, resolution, conflicting }).collect(),
            spec_feedback: spec_feedback.into_iter().map(|(phase, spec, description)| SpecFeedback { phase, spec, description }).collect(),
            steering: steering.into_iter().map(|(codify, file, text)| Steering { action: if codify { SteeringAction::Codify } else { SteeringAction::Propose }, file, text }).collect(),
            notes,
        }
    }
}

proptest! {
    #[test]
    fn inspector_round_trip(r in inspector_report()) {
        let text = r.to_string();
        prop_assert_eq!(text.parse::<InspectorReport>(), Ok(r), "{}", text);
    }

    #[test]
    fn audit_round_trip(v in audit_verdict()) {
        let text = v.to_string();
        prop_assert_eq!(text.parse::<AuditVerdict>(), Ok(v), "{}", text);
    }

    #[test]
    fn inspector_round_trip_inside_prose(r in inspector_report()) {
        let text = format!("Here is the review:\n\n```\n{r}```\n\nThanks.");
        prop_assert_eq!(text.parse::<InspectorReport>(), Ok(r));
    }
}
