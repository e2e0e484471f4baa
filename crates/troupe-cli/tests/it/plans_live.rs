//! Plan mode and delegate mode (seed 003 B3, B5) with the real Claude Code
//! against the testkit stub, whose model does what troupe tells it: it reads
//! its messages, submits its plan with the tool troupe's instructions name,
//! revises a rejected plan, and delegates through the board tools its prompt
//! names. Where it tries what troupe refuses (a write before approval, a
//! delegate's write and file lock), troupe's hooks and gateway say no.

use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use troupe_core::layout::Layout;
use troupe_store::{Mailbox, SqliteStore};
use troupe_testkit::anthropic::AnthropicStub;
use troupe_testkit::claude::Claude;
use troupe_testkit::{Conversation, Responder, Turn, peers};

use crate::support::{TestProject, json, offered};

/// The file both tests' agents try to write (JSON: no skill gate for it; in
/// a folder, since the sandbox grants none that holds `.troupe/`).
const FILE: &str = "data/greeting.json";

/// A role of the project's skills that may write and use the gateway's tools.
fn project() -> TestProject {
    let p = TestProject::new();
    std::fs::create_dir_all(p.path("data")).unwrap();
    let dir = p.path(".troupe/skills/planning");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        "---\nid: planning\ndescription: plans, then builds\nallowedRoles: [planner]\nallowedTools: [\"*\"]\n---\nPlan, then build.\n",
    )
    .unwrap();
    let config = std::fs::read_to_string(p.path(".troupe/config.toml")).unwrap_or_default();
    let claude = peers::bin("claude");
    std::fs::write(
        p.path(".troupe/config.toml"),
        format!("{config}\n[engines.commands]\nclaude = \"{}\"\n", claude.display()),
    )
    .unwrap();
    p
}

fn start(p: &TestProject, claude: &Claude, args: &[&str]) -> Child {
    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("troupe"));
    cmd.arg("-C").arg(p.root()).args(["agent", "run", "--engine", "claude", "--role", "planner"]).args(args);
    cmd.envs(claude.env()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
}

fn finish(child: Child) -> Output {
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}\n{}", String::from_utf8_lossy(&out.stderr), String::from_utf8_lossy(&out.stdout));
    out
}

/// The backquoted tool name in `text` that ends with `suffix`: what troupe told the model to call.
fn named<'a>(text: &'a str, suffix: &str) -> Option<&'a str> {
    text.split('`').find(|w| w.ends_with(suffix) && !w.contains(' '))
}

/// The model of a teammate asked for a plan first. It tries to write at
/// once (troupe refuses), then does what the plan-mode instructions in its
/// message say: submit the plan with the tool they name, revise a rejected one.
struct Planner {
    file: String,
}

impl Responder for Planner {
    fn respond(&self, c: &Conversation) -> Turn {
        let write = || Turn::tool("Write", json!({"file_path": self.file, "content": "{\"hello\": \"world\"}\n"}));
        let Some(last) = c.results.last() else {
            return Turn::tool(offered(c, "troupe__read_messages"), json!({}));
        };
        let told = c.results.first().expect("the inbox");
        let submit = named(told, "troupe__request_plan_approval").expect("the plan-mode message names the tool");
        assert!(c.tools.iter().any(|t| t == submit), "troupe named {submit}, the engine offers {:?}", c.tools);
        let plan = |text: &str| Turn::tool(submit, json!({"plan": text, "wait_seconds": 60}));
        if c.results.iter().any(|r| r.contains("\"approved\":true")) {
            return if last.contains("\"approved\":true") {
                write()
            } else {
                Turn::text("Done: greeting.json written.")
            };
        }
        if last.contains("\"approved\":false") {
            return plan("1. write data/greeting.json with a polite hello");
        }
        if last.contains("plan mode:") {
            return plan("1. write data/greeting.json");
        }
        write()
    }
}

/// Polls `troupe approve --list` until a plan from `agent` waits; its id.
fn pending(p: &TestProject, agent: &str, child: &mut Child) -> String {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let list = json(&p.troupe().args(["--json", "approve", "--list"]).output().unwrap());
        if let Some(plan) = list.as_array().unwrap().iter().find(|m| m["from"] == agent) {
            return plan["id"].to_string();
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the agent ended ({status}) without submitting a plan");
        }
        assert!(Instant::now() < deadline, "no plan from {agent} arrived");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn plan_mode_denies_a_real_claude_write_until_a_person_approves_its_revised_plan() {
    let p = project();
    let file = p.path(FILE);
    let stub = AnthropicStub::with_responder(Planner { file: file.display().to_string() });
    let claude = Claude::new(&stub.url());
    let sent =
        p.troupe().args(["--json", "msg", "send", "planner-1", "Write greeting.json", "--plan-mode"]).output().unwrap();
    assert!(sent.status.success(), "{}", String::from_utf8_lossy(&sent.stderr));
    let request = json(&sent)[0]["id"].as_i64().unwrap();

    let mut child = start(&p, &claude, &["--id", "planner-1", "Read your messages and do what they ask."]);
    let first = pending(&p, "planner-1", &mut child);
    assert!(!file.exists(), "nothing is written before a plan is approved");
    p.troupe().args(["reject", &first, "say hello politely"]).assert().success();
    let second = pending(&p, "planner-1", &mut child);
    assert_ne!(first, second, "the revised plan is a new plan");
    p.troupe().args(["approve", &second]).assert().success();
    finish(child);

    let told: String = stub.model_requests().iter().map(Value::to_string).collect();
    let written = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{e}: {told}"));
    assert_eq!(written, "{\"hello\": \"world\"}\n", "approved: the write went through");
    assert!(told.contains("plan mode: submit your plan with request_plan_approval and wait for approval"), "{told}");
    assert!(told.contains(&format!("message {request} from user asked for a plan first")), "{told}");
    assert!(told.contains("say hello politely"), "the rejection's reason reached the model");
    // The plans answered the plan-mode message, and nothing waits any more.
    let store = SqliteStore::open(&Layout::new(p.root()).database_file()).unwrap();
    let kinds: Vec<String> = store.thread(request).unwrap().iter().map(|m| m.kind.as_str().to_string()).collect();
    assert_eq!(kinds, ["text", "plan", "plan_decision", "plan", "plan_decision"]);
    assert_eq!(json(&p.troupe().args(["--json", "approve", "--list"]).output().unwrap()), json!([]));
    let denials = std::fs::read_to_string(p.path(".troupe/state/denials.jsonl")).unwrap();
    assert!(denials.contains("plan mode:"), "{denials}");
}

/// The model of a coordinator in delegate mode: it tries to write and to
/// lock a file (troupe refuses both), then does what its delegate
/// instructions say: creates a board task and assigns it to a teammate, with
/// the tools the prompt names.
struct Coordinator {
    file: String,
}

impl Responder for Coordinator {
    fn respond(&self, c: &Conversation) -> Turn {
        let tool = |suffix: &str| {
            let name = named(&c.prompt, suffix).unwrap_or_else(|| panic!("the prompt names no {suffix}"));
            assert!(c.tools.iter().any(|t| t == name), "troupe named {name}, the engine offers {:?}", c.tools);
            name.to_string()
        };
        match c.turns {
            0 => Turn::tool("Write", json!({"file_path": self.file, "content": "{}\n"})),
            1 => Turn::tool(offered(c, "troupe__lock_file"), json!({"path": FILE})),
            2 => {
                Turn::tool(tool("troupe__board_create"), json!({"summary": "write greeting.json", "task_id": "greet"}))
            }
            3 => Turn::tool(tool("troupe__board_assign"), json!({"task_id": "greet", "agent": "builder-2"})),
            _ => Turn::text("Delegated greeting.json to builder-2."),
        }
    }
}

#[test]
fn a_delegate_coordinator_is_refused_writes_and_locks_and_delegates_through_the_board() {
    let p = project();
    let file = p.path(FILE);
    let stub = AnthropicStub::with_responder(Coordinator { file: file.display().to_string() });
    let claude = Claude::new(&stub.url());
    let child = start(&p, &claude, &["--id", "coord-1", "--delegate-mode", "Get greeting.json written."]);
    finish(child);

    assert!(!file.exists(), "the coordinator's write was refused");
    let requests = stub.model_requests();
    assert!(requests[0].to_string().contains("Delegate mode: you are the coordinator"), "the instructions");
    let told: String = requests.iter().map(Value::to_string).collect();
    assert!(
        told.contains("delegate mode: a coordinator does not write files or run commands (Write refused)"),
        "{told}"
    );
    assert!(told.contains("delegate mode: a coordinator takes no file locks (lock_file refused)"), "{told}");
    assert_eq!(json(&p.troupe().args(["--json", "locks"]).output().unwrap()), json!([]), "no lock was taken");
    let board = json(&p.troupe().args(["--json", "board", "list"]).output().unwrap());
    let task = board.as_array().unwrap().iter().find(|t| t["id"] == "greet").unwrap_or_else(|| panic!("{board}"));
    assert_eq!(
        (task["created_by"].as_str(), task["assignee"].as_str()),
        (Some("coord-1"), Some("builder-2")),
        "{task}"
    );
}
