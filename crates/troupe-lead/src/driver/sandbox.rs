//! The sandbox of one teammate, from what the Lead (or `troupe agent run`)
//! knows about it: its `TROUPE_*` environment (role, feature, owned files —
//! read back the way the hooks read them), the project's `[sandbox]` config,
//! and where its engine keeps its state. troupe-engine turns the answer into
//! a Landlock ruleset at spawn.
//!
//! Fails closed: when the kernel cannot sandbox, the answer is an error
//! unless `[sandbox] required = false`.

use std::path::{Path, PathBuf};

use troupe_core::config::Config;
use troupe_core::layout::Layout;
use troupe_engine::sandbox::{self, Grant, Policy, State};

/// A teammate that may not start: the kernel cannot sandbox it.
#[derive(Debug, Clone, thiserror::Error)]
#[error("cannot sandbox teammate {agent}: {}", .state.describe())]
pub struct Unsandboxable {
    /// The teammate.
    pub agent: String,
    /// What the kernel offers.
    pub state: State,
}

impl Unsandboxable {
    /// How to go on.
    pub fn hint(&self) -> &'static str {
        "run on Linux 6.2 or later with Landlock enabled, or set `[sandbox] required = false` in \
         .troupe/config.toml to run teammates unsandboxed (the hooks alone then guard ownership)"
    }
}

/// Whether teammates of this project can start at all: `Ok(true)` sandboxed,
/// `Ok(false)` unsandboxed because the config allows it, an error otherwise.
pub fn check(config: &Config, agent: &str) -> Result<bool, Unsandboxable> {
    let state = sandbox::state();
    if state.usable() {
        Ok(true)
    } else if !config.sandbox.required {
        tracing::warn!("teammate {agent} runs unsandboxed: {} ([sandbox] required = false)", state.describe());
        Ok(false)
    } else {
        Err(Unsandboxable { agent: agent.to_string(), state })
    }
}

/// The sandbox of the teammate whose environment is `env`, in the project at
/// `root`; `None` when the config lets it run unsandboxed on this kernel.
pub fn policy(root: &Path, config: &Config, env: &[(String, String)]) -> Result<Option<Policy>, String> {
    let var = |k: &str| env.iter().rev().find(|(key, _)| key == k).map(|(_, v)| v.clone());
    let agent = var("TROUPE_AGENT_ID").unwrap_or_else(|| "agent".into());
    let home = var("HOME").or_else(|| std::env::var("HOME").ok()).map(PathBuf::from);
    hooks_intact(root, home.as_deref(), var("GEMINI_CLI_HOME").as_deref().map(Path::new))?;
    if !check(config, &agent).map_err(|e| format!("{e}; hint: {}", e.hint()))? {
        return Ok(None);
    }
    let teammate = troupe_gate::teammate::Teammate::from_env(|k| var(k).or_else(|| std::env::var(k).ok()))
        .map_err(|e| e.to_string())?
        .ok_or("a teammate has a role (TROUPE_ROLE)")?;
    let (engine_state, engine_files) = engine_state(root, &agent, home.as_deref(), &var);
    let writable = config.sandbox.writable();
    let mut owned = teammate.owned_files.clone();
    owned.extend(role_files(&teammate));
    let grant = Grant {
        root,
        writer: teammate.writer(),
        agent: &agent,
        engine_state,
        engine_files,
        troupe_files: troupe_state(root, &agent),
        writable: &writable,
        temp_base: std::env::temp_dir(),
    };
    sandbox::grant(&grant, &owned).map(Some).map_err(|e| e.to_string())
}

/// Refuses a spawn while a settings file an engine could read switches
/// hooks off (Claude's `disableAllHooks`, Gemini's `hooksConfig.enabled =
/// false`), naming the file: such a file is never written by a sandboxed
/// teammate, so it is someone's attempt to start the next one without hooks.
pub fn hooks_intact(root: &Path, home: Option<&Path>, gemini_home: Option<&Path>) -> Result<(), String> {
    let mut files = Vec::new();
    for base in [Some(root), home, gemini_home].into_iter().flatten() {
        for f in [".claude/settings.json", ".claude/settings.local.json", ".gemini/settings.json"] {
            files.push(base.join(f));
        }
    }
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else { continue };
        let Ok(json) = serde_json::from_str::<serde_json::Value>(&text) else { continue };
        let off = json.get("disableAllHooks").and_then(|v| v.as_bool()) == Some(true)
            || json.pointer("/hooksConfig/enabled").and_then(|v| v.as_bool()) == Some(false)
            || json.pointer("/hooks/enabled").and_then(|v| v.as_bool()) == Some(false);
        if off {
            return Err(format!(
                "{} switches hooks off (disableAllHooks / hooks disabled): a teammate started now would run \
                 without troupe's hooks; hint: remove that setting from the file, then run again",
                file.display()
            ));
        }
    }
    Ok(())
}

/// The spec files a non-Builder role writes, by the ownership matrix: the
/// hooks decide by path, so they need no list; the sandbox needs one.
fn role_files(t: &troupe_gate::teammate::Teammate) -> Vec<String> {
    use troupe_core::role::Role;
    let Some(feature) = t.feature.as_deref() else { return Vec::new() };
    let spec = format!(".troupe/specs/{feature}");
    match t.role {
        Role::Architect => vec![format!("{spec}/design.md"), format!("{spec}/research.md")],
        Role::TaskGenerator => vec![format!("{spec}/tasks.yaml")],
        Role::Inspector => t
            .agent_name
            .iter()
            .chain(t.agent_id.iter())
            .take(1)
            .map(|name| format!("{spec}/reviews/active/{name}.cpf"))
            .collect(),
        Role::Auditor => vec![format!("{spec}/reviews/active/verdict.cpf")],
        _ => Vec::new(),
    }
}

/// Where the engines keep their own state: HOME itself when it does not hold
/// the project (a scratch HOME), else its engine folders; the configured
/// folders (`CLAUDE_CONFIG_DIR`, `CODEX_HOME`, `XDG_*`); troupe's marker store;
/// and the writable parts of a Gemini home troupe made for this run.
fn engine_state(
    root: &Path,
    agent: &str,
    home: Option<&Path>,
    var: &dyn Fn(&str) -> Option<String>,
) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let mut dirs = Vec::new();
    let mut files = Vec::new();
    let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    if let Some(home) = home.and_then(|h| h.canonicalize().ok()) {
        if !root.starts_with(&home) {
            dirs.push(home.clone());
        }
        for d in [".claude", ".gemini", ".codex", ".cache", ".config", ".local", ".npm"] {
            dirs.push(home.join(d));
        }
        files.push(home.join(".claude.json"));
    }
    for key in
        ["CLAUDE_CONFIG_DIR", "CODEX_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME"]
    {
        if let Some(v) = var(key).or_else(|| std::env::var(key).ok()).filter(|v| !v.is_empty()) {
            dirs.push(PathBuf::from(v));
        }
    }
    if let Ok(markers) = troupe_gate::markers::default_dir(|k| var(k).or_else(|| std::env::var(k).ok()))
        && std::fs::create_dir_all(&markers).is_ok()
    {
        dirs.push(markers);
    }
    // Gemini keeps its state (projects.json, tmp/) in the `.gemini` of the
    // home troupe made for this run; what it links to in the user's
    // `~/.gemini` is granted through HOME above.
    if let Some(gemini) = var("GEMINI_CLI_HOME") {
        let run_dir = Layout::new(&root).state_dir().join("hooks").join(agent);
        let d = Path::new(&gemini).join(".gemini");
        if d.starts_with(&run_dir) {
            dirs.push(d);
        }
    }
    (dirs, files)
}

/// troupe's own state a teammate's hooks and gateway write: the store (its
/// WAL files exist while the Lead holds it open), its heartbeat and the denial log.
fn troupe_state(root: &Path, agent: &str) -> Vec<PathBuf> {
    let layout = Layout::new(root);
    let db = layout.database_file();
    let mut files: Vec<PathBuf> =
        ["", "-wal", "-shm"].iter().map(|s| PathBuf::from(format!("{}{s}", db.display()))).collect();
    let beat = layout.heartbeats_dir().join(agent);
    if std::fs::create_dir_all(layout.heartbeats_dir()).is_ok() {
        let _ = std::fs::OpenOptions::new().create(true).append(true).open(&beat);
    }
    files.push(beat);
    // The denial log the hooks (running inside the sandbox) append to, which
    // live displays follow: it must exist for Landlock to grant it.
    let denials = layout.denials_file();
    let _ = std::fs::OpenOptions::new().create(true).append(true).open(&denials);
    files.push(denials);
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_settings_file_that_switches_hooks_off_is_named_and_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        assert!(hooks_intact(root, None, None).is_ok());
        std::fs::create_dir_all(root.join(".claude")).unwrap();
        std::fs::write(root.join(".claude/settings.local.json"), r#"{"disableAllHooks": true}"#).unwrap();
        let e = hooks_intact(root, None, None).unwrap_err();
        assert!(e.contains(".claude/settings.local.json switches hooks off"), "{e}");
        std::fs::write(root.join(".claude/settings.local.json"), r#"{"disableAllHooks": false}"#).unwrap();
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(home.path().join(".gemini")).unwrap();
        std::fs::write(home.path().join(".gemini/settings.json"), r#"{"hooksConfig": {"enabled": false}}"#).unwrap();
        assert!(hooks_intact(root, Some(home.path()), None).unwrap_err().contains(".gemini/settings.json"));
    }
}
