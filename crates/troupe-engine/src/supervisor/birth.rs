//! What an agent's process does between fork and exec, before any of the
//! engine runs: it lists its own process group with the guardian (`+<pgid>`)
//! and appends its `spawned` record to its log.
//!
//! Both used to be done by the parent after `spawn` returned. A parent killed
//! in between (SIGTERM or SIGKILL right after a wave's spawns) left a child
//! the guardian never heard of — it ran on alone, completed its tasks on the
//! board — and a log with no record that it ever ran. Done by the child before
//! it executes, neither can be missed: the guardian's input cannot end while
//! the child holds its write end (until exec), and the record is on disk
//! before the engine's first instruction.
//!
//! The closure runs in a forked child: it may only make async-signal-safe
//! system calls, allocate nothing and take no lock. Everything it writes is
//! prepared by the parent beforehand.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};

/// The pid the `spawned` record is rendered with before the real one is known;
/// the child writes its own in its place.
const PLACEHOLDER: u32 = u32::MAX;

/// The `spawned` record's line, split around its pid.
pub(super) struct LogLine {
    /// The agent log's descriptor (opened for append by the parent).
    pub fd: RawFd,
    /// The line up to the pid, with room reserved for the pid and `suffix`.
    line: Vec<u8>,
    /// The rest of the line after the pid, with its newline.
    suffix: Vec<u8>,
}

impl LogLine {
    /// Splits `rendered` (a record whose pid is [`placeholder`]) around the pid.
    /// `None` when the placeholder is not found (never for a `spawned` record).
    pub fn new(fd: RawFd, rendered: &[u8]) -> Option<LogLine> {
        let needle = format!("\"pid\":{PLACEHOLDER}");
        let at = rendered.windows(needle.len()).position(|w| w == needle.as_bytes())? + "\"pid\":".len();
        let mut line = Vec::with_capacity(rendered.len() + 1);
        line.extend_from_slice(&rendered[..at]);
        let mut suffix = rendered[at + PLACEHOLDER.to_string().len()..].to_vec();
        suffix.push(b'\n');
        // Room for any pid (at most 10 digits) and the suffix: the child never reallocates.
        line.reserve(10 + suffix.len());
        Some(LogLine { fd, line, suffix })
    }
}

/// The pid a `spawned` record is rendered with for [`LogLine::new`].
pub(super) fn placeholder() -> u32 {
    PLACEHOLDER
}

/// A pipe on which the child tells the parent its pid: if exec then fails,
/// the parent still knows which group the child announced and withdraws it.
pub(super) struct PidPipe {
    read: OwnedFd,
    write: Option<OwnedFd>,
}

impl PidPipe {
    pub fn new() -> std::io::Result<PidPipe> {
        let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(std::io::Error::from)?;
        Ok(PidPipe { read, write: Some(write) })
    }

    fn write_fd(&self) -> RawFd {
        self.write.as_ref().map(AsRawFd::as_raw_fd).unwrap_or(-1)
    }

    /// After a failed spawn: the pid the child reported, if it got that far.
    pub fn child_pid(mut self) -> Option<u32> {
        // Our own write end goes first, so that the read ends at the child's.
        self.write = None;
        let mut buf = [0u8; 4];
        let n = nix::unistd::read(&self.read, &mut buf).ok()?;
        (n == 4).then(|| u32::from_ne_bytes(buf))
    }
}

/// Makes `cmd`'s child announce itself before it executes: `+<pid>` to the
/// guardian's input `guardian`, its `spawned` record to its log, its pid to
/// `pids`. Every write is best effort: a guardian that stopped listening or a
/// full disk never keeps the agent from starting.
pub(super) fn announce(cmd: &mut std::process::Command, guardian: Option<RawFd>, log: Option<LogLine>, pids: &PidPipe) {
    let pid_fd = pids.write_fd();
    let mut log = log;
    let child = move || -> std::io::Result<()> {
        // SAFETY: getpid, write and sigaction are async-signal-safe; the
        // buffers were allocated by the parent with room for what is added.
        unsafe {
            let pid = libc::getpid() as u32;
            let mut digits = [0u8; 10];
            let n = decimal(pid, &mut digits);
            if let Some(l) = log.as_mut() {
                l.line.extend_from_slice(&digits[..n]);
                l.line.extend_from_slice(&l.suffix);
                libc::write(l.fd, l.line.as_ptr().cast(), l.line.len());
            }
            if let Some(fd) = guardian {
                let mut line = [0u8; 12];
                line[0] = b'+';
                line[1..=n].copy_from_slice(&digits[..n]);
                line[n + 1] = b'\n';
                write_ignoring_sigpipe(fd, &line[..n + 2]);
            }
            if pid_fd >= 0 {
                let bytes = pid.to_ne_bytes();
                libc::write(pid_fd, bytes.as_ptr().cast(), bytes.len());
            }
        }
        Ok(())
    };
    use std::os::unix::process::CommandExt;
    // SAFETY: see the closure.
    unsafe {
        cmd.pre_exec(child);
    }
}

/// `n` in decimal into `out`; returns the number of digits.
fn decimal(mut n: u32, out: &mut [u8; 10]) -> usize {
    let mut tmp = [0u8; 10];
    let mut len = 0;
    loop {
        tmp[len] = b'0' + (n % 10) as u8;
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for i in 0..len {
        out[i] = tmp[len - 1 - i];
    }
    len
}

/// A write to a pipe whose reader may be gone: EPIPE instead of SIGPIPE,
/// which std resets to its default in the child before this runs.
///
/// # Safety
/// Async-signal-safe; `fd` may be any descriptor number.
unsafe fn write_ignoring_sigpipe(fd: RawFd, bytes: &[u8]) {
    // SAFETY: sigaction and write are async-signal-safe; the structs live on the stack.
    unsafe {
        let mut ignore: libc::sigaction = std::mem::zeroed();
        ignore.sa_sigaction = libc::SIG_IGN;
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(libc::SIGPIPE, &ignore, &mut old);
        libc::write(fd, bytes.as_ptr().cast(), bytes.len());
        libc::sigaction(libc::SIGPIPE, &old, std::ptr::null_mut());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The child, held before its exec by a pipe of the test's, has already
    /// listed its group with the guardian and written its record.
    #[test]
    fn the_child_announces_itself_before_it_executes() {
        use std::io::Read;
        use std::os::unix::process::CommandExt;
        let (mut guardian_r, guardian_w) = pipe();
        let dir = tempfile::tempdir().unwrap();
        let log_path = dir.path().join("a.jsonl");
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&log_path).unwrap();
        let rendered = format!(r#"{{"seq":0,"kind":"spawned","pid":{PLACEHOLDER},"command":["true"]}}"#);
        let line = LogLine::new(log.as_raw_fd(), rendered.as_bytes()).unwrap();
        let (gate_r, gate_w) = pipe();
        let pids = PidPipe::new().unwrap();
        let mut cmd = std::process::Command::new("true");
        cmd.process_group(0);
        announce(&mut cmd, Some(guardian_w.as_raw_fd()), Some(line), &pids);
        let gate = gate_r.as_raw_fd();
        // SAFETY: read is async-signal-safe.
        unsafe {
            cmd.pre_exec(move || {
                let mut b = [0u8; 1];
                libc::read(gate, b.as_mut_ptr().cast(), 1);
                Ok(())
            });
        }
        let spawning = std::thread::spawn(move || cmd.spawn());
        // Before the exec: the guardian heard of the group, the log has the record.
        let mut heard = [0u8; 64];
        let n = guardian_r.read(&mut heard).unwrap();
        let heard = String::from_utf8_lossy(&heard[..n]).into_owned();
        let pid: u32 = heard.strip_prefix('+').and_then(|l| l.trim_end().parse().ok()).expect(&heard);
        assert!(heard.ends_with('\n'));
        assert_eq!(
            std::fs::read_to_string(&log_path).unwrap(),
            format!("{{\"seq\":0,\"kind\":\"spawned\",\"pid\":{pid},\"command\":[\"true\"]}}\n")
        );
        assert!(!spawning.is_finished(), "the spawn waits for the exec the test holds");
        // A byte, not the end of the pipe: the child holds a copy of the write end until its exec.
        use std::io::Write;
        std::fs::File::from(gate_w).write_all(b"x").unwrap();
        let mut child = spawning.join().unwrap().unwrap();
        assert_eq!(child.id(), pid);
        child.wait().unwrap();
        drop(pids);
    }

    /// An exec that fails after the announcement: the parent learns the pid.
    #[test]
    fn a_failed_exec_still_tells_the_parent_its_pid() {
        let pids = PidPipe::new().unwrap();
        let (_r, w) = pipe();
        let mut cmd = std::process::Command::new("/nonexistent/engine");
        announce(&mut cmd, Some(w.as_raw_fd()), None, &pids);
        assert!(cmd.spawn().is_err());
        assert!(pids.child_pid().is_some_and(|p| p > 1));
    }

    fn pipe() -> (std::fs::File, OwnedFd) {
        let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        (std::fs::File::from(r), w)
    }

    #[test]
    fn numbers_are_written_in_decimal() {
        for n in [0, 7, 10, 4_194_304, u32::MAX] {
            let mut out = [0u8; 10];
            let len = decimal(n, &mut out);
            assert_eq!(std::str::from_utf8(&out[..len]).unwrap(), n.to_string());
        }
    }

    #[test]
    fn the_line_is_split_around_the_pid_and_never_found_in_a_string() {
        let rendered = br#"{"seq":0,"command":["\"pid\":4294967295"],"pid":4294967295,"kind":"spawned"}"#;
        let mut l = LogLine::new(3, rendered).unwrap();
        let capacity = l.line.capacity();
        l.line.extend_from_slice(b"1234567890");
        l.line.extend_from_slice(&l.suffix.clone());
        assert_eq!(l.line.capacity(), capacity, "no reallocation in the child");
        assert_eq!(
            String::from_utf8(l.line).unwrap(),
            "{\"seq\":0,\"command\":[\"\\\"pid\\\":4294967295\"],\"pid\":1234567890,\"kind\":\"spawned\"}\n"
        );
        assert!(LogLine::new(3, b"{\"pid\":12}").is_none());
    }
}
