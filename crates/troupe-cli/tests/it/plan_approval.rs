//! `[team] plan_approval = { builder = "human" }` end to end (seed 003 B3):
//! a `troupe run` whose Builder, the real Claude Code CLI against a testkit
//! stub, must have its plan decided by a person. Design and tasks run on the
//! scripted engine.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use troupe_testkit::anthropic::AnthropicStub;
use troupe_testkit::{Script, Turn};

use crate::lead_claude::{bash, git, project};
use crate::lead_report::{build_to_report, configure, run, scripted};
use crate::support::{TestProject, json};

/// Long enough that a machine shared by parallel tests does not take a busy
/// Builder for a hung one; the test waits past it while the Builder waits.
const HANG_MS: u64 = 5_000;

/// The Builder's pending plan, as `troupe status` shows it, once it waits.
fn awaiting_plan(p: &TestProject, other_than: Option<i64>, run_ended: &dyn Fn() -> bool) -> (i64, Value) {
    let until = Instant::now() + Duration::from_secs(180);
    loop {
        let status = json(&p.troupe().args(["--json", "status", "login"]).output().unwrap());
        let plan = status[0]["running"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|r| r["status"] == "WAITING")
            .find_map(|r| r["awaiting_plan"].as_i64().filter(|id| Some(*id) != other_than));
        if let Some(plan) = plan {
            return (plan, status);
        }
        assert!(!run_ended() && Instant::now() < until, "the Builder never waited for a decision: {status}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The Builder asks for a plan decision before it acts, is refused a shell
/// command until then, and waits while a person takes their time: the run
/// goes on, `troupe status` shows the plan waiting with the command that
/// decides it, and the wait is no hang. A rejection with a reason sends it
/// back to revise; the approval of its second plan lets it work, and the run
/// completes.
#[test]
fn a_builder_waits_for_a_persons_decision_on_its_plan_and_the_run_completes() {
    let p = project("", Some(&scripted()));
    let root = p.root().canonicalize().unwrap();
    let submit = |plan: &str| {
        Turn::tool("mcp__troupe__troupe__request_plan_approval", json!({"plan": plan, "wait_seconds": 60}))
    };
    let mut turns = vec![bash("sh check.sh"), submit("1. write add"), submit("1. test add first\n2. write add")];
    turns.extend(build_to_report(&root));
    let stub = AnthropicStub::start(Script::new(turns));
    let (claude, _bin) = configure(&p, &stub);
    let config = std::fs::read_to_string(p.path(".troupe/config.toml")).unwrap();
    std::fs::write(
        p.path(".troupe/config.toml"),
        format!("{config}\n[team]\nhang_timeout_ms = {HANG_MS}\nplan_approval = {{ builder = \"human\" }}\n"),
    )
    .unwrap();
    git(p.root(), &["commit", "-q", "-am", "a person decides the Builder's plans"]);

    let (report, first, second) = std::thread::scope(|s| {
        let lead = s.spawn(|| run(&p, &claude));
        let ended = || lead.is_finished();
        let (first, status) = awaiting_plan(&p, None, &ended);
        let builder = &status[0]["running"][0];
        assert_eq!((builder["role"].as_str(), builder["status"].as_str()), (Some("builder"), Some("WAITING")));
        assert_eq!(
            status[0]["next_command"],
            format!("troupe approve {first}   # or: troupe reject {first} \"<reason>\"")
        );
        let text = p.troupe().args(["status", "login"]).output().unwrap();
        let text = String::from_utf8_lossy(&text.stdout).into_owned();
        assert!(text.contains(&format!("WAITING, plan {first} waits for your decision")), "{text}");
        // The person takes longer than the hang timeout: the Builder is not hung.
        let waited = Instant::now();
        while waited.elapsed() < Duration::from_millis(HANG_MS + 1_500) {
            let again = awaiting_plan(&p, None, &ended).0;
            assert_eq!(again, first, "still the same plan, the same Builder");
            std::thread::sleep(Duration::from_millis(200));
        }
        p.troupe().args(["reject", &first.to_string(), "write the test first"]).assert().success();
        let (second, _) = awaiting_plan(&p, Some(first), &ended);
        p.troupe().args(["approve", &second.to_string()]).assert().success();
        (lead.join().unwrap(), first, second)
    });
    assert_eq!(report["phase"], "implementation-complete", "{report}");
    let builders: Vec<&Value> =
        report["teammates"].as_array().unwrap().iter().filter(|t| t["role"] == "Builder").collect();
    assert_eq!(builders.len(), 1, "never stopped as hung, never respawned: {report}");
    assert_eq!(builders[0]["status"], "finished", "{report}");

    let decisions = std::fs::read_to_string(p.path(".troupe/handover/decisions.md")).unwrap();
    for line in [
        format!("(message {first}) to a person"),
        format!("(message {first}) was rejected by a person"),
        format!("(message {second}) was approved by a person"),
    ] {
        assert!(decisions.contains(&line), "{line}: {decisions}");
    }
    assert!(!decisions.contains("unresponsive") && !decisions.contains("no activity"), "{decisions}");
    // What the model saw: the refused command, the rejection with its reason, the approval.
    let seen: Vec<String> = stub.model_requests().iter().map(|r| r["messages"].to_string()).collect();
    let reason = troupe_gate::modes::PLAN_MODE_REASON;
    assert!(seen.get(1).is_some_and(|m| m.contains(reason)), "the shell command was held: {:?}", seen.get(1));
    assert!(seen.get(2).is_some_and(|m| m.contains("write the test first") && m.contains(r#"\"approved\":false"#)));
    assert!(seen.get(3).is_some_and(|m| m.contains(r#"\"approved\":true"#)), "{:?}", seen.get(3));
}
