//! troupe as an A2A 1.0 server, tested with the official Python client
//! (`a2a-sdk` 1.x, scenarios in `a2a_client.py`) against `troupe serve`, and
//! one test per MUST of the specification's operations section (§3), written
//! from the specification with raw requests (the `rpc` scenario).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use troupe_core::layout::Layout;
use troupe_store::{Board, NewAgent, Registry, SqliteStore};
use troupe_testkit::peers;

use crate::support::TestProject;

const CLIENT: &str = include_str!("a2a_client.py");
const JSONRPC: &str = "JSONRPC";
const REST: &str = "HTTP+JSON";

/// `troupe serve` on a free loopback port, stopped (SIGTERM) when dropped.
pub(crate) struct Server {
    child: Child,
    pub(crate) base: String,
}

impl Server {
    pub(crate) fn start(p: &TestProject, token: Option<&str>) -> Server {
        let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("troupe"));
        cmd.arg("-C").arg(p.root()).args(["serve", "--bind", "127.0.0.1:0"]);
        cmd.env_remove("TROUPE_TOKEN").env("NO_COLOR", "1").stdout(Stdio::piped()).stderr(Stdio::null());
        if let Some(t) = token {
            cmd.env("TROUPE_TOKEN", t);
        }
        let mut child = cmd.spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let base =
            line.trim().strip_prefix("serving on ").unwrap_or_else(|| panic!("no address: {line:?}")).to_string();
        Server { child, base }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("kill").arg(self.child.id().to_string()).status();
        let _ = self.child.wait();
    }
}

/// Run a scenario of the Python client; its JSON document.
pub(crate) fn client(dir: &Path, scenario: &str, args: Value) -> Value {
    let script = dir.join("a2a_client.py");
    std::fs::write(&script, CLIENT).unwrap();
    let out = Command::new(peers::python()).arg(&script).arg(scenario).arg(args.to_string()).output().unwrap();
    assert!(
        out.status.success(),
        "python {scenario} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

/// The Python client running in the background (scenarios that wait for the test).
pub(crate) fn client_in_background(dir: &Path, scenario: &str, args: Value) -> Child {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let script = dir.join(format!("a2a_client_{scenario}_{n}.py"));
    std::fs::write(&script, CLIENT).unwrap();
    Command::new(peers::python())
        .arg(&script)
        .arg(scenario)
        .arg(args.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

pub(crate) fn finish(child: Child) -> Value {
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "python failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

pub(crate) fn store(p: &TestProject) -> SqliteStore {
    SqliteStore::open_project(&Layout::new(p.root())).unwrap()
}

pub(crate) fn wait_for_file(path: &Path) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(s) = std::fs::read_to_string(path)
            && !s.is_empty()
        {
            return s;
        }
        assert!(Instant::now() < deadline, "{} never appeared", path.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn post_task() -> Value {
    json!({"x-troupe-skill": "post-task"})
}

pub(crate) fn register(p: &TestProject, id: &str, role: &str) {
    let mut agent = NewAgent::new(id, role, "scripted");
    agent.pid = Some(std::process::id());
    store(p).register(agent).unwrap();
}

/// The states of the status updates of a stream, in order.
fn states(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| e["task"]["status"]["state"].as_str().or(e["statusUpdate"]["status"]["state"].as_str()))
        .map(str::to_string)
        .collect()
}

#[test]
fn the_sdk_discovers_the_card_with_both_bindings_and_the_skills() {
    let p = TestProject::new();
    let server = Server::start(&p, None);
    let card = &client(p.root(), "card", json!({"base": server.base}))["card"];
    assert_eq!(card["name"], "troupe");
    let interfaces = card["supportedInterfaces"].as_array().unwrap();
    let find = |binding: &str| interfaces.iter().find(|i| i["protocolBinding"] == binding).unwrap().clone();
    assert_eq!(find(JSONRPC)["url"], format!("{}/a2a/jsonrpc", server.base));
    assert_eq!(find(REST)["url"], format!("{}/a2a/rest", server.base));
    assert!(interfaces.iter().all(|i| i["protocolVersion"] == "1.0"), "{interfaces:?}");
    assert_eq!(card["capabilities"]["streaming"], true);
    assert_eq!(card["capabilities"]["pushNotifications"], true);
    assert!(card["capabilities"].get("extendedAgentCard").is_none_or(|v| v == false), "no token: no extended card");
    let extension = &card["capabilities"]["extensions"][0];
    assert!(extension["uri"].as_str().unwrap().contains("x-troupe"), "{extension}");
    let skills: Vec<&str> = card["skills"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert_eq!(skills, ["run-feature", "post-task", "message-teammate"]);
}

#[test]
fn send_message_get_task_and_list_tasks_over_json_rpc_and_http_json() {
    let p = TestProject::new();
    let server = Server::start(&p, None);
    for (i, binding) in [JSONRPC, REST].into_iter().enumerate() {
        let subject = format!("Write the guide {i}");
        let seen = client(
            p.root(),
            "send_get_list",
            json!({"base": server.base, "binding": binding, "text": format!("{subject}\nwith examples"), "metadata": post_task()}),
        );
        let sent = &seen["sent"];
        assert_eq!(sent["status"]["state"], "TASK_STATE_SUBMITTED", "{binding}: pending on the board: {sent:#}");
        let board_id = sent["metadata"]["x-troupe-board-task"].as_str().unwrap().to_string();
        let on_board = store(&p).task(&board_id).unwrap();
        assert_eq!(on_board.subject, subject);
        assert_eq!(on_board.description, "with examples");
        assert_eq!(on_board.created_by, "a2a");
        assert_eq!(sent["artifacts"][0]["name"], "board-task");
        let got = &seen["got"];
        assert_eq!(got["id"], sent["id"]);
        assert_eq!(got["history"].as_array().unwrap().len(), 1, "historyLength 1: {got:#}");
        let listed = seen["listed"]["tasks"].as_array().unwrap();
        assert_eq!(listed.len(), i + 1, "{binding}");
        assert_eq!(listed[0]["id"], sent["id"], "newest first");
        assert!(listed.iter().all(|t| t.get("artifacts").is_none()), "artifacts only when asked for");
        assert_eq!(seen["missing"]["type"], "TaskNotFoundError", "{seen:#}");
    }
}

/// Board and A2A states map one way, and the stream of SendStreamingMessage
/// starts with the task and ends at its terminal state.
#[test]
fn streaming_follows_the_board_task_from_submitted_to_completed() {
    let p = TestProject::new();
    let server = Server::start(&p, None);
    let started = p.path("started");
    let stream = client_in_background(
        p.root(),
        "stream",
        json!({"base": server.base, "text": "Fix the login bug", "metadata": post_task(), "started": started}),
    );
    let task_id = wait_for_file(&started);
    let board_id = {
        let s = store(&p);
        let t = troupe_store::A2aTasks::a2a_task(&s, &task_id).unwrap().unwrap();
        t.body["metadata"]["x-troupe-board-task"].as_str().unwrap().to_string()
    };
    let s = store(&p);
    s.claim(&board_id, "builder-7").unwrap();
    s.complete(&board_id, "builder-7").unwrap();
    let events = finish(stream)["events"].as_array().unwrap().clone();
    assert!(events[0].get("task").is_some(), "the stream starts with the task: {events:#?}");
    assert_eq!(states(&events), ["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_COMPLETED"], "{events:#?}");
    let last = events.last().unwrap();
    assert!(last["statusUpdate"]["status"]["message"]["parts"][0]["text"].as_str().unwrap().contains("builder-7"));
}

#[test]
fn a_task_the_board_refuses_is_rejected() {
    let p = TestProject::new();
    let server = Server::start(&p, None);
    let metadata = json!({"x-troupe-skill": "post-task", "x-troupe-blocked-by": ["no-such-task"]});
    let seen =
        client(p.root(), "blocking", json!({"base": server.base, "text": "Depends on nothing", "metadata": metadata}));
    let task = &seen["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_REJECTED", "{task:#}");
    let why = task["status"]["message"]["parts"][0]["text"].as_str().unwrap();
    assert!(why.contains("no-such-task"), "{why}");
}

#[test]
fn an_unsupported_version_is_refused_with_the_specs_error() {
    let p = TestProject::new();
    let server = Server::start(&p, None);
    let seen = client(p.root(), "version", json!({"base": server.base, "metadata": post_task()}));
    for v in ["0.3", "2.0"] {
        assert_eq!(seen[v]["type"], "VersionNotSupportedError", "{v}: {seen:#}");
        assert!(seen[v]["text"].as_str().unwrap().contains(v), "{v}: {seen:#}");
    }
    // Nothing was created by a refused request.
    assert!(troupe_store::Board::list(&store(&p), &Default::default()).unwrap().is_empty());
}

#[test]
fn plan_mode_waits_in_input_required_until_a_follow_up_approves() {
    let p = TestProject::new();
    register(&p, "builder-1", "builder");
    let server = Server::start(&p, None);
    let metadata =
        json!({"x-troupe-skill": "message-teammate", "x-troupe-agent": "builder-1", "x-troupe-plan-mode": true});
    let seen = client(
        p.root(),
        "plan_round_trip",
        json!({
            "base": server.base, "text": "Add tests for the parser", "metadata": metadata,
            "troupe": assert_cmd::cargo::cargo_bin("troupe"), "root": p.root(),
        }),
    );
    assert_eq!(seen["sent"]["status"]["state"], "TASK_STATE_WORKING", "{seen:#}");
    let waiting = &seen["waiting"];
    assert_eq!(waiting["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{waiting:#}");
    let plan = waiting["artifacts"].as_array().unwrap().iter().find(|a| a["name"] == "plan").unwrap();
    assert!(plan["parts"][0]["text"].as_str().unwrap().contains("write the parser tests"));
    assert_eq!(seen["undecided"]["type"], "InvalidParamsError", "{seen:#}");
    assert!(seen["undecided"]["text"].as_str().unwrap().contains("approve"), "{seen:#}");
    assert_eq!(seen["mismatched"]["type"], "InvalidParamsError", "{seen:#}");
    assert!(seen["mismatched"]["text"].as_str().unwrap().contains("contextId"), "{seen:#}");
    assert_eq!(seen["after_decision"]["status"]["state"], "TASK_STATE_WORKING");
    let teammate = &seen["teammate"];
    assert_eq!(teammate["decision"]["approved"], true, "the teammate got the decision: {teammate:#}");
    // Held to plan mode by its hooks, not only asked: a shell command is
    // refused until the plan is approved, then allowed.
    let held = teammate["held"].as_str().unwrap();
    assert!(held.contains(troupe_gate::modes::PLAN_MODE_REASON) && held.contains("\"deny\""), "{held}");
    assert!(!teammate["released"].as_str().unwrap().contains("deny"), "{teammate:#}");
    assert!(teammate["received"].as_str().unwrap().contains("Add tests for the parser"));
    let done = &seen["done"];
    assert_eq!(done["status"]["state"], "TASK_STATE_COMPLETED", "{done:#}");
    let answer = done["artifacts"].as_array().unwrap().iter().find(|a| a["name"] == "answer").unwrap();
    assert_eq!(answer["parts"][0]["text"], "done: 2 tests added");
}

#[test]
fn cancel_task_ends_a_message_task_and_a_finished_task_takes_no_more() {
    let p = TestProject::new();
    register(&p, "builder-2", "builder");
    let server = Server::start(&p, None);
    let metadata = json!({"x-troupe-skill": "message-teammate", "x-troupe-agent": "builder-2"});
    let sent = client(
        p.root(),
        "send_get_list",
        json!({"base": server.base, "binding": REST, "text": "Please look at issue 4", "metadata": metadata}),
    );
    let id = sent["sent"]["id"].as_str().unwrap();
    let seen = client(p.root(), "cancel", json!({"base": server.base, "binding": REST, "task": id}));
    assert_eq!(seen["task"]["status"]["state"], "TASK_STATE_CANCELED", "{seen:#}");
    assert_eq!(seen["again"]["type"], "TaskNotCancelableError", "a canceled task is not cancelable: {seen:#}");
    assert_eq!(seen["follow_up"]["type"], "UnsupportedOperationError", "nor does it take messages: {seen:#}");
    // The teammate was told, in its mailbox.
    let inbox = troupe_store::Mailbox::inbox(&store(&p), "builder-2", false).unwrap();
    assert_eq!(inbox.len(), 2, "{inbox:#?}");
    assert!(inbox.iter().any(|m| m.body.starts_with("Withdrawn")));
}

/// A project whose runs use the scripted engine without reviews.
fn run_project(script: &str) -> TestProject {
    let p = crate::lead::project(script);
    let config = p.path(".troupe/config.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    // The template already has a `[review]` table (a second one is invalid
    // TOML): set the key in it.
    let text = text.replacen("[review]\n", "[review]\nin_run = false\n", 1);
    assert!(text.contains("in_run = false"), "no [review] table in the template: {text}");
    std::fs::write(&config, text).unwrap();
    crate::lead::git(p.root(), &["commit", "-qam", "no reviews"]);
    p
}

fn run_feature() -> Value {
    json!({"x-troupe-skill": "run-feature", "x-troupe-feature": "login", "x-troupe-engine": "scripted"})
}

/// run-feature starts the real Lead (`troupe run`); a blocking SendMessage
/// returns when it ends, with a status update per stage in the history and
/// design.md, the plan and the commits as artifacts.
#[test]
fn run_feature_runs_the_lead_and_reports_stages_and_artifacts() {
    let p = run_project(&crate::lead::full_script());
    let server = Server::start(&p, None);
    let seen =
        client(p.root(), "blocking", json!({"base": server.base, "text": "users log in", "metadata": run_feature()}));
    let task = &seen["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task:#}");
    let said: Vec<&str> =
        task["history"].as_array().unwrap().iter().filter_map(|m| m["parts"][0]["text"].as_str()).collect();
    for stage in ["stage: design", "stage: plan", "stage: build"] {
        assert!(said.iter().any(|s| s.starts_with(stage)), "{stage} missing: {said:#?}");
    }
    let artifact = |name: &str| {
        task["artifacts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["name"] == name)
            .unwrap_or_else(|| panic!("no {name}: {task:#}"))
            .clone()
    };
    assert_eq!(artifact("design")["parts"][0]["text"], "# Design\n");
    assert!(artifact("plan")["parts"][0]["text"].as_str().unwrap().contains("execution:"));
    let commits = artifact("commits")["parts"][0]["data"]["commits"].as_array().unwrap().clone();
    // Every commit of the run, oldest first, as `<short sha> <subject>`: the
    // design, each group's merge, the implementation and the handover notes
    // (docs/lead.md), i.e. everything on the line after the project's own two commits.
    let log = crate::lead::git(p.root(), &["log", "--first-parent", "--reverse", "--format=%h %s"]);
    let made: Vec<&str> = log.lines().skip(2).collect();
    let commits: Vec<&str> = commits.iter().map(|c| c.as_str().unwrap()).collect();
    assert_eq!(commits, made, "the run's commits: {log}");
    assert!(commits[0].ends_with("login: design (a design)"), "{commits:?}");
}

/// CancelTask stops a run the way Ctrl-C does (shutdown requests, then
/// signals): the task ends CANCELED and nothing of the run keeps running.
#[test]
fn cancel_task_stops_a_run_gracefully() {
    let busy = "  builder/G1:\n    - - run: \"echo $$ > a.txt; exec sleep 60\"\n      - report: \"BUILDER_COMPLETE\\nTasks completed: 1.1\\nFiles: a.txt\\nTests: ok\"\n";
    let p = run_project(&format!("agents:{}{}{busy}", crate::lead::DESIGN, crate::lead::TASKS));
    let server = Server::start(&p, None);
    let sent = client(
        p.root(),
        "send_get_list",
        json!({"base": server.base, "binding": JSONRPC, "text": "users log in", "metadata": run_feature()}),
    );
    assert_eq!(sent["sent"]["status"]["state"], "TASK_STATE_WORKING", "{sent:#}");
    let id = sent["sent"]["id"].as_str().unwrap();
    // G1's Builder writes in its own worktree.
    let busy_pid: i32 = wait_for_file(&p.path(".troupe/state/worktrees/login/G1/a.txt")).trim().parse().unwrap();
    let seen = client(p.root(), "cancel", json!({"base": server.base, "task": id}));
    let task = &seen["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_CANCELED", "{task:#}");
    assert!(!Path::new(&format!("/proc/{busy_pid}")).exists() || is_zombie(busy_pid), "the Builder still runs");
    let builder = store(&p).agents().unwrap().into_iter().find(|a| a.role == "builder").unwrap();
    assert_eq!(builder.status, troupe_store::AgentStatus::Interrupted, "{builder:?}");
}

fn is_zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .is_ok_and(|s| s.lines().any(|l| l.starts_with("State:") && l.contains('Z')))
}
