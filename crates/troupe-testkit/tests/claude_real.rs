//! The real Claude Code CLI against the Anthropic stub: it writes a file,
//! runs a shell command, honours `--settings` hooks and `--mcp-config`.

use serde_json::{Value, json};
use troupe_testkit::anthropic::AnthropicStub;
use troupe_testkit::claude::{Claude, json_lines};
use troupe_testkit::{Script, Turn, peers};

#[test]
fn claude_writes_a_file_and_runs_a_command_through_the_stub() {
    let project = tempfile::tempdir().unwrap();
    let file = project.path().join("hello.txt");
    let stub = AnthropicStub::start(Script::new([
        Turn::tool("Write", json!({"file_path": file, "content": "hi from the stub\n"})),
        Turn::tool("Bash", json!({"command": "cat hello.txt && echo shell-ok", "description": "show"})),
        Turn::text("Done. Wrote hello.txt"),
    ]));
    let claude = Claude::new(&stub.url());
    let out = claude.command("write hello", project.path()).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "claude failed: {stderr}\n{}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "hi from the stub\n");

    let lines = json_lines(&out.stdout);
    let result = lines.iter().find(|l| l["type"] == "result").expect("a result line");
    assert_eq!(result["subtype"], "success");
    assert_eq!(result["result"], "Done. Wrote hello.txt");
    // The shell command's output came back to the model as a tool result.
    let reqs = stub.model_requests();
    let last = reqs.iter().rev().find(|r| r["tools"].as_array().is_some_and(|t| !t.is_empty())).unwrap();
    assert!(last.to_string().contains("shell-ok"), "tool result with shell output not sent back: {last}");
}

#[test]
fn settings_hooks_are_per_run_and_can_deny_a_write() {
    let project = tempfile::tempdir().unwrap();
    let file = project.path().join("denied.txt");
    let stub = AnthropicStub::start(Script::new([
        Turn::tool("Write", json!({"file_path": file, "content": "nope\n"})),
        Turn::text("ok"),
    ]));
    let claude = Claude::new(&stub.url());
    let hook = r#"echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"blocked by testkit hook"}}'"#;
    let settings =
        json!({"hooks": {"PreToolUse": [{"matcher": "Write", "hooks": [{"type": "command", "command": hook}]}]}});
    let out = claude.command("write", project.path()).arg("--settings").arg(settings.to_string()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!file.exists(), "the hook should have blocked the write");
    let reqs = stub.model_requests();
    assert!(
        reqs.iter().any(|r| r.to_string().contains("blocked by testkit hook")),
        "the model should see the deny reason"
    );
    assert!(!claude.home().join(".claude/settings.json").exists());
}

#[test]
fn mcp_config_connects_a_stdio_server() {
    let project = tempfile::tempdir().unwrap();
    let stub = AnthropicStub::start(Script::new([
        Turn::tool("mcp__everything__echo", json!({"message": "ping-through-mcp"})),
        Turn::text("ok"),
    ]));
    let claude = Claude::new(&stub.url());
    let cfg = project.path().join("mcp.json");
    let server = peers::bin("mcp-server-everything");
    std::fs::write(&cfg, json!({"mcpServers": {"everything": {"command": server, "args": ["stdio"]}}}).to_string())
        .unwrap();
    let out = claude.command("echo", project.path()).arg("--mcp-config").arg(&cfg).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lines = json_lines(&out.stdout);
    let init = lines.iter().find(|l| l["subtype"] == "init").unwrap();
    let servers: &Vec<Value> = init["mcp_servers"].as_array().unwrap();
    // Under load Claude may announce the server while it still connects
    // ("pending"); the echo result below proves the connection.
    assert!(
        servers.iter().any(|s| s["name"] == "everything" && (s["status"] == "connected" || s["status"] == "pending")),
        "{servers:?}"
    );
    let reqs = stub.model_requests();
    assert!(reqs.iter().any(|r| r.to_string().contains("Echo: ping-through-mcp")), "echo result not sent back");
}
