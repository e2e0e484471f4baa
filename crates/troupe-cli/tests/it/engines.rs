//! `troupe engines list`: built-in and custom engines, installed or not, versions, phases.

use std::path::Path;

use crate::support::{TestProject, json, troupe};

fn fake_bin(dir: &Path, name: &str, version: &str) {
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\necho '{version}'\n")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn by_id(engines: &[serde_json::Value], id: &str) -> serde_json::Value {
    engines.iter().find(|e| e["id"] == id).unwrap().clone()
}

#[test]
fn lists_builtin_and_custom_engines_with_install_state_and_versions() {
    let p = TestProject::new();
    let bins = tempfile::tempdir().unwrap();
    fake_bin(bins.path(), "gemini", "0.61.2");
    fake_bin(bins.path(), "my-agent", "my-agent 1.0");
    let claude_dir = tempfile::tempdir().unwrap();
    fake_bin(claude_dir.path(), "claude-custom", "2.1.197 (Claude Code)");
    std::fs::write(
        p.path(".troupe/config.toml"),
        format!(
            "[engines]\ndefault = \"gemini\"\n[engines.phases]\nimpl = \"mine\"\n[engines.commands]\nclaude = \"{}\"\n[engines.custom.mine]\ncommand = \"my-agent\"\nformat = \"claude\"\n",
            claude_dir.path().join("claude-custom").display()
        ),
    )
    .unwrap();
    let out = p.troupe().env("PATH", bins.path()).args(["--json", "engines", "list"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v = json(&out);
    let engines = v["engines"].as_array().unwrap();
    let ids: Vec<&str> = engines.iter().map(|e| e["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["claude", "gemini", "codex", "opencode", "scripted", "mine"]);
    assert_eq!(by_id(engines, "scripted")["installed"], true, "the running troupe plays the scripted engine");
    let by = |id: &str| engines.iter().find(|e| e["id"] == id).unwrap().clone();
    assert_eq!(by("claude")["installed"], true);
    assert_eq!(by("claude")["version"], "2.1.197 (Claude Code)");
    assert_eq!(by("gemini")["version"], "0.61.2");
    assert_eq!(by("gemini")["phases"].as_array().unwrap().len(), 7, "every phase but impl");
    assert_eq!(by("codex")["installed"], false);
    assert_eq!(by("codex")["version"], serde_json::Value::Null);
    assert_eq!(by("mine")["installed"], true);
    assert_eq!(by("mine")["format"], "claude");
    assert_eq!(by("mine")["phases"], serde_json::json!(["impl"]));

    let out = p.troupe().env("PATH", bins.path()).args(["engines", "list"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.lines().next().unwrap().starts_with("ENGINE"));
    assert!(text.lines().any(|l| l.starts_with("codex") && l.contains(" no ")), "{text}");
}

/// Outside a project the built-in engines are listed; a broken config is
/// refused as every command refuses it (before, `engines list` warned and
/// showed the defaults in its place).
#[test]
fn works_outside_a_project_and_refuses_a_broken_config() {
    let dir = tempfile::tempdir().unwrap();
    let out = troupe().arg("-C").arg(dir.path()).args(["--json", "engines", "list", "--no-version"]).output().unwrap();
    assert!(out.status.success());
    assert_eq!(json(&out)["engines"].as_array().unwrap().len(), 5);

    let p = TestProject::new();
    std::fs::write(p.path(".troupe/config.toml"), "[engines]\ndefualt = \"codex\"\n").unwrap();
    let out = p.troupe().args(["--json", "engines", "list", "--no-version"]).output().unwrap();
    assert_eq!(out.status.code(), Some(3));
    let v = json(&out);
    assert!(v["engines"].is_null(), "{v}");
    assert!(v.to_string().contains("defualt"), "{v}");
}
