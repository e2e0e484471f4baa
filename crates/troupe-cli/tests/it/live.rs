//! The live display on a real terminal: `troupe design` runs in a tmux pane
//! of its own (a private server, `tmux -L <unique>`) with the real Claude Code
//! CLI as its Architect, driven by an Anthropic stub. The pane must show the
//! footer's timers ticking while the Architect works, and the PreToolUse
//! hook's denial of a write outside the Architect's files while it still
//! runs — read from the denial log, as on every engine.

use std::path::{Path, PathBuf};
use std::process::Command as Std;
use std::time::{Duration, Instant};

use serde_json::json;
use troupe_testkit::anthropic::AnthropicStub;
use troupe_testkit::claude::Claude;
use troupe_testkit::{Script, Turn};

use crate::lead_claude::{bash, git, project, troupe_bin, wrapper, write};

/// A tmux server of the test's own, killed on drop.
pub(crate) struct Tmux {
    socket: String,
}

impl Tmux {
    pub(crate) fn start(command: &Path) -> Tmux {
        let socket = format!("troupe-live-{}-{}", std::process::id(), unique());
        let tmux = Tmux { socket };
        let ok = tmux
            .cmd(&["new-session", "-d", "-x", "220", "-y", "50", &command.display().to_string()])
            .status()
            .expect("tmux is installed (.ci/run installs it)")
            .success();
        assert!(ok, "tmux new-session failed");
        tmux
    }

    pub(crate) fn cmd(&self, args: &[&str]) -> Std {
        let mut c = Std::new("tmux");
        // No user config: the pane is the plain terminal the test expects.
        c.args(["-L", &self.socket, "-f", "/dev/null"]).args(args);
        c
    }

    pub(crate) fn screen(&self) -> String {
        let out = self.cmd(&["capture-pane", "-p", "-J"]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Poll the pane until `done` holds for what it shows; panic with the screen after `within`.
    pub(crate) fn until(&self, within: Duration, what: &str, mut done: impl FnMut(&str) -> bool) -> String {
        let deadline = Instant::now() + within;
        loop {
            let screen = self.screen();
            if done(&screen) {
                return screen;
            }
            assert!(Instant::now() < deadline, "the pane never showed {what}:\n{screen}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]).status();
    }
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

/// A shell script that runs troupe as the user would, with Claude's scratch
/// environment, and leaves its exit status in `status`.
pub(crate) fn runner(dir: &Path, project: &Path, claude: &Claude, args: &str, status: &Path) -> PathBuf {
    let quote = |s: &std::ffi::OsStr| format!("'{}'", s.to_string_lossy().replace('\'', "'\\''"));
    // As an interactive shell does, the runner outlives a Ctrl-C its command handles.
    let mut sh = String::from("#!/bin/sh\ntrap : INT\n");
    for k in Claude::inherited_to_remove() {
        sh.push_str(&format!("unset {}\n", k.to_string_lossy()));
    }
    for (k, v) in claude.env() {
        sh.push_str(&format!("export {}={}\n", k.to_string_lossy(), quote(&v)));
    }
    sh.push_str(&format!(
        "cd {}\n{} {args}\necho $? > {}\nsleep 600\n",
        quote(project.as_os_str()),
        quote(troupe_bin().as_os_str()),
        quote(status.as_os_str())
    ));
    let path = dir.join("run.sh");
    std::fs::write(&path, sh).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// The footer's line for the Architect, if the pane shows one.
fn footer(screen: &str) -> Option<String> {
    screen.lines().find(|l| l.contains("│ architect-1 Architect claude")).map(|l| l.trim_end().to_string())
}

#[test]
fn the_live_display_ticks_and_shows_a_real_engines_denial_as_it_happens() {
    let p = project("", None);
    let root = p.root().canonicalize().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let go = scratch.path().join("go");
    let stub = AnthropicStub::start(Script::new([
        bash(&format!("{} skill use document-quality-rules", troupe_bin().display())),
        // Not an Architect's file: the hook troupe gave the run denies it.
        write(&root.join("src/evil.sh"), "rm -rf /\n"),
        // Busy until the test has seen the footer tick and the denial.
        Turn::tool(
            "Bash",
            json!({"command": format!("until [ -e {} ]; do sleep 0.05; done", go.display()), "description": "wait"}),
        ),
        write(&root.join(".troupe/specs/login/design.md"), "# Design\n\nOne script.\n"),
        write(&root.join(".troupe/specs/login/research.md"), "# Research\n\nNone needed.\n"),
        Turn::text("ARCHITECT_COMPLETE\nFeature: login\nArtifacts: design.md, research.md\nSummary: one script"),
    ]));
    let w = wrapper(scratch.path(), &[("architect:*", &stub)]);
    std::fs::write(
        p.path(".troupe/config.toml"),
        format!("[engines]\ndefault = \"claude\"\n\n[engines.commands]\nclaude = \"{}\"\n", w.display()),
    )
    .unwrap();
    git(p.root(), &["commit", "-q", "-am", "config"]);
    let claude = Claude::new(&stub.url());
    let status = scratch.path().join("status");
    let run = runner(scratch.path(), p.root(), &claude, "design login -d 'log in' --no-commit", &status);
    let tmux = Tmux::start(&run);

    // The footer ticks: the Architect's line changes while it only waits.
    let mut footers = std::collections::BTreeSet::new();
    let screen = tmux.until(Duration::from_secs(120), "a ticking footer and the denial", |s| {
        if let Some(f) = footer(s).filter(|f| f.contains("Bash until [ -e")) {
            footers.insert(f);
        }
        footers.len() >= 2 && s.contains("denied architect-1 Write: troupe ownership")
    });
    assert!(!go.exists() && !status.exists(), "both were on screen while the Architect still ran:\n{screen}");
    assert!(screen.contains("spawn architect-1 Architect"), "{screen}");
    assert!(screen.contains("src/evil.sh"), "the denial names the file:\n{screen}");
    assert!(screen.contains("architect-1 → Write "), "every tool call is a line:\n{screen}");
    assert!(!p.path("src/evil.sh").exists());
    std::fs::write(&go, "").unwrap();

    let screen = tmux.until(Duration::from_secs(120), "the end of the run", |_| status.exists());
    let code = std::fs::read_to_string(&status).unwrap();
    assert_eq!(code.trim(), "0", "{screen}");
    let screen = tmux.screen();
    assert!(screen.contains("architect-1 reported"), "{screen}");
    assert!(footer(&screen).is_none(), "the footer is cleared once the run is over:\n{screen}");
}
