//! Whether a process id names a live process on this machine.

use nix::errno::Errno;
use nix::sys::signal::kill;
use nix::unistd::Pid;

/// True when a process with this id exists (signal 0 reaches it, or it exists
/// but belongs to another user). Ids that cannot name a single process (0, or
/// beyond `i32::MAX`, which `kill` would read as a process group) are not alive.
pub fn pid_alive(pid: u32) -> bool {
    let Ok(raw) = i32::try_from(pid) else { return false };
    if raw <= 0 {
        return false;
    }
    match kill(Pid::from_raw(raw), None) {
        Ok(()) => true,
        Err(Errno::EPERM) => true,
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process_is_alive_and_nonsense_is_not() {
        assert!(pid_alive(std::process::id()));
        assert!(!pid_alive(0));
        assert!(!pid_alive(u32::MAX));
    }

    #[test]
    fn a_reaped_child_is_dead() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert!(!pid_alive(pid));
    }
}
