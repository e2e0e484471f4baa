//! What a Builder on the real Claude Code CLI hands the Lead, and when it may
//! stop. Design and tasks run on the scripted engine (one group, G1); the
//! Builder runs on Claude against a testkit Anthropic stub:
//! - it reports through the gateway's `report` tool and ends with plain text:
//!   the Lead takes the tool report (files, tests, knowledge);
//! - it tries to stop before verifying its code: troupe's Stop hook, given to
//!   its run, sends it back, and its next turn verifies and reports.

use std::path::Path;

use serde_json::json;
use troupe_testkit::anthropic::AnthropicStub;
use troupe_testkit::claude::Claude;
use troupe_testkit::{Script, Turn};

use crate::lead_claude::{bash, git, project, run_troupe, troupe_bin, wrapper, write};
use crate::support::{TestProject, json};

const TASKS_YAML: &str = "tasks:\n  - id: \"1\"\n    summary: Adder\n    status: pending\n    subtasks:\n      - id: \"1.1\"\n        summary: add A B\n        status: pending\nexecution:\n  - wave: 1\n    groups:\n      - id: G1\n        tasks: [\"1.1\"]\n        files: [src/add.sh, tests/test_add.sh]\n";

/// The scripted engine's script: the Architect and the TaskGenerator.
pub(crate) fn scripted() -> String {
    format!(
        "agents:\n  architect:\n    - - write: {{path: .troupe/specs/login/design.md, content: \"# Design\\n\"}}\n      - write: {{path: .troupe/specs/login/research.md, content: \"# Research\\n\"}}\n      - report: \"ARCHITECT_COMPLETE\\nSummary: add in sh\"\n  task-generator:\n    - - write:\n          path: .troupe/specs/login/tasks.yaml\n          content: {}\n      - report: \"TASKGEN_COMPLETE\"\n",
        serde_json::to_string(TASKS_YAML).unwrap()
    )
}

/// The Builder's work up to its verification: skill, test, code, tests run,
/// in its own worktree (`[team] isolation = "worktree"`, the default).
fn build(root: &Path) -> Vec<Turn> {
    let t = troupe_bin();
    let root = root.join(".troupe/state/worktrees/login/G1");
    vec![
        bash(&format!("{} skill use code-quality-rules", t.display())),
        write(&root.join("tests/test_add.sh"), ". src/add.sh\n[ \"$(add 2 3)\" = 5 ] || exit 1\n"),
        write(&root.join("src/add.sh"), "add() { echo $(($1 + $2)); }\n"),
        bash("sh check.sh"),
    ]
}

fn verify_and_complete() -> Vec<Turn> {
    let t = troupe_bin();
    vec![
        bash(&format!("{} skill use verification-before-completion", t.display())),
        bash(&format!("{t} board claim login/1.1 && {t} board complete login/1.1", t = t.display())),
    ]
}

/// The Builder's whole work, from its first test to its completion report.
pub(crate) fn build_to_report(root: &Path) -> Vec<Turn> {
    let mut turns = build(root);
    turns.extend(verify_and_complete());
    turns.push(Turn::text(
        "BUILDER_COMPLETE\nFeature: login\nTasks completed: 1.1\nFiles: src/add.sh, tests/test_add.sh\nTests: 1 passed\nStatus: done",
    ));
    turns
}

/// Design and tasks on the scripted engine, impl on Claude through `builder`'s stub.
pub(crate) fn configure(p: &TestProject, builder: &AnthropicStub) -> (Claude, tempfile::TempDir) {
    let bin = tempfile::tempdir().unwrap();
    let w = wrapper(bin.path(), &[("builder:G1", builder)]);
    std::fs::write(
        p.path(".troupe/config.toml"),
        format!(
            "[engines]\ndefault = \"claude\"\n\n[engines.phases]\ndesign = \"scripted\"\ntasks = \"scripted\"\n\n[engines.commands]\nclaude = \"{}\"\n",
            w.display()
        ),
    )
    .unwrap();
    git(p.root(), &["commit", "-q", "-am", "config"]);
    (Claude::new(&builder.url()), bin)
}

pub(crate) fn run(p: &TestProject, claude: &Claude) -> serde_json::Value {
    let out = run_troupe(p, claude, &["--json", "run", "login", "add numbers", "--no-review"]);
    assert!(
        out.status.success(),
        "stderr:\n{}\nstdout:\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    json(&out)
}

fn builder_of(report: &serde_json::Value) -> &serde_json::Value {
    report["teammates"].as_array().unwrap().iter().find(|t| t["role"] == "Builder").expect("a Builder ran")
}

#[test]
fn a_builders_report_tool_call_is_its_completion_report() {
    let p = project("", Some(&scripted()));
    let root = p.root().canonicalize().unwrap();
    let mut turns = build(&root);
    turns.extend(verify_and_complete());
    turns.push(Turn::tool(
        "mcp__troupe__troupe__report",
        json!({
            "status": "complete",
            "summary": "add in POSIX sh",
            "task_id": "1.1",
            "files": ["src/add.sh", "tests/test_add.sh"],
            "tests": ["tests/test_add.sh passed"],
            "knowledge": [{"tag": "PATTERN", "text": "reports go through the gateway's report tool"}],
        }),
    ));
    // Not a completion report: without the tool call the Builder would have failed.
    turns.push(Turn::text("All done, see the report I sent."));
    let stub = AnthropicStub::start(Script::new(turns));
    let (claude, _bin) = configure(&p, &stub);
    let report = run(&p, &claude);

    assert_eq!(report["phase"], "implementation-complete", "{report}");
    let builder = builder_of(&report);
    assert_eq!(builder["files"], json!(["src/add.sh", "tests/test_add.sh"]), "{report}");
    assert_eq!(builder["tests"], "tests/test_add.sh passed");
    assert_eq!(report["files"], json!(["src/add.sh", "tests/test_add.sh"]));
    let knowledge = std::fs::read_to_string(p.path(".troupe/handover/knowledge.md")).unwrap();
    assert!(knowledge.contains("[PATTERN] reports go through the gateway's report tool"), "{knowledge}");
    // The report went through the gateway: its result reached the model.
    let sent = stub.model_requests().last().map(|r| r["messages"].to_string()).unwrap_or_default();
    assert!(sent.contains("recorded"), "the gateway recorded the report: {}", tail(&sent));
    let log = git(p.root(), &["log", "--format=%s"]);
    assert!(log.starts_with("login: the run's handover notes\nlogin: implement 1 task"), "{log}");
}

#[test]
fn the_stop_hook_sends_a_builder_back_until_it_has_verified_its_code() {
    let p = project("", Some(&scripted()));
    let root = p.root().canonicalize().unwrap();
    let early = "BUILDER_COMPLETE\nFeature: f\nStatus: done\nTasks completed: 1.1\nFiles: src/add.sh, tests/test_add.sh\nTests: 1 passed";
    let mut turns = build(&root);
    // Code changed, tests run, but no verification skill: Claude tries to stop here.
    turns.push(Turn::text(early));
    turns.extend(verify_and_complete());
    turns.push(Turn::text(format!("{early}\n[INCIDENT] stopped before verifying; the Stop gate sent me back")));
    let stub = AnthropicStub::start(Script::new(turns));
    let (claude, _bin) = configure(&p, &stub);
    let report = run(&p, &claude);

    assert_eq!(report["phase"], "implementation-complete", "{report}");
    let requests = stub.model_requests();
    let blocked = requests.iter().any(|r| r["messages"].to_string().contains("troupe stop gate"));
    assert!(blocked, "the Stop hook refused the first stop and Claude went on");
    let builder = builder_of(&report);
    assert_eq!(builder["status"], "finished", "{report}");
    let knowledge = std::fs::read_to_string(p.path(".troupe/handover/knowledge.md")).unwrap();
    assert!(
        knowledge.contains("the Stop gate sent me back"),
        "the report after the block is the one used: {knowledge}"
    );
    let status = json(&p.troupe().args(["--json", "status", "login"]).output().unwrap());
    assert_eq!(status[0]["tasks_completed"], 1, "{status}");
}

fn tail(s: &str) -> String {
    s.chars().rev().take(2000).collect::<String>().chars().rev().collect()
}

#[test]
fn a_builder_waiting_for_a_stop_gate_longer_than_the_hang_timeout_is_not_taken_for_hung() {
    let p = project("", Some(&scripted()));
    let root = p.root().canonicalize().unwrap();
    let mut turns = build(&root);
    turns.extend(verify_and_complete());
    turns.push(Turn::text(
        "BUILDER_COMPLETE\nFeature: f\nStatus: done\nTasks completed: 1.1\nFiles: src/add.sh, tests/test_add.sh\nTests: 1 passed",
    ));
    let stub = AnthropicStub::start(Script::new(turns));
    let (claude, _bin) = configure(&p, &stub);
    // The Builder's Stop hook runs its on_idle gate for 12 s, with no output
    // from Claude meanwhile; the Lead's hang timeout is 8 s (a real Claude on
    // a loaded machine needs its start-up time within it), and the gate beats
    // every 2.7 s, a third of it.
    let config = p.path(".troupe/config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(
        "\n[team]\nhang_timeout_ms = 8000\n\n[gates.engines.claude]\non_idle = \"sleep 12 && sh check.sh\"\n",
    );
    std::fs::write(&config, text).unwrap();
    git(p.root(), &["commit", "-q", "-am", "slow gate"]);
    let report = run(&p, &claude);

    assert_eq!(report["phase"], "implementation-complete", "{report}");
    let builders: Vec<&serde_json::Value> =
        report["teammates"].as_array().unwrap().iter().filter(|t| t["role"] == "Builder").collect();
    assert_eq!(builders.len(), 1, "never respawned: {report}");
    assert_eq!(builders[0]["status"], "finished", "{report}");
    assert!(builders[0]["duration_ms"].as_u64().unwrap() >= 12_000, "the gate did run: {report}");
    let decisions = std::fs::read_to_string(p.path(".troupe/handover/decisions.md")).unwrap();
    assert!(!decisions.contains("no activity") && !decisions.contains("unresponsive"), "{decisions}");
    let id = builders[0]["id"].as_str().unwrap();
    assert!(p.path(&format!(".troupe/state/heartbeats/{id}")).exists(), "the gate beat for {id}");
}

/// A Builder that asks for plan approval before it acts gets the Lead's
/// decision in the same call (the Lead approves its teammates' plans by policy
/// and records them in decisions.md); before, nobody answered and an obedient
/// teammate waited until the hang timeout.
#[test]
fn a_builder_that_asks_for_plan_approval_gets_the_leads_decision_at_once() {
    let p = project("", Some(&scripted()));
    let root = p.root().canonicalize().unwrap();
    let mut turns = vec![Turn::tool(
        "mcp__troupe__troupe__request_plan_approval",
        json!({"plan": "1. test add first\n2. write add"}),
    )];
    turns.extend(build_to_report(&root));
    let stub = AnthropicStub::start(Script::new(turns));
    let (claude, _bin) = configure(&p, &stub);
    let report = run(&p, &claude);
    assert_eq!(report["phase"], "implementation-complete", "{report}");
    let decisions = std::fs::read_to_string(p.path(".troupe/handover/decisions.md")).unwrap();
    assert!(
        decisions.contains("PLAN | approved the plan of builder-") && decisions.contains("1. test add first"),
        "{decisions}"
    );
    // The tool's answer, as the model saw it: approved, go ahead.
    let sent = stub.model_requests().get(1).map(|r| r["messages"].to_string()).unwrap_or_default();
    assert!(sent.contains(r#"\"approved\":true"#) && sent.contains("go ahead"), "{}", tail(&sent));
}
