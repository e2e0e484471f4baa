//! The real Gemini CLI, Codex and OpenCode against their stubs: each writes a
//! file and runs a shell command as scripted.

use serde_json::json;
use troupe_testkit::chat::ChatStub;
use troupe_testkit::claude::json_lines;
use troupe_testkit::codex::{Codex, add_file_patch};
use troupe_testkit::gemini::GeminiStub;
use troupe_testkit::gemini_cli::GeminiCli;
use troupe_testkit::opencode::OpenCode;
use troupe_testkit::responses::ResponsesStub;
use troupe_testkit::{Script, Turn};

fn assert_ok(out: &std::process::Output) {
    assert!(
        out.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn gemini_writes_a_file_and_runs_a_command() {
    let project = tempfile::tempdir().unwrap();
    let file = project.path().join("hello.txt");
    let stub = GeminiStub::start(Script::new([
        Turn::tool("write_file", json!({"file_path": file, "content": "hi from fake gemini\n"})),
        Turn::tool("run_shell_command", json!({"command": "cat hello.txt && echo shell-ok", "description": "show"})),
        Turn::text("Done. Wrote hello.txt"),
    ]));
    let gemini = GeminiCli::new(&stub.url());
    let out = gemini.command("write hello", project.path()).output().unwrap();
    assert_ok(&out);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "hi from fake gemini\n");
    let lines = json_lines(&out.stdout);
    assert_eq!(lines.last().unwrap()["type"], "result");
    assert_eq!(lines.last().unwrap()["status"], "success");
    assert!(stub.model_requests().iter().any(|r| r.to_string().contains("shell-ok")), "shell output not sent back");
}

#[test]
fn codex_writes_a_file_and_runs_a_command() {
    let project = tempfile::tempdir().unwrap();
    let stub = ResponsesStub::start(Script::new([
        Turn::freeform_tool("apply_patch", add_file_patch("hello.txt", "hi from fake codex\n")),
        Turn::tool("exec_command", json!({"cmd": "cat hello.txt && echo shell-ok"})),
        Turn::text("Done. Wrote hello.txt"),
    ]));
    let codex = Codex::new(&stub.url());
    let out = codex.command("write hello", project.path()).output().unwrap();
    assert_ok(&out);
    assert_eq!(std::fs::read_to_string(project.path().join("hello.txt")).unwrap(), "hi from fake codex\n");
    let lines = json_lines(&out.stdout);
    assert_eq!(lines.last().unwrap()["type"], "turn.completed");
    assert!(lines.iter().any(|l| l["item"]["type"] == "command_execution"
        && l["item"]["aggregated_output"].as_str().is_some_and(|o| o.contains("shell-ok"))));
}

#[test]
fn opencode_writes_a_file_and_runs_a_command() {
    let project = tempfile::tempdir().unwrap();
    let file = project.path().join("hello.txt");
    let stub = ChatStub::start(Script::new([
        Turn::tool("write", json!({"filePath": file, "content": "hi from fake opencode\n"})),
        Turn::tool("bash", json!({"command": "cat hello.txt && echo shell-ok", "description": "Show file"})),
        Turn::text("Done. Wrote hello.txt"),
    ]));
    let opencode = OpenCode::new(&stub.url());
    let out = opencode.command("write hello", project.path()).output().unwrap();
    assert_ok(&out);
    let reqs = stub.model_requests();
    assert_eq!(
        std::fs::read_to_string(&file).ok().as_deref(),
        Some("hi from fake opencode\n"),
        "stdout: {}\nrequests: {reqs:#?}",
        String::from_utf8_lossy(&out.stdout)
    );
    let lines = json_lines(&out.stdout);
    assert!(
        lines.iter().any(|l| l["type"] == "tool_use"
            && l["part"]["tool"] == "bash"
            && l["part"]["state"]["output"].as_str().is_some_and(|o| o.contains("shell-ok"))),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(lines.last().unwrap()["part"]["reason"], "stop");
}
