//! The kernel's guarantee behind the hooks: every teammate process tree runs
//! inside a Landlock ruleset, so whatever its shell does — `>&f`, `sed -i`,
//! a build script, a planted binary — the kernel refuses (EACCES) every write
//! outside what troupe granted.
//!
//! The ruleset ([`Policy`]) lets the teammate read and execute everything and
//! write only: the folders in [`Policy::dirs`] (anything beneath them), the
//! single files in [`Policy::files`] (write and truncate, never create,
//! remove or rename), and `/dev`'s device files. What to grant is decided by
//! [`grant`] from what troupe knows (ownership, the engine's state, the
//! project's build outputs); this module only turns it into a ruleset.
//!
//! Landlock grants by path hierarchy and cannot carve a denial out of an
//! allowed tree, so [`grant`] never grants a folder that holds (or lies in)
//! something forbidden ([`forbidden`]): such files are granted one by one.
//!
//! The ruleset is built in the parent (it opens files and allocates); the
//! child, between `fork` and `exec`, makes only the two async-signal-safe
//! system calls that enforce it (`prctl(PR_SET_NO_NEW_PRIVS)` and
//! `landlock_restrict_self`). A ruleset that cannot be built or enforced is a
//! spawn error: a teammate is never started unsandboxed by accident.

pub mod grant;

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr,
};

pub use grant::{Grant, forbidden, grant};

/// The oldest Landlock ABI troupe accepts: 3 (Linux 6.2) is the first that
/// handles `truncate(2)`; before it, `truncate -s0 spec.yaml` would pass.
pub const MIN_ABI: u32 = 3;

/// The ABI whose rights troupe handles (all filesystem rights up to 3).
const HANDLED: ABI = ABI::V3;

/// Whether this machine can sandbox teammates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Landlock is on with this ABI version (at least [`MIN_ABI`]).
    Available {
        /// The kernel's Landlock ABI version.
        abi: u32,
    },
    /// Landlock is on but too old.
    TooOld {
        /// The kernel's Landlock ABI version.
        abi: u32,
    },
    /// The kernel has no Landlock, or it is not enabled at boot.
    Unsupported,
}

impl State {
    /// Whether teammates can be sandboxed.
    pub fn usable(self) -> bool {
        matches!(self, State::Available { .. })
    }

    /// One line for `troupe doctor` and errors.
    pub fn describe(self) -> String {
        match self {
            State::Available { abi } => format!("Landlock ABI {abi}"),
            State::TooOld { abi } => format!("Landlock ABI {abi} (troupe needs {MIN_ABI}, Linux 6.2 or later)"),
            State::Unsupported => {
                "no Landlock in this kernel (or not enabled at boot: add `landlock` to `lsm=`)".into()
            }
        }
    }
}

/// Asks the kernel for its Landlock ABI version.
///
/// `TROUPE_SANDBOX_ABI` may lower the answer (never raise it), so that the
/// refusal path can be exercised on a kernel that has Landlock.
pub fn state() -> State {
    // SAFETY: LANDLOCK_CREATE_RULESET_VERSION with a null attribute and size 0
    // only returns the ABI version; it reads and writes no memory.
    let raw =
        unsafe { libc::syscall(libc::SYS_landlock_create_ruleset, std::ptr::null::<libc::c_void>(), 0usize, 1u32) };
    let mut abi = if raw > 0 { raw as u32 } else { 0 };
    if let Some(cap) = std::env::var("TROUPE_SANDBOX_ABI").ok().and_then(|v| v.parse::<u32>().ok()) {
        abi = abi.min(cap);
    }
    match abi {
        0 => State::Unsupported,
        a if a < MIN_ABI => State::TooOld { abi: a },
        a => State::Available { abi: a },
    }
}

/// What a sandboxed teammate may write. Paths are absolute.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// Folders it may change anything beneath.
    pub dirs: Vec<PathBuf>,
    /// Existing files it may write and truncate (not create, remove or rename).
    pub files: Vec<PathBuf>,
    /// Its own temporary folder (also in `dirs`), handed to it as `TMPDIR`.
    pub tmp: Option<PathBuf>,
}

/// A sandbox that could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The kernel cannot sandbox.
    #[error("cannot sandbox the teammate: {}", .0.describe())]
    Unavailable(State),
    /// The ruleset could not be built.
    #[error("cannot build the sandbox's ruleset: {0}")]
    Ruleset(String),
    /// A path to grant could not be opened.
    #[error("cannot grant {} in the sandbox: {reason}", .path.display())]
    Path {
        /// The path.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A folder troupe makes for the teammate could not be made.
    #[error("cannot create {} for the sandbox: {source}", .path.display())]
    Create {
        /// The folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// A ruleset ready to be enforced in a child process.
#[derive(Debug)]
pub struct Prepared {
    fd: OwnedFd,
}

impl Policy {
    /// Builds the ruleset in this process (nothing is enforced here).
    pub fn prepare(&self) -> Result<Prepared, SandboxError> {
        let state = state();
        if !state.usable() {
            return Err(SandboxError::Unavailable(state));
        }
        let err = |e: landlock::RulesetError| SandboxError::Ruleset(e.to_string());
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessFs::from_all(HANDLED))
            .map_err(err)?
            .create()
            .map_err(err)?;
        let open = |path: &Path| {
            PathFd::new(path).map_err(|e| SandboxError::Path { path: path.to_path_buf(), reason: e.to_string() })
        };
        ruleset =
            ruleset.add_rule(PathBeneath::new(open(Path::new("/"))?, AccessFs::from_read(HANDLED))).map_err(err)?;
        // Device files (`>/dev/null`, the terminal) are written, never made.
        if Path::new("/dev").is_dir() {
            let devices = AccessFs::WriteFile | AccessFs::Truncate;
            ruleset = ruleset.add_rule(PathBeneath::new(open(Path::new("/dev"))?, devices)).map_err(err)?;
        }
        for dir in &self.dirs {
            ruleset = ruleset.add_rule(PathBeneath::new(open(dir)?, AccessFs::from_all(HANDLED))).map_err(err)?;
        }
        let file_rights = AccessFs::WriteFile | AccessFs::Truncate;
        for file in &self.files {
            ruleset = ruleset.add_rule(PathBeneath::new(open(file)?, file_rights)).map_err(err)?;
        }
        let fd: Option<OwnedFd> = ruleset.into();
        let fd = fd.ok_or_else(|| SandboxError::Ruleset("the kernel gave no ruleset".into()))?;
        Ok(Prepared { fd })
    }
}

impl Prepared {
    /// Makes `command`'s child enforce the ruleset before it executes. The
    /// ruleset's descriptor must outlive the spawn: keep `self` until then.
    pub fn apply_to(&self, command: &mut tokio::process::Command) {
        let fd = self.fd.as_raw_fd();
        // SAFETY: the closure runs between fork and exec and makes only
        // async-signal-safe system calls on plain integers; it allocates
        // nothing and takes no lock.
        unsafe {
            command.pre_exec(move || restrict(fd));
        }
    }

    /// The same for a `std` command.
    pub fn apply_to_std(&self, command: &mut std::process::Command) {
        use std::os::unix::process::CommandExt;
        let fd = self.fd.as_raw_fd();
        // SAFETY: as in `apply_to`.
        unsafe {
            command.pre_exec(move || restrict(fd));
        }
    }
}

/// Enforces the ruleset `fd` on the calling process and everything it starts.
fn restrict(fd: i32) -> std::io::Result<()> {
    // SAFETY: both are plain system calls on integers.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::syscall(libc::SYS_landlock_restrict_self, fd, 0u32) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sandboxed_child_writes_only_what_it_was_granted() {
        assert!(state().usable(), "this machine's kernel has Landlock: {}", state().describe());
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        let mine = base.join("mine");
        std::fs::create_dir(&mine).unwrap();
        std::fs::write(base.join("owned.txt"), "old").unwrap();
        std::fs::write(base.join("spec.yaml"), "keep").unwrap();
        let policy = Policy { dirs: vec![mine.clone()], files: vec![base.join("owned.txt")], tmp: None };
        let prepared = policy.prepare().unwrap();
        let script = "echo a > mine/new; echo b > owned.txt; echo c >&spec.yaml; echo d 1<>spec.yaml; \
                      : > spec.yaml; truncate -s0 spec.yaml; mv spec.yaml mine/; rm spec.yaml; \
                      echo e > other; ln -s /etc/passwd link; echo done";
        let mut cmd = std::process::Command::new("bash");
        cmd.args(["-c", script]).current_dir(&base);
        prepared.apply_to_std(&mut cmd);
        let out = cmd.output().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "done", "{}", String::from_utf8_lossy(&out.stderr));
        assert!(String::from_utf8_lossy(&out.stderr).contains("Permission denied"));
        assert_eq!(std::fs::read_to_string(mine.join("new")).unwrap(), "a\n");
        assert_eq!(std::fs::read_to_string(base.join("owned.txt")).unwrap(), "b\n");
        assert_eq!(std::fs::read_to_string(base.join("spec.yaml")).unwrap(), "keep");
        assert!(!base.join("other").exists() && !base.join("link").exists());
        // This process itself is not sandboxed.
        std::fs::write(base.join("other"), "free").unwrap();
    }
}
