//! `troupe release` on real git repositories in temporary folders.

use std::path::Path;
use std::process::Command;

use predicates::prelude::*;

use crate::support::{TestProject, json, troupe};

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git").args(args).current_dir(dir).output().expect("git runs");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A git repository with `files` committed.
fn repo(dir: &Path, files: &[(&str, &str)]) {
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["config", "user.email", "dev@example.invalid"]);
    git(dir, &["config", "user.name", "Dev"]);
    for (name, text) in files {
        let p = dir.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "initial"]);
}

fn release(dir: &Path, level: &str, summary: &str) -> assert_cmd::assert::Assert {
    troupe().arg("-C").arg(dir).args(["release", level, summary]).assert()
}

#[test]
fn every_ecosystem_is_bumped_committed_tagged_and_branched() {
    /// (files, level, ecosystem, version file, new version)
    type Case<'a> = (&'a [(&'a str, &'a str)], &'a str, &'a str, &'a str, &'a str);
    let cases: &[Case] = &[
        (
            &[("pyproject.toml", "[project]\nname = \"app\"\nversion = \"0.1.0\" # keep\n")],
            "minor",
            "Python",
            "pyproject.toml",
            "0.2.0",
        ),
        (
            &[("package.json", "{\n  \"name\": \"app\",\n  \"version\": \"1.2.3\"\n}\n"), ("tsconfig.json", "{}\n")],
            "patch",
            "TypeScript",
            "package.json",
            "1.2.4",
        ),
        (
            &[("package.json", "{\"name\":\"app\",\"version\":\"1.2.3\"}\n")],
            "major",
            "JavaScript",
            "package.json",
            "2.0.0",
        ),
        (
            &[("Cargo.toml", "[package]\nname = \"app\"\nversion = \"0.9.1\"\nedition = \"2021\"\n")],
            "patch",
            "Rust",
            "Cargo.toml",
            "0.9.2",
        ),
        (&[("VERSION", "3.4.5\n"), ("README.md", "framework\n")], "minor", "SDD Framework", "VERSION", "3.5.0"),
    ];
    for (files, level, eco, file, want) in cases {
        let dir = tempfile::tempdir().unwrap();
        repo(dir.path(), files);
        let before = std::fs::read_to_string(dir.path().join(file)).unwrap();
        let out = troupe().arg("-C").arg(dir.path()).args(["--json", "release", level, "first cut"]).output().unwrap();
        assert!(out.status.success(), "{eco}: {}", String::from_utf8_lossy(&out.stderr));
        let v = json(&out);
        assert_eq!(v["ecosystem"], *eco, "{v}");
        assert_eq!(v["version"], *want);
        assert_eq!(v["tag"], format!("v{want}"));
        let after = std::fs::read_to_string(dir.path().join(file)).unwrap();
        let old = v["previous"].as_str().unwrap();
        assert_eq!(after, before.replacen(old, want, 1), "{eco}: only the version changed");
        assert_eq!(git(dir.path(), &["log", "-1", "--format=%s"]), format!("Release v{want}: first cut"));
        assert_eq!(
            git(dir.path(), &["rev-parse", &format!("v{want}^{{commit}}")]),
            git(dir.path(), &["rev-parse", "HEAD"])
        );
        assert_eq!(
            git(dir.path(), &["rev-parse", &format!("release/v{want}")]),
            git(dir.path(), &["rev-parse", "HEAD"]),
            "the release branch is a snapshot at the tag"
        );
        assert_eq!(git(dir.path(), &["branch", "--show-current"]), "main", "work stays on the trunk");
        assert_eq!(git(dir.path(), &["status", "--porcelain"]), "");
    }
}

#[test]
fn other_projects_get_a_tag_only_from_the_last_tag() {
    let dir = tempfile::tempdir().unwrap();
    repo(dir.path(), &[("main.go", "package main\n")]);
    git(dir.path(), &["tag", "v1.4.0"]);
    let head = git(dir.path(), &["rev-parse", "HEAD"]);
    release(dir.path(), "patch", "bug fixes").success().stdout(predicate::str::contains("released v1.4.1 (Other)"));
    assert_eq!(git(dir.path(), &["rev-parse", "HEAD"]), head, "no commit");
    assert_eq!(git(dir.path(), &["rev-parse", "v1.4.1^{commit}"]), head);
    assert_eq!(git(dir.path(), &["tag", "-l", "v1.4.1", "--format=%(contents:subject)"]), "Release v1.4.1: bug fixes");
    git(dir.path(), &["rev-parse", "--verify", "release/v1.4.1"]);
}

#[test]
fn cargo_lock_follows_the_package_version() {
    let dir = tempfile::tempdir().unwrap();
    let lock = "version = 4\n\n[[package]]\nname = \"app\"\nversion = \"0.1.0\"\n";
    repo(dir.path(), &[("Cargo.toml", "[package]\nname = \"app\"\nversion = \"0.1.0\"\n"), ("Cargo.lock", lock)]);
    release(dir.path(), "minor", "locks").success();
    assert_eq!(std::fs::read_to_string(dir.path().join("Cargo.lock")).unwrap(), lock.replace("0.1.0", "0.2.0"));
    assert_eq!(git(dir.path(), &["status", "--porcelain"]), "");
}

#[test]
fn a_dirty_tree_is_refused_and_nothing_changes() {
    let dir = tempfile::tempdir().unwrap();
    repo(dir.path(), &[("VERSION", "1.0.0\n")]);
    std::fs::write(dir.path().join("notes.txt"), "wip\n").unwrap();
    release(dir.path(), "patch", "x")
        .code(1)
        .stderr(predicate::str::contains("uncommitted changes: notes.txt"))
        .stderr(predicate::str::contains("hint: commit or stash"));
    assert_eq!(std::fs::read_to_string(dir.path().join("VERSION")).unwrap(), "1.0.0\n");
    assert_eq!(git(dir.path(), &["tag", "-l"]), "");
}

#[test]
fn a_gate_command_that_cannot_run_is_named_as_an_environment_problem() {
    let p = TestProject::new();
    let root = p.root();
    let tech = "# Tech\n\n## Common Commands\n\n- Test: `true`\n- Lint: `no-such-linter-for-troupe .`\n";
    std::fs::write(p.path(".troupe/steering/tech.md"), tech).unwrap();
    std::fs::write(root.join("VERSION"), "0.5.0\n").unwrap();
    repo(root, &[]);
    release(root, "patch", "gated")
        .code(1)
        .stderr(predicate::str::contains(
            "the quality gate could not run its Lint command `no-such-linter-for-troupe .` (exit 127)",
        ))
        .stderr(predicate::str::contains("not found"))
        .stderr(predicate::str::contains("a problem of the environment"));
    assert_eq!(git(root, &["tag", "-l"]), "");
}

#[test]
fn a_failing_quality_gate_is_refused_and_a_passing_one_lets_it_through() {
    let p = TestProject::new();
    let root = p.root();
    let tech = "# Tech\n\n## Common Commands\n\n- Test: `test -f tests_pass`\n- Lint: `true`\n";
    std::fs::write(p.path(".troupe/steering/tech.md"), tech).unwrap();
    std::fs::write(root.join("VERSION"), "0.5.0\n").unwrap();
    repo(root, &[]);
    release(root, "minor", "gated")
        .code(1)
        .stderr(predicate::str::contains("the quality gate failed: `test -f tests_pass`"));
    assert_eq!(std::fs::read_to_string(root.join("VERSION")).unwrap(), "0.5.0\n");
    assert_eq!(git(root, &["tag", "-l"]), "");

    std::fs::write(root.join("tests_pass"), "").unwrap();
    git(root, &["add", "tests_pass"]);
    git(root, &["commit", "-q", "-m", "make tests pass"]);
    let out = p.troupe().args(["--json", "release", "minor", "gated"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(json(&out)["gate"], serde_json::json!(["test -f tests_pass", "true"]));
}

#[test]
fn bad_inputs_are_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    release(dir.path(), "patch", "x").code(1).stderr(predicate::str::contains("is not a git repository"));
    repo(dir.path(), &[("VERSION", "1.0.0\n")]);
    release(dir.path(), "huge", "x").code(2);
    release(dir.path(), "patch", "  ").code(2).stderr(predicate::str::contains("summary is empty"));
    release(dir.path(), "patch", "one").success();
    // Someone made the next tag by hand: refuse instead of moving it.
    git(dir.path(), &["tag", "v1.0.2"]);
    release(dir.path(), "patch", "two").code(1).stderr(predicate::str::contains("tag v1.0.2 already exists"));
    assert_eq!(std::fs::read_to_string(dir.path().join("VERSION")).unwrap(), "1.0.1\n");

    let bad = tempfile::tempdir().unwrap();
    repo(bad.path(), &[("package.json", "{\"name\":\"x\",\"version\":\"latest\"}\n")]);
    release(bad.path(), "patch", "x")
        .code(3)
        .stderr(predicate::str::contains("version 'latest' is not MAJOR.MINOR.PATCH"));
}
