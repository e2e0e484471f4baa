//! The real `tmux` binary, driven by its command line (no library): one
//! server per project (`tmux -L troupe-<hash>`), so troupe never touches a
//! person's own sessions, or the server of the session troupe was started
//! in (`-S` with the socket `$TMUX` names) when asked to add panes there.
//!
//! Panes are made with their command (`split-window … <argv>`: tmux runs a
//! command of several arguments without a shell), never by typing into a
//! shell. A detached session gets an explicit size, and the window is
//! re-tiled after every split so the next one has room (16 panes fit).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::{Deserialize, Serialize};

/// The size of a detached session troupe makes: room for 16 panes of 60×15.
pub const WIDTH: u16 = 240;
/// See [`WIDTH`].
pub const HEIGHT: u16 = 60;

/// The session troupe makes on its own server.
pub const SESSION: &str = "troupe";

/// Which tmux server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Socket {
    /// A socket name under tmux's folder (`-L`).
    Name(String),
    /// A socket path (`-S`), e.g. the server of `$TMUX`.
    Path(PathBuf),
}

impl Socket {
    /// troupe's own server for the project at `root`: `troupe-<12 hex digits>`
    /// of the root's path, stable across runs and troupe versions (FNV-1a).
    pub fn for_project(root: &Path) -> Socket {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for b in root.as_os_str().as_encoded_bytes() {
            hash ^= u64::from(*b);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        Socket::Name(format!("troupe-{:012x}", hash & 0xffff_ffff_ffff))
    }

    /// The server of the tmux session this process runs in (`$TMUX` is
    /// `<socket path>,<server pid>,<session>`), if any.
    pub fn from_env() -> Option<Socket> {
        let tmux = std::env::var("TMUX").ok()?;
        let path = tmux.split(',').next().filter(|p| !p.is_empty())?;
        Some(Socket::Path(PathBuf::from(path)))
    }

    fn args(&self) -> [std::ffi::OsString; 2] {
        match self {
            Socket::Name(n) => ["-L".into(), n.into()],
            Socket::Path(p) => ["-S".into(), p.into()],
        }
    }
}

impl std::fmt::Display for Socket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Socket::Name(n) => write!(f, "-L {n}"),
            Socket::Path(p) => write!(f, "-S {}", p.display()),
        }
    }
}

/// A tmux command that failed.
#[derive(Debug, thiserror::Error)]
#[error("`tmux {args}` failed: {detail}")]
pub struct TmuxError {
    /// The arguments, for the message.
    pub args: String,
    /// tmux's stderr, or why it could not run.
    pub detail: String,
}

/// One pane, as `list-panes` reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Pane {
    /// `%N`.
    pub id: String,
    /// The process tmux started in it.
    pub pid: u32,
    /// Its position and size, in cells.
    pub left: u16,
    /// See `left`.
    pub top: u16,
    /// See `left`.
    pub width: u16,
    /// See `left`.
    pub height: u16,
    /// The window it is in (`@N`).
    pub window: String,
}

/// One tmux server.
#[derive(Debug, Clone)]
pub struct Tmux {
    socket: Socket,
}

impl Tmux {
    /// The server at `socket`.
    pub fn new(socket: Socket) -> Tmux {
        Tmux { socket }
    }

    /// Which server.
    pub fn socket(&self) -> &Socket {
        &self.socket
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new("tmux");
        cmd.args(self.socket.args()).stdin(Stdio::null());
        // A tmux run by troupe inside a person's session still talks to the server named here.
        cmd.env_remove("TMUX");
        cmd
    }

    /// Runs `tmux <args>`; stdout on success.
    pub fn run<S: AsRef<std::ffi::OsStr>>(&self, args: &[S]) -> Result<String, TmuxError> {
        self.run_with_input(args, None)
    }

    fn run_with_input<S: AsRef<std::ffi::OsStr>>(&self, args: &[S], input: Option<&str>) -> Result<String, TmuxError> {
        let shown = || args.iter().map(|a| a.as_ref().to_string_lossy().into_owned()).collect::<Vec<_>>().join(" ");
        let mut cmd = self.command();
        cmd.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
        if input.is_some() {
            cmd.stdin(Stdio::piped());
        }
        let mut child = cmd.spawn().map_err(|e| TmuxError {
            args: shown(),
            detail: if e.kind() == std::io::ErrorKind::NotFound {
                "tmux is not installed (install the `tmux` package)".into()
            } else {
                e.to_string()
            },
        })?;
        if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
            stdin.write_all(text.as_bytes()).map_err(|e| TmuxError { args: shown(), detail: e.to_string() })?;
        }
        let out = child.wait_with_output().map_err(|e| TmuxError { args: shown(), detail: e.to_string() })?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).trim_end().to_string())
        } else {
            Err(TmuxError { args: shown(), detail: String::from_utf8_lossy(&out.stderr).trim().to_string() })
        }
    }

    /// Whether the server runs and holds `session`.
    pub fn has_session(&self, session: &str) -> bool {
        self.run(&["has-session", "-t", &format!("={session}")]).is_ok()
    }

    /// A new detached session of [`WIDTH`]×[`HEIGHT`] running `argv`; its pane id.
    pub fn new_session(&self, session: &str, cwd: &Path, argv: &[String]) -> Result<String, TmuxError> {
        let mut args: Vec<std::ffi::OsString> = ["new-session", "-d", "-s", session, "-x"].map(Into::into).to_vec();
        args.extend([WIDTH.to_string().into(), "-y".into(), HEIGHT.to_string().into(), "-c".into(), cwd.into()]);
        args.extend(["-P".into(), "-F".into(), "#{pane_id}".into(), "--".into()]);
        args.extend(argv.iter().map(Into::into));
        let pane = self.run(&args)?;
        // Keep the size when nobody is attached, and let a client that attaches resize it.
        let _ = self.run(&["set-option", "-t", session, "window-size", "latest"]);
        Ok(pane)
    }

    /// A new pane beside `target` (a pane or window) running `argv`, then
    /// the window re-tiled so the next split has room; the new pane's id.
    pub fn split(&self, target: &str, cwd: &Path, argv: &[String]) -> Result<String, TmuxError> {
        let mut args: Vec<std::ffi::OsString> = ["split-window", "-d", "-t", target, "-c"].map(Into::into).to_vec();
        args.extend([cwd.into(), "-P".into(), "-F".into(), "#{pane_id}".into(), "--".into()]);
        args.extend(argv.iter().map(Into::into));
        let pane = self.run(&args)?;
        self.run(&["select-layout", "-t", &pane, "tiled"])?;
        Ok(pane)
    }

    /// Applies a layout to the window of `target`.
    pub fn layout(&self, target: &str, layout: &str) -> Result<(), TmuxError> {
        self.run(&["select-layout", "-t", target, layout]).map(drop)
    }

    /// Every pane of the server (`-a`), or of `target`'s window.
    pub fn panes(&self, target: Option<&str>) -> Result<Vec<Pane>, TmuxError> {
        let format = "#{pane_id} #{pane_pid} #{pane_left} #{pane_top} #{pane_width} #{pane_height} #{window_id}";
        let out = match target {
            Some(t) => self.run(&["list-panes", "-t", t, "-F", format])?,
            None => self.run(&["list-panes", "-a", "-F", format])?,
        };
        Ok(out.lines().filter_map(parse_pane).collect())
    }

    /// Pastes `text` into `pane` as one bracketed paste (so a TUI takes it as
    /// pasted text, not keys), then presses Enter.
    pub fn paste_and_enter(&self, pane: &str, text: &str) -> Result<(), TmuxError> {
        let buffer = format!("troupe-{}", pane.trim_start_matches('%'));
        self.run_with_input(&["load-buffer", "-b", &buffer, "-"], Some(text))?;
        self.run(&["paste-buffer", "-p", "-d", "-b", &buffer, "-t", pane])?;
        self.enter(pane)
    }

    /// Presses Enter in `pane`.
    pub fn enter(&self, pane: &str) -> Result<(), TmuxError> {
        self.run(&["send-keys", "-t", pane, "Enter"]).map(drop)
    }

    /// Closes `pane` (its process gets SIGHUP).
    pub fn kill_pane(&self, pane: &str) -> Result<(), TmuxError> {
        self.run(&["kill-pane", "-t", pane]).map(drop)
    }

    /// Ends the server and every pane on it.
    pub fn kill_server(&self) -> Result<(), TmuxError> {
        self.run(&["kill-server"]).map(drop)
    }
}

fn parse_pane(line: &str) -> Option<Pane> {
    let mut f = line.split(' ');
    Some(Pane {
        id: f.next()?.to_string(),
        pid: f.next()?.parse().ok()?,
        left: f.next()?.parse().ok()?,
        top: f.next()?.parse().ok()?,
        width: f.next()?.parse().ok()?,
        height: f.next()?.parse().ok()?,
        window: f.next()?.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_project_has_one_stable_socket_name() {
        let a = Socket::for_project(Path::new("/home/u/p"));
        assert_eq!(a, Socket::for_project(Path::new("/home/u/p")));
        assert_ne!(a, Socket::for_project(Path::new("/home/u/q")));
        let Socket::Name(n) = a else { panic!() };
        assert!(n.starts_with("troupe-") && n.len() == 19, "{n}");
    }

    #[test]
    fn panes_parse() {
        let p = parse_pane("%3 4242 0 31 120 29 @1").unwrap();
        assert_eq!((p.id.as_str(), p.pid, p.top, p.width, p.window.as_str()), ("%3", 4242, 31, 120, "@1"));
        assert!(parse_pane("garbage").is_none());
    }
}
