//! A scripted fake agent: an executable `/bin/sh` script that behaves like an
//! engine process for fast supervisor tests (crash, hang, garbage, huge
//! output, grandchildren, ignored signals). A script rather than a compiled
//! binary so any crate's tests can use it without building another package.

use std::path::{Path, PathBuf};

use tempfile::TempDir;

/// Builds a fake agent script step by step.
#[derive(Debug, Default, Clone)]
pub struct FakeAgent {
    lines: Vec<String>,
}

/// Single-quotes `s` for the shell.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

impl FakeAgent {
    /// An agent that does nothing yet (exits 0).
    pub fn new() -> Self {
        FakeAgent::default()
    }

    /// Prints one line to stdout.
    pub fn emit(mut self, line: &str) -> Self {
        self.lines.push(format!("printf '%s\\n' {}", quote(line)));
        self
    }

    /// Prints a file's content to stdout (a captured stream).
    pub fn emit_file(mut self, path: &Path) -> Self {
        self.lines.push(format!("cat {}", quote(&path.to_string_lossy())));
        self
    }

    /// Prints text to stderr.
    pub fn stderr(mut self, text: &str) -> Self {
        self.lines.push(format!("printf '%s\\n' {} >&2", quote(text)));
        self
    }

    /// Prints `bytes` bytes of non-JSON garbage with no newline, then a newline.
    pub fn huge_line(mut self, bytes: usize) -> Self {
        self.lines.push(format!("head -c {bytes} /dev/zero | tr '\\0' 'x'; echo"));
        self
    }

    /// Prints `count` small JSON text lines quickly.
    pub fn many_lines(mut self, count: usize) -> Self {
        self.lines.push(format!(
            "i=0; while [ $i -lt {count} ]; do printf '%s\\n' '{{\"type\":\"assistant\",\"message\":{{\"content\":[{{\"type\":\"text\",\"text\":\"line\"}}]}}}}'; i=$((i+1)); done"
        ));
        self
    }

    /// Sleeps (hangs) for `secs` seconds, in a way a signal interrupts.
    pub fn sleep(mut self, secs: f64) -> Self {
        self.lines.push(format!("sleep {secs} & wait $!"));
        self
    }

    /// Ignores SIGINT and SIGTERM from here on (only SIGKILL stops it).
    pub fn ignore_signals(mut self) -> Self {
        self.lines.push("trap '' INT TERM".into());
        self
    }

    /// On SIGINT prints a line and exits 130 (a well-behaved engine).
    pub fn exit_on_interrupt(mut self) -> Self {
        self.lines.push("trap 'printf \"%s\\n\" \"{\\\"type\\\":\\\"interrupted\\\"}\"; exit 130' INT".into());
        self
    }

    /// Starts a background grandchild that sleeps, writing its pid to `pid_file`.
    pub fn spawn_grandchild(mut self, pid_file: &Path) -> Self {
        self.lines.push(format!("sleep 1000 & echo $! > {}", quote(&pid_file.to_string_lossy())));
        self
    }

    /// Writes its own pid to `pid_file`.
    pub fn write_pid(mut self, pid_file: &Path) -> Self {
        self.lines.push(format!("echo $$ > {}", quote(&pid_file.to_string_lossy())));
        self
    }

    /// Writes its environment to `file` (one `K=V` per line).
    pub fn dump_env(mut self, file: &Path) -> Self {
        self.lines.push(format!("env > {}", quote(&file.to_string_lossy())));
        self
    }

    /// Copies standard input to `file`.
    pub fn read_stdin(mut self, file: &Path) -> Self {
        self.lines.push(format!("cat > {}", quote(&file.to_string_lossy())));
        self
    }

    /// Writes its arguments to `file`, one per line.
    pub fn dump_args(mut self, file: &Path) -> Self {
        self.lines
            .push(format!("for a in \"$@\"; do printf '%s\\n' \"$a\"; done > {}", quote(&file.to_string_lossy())));
        self
    }

    /// Exits with `code`.
    pub fn exit(mut self, code: i32) -> Self {
        self.lines.push(format!("exit {code}"));
        self
    }

    /// Kills itself with SIGKILL (a crash).
    pub fn crash(mut self) -> Self {
        self.lines.push("kill -9 $$".into());
        self
    }

    /// The script text.
    pub fn script(&self) -> String {
        let mut s = String::from("#!/bin/sh\n");
        for l in &self.lines {
            s.push_str(l);
            s.push('\n');
        }
        s
    }

    /// Writes the script into a fresh temporary directory; the returned
    /// [`Installed`] keeps it alive.
    pub fn install(&self) -> Installed {
        let dir = tempfile::Builder::new().prefix("troupe-fake-agent-").tempdir().expect("fake agent dir");
        let path = dir.path().join("fake-agent");
        std::fs::write(&path, self.script()).expect("write fake agent");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod fake agent");
        Installed { _dir: dir, path }
    }
}

/// An installed fake agent.
pub struct Installed {
    _dir: TempDir,
    path: PathBuf,
}

impl Installed {
    /// The executable.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Whether process `pid` is still running (exists and is not a zombie).
pub fn process_running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            // The state follows the parenthesised command name.
            let state = stat.rsplit(')').next().and_then(|r| r.split_whitespace().next()).unwrap_or("");
            state != "Z" && state != "X"
        }
        Err(_) => false,
    }
}

/// Whether process `pid` exists at all (a zombie counts).
pub fn process_exists(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Reads a pid written by the fake agent, waiting up to 5 s for the file.
pub fn read_pid(file: &Path) -> u32 {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        if let Some(pid) = std::fs::read_to_string(file).ok().and_then(|s| s.trim().parse().ok()) {
            return pid;
        }
        assert!(std::time::Instant::now() < until, "no pid written to {}", file.display());
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}
