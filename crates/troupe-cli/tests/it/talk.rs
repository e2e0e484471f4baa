//! Talking to the team (issue 19, seed 004): `troupe ask` under a role the
//! skills define, and `troupe workflow` → `troupe adhoc --context`, with the
//! real Claude Code against a stub model that does what troupe's prompts say.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use troupe_testkit::anthropic::AnthropicStub;
use troupe_testkit::claude::Claude;
use troupe_testkit::{Conversation, Responder, Script, Turn, peers};

use crate::support::{TestProject, json, offered};

pub(crate) fn skill(p: &TestProject, id: &str, front: &str, body: &str) {
    let dir = p.path(&format!(".troupe/skills/{id}"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("SKILL.md"), format!("---\nid: {id}\ndescription: {id} skill\n{front}\n---\n{body}\n"))
        .unwrap();
}

pub(crate) fn use_claude(p: &TestProject) {
    use_engine(p, "claude");
}

/// Point the project's `engine` at the installed real CLI of that name.
pub(crate) fn use_engine(p: &TestProject, engine: &str) {
    let config = std::fs::read_to_string(p.path(".troupe/config.toml")).unwrap_or_default();
    std::fs::write(
        p.path(".troupe/config.toml"),
        format!("{config}\n[engines.commands]\n{engine} = \"{}\"\n", peers::bin(engine).display()),
    )
    .unwrap();
}

/// `troupe --json ask --role mentor --engine <engine>` asked "What is 2+2?" on
/// standard input: its document, once it succeeded.
pub(crate) fn ask_mentor(p: &TestProject, env: Vec<(std::ffi::OsString, std::ffi::OsString)>, engine: &str) -> Value {
    let out = p
        .troupe()
        .envs(env)
        .args(["--json", "ask", "--role", "mentor", "--engine", engine])
        .write_stdin("What is 2+2?")
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    let doc = json(&out);
    assert!(out.status.success(), "{doc}\n{}", String::from_utf8_lossy(&out.stderr));
    doc
}

#[test]
fn ask_answers_from_stdin_as_a_role_of_the_skills_and_its_policy_holds() {
    let p = TestProject::new();
    use_claude(&p);
    skill(&p, "mentoring", "allowedRoles: [mentor]\nallowedTools: [builtin__read]", "Explain, never edit.");
    let notes = p.path("notes.txt");
    let stub = AnthropicStub::start(Script::new([
        Turn::tool("Write", json!({"file_path": notes, "content": "x"})),
        Turn::text("2 + 2 = 4"),
    ]));
    let claude = Claude::new(&stub.url());
    let doc = ask_mentor(&p, claude.env(), "claude");
    assert_eq!(
        (doc["answer"].as_str(), doc["role"].as_str(), doc["engine"].as_str()),
        (Some("2 + 2 = 4"), Some("mentor"), Some("claude"))
    );
    assert_eq!(doc["turns"], 2, "{doc}");
    assert!(doc["cost_usd"].is_number() && doc["model"].is_string(), "{doc}");
    assert_eq!(
        (doc["tool_calls"][0]["name"].as_str(), doc["tool_calls"][0]["ok"].as_bool()),
        (Some("Write"), Some(false))
    );
    let denial = &doc["denials"][0];
    assert_eq!(denial["tool"], "Write", "{doc}");
    assert!(denial["reason"].as_str().unwrap().contains("troupe role policy: mentor may not use Write"), "{doc}");
    assert!(!notes.exists(), "the mentor's write was held back");
    // The model was told the role and its skill, and the question.
    let first = stub.model_requests()[0].to_string();
    assert!(first.contains("Role: mentor") && first.contains("Explain, never edit.") && first.contains("What is 2+2?"));

    // A role nobody defines is refused before anything runs, naming the roles there are.
    let out = p.troupe().args(["ask", "--role", "wizard", "hi"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("unknown role 'wizard'") && err.contains("mentor"), "{err}");
}

/// The model of a workflow and of the adhoc run after it: it does what
/// troupe's prompt says, with the tools the request offers.
struct Model;

impl Responder for Model {
    fn respond(&self, c: &Conversation) -> Turn {
        if c.prompt.contains("Failure context from a workflow") {
            // Adhoc: read what failed from its instructions and say it.
            let stderr =
                c.prompt.split("\\\"stderr\\\": \\\"").nth(1).or_else(|| c.prompt.split("\"stderr\": \"").nth(1));
            let stderr = stderr.and_then(|s| s.split(['\\', '"']).next()).unwrap_or("nothing");
            return Turn::text(format!("adhoc saw: {stderr}"));
        }
        match c.turns {
            // A direct write first: the orchestrator has no write tool, so troupe refuses it.
            0 => Turn::tool("Write", json!({"file_path": "deployed.txt", "content": "x"})),
            1 => Turn::tool(offered(c, "troupe__get_skill"), json!({"skill": "deploy"})),
            2 => {
                let skill: Value = serde_json::from_str(&c.results[1]).unwrap_or_else(|_| panic!("{:?}", c.results));
                let script = skill["scripts"][0].as_str().expect("a script").to_string();
                Turn::tool(
                    offered(c, "troupe__run_script"),
                    json!({"skill": "deploy", "script": script, "args": ["prod"]}),
                )
            }
            _ => Turn::text("deploy.sh failed"),
        }
    }
}

fn script(dir: &Path, name: &str, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(name), text).unwrap();
    std::fs::set_permissions(dir.join(name), std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn a_failed_workflow_script_saves_its_context_and_adhoc_receives_it() {
    let p = TestProject::new();
    use_claude(&p);
    // The orchestrator and adhoc roles are `troupe init`'s default skills; a skill with a script for the first.
    skill(
        &p,
        "deploy",
        "allowedRoles: [orchestrator]\nallowedTools: [troupe__run_script]",
        "Deploy with scripts/deploy.sh <env>.",
    );
    script(
        &p.path(".troupe/skills/deploy/scripts"),
        "deploy.sh",
        "#!/bin/sh\necho \"deploying $1\"\necho disk-full >&2\nexit 3\n",
    );
    let listed = json(&p.troupe().args(["--json", "workflow", "--list"]).output().unwrap());
    assert_eq!(listed["skills"][0]["scripts"], json!(["deploy.sh"]), "{listed}");

    let stub = AnthropicStub::with_responder(Model);
    let claude = Claude::new(&stub.url());
    let out = p
        .troupe()
        .envs(claude.env())
        .args(["workflow", "--on-failure", "auto", "deploy the docs"])
        .timeout(Duration::from_secs(180))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "adhoc finished: {err}\n{}", String::from_utf8_lossy(&out.stdout));
    assert!(err.contains("a script failed; its context is in .troupe/context/"), "{err}");
    // adhoc's answer, from the context it was handed.
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "adhoc saw: disk-full");
    assert!(!p.path("deployed.txt").exists(), "the workflow agent's direct write was refused");
    let denials = std::fs::read_to_string(p.path(".troupe/state/denials.jsonl")).unwrap();
    assert!(denials.contains("orchestrator may not use Write"), "{denials}");

    let saved: Vec<_> = std::fs::read_dir(p.path(".troupe/context")).unwrap().flatten().map(|e| e.path()).collect();
    assert_eq!(saved.len(), 1);
    assert!(saved[0].file_name().unwrap().to_str().unwrap().ends_with("-deploy.json"));
    let ctx: Value = serde_json::from_slice(&std::fs::read(&saved[0]).unwrap()).unwrap();
    assert_eq!(ctx["skillId"], "deploy");
    assert_eq!(ctx["scriptPath"], ".troupe/skills/deploy/scripts/deploy.sh");
    assert_eq!(ctx["args"], json!(["prod"]));
    assert_eq!((ctx["error"]["exitCode"].as_i64(), ctx["error"]["stderr"].as_str()), (Some(3), Some("disk-full\n")));
    assert_eq!(ctx["error"]["stdout"], "deploying prod\n");
    assert_eq!(ctx["conversationSummary"], "deploy.sh failed");
    assert!(ctx["timestamp"].is_string());
}

#[test]
fn adhoc_holds_a_critical_command_until_approved_and_refuses_a_rejected_one() {
    let p = TestProject::new();
    use_claude(&p);
    for dir in ["build/out", "dist/out"] {
        std::fs::create_dir_all(p.path(dir)).unwrap();
        std::fs::write(p.path(&format!("{dir}/f")), "x").unwrap();
    }
    let stub = AnthropicStub::start(Script::new([
        Turn::tool("Bash", json!({"command": "rm -rf build/out", "description": "clean"})),
        Turn::tool("Bash", json!({"command": "rm -rf dist/out", "description": "clean"})),
        Turn::text("cleaned what I was allowed to"),
    ]));
    let claude = Claude::new(&stub.url());
    let out = p
        .troupe()
        .envs(claude.env())
        .args(["adhoc", "clean the build outputs"])
        .write_stdin("y\nn\n")
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let denials = std::fs::read_to_string(p.path(".troupe/state/denials.jsonl")).unwrap_or_default();
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("approve Bash \"rm -rf build/out\"? (risk critical, SHELL_EXEC) [y/N/always]"),
        "{err}\n{denials}"
    );
    assert!(!p.path("build/out").exists(), "approved: it ran");
    assert!(p.path("dist/out/f").exists(), "rejected: it did not run");
    // The model was told why, and the refusal is in the denial log.
    let told = stub.model_requests().iter().map(|r| r.to_string()).collect::<Vec<_>>().join("\n");
    assert!(told.contains("troupe adhoc: user rejected approve Bash"), "{told}");
    assert!(denials.contains("the person at the terminal said no"), "{denials}");
    // Both decisions are audited with their risk level.
    let audit = json(&p.troupe().args(["--json", "audit", "export"]).output().unwrap()).to_string();
    assert!(audit.contains("risk critical, SHELL_EXEC: approved by user"), "{audit}");
    assert!(audit.contains("rejected approve Bash \\\"rm -rf dist/out\\\""), "{audit}");
}
