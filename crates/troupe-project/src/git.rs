//! How troupe runs git so that nothing planted in a repository runs.
//!
//! A teammate cannot write `.git/` (the sandbox refuses it), but a person's
//! own session, an older run or a repository cloned from someone else can
//! leave configuration there that makes git run a program: `core.fsmonitor`
//! (run by every `git status`), hooks (`pre-commit` at the Lead's commit),
//! `core.sshCommand`, `gpg.program` with `commit.gpgSign`, and the filter,
//! diff and merge drivers named by `.gitattributes`. Every git command troupe
//! runs starts with [`hardened_args`]: configuration given with `-c` beats
//! every configuration file, so these settings are off whatever the files say.
//!
//! Drivers have names chosen by whoever wrote the config, so the repository's
//! own config (`--local`, with its includes) is read first — reading config
//! runs nothing — and each driver command found there is overridden with an
//! empty one. Drivers of the user's global config (git-lfs) are left alone:
//! they are the person's, not the repository's. That read is a git process of
//! its own, as many as troupe's git calls (a run makes over a hundred), so its
//! answer is kept per content of the config files it read (`config_key`):
//! the same bytes give the same drivers, and any change reads them again.

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;
use std::sync::Mutex;

/// Settings that make git run a program, switched off for every troupe git call.
/// Auto maintenance is among them: after each of a run's commits it started a
/// `git maintenance run --auto` process; the person's own git still runs it.
pub const FIXED: &[&str] = &[
    "maintenance.auto=false",
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.sshCommand=",
    "core.askPass=",
    "core.editor=true",
    "core.pager=cat",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "diff.external=",
    "credential.helper=",
];

/// The config keys of driver commands a repository can name.
const DRIVER_KEYS: &str = r"^(filter\..*\.(clean|smudge|process)|diff\..*\.(command|textconv)|merge\..*\.driver)$";

/// The `-c key=value` arguments that go before the subcommand of every git
/// command troupe runs in `root`. Never fails: a repository whose config
/// cannot be read gets the fixed settings only (git itself will then refuse
/// to run on it).
pub fn hardened_args(root: &Path) -> Vec<OsString> {
    let mut args = Vec::with_capacity(FIXED.len() * 2 + 8);
    for setting in FIXED {
        args.push(OsString::from("-c"));
        args.push(OsString::from(setting));
    }
    for key in repository_drivers(root) {
        args.push(OsString::from("-c"));
        args.push(OsString::from(format!("{key}=")));
        if let Some(name) = key.strip_prefix("filter.").and_then(|k| k.rsplit_once('.')).map(|(n, _)| n) {
            // An empty filter is "no filter" only when it is not required.
            args.push(OsString::from("-c"));
            args.push(OsString::from(format!("filter.{name}.required=false")));
        }
    }
    args
}

/// `git <hardened args>` in `root`, ready for its subcommand.
pub fn command(root: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(root).args(hardened_args(root)).env("GIT_TERMINAL_PROMPT", "0");
    cmd
}

/// The driver keys set in the repository's own config files, read again only
/// when their bytes changed.
fn repository_drivers(root: &Path) -> Vec<String> {
    static KNOWN: Mutex<Vec<(Vec<u8>, Vec<String>)>> = Mutex::new(Vec::new());
    cached(&KNOWN, root, read_drivers)
}

/// `read(root)`, or what it returned before for a repository whose config
/// files held the same bytes. Nothing is kept when the key is unknown.
fn cached(
    known: &Mutex<Vec<(Vec<u8>, Vec<String>)>>,
    root: &Path,
    read: impl FnOnce(&Path) -> Vec<String>,
) -> Vec<String> {
    let Some(key) = config_key(root) else { return read(root) };
    let mut known = known.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, drivers)) = known.iter().find(|(k, _)| *k == key) {
        return drivers.clone();
    }
    let drivers = read(root);
    // A few repositories per process (the project, its worktrees share one config).
    if known.len() >= 16 {
        known.remove(0);
    }
    known.push((key, drivers.clone()));
    drivers
}

/// The bytes of every file `git config --local` can read in the repository
/// of `root` (the common config, each `config.worktree`), found as git finds
/// them; `None` (never cached) when git could read more than these: any
/// `include`, a repository git would find some other way (environment
/// variables, ceilings, a bare repository), an unreadable file.
fn config_key(root: &Path) -> Option<Vec<u8>> {
    let steering =
        ["GIT_DIR", "GIT_COMMON_DIR", "GIT_CONFIG", "GIT_CEILING_DIRECTORIES", "GIT_DISCOVERY_ACROSS_FILESYSTEM"];
    if steering.iter().any(|v| std::env::var_os(v).is_some()) {
        return None;
    }
    let root = root.canonicalize().ok()?;
    let mut dir = root.as_path();
    let dot_git = loop {
        let candidate = dir.join(".git");
        if candidate.exists() {
            break candidate;
        }
        // A bare repository (or a git dir itself) is used as found.
        if dir.join("HEAD").is_file() && dir.join("objects").is_dir() {
            return None;
        }
        dir = dir.parent()?;
    };
    let git_dir = if dot_git.is_dir() {
        dot_git
    } else {
        let text = std::fs::read_to_string(&dot_git).ok()?;
        let target = text.strip_prefix("gitdir:")?.trim();
        dot_git.parent()?.join(target)
    };
    let common = match std::fs::read_to_string(git_dir.join("commondir")) {
        Ok(rel) => git_dir.join(rel.trim()).canonicalize().ok()?,
        Err(_) => git_dir.clone(),
    };
    let mut key = Vec::new();
    // The answer follows from these files' bytes alone, so the key holds
    // their bytes and places, not their paths: the run's worktrees (each its
    // own git dir, a pool of 20 and more) share one entry.
    for (slot, file) in
        [common.join("config"), common.join("config.worktree"), git_dir.join("config.worktree")].into_iter().enumerate()
    {
        let bytes = match std::fs::read(&file) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(_) => return None,
        };
        if bytes.to_ascii_lowercase().windows(7).any(|w| w == b"include") {
            return None;
        }
        key.push(slot as u8);
        key.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
        key.extend_from_slice(&bytes);
    }
    Some(key)
}

/// Ask git for the driver keys of the repository's own config files.
fn read_drivers(root: &Path) -> Vec<String> {
    let Ok(out) = Command::new("git")
        .current_dir(root)
        .args(["-c", "core.fsmonitor=false", "config", "--local", "--includes", "--name-only", "--get-regexp"])
        .arg(DRIVER_KEYS)
        .output()
    else {
        return Vec::new();
    };
    String::from_utf8_lossy(&out.stdout).lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_string).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cache answers while the config's bytes stay, and a driver planted
    /// after the first read is still found (and overridden).
    #[test]
    fn drivers_are_read_again_when_the_config_changes() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        git(root, &["init", "-q"]);
        std::fs::create_dir(root.join("sub")).unwrap();
        let known = Mutex::new(Vec::new());
        let reads = std::cell::Cell::new(0);
        let read = |r: &Path| {
            reads.set(reads.get() + 1);
            read_drivers(r)
        };
        assert!(cached(&known, root, read).is_empty());
        assert!(cached(&known, &root.join("sub"), read).is_empty());
        assert_eq!(reads.get(), 1, "the same config, read once");
        git(root, &["config", "filter.evil.clean", "sh -c 'echo ran'"]);
        assert_eq!(cached(&known, root, read), ["filter.evil.clean"]);
        assert_eq!(reads.get(), 2);
        let args: Vec<String> = hardened_args(root).iter().map(|a| a.to_string_lossy().into_owned()).collect();
        assert!(args.contains(&"filter.evil.clean=".to_string()), "{args:?}");
        // A linked worktree reads the common config: the same answer.
        git(root, &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "x"]);
        git(root, &["worktree", "add", "-q", "wt"]);
        assert_eq!(cached(&known, &root.join("wt"), read), ["filter.evil.clean"]);
        // Its own git dir holds no config of its own: the entry of the project's is its answer.
        git(root, &["worktree", "add", "-q", "wt2"]);
        assert_eq!(cached(&known, &root.join("wt2"), read), ["filter.evil.clean"]);
        assert_eq!(reads.get(), 2, "worktrees share the project's entry");
        // An include is never cached: the included file can change alone.
        let extra = root.join("extra.cfg");
        std::fs::write(&extra, "[diff \"x\"]\n\tcommand = evil\n").unwrap();
        git(root, &["config", "include.path", &extra.display().to_string()]);
        assert!(config_key(root).is_none());
        let found = cached(&known, root, read);
        assert!(found.contains(&"diff.x.command".to_string()), "{found:?}");
    }

    fn git(root: &Path, args: &[&str]) {
        let ok = Command::new("git").current_dir(root).args(args).output().unwrap().status.success();
        assert!(ok, "git {args:?}");
    }

    #[test]
    fn planted_fsmonitor_hooks_and_filters_never_run() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        git(root, &["init", "-q"]);
        let witness = root.join("witness");
        let plant = format!("sh -c 'echo ran >> {}'", witness.display());
        git(root, &["config", "core.fsmonitor", &plant]);
        git(root, &["config", "filter.evil.clean", &plant]);
        git(root, &["config", "filter.evil.required", "true"]);
        std::fs::write(root.join(".gitattributes"), "* filter=evil\n").unwrap();
        let hook = root.join(".git/hooks/pre-commit");
        std::fs::write(&hook, format!("#!/bin/sh\necho hook >> {}\n", witness.display())).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(root.join("a.txt"), "a\n").unwrap();

        for args in [&["status", "--porcelain"][..], &["add", "-A"], &["commit", "-qm", "x"]] {
            let out = command(root).args(["-c", "user.name=t", "-c", "user.email=t@t"]).args(args).output().unwrap();
            assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        }
        assert!(!witness.exists(), "a planted command ran: {:?}", std::fs::read_to_string(&witness));
        // The same plant does run without the hardening: the test can fail.
        let _ = Command::new("git").current_dir(root).args(["status", "--porcelain"]).output().unwrap();
        assert!(witness.exists(), "the plant is live without hardening");
    }
}
