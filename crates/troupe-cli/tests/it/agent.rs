//! `troupe agent run/list/logs/stop`, with the real agent CLIs against their
//! stub model servers, and with the scripted fake agent for failures and stops.

use std::ffi::OsString;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use troupe_testkit::anthropic::AnthropicStub;
use troupe_testkit::chat::ChatStub;
use troupe_testkit::claude::Claude;
use troupe_testkit::codex::{Codex, add_file_patch};
use troupe_testkit::fake_agent::{FakeAgent, process_running, read_pid};
use troupe_testkit::gemini::GeminiStub;
use troupe_testkit::gemini_cli::GeminiCli;
use troupe_testkit::opencode::OpenCode;
use troupe_testkit::responses::ResponsesStub;
use troupe_testkit::{Script, Turn, peers};

use crate::support::{TestProject, json};

fn config(p: &TestProject, text: &str) {
    std::fs::write(p.path(".troupe/config.toml"), text).unwrap();
}

/// `troupe --json agent run --bare ...` with `env` (the engine alone, no role
/// wiring); returns the JSON lines and the output.
fn run_agent(p: &TestProject, env: Vec<(OsString, OsString)>, args: &[&str]) -> (Vec<Value>, std::process::Output) {
    let mut cmd = p.troupe();
    cmd.envs(env).args(["--json", "agent", "run", "--bare"]).args(args).timeout(Duration::from_secs(120));
    let out = cmd.output().unwrap();
    let lines = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}")))
        .collect();
    (lines, out)
}

fn tool_uses(lines: &[Value]) -> Vec<String> {
    lines
        .iter()
        .filter(|l| l["kind"] == "event" && l["event"]["type"] == "tool_use")
        .map(|l| l["event"]["name"].as_str().unwrap().to_string())
        .collect()
}

/// The final `exited` record's outcome, asserting success.
fn success(lines: &[Value], out: &std::process::Output) -> Value {
    assert!(
        out.status.success(),
        "troupe agent run failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    let last = lines.last().expect("records");
    assert_eq!(last["kind"], "exited");
    assert_eq!(last["outcome"]["type"], "success", "{last}");
    last["outcome"].clone()
}

fn shell_ok(lines: &[Value]) -> bool {
    lines.iter().any(|l| {
        l["event"]["type"] == "tool_result"
            && l["event"]["ok"] == true
            && l["event"]["output"].as_str().is_some_and(|o| o.contains("shell-ok"))
    })
}

#[test]
fn claude_code_writes_a_file_and_runs_a_command_through_troupe() {
    let p = TestProject::new();
    let file = p.path("hello.txt");
    let stub = AnthropicStub::start(Script::new([
        Turn::tool("Write", json!({"file_path": file, "content": "hi from claude\n"})),
        Turn::tool("Bash", json!({"command": "cat hello.txt && echo shell-ok", "description": "show"})),
        Turn::text("Done. Wrote hello.txt"),
        Turn::text("Resumed and still done."),
    ]));
    let claude = Claude::new(&stub.url());
    config(&p, &format!("[engines.commands]\nclaude = \"{}\"\n", peers::bin("claude").display()));
    let (lines, out) =
        run_agent(&p, claude.env(), &["--role", "builder", "--id", "b1", "--feature", "login", "write hello"]);
    let outcome = success(&lines, &out);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "hi from claude\n");
    assert_eq!(tool_uses(&lines), ["Write", "Bash"]);
    assert!(shell_ok(&lines));
    assert_eq!(outcome["result"], "Done. Wrote hello.txt");
    assert_eq!(outcome["stats"]["num_turns"], 3);
    assert!(outcome["stats"]["duration_ms"].as_u64().unwrap() > 0);
    assert!(outcome["stats"]["total_cost_usd"].as_f64().unwrap() > 0.0);
    let spawned = &lines[0];
    assert_eq!(
        (spawned["kind"].as_str(), spawned["engine"].as_str(), spawned["model"].as_str()),
        (Some("spawned"), Some("claude"), Some("sonnet"))
    );
    // The model request carried the seed's arguments.
    let cmdline: Vec<&str> = spawned["command"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    assert!(
        cmdline.contains(&"--disallowedTools=AskUserQuestion") && cmdline.contains(&"--dangerously-skip-permissions")
    );

    // The registry has it, with its session; its log replays.
    let list = json(&p.troupe().args(["--json", "agent", "list"]).output().unwrap());
    let b1 = list.as_array().unwrap().iter().find(|a| a["id"] == "b1").unwrap().clone();
    assert_eq!(
        (b1["status"].as_str(), b1["engine"].as_str(), b1["feature"].as_str()),
        (Some("DONE"), Some("claude"), Some("login"))
    );
    let session = b1["session_id"].as_str().unwrap().to_string();
    // The usage ledger booked every model turn once, and adds up to Claude's own total.
    let reported = outcome["stats"]["total_cost_usd"].as_f64().unwrap();
    let cost = json(&p.troupe().args(["--json", "cost", "--by", "agent"]).output().unwrap());
    let group = &cost["groups"][0];
    assert_eq!((group["key"].as_str(), cost["groups"].as_array().unwrap().len()), (Some("b1"), 1), "{cost}");
    assert!((group["cost_usd"].as_f64().unwrap() - reported).abs() <= reported * 0.01, "{cost} vs {reported}");
    assert!(group["turns"].as_u64().unwrap() >= 3, "one row per model turn: {cost}");
    // A spec of that feature shows what was spent on it in `troupe status`.
    let made = p.troupe().args(["spec", "new", "login"]).output().unwrap();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let status = json(&p.troupe().args(["--json", "status", "login"]).output().unwrap());
    let shown = status[0]["cost_usd"].as_f64().or(status["cost_usd"].as_f64());
    assert!(shown.is_some_and(|c| (c - reported).abs() <= reported * 0.01), "status shows the ledger's cost: {status}");
    let logs = p.troupe().args(["agent", "logs", "b1"]).output().unwrap();
    let text = String::from_utf8_lossy(&logs.stdout);
    assert!(text.contains("→ Write") && text.contains("→ Bash") && text.contains("success"), "{text}");

    // Resume the session with a new prompt: the stub sees the earlier conversation.
    let (lines, out) =
        run_agent(&p, claude.env(), &["--role", "builder", "--id", "b1-again", "--resume", &session, "are you done?"]);
    let outcome = success(&lines, &out);
    assert_eq!(outcome["result"], "Resumed and still done.");
    let last_req = stub.model_requests().into_iter().rev().find(|r| r["tools"].is_array()).unwrap();
    assert!(last_req.to_string().contains("shell-ok"), "the resumed conversation carries the first run");
}

#[test]
fn gemini_cli_writes_a_file_and_runs_a_command_through_troupe() {
    let p = TestProject::new();
    let file = p.path("hello.txt");
    let stub = GeminiStub::start(Script::new([
        Turn::tool("write_file", json!({"file_path": file, "content": "hi from gemini\n"})),
        Turn::tool("run_shell_command", json!({"command": "cat hello.txt && echo shell-ok", "description": "show"})),
        Turn::text("Done. Wrote hello.txt"),
        Turn::text("Resumed."),
    ]));
    let gemini = GeminiCli::new(&stub.url());
    config(&p, &format!("[engines.commands]\ngemini = \"{}\"\n", peers::bin("gemini").display()));
    let (lines, out) = run_agent(&p, gemini.env(), &["--role", "builder", "--engine", "gemini", "write hello"]);
    let outcome = success(&lines, &out);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "hi from gemini\n");
    assert_eq!(tool_uses(&lines), ["write_file", "run_shell_command"]);
    assert!(shell_ok(&lines));
    assert_eq!(outcome["result"], "Done. Wrote hello.txt");
    assert_eq!(outcome["stats"]["num_turns"], 3);
    let session = outcome["session_id"].as_str().unwrap().to_string();

    // Resume the session by id: the stub sees the first run's conversation.
    let (lines, out) =
        run_agent(&p, gemini.env(), &["--role", "builder", "--engine", "gemini", "--resume", &session, "again"]);
    let outcome = success(&lines, &out);
    assert_eq!(outcome["session_id"], session.as_str());
    let last = stub.model_requests().into_iter().last().unwrap();
    assert!(last.to_string().contains("shell-ok"), "the resumed conversation carries the first run");
    // And the first prompt (role prompt, assignment, task): Gemini drops a
    // resumed user message that starts with hook context.
    assert!(last.to_string().contains("write hello"), "the resumed conversation lost its first prompt: {last}");
}

#[test]
fn codex_writes_a_file_and_runs_a_command_through_troupe() {
    let p = TestProject::new();
    let stub = ResponsesStub::start(Script::new([
        Turn::freeform_tool("apply_patch", add_file_patch("hello.txt", "hi from codex\n")),
        Turn::tool("exec_command", json!({"cmd": "cat hello.txt && echo shell-ok"})),
        Turn::text("Done. Wrote hello.txt"),
    ]));
    let codex = Codex::new(&stub.url());
    config(&p, &format!("[engines.commands]\ncodex = \"{}\"\n", peers::bin("codex").display()));
    let (lines, out) = run_agent(&p, codex.env(), &["--role", "builder", "--engine", "codex", "write hello"]);
    let outcome = success(&lines, &out);
    assert_eq!(std::fs::read_to_string(p.path("hello.txt")).unwrap(), "hi from codex\n");
    assert_eq!(tool_uses(&lines), ["file_change", "command_execution"]);
    // Codex's stream names the patched file only: what it holds is logged after the change, for replay.
    let wrote: Vec<&Value> = lines.iter().filter(|l| l["kind"] == "wrote").collect();
    assert_eq!(wrote.len(), 1, "{lines:?}");
    assert_eq!(wrote[0]["files"][0]["content"], "hi from codex\n");
    assert!(shell_ok(&lines));
    assert_eq!(outcome["result"], "Done. Wrote hello.txt");
    assert_eq!(outcome["stats"]["num_turns"], 1);
    assert!(outcome["stats"]["duration_ms"].as_u64().unwrap() > 0, "filled from the wall clock");
    let thread = outcome["session_id"].as_str().unwrap().to_string();

    // `codex exec resume <thread>`: same thread, the earlier conversation is sent again.
    let (lines, out) =
        run_agent(&p, codex.env(), &["--role", "builder", "--engine", "codex", "--resume", &thread, "again"]);
    let outcome = success(&lines, &out);
    assert_eq!(outcome["session_id"], thread.as_str());
    let last = stub.model_requests().into_iter().last().unwrap();
    assert!(last.to_string().contains("shell-ok"), "the resumed conversation carries the first run");
}

#[test]
fn opencode_writes_a_file_and_runs_a_command_through_troupe() {
    let p = TestProject::new();
    let file = p.path("hello.txt");
    let stub = ChatStub::start(Script::new([
        Turn::tool("write", json!({"filePath": file, "content": "hi from opencode\n"})),
        Turn::tool("bash", json!({"command": "cat hello.txt && echo shell-ok", "description": "Show file"})),
        Turn::text("Done. Wrote hello.txt"),
    ]));
    let opencode = OpenCode::new(&stub.url());
    config(&p, &format!("[engines.commands]\nopencode = \"{}\"\n", peers::bin("opencode").display()));
    let (lines, out) = run_agent(&p, opencode.env(), &["--role", "builder", "--engine", "opencode", "write hello"]);
    let outcome = success(&lines, &out);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "hi from opencode\n");
    assert_eq!(tool_uses(&lines), ["write", "bash"]);
    assert!(shell_ok(&lines));
    assert_eq!(outcome["result"], "Done. Wrote hello.txt");
    assert_eq!(outcome["stats"]["num_turns"], 3);
    let session = outcome["session_id"].as_str().unwrap().to_string();

    // `opencode run -s <session>`: the same session goes on.
    let (lines, out) =
        run_agent(&p, opencode.env(), &["--role", "builder", "--engine", "opencode", "--resume", &session, "again"]);
    let outcome = success(&lines, &out);
    assert_eq!(outcome["session_id"], session.as_str());
    let last = stub.model_requests().into_iter().last().unwrap();
    assert!(last.to_string().contains("shell-ok"), "the resumed conversation carries the first run");
}

fn fake_engine(p: &TestProject, agent: &Path) {
    config(p, &format!("[engines.custom.fake]\ncommand = \"{}\"\nformat = \"claude\"\n", agent.display()));
}

#[test]
fn a_failing_agent_exits_non_zero_with_the_reason_and_is_failed_in_the_registry() {
    let p = TestProject::new();
    let agent = FakeAgent::new().stderr("boom: quota exceeded").exit(3).install();
    fake_engine(&p, agent.path());
    let out = p
        .troupe()
        .args(["agent", "run", "--role", "builder", "--engine", "fake", "--id", "f1", "go"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("agent f1 ended with error") && err.contains("status 3") && err.contains("quota exceeded"),
        "{err}"
    );
    assert!(err.contains("troupe agent logs f1"));
    let list = json(&p.troupe().args(["--json", "agent", "list"]).output().unwrap());
    assert_eq!(list[0]["status"], "FAILED");
}

#[test]
fn the_prompt_can_come_from_stdin_and_unknown_engines_fall_back_to_claude() {
    let p = TestProject::new();
    let got = p.path("prompt.txt");
    let agent = FakeAgent::new().read_stdin(&got).emit_file(&fixture("claude-write-success")).install();
    config(
        &p,
        &format!(
            "[engines.custom.fake]\ncommand = \"{}\"\nprompt = \"stdin\"\nformat = \"claude\"\n",
            agent.path().display()
        ),
    );
    p.troupe()
        .args(["agent", "run", "--role", "builder", "--engine", "fake", "--bare"])
        .write_stdin("from stdin")
        .assert()
        .success()
        .stdout("Done. Wrote hello.txt\n");
    assert_eq!(std::fs::read_to_string(&got).unwrap(), "from stdin");

    // An unknown engine in config: claude, with one warning (here claude is the fake agent too).
    config(
        &p,
        &format!("[engines]\ndefault = \"nope\"\n[engines.commands]\nclaude = \"{}\"\n", agent.path().display()),
    );
    let out = p.troupe().args(["agent", "run", "--role", "builder", "hi"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.matches("unknown engine 'nope'").count(), 1, "{err}");
    assert!(err.contains("using 'claude' instead"), "{err}");
}

#[test]
fn an_unknown_engine_on_the_command_line_is_an_error_with_a_did_you_mean() {
    let p = TestProject::new();
    let agent = FakeAgent::new().write_pid(&p.path("ran.pid")).install();
    config(&p, &format!("[engines.commands]\nclaude = \"{}\"\n", agent.path().display()));
    let out = p.troupe().args(["agent", "run", "--role", "builder", "--engine", "gemnii", "hi"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "a usage error");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown engine 'gemnii' (did you mean 'gemini'?)"), "{err}");
    assert!(err.contains("claude, gemini, codex, opencode, scripted"), "{err}");
    assert!(!p.path("ran.pid").exists(), "nothing ran, claude least of all");
}

#[test]
fn a_text_engine_that_exits_zero_succeeds_and_its_output_is_the_report() {
    // README's `aider` example: format = "text", the prompt as the last argument.
    let p = TestProject::new();
    let bin = tempfile::tempdir().unwrap();
    let aider = bin.path().join("aider");
    std::fs::write(&aider, "#!/bin/sh\necho \"Applied edit to hello.py\"\necho \"asked: $3\"\n").unwrap();
    std::fs::set_permissions(&aider, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    config(
        &p,
        &format!(
            "[engines.custom.aider]\ncommand = \"{}\"\nargs = [\"--yes\", \"--message\"]\nformat = \"text\"\n",
            aider.display()
        ),
    );
    p.troupe()
        .args(["agent", "run", "--role", "builder", "--engine", "aider", "--bare", "add hello"])
        .assert()
        .success()
        .stdout("Applied edit to hello.py\nasked: add hello\n");
    let list = json(&p.troupe().args(["--json", "agent", "list"]).output().unwrap());
    assert_eq!(list[0]["status"], "DONE", "{list}");

    // A text engine that fails still fails.
    std::fs::write(&aider, "#!/bin/sh\necho 'no API key' >&2\nexit 1\n").unwrap();
    let out = p.troupe().args(["agent", "run", "--role", "builder", "--engine", "aider", "x"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no API key"));
}

/// `troupe agent run` judges silence by the Lead's rule: an agent that prints
/// nothing for longer than `--hang-timeout` while it starts is within its
/// start-up allowance (`[team] startup_timeout_*`), not unresponsive.
#[test]
fn a_slow_start_is_not_a_hang_for_agent_run() {
    let p = TestProject::new();
    let agent = FakeAgent::new().sleep(1.5).emit_file(&fixture("claude-write-success")).install();
    config(
        &p,
        &format!(
            "[engines.custom.fake]\ncommand = \"{}\"\nformat = \"claude\"\n\n[team]\nstartup_timeout_seconds = 60\n",
            agent.path().display()
        ),
    );
    let (lines, out) =
        run_agent(&p, Vec::new(), &["--role", "builder", "--engine", "fake", "--hang-timeout", "1", "go"]);
    success(&lines, &out);
    let hangs: Vec<&Value> = lines.iter().filter(|l| l["kind"] == "unresponsive").collect();
    assert!(hangs.is_empty(), "1.5 s of start-up against a 1 s hang timeout: {hangs:?}");
}

fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../troupe-engine/tests/fixtures/{name}.jsonl"))
}

#[test]
fn bad_input_is_refused_before_anything_runs() {
    let p = TestProject::new();
    let before = p.snapshot();
    for (args, needle) in [
        (vec!["agent", "run", "--role", "wizard", "x"], "unknown role 'wizard'"),
        (vec!["agent", "run", "--role", "lead", "x"], "the Lead is troupe itself"),
        (vec!["agent", "run", "--role", "builder", "--phase", "deploy", "x"], "unknown phase 'deploy'"),
        (vec!["agent", "run", "--role", "builder", "--id", "../evil", "x"], "invalid agent id"),
        (vec!["agent", "run", "--role", "builder", "  "], "the prompt is empty"),
        (vec!["agent", "logs", "nobody"], "no log for agent 'nobody'"),
    ] {
        let out = p.troupe().args(&args).output().unwrap();
        assert!(!out.status.success(), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(needle),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // A role template that cannot be read was silently replaced by the built-in one.
    let template = p.path(".troupe/roles/builder.md");
    let original = std::fs::read(&template).unwrap();
    std::fs::write(&template, b"# Builder \xff\xfe\n").unwrap();
    let out = p.troupe().args(["agent", "run", "--role", "builder", "--engine", "scripted", "x"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("cannot read the role template") && err.contains("roles/builder.md"), "{err}");
    std::fs::write(&template, original).unwrap();
    config(&p, "[engines.commands]\ncodex = \"/nonexistent/codex\"\n");
    let out = p.troupe().args(["agent", "run", "--role", "builder", "--engine", "codex", "x"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("engine 'codex' is not installed"));
    std::fs::remove_file(p.path(".troupe/config.toml")).unwrap();
    let after = p.snapshot();
    assert_eq!(before.iter().filter(|(f, _)| !f.ends_with("config.toml")).count(), after.len());
}

#[test]
fn stop_escalates_on_the_group_and_the_run_reports_interrupted() {
    let p = TestProject::new();
    // A build output folder: a sandboxed agent may write there.
    std::fs::create_dir_all(p.path("target")).unwrap();
    let gc = p.path("target/grandchild.pid");
    let agent = FakeAgent::new()
        .emit(r#"{"type":"system","subtype":"init","session_id":"s-stop"}"#)
        .ignore_signals()
        .spawn_grandchild(&gc)
        .sleep(60.0)
        .install();
    fake_engine(&p, agent.path());
    std::fs::write(
        p.path(".troupe/config.toml"),
        format!(
            "[shutdown]\ntimeout_ms = 300\n\n[engines.custom.fake]\ncommand = \"{}\"\nformat = \"claude\"\n",
            agent.path().display()
        ),
    )
    .unwrap();
    let bin = assert_cmd::cargo::cargo_bin("troupe");
    let mut run = std::process::Command::new(bin)
        .arg("-C")
        .arg(p.root())
        .args(["--json", "agent", "run", "--role", "builder", "--engine", "fake", "--id", "hang1", "wait"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let grandchild = read_pid(&gc);
    // `agent list --running` sees it.
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let list = json(&p.troupe().args(["--json", "agent", "list", "--running"]).output().unwrap());
        if list.as_array().is_some_and(|a| a.iter().any(|x| x["id"] == "hang1" && x["status"] == "PROCESSING")) {
            break;
        }
        assert!(Instant::now() < until, "the agent never showed up as PROCESSING");
        std::thread::sleep(Duration::from_millis(50));
    }
    let t = Instant::now();
    let out = p.troupe().args(["--json", "agent", "stop", "hang1"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(json(&out)["signal"], "SIGKILL", "it ignores SIGINT and SIGTERM");
    assert!(t.elapsed() < Duration::from_secs(8));
    let status = run.wait().unwrap();
    assert_eq!(status.code(), Some(1));
    let mut stdout = String::new();
    use std::io::Read;
    run.stdout.take().unwrap().read_to_string(&mut stdout).unwrap();
    let last: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(last["outcome"]["type"], "interrupted");
    assert_eq!(last["outcome"]["session_id"], "s-stop");
    assert!(!process_running(grandchild), "no orphaned grandchild");
    let list = json(&p.troupe().args(["--json", "agent", "list"]).output().unwrap());
    assert_eq!(list[0]["status"], "INTERRUPTED");
    // Stopping it again is refused.
    let again = p.troupe().args(["agent", "stop", "hang1"]).output().unwrap();
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stderr).contains("is not running"));
}

#[test]
fn logs_follow_until_the_agent_exits() {
    let p = TestProject::new();
    let agent = FakeAgent::new().sleep(0.5).emit_file(&fixture("claude-write-success")).install();
    fake_engine(&p, agent.path());
    let bin = assert_cmd::cargo::cargo_bin("troupe");
    let mut run = std::process::Command::new(bin)
        .arg("-C")
        .arg(p.root())
        .args(["agent", "run", "--role", "builder", "--engine", "fake", "--id", "f2", "go"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let log = p.path(".troupe/state/logs/f2.jsonl");
    let until = Instant::now() + Duration::from_secs(10);
    while !log.exists() {
        assert!(Instant::now() < until);
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = p
        .troupe()
        .args(["--json", "agent", "logs", "f2", "--follow"])
        .timeout(Duration::from_secs(20))
        .output()
        .unwrap();
    assert!(run.wait().unwrap().success());
    let lines: Vec<Value> =
        String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.first().unwrap()["kind"], "spawned");
    assert_eq!(lines.last().unwrap()["kind"], "exited");
}

#[test]
fn ctrl_c_stops_the_agent_gracefully() {
    let p = TestProject::new();
    std::fs::create_dir_all(p.path("target")).unwrap();
    let ready = p.path("target/agent.pid");
    let agent = FakeAgent::new().exit_on_interrupt().write_pid(&ready).sleep(60.0).install();
    fake_engine(&p, agent.path());
    let bin = assert_cmd::cargo::cargo_bin("troupe");
    let run = std::process::Command::new(bin)
        .arg("-C")
        .arg(p.root())
        .args(["--json", "agent", "run", "--role", "builder", "--engine", "fake", "--id", "cc1", "wait"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let agent_pid = read_pid(&ready);
    // What a terminal's Ctrl-C does to troupe (the agent is in its own group).
    assert!(std::process::Command::new("kill").args(["-INT", &run.id().to_string()]).status().unwrap().success());
    let out = run.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "Ctrl-C exits 130");
    let lines: Vec<Value> =
        String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let signals: Vec<&str> =
        lines.iter().filter(|l| l["kind"] == "stopping").map(|l| l["signal"].as_str().unwrap()).collect();
    assert_eq!(signals, ["SIGINT"], "a well-behaved agent stops at the first signal");
    let last = lines.last().unwrap();
    assert_eq!((last["exit_code"].as_i64(), last["outcome"]["type"].as_str()), (Some(130), Some("interrupted")));
    assert!(!process_running(agent_pid));
    let list = json(&p.troupe().args(["--json", "agent", "list"]).output().unwrap());
    assert_eq!(list[0]["status"], "INTERRUPTED", "Ctrl-C is an interruption, not a failure");
}

/// `agent run --json` prints every record, however fast the agent writes:
/// the supervisor reads no faster than the printer prints (back-pressure),
/// instead of skipping what a full channel could not hold.
#[test]
fn a_fast_stream_loses_no_record() {
    let p = TestProject::new();
    let agent = FakeAgent::new().many_lines(60_000).emit_file(&fixture("claude-write-success")).install();
    fake_engine(&p, agent.path());
    let out = p
        .troupe()
        .args(["--json", "agent", "run", "--role", "builder", "--engine", "fake", "--id", "fast1", "go"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let printed = String::from_utf8_lossy(&out.stdout).lines().count();
    let logged = std::fs::read_to_string(p.path(".troupe/state/logs/fast1.jsonl")).unwrap().lines().count();
    assert!(logged > 60_000, "{logged}");
    assert_eq!(printed, logged, "every record the log holds was printed");
}

/// A closed stdout (`troupe --json agent run … | head`) stops the agent and
/// ends the run as interrupted: exit 141, never 0, and the registry says so.
#[test]
fn a_closed_stdout_interrupts_the_run() {
    let p = TestProject::new();
    std::fs::create_dir_all(p.path("target")).unwrap();
    let ready = p.path("target/agent.pid");
    let agent = FakeAgent::new().write_pid(&ready).many_lines(200_000).sleep(60.0).install();
    fake_engine(&p, agent.path());
    let bin = assert_cmd::cargo::cargo_bin("troupe");
    let mut run = std::process::Command::new(bin)
        .arg("-C")
        .arg(p.root())
        .args(["--json", "agent", "run", "--role", "builder", "--engine", "fake", "--id", "head1", "go"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let agent_pid = read_pid(&ready);
    {
        use std::io::BufRead;
        let mut first = String::new();
        std::io::BufReader::new(run.stdout.take().unwrap()).read_line(&mut first).unwrap();
        assert!(first.contains("spawned"), "{first}");
    } // `head -1` closes its end here.
    let status = run.wait().unwrap();
    assert_eq!(status.code(), Some(141), "{status:?}");
    assert!(!process_running(agent_pid), "the agent was stopped");
    let list = json(&p.troupe().args(["--json", "agent", "list"]).output().unwrap());
    assert_eq!(list[0]["status"], "INTERRUPTED");
}

#[test]
fn a_coordinator_run_alone_is_held_to_its_role_like_a_lead_teammate() {
    // Real Claude Code as a Coordinator, told by its stub model to write code.
    let p = TestProject::new();
    let file = p.path("src/app.rs");
    let stub = AnthropicStub::start(Script::new([
        Turn::tool("Write", json!({"file_path": file, "content": "fn main() {}\n"})),
        Turn::text("I could not write it."),
    ]));
    let claude = Claude::new(&stub.url());
    config(&p, &format!("[engines.commands]\nclaude = \"{}\"\n", peers::bin("claude").display()));
    let mut cmd = p.troupe();
    for k in Claude::inherited_to_remove() {
        cmd.env_remove(k);
    }
    cmd.envs(claude.env())
        .args(["agent", "run", "--role", "coordinator", "--id", "c1", "write src/app.rs"])
        .timeout(Duration::from_secs(120));
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(!file.exists(), "the Coordinator's write was denied by the hooks of its run");
    // Piped, the progress is plain lines on stderr: the tool call, then the
    // hook's denial from the denial log, then the end; the report alone on stdout.
    let call = err.find("→ Write ").unwrap_or_else(|| panic!("the tool call: {err}"));
    let denied = err.find("denied c1 Write: ").unwrap_or_else(|| panic!("the hook's denial, live: {err}"));
    assert!(call < denied && err.contains("c1: done (claude"), "{err}");
    assert!(!err.contains('\r') && !err.contains("\x1b["), "no footer and no colour when piped: {err:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "I could not write it.");
    let requests = stub.model_requests();
    let first = requests[0].to_string();
    assert!(first.contains("Coordinator") && first.contains("Your id: c1"), "the role prompt came first: {first}");
    assert!(
        !first.contains("{{tool:")
            && !first.contains("{{report}}")
            && first.contains("mcp__troupe__troupe__board_create"),
        "the role template's placeholders are filled"
    );
    let last = requests.last().unwrap()["messages"].to_string();
    assert!(last.contains("troupe") && last.contains("\"is_error\":true"), "the denial reached the model: {last}");
    // The gateway of its role was offered.
    assert!(requests[0]["tools"].to_string().contains("mcp__troupe__"), "the role's gateway tools");
}

#[test]
fn a_feature_run_alone_goes_through_the_phase_gate() {
    let p = TestProject::new();
    p.troupe().args(["spec", "new", "login"]).assert().success();
    let agent = FakeAgent::new().write_pid(&p.path("ran.pid")).install();
    fake_engine(&p, agent.path());
    // The design is not written yet: no Builder may start on login.
    let out = p
        .troupe()
        .args(["agent", "run", "--role", "builder", "--engine", "fake", "--feature", "login", "build it"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("the Builder may not run on login now") && err.contains("needs phase"), "{err}");
    assert!(!p.path("ran.pid").exists(), "nothing was spawned");
}
