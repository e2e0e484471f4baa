//! `troupe hook`, `troupe skill use` and `troupe init --claude …`: through the
//! binary, and with the real Claude Code CLI running against the Anthropic stub.

use std::path::Path;
use std::process::Output;

use proptest::prelude::*;
use serde_json::{Value, json};
use troupe_testkit::anthropic::AnthropicStub;
use troupe_testkit::claude::Claude;
use troupe_testkit::{Script, Turn};

use crate::support::{TestProject, troupe};

/// `troupe hook <engine> <event>` with `input` on stdin and markers in `state`.
fn hook(state: &Path, engine: &str, event: &str, input: &[u8], env: &[(&str, &str)]) -> Output {
    let mut cmd = troupe();
    cmd.args(["hook", engine, event]).env("TROUPE_STATE_DIR", state).env_remove("TROUPE_HOOKS").write_stdin(input);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

/// The `troupe` binary is linked statically (`build.rs`): no dynamic loader
/// runs at any hook call (its ELF headers name no interpreter), yet it still
/// resolves host names through `/etc/hosts` (a PostgreSQL URL naming
/// `localhost` reaches the port: refused, not "failed to lookup"), and a
/// panic in the hook still unwinds to `catch_unwind`, which refuses.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn the_static_troupe_binary_resolves_host_names_and_refuses_on_a_panic() {
    assert!(!elf_has_interpreter(Path::new(env!("CARGO_BIN_EXE_troupe"))), "troupe is linked statically");

    let project = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(project.path().join(".troupe")).unwrap();
    // A port nobody listens on: the connection is refused once the name resolved.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let out = troupe()
        .args(["board", "list"])
        .current_dir(project.path())
        .env("TROUPE_DATABASE_URL", format!("postgres://troupe@localhost:{port}/troupe"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("Connection refused") && !err.contains("lookup"), "{err}");

    let state = tempfile::tempdir().unwrap();
    let input = pre_write(project.path(), "src/main.rs");
    let panicked = hook(state.path(), "claude", "PreToolUse", &input, &[("TROUPE_HOOK_TEST_PANIC", "1")]);
    assert!(is_deny(&panicked), "{panicked:?}");
    let said = format!("{}{}", String::from_utf8_lossy(&panicked.stdout), String::from_utf8_lossy(&panicked.stderr));
    assert!(said.contains("troupe's hook panicked"), "{said}");
}

/// Whether the ELF file at `path` names a program interpreter (`PT_INTERP`):
/// a dynamically linked executable does, a static one does not. Reads only
/// the headers (a debug `troupe` is hundreds of MB).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn elf_has_interpreter(path: &Path) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    const PT_INTERP: u32 = 3;
    let mut file = std::fs::File::open(path).unwrap();
    let mut header = [0u8; 64];
    file.read_exact(&mut header).unwrap();
    assert_eq!(&header[..5], b"\x7fELF\x02", "a 64-bit ELF file");
    let phoff = u64::from_le_bytes(header[0x20..0x28].try_into().unwrap());
    let phentsize = u16::from_le_bytes(header[0x36..0x38].try_into().unwrap()) as usize;
    let phnum = u16::from_le_bytes(header[0x38..0x3a].try_into().unwrap()) as usize;
    let mut table = vec![0u8; phentsize * phnum];
    file.seek(SeekFrom::Start(phoff)).unwrap();
    file.read_exact(&mut table).unwrap();
    table.chunks(phentsize).any(|ph| u32::from_le_bytes(ph[..4].try_into().unwrap()) == PT_INTERP)
}

fn pre_write(cwd: &Path, path: &str) -> Vec<u8> {
    json!({
        "session_id": "sess-1", "cwd": cwd, "hook_event_name": "PreToolUse", "tool_name": "Write",
        "tool_input": {"file_path": path, "content": "fn main() {}\n"}, "tool_use_id": "toolu_0"
    })
    .to_string()
    .into_bytes()
}

fn stdout_json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

fn is_deny(out: &Output) -> bool {
    out.status.code() == Some(2)
        || (out.status.code() == Some(0)
            && serde_json::from_slice::<Value>(&out.stdout)
                .is_ok_and(|v| v["hookSpecificOutput"]["permissionDecision"] == "deny"))
}

#[test]
fn skill_gate_through_the_binary() {
    let p = TestProject::new();
    let state = tempfile::tempdir().unwrap();
    let denied = hook(state.path(), "claude", "PreToolUse", &pre_write(p.root(), "src/main.rs"), &[]);
    assert_eq!(denied.status.code(), Some(0));
    let v = stdout_json(&denied);
    assert_eq!(v["hookSpecificOutput"]["hookEventName"], "PreToolUse");
    assert_eq!(v["hookSpecificOutput"]["permissionDecision"], "deny");
    assert!(v["hookSpecificOutput"]["permissionDecisionReason"].as_str().unwrap().contains("code-quality-rules"));

    let used = troupe()
        .args(["skill", "use", "code-quality-rules", "--session", "sess-1", "--json"])
        .arg("-C")
        .arg(p.root())
        .env("TROUPE_STATE_DIR", state.path())
        .output()
        .unwrap();
    assert!(used.status.success(), "{}", String::from_utf8_lossy(&used.stderr));
    let used = stdout_json(&used);
    assert_eq!((used["recorded"].as_bool(), used["source"].as_str()), (Some(true), Some("built into troupe")));

    let allowed = hook(state.path(), "claude", "PreToolUse", &pre_write(p.root(), "src/main.rs"), &[]);
    assert_eq!((allowed.status.code(), allowed.stdout.as_slice()), (Some(0), &b""[..]));

    // The code session now needs verification before stopping; once continuing, it may stop.
    let stop = |active: bool| {
        json!({"session_id": "sess-1", "cwd": p.root(), "hook_event_name": "Stop", "stop_hook_active": active})
            .to_string()
    };
    let blocked = hook(state.path(), "claude", "Stop", stop(false).as_bytes(), &[]);
    assert_eq!(stdout_json(&blocked)["decision"], "block");
    let again = hook(state.path(), "claude", "Stop", stop(true).as_bytes(), &[]);
    assert_eq!((again.status.code(), again.stdout.as_slice()), (Some(0), &b""[..]));

    // Markers live in a private directory.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(state.path().join("markers")).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
}

/// `troupe hook <engine> <event>` is answered before clap (`main.rs`); a
/// trailing `--` sends the same call through clap. Both give the same bytes
/// and exit code for every kind of answer: allow, deny, context, block,
/// refusals of bad input, unknown engines and events, and a teammate's
/// denial recorded in the store.
#[test]
fn the_hook_fast_path_answers_exactly_as_the_clap_path() {
    let p = TestProject::new();
    let state = tempfile::tempdir().unwrap();
    let marker = state.path().join("markers/sess-1");
    std::fs::create_dir_all(&marker).unwrap();
    std::fs::write(marker.join("skill.code-quality-rules"), "").unwrap();
    let stop = json!({"session_id": "sess-1", "cwd": p.root(), "hook_event_name": "Stop", "stop_hook_active": false});
    let prompt =
        json!({"session_id": "sess-1", "cwd": p.root(), "hook_event_name": "UserPromptSubmit", "prompt": "hi"});
    let builder: &[(&str, &str)] =
        &[("TROUPE_AGENT_ID", "builder-3"), ("TROUPE_ROLE", "builder"), ("TROUPE_OWNED_FILES", "src/auth.rs")];
    type Env<'a> = &'a [(&'a str, &'a str)];
    let cases: Vec<(&str, &str, Vec<u8>, Env)> = vec![
        ("claude", "PreToolUse", pre_write(p.root(), "src/main.rs"), &[]),
        ("claude", "PreToolUse", pre_write(p.root(), "docs/guide.md"), &[]),
        ("claude", "PreToolUse", pre_bash(p.root(), "rm -rf .claude"), &[]),
        ("claude", "PreToolUse", pre_bash(p.root(), "echo x > src/billing.rs"), builder),
        ("claude", "PreToolUse", b"not json".to_vec(), &[]),
        ("claude", "Stop", stop.to_string().into_bytes(), &[]),
        ("claude", "UserPromptSubmit", prompt.to_string().into_bytes(), &[]),
        ("gemini", "BeforeTool", b"{}".to_vec(), &[]),
        ("nope", "PreToolUse", b"{}".to_vec(), &[]),
        ("claude", "NoSuchEvent", b"{}".to_vec(), &[]),
    ];
    for (engine, event, input, env) in cases {
        let run = |clap: bool| {
            let mut cmd = troupe();
            cmd.args(["hook", engine, event]).env("TROUPE_STATE_DIR", state.path()).env_remove("TROUPE_HOOKS");
            if clap {
                cmd.arg("--");
            }
            cmd.envs(env.iter().copied()).current_dir(p.root()).write_stdin(input.clone()).output().unwrap()
        };
        let (fast, clap) = (run(false), run(true));
        let shown = |o: &Output| {
            (
                o.status.code(),
                String::from_utf8_lossy(&o.stdout).to_string(),
                String::from_utf8_lossy(&o.stderr).to_string(),
            )
        };
        assert_eq!(shown(&fast), shown(&clap), "{engine} {event} {}", String::from_utf8_lossy(&input));
    }
    // Each path recorded the teammate's denial once.
    let out = p.troupe().args(["audit", "denials", "--agent", "builder-3", "--json"]).output().unwrap();
    let records: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(records.len(), 2, "{records:?}");
}

/// `troupe __hook-answerer`: what a Lead hosts for its teammates' hooks.
struct HookAnswerer {
    child: std::process::Child,
    target: String,
}

impl HookAnswerer {
    fn start() -> HookAnswerer {
        use std::io::BufRead;
        use std::process::Stdio;
        let mut child = std::process::Command::new(troupe_bin())
            .arg("__hook-answerer")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let target = line.trim().strip_prefix("TROUPE_HOOK_ANSWERER=").unwrap_or_else(|| panic!("{line}")).to_string();
        HookAnswerer { child, target }
    }

    /// Stop it: how many calls it answered and declined.
    fn stop(mut self) -> (u64, u64) {
        drop(self.child.stdin.take());
        let out = self.child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stderr).into_owned();
        let count = |word: &str| -> u64 {
            let at = text.find(word).unwrap_or_else(|| panic!("{text}")) + word.len();
            text[at..].split_whitespace().next().unwrap().parse().unwrap()
        };
        (count("answered "), count("declined "))
    }
}

/// A Lead's teammates send their hook calls to the answerer it hosts
/// (`TROUPE_HOOK_ANSWERER`): every answer is the one the hook gives
/// itself, whether the answerer answers it (a tool call's writes, reads,
/// refusals by ownership and by a lock, the write's record afterwards) or
/// declines it (shell commands, stops, input the hook refuses); and once
/// the answerer is gone, or when the name is taken by another process,
/// the hook answers itself.
#[test]
fn a_running_troupe_answers_the_hooks_exactly_as_the_hook_itself() {
    let p = TestProject::new();
    let state = tempfile::tempdir().unwrap();
    for session in ["sess-1", "builder-3"] {
        let marker = state.path().join("markers").join(session);
        std::fs::create_dir_all(&marker).unwrap();
        std::fs::write(marker.join("skill.code-quality-rules"), "").unwrap();
    }
    let locked = p.troupe().args(["lock", "src/auth.rs", "--agent", "builder-9"]).output().unwrap();
    assert!(locked.status.success(), "{}", String::from_utf8_lossy(&locked.stderr));
    let builder: &[(&str, &str)] = &[
        ("TROUPE_AGENT_ID", "builder-3"),
        ("TROUPE_ROLE", "builder"),
        ("TROUPE_OWNED_FILES", "src/auth.rs\nsrc/a.rs"),
    ];
    let post_write = json!({"session_id": "builder-3", "cwd": p.root(), "hook_event_name": "PostToolUse",
        "tool_name": "Write", "tool_input": {"file_path": p.root().join("src/a.rs"), "content": "x"},
        "tool_response": {"success": true}});
    let read = json!({"session_id": "sess-1", "cwd": p.root(), "hook_event_name": "PreToolUse",
        "tool_name": "Read", "tool_input": {"file_path": p.root().join("src/main.rs")}});
    let stop = json!({"session_id": "sess-1", "cwd": p.root(), "hook_event_name": "Stop", "stop_hook_active": false});
    type Env<'a> = &'a [(&'a str, &'a str)];
    // (engine, event, input, environment, answered by the answerer)
    let cases: Vec<(&str, &str, Vec<u8>, Env, bool)> = vec![
        ("claude", "PreToolUse", pre_write(p.root(), "src/main.rs"), &[], true),
        ("claude", "PreToolUse", pre_write(p.root(), "docs/guide.md"), &[], true),
        ("claude", "PreToolUse", read.to_string().into_bytes(), &[], true),
        ("claude", "PreToolUse", pre_write(p.root(), "src/a.rs"), builder, true),
        ("claude", "PreToolUse", pre_write(p.root(), "src/auth.rs"), builder, true),
        ("claude", "PreToolUse", pre_write(p.root(), "src/billing.rs"), builder, true),
        ("claude", "PostToolUse", post_write.to_string().into_bytes(), builder, true),
        ("claude", "PreToolUse", pre_bash(p.root(), "echo x > src/billing.rs"), builder, false),
        ("claude", "Stop", stop.to_string().into_bytes(), &[], false),
        ("claude", "PreToolUse", b"not json".to_vec(), &[], false),
        ("nope", "PreToolUse", b"{}".to_vec(), &[], false),
    ];
    let run = |case: &(&str, &str, Vec<u8>, Env, bool), answerer: Option<&str>| {
        let (engine, event, input, env, _) = case;
        let mut cmd = troupe();
        cmd.args(["hook", engine, event]).env("TROUPE_STATE_DIR", state.path()).env_remove("TROUPE_HOOKS");
        if let Some(target) = answerer {
            cmd.env("TROUPE_HOOK_ANSWERER", target);
        }
        let out = cmd.envs(env.iter().copied()).current_dir(p.root()).write_stdin(input.clone()).output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let answerer = HookAnswerer::start();
    for case in &cases {
        let (itself, answered) = (run(case, None), run(case, Some(&answerer.target)));
        assert_eq!(answered, itself, "{} {} {}", case.0, case.1, String::from_utf8_lossy(&case.2));
    }
    let denied = run(&cases[4], None);
    assert!(denied.1.contains("troupe file lock") && denied.1.contains("builder-9"), "{denied:?}");
    assert!(run(&cases[5], None).1.contains("troupe ownership"));
    // What the store says now, not when the answerer first read it: a lock taken since refuses.
    assert_eq!(run(&cases[3], Some(&answerer.target)).1, "");
    let locked = p.troupe().args(["lock", "src/a.rs", "--agent", "builder-9"]).output().unwrap();
    assert!(locked.status.success(), "{}", String::from_utf8_lossy(&locked.stderr));
    let now_locked = run(&cases[3], Some(&answerer.target));
    assert!(now_locked.1.contains("troupe file lock"), "{now_locked:?}");
    assert_eq!(now_locked, run(&cases[3], None));
    // Another process under the answerer's name (here: the right name, the wrong pid) is not asked.
    let (_, name) = answerer.target.split_once(':').unwrap();
    assert_eq!(run(&cases[4], Some(&format!("1:{name}"))), denied);
    let target = answerer.target.clone();
    let answered = cases.iter().filter(|c| c.4).count() as u64;
    assert_eq!(answerer.stop(), (answered + 2, cases.len() as u64 - answered));
    // The answerer gone (the Lead ended): the hook answers itself.
    assert_eq!(run(&cases[4], Some(&target)), denied);
    assert_eq!(run(&cases[0], Some(&target)), run(&cases[0], None));
}

/// On PostgreSQL the answerer keeps its connection between calls and still
/// answers from what the database says at each call: a lock taken, then
/// released, since its first answer.
#[test]
fn the_answerer_reads_a_postgresql_store_as_it_is_at_each_call() {
    let p = TestProject::new();
    let url = troupe_testkit::postgres::database();
    std::fs::write(p.path(".troupe/config.toml"), format!("[store]\nbackend = \"postgres\"\nurl = \"{url}\"\n"))
        .unwrap();
    let state = tempfile::tempdir().unwrap();
    let marker = state.path().join("markers/builder-3");
    std::fs::create_dir_all(&marker).unwrap();
    std::fs::write(marker.join("skill.code-quality-rules"), "").unwrap();
    let answerer = HookAnswerer::start();
    let write = |target: Option<&str>| {
        let mut cmd = troupe();
        cmd.args(["hook", "claude", "PreToolUse"]).env("TROUPE_STATE_DIR", state.path()).env_remove("TROUPE_HOOKS");
        if let Some(target) = target {
            cmd.env("TROUPE_HOOK_ANSWERER", target);
        }
        let out = cmd
            .envs([("TROUPE_AGENT_ID", "builder-3"), ("TROUPE_ROLE", "builder"), ("TROUPE_OWNED_FILES", "src/auth.rs")])
            .current_dir(p.root())
            .write_stdin(pre_write(p.root(), "src/auth.rs"))
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let troupe_ok = |args: &[&str]| {
        let out = p.troupe().args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    troupe_ok(&["board", "create", "a task, so that the database exists"]);
    assert_eq!(write(Some(&answerer.target)), (Some(0), String::new()));
    troupe_ok(&["lock", "src/auth.rs", "--agent", "builder-9"]);
    let locked = write(Some(&answerer.target));
    assert!(locked.1.contains("troupe file lock") && locked.1.contains("builder-9"), "{locked:?}");
    assert_eq!(locked, write(None));
    troupe_ok(&["unlock", "src/auth.rs", "--agent", "builder-9"]);
    assert_eq!(write(Some(&answerer.target)), (Some(0), String::new()));
    assert_eq!(answerer.stop(), (3, 0));
}

/// A real Claude Code Builder whose hooks a running troupe answers: its own
/// file is written, the file outside its group is refused as when the
/// hooks answer themselves, and the answerer answered its tool calls.
#[test]
fn real_claude_builder_is_answered_by_the_hook_answerer() {
    let answerer = HookAnswerer::start();
    builder_writes_its_file_and_not_another(&[("TROUPE_HOOK_ANSWERER", &answerer.target)]);
    let (answered, declined) = answerer.stop();
    // At least the four tool calls' PreToolUse answered; the session's other events (a stop) declined.
    assert!(answered >= 4, "answered {answered}, declined {declined}");
    assert!(declined >= 1, "answered {answered}, declined {declined}");
}

/// A real Claude Code Builder owning `src/auth.rs` writes it and is refused
/// `src/billing.rs`, with `env` added to its environment.
fn builder_writes_its_file_and_not_another(env: &[(&str, &str)]) {
    let run = ClaudeRun::new(Script::new([
        Turn::tool("Skill", json!({"skill": "code-quality-rules"})),
        write("src/billing.rs"),
        write("src/auth.rs"),
        Turn::tool("Skill", json!({"skill": "verification-before-completion"})),
        Turn::text("Done."),
    ]));
    let builder = [
        ("TROUPE_ROLE", "builder"),
        ("TROUPE_FEATURE", "login"),
        ("TROUPE_AGENT_ID", "builder-1"),
        ("TROUPE_OWNED_FILES", "src/auth.rs"),
    ];
    run.run(&[&builder[..], env].concat());
    assert!(!run.project.path("src/billing.rs").exists());
    assert!(run.project.path("src/auth.rs").is_file(), "{:?}", run.tool_results());
    let results = run.tool_results();
    let denial = results.iter().find(|r| r.contains("troupe ownership")).unwrap_or_else(|| panic!("{results:?}"));
    assert!(denial.contains("not in this Builder's group"), "{denial}");
}

#[test]
fn every_error_path_refuses_and_says_how_to_get_unstuck() {
    let state = tempfile::tempdir().unwrap();
    let cases: [(&str, &str, &[u8], &str); 5] = [
        ("claude", "PreToolUse", b"not json", "hook input"),
        (
            "claude",
            "PreToolUse",
            br#"{"cwd":"/","tool_name":"Write","tool_input":{"file_path":"/a.rs"}}"#,
            "session id",
        ),
        ("claude", "Stop", br#"{"hook_event_name":"PreToolUse"}"#, "hook input"),
        ("vim", "PreToolUse", b"{}", "engine name"),
        ("gemini", "PreToolUse", b"{}", "event name"),
    ];
    for (engine, event, input, check) in cases {
        let out = hook(state.path(), engine, event, input, &[]);
        assert_eq!(out.status.code(), Some(2), "{engine} {event}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(&format!("the {check} check failed")), "{stderr}");
        assert!(stderr.contains("TROUPE_HOOKS=off"), "{stderr}");
    }
    // Gemini gets its deny form as well.
    let out = hook(state.path(), "gemini", "BeforeTool", b"[]", &[]);
    assert_eq!(stdout_json(&out)["decision"], "deny");
    // An unsafe state directory is an error too.
    let bad = state.path().join("bad");
    std::fs::create_dir(&bad).unwrap();
    std::os::unix::fs::symlink("/tmp", bad.join("markers")).unwrap();
    let out = hook(&bad, "claude", "PreToolUse", &pre_write(Path::new("/"), "/x.rs"), &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("symbolic link"));
    // The documented way out.
    let off = hook(state.path(), "claude", "PreToolUse", b"not json", &[("TROUPE_HOOKS", "off")]);
    assert_eq!((off.status.code(), off.stdout.as_slice()), (Some(0), &b""[..]));
}

#[test]
fn phase_detection_fallback_injects_context() {
    let state = tempfile::tempdir().unwrap();
    let input = json!({"session_id": "s", "cwd": "/", "hook_event_name": "UserPromptSubmit", "prompt": "undo/redoの実装を調べて"});
    let out = hook(state.path(), "claude", "UserPromptSubmit", input.to_string().as_bytes(), &[]);
    let v = stdout_json(&out);
    assert_eq!(v["hookSpecificOutput"]["hookEventName"], "UserPromptSubmit");
    assert!(v["hookSpecificOutput"]["additionalContext"].as_str().unwrap().contains("research"));
}

#[test]
fn quality_gate_on_task_completed_uses_steering() {
    let p = TestProject::new();
    std::fs::write(
        p.path(".troupe/steering/tech.md"),
        "# Tech\n## Common Commands\n- Test: `echo 3 tests failed; exit 2`\n- Lint: `true`\n",
    )
    .unwrap();
    let state = tempfile::tempdir().unwrap();
    let input = json!({"session_id": "s", "cwd": p.root(), "hook_event_name": "TaskCompleted", "task_id": "7", "task_subject": "x"});
    let out = hook(state.path(), "claude", "TaskCompleted", input.to_string().as_bytes(), &[]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("3 tests failed") && stderr.contains("on_task_completed"), "{stderr}");
    std::fs::write(p.path(".troupe/config.toml"), "[gates]\non_task_completed = \"exit 1\"\n").unwrap();
    let out = hook(state.path(), "claude", "TaskCompleted", input.to_string().as_bytes(), &[]);
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout_json(&out)["systemMessage"].as_str().unwrap().contains("allowed with this warning"));
}

/// The one rule of every gate: a failing test command of tech.md refuses
/// whatever its exit code (pytest's 1, `cargo test`'s 101 were allowed with a
/// warning by the hooks while the Lead failed them), and a command that cannot
/// run is the user's, named, never the agent's to fix.
#[test]
fn a_failing_test_command_refuses_in_every_hook_side_gate() {
    let p = TestProject::new();
    let state = tempfile::tempdir().unwrap();
    let tech = |test: &str| {
        std::fs::write(p.path(".troupe/steering/tech.md"), format!("# Tech\n## Common Commands\n- Test: `{test}`\n"))
            .unwrap()
    };
    let completed = json!({"session_id": "s", "cwd": p.root(), "hook_event_name": "TaskCompleted", "task_id": "7", "task_subject": "x"});
    let builder_stop =
        json!({"session_id": "s", "cwd": p.root(), "hook_event_name": "Stop", "stop_hook_active": false});
    let builder = [("TROUPE_ROLE", "builder"), ("TROUPE_AGENT_ID", "builder-1"), ("TROUPE_FEATURE", "calc")];
    for code in [1, 101] {
        tech(&format!("echo '1 failed, 3 passed'; exit {code}"));
        let out = hook(state.path(), "claude", "TaskCompleted", completed.to_string().as_bytes(), &[]);
        assert_eq!(out.status.code(), Some(2), "exit {code}: {}", String::from_utf8_lossy(&out.stdout));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("1 failed, 3 passed") && stderr.contains(&format!("(exit {code})")), "{stderr}");
        let out = hook(state.path(), "claude", "Stop", builder_stop.to_string().as_bytes(), &builder);
        assert_eq!(stdout_json(&out)["decision"], "block", "a Builder's Stop: exit {code}");
    }
    // `troupe board complete` refuses the same way and keeps the task in progress.
    p.troupe().args(["board", "create", "parser"]).assert().success();
    p.troupe().args(["board", "claim", "t1", "--agent", "alice"]).assert().success();
    let refused = p.troupe().args(["board", "complete", "t1", "--agent", "alice"]).output().unwrap();
    assert_eq!(refused.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("Test `echo '1 failed, 3 passed'; exit 101` failed (exit 101)"), "{stderr}");

    // A test command that is not installed: a warning naming it for the user, not a refusal.
    tech("no-such-runner-for-troupe -q");
    let out = hook(state.path(), "claude", "TaskCompleted", completed.to_string().as_bytes(), &[]);
    assert_eq!(out.status.code(), Some(0));
    let message = stdout_json(&out)["systemMessage"].as_str().unwrap().to_string();
    assert!(
        message.contains("could not run its Test command `no-such-runner-for-troupe -q` (exit 127)")
            && message.contains("problem of the environment")
            && message.contains("not found"),
        "{message}"
    );
    let out = hook(state.path(), "claude", "Stop", builder_stop.to_string().as_bytes(), &builder);
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout_json(&out)["systemMessage"].as_str().unwrap().contains("problem of the environment"));
    let warned = p.troupe().args(["board", "complete", "t1", "--agent", "alice"]).output().unwrap();
    assert!(warned.status.success(), "{}", String::from_utf8_lossy(&warned.stderr));
    assert!(String::from_utf8_lossy(&warned.stderr).contains("problem of the environment"));
}

/// Seed 001 施策2: a Stop the hook already sent back always ends, even when
/// the hook cannot work at all (here: its marker directory cannot be created);
/// a real Claude session looped 10 turns on the error. PreToolUse stays fail-closed.
#[test]
fn stop_hook_active_always_allows_even_with_a_broken_marker_directory() {
    let p = TestProject::new();
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("a-file");
    std::fs::write(&broken, "").unwrap();
    let stop = |active: bool| {
        json!({"session_id": "s", "cwd": p.root(), "hook_event_name": "Stop", "stop_hook_active": active}).to_string()
    };
    for engine_event in [("claude", "Stop"), ("claude", "SubagentStop")] {
        let (engine, event) = engine_event;
        let out = hook(&broken, engine, event, stop(true).as_bytes(), &[]);
        assert_eq!((out.status.code(), out.stdout.as_slice()), (Some(0), &b""[..]), "{engine} {event}");
    }
    let out = hook(&broken, "claude", "Stop", stop(false).as_bytes(), &[]);
    assert_eq!(out.status.code(), Some(2), "without stop_hook_active the error still refuses");
    assert!(String::from_utf8_lossy(&out.stderr).contains("the marker directory check failed"));
    let out = hook(&broken, "claude", "PreToolUse", &pre_write(p.root(), "src/main.rs"), &[]);
    assert!(is_deny(&out), "PreToolUse stays fail-closed");
}

#[test]
fn init_installs_and_uninstalls_hooks_exactly() {
    let p = TestProject::new();
    std::fs::create_dir_all(p.path(".claude")).unwrap();
    std::fs::write(p.path(".claude/settings.json"), "{\n  \"model\": \"opus\"\n}\n").unwrap();
    let out = troupe().args(["init", "--claude", "--json"]).arg(p.root()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let settings: Value =
        serde_json::from_str(&std::fs::read_to_string(p.path(".claude/settings.json")).unwrap()).unwrap();
    assert_eq!(settings["model"], "opus");
    assert_eq!(settings["env"]["CLAUDE_CODE_EXPERIMENTAL_AGENT_TEAMS"], "1");
    let command = settings["hooks"]["PreToolUse"][0]["hooks"][0]["command"].as_str().unwrap();
    assert!(command.starts_with('/') && command.ends_with(" hook claude PreToolUse"), "{command}");
    assert!(p.path(".claude/skills/verification-before-completion/SKILL.md").is_file());
    // Phase detection is the command hook only: no `type: "prompt"` hook that could block a person's prompt.
    let prompt_hooks = settings["hooks"]["UserPromptSubmit"][0]["hooks"].as_array().unwrap();
    assert_eq!(prompt_hooks.len(), 1);
    assert_eq!(prompt_hooks[0]["type"], "command");
    assert!(!settings.to_string().contains("\"type\":\"prompt\""), "{settings}");

    let out = troupe().args(["init", "--uninstall-hooks"]).arg(p.root()).output().unwrap();
    assert!(out.status.success());
    assert_eq!(std::fs::read_to_string(p.path(".claude/settings.json")).unwrap(), "{\n  \"model\": \"opus\"\n}\n");
    assert!(!p.path(".claude/skills").exists());

    // A settings file that does not parse: a clear error, nothing changed.
    std::fs::write(p.path(".claude/settings.json"), "{ oops").unwrap();
    let out = troupe().args(["init", "--claude", "--gemini"]).arg(p.root()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not valid JSON"));
    assert!(!p.path(".gemini").exists() && !p.path(".claude/skills").exists());
}

#[test]
fn skill_use_of_an_unknown_skill_is_a_clear_error() {
    let p = TestProject::new();
    let out = troupe().args(["skill", "use", "nope"]).arg("-C").arg(p.root()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no skill named 'nope'") && stderr.contains("hint:"), "{stderr}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    /// Whatever bytes arrive, PreToolUse never answers allow.
    #[test]
    fn arbitrary_bytes_never_allow(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let state = tempfile::tempdir().unwrap();
        let out = hook(state.path(), "claude", "PreToolUse", &bytes, &[]);
        prop_assert!(is_deny(&out), "allowed on {:?}: {:?}", String::from_utf8_lossy(&bytes), out);
    }

    /// Valid JSON of the wrong shape never allows either.
    #[test]
    fn arbitrary_json_never_allows(key in "[a-z_]{1,12}", value in any::<i64>()) {
        let state = tempfile::tempdir().unwrap();
        let input = json!({ key: value }).to_string();
        let out = hook(state.path(), "claude", "PreToolUse", input.as_bytes(), &[]);
        prop_assert!(is_deny(&out), "allowed on {input}: {out:?}");
    }
}

// ---- the real Claude Code CLI ----

/// A project with `troupe init --claude`, and a Claude run in it against `script`.
struct ClaudeRun {
    project: TestProject,
    state: tempfile::TempDir,
    stub: AnthropicStub,
    claude: Claude,
}

impl ClaudeRun {
    fn new(script: Script) -> ClaudeRun {
        let project = TestProject::new();
        let out = troupe().args(["init", "--claude"]).arg(project.root()).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let stub = AnthropicStub::start(script);
        let claude = Claude::new(&stub.url());
        ClaudeRun { project, state: tempfile::tempdir().unwrap(), stub, claude }
    }

    fn run(&self, env: &[(&str, &str)]) -> Output {
        let mut cmd = self.claude.command("do the work", self.project.root());
        clear_troupe_env(&mut cmd, self.state.path());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "claude failed: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        out
    }

    /// The tool results Claude sent back to the model, in order.
    fn tool_results(&self) -> Vec<String> {
        let Some(last) =
            self.stub.model_requests().into_iter().rfind(|r| r["tools"].as_array().is_some_and(|t| !t.is_empty()))
        else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for m in last["messages"].as_array().unwrap() {
            for block in m["content"].as_array().into_iter().flatten() {
                if block["type"] == "tool_result" {
                    out.push(block["content"].to_string());
                }
            }
        }
        out
    }

    /// All text the model was sent (to find hook feedback).
    fn conversation(&self) -> String {
        self.stub.model_requests().iter().map(|r| r["messages"].to_string()).collect::<Vec<_>>().join("\n")
    }
}

fn write(path: &str) -> Turn {
    Turn::tool("Write", json!({"file_path": path, "content": "pub fn f() {}\n"}))
}

#[test]
fn real_claude_write_is_denied_until_the_skill_then_stop_blocks_once() {
    let run = ClaudeRun::new(Script::new([
        write("src/app.rs"),
        Turn::tool("Skill", json!({"skill": "code-quality-rules"})),
        write("src/app.rs"),
        Turn::text("Done."),
        Turn::text("Verified: nothing else to do."),
    ]));
    let app = run.project.path("src/app.rs");
    run.run(&[]);
    let results = run.tool_results();
    assert!(results[0].contains("troupe skill gate"), "first Write denied: {results:?}");
    assert!(app.is_file(), "the Write after the Skill call went through");
    // The Stop hook blocked once (code changed, no verification) and Claude went on for one more turn.
    let conversation = run.conversation();
    assert!(conversation.contains("troupe stop gate"), "{conversation}");
    assert_eq!(
        run.stub.model_requests().iter().filter(|r| r["tools"].as_array().is_some_and(|t| !t.is_empty())).count(),
        5
    );
}

#[test]
fn real_claude_denied_write_creates_no_file() {
    let run = ClaudeRun::new(Script::new([write("src/lib.rs"), Turn::text("Gave up.")]));
    run.run(&[]);
    assert!(!run.project.path("src/lib.rs").exists());
    assert!(run.tool_results()[0].contains("code-quality-rules"));
    // No code was written, so the Stop gate let the session end without a second turn.
    assert!(!run.conversation().contains("troupe stop gate"));
}

#[test]
fn real_claude_builder_write_outside_its_group_is_denied() {
    builder_writes_its_file_and_not_another(&[]);
}

#[test]
fn board_complete_runs_the_on_task_completed_gate() {
    let p = TestProject::new();
    std::fs::write(
        p.path(".troupe/steering/tech.md"),
        "# Tech\n## Common Commands\n- Test: `test -f fixed || { echo \"task $TROUPE_LAST_TASK_ID by $TROUPE_AGENT_ID: 1 test failed\"; exit 2; }`\n",
    )
    .unwrap();
    p.troupe().args(["board", "create", "parser"]).assert().success();
    p.troupe().args(["board", "claim", "t1", "--agent", "alice"]).assert().success();
    let refused = p.troupe().args(["board", "complete", "t1", "--agent", "alice"]).output().unwrap();
    assert_eq!(refused.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("on_task_completed quality gate refused") && stderr.contains("task t1 by alice: 1 test failed"),
        "{stderr}"
    );
    let show = p.troupe().args(["--json", "board", "show", "t1"]).output().unwrap();
    assert!(String::from_utf8_lossy(&show.stdout).contains("in_progress"), "the task stays in progress");

    std::fs::write(p.path("fixed"), "").unwrap();
    p.troupe().args(["board", "complete", "t1", "--agent", "alice"]).assert().success();
}

// ---- the real Gemini CLI and Codex ----

/// The troupe binary under test, as the agents' shells call it.
fn troupe_bin() -> String {
    assert_cmd::cargo::cargo_bin("troupe").display().to_string()
}

fn clear_troupe_env(cmd: &mut std::process::Command, state: &Path) {
    for var in [
        "TROUPE_AGENT_ID",
        "TROUPE_ROLE",
        "TROUPE_FEATURE",
        "TROUPE_OWNED_FILES",
        "TROUPE_HOOKS",
        "TROUPE_PROJECT",
        "TROUPE_HOOK_ANSWERER",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("TROUPE_STATE_DIR", state);
}

#[test]
fn real_gemini_write_is_denied_until_troupe_skill_use() {
    use troupe_testkit::gemini::GeminiStub;
    use troupe_testkit::gemini_cli::GeminiCli;
    let p = TestProject::new();
    troupe().args(["init", "--gemini"]).arg(p.root()).assert().success();
    let target = p.path("src/hello.rs");
    let write = Turn::tool("write_file", json!({"file_path": target, "content": "pub fn hello() {}\n"}));
    let stub = GeminiStub::start(Script::new([
        write.clone(),
        Turn::tool("run_shell_command", json!({"command": format!("{} skill use code-quality-rules", troupe_bin())})),
        write,
        Turn::text("Done."),
        Turn::text("Verified."),
    ]));
    let gemini = GeminiCli::new(&stub.url());
    // Project settings are honoured only in trusted folders; the user-level file always is.
    let hooks: Value =
        serde_json::from_str(&std::fs::read_to_string(p.path(".gemini/settings.json")).unwrap()).unwrap();
    gemini.write_settings(json!({ "hooks": hooks["hooks"] }));
    let state = tempfile::tempdir().unwrap();
    let mut cmd = gemini.command("write hello", p.root());
    clear_troupe_env(&mut cmd, state.path());
    let out = cmd.output().unwrap();
    let stream = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}\n{stream}", String::from_utf8_lossy(&out.stderr));
    let events = troupe_testkit::claude::json_lines(&out.stdout);
    let denied: Vec<&Value> = events.iter().filter(|e| e["type"] == "tool_result" && e["status"] == "error").collect();
    assert_eq!(denied.len(), 1, "exactly the first write is denied: {stream}");
    assert!(denied[0].to_string().contains("troupe skill gate"), "{stream}");
    assert!(target.is_file(), "the write after `troupe skill use` went through: {stream}");
    // AfterAgent: code changed without verification, so the answer was refused once and Gemini went on.
    let sent = stub.model_requests().iter().map(|r| r.to_string()).collect::<Vec<_>>().join("\n");
    assert!(sent.contains("troupe stop gate"), "{stream}");
}

#[test]
fn real_codex_patch_is_denied_until_troupe_skill_use() {
    use troupe_testkit::codex::{Codex, add_file_patch};
    use troupe_testkit::responses::ResponsesStub;
    let p = TestProject::new();
    troupe().args(["init", "--codex"]).arg(p.root()).assert().success();
    let patch = add_file_patch("src/lib.rs", "pub fn f() {}\n");
    let stub = ResponsesStub::start(Script::new([
        Turn::freeform_tool("apply_patch", patch.clone()),
        Turn::tool("exec_command", json!({"cmd": format!("{} skill use code-quality-rules", troupe_bin())})),
        Turn::freeform_tool("apply_patch", patch),
        Turn::text("Done."),
        Turn::text("Verified."),
    ]));
    let codex = Codex::new(&stub.url());
    std::fs::copy(p.path(".codex/hooks.json"), codex.home().join("hooks.json")).unwrap();
    let state = tempfile::tempdir().unwrap();
    let mut cmd = codex.command("add lib", p.root());
    cmd.arg("--dangerously-bypass-hook-trust");
    clear_troupe_env(&mut cmd, state.path());
    let out = cmd.output().unwrap();
    let stream = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}\n{stream}", String::from_utf8_lossy(&out.stderr));
    let outputs: Vec<String> = stub
        .model_requests()
        .last()
        .map(|r| {
            r["input"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|i| i["type"].as_str().is_some_and(|t| t.ends_with("_call_output")))
                .map(|i| i.to_string())
                .collect()
        })
        .unwrap_or_default();
    assert!(outputs.first().is_some_and(|o| o.contains("troupe skill gate")), "{outputs:?}\n{stream}");
    assert!(p.path("src/lib.rs").is_file(), "the patch after `troupe skill use` applied: {outputs:?}\n{stream}");
    // Stop: code changed without verification, so Codex was sent back once with the reason.
    let sent = stub.model_requests().iter().map(|r| r.to_string()).collect::<Vec<_>>().join("\n");
    assert!(sent.contains("troupe stop gate"), "{stream}");
}

#[test]
fn teammates_are_held_to_the_role_policy_of_the_default_skills() {
    let p = TestProject::new();
    for (path, contents) in troupe_core::rbac::defaults::default_skill_files() {
        let path = p.path(&path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, contents).unwrap();
    }
    let state = tempfile::tempdir().unwrap();
    let call = |tool: &str, input: Value| {
        json!({"session_id": "s", "cwd": p.root(), "hook_event_name": "PreToolUse", "tool_name": tool, "tool_input": input})
            .to_string()
    };
    let project = p.root().display().to_string();
    let builder =
        [("TROUPE_ROLE", "builder"), ("TROUPE_OWNED_FILES", "src/a.rs"), ("TROUPE_PROJECT", project.as_str())];
    let skill = hook(
        state.path(),
        "claude",
        "PreToolUse",
        call("Skill", json!({"skill": "code-quality-rules"})).as_bytes(),
        &builder,
    );
    assert_eq!(
        (skill.status.code(), skill.stdout.as_slice()),
        (Some(0), &b""[..]),
        "{}",
        String::from_utf8_lossy(&skill.stdout)
    );
    let bash =
        hook(state.path(), "claude", "PreToolUse", call("Bash", json!({"command": "cargo test"})).as_bytes(), &builder);
    assert_eq!(bash.stdout.as_slice(), &b""[..], "{}", String::from_utf8_lossy(&bash.stdout));
    let coordinator = [("TROUPE_ROLE", "coordinator"), ("TROUPE_PROJECT", project.as_str())];
    let write =
        hook(state.path(), "claude", "PreToolUse", call("Bash", json!({"command": "ls"})).as_bytes(), &coordinator);
    let reason = stdout_json(&write)["hookSpecificOutput"]["permissionDecisionReason"].as_str().unwrap().to_string();
    assert!(reason.starts_with("troupe role policy: Coordinator may not use Bash"), "{reason}");
}

/// Seed 000 Spec 13.1 and 13.3 are enforced, not only asked for: a real Claude
/// session's Bash call that starts with a `#` comment, or runs `python3 -c`
/// without the project runtime of tech.md, is denied with the seed's rule.
#[test]
fn real_claude_bash_is_held_to_the_execution_conventions() {
    let run = ClaudeRun::new(Script::new([
        Turn::tool("Bash", json!({"command": "# make a marker\ntouch commented"})),
        Turn::tool("Bash", json!({"command": "python3 -c 'open(\"inline\", \"w\")'"})),
        Turn::tool("Bash", json!({"command": "touch plain"})),
        Turn::text("Done."),
    ]));
    std::fs::write(
        run.project.path(".troupe/steering/tech.md"),
        "# Tech\n## Common Commands\n- Test: `uv run pytest -q`\n",
    )
    .unwrap();
    run.run(&[]);
    let results = run.tool_results();
    assert!(
        results[0].contains("seed 000 Spec 13.1") && results[0].contains("`#` コメント行をプリペンドしてはならない"),
        "{results:?}"
    );
    assert!(results[1].contains("seed 000 Spec 13.3") && results[1].contains("`uv run python3 -c …`"), "{results:?}");
    assert!(!run.project.path("commented").exists() && !run.project.path("inline").exists());
    assert!(run.project.path("plain").exists(), "a plain command still runs: {results:?}");
}

#[test]
fn real_claude_builder_shell_write_is_caught_after_the_run_and_reverted() {
    let run = ClaudeRun::new(Script::new([
        // The redirect hides in a script piped into `sh`, which the PreToolUse check cannot read.
        Turn::tool("Bash", json!({"command": "echo 'echo x > src/billing.rs; echo y > src/auth.rs' | sh"})),
        Turn::text("Done."),
    ]));
    let root = run.project.root();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git").arg("-C").arg(root).args(args).output().unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    git(&["init", "-q"]);
    std::fs::create_dir_all(run.project.path("src")).unwrap();
    let config = std::fs::read_to_string(run.project.path(".troupe/config.toml")).unwrap();
    assert!(config.contains("[gates]\n"));
    std::fs::write(
        run.project.path(".troupe/config.toml"),
        config.replacen("[gates]\n", "[gates]\nrevert_violations = true\non_idle = \"\"\n", 1),
    )
    .unwrap();
    run.run(&[
        ("TROUPE_ROLE", "builder"),
        ("TROUPE_FEATURE", "login"),
        ("TROUPE_AGENT_ID", "builder-2"),
        ("TROUPE_OWNED_FILES", "src/auth.rs"),
    ]);
    assert!(!run.project.path("src/billing.rs").exists(), "reverted");
    assert!(run.project.path("src/auth.rs").is_file(), "its own file stays");
    let conversation = run.conversation();
    assert!(conversation.contains("post-run check") && conversation.contains("src/billing.rs"), "{conversation}");
    // The report is in the audit log, under the teammate's id.
    let out = run.project.troupe().args(["audit", "denials", "--agent", "builder-2", "--json"]).output().unwrap();
    let records: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert!(records.iter().any(|r| r["reason"].as_str().is_some_and(|t| t.contains("src/billing.rs"))), "{records:?}");
}

#[test]
fn real_opencode_bridge_plugin_denies_until_troupe_skill_use() {
    use troupe_testkit::chat::ChatStub;
    use troupe_testkit::opencode::OpenCode;
    let p = TestProject::new();
    troupe().args(["init", "--opencode"]).arg(p.root()).assert().success();
    let target = p.path("src/x.rs");
    let write = Turn::tool("write", json!({"filePath": target, "content": "pub fn x() {}\n"}));
    let stub = ChatStub::start(Script::new([
        write.clone(),
        Turn::tool(
            "bash",
            json!({"command": format!("{} skill use code-quality-rules", troupe_bin()), "description": "load the skill"}),
        ),
        write,
        Turn::text("Done."),
    ]));
    let opencode = OpenCode::new(&stub.url());
    troupe_testkit::opencode::satisfy_plugin_dependency(&p.path(".opencode"));
    let state = tempfile::tempdir().unwrap();
    let mut cmd = opencode.command("write x", p.root());
    clear_troupe_env(&mut cmd, state.path());
    let out = cmd.output().unwrap();
    let stream = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}\n{stream}", String::from_utf8_lossy(&out.stderr));
    let sent = stub.model_requests().iter().map(|r| r.to_string()).collect::<Vec<_>>().join("\n");
    assert!(sent.contains("troupe skill gate"), "the first write was refused with the gate's reason: {stream}");
    assert!(target.is_file(), "the write after `troupe skill use` went through: {stream}");
}

#[test]
fn real_claude_loads_troupe_as_a_plugin() {
    let p = TestProject::new();
    troupe().args(["init", "--claude-plugin"]).arg(p.root()).assert().success();
    assert!(!p.path(".claude/settings.json").exists(), "the plugin alone carries the hooks");
    let stub = AnthropicStub::start(Script::new([
        write("src/app.rs"),
        // Plugin skills are namespaced by the plugin's name.
        Turn::tool("Skill", json!({"skill": "troupe-gates:code-quality-rules"})),
        write("src/app.rs"),
        Turn::tool("Skill", json!({"skill": "troupe-gates:verification-before-completion"})),
        Turn::text("Done."),
    ]));
    let claude = Claude::new(&stub.url());
    let state = tempfile::tempdir().unwrap();
    let mut cmd = claude.command("do the work", p.root());
    cmd.arg("--plugin-dir").arg(p.path(".troupe/claude-plugin"));
    clear_troupe_env(&mut cmd, state.path());
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let sent = stub.model_requests().iter().map(|r| r["messages"].to_string()).collect::<Vec<_>>().join("\n");
    assert!(sent.contains("troupe skill gate"), "the plugin's PreToolUse hook denied the first write: {sent}");
    assert!(p.path("src/app.rs").is_file(), "allowed after the plugin's skill");
}

// ---- a person's own session: hook files off limits, denials audited (issue 13) ----

fn pre_bash(cwd: &Path, command: &str) -> Vec<u8> {
    json!({
        "session_id": "sess-13", "cwd": cwd, "hook_event_name": "PreToolUse", "tool_name": "Bash",
        "tool_input": {"command": command}, "tool_use_id": "toolu_13"
    })
    .to_string()
    .into_bytes()
}

#[test]
fn a_persons_session_keeps_hook_files_from_shell_forms_and_audits_each_denial() {
    let p = TestProject::new();
    let out = troupe().args(["init", "--claude"]).arg(p.root()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let state = tempfile::tempdir().unwrap();
    let forms = [
        "cd .claude && echo '{\"disableAllHooks\": true}' > settings.local.json",
        "mv .claude x",
        "rm -rf .claude",
        "cp -t .claude /tmp/settings.json",
        "ln -sft .claude /tmp/settings.local.json",
        "chmod 666 .claude/settings.json",
        "git rm -q .claude/settings.json",
        "echo '{\"disableAllHooks\": true}' >&.claude/settings.local.json && git add -f .claude",
    ];
    for command in forms {
        let out = hook(state.path(), "claude", "PreToolUse", &pre_bash(p.root(), command), &[]);
        assert!(is_deny(&out), "{command}: {out:?}");
        let reason = stdout_json(&out)["hookSpecificOutput"]["permissionDecisionReason"].as_str().unwrap().to_string();
        assert!(reason.contains("holds troupe's hooks"), "{command}: {reason}");
    }
    let dotdot = format!("{}/nope/../.claude/settings.json", p.root().display());
    assert!(is_deny(&hook(state.path(), "claude", "PreToolUse", &pre_write(p.root(), &dotdot), &[])));
    for command in ["cargo test", "uv run pytest -q", "git status", "ls > /dev/null"] {
        let out = hook(state.path(), "claude", "PreToolUse", &pre_bash(p.root(), command), &[]);
        assert!(!is_deny(&out), "{command}: {out:?}");
    }

    // Every denial is in the audit log the gateway writes, and `troupe audit denials` shows it.
    let out = p.troupe().args(["audit", "denials", "--limit", "100", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let records: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(records.len(), forms.len() + 1, "{records:?}");
    assert!(records.iter().all(|r| r["agent"].as_str().unwrap().starts_with("session:sess-")
        && r["role"] == "user"
        && r["decision"] == "denied"));
    assert!(records.iter().any(|r| r["tool"] == "Write"));
    assert_eq!(records.iter().filter(|r| r["tool"] == "Bash").count(), forms.len());
    // Shapes, never values: the command text is not in the log.
    assert!(records.iter().all(|r| !r["argument_shape"].to_string().contains("disableAllHooks")));
    let text = p.troupe().args(["audit", "denials"]).output().unwrap();
    assert!(String::from_utf8_lossy(&text.stdout).contains("holds troupe's hooks"));
}

#[test]
fn teammate_hook_denials_name_the_teammate_in_the_audit_log() {
    let p = TestProject::new();
    let state = tempfile::tempdir().unwrap();
    let env = [
        ("TROUPE_AGENT_ID", "builder-7"),
        ("TROUPE_ROLE", "builder"),
        ("TROUPE_FEATURE", "login"),
        ("TROUPE_OWNED_FILES", "src/auth.rs"),
    ];
    let out = hook(state.path(), "claude", "PreToolUse", &pre_bash(p.root(), "echo x > src/billing.rs"), &env);
    assert!(is_deny(&out), "{out:?}");
    let out = p.troupe().args(["audit", "denials", "--agent", "builder-7", "--json"]).output().unwrap();
    let records: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(records.len(), 1, "{records:?}");
    assert!(records[0]["reason"].as_str().unwrap().contains("troupe ownership"), "{records:?}");
    assert_eq!(records[0]["role"], "builder");
}

#[test]
fn real_claude_cannot_switch_its_hooks_off_through_the_shell() {
    let command = "cd .claude && echo '{\"disableAllHooks\": true}' > settings.local.json";
    let run = ClaudeRun::new(Script::new([Turn::tool("Bash", json!({"command": command})), Turn::text("Gave up.")]));
    run.run(&[]);
    assert!(!run.project.path(".claude/settings.local.json").exists(), "the hooks were switched off");
    let results = run.tool_results();
    assert!(results[0].contains("holds troupe's hooks"), "{results:?}");
    let out = run.project.troupe().args(["audit", "denials", "--json"]).output().unwrap();
    let records: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert!(records.iter().any(|r| r["tool"] == "Bash" && r["role"] == "user"), "{records:?}");
}
