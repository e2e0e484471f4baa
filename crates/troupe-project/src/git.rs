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
//! they are the person's, not the repository's.

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;

/// Settings that make git run a program, switched off for every troupe git call.
pub const FIXED: &[&str] = &[
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

/// The driver keys set in the repository's own config files.
fn repository_drivers(root: &Path) -> Vec<String> {
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
