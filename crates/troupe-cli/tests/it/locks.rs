//! File safety (seed 003 category A): `troupe lock`/`unlock`/`locks`, the
//! hooks of every engine denying a write to a file another agent holds, the
//! write history, and a real Claude Code whose write to a locked file is refused.

use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};
use troupe_core::layout::Layout;
use troupe_store::{NewAgent, Registry, SqliteStore};
use troupe_testkit::anthropic::AnthropicStub;
use troupe_testkit::claude::Claude;
use troupe_testkit::{Script, Turn};

use crate::support::{TestProject, json};

/// A file no skill gate cares about (no extension), so the lock alone decides.
const FILE: &str = "data/shared";

fn hook(p: &TestProject, engine: &str, event: &str, input: &Value, agent: &str) -> Output {
    let state = p.path(".troupe/state/markers-test");
    p.troupe()
        .args(["hook", engine, event])
        .env("TROUPE_AGENT_ID", agent)
        .env("TROUPE_STATE_DIR", &state)
        .write_stdin(input.to_string())
        .output()
        .unwrap()
}

/// Each engine's own PreToolUse payload for a write of `file` under `root`.
fn write_call(engine: &str, root: &Path, file: &str) -> (&'static str, Value) {
    let abs = root.join(file);
    match engine {
        "claude" => (
            "PreToolUse",
            json!({"session_id": "s1", "cwd": root, "hook_event_name": "PreToolUse", "tool_name": "Write",
                   "tool_input": {"file_path": abs, "content": "x"}, "tool_use_id": "t1"}),
        ),
        "gemini" => (
            "BeforeTool",
            json!({"session_id": "s1", "cwd": root, "hook_event_name": "BeforeTool", "tool_name": "write_file",
                   "tool_input": {"file_path": abs, "content": "x"}}),
        ),
        "codex" => (
            "PreToolUse",
            json!({"session_id": "s1", "cwd": root, "hook_event_name": "PreToolUse", "tool_name": "apply_patch",
                   "tool_input": {"command": format!("*** Begin Patch\n*** Update File: {file}\n@@\n-a\n+b\n*** End Patch\n")},
                   "turn_id": "u1", "model": "gpt-5.5", "tool_use_id": "t1"}),
        ),
        _ => (
            "PreToolUse",
            json!({"hook_event_name": "PreToolUse", "tool_name": "write", "session_id": "s1", "call_id": "c1",
                   "cwd": root, "tool_input": {"filePath": abs, "content": "x"}}),
        ),
    }
}

fn denied(engine: &str, out: &Output) -> Option<String> {
    let stdout: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    let reason = match engine {
        "claude" | "codex" => stdout["hookSpecificOutput"]["permissionDecisionReason"].as_str(),
        _ => (stdout["decision"] == "deny").then(|| stdout["reason"].as_str()).flatten(),
    };
    reason.map(str::to_string)
}

#[test]
fn a_locked_file_is_refused_to_others_on_every_engine_and_writes_are_recorded() {
    let p = TestProject::new();
    std::fs::create_dir_all(p.path("data")).unwrap();
    p.troupe().args(["lock", FILE, "--agent", "builder-1", "--ttl", "10m"]).assert().success().stdout("");
    let again = p.troupe().args(["lock", FILE, "--agent", "builder-2"]).output().unwrap();
    assert_eq!(again.status.code(), Some(1));
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(err.contains("error: data/shared is locked by builder-1 since ") && err.contains("hint: "), "{err}");
    let locks = json(&p.troupe().args(["--json", "locks"]).output().unwrap());
    assert_eq!((locks[0]["path"].as_str(), locks[0]["agent"].as_str()), (Some(FILE), Some("builder-1")));

    for engine in ["claude", "gemini", "codex", "opencode"] {
        let (event, input) = write_call(engine, p.root(), FILE);
        let out = hook(&p, engine, event, &input, "builder-2");
        let reason = denied(engine, &out).unwrap_or_else(|| panic!("{engine} allowed: {out:?}"));
        assert!(
            reason.starts_with("troupe file lock: data/shared is locked by builder-1 since "),
            "{engine}: {reason}"
        );
        assert!(reason.contains(" ago)"), "{engine}: {reason}");
        // Its holder writes.
        let out = hook(&p, engine, event, &input, "builder-1");
        assert!(denied(engine, &out).is_none(), "{engine}: the holder was refused: {out:?}");
    }
    // The refusal is in the audit log with the gateway's.
    let audit = p.troupe().args(["--json", "audit", "denials"]).output().unwrap();
    assert!(String::from_utf8_lossy(&audit.stdout).contains("troupe file lock"), "{audit:?}");

    // The holder's write is recorded; another agent about to edit it is told.
    let (_, mut post) = write_call("claude", p.root(), FILE);
    post["hook_event_name"] = json!("PostToolUse");
    post["tool_response"] = json!({"success": true});
    let out = hook(&p, "claude", "PostToolUse", &post, "builder-1");
    assert!(out.status.success(), "{out:?}");
    let history = json(&p.troupe().args(["--json", "locks", "--history", FILE]).output().unwrap());
    assert_eq!((history[0]["agent"].as_str(), history[0]["source"].as_str()), (Some("builder-1"), Some("hook")));
    let refused = p.troupe().args(["unlock", FILE, "--agent", "builder-2"]).output().unwrap();
    assert_eq!(refused.status.code(), Some(1), "only the holder unlocks");
    p.troupe().args(["unlock", FILE, "--agent", "builder-1"]).assert().success();
    let (event, input) = write_call("claude", p.root(), FILE);
    let out = hook(&p, "claude", event, &input, "builder-2");
    assert!(denied("claude", &out).is_none());
    let told = String::from_utf8_lossy(&out.stdout);
    assert!(
        told.contains("troupe file history: data/shared was changed by builder-1 ") && told.contains(" s ago"),
        "{out:?}"
    );

    // The lock of an agent whose process is gone is released by itself.
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let pid = gone.id();
    gone.wait().unwrap();
    let store = SqliteStore::open(&Layout::new(p.root()).database_file()).unwrap();
    store.register(NewAgent { pid: Some(pid), ..NewAgent::new("dead-1", "builder", "claude") }).unwrap();
    p.troupe().args(["lock", "data/other", "--agent", "dead-1"]).assert().success();
    assert_eq!(json(&p.troupe().args(["--json", "locks"]).output().unwrap()), json!([]));
    // A path outside the project is a usage error.
    let out = p.troupe().args(["lock", "/etc/passwd"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}

#[test]
fn a_real_claude_code_is_refused_a_write_to_a_file_another_agent_locked() {
    let p = TestProject::new();
    let out = crate::support::troupe().args(["init", "--claude"]).arg(p.root()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::create_dir_all(p.path("data")).unwrap();
    // A file that does not exist yet: Claude Code writes it without reading it first.
    let file = p.path(FILE);
    p.troupe().args(["lock", FILE, "--agent", "builder-9"]).assert().success();
    let stub = AnthropicStub::start(Script::new([
        Turn::tool("Write", json!({"file_path": file, "content": "mine\n"})),
        Turn::text("Done."),
    ]));
    let claude = Claude::new(&stub.url());
    let state = tempfile::tempdir().unwrap();
    let mut cmd = claude.command("write it", p.root());
    for var in ["TROUPE_ROLE", "TROUPE_FEATURE", "TROUPE_OWNED_FILES", "TROUPE_HOOKS", "TROUPE_PROJECT"] {
        cmd.env_remove(var);
    }
    let out = cmd.env("TROUPE_AGENT_ID", "builder-2").env("TROUPE_STATE_DIR", state.path()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!file.exists(), "the write to the locked file was refused");
    let told: String = stub.model_requests().iter().map(Value::to_string).collect();
    let results: Vec<&str> =
        told.match_indices("tool_result").map(|(i, _)| &told[i..(i + 600).min(told.len())]).collect();
    assert!(told.contains("troupe file lock: data/shared is locked by builder-9 since"), "{results:?}");
}

/// A teammate's write is its heartbeat, but renewing the lease is a write
/// transaction on every tool call: the hooks renew when a sixth of the lease
/// has passed since their last renewal (the gateway's rate), recorded per
/// agent in `.troupe/state/cache/lease-beats/`; a lost record renews again.
#[test]
fn a_teammates_writes_renew_its_lease_when_due_not_on_every_call() {
    let p = TestProject::new();
    let store = SqliteStore::open(&Layout::new(p.root()).database_file()).unwrap();
    let lease = std::time::Duration::from_secs(1);
    store.register(NewAgent { lease: Some(lease), ..NewAgent::new("builder-7", "builder", "claude") }).unwrap();
    let until = || store.agent("builder-7").unwrap().lease_until.unwrap();
    let (event, input) = write_call("claude", p.root(), FILE);
    let write = || assert!(denied("claude", &hook(&p, "claude", event, &input, "builder-7")).is_none());
    let registered = until();
    write();
    let renewed = until();
    // The configured lease is 30 s, the registration's 1 s.
    assert!(renewed.duration_since(registered).as_secs() >= 20, "{registered} -> {renewed}");
    write();
    assert_eq!(until(), renewed, "the second write within a sixth of the lease renews nothing");
    let beat = p.path(".troupe/state/cache/lease-beats/builder-7");
    assert!(beat.is_file());
    std::fs::remove_file(&beat).unwrap();
    write();
    assert!(until() > renewed, "a lost beat renews");
}
