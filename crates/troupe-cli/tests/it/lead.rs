//! The Lead end to end: `troupe run/design/impl/resume/status/demo` with the
//! built-in scripted engine as every teammate (real child processes).

use std::path::Path;
use std::process::Command as Std;

use predicates::prelude::*;

use crate::support::{TestProject, json};

pub(crate) fn git(root: &Path, args: &[&str]) -> String {
    let out = Std::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@localhost"])
        .args(args)
        .current_dir(root)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The subjects of the line's commits, newest first, without the group merges
/// of worktree isolation (`<feature>: merge group ...`, docs/lead.md): the
/// commits of the run's steps.
pub(crate) fn steps(root: &Path) -> Vec<String> {
    let log = git(root, &["log", "--first-parent", "--format=%s"]);
    log.lines().filter(|l| !l.contains(": merge group ")).map(str::to_string).collect()
}

/// A git project with troupe initialised, sh test/lint commands, and `script` as
/// the scripted engine's script.
pub(crate) fn project(script: &str) -> TestProject {
    let p = TestProject::new();
    std::fs::write(
        p.path(".troupe/steering/tech.md"),
        "# Tech\n\n## Common Commands\n\n- Test: `sh check.sh`\n- Lint: `true`\n",
    )
    .unwrap();
    // The gate passes unless a.txt (G1's file: a sandboxed Builder writes
    // only what it owns) says FAIL.
    std::fs::write(p.path("check.sh"), "if grep -qs FAIL a.txt; then echo 'FAIL exists'; exit 1; fi\necho ok\n")
        .unwrap();
    std::fs::write(p.path(".troupe/scripted.yaml"), script).unwrap();
    git(p.root(), &["init", "-q"]);
    git(p.root(), &["add", "-A"]);
    git(p.root(), &["commit", "-q", "-m", "start"]);
    p
}

pub(crate) const DESIGN: &str = r##"
  architect:
    - - write: {path: ".troupe/specs/{feature}/design.md", content: "# Design\n"}
      - write: {path: ".troupe/specs/{feature}/research.md", content: "# Research\n"}
      - report: "ARCHITECT_COMPLETE\nSummary: a design\n[PATTERN] keep it small"
"##;

pub(crate) const TASKS: &str = r##"
  task-generator:
    - - write:
          path: ".troupe/specs/{feature}/tasks.yaml"
          content: |
            tasks:
              - id: "1"
                summary: A
                status: pending
                subtasks:
                  - {id: "1.1", summary: a, status: pending}
                  - {id: "1.2", summary: b, status: pending}
              - id: "2"
                summary: B
                depends: ["1"]
                status: pending
            execution:
              - wave: 1
                groups:
                  - {id: G1, tasks: ["1.1"], files: [a.txt]}
                  - {id: G2, tasks: ["1.2"], files: [b.txt]}
              - wave: 2
                groups:
                  - {id: G3, tasks: ["2"], files: [c.txt]}
      - report: "TASKGEN_COMPLETE\nTasks: 3\nWaves: 2"
"##;

fn builder(group: &str, task: &str, file: &str) -> String {
    format!(
        "  builder/{group}:\n    - - write: {{path: {file}, content: \"{group}\\n\"}}\n      - complete: \"{task}\"\n      - report: \"BUILDER_COMPLETE\\nFeature: f\\nStatus: done\\nTasks completed: {task}\\nFiles: {file}\\nTests: ok\\n[REFERENCE] {group} done\"\n"
    )
}

pub(crate) fn full_script() -> String {
    format!(
        "agents:{DESIGN}{TASKS}{}{}{}",
        builder("G1", "1.1", "a.txt"),
        builder("G2", "1.2", "b.txt"),
        builder("G3", "2", "c.txt")
    )
}

#[test]
fn run_with_the_scripted_engine_designs_implements_and_commits() {
    let p = project(&full_script());
    let out = p
        .troupe()
        .args(["--json", "run", "login", "users log in", "--engine", "scripted", "--no-review"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report = json(&out);
    assert_eq!(report["outcome"], "completed");
    assert_eq!(report["phase"], "implementation-complete");
    assert_eq!(report["files"], serde_json::json!(["a.txt", "b.txt", "c.txt"]));
    let roles: Vec<&str> =
        report["teammates"].as_array().unwrap().iter().map(|t| t["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["Architect", "TaskGenerator", "Builder", "Builder", "Builder"]);
    assert!(report["teammates"].as_array().unwrap().iter().all(|t| t["engine"] == "scripted"));

    // Each group landed as a merge on the line before the implementation commit.
    let merges = git(p.root(), &["log", "--first-parent", "--merges", "--format=%s"]);
    assert_eq!(merges.lines().filter(|l| l.starts_with("login: merge group G")).count(), 3, "{merges}");
    let subjects = steps(p.root());
    assert_eq!(subjects[0], "login: the run's handover notes");
    assert_eq!(subjects[1], "login: implement 3 tasks in 3 groups, 3 files");
    assert_eq!(subjects[2], "login: design (a design)");
    assert_eq!(git(p.root(), &["status", "--porcelain"]), "", "a completed run leaves the tree clean");
    let tracked = git(p.root(), &["ls-files"]);
    assert!(tracked.contains(".troupe/specs/login/tasks.yaml"));
    assert!(!tracked.contains(".troupe/state"), "state is never committed: {tracked}");

    let tasks = std::fs::read_to_string(p.path(".troupe/specs/login/tasks.yaml")).unwrap();
    assert_eq!(tasks.matches("status: done").count(), 4, "every subtask and task is done:\n{tasks}");

    let decisions = std::fs::read_to_string(p.path(".troupe/handover/decisions.md")).unwrap();
    let line = decisions.lines().find(|l| l.contains(" D1: ")).unwrap();
    assert!(line.starts_with('[') && line.contains("] D1: GATE | design allowed"), "{line}");
    let knowledge = std::fs::read_to_string(p.path(".troupe/handover/knowledge.md")).unwrap();
    assert!(knowledge.contains("- [PATTERN] keep it small (login, architect-1)"));
    assert!(knowledge.contains("[REFERENCE] G3 done"));
    let session = std::fs::read_to_string(p.path(".troupe/handover/session.md")).unwrap();
    assert!(session.contains("Feature: login") && session.contains("implementation complete"), "{session}");

    let status = json(&p.troupe().args(["--json", "status", "login"]).output().unwrap());
    assert_eq!(status[0]["phase"], "implementation-complete");
    assert_eq!(status[0]["tasks_total"], 3);
    assert_eq!(status[0]["tasks_completed"], 3);
    assert!(status[0]["next_action"].as_str().is_some_and(|n| !n.is_empty()), "{status}");

    // Teammates run under the engine supervisor: their logs are the records
    // `troupe agent logs` reads, from spawn to exit.
    let architect = report["teammates"][0]["id"].as_str().unwrap().to_string();
    let logs = p.troupe().args(["agent", "logs", &architect]).output().unwrap();
    let text = String::from_utf8_lossy(&logs.stdout);
    assert!(logs.status.success() && !text.contains("unreadable"), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.first().is_some_and(|l| l.contains("scripted")), "{text}");
    assert!(text.contains("ARCHITECT_COMPLETE") || text.contains("exited"), "{text}");
}

#[test]
fn messages_to_the_lead_reach_the_handover_buffer() {
    let g3 = "  builder/G3:\n    - - message: {to: lead, body: \"c.txt format needs a decision\"}\n      - sleep: 700\n      - write: {path: c.txt, content: \"c\"}\n      - report: \"BUILDER_COMPLETE\\nFeature: f\\nStatus: done\\nTasks completed: 2\\nFiles: c.txt\\nTests: ok\"\n";
    let script =
        format!("agents:{DESIGN}{TASKS}{}{}{g3}", builder("G1", "1.1", "a.txt"), builder("G2", "1.2", "b.txt"));
    let p = project(&script);
    p.troupe().args(["run", "login", "users log in", "--engine", "scripted", "--no-review"]).assert().success();
    let buffer = std::fs::read_to_string(p.path(".troupe/handover/buffer.md")).unwrap();
    assert!(
        buffer.contains("message from builder-g3-") && buffer.contains("c.txt format needs a decision"),
        "{buffer}"
    );
}

#[test]
fn blocked_builder_escalates_and_resume_never_redoes_completed_tasks() {
    let blocked = "  builder/G2:\n    - - report: \"BUILDER_BLOCKED\\nFeature: f\\nStatus: blocked\\nBlocker: which format for b?\"\n";
    let script =
        format!("agents:{DESIGN}{TASKS}{}{blocked}{}", builder("G1", "1.1", "a.txt"), builder("G3", "2", "c.txt"));
    let p = project(&script);
    p.troupe()
        .args(["run", "login", "users log in", "--engine", "scripted", "--no-review"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("G2 (blocked)"))
        .stderr(predicate::str::contains("G3 (waiting on them)"))
        .stderr(predicate::str::contains("troupe resume login"));
    let spec = std::fs::read_to_string(p.path(".troupe/specs/login/spec.yaml")).unwrap();
    assert!(spec.contains("phase: design-generated"), "no implementation-complete while blocked");
    let buffer = std::fs::read_to_string(p.path(".troupe/handover/buffer.md")).unwrap();
    assert!(buffer.contains("which format for b?"), "{buffer}");
    let status = p.troupe().args(["status", "login"]).output().unwrap();
    assert!(
        String::from_utf8_lossy(&status.stdout).contains("last error"),
        "{}",
        String::from_utf8_lossy(&status.stdout)
    );

    // The user answers; G2 can now finish. Resume runs G2 and G3 only.
    std::fs::write(p.path(".troupe/scripted.yaml"), full_script()).unwrap();
    let out = p.troupe().args(["--json", "resume", "login", "--engine", "scripted", "--no-review"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report = json(&out);
    let groups: Vec<&str> = report["teammates"].as_array().unwrap().iter().map(|t| t["id"].as_str().unwrap()).collect();
    assert_eq!(groups.len(), 2, "{groups:?}");
    assert!(groups[0].starts_with("builder-g2-") && groups[1].starts_with("builder-g3-"), "{groups:?}");
    assert_eq!(report["phase"], "implementation-complete");
    // G1's file, built before the escalation, is still among the files created
    // (the impl review reads that list; it was lost on resume).
    let mut files: Vec<String> =
        report["files"].as_array().unwrap().iter().map(|f| f.as_str().unwrap().to_string()).collect();
    files.sort();
    assert_eq!(files, ["a.txt", "b.txt", "c.txt"], "{report:#}");
    // The escalation was dealt with: status no longer shows it.
    let status = json(&p.troupe().args(["--json", "status", "login"]).output().unwrap());
    assert_eq!(status[0]["last_error"], serde_json::Value::Null, "{status:#}");
    assert_eq!(status[0]["running"], serde_json::json!([]), "{status:#}");
}

/// Teammates cut short by the end of a run are INTERRUPTED in the registry, and
/// `troupe status` never calls a dead process running (they stayed
/// SHUTTING_DOWN and "running" forever).
#[test]
fn an_interrupted_run_leaves_no_teammate_running_in_the_registry_or_status() {
    let (p, mut lead, _) = lead_with_a_busy_builder();
    assert!(std::process::Command::new("kill").args(["-INT", &lead.id().to_string()]).status().unwrap().success());
    assert_eq!(lead.wait().unwrap().code(), Some(130));
    let store = troupe_store::SqliteStore::open_project(&troupe_core::layout::Layout::new(p.root())).unwrap();
    let agents = troupe_store::Registry::agents(&store).unwrap();
    let builder = agents.iter().find(|a| a.role == "builder").expect("the Builder is registered");
    assert_eq!(builder.status, troupe_store::AgentStatus::Interrupted, "{agents:#?}");
    let status = json(&p.troupe().args(["--json", "status", "login"]).output().unwrap());
    assert_eq!(status[0]["running"], serde_json::json!([]), "{status:#}");
}

/// SIGTERM (what `kill`, a service manager or a CI runner sends) ends a run as
/// gracefully as Ctrl-C: exit 130, the teammate INTERRUPTED in the registry,
/// the handover saying how to go on, and `troupe resume` finishes the run. It
/// killed troupe at once, and the run's end was never recorded.
#[test]
fn sigterm_stops_a_run_as_gracefully_as_ctrl_c_and_resume_finishes_it() {
    let (p, mut lead, busy) = lead_with_a_busy_builder();
    assert!(std::process::Command::new("kill").args(["-TERM", &lead.id().to_string()]).status().unwrap().success());
    assert_eq!(lead.wait().unwrap().code(), Some(130), "ended as interrupted, not by the signal");
    assert!(!std::path::Path::new(&format!("/proc/{busy}")).exists() || is_zombie(busy), "its command was stopped");
    let store = troupe_store::SqliteStore::open_project(&troupe_core::layout::Layout::new(p.root())).unwrap();
    let agents = troupe_store::Registry::agents(&store).unwrap();
    let builder = agents.iter().find(|a| a.role == "builder").expect("the Builder is registered");
    assert_eq!(builder.status, troupe_store::AgentStatus::Interrupted, "{agents:#?}");
    let session = std::fs::read_to_string(p.path(".troupe/handover/session.md")).unwrap();
    assert!(session.contains("troupe resume login"), "{session}");
    std::fs::write(p.path(".troupe/scripted.yaml"), full_script()).unwrap();
    let out = p.troupe().args(["--json", "resume", "login"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(json(&out)["outcome"], "completed");
}

#[test]
fn failing_quality_gate_sends_the_builder_back() {
    let g1 = "  builder/G1:\n    - - write: {path: a.txt, content: \"x\"}\n      - run: echo FAIL > a.txt\n      - report: \"BUILDER_COMPLETE\\nFeature: f\\nStatus: done\\nTasks completed: 1.1\\nFiles: a.txt\\nTests: ok\"\n    - - run: echo fixed > a.txt\n      - report: \"BUILDER_COMPLETE\\nFeature: f\\nStatus: done\\nTasks completed: 1.1\\nFiles: a.txt\\nTests: ok\\n[INCIDENT] left a FAIL file\"\n";
    let script = format!("agents:{DESIGN}{TASKS}{g1}{}{}", builder("G2", "1.2", "b.txt"), builder("G3", "2", "c.txt"));
    let p = project(&script);
    let out =
        p.troupe().args(["run", "login", "users log in", "--engine", "scripted", "--no-review"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("FAILED (FAIL exists)"), "{err}");
    assert!(err.contains("resume builder-g1-"), "{err}");
    let decisions = std::fs::read_to_string(p.path(".troupe/handover/decisions.md")).unwrap();
    assert!(decisions.contains("QUALITY | group G1 failed the quality gate"), "{decisions}");
}

#[test]
fn architect_without_a_report_is_retried_then_escalated() {
    let p = project("agents:\n  architect:\n    - - say: \"I will do it later\"\n");
    p.troupe()
        .args(["design", "login", "-d", "users log in", "--engine", "scripted"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("the Architect failed twice"))
        .stderr(predicate::str::contains("ARCHITECT_COMPLETE"));
    let spec = std::fs::read_to_string(p.path(".troupe/specs/login/spec.yaml")).unwrap();
    assert!(spec.contains("phase: initialized"));
}

#[test]
fn invalid_tasks_yaml_goes_back_to_the_task_generator_with_the_errors() {
    let bad = "  task-generator:\n    - - write: {path: \".troupe/specs/{feature}/tasks.yaml\", content: \"tasks:\\n  - {id: a, depends: [b]}\\n  - {id: b, depends: [a]}\\n\"}\n      - report: \"TASKGEN_COMPLETE\"\n";
    let p = project(&format!("agents:{DESIGN}{bad}"));
    p.troupe()
        .args(["run", "login", "users log in", "--engine", "scripted", "--no-commit", "--no-review"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("the TaskGenerator failed twice"))
        .stderr(predicate::str::contains("troupe tasks validate login"));
}

#[test]
fn phase_gate_refusals_change_nothing() {
    let p = project(&full_script());
    p.troupe().args(["spec", "new", "login", "-d", "x"]).assert().success();
    let before = p.snapshot();
    p.troupe()
        .args(["impl", "login", "--engine", "scripted"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("impl of login needs phase 'design-generated'"));
    assert_eq!(p.snapshot(), before, "a refused gate changes nothing");
    p.troupe().args(["spec", "new", "payments"]).assert().success();
    p.troupe().args(["spec", "block", "login", "--by", "payments"]).assert().success();
    p.troupe()
        .args(["design", "login", "--engine", "scripted"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("login is blocked by payments"));
    assert!(!p.path(".troupe/specs/login/design.md").exists());
}

#[test]
fn commits_need_a_repository_unless_turned_off() {
    let p = TestProject::new();
    std::fs::write(p.path(".troupe/scripted.yaml"), full_script()).unwrap();
    let before = p.snapshot();
    p.troupe()
        .args(["design", "login", "-d", "users log in", "--engine", "scripted"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("is not a git repository"))
        .stderr(predicate::str::contains("--no-commit"));
    assert_eq!(p.snapshot(), before, "nothing changed on disk");
    p.troupe()
        .args(["design", "login", "-d", "users log in", "--engine", "scripted", "--no-commit"])
        .assert()
        .success();
    assert!(p.path(".troupe/specs/login/design.md").exists());
}

#[test]
fn demo_shows_every_moving_part() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("demo");
    let out = crate::support::troupe().args(["demo", "--dir"]).arg(&root).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{err}\n{stdout}");
    for needle in [
        "phase: design-generated",
        "[impl · wave 1] spawn builder-g1-",
        "[impl · wave 1] spawn builder-g2-",
        // G3 may start while a wave-1 report is still gated, under that label.
        "spawn builder-g3-",
        "[impl · wave 2]",
        "FAILED (lint: src/add.sh has a TODO marker)",
        // Every teammate's tool calls.
        "builder-g2-11 → Write src/add.sh",
        // From the denial log, as on every engine.
        "denied builder-g2-",
        " write: src/add.sh is not in this Builder's group",
        "final quality gate: passed",
        "phase: implementation-complete",
        "[review-design] spawn inspector-testability-",
        "[review-impl] spawn auditor-",
    ] {
        assert!(err.contains(needle), "missing {needle:?} in\n{err}");
    }
    assert!(stdout.contains("calculator: completed (phase implementation-complete)"), "{stdout}");
    assert!(stdout.contains("[INCIDENT]"), "{stdout}");
    assert!(stdout.contains("verdicts.md:\n## [B1] design | "), "{stdout}");
    let subjects = steps(&root);
    let log = subjects.join("\n");
    assert_eq!(subjects[0], "calculator: the run's handover notes", "{log}");
    assert_eq!(subjects[1], "calculator: impl review CONDITIONAL (B2)", "{log}");
    assert!(subjects[2].starts_with("calculator: implement 3 tasks"), "{log}");
    assert_eq!(subjects[3], "calculator: design review CONDITIONAL (B1)", "{log}");
    assert_eq!(git(&root, &["status", "--porcelain"]), "", "the demo leaves its project clean");
    // So a release can follow at once (it refused a dirty tree before).
    let release = crate::support::troupe()
        .arg("-C")
        .arg(&root)
        .args(["--json", "release", "minor", "first cut"])
        .output()
        .unwrap();
    assert!(release.status.success(), "{}", String::from_utf8_lossy(&release.stderr));
    let buffer = std::fs::read_to_string(root.join(".troupe/handover/buffer.md")).unwrap();
    assert!(buffer.contains("no test for an unknown operator"), "CONDITIONAL findings are handed over: {buffer}");
    let tasks = std::fs::read_to_string(root.join(".troupe/specs/calculator/tasks.yaml")).unwrap();
    assert!(!tasks.contains("pending"), "every task is marked done, also those completed on the board:\n{tasks}");
    let run = Std::new("sh").args(["src/calc.sh", "6", "x", "7"]).current_dir(&root).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&run.stdout).trim(), "42");
    // The demo project runs on the scripted engine by default, so the commands it suggests work there.
    let config = std::fs::read_to_string(root.join(".troupe/config.toml")).unwrap();
    let config = troupe_core::config::Config::from_toml(&config).unwrap();
    assert_eq!(config.engines.default.as_deref(), Some("scripted"));
    let engines = crate::support::troupe().arg("-C").arg(&root).args(["--json", "engines", "list"]).output().unwrap();
    assert!(engines.status.success(), "{}", String::from_utf8_lossy(&engines.stderr));
    let status = crate::support::troupe().arg("-C").arg(&root).args(["status", "calculator"]).output().unwrap();
    assert!(status.status.success(), "{}", String::from_utf8_lossy(&status.stderr));
}

/// Six Inspectors (one script for every perspective) and an Auditor that waits
/// for them, then answers `verdict`.
pub(crate) fn reviewers(verdict: &str) -> String {
    let findings = "VERDICT:CONDITIONAL\\nSCOPE:{feature}\\nISSUES:\\nL|naming|a.txt|terse name\\n";
    let cpf = format!("VERDICT:{verdict}\\nSCOPE:{{feature}}\\nVERIFIED:\\ninspector|L|naming|a.txt|terse name\\n");
    format!(
        "  inspector:\n    - - write: {{path: \".troupe/specs/{{feature}}/reviews/active/{{agent}}.cpf\", content: \"{findings}\"}}\n      - report: \"{findings}\"\n\
         \x20 auditor:\n    - - sleep: 1500\n      - write: {{path: \".troupe/specs/{{feature}}/reviews/active/verdict.cpf\", content: \"{cpf}\"}}\n      - report: \"{cpf}\"\n"
    )
}

fn roles(report: &serde_json::Value) -> Vec<String> {
    report["teammates"].as_array().unwrap().iter().map(|t| t["role"].as_str().unwrap().to_string()).collect()
}

#[test]
fn run_reviews_the_design_and_the_implementation_by_default() {
    let p = project(&format!("{}{}", full_script(), reviewers("GO")));
    let out = p.troupe().args(["--json", "run", "login", "users log in", "--engine", "scripted"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report = json(&out);
    assert_eq!(report["phase"], "implementation-complete");
    let roles = roles(&report);
    let order: Vec<&str> =
        roles.iter().map(String::as_str).filter(|r| !matches!(*r, "Inspector" | "Builder")).collect();
    assert_eq!(order, ["Architect", "Auditor", "TaskGenerator", "Auditor"], "design, its review, impl, its review");
    assert_eq!(roles.iter().filter(|r| *r == "Inspector").count(), 12, "six per review: {roles:?}");
    let md = std::fs::read_to_string(p.path(".troupe/specs/login/verdicts.md")).unwrap();
    let design = md.find("## [B1] design | ").expect(&md);
    let implementation = md.find("## [B2] impl | ").expect(&md);
    assert!(design < implementation && md.matches("- verdict: GO\n").count() == 2, "{md}");
    let subjects: Vec<String> = steps(p.root()).into_iter().take(5).collect();
    assert_eq!(
        subjects,
        [
            "login: the run's handover notes",
            "login: impl review GO (B2)",
            "login: implement 3 tasks in 3 groups, 3 files",
            "login: design review GO (B1)",
            "login: design (a design)"
        ]
    );
}

#[test]
fn reviews_are_skipped_with_no_review_or_when_the_config_turns_them_off() {
    // No Inspector or Auditor in the script: a review would escalate.
    let p = project(&full_script());
    let out = p
        .troupe()
        .args(["--json", "run", "login", "users log in", "--engine", "scripted", "--no-review", "--no-commit"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(roles(&json(&out)), ["Architect", "TaskGenerator", "Builder", "Builder", "Builder"]);
    assert!(!p.path(".troupe/specs/login/verdicts.md").exists());

    let p = project(&full_script());
    std::fs::write(p.path(".troupe/config.toml"), "[review]\nin_run = false\n").unwrap();
    let out = p
        .troupe()
        .args(["--json", "run", "login", "users log in", "--engine", "scripted", "--no-commit"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(roles(&json(&out)), ["Architect", "TaskGenerator", "Builder", "Builder", "Builder"]);
    assert!(!p.path(".troupe/specs/login/verdicts.md").exists());

    // --review turns them back on for one run.
    let p = project(&format!("{}{}", full_script(), reviewers("GO")));
    std::fs::write(p.path(".troupe/config.toml"), "[review]\nin_run = false\n").unwrap();
    let out = p
        .troupe()
        .args(["--json", "run", "login", "users log in", "--engine", "scripted", "--no-commit", "--review"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(p.path(".troupe/specs/login/verdicts.md").exists());
}

#[test]
fn bad_review_settings_are_refused_before_anything_changes() {
    let p = project(&full_script());
    std::fs::write(p.path(".troupe/config.toml"), "[review]\nconsensus = 0\n").unwrap();
    let before = p.snapshot();
    p.troupe()
        .args(["run", "login", "users log in", "--engine", "scripted"])
        .assert()
        .code(predicate::ne(0))
        .stderr(predicate::str::contains("review.consensus must be at least 1"));
    assert_eq!(p.snapshot(), before);
    p.troupe()
        .args(["run", "login", "x", "--no-review", "--review"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("cannot be used with"));
}

#[test]
fn resume_reviews_like_run_without_repeating_a_passed_design_review() {
    let blocked = "  builder/G2:\n    - - report: \"BUILDER_BLOCKED\\nFeature: f\\nStatus: blocked\\nBlocker: which format for b?\"\n";
    let script = format!(
        "agents:{DESIGN}{TASKS}{}{blocked}{}{}",
        builder("G1", "1.1", "a.txt"),
        builder("G3", "2", "c.txt"),
        reviewers("GO")
    );
    let p = project(&script);
    p.troupe().args(["run", "login", "users log in", "--engine", "scripted"]).assert().code(1);
    let md = std::fs::read_to_string(p.path(".troupe/specs/login/verdicts.md")).unwrap();
    assert!(md.contains("## [B1] design | ") && !md.contains("impl |"), "{md}");

    std::fs::write(p.path(".troupe/scripted.yaml"), format!("{}{}", full_script(), reviewers("GO"))).unwrap();
    let out = p.troupe().args(["--json", "resume", "login", "--engine", "scripted"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report = json(&out);
    let roles = roles(&report);
    assert_eq!(roles.iter().filter(|r| *r == "Auditor").count(), 1, "only the impl review: {roles:?}");
    let md = std::fs::read_to_string(p.path(".troupe/specs/login/verdicts.md")).unwrap();
    assert!(md.contains("## [B2] impl | ") && !md.contains("## [B2] design"), "{md}");
    assert_eq!(report["phase"], "implementation-complete");
}

/// `--json` always prints exactly one document: a usage error too (clap's text
/// stays on stderr), and help is still help.
#[test]
fn json_usage_errors_are_one_document() {
    let out = crate::support::troupe().args(["--json", "run"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let doc = json(&out);
    assert_eq!(doc["error"]["kind"], "usage", "{doc:#}");
    assert!(doc["error"]["message"].as_str().unwrap().contains("required"), "{doc:#}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("Usage:"));
    let out = crate::support::troupe().args(["run", "--json", "--no-such-flag"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(json(&out)["error"]["kind"], "usage");
    let out = crate::support::troupe().args(["--help"]).output().unwrap();
    assert!(out.status.success() && String::from_utf8_lossy(&out.stdout).contains("Usage:"));
}

/// Teammates die with the Lead: SIGKILL of `troupe run` (nothing in it runs any
/// more, so its supervisor cannot stop anything) leaves no teammate and no
/// grandchild running. Before, they were reparented to init and kept editing.
#[test]
fn a_killed_lead_leaves_no_teammate_running() {
    let (_p, mut lead, busy_pid) = lead_with_a_busy_builder();
    lead.kill().unwrap();
    lead.wait().unwrap();
    let alive = || std::path::Path::new(&format!("/proc/{busy_pid}")).exists() && !is_zombie(busy_pid);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while alive() {
        assert!(std::time::Instant::now() < deadline, "the Builder's command {busy_pid} outlived the killed Lead");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// A process that has ended but was not reaped yet.
pub(crate) fn is_zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(") ").map(|(_, rest)| rest.starts_with('Z')))
        .unwrap_or(false)
}

/// A run first stops its feature's teammates that an earlier run left running
/// (its Lead and guardian were both killed), so a replacement never works beside
/// them; a pid now used by another process is never touched.
#[test]
fn a_run_stops_teammates_an_earlier_run_left_running() {
    use std::os::unix::process::CommandExt;
    use troupe_store::{AgentStatus, NewAgent, Registry};
    let p = project(&full_script());
    let root = p.root().canonicalize().unwrap();
    let sleeper = |agent: &str, project: &Path| {
        std::process::Command::new("sh")
            .args(["-c", "exec sleep 60"])
            .env("TROUPE_AGENT_ID", agent)
            .env("TROUPE_PROJECT", project)
            .process_group(0)
            .spawn()
            .unwrap()
    };
    // Like a real leftover, not this test's child: reaped as soon as it dies.
    let out = std::process::Command::new("sh")
        .args(["-c", "setsid sleep 60 >/dev/null 2>&1 & echo $!"])
        .env("TROUPE_AGENT_ID", "builder-g1-3")
        .env("TROUPE_PROJECT", &root)
        .output()
        .unwrap();
    let leftover: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let mut stranger = sleeper("builder-g2-4", elsewhere.path());
    {
        let store = troupe_store::SqliteStore::open_project(&troupe_core::layout::Layout::new(p.root())).unwrap();
        for (id, pid) in [("builder-g1-3", leftover), ("builder-g2-4", stranger.id())] {
            let mut a = NewAgent::new(id, "builder", "scripted");
            a.feature = Some("login".into());
            a.pid = Some(pid);
            store.register(a).unwrap();
            store.set_status(id, AgentStatus::Processing).unwrap();
        }
    }
    let out = p
        .troupe()
        .args(["--json", "run", "login", "users log in", "--engine", "scripted", "--no-review", "--no-commit"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let gone = !Path::new(&format!("/proc/{leftover}")).exists() || is_zombie(leftover as i32);
    assert!(gone, "the leftover teammate was stopped before the run");
    assert!(stranger.try_wait().unwrap().is_none(), "a process that is not the recorded agent is left alone");
    let _ = stranger.kill();
    let _ = stranger.wait();
    let store = troupe_store::SqliteStore::open_project(&troupe_core::layout::Layout::new(p.root())).unwrap();
    assert_eq!(store.agent("builder-g1-3").unwrap().status, AgentStatus::Failed);
}

/// A commit holds exactly what its step produced: an untracked secret and the
/// user's own uncommitted edit stay out of every commit troupe makes (each ran
/// `git add -A` before), the user is told about them, and they are still there,
/// uncommitted, afterwards.
#[test]
fn commits_never_sweep_in_a_secret_or_the_users_own_edits() {
    let p = project(&full_script());
    std::fs::write(p.path(".env.local"), "API_KEY=sk-very-secret\n").unwrap();
    let tech = p.path(".troupe/steering/tech.md");
    let edited = format!("{}\nMy own note, not ready to commit.\n", std::fs::read_to_string(&tech).unwrap());
    std::fs::write(&tech, &edited).unwrap();
    let out = p
        .troupe()
        .args(["--json", "run", "login", "users log in", "--engine", "scripted", "--no-review"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("uncommitted changes") && err.contains(".env.local"), "{err}");
    let committed = git(p.root(), &["log", "--name-only", "--format=", "HEAD^{/^start}..HEAD"]);
    assert!(committed.contains("a.txt") && committed.contains(".troupe/specs/login/design.md"), "{committed}");
    assert!(!committed.contains(".env.local") && !committed.contains("tech.md"), "{committed}");
    let status = git(p.root(), &["status", "--porcelain"]);
    let mut left: Vec<&str> = status.lines().collect();
    left.sort();
    assert_eq!(left, [" M .troupe/steering/tech.md", "?? .env.local"], "only the user's own changes are left");
    assert_eq!(std::fs::read_to_string(&tech).unwrap(), edited);
}

/// `troupe resume` makes the choices of the run it continues: after `run
/// --engine scripted --no-review` it neither falls back to the config's engine
/// nor starts reviewing (it did both before); flags given to resume still win.
#[test]
fn resume_keeps_the_runs_engine_and_review_choices() {
    let blocked = "  builder/G2:\n    - - report: \"BUILDER_BLOCKED\\nBlocker: which format for b?\"\n";
    let script =
        format!("agents:{DESIGN}{TASKS}{}{blocked}{}", builder("G1", "1.1", "a.txt"), builder("G3", "2", "c.txt"));
    let p = project(&script);
    p.troupe().args(["run", "login", "users log in", "--engine", "scripted", "--no-review"]).assert().code(1);
    std::fs::write(p.path(".troupe/scripted.yaml"), full_script()).unwrap();
    let out = p.troupe().args(["--json", "resume", "login"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report = json(&out);
    let teammates = report["teammates"].as_array().unwrap();
    assert!(teammates.iter().all(|t| t["engine"] == "scripted" && t["role"] == "Builder"), "{report:#}");
    assert_eq!(report["phase"], "implementation-complete");
}

/// An engine override set while a run is live (the dashboard's feature page
/// writes spec.yaml through the spec writer) survives the Lead's next saves of
/// the spec: the Lead keeps the file's `engine_override`, never its own older
/// copy of the spec.
#[test]
fn an_engine_override_set_during_a_run_is_kept_by_the_lead() {
    let wait = "  builder/G1:\n    - - run: \"echo waiting > a.txt; until [ -e go ]; do sleep 0.02; done; echo G1 > a.txt\"\n      - complete: \"1.1\"\n      - report: \"BUILDER_COMPLETE\\nFeature: f\\nStatus: done\\nTasks completed: 1.1\\nFiles: a.txt\\nTests: ok\"\n";
    let p = project(&format!(
        "agents:{DESIGN}{TASKS}{wait}{}{}",
        builder("G2", "1.2", "b.txt"),
        builder("G3", "2", "c.txt")
    ));
    let args = ["--json", "run", "login", "users log in", "--engine", "scripted", "--no-review", "--no-commit"];
    let lead = spawn_lead(&p, &args, std::process::Stdio::piped);
    wait_for(&p, "a.txt", "waiting");
    let project = troupe_project::Project::at(p.root());
    troupe_project::specs::Specs::new(&project)
        .update("login", |spec| {
            spec.engine_override.insert("design".into(), "scripted".into());
            Ok(())
        })
        .unwrap();
    std::fs::write(p.path("go"), "").unwrap();
    let out = lead.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(json(&out)["phase"], "implementation-complete");
    let spec = troupe_project::specs::Specs::new(&project).load("login").unwrap();
    assert_eq!(spec.engine_override.get("design").map(String::as_str), Some("scripted"), "{spec:?}");
}

/// `troupe -C <project> <args>` as a child process, for a test that acts
/// while the Lead runs; `output` gives its stdout and stderr.
fn spawn_lead(p: &TestProject, args: &[&str], output: fn() -> std::process::Stdio) -> std::process::Child {
    Std::new(assert_cmd::cargo::cargo_bin("troupe"))
        .arg("-C")
        .arg(p.root())
        .args(args)
        .env("NO_COLOR", "1")
        .stdout(output())
        .stderr(output())
        .spawn()
        .unwrap()
}

fn lines_of(file: &Path) -> Vec<String> {
    std::fs::read_to_string(file)
        .unwrap_or_else(|e| panic!("{}: {e}", file.display()))
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn the_lead_and_agent_run_give_an_engine_the_same_flags_model_and_troupe_binary() {
    let p = project("agents: {}\n");
    // In a build output folder: the only place beside its own files a
    // sandboxed teammate may write.
    let (args, env) = (p.path("target/args.txt"), p.path("target/env.txt"));
    let gemini = troupe_testkit::fake_agent::FakeAgent::new().dump_args(&args).dump_env(&env).exit(1).install();
    std::fs::write(
        p.path(".troupe/config.toml"),
        format!("[engines.commands]\ngemini = \"{}\"\n", gemini.path().display()),
    )
    .unwrap();
    // The dump has one argument a line: the multi-line prompt is cut out, from
    // `--prompt=` to the next flag.
    let without_prompt = |a: Vec<String>| {
        let start = a.iter().position(|x| x.starts_with("--prompt=")).expect("a --prompt= argument");
        let end = a.iter().position(|x| x == "--output-format").expect("--output-format");
        [&a[..start], &a[end..]].concat()
    };
    p.troupe().args(["design", "login", "-d", "users log in", "--engine", "gemini", "--no-commit"]).assert().code(1);
    let lead = without_prompt(lines_of(&args));
    let lead_env = lines_of(&env);
    p.troupe().args(["agent", "run", "--role", "architect", "--engine", "gemini", "design it"]).assert().code(1);
    let agent = without_prompt(lines_of(&args));

    assert_eq!(lead, agent, "one adapter builds both command lines");
    assert!(lead.windows(2).any(|w| w == ["-m", "gemini-2.5-pro"]), "{lead:?}");
    assert!(lead.contains(&"--skip-trust".to_string()) && lead.contains(&"--yolo".to_string()), "{lead:?}");
    // The Lead's teammate reaches the troupe that started it, by name and on PATH.
    let var = |k: &str| lead_env.iter().find_map(|l| l.strip_prefix(&format!("{k}="))).map(str::to_string);
    let bin = var("TROUPE_BIN").expect("TROUPE_BIN");
    assert!(Path::new(&bin).is_file(), "{bin}");
    let first = var("PATH").unwrap().split(':').next().unwrap().to_string();
    assert_eq!(Path::new(&first), Path::new(&bin).parent().unwrap());
    assert!(var("GEMINI_CLI_HOME").is_some(), "the per-run Gemini home with troupe's hooks");
}

#[test]
fn engines_are_checked_before_any_teammate_is_spawned() {
    let p = project(&format!("agents:{DESIGN}"));
    std::fs::write(p.path(".troupe/config.toml"), "[engines.commands]\nclaude = \"/nonexistent/bin/claude\"\n")
        .unwrap();
    let out = p.troupe().args(["design", "login", "-d", "users log in", "--no-commit"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("engine 'claude' is not installed: `/nonexistent/bin/claude` was not found"), "{err}");
    assert!(err.contains("[engines.commands] claude = \"/path/to/claude\""), "{err}");
    assert!(!err.contains("troupe agent logs"), "no hint at a log that is empty: {err}");
    let logs = p.path(".troupe/logs");
    assert!(!logs.exists() || std::fs::read_dir(&logs).unwrap().next().is_none(), "nothing was spawned");

    let out = p.troupe().args(["design", "login", "-d", "users log in", "--engine", "scriptd"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown engine 'scriptd' (did you mean 'scripted'?)"), "{err}");

    // An unknown id in config runs claude, with one warning.
    std::fs::write(p.path(".troupe/config.toml"), "[engines.phases]\ndesign = \"nope\"\n").unwrap();
    let out = p
        .troupe()
        .args(["design", "login", "-d", "users log in", "--engine", "scripted", "--no-commit"])
        .output()
        .unwrap();
    assert!(out.status.success(), "--engine wins over config: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn the_gateway_opens_the_store_through_the_configured_backend() {
    let p = TestProject::new();
    std::fs::write(p.path(".troupe/config.toml"), "[store]\nbackend = \"postgres\"\n").unwrap();
    // It named SqliteStore and served from SQLite whatever the config said.
    let out = p.troupe().args(["mcp", "serve", "--role", "builder", "--agent", "b1"]).write_stdin("").output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    // PostgreSQL is a backend now: without its URL the gateway is refused, never served from SQLite.
    assert!(err.contains("needs `url = \"postgres://") && err.contains("TROUPE_DATABASE_URL"), "{err}");
}

/// `troupe run` in the background whose G1 Builder runs a long command; returns
/// once that command runs, with its pid.
fn lead_with_a_busy_builder() -> (TestProject, std::process::Child, i32) {
    let busy = "  builder/G1:\n    - - run: \"echo $$ > a.txt; exec sleep 60\"\n      - report: \"BUILDER_COMPLETE\\nTasks completed: 1.1\\nFiles: a.txt\\nTests: ok\"\n";
    let p = project(&format!("agents:{DESIGN}{TASKS}{busy}"));
    let args = ["run", "login", "users log in", "--engine", "scripted", "--no-review", "--no-commit"];
    let lead = spawn_lead(&p, &args, std::process::Stdio::null);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let busy_pid = loop {
        if let Some(pid) = std::fs::read_to_string(p.path("a.txt")).ok().and_then(|s| s.trim().parse::<i32>().ok()) {
            break pid;
        }
        assert!(std::time::Instant::now() < deadline, "the Builder never started its command");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    (p, lead, busy_pid)
}

/// A Builder that goes quiet is asked to stop first, stopped by force when it
/// ignores the request, and only then replaced: its retry never works beside
/// it on the same files (issue 12, defect 2). Its command ignores SIGINT and
/// SIGTERM, so only the forced stop's SIGKILL ends it. It is quiet inside a
/// tool call that never returns: found after the tool allowance
/// (`tool_timeout_ms`), not the shorter hang timeout.
#[test]
fn a_hung_builder_is_stopped_before_its_replacement_starts() {
    // One script for both attempts (a retry runs turn 0 again): the first hangs
    // in a command that ignores SIGINT and SIGTERM, its pid in its own file
    // (a.txt: the sandbox lets a Builder write only its group's files); the
    // retry finds the pid and writes whether that command still ran.
    let hang = "[ -s a.txt ] || { trap '' INT TERM; echo $$ > a.txt; while :; do sleep 1; done; }";
    let alive = "pid=$(cat a.txt); if [ -e /proc/$pid ] && ! grep -q '^State:.*Z' /proc/$pid/status; then echo overlap $pid > a.txt; else echo G1 $pid > a.txt; fi";
    let g1 = format!(
        "  builder/G1:\n    - - run: \"{hang}\"\n      - run: \"{alive}\"\n      - complete: \"1.1\"\n      - report: \"BUILDER_COMPLETE\\nFeature: f\\nStatus: done\\nTasks completed: 1.1\\nFiles: a.txt\\nTests: ok\"\n"
    );
    let p =
        project(&format!("agents:{DESIGN}{TASKS}{g1}{}{}", builder("G2", "1.2", "b.txt"), builder("G3", "2", "c.txt")));
    std::fs::write(
        p.path(".troupe/config.toml"),
        "[team]\nhang_timeout_ms = 800\ntool_timeout_ms = 1500\n\n[shutdown]\ntimeout_ms = 300\n",
    )
    .unwrap();
    let out = p
        .troupe()
        .args(["--json", "run", "login", "users log in", "--engine", "scripted", "--no-review", "--no-commit"])
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}\n{}", String::from_utf8_lossy(&out.stderr), String::from_utf8_lossy(&out.stdout));
    let report = json(&out);
    assert_eq!(report["outcome"], "completed", "{report}");
    let said = std::fs::read_to_string(p.path("a.txt")).unwrap();
    let pid = said.strip_prefix("G1 ").unwrap_or_else(|| panic!("the retry started beside the hung command: {said}"));
    let pid: i32 = pid.trim().parse().unwrap();
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists() || is_zombie(pid), "killed");
    let g1: Vec<&str> = report["teammates"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["id"].as_str())
        .filter(|id| id.starts_with("builder-g1-"))
        .collect();
    assert_eq!(g1.len(), 2, "{report}");
    let decisions = std::fs::read_to_string(p.path(".troupe/handover/decisions.md")).unwrap();
    let order = [
        format!(
            "{} showed no activity for 1500 ms while its tool call ran; asking it to stop before anything replaces it",
            g1[0]
        ),
        format!("{} did not stop within the shutdown timeout; stopping it by force", g1[0]),
        format!("Builder {} for group G1 [1.1] (attempt 2)", g1[1]),
    ];
    let at: Vec<usize> =
        order.iter().map(|o| decisions.find(o.as_str()).unwrap_or_else(|| panic!("{o}\n{decisions}"))).collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{decisions}");
}

/// Wait until `file` (relative to the project) contains `text`.
fn wait_for(p: &TestProject, file: &str, text: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !std::fs::read_to_string(p.path(file)).is_ok_and(|s| s.contains(text)) {
        assert!(std::time::Instant::now() < deadline, "{file} never contained {text:?}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A run interrupted during its implementation review is finished by `troupe
/// resume` from the records: no Builder again, the implementation committed
/// once, the review run, the tree clean. It said "impl of login needs phase
/// 'design-generated', but it is 'implementation-complete'" (issue 12, defect 3).
#[test]
fn resume_finishes_a_run_interrupted_during_the_impl_review() {
    // The impl review's Auditor (a.txt exists by then) takes its time.
    let slow = reviewers("GO").replace("    - - sleep: 1500\n", "    - - run: \"[ -e a.txt ] && sleep 30; true\"\n");
    let p = project(&format!("{}{slow}", full_script()));
    let mut lead = spawn_lead(&p, &["run", "login", "users log in", "--engine", "scripted"], std::process::Stdio::null);
    wait_for(&p, ".troupe/specs/login/spec.yaml", "phase: implementation-complete");
    assert!(std::process::Command::new("kill").args(["-INT", &lead.id().to_string()]).status().unwrap().success());
    assert_eq!(lead.wait().unwrap().code(), Some(130));

    std::fs::write(p.path(".troupe/scripted.yaml"), format!("{}{}", full_script(), reviewers("GO"))).unwrap();
    git(p.root(), &["commit", "-q", "-m", "a faster Auditor", "--", ".troupe/scripted.yaml"]);
    let out = p.troupe().args(["--json", "resume", "login"]).output().unwrap();
    assert!(out.status.success(), "{}\n{}", String::from_utf8_lossy(&out.stderr), String::from_utf8_lossy(&out.stdout));
    let report = json(&out);
    assert_eq!(report["phase"], "implementation-complete");
    let roles = roles(&report);
    assert!(!roles.iter().any(|r| r == "Builder" || r == "TaskGenerator" || r == "Architect"), "{roles:?}");
    assert_eq!(roles.iter().filter(|r| *r == "Auditor").count(), 1, "the impl review only: {roles:?}");
    let md = std::fs::read_to_string(p.path(".troupe/specs/login/verdicts.md")).unwrap();
    assert!(md.contains("impl | ") && md.contains("- verdict: GO"), "{md}");
    let log = git(p.root(), &["log", "--format=%s"]);
    assert_eq!(log.matches("login: implement 3 tasks in 3 groups, 3 files").count(), 1, "{log}");
    assert!(log.contains("login: impl review GO"), "{log}");
    assert_eq!(git(p.root(), &["status", "--porcelain"]), "", "the run's files are all committed");
    let tracked = git(p.root(), &["ls-files"]);
    assert!(["a.txt", "b.txt", "c.txt"].iter().all(|f| tracked.lines().any(|l| l == *f)), "{tracked}");
}

/// A run stopped after spec.yaml said implementation-complete but before its
/// commit (here: the commit undone) is committed by `troupe resume`, with the
/// files the interrupted run's Builders left, and nothing is built again.
#[test]
fn resume_makes_the_implementation_commit_an_interrupted_run_did_not_make() {
    let p = project(&full_script());
    let out = p
        .troupe()
        .args(["--json", "run", "login", "users log in", "--engine", "scripted", "--no-review"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    git(p.root(), &["reset", "-q", "HEAD~2"]);
    assert!(!git(p.root(), &["status", "--porcelain"]).is_empty());
    let out = p.troupe().args(["--json", "resume", "login"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(roles(&json(&out)), Vec::<String>::new(), "nothing built again");
    let subjects = steps(p.root());
    assert_eq!(
        subjects,
        [
            "login: the run's handover notes",
            "login: implement 3 tasks in 3 groups, 3 files",
            "login: design (a design)",
            "start"
        ]
    );
    assert_eq!(git(p.root(), &["status", "--porcelain"]), "", "the Builders' files are the feature's");
    let tracked = git(p.root(), &["ls-files"]);
    assert!(["a.txt", "b.txt", "c.txt"].iter().all(|f| tracked.lines().any(|l| l == *f)), "{tracked}");
}

/// A revision whose TaskGenerator writes the very same plan still builds it
/// again: before, the board kept the old plan's progress and the revision
/// "implemented 3 tasks in 3 groups, 0 files" (issue 12, defect 6). And
/// `revise --no-run` names a command that works.
#[test]
fn a_revision_with_an_unchanged_plan_builds_again() {
    let p = project(&full_script());
    let run = |args: &[&str]| {
        let out = p.troupe().args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        out
    };
    run(&["run", "login", "users log in", "--engine", "scripted", "--no-review"]);
    let out = run(&["revise", "login", "remember the user", "--no-run"]);
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(said.contains("next: `troupe run login`"), "{said}");
    let out = run(&["--json", "run", "login", "--engine", "scripted", "--no-review"]);
    let report = json(&out);
    let builders = roles(&report).iter().filter(|r| *r == "Builder").count();
    assert_eq!(builders, 3, "every group is built again: {report}");
    assert_eq!(report["phase"], "implementation-complete");
    let spec = json(&p.troupe().args(["--json", "spec", "show", "login"]).output().unwrap());
    assert_eq!(spec["version"], "1.1", "{spec}");
    let log = git(p.root(), &["log", "--format=%s"]);
    assert_eq!(log.matches("login: implement 3 tasks in 3 groups, 3 files").count(), 2, "{log}");
}

/// A revision killed while its TaskGenerator works, before a plan of the
/// revised design exists: `troupe resume` imported the previous version's
/// plan (every task done), built nothing and marked v1.1 implemented (issue
/// 12, defect 6). Now the resume plans the revised design and builds it.
#[test]
fn a_revision_killed_before_its_plan_was_written_is_built_by_resume() {
    let p = project(&full_script());
    let ok = |out: std::process::Output| {
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        out
    };
    ok(p.troupe().args(["run", "login", "users log in", "--engine", "scripted", "--no-review"]).output().unwrap());
    // The revision's TaskGenerator never finishes; the Lead is killed while it works.
    let dir = tempfile::tempdir().unwrap();
    let hanging = dir.path().join("hanging.yaml");
    std::fs::write(&hanging, format!("agents:{DESIGN}  task-generator:\n    - - run: \"sleep 60\"\n")).unwrap();
    let mut lead = Std::new(assert_cmd::cargo::cargo_bin("troupe"))
        .arg("-C")
        .arg(p.root())
        .args(["revise", "login", "remember the user", "--no-review", "--engine", "scripted", "--script"])
        .arg(&hanging)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let generators = || {
        std::fs::read_dir(p.path(".troupe/state/logs"))
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("task-generator-"))
            .count()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while generators() < 2 {
        assert!(lead.try_wait().unwrap().is_none(), "the revision ended before its TaskGenerator started");
        assert!(std::time::Instant::now() < deadline, "the revision's TaskGenerator never started");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    lead.kill().unwrap();
    lead.wait().unwrap();
    let root = p.root().canonicalize().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while !crate::fault::processes_of(&root).is_empty() {
        assert!(std::time::Instant::now() < deadline, "the killed run's TaskGenerator outlived it");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let script = p.path(".troupe/scripted.yaml");
    let args = ["--json", "resume", "login", "--no-review", "--engine", "scripted", "--script"];
    let report = json(&ok(p.troupe().args(args).arg(&script).output().unwrap()));
    let built = roles(&report);
    assert_eq!(built.iter().filter(|r| *r == "TaskGenerator").count(), 1, "the revised design is planned: {report}");
    assert_eq!(built.iter().filter(|r| *r == "Builder").count(), 3, "and built: {report}");
    let spec = json(&p.troupe().args(["--json", "spec", "show", "login"]).output().unwrap());
    assert_eq!((spec["version"].as_str(), spec["phase"].as_str()), (Some("1.1"), Some("implementation-complete")));
    let log = git(p.root(), &["log", "--format=%s"]);
    assert_eq!(log.matches("login: implement 3 tasks in 3 groups, 3 files").count(), 2, "{log}");
}

/// The script of the Architect and the TaskGenerator, for tests that bring their own Builders.
pub(crate) fn design_and_tasks() -> String {
    format!("{DESIGN}{TASKS}")
}

/// Ctrl-C while the Lead's quality gate runs: troupe exits 130 at once and
/// the gate's command, in a process group of its own, does not outlive it.
#[test]
fn ctrl_c_during_a_quality_gate_stops_the_gate_too() {
    let g1 = "  builder/G1:\n    - - write: {path: a.txt, content: \"x\"}\n      - report: \"BUILDER_COMPLETE\\nFeature: f\\nStatus: done\\nTasks completed: 1.1\\nFiles: a.txt\\nTests: ok\"\n";
    let p = project(&format!("agents:{DESIGN}{TASKS}{g1}"));
    std::fs::write(p.path("check.sh"), "echo $$ > gate.pid\nexec sleep 600\n").unwrap();
    let mut lead = std::process::Command::new(assert_cmd::cargo::cargo_bin("troupe"))
        .args(["-C"])
        .arg(p.root())
        .args(["run", "login", "users log in", "--engine", "scripted", "--no-review", "--no-commit"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let wait_for = |what: &str, done: &mut dyn FnMut() -> bool| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !done() {
            assert!(std::time::Instant::now() < deadline, "{what}");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    };
    let mut gate = None;
    wait_for("the gate never started", &mut || {
        gate = std::fs::read_to_string(p.path("gate.pid")).ok().and_then(|s| s.trim().parse::<i32>().ok());
        gate.is_some()
    });
    assert!(std::process::Command::new("kill").args(["-INT", &lead.id().to_string()]).status().unwrap().success());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let code = loop {
        if let Some(status) = lead.try_wait().unwrap() {
            break status.code();
        }
        if std::time::Instant::now() > deadline {
            let _ = lead.kill();
            panic!("troupe waited for the gate's command instead of stopping it");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert_eq!(code, Some(130));
    let gate = gate.unwrap() as u32;
    wait_for("the gate's command outlived troupe", &mut || !troupe_testkit::fake_agent::process_running(gate));
}
