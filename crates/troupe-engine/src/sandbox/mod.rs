//! The kernel's guarantee behind the hooks: every teammate process tree runs
//! inside a Landlock ruleset, so whatever its shell does — `>&f`, `sed -i`,
//! a build script, a planted binary — the kernel refuses (EACCES) every write
//! outside what troupe granted.
//!
//! The ruleset ([`Policy`]) lets the teammate read and execute everything and
//! write only: the folders in [`Policy::dirs`] (anything beneath them), the
//! single files in [`Policy::files`] (write and truncate, never create,
//! remove or rename), and `/dev`'s device files. What to grant is decided by
//! [`grant`](fn@grant) from what troupe knows (ownership, the engine's state, the
//! project's build outputs); this module only turns it into a ruleset.
//!
//! Landlock grants by path hierarchy and cannot carve a denial out of an
//! allowed tree, so [`grant`](fn@grant) never grants a folder that holds (or lies in)
//! something forbidden ([`forbidden`]): such files are granted one by one.
//!
//! The ruleset is built in the parent (it opens files and allocates); the
//! child, between `fork` and `exec`, makes only async-signal-safe system
//! calls that enforce it (`prctl(PR_SET_NO_NEW_PRIVS)` and
//! `landlock_restrict_self`). A ruleset that cannot be built or enforced is a
//! spawn error: a teammate is never started unsandboxed by accident.
//!
//! The one file Landlock cannot keep out of a granted folder is spec.yaml in
//! the spec folder of a teammate that creates spec files ([`grant`](mod@grant)'s
//! exception). Such files ([`Policy::readonly`]) are bound read-only over
//! themselves in a mount namespace of the teammate's own (with a user
//! namespace that maps only its own ids), made in the child before the
//! ruleset: a write is refused by the kernel (`EROFS`), and removing or
//! renaming it too (`EBUSY`); Landlock forbids a sandboxed process to
//! unmount or remount anything, so the teammate cannot undo it.

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
    /// Existing files beneath `dirs` it may not change (spec.yaml in a granted
    /// spec folder): bound read-only in a mount namespace of its own.
    pub readonly: Vec<PathBuf>,
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
    /// Files must stay read-only, and this machine refuses the user namespace that takes.
    #[error(
        "cannot keep {} read-only for the teammate: this machine does not let unprivileged processes make \
         user namespaces; allow them (`sysctl kernel.apparmor_restrict_unprivileged_userns=0` on Ubuntu, \
         `kernel.unprivileged_userns_clone=1` on older Debian kernels)",
        .0.display()
    )]
    NoUserNamespaces(PathBuf),
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
    mounts: std::sync::Arc<Mounts>,
}

/// What the child needs to bind files read-only, all made in the parent so
/// that the child only makes system calls (no allocation after `fork`).
#[derive(Debug, Default)]
struct Mounts {
    /// Each file, with the flags of the mount it is on (which a remount in a
    /// user namespace must keep: `nosuid`, `nodev`, `noexec` are locked).
    files: Vec<(std::ffi::CString, libc::c_ulong)>,
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
}

impl Mounts {
    fn new(files: &[PathBuf]) -> Result<Mounts, SandboxError> {
        use std::os::unix::ffi::OsStrExt;
        let mut out = Mounts::default();
        for file in files {
            let bad = |reason: String| SandboxError::Path { path: file.clone(), reason };
            let c = std::ffi::CString::new(file.as_os_str().as_bytes()).map_err(|e| bad(e.to_string()))?;
            // SAFETY: statvfs writes only into `fs`, a plain C struct.
            let mut fs: libc::statvfs = unsafe { std::mem::zeroed() };
            if unsafe { libc::statvfs(c.as_ptr(), &mut fs) } != 0 {
                return Err(bad(std::io::Error::last_os_error().to_string()));
            }
            let kept = [
                (libc::ST_NOSUID, libc::MS_NOSUID),
                (libc::ST_NODEV, libc::MS_NODEV),
                (libc::ST_NOEXEC, libc::MS_NOEXEC),
                (libc::ST_NOATIME, libc::MS_NOATIME),
                (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
                (libc::ST_RELATIME, libc::MS_RELATIME),
            ];
            let flags = kept.iter().filter(|(f, _)| fs.f_flag & f != 0).fold(0, |acc, (_, m)| acc | m);
            out.files.push((c, flags));
        }
        // SAFETY: getuid and getgid cannot fail.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        out.uid_map = format!("{uid} {uid} 1\n").into_bytes();
        out.gid_map = format!("{gid} {gid} 1\n").into_bytes();
        Ok(out)
    }
}

/// Whether an unprivileged process here may make a user and mount namespace
/// of its own, which binding [`Policy::readonly`] files takes (some
/// distributions switch that off). Probed once, in a forked child.
/// `TROUPE_SANDBOX_USERNS=0` answers no, so that the refusal can be exercised.
pub fn user_namespaces() -> bool {
    static PROBED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if std::env::var("TROUPE_SANDBOX_USERNS").is_ok_and(|v| v == "0") {
        return false;
    }
    *PROBED.get_or_init(|| {
        // SAFETY: the child makes only async-signal-safe system calls
        // (unshare, _exit) and touches no memory of the parent's.
        unsafe {
            match libc::fork() {
                -1 => false,
                0 => libc::_exit(if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) == 0 { 0 } else { 1 }),
                child => {
                    let mut status = 0;
                    libc::waitpid(child, &mut status, 0) == child
                        && libc::WIFEXITED(status)
                        && libc::WEXITSTATUS(status) == 0
                }
            }
        }
    })
}

impl Policy {
    /// The environment a sandboxed teammate gets with it: `TROUPE_SANDBOX`
    /// (which tells its hooks a "Permission denied" is the kernel refusing)
    /// and its own temporary folder as `TMPDIR` (and Python's cache).
    pub fn env(&self) -> Vec<(String, std::ffi::OsString)> {
        let mut env = vec![("TROUPE_SANDBOX".to_string(), "landlock".into())];
        if let Some(tmp) = &self.tmp {
            env.push(("TMPDIR".to_string(), tmp.into()));
            env.push(("PYTHONPYCACHEPREFIX".to_string(), tmp.join("pycache").into()));
        }
        env
    }

    /// Builds the ruleset in this process (nothing is enforced here).
    pub fn prepare(&self) -> Result<Prepared, SandboxError> {
        let state = state();
        if !state.usable() {
            return Err(SandboxError::Unavailable(state));
        }
        if let Some(file) = self.readonly.first()
            && !user_namespaces()
        {
            return Err(SandboxError::NoUserNamespaces(file.clone()));
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
        let devices = AccessFs::WriteFile | AccessFs::Truncate;
        for device in writable_devices(Path::new("/dev")) {
            // A device that went away since the listing is not an error.
            let Ok(fd) = PathFd::new(&device) else { continue };
            ruleset = ruleset.add_rule(PathBeneath::new(fd, devices)).map_err(err)?;
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
        Ok(Prepared { fd, mounts: std::sync::Arc::new(Mounts::new(&self.readonly)?) })
    }
}

impl Prepared {
    /// Makes `command`'s child enforce the ruleset before it executes. The
    /// ruleset's descriptor must outlive the spawn: keep `self` until then.
    pub fn apply_to(&self, command: &mut tokio::process::Command) {
        let fd = self.fd.as_raw_fd();
        let mounts = self.mounts.clone();
        // SAFETY: the closure runs between fork and exec and makes only
        // async-signal-safe system calls on data made before the fork; it
        // allocates nothing and takes no lock.
        unsafe {
            command.pre_exec(move || {
                isolate(&mounts)?;
                restrict(fd)
            });
        }
    }

    /// The same for a `std` command.
    pub fn apply_to_std(&self, command: &mut std::process::Command) {
        use std::os::unix::process::CommandExt;
        let fd = self.fd.as_raw_fd();
        let mounts = self.mounts.clone();
        // SAFETY: as in `apply_to`.
        unsafe {
            command.pre_exec(move || {
                isolate(&mounts)?;
                restrict(fd)
            });
        }
    }
}

/// Binds `m`'s files read-only over themselves in a new user and mount
/// namespace of the calling (just forked, single-threaded) process; nothing
/// when there are none.
fn isolate(m: &Mounts) -> std::io::Result<()> {
    if m.files.is_empty() {
        return Ok(());
    }
    let fail = || Err(std::io::Error::last_os_error());
    // SAFETY: plain system calls on integers and on C strings made before the fork.
    unsafe {
        if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) != 0 {
            return fail();
        }
        for (file, text) in [
            (c"/proc/self/setgroups", &b"deny"[..]),
            (c"/proc/self/uid_map", &m.uid_map),
            (c"/proc/self/gid_map", &m.gid_map),
        ] {
            let fd = libc::open(file.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            if fd < 0 {
                return fail();
            }
            let written = libc::write(fd, text.as_ptr().cast(), text.len());
            libc::close(fd);
            if written != text.len() as isize {
                return fail();
            }
        }
        // Nothing mounted here reaches the parent's namespace.
        if libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ) != 0
        {
            return fail();
        }
        for (file, flags) in &m.files {
            let p = file.as_ptr();
            if libc::mount(p, p, std::ptr::null(), libc::MS_BIND, std::ptr::null()) != 0
                || libc::mount(
                    std::ptr::null(),
                    p,
                    std::ptr::null(),
                    libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | flags,
                    std::ptr::null(),
                ) != 0
            {
                return fail();
            }
        }
    }
    Ok(())
}

/// What under `dev` a teammate may write to: its device files and the
/// folders of device files (terminals in `pts/`), not `/dev` whole. `shm/`
/// and `mqueue/` are file systems where any program keeps ordinary files
/// (shared memory, message queues, a project even), and symbolic links
/// (`stdout`, `fd`) would be resolved here, in the Lead, not in the teammate.
fn writable_devices(dev: &Path) -> Vec<PathBuf> {
    const NOT_DEVICES: [&str; 3] = ["shm", "mqueue", "hugepages"];
    let Ok(entries) = std::fs::read_dir(dev) else { return Vec::new() };
    let mut out: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| !NOT_DEVICES.iter().any(|n| e.file_name() == *n))
        .filter(|e| e.file_type().is_ok_and(|t| !t.is_symlink() && !t.is_file()))
        .map(|e| e.path())
        .collect();
    out.sort();
    out
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
        let policy =
            Policy { dirs: vec![mine.clone()], files: vec![base.join("owned.txt")], tmp: None, readonly: vec![] };
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

    /// `/dev` is granted for its devices, not as a tree: the files of
    /// `/dev/shm` (a tmpfs any program, and even a project, can live on) are
    /// refused like any file outside the grant, while `/dev/null` and the
    /// terminal stay writable.
    #[test]
    fn device_files_are_writable_but_not_the_shared_memory_folder() {
        let shm = Path::new("/dev/shm");
        if !shm.is_dir() {
            eprintln!("skipped: this machine has no /dev/shm");
            return;
        }
        let tmp = tempfile::Builder::new().prefix("troupe-sandbox-").tempdir_in(shm).unwrap();
        let victim = tmp.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let prepared = Policy::default().prepare().unwrap();
        let script = format!(
            "echo a > /dev/null && echo null-ok; echo b > {v}; echo c 1<>{v}; truncate -s0 {v}; echo done",
            v = victim.display()
        );
        let mut cmd = std::process::Command::new("bash");
        cmd.args(["-c", &script]);
        prepared.apply_to_std(&mut cmd);
        let out = cmd.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stdout.lines().collect::<Vec<_>>(), ["null-ok", "done"], "{stderr}");
        assert!(stderr.contains("Permission denied"), "{stderr}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep", "{stderr}");
    }

    #[test]
    fn the_devices_listed_skip_shared_memory_and_links() {
        let dev = tempfile::tempdir().unwrap();
        for dir in ["shm", "mqueue", "pts"] {
            std::fs::create_dir(dev.path().join(dir)).unwrap();
        }
        std::fs::write(dev.path().join("plain"), "").unwrap();
        std::os::unix::fs::symlink("/proc/self/fd/1", dev.path().join("stdout")).unwrap();
        assert_eq!(writable_devices(dev.path()), [dev.path().join("pts")]);
        assert!(writable_devices(Path::new("/dev")).contains(&PathBuf::from("/dev/null")));
    }

    /// A spec folder granted whole keeps its spec.yaml out of reach: every
    /// way a shell changes a file is refused by the kernel, while new files
    /// beside it are written freely.
    #[test]
    fn spec_yaml_in_a_granted_folder_cannot_be_changed() {
        let tmp = tempfile::tempdir().unwrap();
        let spec = tmp.path().canonicalize().unwrap().join("specs/f");
        std::fs::create_dir_all(&spec).unwrap();
        std::fs::write(spec.join("spec.yaml"), "keep").unwrap();
        let policy =
            Policy { dirs: vec![spec.clone()], files: vec![], tmp: None, readonly: vec![spec.join("spec.yaml")] };
        let prepared = policy.prepare().unwrap();
        let script = "echo a > spec.yaml; echo b >> spec.yaml; echo c 1<>spec.yaml; truncate -s0 spec.yaml; \
                      mv spec.yaml old; rm -f spec.yaml; echo x > new; mv new spec.yaml; ln -f new spec.yaml; \
                      chmod 000 spec.yaml; umount spec.yaml; unshare -U -m -r umount spec.yaml; \
                      echo '# design' > design.md; echo done";
        let mut cmd = std::process::Command::new("bash");
        cmd.args(["-c", script]).current_dir(&spec);
        prepared.apply_to_std(&mut cmd);
        let out = cmd.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "done", "{err}");
        assert!(err.contains("Read-only file system"), "{err}");
        assert_eq!(std::fs::read_to_string(spec.join("spec.yaml")).unwrap(), "keep", "{err}");
        assert_eq!(std::fs::read_to_string(spec.join("design.md")).unwrap(), "# design\n");
        use std::os::unix::fs::PermissionsExt;
        assert_ne!(std::fs::metadata(spec.join("spec.yaml")).unwrap().permissions().mode() & 0o777, 0);
    }
}
