//! The guardian: a small process that outlives its parent by exactly as long
//! as it takes to stop the parent's agents.
//!
//! Every agent runs in a process group of its own, and the supervisor kills
//! that group when the agent ends. If the process running the supervisor dies
//! first (SIGKILL, a crash, the OOM killer), nothing in it runs any more, and
//! the agents would go on alone: reparented to init, still editing the tree.
//! So the first spawn of a process starts a guardian (`troupe __guard`), in
//! its own process group so that a Ctrl-C at the terminal does not reach it,
//! with a pipe on its standard input. An agent's process writes `+<pgid>`
//! itself between fork and exec (so no instant exists in which it runs
//! unlisted), the supervisor writes it again once the spawn returned (for
//! quality gates, which do not announce themselves) and `-<pgid>` once the
//! group is gone. When the pipe ends — the
//! parent closed it or died, since the kernel closes a dead process's files —
//! the guardian sends SIGTERM to every group still listed, waits up to
//! [`GRACE`], sends SIGKILL to what is left, removes the temporary folders
//! still listed (`~<folder>`: a sandboxed teammate's own `troupe-…` folder,
//! listed when made and unlisted, `!<folder>`, once its supervisor removed
//! it), and exits.
//!
//! Nothing else holds the pipe's write end for long: Rust opens every file
//! descriptor close-on-exec, so an agent holds it only from fork to exec
//! (which is what makes its own announcement arrive before the end of input).

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// How long the guardian waits after SIGTERM before SIGKILL.
pub const GRACE: Duration = Duration::from_secs(3);

/// The command that runs a guardian, set once per process by [`install`].
static COMMAND: OnceLock<(PathBuf, Vec<String>)> = OnceLock::new();

/// The running guardian of this process, started at the first spawn.
static GUARDIAN: Mutex<Option<Guardian>> = Mutex::new(None);

struct Guardian {
    _child: Child,
    input: ChildStdin,
}

/// Names the command that serves as this process's guardian (the `troupe`
/// binary with its hidden `__guard` verb). Without it, agents are not guarded
/// (a library caller that supervises its own processes).
pub fn install(program: PathBuf, args: Vec<String>) {
    let _ = COMMAND.set((program, args));
}

/// Tells the guardian about a new agent's (or quality gate's) process group,
/// starting the guardian if this is the first. A guardian that cannot be
/// started or fed is logged, never an error for the spawn: the supervisor
/// still stops its agents itself while this process lives.
pub fn watch(pgid: u32) {
    tell(&format!("+{pgid}\n"), true);
}

/// Starts the guardian now, if it is not running, without a group: a caller
/// about to start a process group calls it first, so that the group is listed
/// a moment after it exists instead of after the guardian's own start.
pub fn ready() {
    tell("", true);
}

/// Tells the guardian a sandboxed teammate's temporary folder, made before
/// its spawn: removed at the end unless [`forget`] came first (its
/// supervisor removed it), so that neither a spawn that never happened nor
/// a supervisor that died with its process leaves it behind. Only a
/// `troupe-…` folder, by an absolute path on one line, is ever listed.
pub fn temporary(folder: &Path) {
    if let Some(line) = folder_line('~', folder) {
        tell(&line, true);
    }
}

/// Tells the guardian a temporary folder is removed already.
pub fn forget(folder: &Path) {
    if let Some(line) = folder_line('!', folder) {
        tell(&line, false);
    }
}

/// The line that lists (`~`) or unlists (`!`) `folder`, when the guardian may remove it.
fn folder_line(sign: char, folder: &Path) -> Option<String> {
    let text = folder.to_str()?;
    removable(folder).then(|| format!("{sign}{text}\n")).filter(|_| !text.contains('\n'))
}

/// Whether the guardian may remove `folder`: an absolute path to a folder
/// named `troupe-…`, the sandbox's name for a teammate's own.
fn removable(folder: &Path) -> bool {
    folder.is_absolute()
        && folder.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("troupe-"))
        && !folder.components().any(|c| matches!(c, std::path::Component::ParentDir))
}

/// Tells the guardian that a process group is gone.
pub fn unwatch(pgid: u32) {
    tell(&format!("-{pgid}\n"), false);
}

fn tell(line: &str, start: bool) {
    let Some((program, args)) = COMMAND.get() else { return };
    let mut guardian = GUARDIAN.lock().unwrap_or_else(|e| e.into_inner());
    if guardian.is_none() && start {
        use std::os::unix::process::CommandExt;
        let child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn();
        match child {
            Ok(mut child) => {
                let input = child.stdin.take().expect("piped stdin");
                *guardian = Some(Guardian { _child: child, input });
            }
            Err(e) => tracing::warn!("cannot start the agents' guardian {}: {e}", program.display()),
        }
    }
    if let Some(g) = guardian.as_mut()
        && let Err(e) = g.input.write_all(line.as_bytes()).and_then(|()| g.input.flush())
    {
        tracing::warn!("the agents' guardian stopped listening: {e}");
        // Left open, never closed: a child being forked may hold its number
        // ([`input_fd`]), which must not come to name another file.
        if let Some(g) = guardian.take() {
            std::mem::forget(g);
        }
    }
}

/// The guardian's input, started if it is not running, for a child that
/// announces its own group before it executes (`+<pgid>`, see `birth`). The
/// descriptor stays open as long as this process lives.
pub(super) fn input_fd() -> Option<std::os::fd::RawFd> {
    use std::os::fd::AsRawFd;
    COMMAND.get()?;
    tell("", true);
    GUARDIAN.lock().unwrap_or_else(|e| e.into_inner()).as_ref().map(|g| g.input.as_raw_fd())
}

/// The guardian's whole life: read `+pgid` / `-pgid` and `~folder` /
/// `!folder` lines until the input ends, then stop every group still listed
/// (SIGTERM, then SIGKILL after `grace`) and remove every temporary folder
/// still listed. Returns the groups it stopped.
pub fn serve(input: impl BufRead, grace: Duration) -> Vec<u32> {
    let mut groups: Vec<u32> = Vec::new();
    let mut folders: Vec<PathBuf> = Vec::new();
    // Who each group's leader is (its TROUPE_AGENT_ID and TROUPE_PROJECT, read
    // when it is watched): an engine may run a tool in a session of its own
    // (Claude Code's Bash tool does), out of reach of its group's signals.
    let mut agents: Vec<(u32, String, PathBuf)> = Vec::new();
    for line in input.lines() {
        let Ok(line) = line else { break };
        if let Some(folder) = line.strip_prefix('~').map(PathBuf::from) {
            if removable(&folder) && !folders.contains(&folder) {
                folders.push(folder);
            }
            continue;
        }
        if let Some(folder) = line.strip_prefix('!') {
            folders.retain(|f| f.as_os_str() != folder);
            continue;
        }
        let (sign, number) = line.split_at(line.len().min(1));
        let Ok(pgid) = number.trim().parse::<u32>() else { continue };
        if pgid <= 1 {
            continue;
        }
        match sign {
            "+" if !groups.contains(&pgid) => {
                groups.push(pgid);
                if let Some((id, project)) = super::signal::identity(pgid) {
                    agents.push((pgid, id, project));
                }
            }
            "-" => {
                groups.retain(|g| *g != pgid);
                agents.retain(|a| a.0 != pgid);
            }
            _ => {}
        }
    }
    let alive = |g: &u32| killpg(Pid::from_raw(*g as i32), None).is_ok();
    let strays = |agents: &[(u32, String, PathBuf)]| -> Vec<u32> {
        super::signal::agent_processes(|id, project| agents.iter().any(|a| a.1 == id && a.2 == project))
    };
    groups.retain(alive);
    // Read again now, before any signal: a leader that was between fork and
    // exec when it was watched showed its parent's environment then.
    for g in &groups {
        if let Some((id, project)) = super::signal::identity(*g)
            && !agents.iter().any(|a| a.1 == id && a.2 == project)
        {
            agents.push((*g, id, project));
        }
    }
    let first_strays = strays(&agents);
    for g in &groups {
        let _ = killpg(Pid::from_raw(*g as i32), Signal::SIGTERM);
    }
    for pid in first_strays {
        let _ = nix::sys::signal::kill(Pid::from_raw(pid as i32), Signal::SIGTERM);
    }
    let deadline = Instant::now() + grace;
    while (groups.iter().any(alive) || !strays(&agents).is_empty()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    for g in groups.iter().filter(|g| alive(g)) {
        let _ = killpg(Pid::from_raw(*g as i32), Signal::SIGKILL);
    }
    for pid in strays(&agents) {
        let _ = nix::sys::signal::kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
    }
    // Nothing of the teammates whose folders are still listed runs any more.
    for folder in &folders {
        let _ = std::fs::remove_dir_all(folder);
    }
    groups
}

/// What `troupe __guard` runs: ignore the terminal's signals (the parent
/// handles Ctrl-C and stops its agents itself; the guardian must outlive it),
/// then [`serve`] standard input.
pub fn main() -> std::process::ExitCode {
    use nix::sys::signal::{SigHandler, signal};
    for sig in [Signal::SIGINT, Signal::SIGHUP, Signal::SIGTERM, Signal::SIGPIPE] {
        // SAFETY: setting a signal to SIG_IGN installs no handler code.
        let _ = unsafe { signal(sig, SigHandler::SigIgn) };
    }
    serve(std::io::stdin().lock(), GRACE);
    std::process::ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group_of_sleepers() -> std::process::Child {
        use std::os::unix::process::CommandExt;
        // A leader and a grandchild, both in the leader's group.
        Command::new("sh").args(["-c", "sleep 30 & sleep 30; wait"]).process_group(0).spawn().unwrap()
    }

    #[test]
    fn groups_still_listed_at_the_end_of_input_are_stopped_and_removed_ones_are_left() {
        let mut kept = group_of_sleepers();
        let mut stopped = group_of_sleepers();
        let input = format!("+{k}\n+{s}\n-{k}\ngarbage\n+1\n+\n", k = kept.id(), s = stopped.id());
        let result = serve(input.as_bytes(), Duration::from_millis(500));
        assert_eq!(result, vec![stopped.id()]);
        let status = stopped.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(Signal::SIGTERM as i32), "{status:?}");
        let deadline = Instant::now() + Duration::from_secs(5);
        while killpg(Pid::from_raw(stopped.id() as i32), None).is_ok() {
            assert!(Instant::now() < deadline, "the grandchild outlived the guardian's SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(kept.try_wait().unwrap().is_none(), "an unlisted group is not touched");
        let _ = killpg(Pid::from_raw(kept.id() as i32), Signal::SIGKILL);
        let _ = kept.wait();
    }

    #[test]
    fn temporary_folders_still_listed_at_the_end_are_removed_and_no_others() {
        let tmp = tempfile::tempdir().unwrap();
        let folder = |name: &str| {
            let f = tmp.path().join(name);
            std::fs::create_dir_all(f.join("inside")).unwrap();
            f
        };
        let (listed, forgotten) = (folder("troupe-builder-1-7"), folder("troupe-builder-2-7"));
        let (foreign, unlisted) = (folder("not-troupes"), folder("troupe-other-7"));
        let mut running = group_of_sleepers();
        let input = format!(
            "~{}\n+{g}\n~{}\n~{}\n~relative/troupe-x\n!{}\n",
            listed.display(),
            forgotten.display(),
            foreign.display(),
            forgotten.display(),
            g = running.id()
        );
        assert_eq!(serve(input.as_bytes(), Duration::from_millis(500)), vec![running.id()]);
        let _ = running.wait();
        assert!(!listed.exists(), "a folder still listed is removed");
        assert!(forgotten.exists(), "an unlisted folder was its supervisor's to remove");
        assert!(foreign.exists() && unlisted.exists(), "only troupe's folders, only listed ones");
        assert_eq!(folder_line('~', Path::new("/tmp/troupe-a")), Some("~/tmp/troupe-a\n".into()));
        assert_eq!(folder_line('~', Path::new("/tmp/elsewhere")), None);
        assert_eq!(folder_line('!', Path::new("/tmp/troupe-a\nb")), None);
    }

    #[test]
    fn what_ignores_sigterm_is_killed_after_the_grace() {
        use std::os::unix::process::CommandExt;
        let mut stubborn =
            Command::new("sh").args(["-c", "trap '' TERM; sleep 30 & wait"]).process_group(0).spawn().unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let started = Instant::now();
        let grace = Duration::from_millis(300);
        serve(format!("+{}\n", stubborn.id()).as_bytes(), grace);
        assert!(started.elapsed() >= grace);
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(stubborn.wait().unwrap().signal(), Some(Signal::SIGKILL as i32));
    }
}
