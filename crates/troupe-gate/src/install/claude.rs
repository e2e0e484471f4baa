//! Claude Code: `.claude/settings.json` (hooks, `env`, `permissions.allow`, seed
//! 000 Spec 15), the gate skills under `.claude/skills/`, and a plugin directory.

use serde_json::{Map, Value, json};

use super::files::Plan;
use super::manifest::Manifest;
use super::{InstallError, InstallOptions, hook_command, is_troupe_hook};
use crate::skills::gate_skills;

const SETTINGS: &str = ".claude/settings.json";
const PLUGIN_DIR: &str = ".troupe/claude-plugin";
const ENV: [(&str, &str); 1] = [("CLAUDE_CODE_EXPERIMENTAL_AGENT_TEAMS", "1")];
const PERMISSIONS: [&str; 2] = ["Bash(cat:*)", "Bash(echo:*)"];

/// How the `type: "prompt"` UserPromptSubmit hook of earlier troupe versions
/// started. troupe no longer installs it (it could block a person's prompt and
/// cost a model call per prompt, for an answer nothing used; phase detection is
/// the deterministic command hook, which never blocks, seed 001 施策3), but it
/// still recognises it, so `troupe init --claude` and uninstall remove it.
pub const PHASE_PROMPT_PREFIX: &str = "troupe phase detection (guidance only, never a block).";

/// Claude's events, with the matcher troupe uses (`None`: the event has no matcher).
const EVENTS: [(&str, Option<&str>); 11] = [
    ("SessionStart", None),
    ("SessionEnd", None),
    ("UserPromptSubmit", None),
    ("PreToolUse", Some("*")),
    ("PostToolUse", Some("Skill|Bash")),
    // A shell command that failed: the post-run check still looks at what it
    // changed, and at the sandbox's refusals in its output.
    ("PostToolUseFailure", Some("Bash")),
    ("Stop", None),
    ("SubagentStop", None),
    ("TaskCompleted", None),
    ("TeammateIdle", None),
    ("PreCompact", None),
];

/// The `hooks` object troupe wants, event by event.
pub(super) fn troupe_hooks(options: &InstallOptions) -> Vec<(&'static str, Option<&'static str>, Vec<Value>)> {
    let long = options.gates.timeout_seconds + 30;
    EVENTS
        .iter()
        .map(|(event, matcher)| {
            let timeout =
                if matches!(*event, "Stop" | "SubagentStop" | "TaskCompleted" | "TeammateIdle") { long } else { 30 };
            let hooks = vec![json!({
                "type": "command",
                "command": hook_command(&options.troupe, "claude", event),
                "timeout": timeout,
            })];
            (*event, *matcher, hooks)
        })
        .collect()
}

/// True for a hook object troupe installed for `engine`.
pub fn is_ours(hook: &Value, engine: &str) -> bool {
    hook.get("command").and_then(Value::as_str).is_some_and(|c| is_troupe_hook(c, engine))
        || hook.get("prompt").and_then(Value::as_str).is_some_and(|p| p.starts_with(PHASE_PROMPT_PREFIX))
}

/// Replace troupe's entries in a Claude-style `hooks` object with `wanted`.
pub fn merge_hooks(
    settings: &mut Value,
    engine: &str,
    wanted: Vec<(&str, Option<&str>, Vec<Value>)>,
    path: &str,
) -> Result<(), InstallError> {
    remove_hooks(settings, engine, path)?;
    let hooks = object_at(settings, "hooks", path)?;
    for (event, matcher, list) in wanted {
        let groups = hooks.entry(event).or_insert_with(|| json!([]));
        let Value::Array(groups) = groups else {
            return Err(shape(path, format!("hooks.{event} should be a list")));
        };
        let mut group = Map::new();
        if let Some(m) = matcher {
            group.insert("matcher".into(), json!(m));
        }
        group.insert("hooks".into(), Value::Array(list));
        groups.push(Value::Object(group));
    }
    Ok(())
}

/// Remove troupe's hook entries, and groups and events they leave empty.
pub fn remove_hooks(settings: &mut Value, engine: &str, path: &str) -> Result<(), InstallError> {
    let Some(hooks) = settings.get_mut("hooks") else { return Ok(()) };
    let Value::Object(hooks) = hooks else { return Err(shape(path, "hooks should be an object".into())) };
    for groups in hooks.values_mut() {
        let Value::Array(groups) = groups else { continue };
        for group in groups.iter_mut() {
            if let Some(Value::Array(list)) = group.get_mut("hooks") {
                list.retain(|h| !is_ours(h, engine));
            }
        }
        groups.retain(|g| !matches!(g.get("hooks"), Some(Value::Array(l)) if l.is_empty()));
    }
    hooks.retain(|_, groups| !matches!(groups, Value::Array(g) if g.is_empty()));
    if hooks.is_empty() {
        settings.as_object_mut().expect("settings are an object").remove("hooks");
    }
    Ok(())
}

fn object_at<'a>(value: &'a mut Value, key: &str, path: &str) -> Result<&'a mut Map<String, Value>, InstallError> {
    let obj = value.as_object_mut().expect("settings are an object");
    match obj.entry(key).or_insert_with(|| json!({})) {
        Value::Object(m) => Ok(m),
        _ => Err(shape(path, format!("{key} should be an object"))),
    }
}

fn shape(path: &str, detail: String) -> InstallError {
    InstallError::BadShape { path: path.into(), detail }
}

/// The `{"hooks": …}` settings for one Claude Code run (`claude --settings '<json>'`):
/// what the Lead passes to each teammate so every event reaches `troupe hook`,
/// without touching the project's `.claude/settings.json`.
pub fn run_settings(options: &InstallOptions) -> Value {
    let mut settings = json!({});
    merge_hooks(&mut settings, "claude", troupe_hooks(options), "--settings").expect("a fresh object merges");
    settings
}

pub fn install(plan: &mut Plan, manifest: &mut Manifest, options: &InstallOptions) -> Result<(), InstallError> {
    let existed = plan.read(SETTINGS)?.is_some();
    let mut settings = plan.read_json(SETTINGS)?.unwrap_or_else(|| json!({}));
    merge_hooks(&mut settings, "claude", troupe_hooks(options), SETTINGS)?;
    let env = object_at(&mut settings, "env", SETTINGS)?;
    for (key, value) in ENV {
        if !env.contains_key(key) {
            env.insert(key.into(), json!(value));
            if !manifest.claude_env.iter().any(|k| k == key) {
                manifest.claude_env.push(key.into());
            }
        }
    }
    let permissions = object_at(&mut settings, "permissions", SETTINGS)?;
    let allow = permissions.entry("allow").or_insert_with(|| json!([]));
    let Value::Array(allow) = allow else { return Err(shape(SETTINGS, "permissions.allow should be a list".into())) };
    for p in PERMISSIONS {
        if !allow.iter().any(|a| a == p) {
            allow.push(json!(p));
            if !manifest.claude_permissions.iter().any(|k| k == p) {
                manifest.claude_permissions.push(p.into());
            }
        }
    }
    if !existed && !manifest.settings_created.iter().any(|s| s == SETTINGS) {
        manifest.settings_created.push(SETTINGS.into());
    }
    plan.write_json(SETTINGS, &settings);
    for skill in gate_skills(&options.gates, &options.commands) {
        plan.create(manifest, &format!(".claude/skills/{}/SKILL.md", skill.name), skill.text)?;
    }
    Ok(())
}

pub fn install_plugin(plan: &mut Plan, manifest: &mut Manifest, options: &InstallOptions) -> Result<(), InstallError> {
    let plugin = json!({
        "name": "troupe-gates",
        "version": env!("CARGO_PKG_VERSION"),
        "description": "troupe's gates: skill gate, Stop gate, phase guidance, ownership and quality gates, enforced by the troupe binary",
        "author": { "name": "troupe" },
    });
    let mut hooks = json!({ "description": "troupe's gates (see `troupe hook`)" });
    merge_hooks(&mut hooks, "claude", troupe_hooks(options), PLUGIN_DIR)?;
    let pretty = |v: &Value| serde_json::to_string_pretty(v).expect("JSON serializes") + "\n";
    plan.create(manifest, &format!("{PLUGIN_DIR}/.claude-plugin/plugin.json"), pretty(&plugin))?;
    plan.create(manifest, &format!("{PLUGIN_DIR}/hooks/hooks.json"), pretty(&hooks))?;
    for skill in gate_skills(&options.gates, &options.commands) {
        plan.create(manifest, &format!("{PLUGIN_DIR}/skills/{}/SKILL.md", skill.name), skill.text)?;
    }
    Ok(())
}

pub fn uninstall(plan: &mut Plan, manifest: &mut Manifest) -> Result<(), InstallError> {
    let Some(mut settings) = plan.read_json(SETTINGS)? else { return Ok(()) };
    let before = settings.clone();
    remove_hooks(&mut settings, "claude", SETTINGS)?;
    let obj = settings.as_object_mut().expect("settings are an object");
    if let Some(Value::Object(env)) = obj.get_mut("env") {
        for key in &manifest.claude_env {
            if let Some((_, value)) = ENV.iter().find(|(k, _)| k == key)
                && env.get(key.as_str()) == Some(&json!(value))
            {
                env.remove(key.as_str());
            }
        }
        if env.is_empty() {
            obj.remove("env");
        }
    }
    if let Some(Value::Object(permissions)) = obj.get_mut("permissions") {
        if let Some(Value::Array(allow)) = permissions.get_mut("allow") {
            allow.retain(|a| !manifest.claude_permissions.iter().any(|p| a == p));
            if allow.is_empty() {
                permissions.remove("allow");
            }
        }
        if permissions.is_empty() {
            obj.remove("permissions");
        }
    }
    if obj.is_empty() && manifest.settings_created.iter().any(|s| s == SETTINGS) {
        plan.remove(SETTINGS);
    } else if settings != before {
        plan.write_json(SETTINGS, &settings);
    }
    Ok(())
}
