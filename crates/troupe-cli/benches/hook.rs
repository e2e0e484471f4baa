//! `troupe hook claude PreToolUse`, end to end (process start to exit, warm
//! cache), beside an equivalent shell + jq gate script measured in the same run,
//! and a teammate's calls: a Builder's write of its own file in a project with
//! 200 skills (the role policy from the skills cache) and a database (plan
//! mode and file safety read it), once allowed (the common call of a
//! teammate's run) and once refused by the skills (recorded in the store),
//! beside `troupe --version` (the process alone). While the teammate rows
//! run, the bench holds the store open the way a running Lead does. The
//! Builder's rows run twice: the hook answering itself, then through a
//! hook answerer (`troupe __hook-answerer`, what a Lead hosts for its
//! teammates), whose answers must be the same.
//!
//! Run: `cargo bench -p troupe-cli --bench hook`. Prints p50/p99; asserts nothing.
//! `TROUPE_BIN=/path/to/troupe` measures another build of `troupe` under the
//! same bench (to compare two builds alternated on a shared machine).

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const RUNS: usize = 500;
const WARMUP: usize = 30;

/// The seed's check-skill-gate.sh, deny-by-default, in shell + jq.
const SHELL_GATE: &str = r#"#!/bin/sh
input=$(cat) || { echo "gate: cannot read stdin" >&2; exit 2; }
session=$(printf '%s' "$input" | jq -er '.session_id') || { echo "gate: SESSION_ID extraction failed" >&2; exit 2; }
tool=$(printf '%s' "$input" | jq -er '.tool_name') || { echo "gate: tool_name extraction failed" >&2; exit 2; }
case "$tool" in Write|Edit|MultiEdit) ;; *) exit 0 ;; esac
file=$(printf '%s' "$input" | jq -er '.tool_input.file_path') || { echo "gate: file_path extraction failed" >&2; exit 2; }
case "$file" in
  *.rs|*.ts|*.tsx|*.js|*.py|*.go) skill=code-quality-rules; code=1 ;;
  *.md|*.txt) skill=document-quality-rules; code=0 ;;
  *) exit 0 ;;
esac
dir="$MARKERS/$session"
if [ ! -e "$dir/skill.$skill" ]; then
  printf '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"invoke %s first"}}' "$skill"
  exit 0
fi
[ "$code" = 1 ] && { mkdir -p "$dir" && : > "$dir/code-session" || { echo "gate: marker write failed" >&2; exit 2; }; }
exit 0
"#;

/// Wall time (spawn to exit) and CPU time (user and system, from the exited
/// child's schedstat, read before it is reaped) of each run, sorted: on a
/// machine shared with other work the wall time is mostly waiting for a
/// core, and the CPU time is what the call itself costs.
fn time_runs(mut make: impl FnMut() -> Command, input: &[u8]) -> (Vec<Duration>, Vec<Duration>) {
    use nix::sys::wait::{Id, WaitPidFlag, waitid};
    let (mut times, mut cpu) = (Vec::with_capacity(RUNS), Vec::with_capacity(RUNS));
    for i in 0..RUNS + WARMUP {
        let mut cmd = make();
        let started = Instant::now();
        let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        child.stdin.take().unwrap().write_all(input).unwrap();
        waitid(Id::Pid(nix::unistd::Pid::from_raw(child.id() as i32)), WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT)
            .unwrap();
        let elapsed = started.elapsed();
        let ran = std::fs::read_to_string(format!("/proc/{}/schedstat", child.id())).unwrap_or_default();
        let ran = Duration::from_nanos(ran.split_whitespace().next().and_then(|n| n.parse().ok()).unwrap_or(0));
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(0), "the gate must allow in this benchmark");
        if i >= WARMUP {
            times.push(elapsed);
            cpu.push(ran);
        }
    }
    times.sort();
    cpu.sort();
    (times, cpu)
}

fn pct(times: &[Duration], p: f64) -> f64 {
    let i = ((times.len() as f64 - 1.0) * p).round() as usize;
    times[i].as_secs_f64() * 1000.0
}

fn report(name: &str, (times, cpu): &(Vec<Duration>, Vec<Duration>)) {
    println!(
        "{name:<40} p50 {:>6.2} ms   p99 {:>6.2} ms   max {:>6.2} ms   CPU p50 {:>5.2} ms   (n={})",
        pct(times, 0.5),
        pct(times, 0.99),
        pct(times, 1.0),
        pct(cpu, 0.5),
        times.len()
    );
}

fn main() {
    let troupe_bin = std::env::var_os("TROUPE_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_troupe").into());
    let troupe = troupe_bin.as_os_str();
    println!("troupe: {}", Path::new(troupe).display());
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    std::fs::create_dir_all(project.join(".troupe")).unwrap();
    let state = tmp.path().join("state");
    // The common case: the skill was invoked, the write is allowed and marks the code session.
    let markers = state.join("markers/bench-session");
    std::fs::create_dir_all(&markers).unwrap();
    set_private(&state.join("markers"));
    set_private(&markers);
    std::fs::write(markers.join("skill.code-quality-rules"), "").unwrap();
    let input = serde_json::json!({
        "session_id": "bench-session", "transcript_path": "/dev/null", "cwd": project,
        "permission_mode": "bypassPermissions", "hook_event_name": "PreToolUse", "tool_name": "Write",
        "tool_input": {"file_path": project.join("src/main.rs"), "content": "fn main() {}\n"}, "tool_use_id": "toolu_0"
    })
    .to_string();
    let script = tmp.path().join("gate.sh");
    std::fs::write(&script, SHELL_GATE).unwrap();

    let troupe_times = time_runs(
        || {
            let mut c = Command::new(troupe);
            c.args(["hook", "claude", "PreToolUse"]).env("TROUPE_STATE_DIR", &state).env_remove("TROUPE_ROLE");
            c
        },
        input.as_bytes(),
    );
    let shell_times = time_runs(
        || {
            let mut c = Command::new("sh");
            c.arg(&script).env("MARKERS", state.join("markers"));
            c
        },
        input.as_bytes(),
    );
    // The Lead holds the store open for the whole run, so a teammate's hook
    // finds its WAL index live (without it, each call rebuilds it from the WAL).
    let allowed = teammate_project(tmp.path(), "allowed", "builtin__write");
    let refused = teammate_project(tmp.path(), "refused", "fs__write_file");
    let _leads: Vec<_> = [&allowed.0, &refused.0]
        .iter()
        .map(|root| troupe_store::SqliteStore::open_project(&troupe_core::layout::Layout::new(root)).unwrap())
        .collect();
    let builder = |(root, input): &(std::path::PathBuf, String), answerer: Option<&str>| {
        let teammate = |c: &mut Command| {
            match answerer {
                Some(target) => c.env("TROUPE_HOOK_ANSWERER", target),
                None => c.env_remove("TROUPE_HOOK_ANSWERER"),
            };
            c.args(["hook", "claude", "PreToolUse"])
                .env("TROUPE_PROJECT", root)
                .env("TROUPE_ROLE", "builder")
                .env("TROUPE_AGENT_ID", "builder-g1-1")
                .env("TROUPE_FEATURE", "bench")
                .env("TROUPE_GROUP", "G1")
                .env("TROUPE_OWNED_FILES", "src/lib.rs")
                .env("TROUPE_STATE_DIR", &state)
                .current_dir(root);
        };
        let mut probe = Command::new(troupe);
        teammate(&mut probe);
        let answer = probe
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .and_then(|mut child| {
                child.stdin.take().unwrap().write_all(input.as_bytes())?;
                child.wait_with_output()
            })
            .unwrap();
        let times = time_runs(
            || {
                let mut c = Command::new(troupe);
                teammate(&mut c);
                c
            },
            input.as_bytes(),
        );
        (String::from_utf8_lossy(&answer.stdout).into_owned(), times)
    };
    // The Builder invoked the code skill (its markers are keyed by its id).
    let builder_markers = state.join("markers/builder-g1-1");
    std::fs::create_dir_all(&builder_markers).unwrap();
    set_private(&builder_markers);
    std::fs::write(builder_markers.join("skill.code-quality-rules"), "").unwrap();
    let (allowed_answer, allowed_times) = builder(&allowed, None);
    let (refused_answer, refused_times) = builder(&refused, None);
    assert_eq!(allowed_answer, "", "the allowed row measures an allowed write");
    assert!(refused_answer.contains("\"deny\""), "the refused row measures a refusal: {refused_answer}");
    // The same calls answered by a running troupe (as a Lead hosts one for its teammates).
    let mut host = Command::new(troupe)
        .arg("__hook-answerer")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(host.stdout.take().unwrap()), &mut line).unwrap();
    let target = line.trim().strip_prefix("TROUPE_HOOK_ANSWERER=").expect("the answerer names itself").to_string();
    let (served_allowed, served_allowed_times) = builder(&allowed, Some(&target));
    let (served_refused, served_refused_times) = builder(&refused, Some(&target));
    drop(host.stdin.take());
    let counts = host.wait_with_output().unwrap();
    let counts = String::from_utf8_lossy(&counts.stderr).into_owned();
    assert_eq!(served_allowed, allowed_answer, "the answerer answers as the hook does");
    assert_eq!(served_refused, refused_answer, "the answerer answers as the hook does");
    let expected = 2 * (1 + RUNS + WARMUP);
    assert_eq!(counts.trim(), format!("answered {expected} declined 0"), "every call went to the answerer");
    let version_times = time_runs(
        || {
            let mut c = Command::new(troupe);
            c.arg("--version");
            c
        },
        b"",
    );
    println!("hook PreToolUse (Write src/main.rs, skill invoked: allow), {RUNS} runs after {WARMUP} warm-up");
    report("troupe hook claude PreToolUse", &troupe_times);
    report("shell + jq gate script (same check)", &shell_times); // CPU: the shell alone, not its jq
    println!("a Builder's Write of its own file, 200 skills, a database (the refusal: {refused_answer:?})");
    report("troupe hook (Builder, allowed)", &allowed_times);
    report("troupe hook (Builder, refused by skills)", &refused_times);
    println!("the same, answered by a running troupe (TROUPE_HOOK_ANSWERER, as a Lead's teammates are)");
    report("troupe hook (Builder, allowed), answerer", &served_allowed_times);
    report("troupe hook (Builder, refused), answerer", &served_refused_times);
    report("troupe --version (process start)", &version_times);
}

/// A project with 200 skills (cached, as the Lead leaves them before a
/// spawn) that give a Builder `tool` among others, and a database; the
/// input of a Builder writing its own file.
fn teammate_project(tmp: &Path, name: &str, tool: &str) -> (std::path::PathBuf, String) {
    let root = tmp.join(name);
    std::fs::create_dir_all(root.join(".troupe/state")).unwrap();
    for i in 0..200 {
        let dir = root.join(format!(".troupe/skills/skill-{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("SKILL.md"),
            format!(
                "---\nname: skill-{i}\ndescription: Rules for part {i} of the project.\n\
                 allowedRoles: [builder, architect]\nallowedTools: [\"fs__read_file\", \"{tool}\", \"git__*\"]\n---\n# Skill {i}\n"
            ),
        )
        .unwrap();
    }
    let layout = troupe_core::layout::Layout::new(&root);
    drop(troupe_store::SqliteStore::open_project(&layout).unwrap());
    // The cache is written only for skills older than its settling time.
    std::thread::sleep(troupe_gate::skill_cache::SETTLE + Duration::from_millis(100));
    troupe_gate::skill_cache::warm(&root);
    assert!(root.join(".troupe/state/cache/skills.json").is_file(), "the skills are cached");
    assert!(root.join(".troupe/state/cache/role-policy.json").is_file(), "the role policy is compiled");
    let input = serde_json::json!({
        "session_id": "builder-session", "transcript_path": "/dev/null", "cwd": root,
        "permission_mode": "bypassPermissions", "hook_event_name": "PreToolUse", "tool_name": "Write",
        "tool_input": {"file_path": root.join("src/lib.rs"), "content": "pub fn f() {}\n"}, "tool_use_id": "toolu_1"
    })
    .to_string();
    (root, input)
}

fn set_private(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).unwrap();
}
