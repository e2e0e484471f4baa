//! `troupe hook claude PreToolUse`, end to end (process start to exit, warm
//! cache), beside an equivalent shell + jq gate script measured in the same run.
//! Run: `cargo bench -p troupe-cli --bench hook`. Prints p50/p99; asserts nothing.

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

fn time_runs(mut make: impl FnMut() -> Command, input: &[u8]) -> Vec<Duration> {
    let mut times = Vec::with_capacity(RUNS);
    for i in 0..RUNS + WARMUP {
        let mut cmd = make();
        let started = Instant::now();
        let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        child.stdin.take().unwrap().write_all(input).unwrap();
        let status = child.wait().unwrap();
        let elapsed = started.elapsed();
        assert_eq!(status.code(), Some(0), "the gate must allow in this benchmark");
        if i >= WARMUP {
            times.push(elapsed);
        }
    }
    times.sort();
    times
}

fn pct(times: &[Duration], p: f64) -> f64 {
    let i = ((times.len() as f64 - 1.0) * p).round() as usize;
    times[i].as_secs_f64() * 1000.0
}

fn report(name: &str, times: &[Duration]) {
    println!(
        "{name:<40} p50 {:>6.2} ms   p99 {:>6.2} ms   max {:>6.2} ms   (n={})",
        pct(times, 0.5),
        pct(times, 0.99),
        pct(times, 1.0),
        times.len()
    );
}

fn main() {
    let troupe = env!("CARGO_BIN_EXE_troupe");
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
    println!("hook PreToolUse (Write src/main.rs, skill invoked: allow), {RUNS} runs after {WARMUP} warm-up");
    report("troupe hook claude PreToolUse", &troupe_times);
    report("shell + jq gate script (same check)", &shell_times);
}

fn set_private(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).unwrap();
}
