//! `troupe doctor`: one screen of everything a run depends on, and exit 1 when something blocks it.

use std::path::Path;

use crate::support::{TestProject, json};

fn git_init(root: &Path) {
    let ok = std::process::Command::new("git").args(["init", "-q"]).current_dir(root).status().unwrap().success();
    assert!(ok);
}

fn write(p: &TestProject, rel: &str, text: &str) {
    std::fs::write(p.path(rel), text).unwrap();
}

fn tech(commands: &str) -> String {
    format!("# Tech\n\n## Common Commands\n\n{commands}\n")
}

fn find<'a>(doc: &'a serde_json::Value, area: &str, name: &str) -> &'a serde_json::Value {
    doc["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["area"] == area && c["name"] == name)
        .unwrap_or_else(|| panic!("no {area} {name} check in {doc:#}"))
}

#[test]
fn doctor_runs_each_common_command_once_and_a_ready_project_exits_0() {
    let p = TestProject::new();
    git_init(p.root());
    write(&p, ".troupe/config.toml", "[engines]\ndefault = \"scripted\"\n");
    write(
        &p,
        ".troupe/steering/tech.md",
        &tech("- Test: `echo ran >> test-ran`\n- Lint: `echo style is off; exit 1`\n- Format: `touch formatted`"),
    );
    let out = p.troupe().args(["--json", "doctor"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    let doc = json(&out);
    assert_eq!(doc["ok"], true);
    assert_eq!(find(&doc, "engine", "scripted")["status"], "ok");
    let test = find(&doc, "command", "Test");
    assert_eq!(test["status"], "ok");
    assert!(test["detail"].as_str().unwrap().contains("exit 0 in"), "{test}");
    let lint = find(&doc, "command", "Lint");
    assert_eq!(lint["status"], "warn", "a failing command warns; it does not block: {lint}");
    assert!(
        lint["detail"].as_str().unwrap().contains("exit 1 in")
            && lint["detail"].as_str().unwrap().contains("style is off")
    );
    assert_eq!(std::fs::read_to_string(p.path("test-ran")).unwrap(), "ran\n", "run exactly once, in the root");
    assert!(!p.path("formatted").exists(), "Format rewrites files: never run by doctor");
    assert_eq!(find(&doc, "git", "git")["status"], "ok");

    let text = p.troupe().arg("doctor").output().unwrap();
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(stdout.contains("warn  Lint"), "{stdout}");
    assert!(stdout.trim_end().ends_with("ready, with 1 warning"), "{stdout}");
}

#[test]
fn doctor_exits_1_and_names_each_blocker_with_a_hint() {
    let p = TestProject::new();
    write(&p, ".troupe/steering/tech.md", &tech("- Test: `troupe-doctor-no-such-program --all`"));
    let out = p.troupe().env("PATH", "/usr/bin:/bin").args(["--json", "doctor"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let doc = json(&out);
    assert_eq!(doc["ok"], false);
    let engine = find(&doc, "engine", "claude");
    assert_eq!(engine["status"], "fail", "{engine}");
    assert!(engine["hint"].as_str().unwrap().contains("[engines.commands] claude"), "{engine}");
    let test = find(&doc, "command", "Test");
    assert_eq!(test["status"], "fail");
    assert!(test["detail"].as_str().unwrap().contains("troupe-doctor-no-such-program not found"), "{test}");
    assert_eq!(find(&doc, "git", "git")["status"], "fail", "outside git a run needs --no-commit");
    assert_eq!(doc["blocking"], 3);

    let text = p.troupe().env("PATH", "/usr/bin:/bin").arg("doctor").output().unwrap();
    assert_eq!(text.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(stdout.contains("FAIL  git"), "{stdout}");
    assert!(stdout.contains("hint: run `git init`"), "{stdout}");
    assert!(stdout.contains("not ready: 3 problems block a run"), "{stdout}");
}

#[test]
fn doctor_reports_a_broken_config_and_a_broken_spec_without_hiding_the_rest() {
    let p = TestProject::new();
    git_init(p.root());
    p.troupe().args(["spec", "new", "good"]).assert().success();
    p.troupe().args(["spec", "new", "bad"]).assert().success();
    write(&p, ".troupe/specs/bad/spec.yaml", "feature: [unclosed\n");
    write(&p, ".troupe/config.toml", "[engines]\ndefualt = \"codex\"\n");
    let out = p.troupe().args(["--json", "doctor", "--no-run"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let doc = json(&out);
    let config = find(&doc, "config", "config");
    assert_eq!(config["status"], "fail");
    assert!(config["detail"].as_str().unwrap().contains("defualt"), "the unknown key is named: {config}");
    assert_eq!(find(&doc, "specs", "bad")["status"], "warn");
    assert_eq!(find(&doc, "specs", "specs")["detail"], "1 spec readable");
    assert_eq!(find(&doc, "store", "sqlite")["status"], "ok");
}

#[test]
fn doctor_shows_a_real_engines_version_and_missing_credentials() {
    let p = TestProject::new();
    git_init(p.root());
    let claude = troupe_testkit::peers::bin("claude");
    write(&p, ".troupe/config.toml", &format!("[engines.commands]\nclaude = \"{}\"\n", claude.display()));
    write(&p, ".troupe/steering/tech.md", &tech("- Test: `true`"));
    let home = tempfile::tempdir().unwrap();
    let doctor = |key: Option<&str>| {
        let mut cmd = p.troupe();
        cmd.env("HOME", home.path()).env("DISABLE_AUTOUPDATER", "1").env_remove("CLAUDE_CODE_OAUTH_TOKEN");
        match key {
            Some(k) => cmd.env("ANTHROPIC_API_KEY", k),
            None => cmd.env_remove("ANTHROPIC_API_KEY"),
        };
        let out = cmd.args(["--json", "doctor"]).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "credentials only warn: {}", String::from_utf8_lossy(&out.stdout));
        json(&out)
    };
    let doc = doctor(None);
    let engine = find(&doc, "engine", "claude");
    assert!(engine["detail"].as_str().unwrap().contains("(Claude Code)"), "the real `claude --version`: {engine}");
    let auth = find(&doc, "auth", "claude");
    assert_eq!(auth["status"], "warn");
    assert!(auth["hint"].as_str().unwrap().contains("ANTHROPIC_API_KEY"), "{auth}");
    let doc = doctor(Some("sk-test"));
    assert!(doc["checks"].as_array().unwrap().iter().all(|c| c["area"] != "auth"), "{doc:#}");
}
