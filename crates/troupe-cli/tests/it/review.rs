//! `troupe review` end to end with the built-in scripted engine as every
//! Inspector and Auditor (real child processes): a hanging Inspector (N-1/N),
//! crashing and garbage-printing Inspectors, an Auditor that never answers
//! (lead-derived verdict), a hung Auditor that answers the shutdown request
//! (approving or refusing) and is then nudged, and consensus.

use std::fs;

use predicates::prelude::*;

use crate::support::{TestProject, json};

const FINDINGS: &str = "VERDICT:CONDITIONAL\\nSCOPE:{feature}\\nISSUES:\\nH|naming|src/a.rs:1|unclear name\\n";

/// An Inspector that writes its findings file and ends with the same CPF.
fn inspector(key: &str) -> String {
    format!(
        "  {key}:\n    - - write: {{path: \".troupe/specs/{{feature}}/reviews/active/{{agent}}.cpf\", content: \"{FINDINGS}\"}}\n      - report: \"{FINDINGS}\"\n"
    )
}

/// An Auditor that waits `wait_ms` (staying active, as one polling its mailbox
/// would: a line every 100 ms, well within the tests' hang timeouts) before it
/// writes and reports `verdict`.
fn auditor(verdict: &str, wait_ms: u64) -> String {
    let cpf =
        format!("VERDICT:{verdict}\\nSCOPE:{{feature}}\\nVERIFIED:\\ninspector|H|naming|src/a.rs:1|unclear name\\n");
    let mut waits = String::new();
    for _ in 0..wait_ms / 100 {
        waits.push_str("      - say: \"waiting for findings\"\n      - sleep: 100\n");
    }
    format!(
        "  auditor:\n    - - say: \"merging\"\n{waits}      - write: {{path: \".troupe/specs/{{feature}}/reviews/active/verdict.cpf\", content: \"{cpf}\"}}\n      - report: \"{cpf}\"\n"
    )
}

/// The hang timeout of the tests with a hung teammate: below a second, so they
/// wait little, and far above a scripted teammate's start on a loaded machine.
const HANG_MS: u64 = 800;

/// A project with `login` in design-generated, hang timeout `hang_ms`, and `script`.
fn project(script: &str, hang_ms: u64) -> TestProject {
    let p = TestProject::new();
    p.troupe().args(["spec", "new", "login"]).assert().success();
    let spec = p.path(".troupe/specs/login/spec.yaml");
    let text = fs::read_to_string(&spec).unwrap().replace("phase: initialized", "phase: design-generated");
    fs::write(&spec, text).unwrap();
    fs::write(p.path(".troupe/specs/login/design.md"), "# Design\n").unwrap();
    let config = p.path(".troupe/config.toml");
    let mut c = fs::read_to_string(&config).unwrap_or_default();
    if c.contains("[team]") {
        c = c.replace("[team]", &format!("[team]\nhang_timeout_ms = {hang_ms}"));
    } else {
        c.push_str(&format!("\n[team]\nhang_timeout_ms = {hang_ms}\n"));
    }
    fs::write(&config, c).unwrap();
    fs::write(p.path(".troupe/scripted.yaml"), format!("agents:\n{script}")).unwrap();
    p
}

/// Set `[shutdown] timeout_ms`: how long a graceful shutdown waits before signals.
fn shutdown_timeout(p: &TestProject, ms: u64) {
    let config = p.path(".troupe/config.toml");
    let c = fs::read_to_string(&config).unwrap();
    assert!(c.contains("[shutdown]\n"), "{c}");
    fs::write(&config, c.replace("[shutdown]\n", &format!("[shutdown]\ntimeout_ms = {ms}\n"))).unwrap();
}

fn review(p: &TestProject, extra: &[&str]) -> std::process::Output {
    p.troupe()
        .args(["--json", "review", "design", "login", "--engine", "scripted", "--no-commit"])
        .args(extra)
        .output()
        .unwrap()
}

fn read(p: &TestProject, rel: &str) -> String {
    fs::read_to_string(p.path(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

#[test]
fn a_plain_review_archives_the_round_and_records_the_verdict() {
    let p = project(&format!("{}{}", inspector("inspector"), auditor("GO", 2000)), 30_000);
    let out = review(&p, &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(json(&out)["outcome"], "completed");
    let archived: Vec<String> = fs::read_dir(p.path(".troupe/specs/login/reviews/B1"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(archived.len(), 7, "six Inspector files and verdict.cpf: {archived:?}");
    assert!(archived.contains(&"verdict.cpf".to_string()));
    assert!(!p.path(".troupe/specs/login/reviews/active").exists());
    let md = read(&p, ".troupe/specs/login/verdicts.md");
    assert!(md.contains("## [B1] design | "), "{md}");
    assert!(md.contains(" | v1.0 | runs:1 | threshold:1/1\n- verdict: GO"), "{md}");

    // A second review is B2, and its teammates are new agents: ids never repeat
    // within a project, so no log, registry entry or mailbox of the first
    // review's teammates is taken for the second's (ids restarted at 1 before).
    let ids = |out: &std::process::Output| -> Vec<String> {
        json(out)["teammates"].as_array().unwrap().iter().map(|t| t["id"].as_str().unwrap().to_string()).collect()
    };
    let first = ids(&out);
    let out = review(&p, &[]);
    assert!(out.status.success());
    assert!(read(&p, ".troupe/specs/login/verdicts.md").contains("## [B2] design"));
    let second = ids(&out);
    assert_eq!((first.len(), second.len()), (7, 7));
    assert!(second.iter().all(|id| !first.contains(id)), "{first:?} {second:?}");
    let store = troupe_store::SqliteStore::open_project(&troupe_core::layout::Layout::new(p.root())).unwrap();
    assert_eq!(troupe_store::Registry::agents(&store).unwrap().len(), 14, "every teammate of both reviews is kept");
}

#[test]
fn a_hanging_inspector_is_retried_then_the_auditor_proceeds_with_5_of_6() {
    let script =
        format!("{}  inspector/testability:\n    - - hang\n{}", inspector("inspector"), auditor("CONDITIONAL", 5000));
    let p = project(&script, HANG_MS);
    // It ignores the shutdown request: stopped by force after 300 ms, then replaced.
    shutdown_timeout(&p, 300);
    let out = review(&p, &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report = json(&out);
    let testability: Vec<&serde_json::Value> = report["teammates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["id"].as_str().unwrap().starts_with("inspector-testability-"))
        .collect();
    assert_eq!(testability.len(), 2, "the perspective was retried once under a new name: {report}");
    let decisions = read(&p, ".troupe/handover/decisions.md");
    let first = testability[0]["id"].as_str().unwrap();
    // Retried once the five others had reported (they answer at once; it hangs).
    assert!(
        decisions.contains(&format!(
            "Inspector {first} showed no activity for the hang timeout and was shut down; 5/6 Inspectors reported; retrying its perspective once"
        )),
        "{decisions}"
    );
    assert!(decisions.contains(&format!("Inspector {first} unavailable after retry")), "{decisions}");
    let auditor = report["teammates"].as_array().unwrap().iter().find(|t| t["role"] == "Auditor").unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let inbox = p.troupe().args(["--json", "msg", "inbox", "--agent", &auditor]).output().unwrap();
    let inbox = String::from_utf8_lossy(&inbox.stdout).into_owned();
    assert!(inbox.contains("recovery_notice"), "{inbox}");
    assert!(
        inbox.contains(&format!("Inspector {first} unavailable after retry. Proceed with 5/6 results.")),
        "the Auditor's mailbox holds the notice: {inbox}"
    );
    let archived = fs::read_dir(p.path(".troupe/specs/login/reviews/B1")).unwrap().count();
    assert_eq!(archived, 6, "five Inspector files and the verdict");
    assert!(read(&p, ".troupe/specs/login/verdicts.md").contains("- verdict: CONDITIONAL"));
    let buffer = read(&p, ".troupe/handover/buffer.md");
    assert!(buffer.contains("review design B1 CONDITIONAL: H|naming|src/a.rs:1|unclear name"), "{buffer}");
}

#[test]
fn crashing_and_garbage_inspectors_are_retried_and_left_out() {
    let script = format!(
        "{}  inspector/rules:\n    - - fail: \"model overloaded\"\n  inspector/holistic:\n    - - report: \"Looks fine to me!\"\n{}",
        inspector("inspector"),
        auditor("GO", 3000)
    );
    let p = project(&script, 30_000);
    let out = review(&p, &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let decisions = read(&p, ".troupe/handover/decisions.md");
    assert_eq!(decisions.matches("unavailable after retry").count(), 2, "{decisions}");
    assert_eq!(fs::read_dir(p.path(".troupe/specs/login/reviews/B1")).unwrap().count(), 5);
}

#[test]
fn an_auditor_that_never_answers_gets_a_lead_derived_verdict() {
    let script = format!("{}  auditor:\n    - - hang\n", inspector("inspector"));
    let p = project(&script, HANG_MS);
    shutdown_timeout(&p, 300);
    let out = review(&p, &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report = json(&out);
    let auditors = report["teammates"].as_array().unwrap().iter().filter(|t| t["role"] == "Auditor").count();
    assert_eq!(auditors, 2, "the first (nudged) and the RECOVERY MODE one: {report}");
    // Hung: shut down (no answer, so forced after 300 ms), then its session resumed with
    // the nudge; hung again: replaced in RECOVERY MODE; hung too: the Lead's verdict.
    let decisions = read(&p, ".troupe/handover/decisions.md");
    let order = [
        "asking it to stop before anything replaces it",
        "was shut down; nudging it",
        "after the nudge; respawning in RECOVERY MODE",
    ];
    let at: Vec<usize> =
        order.iter().map(|o| decisions.find(o).unwrap_or_else(|| panic!("{o}: {decisions}"))).collect();
    assert!(at.windows(2).all(|w| w[0] <= w[1]), "{decisions}");
    let verdict = read(&p, ".troupe/specs/login/reviews/B1/verdict.cpf");
    assert!(verdict.starts_with("VERDICT:CONDITIONAL\n"), "High findings make CONDITIONAL: {verdict}");
    assert!(verdict.contains("NOTES:\nAUDITOR_UNAVAILABLE|lead-derived verdict"), "{verdict}");
    let md = read(&p, ".troupe/specs/login/verdicts.md");
    assert!(md.contains("- note: AUDITOR_UNAVAILABLE|lead-derived verdict"), "{md}");
}

#[test]
fn consensus_of_three_records_runs_and_threshold() {
    let p = project(&format!("{}{}", inspector("inspector"), auditor("GO", 2000)), 30_000);
    let out = review(&p, &["--consensus", "3"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(json(&out)["teammates"].as_array().unwrap().len(), 21);
    let md = read(&p, ".troupe/specs/login/verdicts.md");
    assert!(md.contains(" | runs:3 | threshold:2/3\n"), "{md}");
    for f in ["verdict.cpf", "verdict-p1.cpf", "verdict-p2.cpf", "verdict-p3.cpf"] {
        assert!(p.path(&format!(".troupe/specs/login/reviews/B1/{f}")).exists(), "{f}");
    }
    assert!(read(&p, ".troupe/specs/login/reviews/B1/verdict.cpf").contains("CONSENSUS|runs:3 | threshold:2/3|GO=3"));
}

#[test]
fn init_writes_every_inspector_perspective() {
    let p = TestProject::new();
    for name in [
        "rules",
        "testability",
        "architecture",
        "consistency",
        "best-practices",
        "holistic",
        "unused-settings",
        "dead-code",
        "stale-specs",
        "orphan-tests",
    ] {
        let text = read(&p, &format!(".troupe/roles/inspectors/{name}.md"));
        assert!(text.starts_with("# Inspector: "), "{name}: {text}");
    }
}

#[test]
fn bad_input_is_refused_before_anything_runs() {
    let p = project(&format!("{}{}", inspector("inspector"), auditor("GO", 2000)), 30_000);
    p.troupe()
        .args(["review", "impl", "login", "--engine", "scripted", "--no-commit"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("review-impl of login needs phase 'implementation-complete'"));
    p.troupe()
        .args(["review", "design", "login", "--consensus", "2", "--threshold", "3", "--no-commit"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--threshold 3 must be between 1 and --consensus (2)"));
    p.troupe()
        .args(["review", "impl", "../etc", "--no-commit"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("'../etc' is not a valid feature name"));
    p.troupe()
        .args(["review", "impl", "nosuch", "--no-commit"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("nosuch"));
    assert!(!p.path(".troupe/specs/login/reviews").exists());
    assert!(!p.path(".troupe/specs/login/verdicts.md").exists());
}

#[test]
fn an_idle_auditor_without_verdict_is_nudged_and_answers() {
    let verdict = "VERDICT:GO\\nSCOPE:{feature}\\nNOTES:\\nPARTIAL_VERIFICATION\\n";
    let script = format!(
        "{}  auditor:\n    - - say: \"merging\"\n      - sleep: 500\n      - say: \"still merging\"\n      - sleep: 500\n      - report: \"I merged the findings.\"\n    - - report: \"{verdict}\"\n",
        inspector("inspector")
    );
    let p = project(&script, 30_000);
    let out = review(&p, &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report = json(&out);
    let auditors: Vec<&serde_json::Value> =
        report["teammates"].as_array().unwrap().iter().filter(|t| t["role"] == "Auditor").collect();
    assert_eq!(auditors.len(), 1, "nudged, not replaced: {report}");
    let decisions = read(&p, ".troupe/handover/decisions.md");
    assert!(decisions.contains("nudging it"), "{decisions}");
    let verdict = read(&p, ".troupe/specs/login/reviews/B1/verdict.cpf");
    assert!(verdict.contains("PARTIAL_VERIFICATION"), "the Lead keeps the nudged verdict: {verdict}");
}

#[test]
fn run_with_review_reviews_the_design_and_the_implementation() {
    let build = r##"  architect:
    - - write: {path: ".troupe/specs/{feature}/design.md", content: "# Design\n"}
      - write: {path: ".troupe/specs/{feature}/research.md", content: "# Research\n"}
      - report: "ARCHITECT_COMPLETE\nSummary: a design"
  task-generator:
    - - write:
          path: ".troupe/specs/{feature}/tasks.yaml"
          content: |
            tasks:
              - id: "1"
                summary: the feature
                status: pending
            execution:
              - wave: 1
                groups:
                  - {id: G1, tasks: ["1"], files: ["{feature}.txt"]}
      - report: "TASKGEN_COMPLETE\nTasks: 1\nWaves: 1"
  builder/G1:
    - - write: {path: "{feature}.txt", content: "done\n"}
      - complete: "1"
      - report: "BUILDER_COMPLETE\nFeature: f\nStatus: done\nTasks completed: 1\nFiles: {feature}.txt\nTests: ok"
"##;
    let p = TestProject::new();
    fs::write(p.path(".troupe/steering/tech.md"), "# Tech\n\n## Common Commands\n\n- Test: `true`\n- Lint: `true`\n")
        .unwrap();
    fs::write(
        p.path(".troupe/scripted.yaml"),
        format!("agents:\n{build}{}{}", inspector("inspector"), auditor("GO", 1000)),
    )
    .unwrap();
    let out = p
        .troupe()
        .args(["--json", "run", "login", "users log in", "--review", "--engine", "scripted", "--no-commit"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report = json(&out);
    assert_eq!(report["phase"], "implementation-complete");
    let md = read(&p, ".troupe/specs/login/verdicts.md");
    assert!(md.contains("## [B1] design | ") && md.contains("## [B2] impl | "), "{md}");
    assert!(p.path(".troupe/specs/login/reviews/B2/verdict.cpf").exists());
}

/// An Auditor that goes quiet until the Lead asks it to stop, answers with
/// `respond_shutdown`, then stays hung; resumed (the nudge), it answers a verdict.
fn answering_auditor(approve: bool, reason: &str) -> String {
    let verdict = "VERDICT:GO\\nSCOPE:{feature}\\nNOTES:\\nPARTIAL_VERIFICATION\\n";
    format!(
        "  auditor:\n    - - say: \"merging\"\n      - respond_shutdown: {{approve: {approve}, reason: \"{reason}\"}}\n      - hang\n    - - report: \"{verdict}\"\n"
    )
}

#[test]
fn a_hung_auditor_that_approves_the_shutdown_is_stopped_at_once_then_nudged() {
    let p = project(&format!("{}{}", inspector("inspector"), answering_auditor(true, "")), HANG_MS);
    // Only the approval can end its process in time: the test's timeout is far below this.
    shutdown_timeout(&p, 3_600_000);
    let out = p
        .troupe()
        .args(["--json", "review", "design", "login", "--engine", "scripted", "--no-commit"])
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report = json(&out);
    let auditors: Vec<&serde_json::Value> =
        report["teammates"].as_array().unwrap().iter().filter(|t| t["role"] == "Auditor").collect();
    assert_eq!(auditors.len(), 1, "nudged, not replaced: {report}");
    let id = auditors[0]["id"].as_str().unwrap();
    let decisions = read(&p, ".troupe/handover/decisions.md");
    for line in [
        format!("{id} showed no activity for {HANG_MS} ms; asking it to stop before anything replaces it"),
        format!("{id} approved the shutdown request; stopping its processes"),
        format!("Auditor {id} showed no activity for the hang timeout and was shut down; nudging it"),
    ] {
        assert!(decisions.contains(&line), "{line}\n{decisions}");
    }
    let verdict = read(&p, ".troupe/specs/login/reviews/B1/verdict.cpf");
    assert!(verdict.contains("PARTIAL_VERIFICATION") && !verdict.contains("AUDITOR_UNAVAILABLE"), "{verdict}");
    // The request and the answer are on record in the mailbox.
    let thread = p.troupe().args(["--json", "msg", "inbox", "--agent", "lead"]).output().unwrap();
    let thread = String::from_utf8_lossy(&thread.stdout).into_owned();
    assert!(thread.contains("shutdown_response"), "{thread}");
}

#[test]
fn a_refused_shutdown_is_recorded_and_forced_after_the_timeout() {
    let p = project(&format!("{}{}", inspector("inspector"), answering_auditor(false, "still merging")), HANG_MS);
    // Long enough for the refusal to arrive first (the teammate and the Lead's
    // watcher each poll the mailbox), short enough not to wait much.
    shutdown_timeout(&p, 1500);
    let out = review(&p, &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let decisions = read(&p, ".troupe/handover/decisions.md");
    assert!(
        decisions
            .contains("refused the shutdown request: still merging; it is stopped by force after the shutdown timeout"),
        "{decisions}"
    );
    assert!(decisions.contains("was shut down; nudging it"), "forced, then nudged: {decisions}");
    let verdict = read(&p, ".troupe/specs/login/reviews/B1/verdict.cpf");
    assert!(verdict.contains("PARTIAL_VERIFICATION"), "{verdict}");
}

/// A NO-GO auto-fix passes the same quality gates as the first build before any
/// re-review or commit: a fix Builder that breaks the tests is sent back with
/// the gate's output, and when it cannot make them pass the review escalates
/// and nothing is committed (it was committed as "impl review GO" before).
#[test]
fn a_fix_round_that_breaks_the_tests_is_gated_and_never_committed() {
    let broken = "    - - write: {path: \"src/a.rs\", content: \"broken\\n\"}\n      - report: \"BUILDER_COMPLETE\\nFeature: login\\nTasks completed: none\\nFiles: src/a.rs\\nTests: 1 passed\\nStatus: fixed\"\n";
    let fixer = format!("  builder/G1:\n{}", broken.repeat(3));
    let p = project(&format!("{}{}{fixer}", inspector("inspector"), auditor("NO-GO", 1000)), 30_000);
    let spec = p.path(".troupe/specs/login/spec.yaml");
    let text = fs::read_to_string(&spec).unwrap().replace("phase: design-generated", "phase: implementation-complete");
    fs::write(&spec, text).unwrap();
    fs::write(
        p.path(".troupe/specs/login/tasks.yaml"),
        "tasks:\n  - id: \"1\"\n    summary: a\n    status: done\nexecution:\n  - wave: 1\n    groups:\n      - {id: G1, tasks: [\"1\"], files: [src/a.rs]}\n",
    )
    .unwrap();
    fs::create_dir_all(p.path("src")).unwrap();
    fs::write(p.path("src/a.rs"), "fine\n").unwrap();
    fs::write(
        p.path(".troupe/steering/tech.md"),
        "# Tech\n\n## Common Commands\n\n- Test: `sh check.sh`\n- Lint: `true`\n",
    )
    .unwrap();
    fs::write(p.path("check.sh"), "if grep -q broken src/a.rs; then echo '1 failed: src/a.rs is broken'; exit 1; fi\n")
        .unwrap();
    let git = |args: &[&str]| crate::lead_claude::git(p.root(), args);
    git(&["init", "-q"]);
    git(&["add", "-A"]);
    git(&["commit", "-q", "-m", "start"]);

    let out = p.troupe().args(["--json", "review", "impl", "login", "--engine", "scripted"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let report = json(&out);
    assert_eq!(report["outcome"], "escalated", "{report:#}");
    let why = report["escalations"].to_string();
    assert!(why.contains("still fails the quality gate") && why.contains("src/a.rs is broken"), "{why}");
    assert_eq!(git(&["rev-list", "--count", "HEAD"]).trim(), "1", "a red fix is never committed");
    let decisions = read(&p, ".troupe/handover/decisions.md");
    assert!(decisions.contains("failed the quality gate; sent back to fix it"), "{decisions}");
    assert!(!p.path(".troupe/specs/login/reviews/B2").exists(), "no re-review of a red tree");
}
