//! What `troupe agent run` adds over running an engine directly against the
//! same stub: process start, config, store registration, stream
//! normalisation, the log file. Run: `cargo bench -p troupe-cli --bench agent_overhead`.
//! Target: under 20 ms added.
//!
//! Measured twice: with the scripted fake agent (a shell script replaying a
//! real Claude stream: no model, no noise, so the difference is troupe's own
//! cost) and with the real Claude Code against the Anthropic stub.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use troupe_testkit::anthropic::AnthropicStub;
use troupe_testkit::claude::Claude;
use troupe_testkit::fake_agent::FakeAgent;
use troupe_testkit::{Script, Turn, peers};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn time(runs: usize, mut f: impl FnMut()) -> Duration {
    f(); // warm caches
    median(
        (0..runs)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed()
            })
            .collect(),
    )
}

fn check(out: std::process::Output, what: &str) {
    assert!(out.status.success(), "{what} failed: {}", String::from_utf8_lossy(&out.stderr));
}

fn troupe(project: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_troupe"));
    c.arg("-C").arg(project).stdin(Stdio::null()).env("NO_COLOR", "1");
    c
}

fn report(name: &str, direct: Duration, via: Duration) {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{name:28} direct {:8.1} ms   troupe agent run {:8.1} ms   added {:6.1} ms",
        ms(direct),
        ms(via),
        ms(via) - ms(direct)
    );
}

fn main() {
    let project = tempfile::tempdir().unwrap();
    check(troupe(project.path()).arg("init").output().unwrap(), "troupe init");
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../troupe-engine/tests/fixtures/claude-write-success.jsonl");
    let agent = FakeAgent::new().emit_file(&fixture).install();
    std::fs::write(
        project.path().join(".troupe/config.toml"),
        format!("[engines.custom.fake]\ncommand = \"{}\"\nformat = \"claude\"\n", agent.path().display()),
    )
    .unwrap();
    println!("median wall time per run");
    let direct = time(40, || check(Command::new(agent.path()).stdin(Stdio::null()).output().unwrap(), "fake agent"));
    let mut n = 0;
    let via = time(40, || {
        n += 1;
        let id = format!("bench-fake-{n}");
        check(
            troupe(project.path())
                .args(["agent", "run", "--role", "builder", "--engine", "fake", "--id", &id, "go"])
                .output()
                .unwrap(),
            "troupe agent run",
        )
    });
    report("scripted fake agent", direct, via);

    let file = project.path().join("hello.txt");
    let stub = AnthropicStub::start(Script::new([
        Turn::tool("Write", json!({"file_path": file, "content": "hi\n"})),
        Turn::text("Done."),
    ]));
    let claude = Claude::new(&stub.url());
    std::fs::write(
        project.path().join(".troupe/config.toml"),
        format!("[engines.commands]\nclaude = \"{}\"\n", peers::bin("claude").display()),
    )
    .unwrap();
    // Interleaved, so that drift (the scratch HOME filling up, load from
    // other processes) hits both sides alike.
    let mut direct = Vec::new();
    let mut via = Vec::new();
    for i in 0..12 {
        let t = Instant::now();
        let mut c = claude.command("write hello", project.path());
        c.args(["--disallowedTools=AskUserQuestion", "--model", "sonnet"]);
        check(c.output().unwrap(), "claude");
        let d = t.elapsed();
        let t = Instant::now();
        let id = format!("bench-claude-{i}");
        let mut c = troupe(project.path());
        c.envs(claude.env()).args(["agent", "run", "--role", "builder", "--id", &id, "write hello"]);
        check(c.output().unwrap(), "troupe agent run (claude)");
        if i > 0 {
            direct.push(d);
            via.push(t.elapsed());
        }
    }
    let (direct, via) = (median(direct), median(via));
    report("real Claude Code + stub", direct, via);
}
