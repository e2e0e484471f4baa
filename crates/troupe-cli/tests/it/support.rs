//! Shared helpers: a `troupe` command and throwaway projects.

use std::path::{Path, PathBuf};

use assert_cmd::Command;

/// The `troupe` binary under test, with a clean environment for troupe's own variables.
pub fn troupe() -> Command {
    let mut cmd = Command::cargo_bin("troupe").expect("the troupe binary is built");
    for var in [
        "TROUPE_AGENT_ID",
        "TROUPE_ROLE",
        "TROUPE_FEATURE",
        "TROUPE_TASK_ID",
        "TROUPE_PROJECT",
        "TROUPE_DATABASE_URL",
        "TROUPE_HOOK_ANSWERER",
        "NO_COLOR",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("NO_COLOR", "1");
    cmd
}

/// A temporary folder with `troupe init` run in it.
pub struct TestProject {
    pub dir: tempfile::TempDir,
}

impl TestProject {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        troupe().arg("init").arg(dir.path()).assert().success();
        TestProject { dir }
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// `troupe -C <root> <args>`
    pub fn troupe(&self) -> Command {
        let mut cmd = troupe();
        cmd.arg("-C").arg(self.root());
        cmd
    }

    /// Every file under `.troupe/` except `state/`, with its bytes, for "nothing changed" checks.
    pub fn snapshot(&self) -> Vec<(PathBuf, Vec<u8>)> {
        fn walk(dir: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
            let Ok(entries) = std::fs::read_dir(dir) else { return };
            for e in entries.flatten() {
                let p = e.path();
                if p.ends_with("state") {
                    continue;
                }
                if p.is_dir() {
                    walk(&p, out);
                } else {
                    out.push((p.clone(), std::fs::read(&p).unwrap()));
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.path(".troupe"), &mut out);
        out.sort();
        out
    }
}

/// Parse stdout of a `--json` run.
pub fn json(output: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", String::from_utf8_lossy(&output.stdout)))
}

/// The tool the model's request offers whose name ends with `suffix`: a
/// gateway tool in the engine's own naming, as troupe wired it.
pub fn offered<'a>(c: &'a troupe_testkit::Conversation, suffix: &str) -> &'a str {
    c.tools.iter().find(|t| t.ends_with(suffix)).unwrap_or_else(|| panic!("no {suffix} offered: {:?}", c.tools))
}
