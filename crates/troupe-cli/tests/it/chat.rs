//! `troupe chat` (issue 19, seed 004) on a real terminal: the REPL runs in a
//! tmux pane of its own with the real Claude Code against a stub model that
//! answers each question by name. One pass covers a role switch with the
//! arrow keys changing the tools offered to the model, /save, /fork and
//! /resume keeping the conversation, /status, /compress, /export html opened
//! in Chromium, Ctrl-C stopping a turn but not the REPL, and Ctrl-D. Also: `troupe ask` on a second real engine (Gemini
//! CLI), and `troupe mcp start --background` / `troupe mcp stop`.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;
use troupe_testkit::anthropic::AnthropicStub;
use troupe_testkit::claude::Claude;
use troupe_testkit::gemini::GeminiStub;
use troupe_testkit::gemini_cli::GeminiCli;
use troupe_testkit::{Conversation, Responder, Script, Turn};

use crate::live::{Tmux, runner};
use crate::support::{TestProject, json};
use crate::talk::{ask_mentor, skill, use_claude, use_engine};

/// Answers the last question (`q-<word>`) it was asked with `re: q-<word>`,
/// so every answer on screen names the line it answers.
struct Echo;

impl Responder for Echo {
    fn respond(&self, c: &Conversation) -> Turn {
        let asked = c.prompt.rsplit("q-").next().and_then(|s| s.split(|ch: char| !ch.is_alphanumeric()).next());
        let turn = Turn::text(format!("re: q-{}", asked.unwrap_or("?")));
        // A turn long enough to be interrupted.
        if asked == Some("slow") { turn.after(Duration::from_secs(20)) } else { turn }
    }
}

/// Type `line` and Enter into the pane (pasted: a TUI may swallow an Enter typed right after text).
fn type_line(tmux: &Tmux, line: &str) {
    assert!(tmux.cmd(&["send-keys", "-l", line]).status().unwrap().success());
    assert!(tmux.cmd(&["send-keys", "Enter"]).status().unwrap().success());
}

/// The tool-offering requests the stub got, as text.
fn requests(stub: &AnthropicStub) -> Vec<String> {
    stub.model_requests().into_iter().filter(|r| r["tools"].is_array()).map(|r| r.to_string()).collect()
}

#[test]
fn the_repl_switches_roles_and_saves_forks_resumes_and_exports_sessions() {
    let p = TestProject::new();
    use_claude(&p);
    skill(&p, "mentoring", "allowedRoles: [mentor]\nallowedTools: [builtin__read]", "Explain, never edit.");
    skill(&p, "reviewing", "allowedRoles: [reviewer]\nallowedTools: [builtin__read, troupe__board_create]", "Review.");
    let stub = AnthropicStub::with_responder(Echo);
    let claude = Claude::new(&stub.url());
    let scratch = tempfile::tempdir().unwrap();
    let status = scratch.path().join("status");
    let tmux = Tmux::start(&runner(scratch.path(), p.root(), &claude, "chat --role mentor", &status));
    let wait = Duration::from_secs(60);
    tmux.until(wait, "the prompt", |s| s.contains("mentor> "));

    type_line(&tmux, "what is q-alpha");
    tmux.until(wait, "the first answer", |s| s.contains("re: q-alpha"));
    let first = requests(&stub);
    assert!(first[0].contains("Role: mentor") && !first[0].contains("board_create"), "{}", first[0]);

    // The arrow-key pick: the roles are sorted, reviewer two below mentor (orchestrator between).
    type_line(&tmux, "/roles");
    tmux.until(wait, "the role picker", |s| s.contains("> mentor"));
    assert!(tmux.cmd(&["send-keys", "Down"]).status().unwrap().success());
    tmux.until(wait, "orchestrator selected", |s| s.contains("> orchestrator"));
    assert!(tmux.cmd(&["send-keys", "Down"]).status().unwrap().success());
    tmux.until(wait, "reviewer selected", |s| s.contains("> reviewer"));
    assert!(tmux.cmd(&["send-keys", "Enter"]).status().unwrap().success());
    let screen = tmux.until(wait, "the switch", |s| s.contains("reviewer> "));
    assert!(
        screen.contains("role: mentor → reviewer") && screen.contains("now offered: troupe__board_create"),
        "{screen}"
    );

    type_line(&tmux, "and q-beta");
    tmux.until(wait, "the second answer", |s| s.contains("re: q-beta"));
    let second = requests(&stub).pop().unwrap();
    assert!(second.contains("board_create"), "the reviewer's turn is offered its gateway tool: {second}");
    assert!(second.contains("what is q-alpha"), "the engine session goes on: {second}");

    type_line(&tmux, "/save auth talk");
    tmux.until(wait, "the save", |s| s.contains("saved session 1 (4 messages)"));
    type_line(&tmux, "/fork 1 --at 2");
    tmux.until(wait, "the fork", |s| s.contains("forked session 1 at 2 messages into session 2"));
    type_line(&tmux, "then q-gamma");
    tmux.until(wait, "the fork's answer", |s| s.contains("re: q-gamma"));
    let forked = requests(&stub).pop().unwrap();
    assert!(forked.contains("The conversation so far") && forked.contains("re: q-alpha"), "replayed: {forked}");
    assert!(!forked.contains("and q-beta"), "a fork at 2 keeps the first exchange only: {forked}");

    type_line(&tmux, "/resume 1");
    tmux.until(wait, "the resume", |s| s.contains("resumed session 1 (4 messages, role reviewer); continuing claude"));
    type_line(&tmux, "last q-delta");
    tmux.until(wait, "the resumed answer", |s| s.contains("re: q-delta"));
    let resumed = requests(&stub).pop().unwrap();
    assert!(resumed.contains("and q-beta") && !resumed.contains("then q-gamma"), "session 1's own: {resumed}");

    type_line(&tmux, "/status");
    let screen = tmux.until(wait, "the status", |s| s.contains("cost:"));
    assert!(screen.contains("role:    reviewer") && screen.contains("engine:  claude"), "{screen}");
    // Compressing goes through the engine into a new session marked as a summary.
    type_line(&tmux, "/compress 1");
    tmux.until(wait, "the summary", |s| s.contains("compressed session 1 (4 messages) into session 3"));
    let asked = requests(&stub).pop().unwrap();
    assert!(asked.contains("Summarise the conversation") && asked.contains("and q-beta"), "{asked}");
    type_line(&tmux, "/export 1 html");
    tmux.until(wait, "the export", |s| s.contains("exported session 1 to"));
    // Ctrl-C stops the turn, not the REPL: the next question is answered.
    type_line(&tmux, "wait for q-slow");
    let deadline = Instant::now() + wait;
    while !requests(&stub).iter().any(|r| r.contains("wait for q-slow")) {
        assert!(Instant::now() < deadline, "the slow question never reached the model");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(tmux.cmd(&["send-keys", "C-c"]).status().unwrap().success());
    tmux.until(wait, "the interrupted turn", |s| s.contains("(interrupted)"));
    type_line(&tmux, "after q-epsilon");
    let screen = tmux.until(wait, "the answer after the interrupt", |s| s.contains("re: q-epsilon"));
    assert!(!screen.contains("re: q-slow"), "{screen}");
    // Ctrl-D once the prompt is back: a key pressed while a turn ends is
    // flushed when the line editor takes the terminal.
    tmux.until(wait, "the prompt after the answer", |s| {
        s.split("re: q-epsilon").nth(1).is_some_and(|rest| rest.trim_end().ends_with("reviewer>"))
    });
    // The commands answered without the model.
    type_line(&tmux, "/tools");
    let screen = tmux.until(wait, "the tools", |s| s.contains("12 tools for reviewer:"));
    assert!(screen.split("12 tools for reviewer:").nth(1).unwrap().contains("troupe__board_create"), "{screen}");
    type_line(&tmux, "/skills");
    tmux.until(wait, "the skills", |s| s.split("/skills").last().is_some_and(|r| r.contains("reviewing")));
    type_line(&tmux, "/sessions");
    tmux.until(wait, "the sessions", |s| s.split("/sessions").last().is_some_and(|r| r.contains("auth talk")));
    type_line(&tmux, "/help");
    tmux.until(wait, "the help", |s| s.contains("/tools                   the tools the next turn offers"));
    // /model changes the model of the next turn.
    type_line(&tmux, "/model claude-opus-stub");
    tmux.until(wait, "the model switch", |s| s.contains("→ claude-opus-stub"));
    type_line(&tmux, "model q-zeta");
    tmux.until(wait, "the answer on the new model", |s| s.contains("re: q-zeta"));
    let last = stub.model_requests().into_iter().rfind(|r| r["tools"].is_array()).unwrap();
    assert_eq!(last["model"], "claude-opus-stub", "{last}");
    tmux.until(wait, "the prompt after the model's answer", |s| {
        s.split("re: q-zeta").nth(1).is_some_and(|rest| rest.trim_end().ends_with("reviewer>"))
    });
    assert!(tmux.cmd(&["send-keys", "C-d"]).status().unwrap().success());
    tmux.until(wait, "the exit", |_| status.exists());
    assert_eq!(std::fs::read_to_string(&status).unwrap().trim(), "0", "{}", tmux.screen());

    // The export opens in Chromium with the conversation in its page.
    let html = p.path(".troupe/exports/session-1.html");
    let dom = std::process::Command::new("chromium")
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--dump-dom"])
        .arg(format!("file://{}", html.display()))
        .output()
        .expect("chromium is installed (.ci/run installs it)");
    let dom = String::from_utf8_lossy(&dom.stdout);
    assert!(dom.contains("<h1>Session 1: auth talk</h1>") && dom.contains("re: q-beta"), "{dom}");

    // And the sessions are listed outside the REPL.
    let out = p.troupe().args(["--json", "chat", "--sessions"]).output().unwrap();
    let doc = json(&out);
    let ids: Vec<_> = doc["sessions"].as_array().unwrap().iter().map(|s| s["id"].as_i64().unwrap()).collect();
    assert_eq!(ids, [3, 2, 1], "{doc}");
    let summary = &doc["sessions"][0];
    assert_eq!(
        (summary["summary"].as_bool(), summary["parent"].as_i64(), summary["messages"].as_u64()),
        (Some(true), Some(1), Some(1))
    );
    assert_eq!(
        (doc["sessions"][1]["summary"].as_bool(), doc["sessions"][1]["parent"].as_i64()),
        (Some(false), Some(1))
    );
    assert_eq!(doc["sessions"][2]["messages"], 4, "the original is kept: {doc}");
}

#[test]
fn ask_runs_on_gemini_cli_too() {
    let p = TestProject::new();
    skill(&p, "mentoring", "allowedRoles: [mentor]\nallowedTools: [builtin__read]", "Explain, never edit.");
    use_engine(&p, "gemini");
    let stub = GeminiStub::start(Script::new([Turn::text("2 + 2 = 4")]));
    let gemini = GeminiCli::new(&stub.url());
    let doc = ask_mentor(&p, gemini.env(), "gemini");
    assert_eq!((doc["answer"].as_str(), doc["engine"].as_str()), (Some("2 + 2 = 4"), Some("gemini")), "{doc}");
    let asked = stub.model_requests().into_iter().last().unwrap().to_string();
    assert!(asked.contains("Role: mentor") && asked.contains("What is 2+2?"), "{asked}");
}

#[test]
fn mcp_start_in_the_background_serves_with_its_token_until_mcp_stop() {
    let p = TestProject::new();
    let out = p.troupe().args(["--json", "mcp", "start", "--role", "coordinator", "--background"]).output().unwrap();
    let started = json(&out);
    assert!(out.status.success(), "{started}\n{}", String::from_utf8_lossy(&out.stderr));
    let (pid, url) = (started["pid"].as_i64().unwrap(), started["url"].as_str().unwrap().to_string());
    assert!(url.starts_with("http://127.0.0.1:"), "loopback by default: {url}");
    let token_file = started["token_file"].as_str().unwrap();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(token_file).unwrap().permissions().mode() & 0o777, 0o600);
    let token = std::fs::read_to_string(token_file).unwrap();

    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let http: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let post = |auth: Option<&str>| {
        let mut req = http.post(&url).header("Accept", "application/json, text/event-stream");
        if let Some(t) = auth {
            req = req.header("Authorization", &format!("Bearer {t}"));
        }
        req.send_json(&init).unwrap().status().as_u16()
    };
    assert_eq!(post(None), 401, "no token, no gateway");
    assert_eq!(post(Some(token.trim())), 200);

    // A second start is refused while it runs.
    let again = p.troupe().args(["mcp", "start", "--role", "coordinator", "--background"]).output().unwrap();
    assert!(String::from_utf8_lossy(&again.stderr).contains("already runs here"));

    p.troupe().args(["mcp", "stop"]).assert().success();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Path::new(&format!("/proc/{pid}")).exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    assert!(stat.is_empty() || stat.contains(") Z"), "the gateway process is gone: {stat}");
    assert!(!p.path(".troupe/state/mcp/gateway.json").exists() && !Path::new(token_file).exists());
    let out = p.troupe().args(["mcp", "stop"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("no MCP gateway was started here"));
}
