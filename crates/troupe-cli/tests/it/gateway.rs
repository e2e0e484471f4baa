//! `troupe mcp`, `troupe policy check|roles`, `troupe skill add|list|templates`
//! and `troupe audit`, with real peers: backends `mcp-server-everything` and
//! `mcp-server-filesystem`, clients the Python `mcp` SDK (stdio and
//! Streamable HTTP) and the real Claude Code CLI driven by the Anthropic stub.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};
use troupe_testkit::anthropic::AnthropicStub;
use troupe_testkit::claude::{Claude, json_lines};
use troupe_testkit::{Script, Turn, peers};

use crate::support::TestProject;

const SKILLS: &[(&str, &str)] = &[
    (
        "dev",
        "id: dev\nallowedRoles: [developer]\nallowedTools: [everything__*, filesystem__read_text_file, troupe__get_context, troupe__send_message]\ngrants: {memory: isolated}",
    ),
    ("guest", "id: guest\nallowedRoles: [guest]\nallowedTools: [everything__echo]"),
    ("admin", "id: admin\nallowedRoles: [admin]\nallowedTools: ['*']\ngrants: {memory: all}"),
];

/// A project with the test skills and the real backends configured.
fn project() -> TestProject {
    let p = TestProject::new();
    // Only the test's skills: the defaults `troupe init` writes would add their roles.
    std::fs::remove_dir_all(p.path(".troupe/skills")).unwrap();
    for (id, front) in SKILLS {
        let dir = p.path(&format!(".troupe/skills/{id}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("SKILL.md"), format!("---\n{front}\n---\nTest skill.\n")).unwrap();
    }
    let files = p.path("files");
    std::fs::create_dir_all(&files).unwrap();
    std::fs::write(files.join("note.txt"), "a note on disk").unwrap();
    let config = p.path(".troupe/config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap_or_default();
    text.push_str(&format!(
        "\n[mcp.servers.everything]\ncommand = {:?}\nargs = [\"stdio\"]\n\n[mcp.servers.filesystem]\ncommand = {:?}\nargs = [{:?}]\n",
        peers::bin("mcp-server-everything").display().to_string(),
        peers::bin("mcp-server-filesystem").display().to_string(),
        files.display().to_string(),
    ));
    std::fs::write(&config, text).unwrap();
    p
}

fn json_out(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

const PY_CLIENT: &str = r#"
import asyncio, json, sys
from mcp import Client, StdioServerParameters

def out(**kw):
    print(json.dumps(kw), flush=True)

def texts(r):
    return "\n".join(c.text for c in r.content if getattr(c, "text", None) is not None)

async def main():
    target = json.loads(sys.argv[1])
    server = target["url"] if "url" in target else StdioServerParameters(command=target["command"], args=target["args"], env=target.get("env"))
    if "url" in target:
        import httpx2
        from mcp.client.streamable_http import streamable_http_client
        headers = {"Authorization": "Bearer " + target["token"]} if "token" in target else {}
        # httpx's 5 s read timeout is shorter than a proxied tool call takes on a loaded machine.
        server = streamable_http_client(target["url"], http_client=httpx2.AsyncClient(headers=headers, timeout=120))
    async with Client(server) as c:
        out(step="tools", names=sorted(t.name for t in (await c.list_tools()).tools))
        r = await c.call_tool("everything__echo", {"message": "hello from python"})
        out(step="echo", text=texts(r), error=bool(r.is_error), result_type=getattr(r, "result_type", None))
        r = await c.call_tool("filesystem__read_text_file", {"path": target["note"]})
        out(step="read", text=texts(r), error=bool(r.is_error))
        r = await c.call_tool("filesystem__write_file", {"path": target["note"], "content": "overwritten"})
        out(step="write", text=texts(r), error=bool(r.is_error))
        r = await c.call_tool("set_role", {"role_id": "admin"})
        out(step="escalate", text=texts(r), error=bool(r.is_error))
        changed = False
        if "url" not in target:
            async with c.listen(tools_list_changed=True) as sub:
                r = await c.call_tool("set_role", {"role_id": "guest"})
                out(step="downgrade", text=texts(r), error=bool(r.is_error))
                try:
                    await asyncio.wait_for(sub.__anext__(), timeout=10)
                    changed = True
                except Exception as e:
                    out(step="listen-error", error=repr(e))
        else:
            r = await c.call_tool("set_role", {"role_id": "guest"})
            out(step="downgrade", text=texts(r), error=bool(r.is_error))
        out(step="changed", changed=changed)
        out(step="tools-after", names=sorted(t.name for t in (await c.list_tools()).tools))
        r = await c.call_tool("everything__get-sum", {"a": 1, "b": 2})
        out(step="after-downgrade", text=texts(r), error=bool(r.is_error))

asyncio.run(main())
"#;

fn run_python(dir: &Path, target: Value) -> Vec<Value> {
    let script = dir.join("client.py");
    std::fs::write(&script, PY_CLIENT).unwrap();
    let out = Command::new(peers::python()).arg(&script).arg(target.to_string()).output().unwrap();
    assert!(
        out.status.success(),
        "python client failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn step<'a>(steps: &'a [Value], name: &str) -> &'a Value {
    steps.iter().find(|s| s["step"] == name).unwrap_or_else(|| panic!("no step {name}: {steps:?}"))
}

fn check_python_session(p: &TestProject, steps: &[Value], over_stdio: bool) {
    let names = step(steps, "tools")["names"].as_array().unwrap().clone();
    for want in
        ["set_role", "everything__echo", "everything__get-sum", "filesystem__read_text_file", "troupe__save_memory"]
    {
        assert!(names.contains(&json!(want)), "{want} missing from {names:?}");
    }
    assert!(!names.contains(&json!("filesystem__write_file")));
    let echo = step(steps, "echo");
    assert_eq!(echo["text"], "Echo: hello from python");
    assert_eq!(echo["result_type"], "complete", "forwarded results carry resultType for 2026-07-28 clients");
    assert_eq!(step(steps, "read")["text"], "a note on disk");
    let write = step(steps, "write");
    assert_eq!(write["error"], true);
    assert_eq!(write["text"], "tool \"filesystem__write_file\" is not available to role \"developer\"");
    assert_eq!(std::fs::read_to_string(p.path("files/note.txt")).unwrap(), "a note on disk");
    let escalate = step(steps, "escalate");
    assert_eq!(escalate["error"], true);
    assert!(escalate["text"].as_str().unwrap().contains("above this connection's role \"developer\""));
    assert_eq!(step(steps, "downgrade")["error"], false);
    if over_stdio {
        assert_eq!(step(steps, "changed")["changed"], true, "no tools/list_changed on the listen stream: {steps:?}");
    }
    assert_eq!(step(steps, "tools-after")["names"], json!(["everything__echo", "set_role"]));
    assert_eq!(step(steps, "after-downgrade")["error"], true);
}

#[test]
fn python_sdk_client_over_stdio_through_the_gateway_to_real_backends() {
    let p = project();
    let troupe_bin = assert_cmd::cargo::cargo_bin("troupe");
    let target = json!({
        "command": troupe_bin,
        "args": ["-C", p.root(), "mcp", "serve", "--role", "developer", "--agent", "py-1"],
        "note": p.path("files/note.txt").canonicalize().unwrap(),
    });
    let steps = run_python(p.root(), target);
    check_python_session(&p, &steps, true);

    // Everything was audited in the store, and the audit commands read it back.
    let stats = json_out(&p.troupe().args(["--json", "audit", "stats"]).output().unwrap());
    assert_eq!(stats["total"], 6, "{stats}");
    assert_eq!(stats["denied"], 3, "{stats}");
    assert_eq!(stats["byAgent"]["py-1"], stats["total"]);
    let denials = json_out(&p.troupe().args(["--json", "audit", "denials", "--limit", "2"]).output().unwrap());
    assert_eq!(denials.as_array().unwrap().len(), 2);
    assert_eq!(denials[0]["tool"], "everything__get-sum");
    assert_eq!(denials[0]["role"], "guest");
    // The same refusals in the denial log, where live displays see them.
    let log = std::fs::read_to_string(p.path(".troupe/state/denials.jsonl")).unwrap();
    let logged: Vec<Value> = log.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(logged.len(), 3, "{log}");
    assert!(logged.iter().all(|d| d["agent"] == "py-1"), "{log}");
    assert!(logged.iter().any(|d| d["what"] == "filesystem__write_file"), "{log}");
    let csv = p.troupe().args(["audit", "export", "--format", "csv"]).output().unwrap();
    let csv = String::from_utf8(csv.stdout).unwrap();
    assert!(csv.starts_with("id,at,agent,role,tool,decision,reason,duration_ms,argument_shape,thinking\n"), "{csv}");
    assert!(csv.contains(",py-1,developer,filesystem__write_file,denied,"), "{csv}");
    assert!(!csv.contains("overwritten"), "argument values stay out of the log: {csv}");
    let thinking = json_out(&p.troupe().args(["--json", "audit", "thinking"]).output().unwrap());
    assert_eq!(thinking["stats"]["entriesWithThinking"], 0);
}

#[test]
fn python_sdk_client_over_streamable_http() {
    let p = project();
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("troupe"))
        .args(["-C"])
        .arg(p.root())
        .args(["mcp", "serve", "--role", "developer", "--agent", "http-1", "--http", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The URL, then the token minted for http-1 (it had none).
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let (mut url, mut token) = (String::new(), String::new());
    out.read_line(&mut url).unwrap();
    out.read_line(&mut token).unwrap();
    let url = url.trim().to_string();
    assert!(url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"), "{url}");
    let target = json!({"url": url, "token": token.trim(), "note": p.path("files/note.txt").canonicalize().unwrap()});
    let steps = run_python(p.root(), target);
    let _ = child.kill();
    let _ = child.wait();
    check_python_session(&p, &steps, false);
}

#[test]
fn serving_an_unknown_role_is_refused() {
    let p = project();
    let out = p.troupe().args(["mcp", "serve", "--role", "root"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown role \"root\""));
}

#[test]
fn mcp_status_reports_tools_and_failing_backends_with_their_stderr() {
    let p = project();
    let config = p.path(".troupe/config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(
        "\n[mcp.servers.broken]\ncommand = \"sh\"\nargs = [\"-c\", \"echo cannot start: missing token >&2; exit 1\"]\n",
    );
    std::fs::write(&config, text).unwrap();
    let out = p.troupe().args(["--json", "mcp", "status"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "a failed backend makes status fail");
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    let servers = status["servers"].as_array().unwrap();
    let by = |n: &str| servers.iter().find(|s| s["name"] == n).unwrap().clone();
    assert_eq!(by("everything")["state"], "connected");
    assert!(by("everything")["tools"].as_array().unwrap().contains(&json!("echo")));
    assert_eq!(by("filesystem")["state"], "connected");
    assert_eq!(by("broken")["state"], "failed");
    assert!(by("broken")["stderr_tail"].to_string().contains("missing token"), "{}", by("broken"));
}

#[test]
fn backends_from_mcp_json_are_served_and_config_toml_wins_a_clash() {
    let p = project();
    let everything = peers::bin("mcp-server-everything").display().to_string();
    std::fs::write(
        p.path(".mcp.json"),
        json!({"mcpServers": {
            "extra": {"command": everything, "args": ["stdio"]},
            "filesystem": {"command": "false"},
        }})
        .to_string(),
    )
    .unwrap();
    let status = json_out(&p.troupe().args(["--json", "mcp", "status"]).output().unwrap());
    let servers = status["servers"].as_array().unwrap();
    let by = |n: &str| servers.iter().find(|s| s["name"] == n).unwrap_or_else(|| panic!("{n}: {status}")).clone();
    assert_eq!(by("extra")["state"], "connected");
    assert!(by("extra")["tools"].as_array().unwrap().contains(&json!("echo")));
    assert_eq!(by("filesystem")["state"], "connected", "config.toml's filesystem, not .mcp.json's `false`");
    assert!(status["warnings"].to_string().contains("shadowed"), "{status}");
    std::fs::write(p.path(".mcp.json"), "{not json").unwrap();
    let out = p.troupe().args(["mcp", "status"]).output().unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains(".mcp.json"));
}

#[test]
fn bad_server_names_and_skills_are_config_errors() {
    let p = project();
    let config = p.path(".troupe/config.toml");
    let original = std::fs::read_to_string(&config).unwrap();
    for bad in ["file__system", "_fs", "troupe", "ｆｓ"] {
        std::fs::write(&config, format!("{original}\n[mcp.servers.\"{bad}\"]\ncommand = \"true\"\n")).unwrap();
        let out = p.troupe().args(["mcp", "status", "--no-connect"]).output().unwrap();
        assert_eq!(out.status.code(), Some(3), "{bad}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("invalid server name"),
            "{bad}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    std::fs::write(&config, original).unwrap();
    std::fs::write(p.path(".troupe/skills/guest/SKILL.md"), "---\nid: guest\nallowedTools: [fs__read*]\n---\n")
        .unwrap();
    let out = p.troupe().args(["policy", "roles"]).output().unwrap();
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("guest/SKILL.md") && err.contains("fs__read*"), "{err}");
}

#[test]
fn policy_check_and_roles_show_the_merged_policy() {
    let p = project();
    std::fs::write(
        p.path(".troupe/config.toml"),
        std::fs::read_to_string(p.path(".troupe/config.toml")).unwrap()
            + "\n[gateway.roles.senior]\ninherits = \"developer\"\n\n[gateway.roles.loop-a]\ninherits = \"loop-b\"\n\n[gateway.roles.loop-b]\ninherits = \"loop-a\"\n",
    )
    .unwrap();
    let roles = json_out(&p.troupe().args(["--json", "policy", "roles"]).output().unwrap());
    let ids: Vec<&str> = roles["roles"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap()).collect();
    for id in ["admin", "developer", "guest", "senior", "loop-a"] {
        assert!(ids.contains(&id), "{ids:?}");
    }
    assert!(roles["warnings"].to_string().contains("Circular inheritance detected for role: loop-a"));
    let check = json_out(&p.troupe().args(["--json", "policy", "check", "--role", "senior"]).output().unwrap());
    assert_eq!(check["inheritanceChain"], json!(["senior", "developer"]));
    assert_eq!(check["memory"]["policy"], "isolated");
    assert!(check["servers"].as_array().unwrap().contains(&json!("everything")));
    let out =
        p.troupe().args(["policy", "check", "--role", "guest", "--tool", "everything__get-sum"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("everything__get-sum: deny (no skill of the role allows it)")
    );
    let out = p.troupe().args(["policy", "check", "--role", "nobody"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("known roles: admin"));
}

#[test]
fn init_writes_default_skills_that_make_a_working_policy() {
    let p = TestProject::new();
    let roles = json_out(&p.troupe().args(["--json", "policy", "roles"]).output().unwrap());
    let ids: Vec<&str> = roles["roles"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        [
            "adhoc",
            "architect",
            "auditor",
            "builder",
            "coordinator",
            "inspector",
            "lead",
            "orchestrator",
            "task-generator"
        ]
    );
    assert_eq!(roles["warnings"], json!([]));
    for (tool, code) in [
        ("Write", 1),
        ("Bash", 1),
        ("Read", 0),
        ("troupe__board_create", 0),
        ("troupe__board_claim", 1),
        ("troupe__send_message", 0),
    ] {
        let out = p.troupe().args(["policy", "check", "--role", "coordinator", "--tool", tool]).output().unwrap();
        assert_eq!(out.status.code(), Some(code), "coordinator {tool}: {}", String::from_utf8_lossy(&out.stdout));
    }
    let out = p.troupe().args(["policy", "check", "--role", "builder", "--tool", "apply_patch"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn skill_add_list_and_templates() {
    let p = project();
    let templates = json_out(&p.troupe().args(["--json", "skill", "templates"]).output().unwrap());
    let names: Vec<&str> = templates.as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["basic", "browser-limited", "code-reviewer", "data-analyst", "flight-booking", "personal-assistant"]
    );
    p.troupe().args(["skill", "add", "review", "--template", "code-reviewer"]).assert().success();
    let path = p.path(".troupe/skills/review/SKILL.md");
    let written = std::fs::read_to_string(&path).unwrap();
    assert!(written.contains("id: review") && written.contains("allowedRoles: [reviewer]"), "{written}");
    let before = p.snapshot();
    for (args, needle) in [
        (vec!["skill", "add", "review"], "already exists"),
        (vec!["skill", "add", "x", "--template", "nope"], "unknown template"),
        (vec!["skill", "add", "../evil"], "invalid skill id"),
    ] {
        let out = p.troupe().args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(needle),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(p.snapshot(), before, "refused commands change nothing");
    let list = json_out(&p.troupe().args(["--json", "skill", "list"]).output().unwrap());
    let ids: Vec<&str> = list["skills"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert!(ids.contains(&"review") && ids.contains(&"dev"), "{ids:?}");
    let roles = json_out(&p.troupe().args(["--json", "policy", "roles"]).output().unwrap());
    assert!(roles["roles"].to_string().contains("\"reviewer\""));
}

// ---- the real Claude Code CLI ----

#[test]
fn real_claude_code_through_the_gateway() {
    let p = project();
    let mcp_config = p.path("mcp.json");
    let troupe_bin = assert_cmd::cargo::cargo_bin("troupe");
    std::fs::write(
        &mcp_config,
        json!({"mcpServers": {"troupe": {
            "command": troupe_bin,
            "args": ["-C", p.root(), "mcp", "serve", "--role", "developer", "--agent", "claude-1"],
        }}})
        .to_string(),
    )
    .unwrap();
    let stub = AnthropicStub::start(Script::new([
        Turn::tool("mcp__troupe__everything__echo", json!({"message": "through the gateway"})),
        Turn::tool("mcp__troupe__filesystem__write_file", json!({"path": p.path("files/x.txt"), "content": "no"})),
        Turn::tool("mcp__troupe__set_role", json!({"role_id": "admin"})),
        Turn::tool("mcp__troupe__set_role", json!({"role_id": "guest"})),
        Turn::tool("mcp__troupe__everything__get-sum", json!({"a": 1, "b": 2})),
        Turn::text("Done."),
    ]));
    let claude = Claude::new(&stub.url());
    let mut cmd = claude.command("use the tools", p.root());
    // The gateway starts its backends (two node processes) on the first tools/list;
    // give it time on a loaded machine.
    cmd.arg("--mcp-config").arg(&mcp_config).env("MCP_TIMEOUT", "60000");
    for var in ["TROUPE_AGENT_ID", "TROUPE_ROLE", "TROUPE_FEATURE", "TROUPE_TASK_ID", "TROUPE_PROJECT", "TROUPE_HOOKS"]
    {
        cmd.env_remove(var);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "claude failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    let events = json_lines(&out.stdout);
    let init = events.iter().find(|e| e["type"] == "system" && e["subtype"] == "init").expect("init event");
    // Claude may announce the server while it is still connecting ("pending")
    // on a loaded machine; the tool results below prove the connection.
    let troupe = init["mcp_servers"].as_array().and_then(|s| s.iter().find(|s| s["name"] == "troupe")).cloned();
    let status = troupe.as_ref().map(|s| s["status"].clone()).unwrap_or_default();
    assert!(status == "connected" || status == "pending", "{}", init["mcp_servers"]);

    // The tool results Claude sent back to the model, in order.
    let last = stub.model_requests().into_iter().last().expect("model requests");
    let results: Vec<String> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter(|b| b["type"] == "tool_result")
        .map(|b| b["content"].to_string())
        .collect();
    assert_eq!(results.len(), 5, "{results:?}");
    // A refusal is either Claude's own (the tool is not in the list the gateway gave it)
    // or the gateway's (the call reached it and was checked); both leave the tool unrun.
    let refused = |r: &str| r.contains("No such tool available") || r.contains("is not available to role");
    let by_gateway = |r: &str| r.contains("is not available to role") || r.contains("above this connection's role");
    let offered: Vec<String> = stub.model_requests()[0]["tools"]
        .as_array()
        .map(|t| t.iter().filter_map(|t| t["name"].as_str().map(str::to_string)).collect())
        .unwrap_or_default();
    assert!(results[0].contains("Echo: through the gateway"), "allowed: {}\noffered: {offered:?}", results[0]);
    assert!(refused(&results[1]), "forbidden: {}", results[1]);
    assert!(!p.path("files/x.txt").exists());
    assert!(results[2].contains("above this connection's role"), "set_role above the ceiling: {}", results[2]);
    assert!(results[3].contains("\\\"role\\\":\\\"guest\\\""), "set_role to a permitted role: {}", results[3]);
    assert!(refused(&results[4]) && !results[4].contains("is 3"), "after the switch: {}", results[4]);
    let gateway_denials = results.iter().filter(|r| by_gateway(r)).count();

    let stats = json_out(&p.troupe().args(["--json", "audit", "stats", "--agent", "claude-1"]).output().unwrap());
    assert_eq!(stats["denied"].as_u64().unwrap() as usize, gateway_denials, "{stats}");
    assert_eq!(stats["byTool"]["everything__echo"], 1, "{stats}");
}
