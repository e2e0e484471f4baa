//! The gates over real payloads (captured from the real CLIs, in
//! `tests/fixtures/`) and over edited copies of them.

use serde_json::{Value, json};
use troupe_core::config::QualityGate;
use troupe_core::role::Role;

use super::*;
use crate::input;
use crate::quality::GateResult;

fn fixture(name: &str) -> Vec<Value> {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The captured Claude event named `event`.
fn claude(event: &str) -> Value {
    fixture("claude-events.jsonl").into_iter().find(|v| v["hook_event_name"] == event).unwrap()
}

fn parse(engine: Engine, value: &Value) -> HookInput {
    let name = value["hook_event_name"].as_str().unwrap();
    let event = Event::parse(engine, name).unwrap();
    input::parse(engine, event, value.to_string().as_bytes()).unwrap()
}

fn with(mut v: Value, pointer_value: &[(&str, Value)]) -> Value {
    for (key, value) in pointer_value {
        match v.pointer_mut(key) {
            Some(slot) => *slot = value.clone(),
            None => {
                let (parent, last) = key.rsplit_once('/').unwrap();
                v.pointer_mut(parent).unwrap()[last] = value.clone();
            }
        }
    }
    v
}

fn state(skills: &[&str], code: bool) -> SessionState {
    SessionState { skills: skills.iter().map(|s| s.to_string()).collect(), code_session: code }
}

fn run(ctx: &Context, hook: &HookInput, st: &SessionState) -> Outcome {
    decide(ctx, hook, st, &mut |_| None)
}

fn denied(o: &Outcome) -> &str {
    match &o.answer {
        Answer::Deny(r) | Answer::Block(r) => r,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn every_captured_claude_event_parses_and_gets_an_answer() {
    let ctx = Context::new(Engine::Claude);
    for value in fixture("claude-events.jsonl") {
        let hook = parse(Engine::Claude, &value);
        let outcome = run(&ctx, &hook, &state(&["document-quality-rules"], false));
        assert!(!matches!(outcome.answer, Answer::Error { .. }), "{value}: {outcome:?}");
    }
}

#[test]
fn skill_gate_on_the_real_write_payload() {
    let ctx = Context::new(Engine::Claude);
    // The captured write is hello.txt: a document.
    let doc = parse(Engine::Claude, &claude("PreToolUse"));
    let reason = denied(&run(&ctx, &doc, &state(&[], false))).to_string();
    assert!(reason.contains("document-quality-rules") && reason.contains("hello.txt"), "{reason}");
    assert_eq!(run(&ctx, &doc, &state(&["document-quality-rules"], false)).answer, Answer::Pass);

    let code = parse(
        Engine::Claude,
        &with(claude("PreToolUse"), &[("/tool_input/file_path", json!("/home/user/project/src/app.tsx"))]),
    );
    let reason = denied(&run(&ctx, &code, &state(&["document-quality-rules"], false))).to_string();
    assert!(reason.contains("code-quality-rules") && reason.contains("Skill tool"), "{reason}");
    let allowed = run(&ctx, &code, &state(&["code-quality-rules"], false));
    assert_eq!(allowed, Outcome { answer: Answer::Pass, effects: vec![Effect::MarkCodeSession] });

    let config = parse(Engine::Claude, &with(claude("PreToolUse"), &[("/tool_input/file_path", json!("Cargo.toml"))]));
    assert_eq!(run(&ctx, &config, &state(&[], false)).answer, Answer::Pass);

    let for_edit = with(claude("PreToolUse"), &[("/tool_name", json!("Edit"))]);
    let no_path = with(for_edit, &[("/tool_input", json!({"old_string": "a"}))]);
    let err = run(&ctx, &parse(Engine::Claude, &no_path), &state(&[], false));
    assert!(matches!(&err.answer, Answer::Error { check, .. } if check == "tool input"), "{err:?}");
}

#[test]
fn skill_invocations_are_recorded_after_the_tool_ran() {
    let ctx = Context::new(Engine::Claude);
    let skill = with(
        claude("PostToolUse"),
        &[("/tool_name", json!("Skill")), ("/tool_input", json!({"skill": "code-quality-rules"}))],
    );
    let o = run(&ctx, &parse(Engine::Claude, &skill), &state(&[], false));
    assert_eq!(o.effects, vec![Effect::MarkSkill("code-quality-rules".into())]);
    let bash = with(
        claude("PostToolUse"),
        &[
            ("/tool_name", json!("Bash")),
            ("/tool_input", json!({"command": "troupe skill use verification-before-completion"})),
        ],
    );
    let o = run(&ctx, &parse(Engine::Claude, &bash), &state(&[], false));
    assert_eq!(o.effects, vec![Effect::MarkSkill("verification-before-completion".into())]);
    let write = run(&ctx, &parse(Engine::Claude, &claude("PostToolUse")), &state(&[], false));
    assert_eq!(write, Outcome { answer: Answer::Pass, effects: vec![] });
}

#[test]
fn stop_gate_follows_the_seed() {
    let ctx = Context::new(Engine::Claude);
    let stop = parse(Engine::Claude, &claude("Stop"));
    // No code changed: a brainstorm ends freely.
    assert_eq!(run(&ctx, &stop, &state(&[], false)).answer, Answer::Pass);
    // Code changed, not verified: blocked, naming the skill.
    let reason = denied(&run(&ctx, &stop, &state(&["code-quality-rules"], true))).to_string();
    assert!(reason.contains("verification-before-completion"), "{reason}");
    // Verified: allowed.
    assert_eq!(run(&ctx, &stop, &state(&["verification-before-completion"], true)).answer, Answer::Pass);
    // Already continuing because of a Stop hook: allowed, no loop, no counter.
    let again = parse(Engine::Claude, &with(claude("Stop"), &[("/stop_hook_active", json!(true))]));
    assert_eq!(run(&ctx, &again, &state(&[], true)).answer, Answer::Pass);
}

#[test]
fn phase_guidance_is_context_never_a_block() {
    let ctx = Context::new(Engine::Claude);
    let research =
        parse(Engine::Claude, &with(claude("UserPromptSubmit"), &[("/prompt", json!("undo/redoの実装を調べて"))]));
    let Answer::Context(text) = run(&ctx, &research, &state(&[], false)).answer else { panic!() };
    assert!(text.contains("research"), "{text}");
    let write = parse(Engine::Claude, &claude("UserPromptSubmit"));
    assert!(matches!(run(&ctx, &write, &state(&[], false)).answer, Answer::Context(t) if t.contains("implement")));
    let chat = parse(Engine::Claude, &with(claude("UserPromptSubmit"), &[("/prompt", json!("thanks!"))]));
    assert_eq!(run(&ctx, &chat, &state(&[], false)).answer, Answer::Pass);
}

#[test]
fn ownership_for_teammates() {
    let owned = vec!["src/auth.rs".to_string()];
    let mut ctx = Context::new(Engine::Claude);
    ctx.root = Some("/home/user/project".into());
    ctx.teammate = Some(Teammate {
        role: Role::Builder,
        skill_role: None,
        feature: Some("login".into()),
        agent_id: Some("b1".into()),
        agent_name: None,
        task_id: None,
        group: None,
        owned_files: owned,
    });
    let skilled = state(&["code-quality-rules", "document-quality-rules"], false);
    let write =
        |path: &str| parse(Engine::Claude, &with(claude("PreToolUse"), &[("/tool_input/file_path", json!(path))]));
    assert_eq!(run(&ctx, &write("src/auth.rs"), &skilled).answer, Answer::Pass);
    let reason = denied(&run(&ctx, &write("/home/user/project/src/billing.rs"), &skilled)).to_string();
    assert!(reason.starts_with("troupe ownership: Builder may not write src/billing.rs"), "{reason}");
    let reason = denied(&run(&ctx, &write(".troupe/specs/login/spec.yaml"), &skilled)).to_string();
    assert!(reason.contains("owned by the Lead"), "{reason}");

    let bash = |cmd: &str| {
        let v = with(claude("PreToolUse"), &[("/tool_name", json!("Bash")), ("/tool_input", json!({"command": cmd}))]);
        parse(Engine::Claude, &v)
    };
    assert!(run(&ctx, &bash("echo x > src/billing.rs"), &skilled).answer.is_refusal());
    assert_eq!(run(&ctx, &bash("cargo test 2>&1 | tail"), &skilled).answer, Answer::Pass);

    ctx.root = None;
    let err = run(&ctx, &write("src/auth.rs"), &skilled);
    assert!(matches!(&err.answer, Answer::Error { check, .. } if check == "project root"));
}

#[test]
fn delegate_mode_refuses_writes_and_commands_of_any_role() {
    let mut ctx = Context::new(Engine::Claude);
    ctx.root = Some("/home/user/project".into());
    ctx.teammate = Teammate::from_env(|k| (k == "TROUPE_ROLE").then(|| "builder".to_string())).unwrap();
    ctx.delegate = true;
    let skilled = state(&["code-quality-rules", "document-quality-rules"], false);
    let write = parse(Engine::Claude, &with(claude("PreToolUse"), &[("/tool_input/file_path", json!("src/a.rs"))]));
    assert!(denied(&run(&ctx, &write, &skilled)).starts_with("delegate mode: a coordinator does not write files"));
    let v = with(claude("PreToolUse"), &[("/tool_name", json!("Bash")), ("/tool_input", json!({"command": "ls"}))]);
    assert!(denied(&run(&ctx, &parse(Engine::Claude, &v), &skilled)).contains("(Bash refused)"));
    let read = with(claude("PreToolUse"), &[("/tool_name", json!("Read")), ("/tool_input", json!({"file_path": "a"}))]);
    assert_eq!(run(&ctx, &parse(Engine::Claude, &read), &skilled).answer, Answer::Pass);
}

#[test]
fn role_policy_is_asked_first() {
    let mut ctx = Context::new(Engine::Claude);
    ctx.teammate = Teammate::from_env(|k| (k == "TROUPE_ROLE").then(|| "inspector".to_string())).unwrap();
    ctx.builtin_policy = Some(BuiltinToolPolicy(Box::new(|t, tool| {
        if tool == "Bash" { Err(format!("{} may not use {tool}", t.title())) } else { Ok(()) }
    })));
    let v = with(claude("PreToolUse"), &[("/tool_name", json!("Bash")), ("/tool_input", json!({"command": "ls"}))]);
    assert_eq!(
        denied(&run(&ctx, &parse(Engine::Claude, &v), &state(&[], false))),
        "troupe role policy: Inspector may not use Bash"
    );
}

fn gate_run(command: &str, tail: &str) -> crate::quality::GateRun {
    crate::quality::GateRun {
        label: "Test".into(),
        command: command.into(),
        detail: "exit 1".into(),
        tail: tail.into(),
    }
}

#[test]
fn quality_gates_on_task_completed_and_idle() {
    let ctx = Context::new(Engine::Claude);
    let task = parse(
        Engine::Claude,
        &json!({"session_id": "s", "hook_event_name": "TaskCompleted", "task_id": "3", "task_subject": "x"}),
    );
    let mut asked = Vec::new();
    let failed = decide(&ctx, &task, &state(&[], false), &mut |g| {
        asked.push(g);
        Some(GateResult::Failed(gate_run("make test", "1 failed")))
    });
    assert_eq!(asked, [QualityGate::OnTaskCompleted]);
    assert!(denied(&failed).contains("1 failed"));
    let warned = decide(&ctx, &task, &state(&[], false), &mut |_| Some(GateResult::Errored(gate_run("x", ""))));
    assert!(matches!(warned.answer, Answer::Warn(_)));
    // A gate that cannot run is the user's to fix: a warning, never a refusal the agent would "fix".
    let environment = decide(&ctx, &task, &state(&[], false), &mut |_| {
        Some(GateResult::Unrunnable(gate_run("pytest -q", "sh: 1: pytest: not found")))
    });
    assert!(matches!(&environment.answer, Answer::Warn(w) if w.contains("problem of the environment")));
    let idle =
        parse(Engine::Claude, &json!({"session_id": "s", "hook_event_name": "TeammateIdle", "teammate_name": "b"}));
    let mut asked = Vec::new();
    decide(&ctx, &idle, &state(&[], false), &mut |g| {
        asked.push(g);
        None
    });
    assert_eq!(asked, [QualityGate::OnIdle]);
}

#[test]
fn teammates_stop_runs_the_idle_gate() {
    let mut ctx = Context::new(Engine::Claude);
    ctx.teammate = Teammate::from_env(|k| (k == "TROUPE_ROLE").then(|| "builder".to_string())).unwrap();
    let stop = parse(Engine::Claude, &claude("Stop"));
    let o = decide(&ctx, &stop, &state(&[], false), &mut |g| {
        assert_eq!(g, QualityGate::OnIdle);
        Some(GateResult::Failed(gate_run("t", "boom")))
    });
    assert!(denied(&o).contains("boom"));
    // A reviewer that changed no code stops without running the project's tests...
    ctx.teammate = Teammate::from_env(|k| (k == "TROUPE_ROLE").then(|| "inspector".to_string())).unwrap();
    let o = decide(&ctx, &stop, &state(&[], false), &mut |g| panic!("{g:?} ran for a reviewer"));
    assert_eq!(o.answer, Answer::Pass);
    // ...but any teammate that changed code answers for them.
    let verified = state(&["verification-before-completion"], true);
    let o = decide(&ctx, &stop, &verified, &mut |_| Some(GateResult::Failed(gate_run("t", "red"))));
    assert!(denied(&o).contains("red"));
}

#[test]
fn gemini_and_opencode_payloads() {
    let ctx = Context::new(Engine::Gemini);
    for value in fixture("gemini-beforetool.jsonl") {
        let hook = parse(Engine::Gemini, &value);
        let o = run(&ctx, &hook, &state(&[], false));
        match hook.tool_name.as_deref() {
            Some("write_file") => assert!(denied(&o).contains("troupe skill use document-quality-rules")),
            _ => assert_eq!(o.answer, Answer::Pass, "{value}"),
        }
    }
    let ctx = Context::new(Engine::OpenCode);
    for value in fixture("opencode-bridge-pretooluse.jsonl") {
        let hook = parse(Engine::OpenCode, &value);
        let o = run(&ctx, &hook, &state(&["document-quality-rules"], false));
        assert_eq!(o.answer, Answer::Pass, "{value}");
        assert!(
            run(&ctx, &hook, &state(&[], false)).answer.is_refusal() == (hook.tool_name.as_deref() == Some("write"))
        );
    }
}

#[test]
fn codex_patches_are_gated_per_file() {
    let ctx = Context::new(Engine::Codex);
    let patch = "*** Begin Patch\n*** Add File: src/lib.rs\n+pub fn f() {}\n*** End Patch\n";
    let v = json!({"session_id": "c", "cwd": "/p", "hook_event_name": "PreToolUse", "tool_name": "apply_patch", "tool_input": {"command": patch}, "turn_id": "t", "model": "gpt-5.5"});
    let hook = parse(Engine::Codex, &v);
    assert!(denied(&run(&ctx, &hook, &state(&[], false))).contains("src/lib.rs"));
    assert_eq!(run(&ctx, &hook, &state(&["code-quality-rules"], false)).effects, vec![Effect::MarkCodeSession]);
}

#[test]
fn agents_cannot_edit_their_own_hooks() {
    let ctx = Context::new(Engine::Claude);
    let skilled = state(&["code-quality-rules", "document-quality-rules"], false);
    for path in ["/home/user/project/.claude/settings.json", ".claude/settings.local.json", ".codex/hooks.json"] {
        let v = with(claude("PreToolUse"), &[("/tool_input/file_path", json!(path))]);
        assert!(denied(&run(&ctx, &parse(Engine::Claude, &v), &skilled)).contains("troupe init"), "{path}");
    }
    let bash = with(
        claude("PreToolUse"),
        &[("/tool_name", json!("Bash")), ("/tool_input", json!({"command": "echo '{}' > .claude/settings.json"}))],
    );
    assert!(run(&ctx, &parse(Engine::Claude, &bash), &skilled).answer.is_refusal());
    let other = with(claude("PreToolUse"), &[("/tool_input/file_path", json!("/home/user/project/settings.json"))]);
    assert_eq!(run(&ctx, &parse(Engine::Claude, &other), &skilled).answer, Answer::Pass);
}

#[test]
fn resolved_symlinks_are_checked_where_they_point() {
    let mut ctx = Context::new(Engine::Claude);
    ctx.root = Some("/home/user/project".into());
    ctx.teammate = Some(Teammate {
        role: Role::Builder,
        skill_role: None,
        feature: Some("login".into()),
        agent_id: None,
        agent_name: None,
        task_id: None,
        group: None,
        owned_files: vec!["src/auth.rs".into()],
    });
    // As if src/auth.rs were a symlink to spec.yaml.
    ctx.resolve = Some(|p| {
        if p.ends_with("src/auth.rs") {
            "/home/user/project/.troupe/specs/login/spec.yaml".into()
        } else {
            p.to_path_buf()
        }
    });
    let v = with(claude("PreToolUse"), &[("/tool_input/file_path", json!("src/auth.rs"))]);
    let reason = denied(&run(&ctx, &parse(Engine::Claude, &v), &state(&["code-quality-rules"], false))).to_string();
    assert!(reason.contains("spec.yaml is owned by the Lead"), "{reason}");
}

#[test]
fn write_tool_paths_with_dot_dot_are_normalised() {
    let ctx = Context::new(Engine::Claude);
    let skilled = state(&["code-quality-rules", "document-quality-rules"], false);
    for path in ["/home/user/project/nope/../.claude/settings.json", "src/../.claude/./settings.local.json"] {
        let v = with(claude("PreToolUse"), &[("/tool_input/file_path", json!(path))]);
        assert!(denied(&run(&ctx, &parse(Engine::Claude, &v), &skilled)).contains("troupe init"), "{path}");
    }
}

#[test]
fn dangling_symlinks_are_followed_before_the_decision() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join("src/auth")).unwrap();
    // A link inside the owned folder to a file that does not exist yet.
    std::os::unix::fs::symlink("../../.claude/settings.local.json", root.join("src/auth/notes.md")).unwrap();
    let mut ctx = Context::new(Engine::Claude);
    ctx.root = Some(root.clone());
    ctx.resolve = Some(crate::run::resolve_symlinks);
    let skilled = state(&["code-quality-rules", "document-quality-rules"], false);
    let v = with(
        claude("PreToolUse"),
        &[("/cwd", json!(root.to_str().unwrap())), ("/tool_input/file_path", json!("src/auth/notes.md"))],
    );
    assert!(denied(&run(&ctx, &parse(Engine::Claude, &v), &skilled)).contains(".claude/settings.local.json"));
}

#[test]
fn a_persons_session_keeps_its_hook_files_from_every_shell_form() {
    let ctx = Context::new(Engine::Claude);
    let skilled = state(&["code-quality-rules", "document-quality-rules", "verification-before-completion"], false);
    let bash = |cmd: &str| {
        let v = with(claude("PreToolUse"), &[("/tool_name", json!("Bash")), ("/tool_input", json!({"command": cmd}))]);
        run(&ctx, &parse(Engine::Claude, &v), &skilled).answer
    };
    for cmd in [
        "cd .claude && echo '{\"disableAllHooks\": true}' > settings.local.json",
        "mv .claude x",
        "rm -rf .claude",
        "cp -t .claude /tmp/settings.json",
        "ln -sft .claude /tmp/settings.local.json",
        "chmod 666 .claude/settings.json",
        "git rm -q --cached .claude/settings.json",
        "echo x >&.claude/settings.local.json",
        "cd $HOME/project/.claude && touch settings.local.json",
        "rm -rf .",
    ] {
        assert!(bash(cmd).is_refusal(), "{cmd}");
    }
    for cmd in
        ["cargo test", "uv run pytest -q", "git status", "ls > /dev/null", "mkdir -p notes && echo x > notes/a.md"]
    {
        assert_eq!(bash(cmd), Answer::Pass, "{cmd}");
    }
}

#[test]
fn teammates_cannot_write_what_a_shell_names_only_at_run_time() {
    let mut ctx = Context::new(Engine::Claude);
    ctx.root = Some("/home/user/project".into());
    ctx.teammate = Some(Teammate {
        role: Role::Builder,
        skill_role: None,
        feature: Some("login".into()),
        agent_id: Some("b1".into()),
        agent_name: None,
        task_id: None,
        group: None,
        owned_files: vec!["src/auth.rs".into(), "src/auth/".into()],
    });
    let skilled = state(&["code-quality-rules", "document-quality-rules"], false);
    let bash = |cmd: &str| {
        let v = with(claude("PreToolUse"), &[("/tool_name", json!("Bash")), ("/tool_input", json!({"command": cmd}))]);
        run(&ctx, &parse(Engine::Claude, &v), &skilled).answer
    };
    assert!(bash("find . -name '*.rs' -exec sed -i s/a/b/ {} +").is_refusal());
    let Answer::Deny(reason) = bash("sed -i s/a/b/ src/*.rs") else { panic!() };
    assert!(reason.contains("only known when the command runs"), "{reason}");
    assert_eq!(bash("for f in src/auth.rs src/auth/x.rs; do sed -i s/a/b/ $f; done"), Answer::Pass);
    assert!(bash("for f in src/auth.rs src/billing.rs; do sed -i s/a/b/ $f; done").is_refusal());
}

mod corpus;

#[test]
fn every_engines_shell_tool_keeps_the_hook_files() {
    let skilled = state(&["code-quality-rules", "document-quality-rules"], false);
    let cases = [
        (Engine::Claude, "PreToolUse", "Bash", json!({"command": "cd .claude && touch settings.local.json"})),
        (Engine::Gemini, "BeforeTool", "run_shell_command", json!({"command": "mv .gemini x"})),
        (Engine::Codex, "PreToolUse", "shell", json!({"command": ["bash", "-lc", "rm -rf .codex"]})),
        (Engine::Codex, "PreToolUse", "exec_command", json!({"cmd": "ln -sft .codex /tmp/hooks.json"})),
        (Engine::Codex, "PreToolUse", "shell", json!({"command": ["touch", "hooks.json"], "workdir": ".codex"})),
        (
            Engine::Gemini,
            "BeforeTool",
            "run_shell_command",
            json!({"command": "touch settings.json", "dir_path": ".gemini"}),
        ),
        (Engine::OpenCode, "PreToolUse", "bash", json!({"command": "chmod 666 .opencode/plugin/troupe-gates.js"})),
    ];
    for (engine, event, tool, tool_input) in cases {
        let ctx = Context { engine, ..Context::new(engine) };
        let v = json!({"session_id": "s", "cwd": "/home/user/project", "hook_event_name": event,
                       "tool_name": tool, "tool_input": tool_input});
        let hook = input::parse(engine, Event::parse(engine, event).unwrap(), v.to_string().as_bytes()).unwrap();
        let answer = run(&ctx, &hook, &skilled).answer;
        assert!(
            matches!(&answer, Answer::Deny(r) if r.contains("holds troupe's hooks")),
            "{engine:?} {tool}: {answer:?}"
        );
    }
}
