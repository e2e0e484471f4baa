use serde_json::{Value, json};
use troupe_core::config::{CommonCommands, GatesConfig};

use super::*;

fn options() -> InstallOptions {
    InstallOptions {
        troupe: "/opt/troupe bin/troupe".into(),
        gates: GatesConfig::default(),
        commands: CommonCommands { test: Some("cargo test".into()), ..Default::default() },
    }
}

fn read(root: &Path, rel: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(root.join(rel)).unwrap()).unwrap()
}

fn snapshot(root: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = entry.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push((p.strip_prefix(root).unwrap().display().to_string(), std::fs::read_to_string(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn claude_install_merges_and_uninstall_restores_exactly() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let user = json!({
        "model": "opus",
        "env": { "FOO": "bar" },
        "permissions": { "allow": ["Bash(cat:*)", "Read"] },
        "hooks": { "PreToolUse": [{ "matcher": "Bash", "hooks": [{ "type": "command", "command": "./my-guard.sh" }] }] }
    });
    std::fs::create_dir_all(root.join(".claude")).unwrap();
    std::fs::write(root.join(".claude/settings.json"), serde_json::to_string_pretty(&user).unwrap() + "\n").unwrap();
    let before = snapshot(root);

    let changed = install(root, &[Target::Claude], &options()).unwrap();
    assert!(changed.contains(&".claude/settings.json".to_string()), "{changed:?}");
    let s = read(root, ".claude/settings.json");
    assert_eq!(s["model"], "opus");
    assert_eq!(s["env"], json!({"FOO": "bar", "CLAUDE_CODE_EXPERIMENTAL_AGENT_TEAMS": "1"}));
    assert_eq!(s["permissions"]["allow"], json!(["Bash(cat:*)", "Read", "Bash(echo:*)"]));
    let pre = s["hooks"]["PreToolUse"].as_array().unwrap();
    assert_eq!(pre[0]["hooks"][0]["command"], "./my-guard.sh", "the user's hook stays first");
    assert_eq!(pre[1]["hooks"][0]["command"], "'/opt/troupe bin/troupe' hook claude PreToolUse");
    // Phase detection is the command hook alone: no `type: "prompt"` hook that could block a prompt.
    let prompt = s["hooks"]["UserPromptSubmit"].as_array().unwrap();
    assert_eq!(prompt.len(), 1);
    assert_eq!(
        prompt[0]["hooks"],
        json!([{"type": "command", "command": "'/opt/troupe bin/troupe' hook claude UserPromptSubmit", "timeout": 30}])
    );
    assert!(!s.to_string().contains("\"prompt\""), "{s}");
    for event in ["SessionStart", "PostToolUse", "Stop", "SubagentStop", "TaskCompleted", "TeammateIdle", "PreCompact"]
    {
        assert!(s["hooks"][event].is_array(), "{event}");
    }
    let verification =
        std::fs::read_to_string(root.join(".claude/skills/verification-before-completion/SKILL.md")).unwrap();
    assert!(verification.contains("`cargo test`"));

    // A second install changes nothing.
    assert_eq!(install(root, &[Target::Claude], &options()).unwrap(), Vec::<String>::new());

    uninstall(root).unwrap();
    assert_eq!(snapshot(root), before, "uninstall removes exactly what install added");
}

#[test]
fn claude_install_removes_the_prompt_hook_of_an_earlier_install() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let old = json!({
        "hooks": { "UserPromptSubmit": [{ "hooks": [
            { "type": "command", "command": "'/opt/troupe bin/troupe' hook claude UserPromptSubmit", "timeout": 30 },
            { "type": "prompt", "prompt": format!("{} Classify the user's message. $ARGUMENTS", super::claude::PHASE_PROMPT_PREFIX), "timeout": 30 },
            { "type": "prompt", "prompt": "the user's own prompt hook" }
        ]}]}
    });
    std::fs::create_dir_all(root.join(".claude")).unwrap();
    std::fs::write(root.join(".claude/settings.json"), old.to_string()).unwrap();
    install(root, &[Target::Claude], &options()).unwrap();
    let s = read(root, ".claude/settings.json");
    let text = s.to_string();
    assert!(!text.contains("troupe phase detection"), "{text}");
    assert!(text.contains("the user's own prompt hook"), "{text}");
    assert!(text.contains("hook claude UserPromptSubmit"), "{text}");
}

#[test]
fn fresh_install_of_everything_then_uninstall_leaves_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    std::fs::create_dir_all(root.join(".troupe")).unwrap();
    let all = [Target::Claude, Target::ClaudePlugin, Target::Gemini, Target::Codex, Target::OpenCode];
    install(root, &all, &options()).unwrap();
    let g = read(root, ".gemini/settings.json");
    assert_eq!(g["hooks"]["BeforeTool"][0]["hooks"][0]["name"], "troupe");
    assert_eq!(g["hooks"]["BeforeTool"][0]["hooks"][0]["timeout"], 30_000);
    let c = read(root, ".codex/hooks.json");
    assert_eq!(c["hooks"]["PreToolUse"][0]["hooks"][0]["command"], "'/opt/troupe bin/troupe' hook codex PreToolUse");
    let plugin = read(root, ".troupe/claude-plugin/.claude-plugin/plugin.json");
    assert_eq!(plugin["name"], "troupe-gates");
    assert!(read(root, ".troupe/claude-plugin/hooks/hooks.json")["hooks"]["Stop"].is_array());
    let js = std::fs::read_to_string(root.join(".opencode/plugin/troupe-gates.js")).unwrap();
    assert!(js.contains("\"/opt/troupe bin/troupe\"") && js.contains("tool.execute.before"));

    uninstall(root).unwrap();
    let left = snapshot(root);
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn edited_files_survive_uninstall_and_bad_json_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    install(root, &[Target::Claude], &options()).unwrap();
    let skill = root.join(".claude/skills/code-quality-rules/SKILL.md");
    std::fs::write(&skill, "my own rules\n").unwrap();
    uninstall(root).unwrap();
    assert_eq!(std::fs::read_to_string(&skill).unwrap(), "my own rules\n");
    assert!(!root.join(".claude/settings.json").exists());

    std::fs::write(root.join(".claude/settings.json"), "{ not json").unwrap();
    let before = snapshot(root);
    let err = install(root, &[Target::Claude, Target::Gemini], &options()).unwrap_err();
    assert!(err.to_string().contains("settings.json is not valid JSON"), "{err}");
    assert_eq!(snapshot(root), before);
}

#[test]
fn per_run_settings_carry_every_event() {
    let s = claude_run_settings(&options());
    for event in ["SessionStart", "PreToolUse", "PostToolUse", "Stop", "TaskCompleted", "TeammateIdle"] {
        let command = s["hooks"][event][0]["hooks"][0]["command"].as_str().unwrap();
        assert!(command.ends_with(&format!(" hook claude {event}")), "{command}");
    }
}
