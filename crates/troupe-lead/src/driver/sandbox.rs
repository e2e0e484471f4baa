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
    let lookup = |k: &str| var(k).or_else(|| std::env::var(k).ok());
    hooks_intact(root, &lookup, Some(plugins_at_start(root, &lookup)))?;
    if !check(config, &agent).map_err(|e| format!("{e}; hint: {}", e.hint()))? {
        return Ok(None);
    }
    let teammate = troupe_gate::teammate::Teammate::from_env(|k| var(k).or_else(|| std::env::var(k).ok()))
        .map_err(|e| e.to_string())?
        .ok_or("a teammate has a role (TROUPE_ROLE)")?;
    let (engine_state, engine_files) = engine_state(root, &agent, home.as_deref(), &var);
    let writable = config.sandbox.writable();
    let mut owned = if teammate.skill_role.is_some() {
        // `**` is a pattern, which the sandbox cannot grant: the project's own entries instead.
        project_entries(root)
    } else {
        teammate.owned_files.clone()
    };
    owned.extend(role_files(&teammate));
    // A Builder in its own git worktree writes its files there.
    let worktree = var(troupe_gate::teammate::env::WORKTREE).map(PathBuf::from);
    let state = Layout::new(root).state_dir();
    let grant = Grant {
        root: worktree.as_deref().unwrap_or(root),
        state: &state,
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
/// troupe's hooks off, naming the file: Claude's `disableAllHooks`, Gemini's
/// `hooksConfig.enabled = false` or a `hooksConfig.disabled` entry naming
/// troupe's hook, Codex's hooks feature or a hook's state turned off, or an
/// OpenCode plugin not in `plugins_before` or changed since (a plugin runs inside OpenCode and
/// can rewrite a tool call after troupe's bridge plugin checked it). Such a
/// file is someone's attempt to start the next teammate without hooks: the
/// sandbox lets teammates write their engine's home (where the user-level
/// settings live), so it is checked here, before every spawn. troupe's own
/// per-run settings are written anew for every spawn, and checked here too.
/// `var` reads the teammate's environment (`HOME`, `CLAUDE_CONFIG_DIR`,
/// `GEMINI_CLI_HOME`, `CODEX_HOME`, `XDG_CONFIG_HOME`, `OPENCODE_CONFIG_DIR`).
pub fn hooks_intact(
    root: &Path,
    var: &dyn Fn(&str) -> Option<String>,
    plugins_before: Option<&Plugins>,
) -> Result<(), String> {
    let dir = |k: &str| var(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    let home = dir("HOME");
    let mut json = Vec::new();
    for base in [Some(root.to_path_buf()), home.clone()].into_iter().flatten() {
        json.push(base.join(".claude/settings.json"));
        json.push(base.join(".claude/settings.local.json"));
        json.push(base.join(".gemini/settings.json"));
    }
    if let Some(d) = dir("CLAUDE_CONFIG_DIR") {
        json.extend([d.join("settings.json"), d.join("settings.local.json")]);
    }
    if let Some(d) = dir("GEMINI_CLI_HOME") {
        json.push(d.join(".gemini/settings.json"));
    }
    for file in json {
        let Ok(text) = std::fs::read_to_string(&file) else { continue };
        let Ok(value) = serde_json::from_str::<serde_json::Value>(&text) else { continue };
        if let Some(setting) = json_switch(&value) {
            return Err(switched_off(&file, setting));
        }
    }
    let codex_home = dir("CODEX_HOME").or_else(|| home.as_ref().map(|h| h.join(".codex")));
    for file in [Some(root.join(".codex/config.toml")), codex_home.map(|d| d.join("config.toml"))].into_iter().flatten()
    {
        let Ok(text) = std::fs::read_to_string(&file) else { continue };
        let Ok(value) = text.parse::<toml::Table>() else { continue };
        if let Some(setting) = codex_switch(&value) {
            return Err(switched_off(&file, setting));
        }
    }
    if let Some(before) = plugins_before
        && let Some((file, _)) = opencode_plugins(root, var).into_iter().find(|(f, stamp)| before.get(f) != Some(stamp))
    {
        return Err(format!(
            "{} is an OpenCode plugin written during this run: it would run inside the next OpenCode teammate, \
             around troupe's hooks; hint: remove it (or review it and run again)",
            file.display()
        ));
    }
    Ok(())
}

/// The setting of a Claude or Gemini settings file that switches troupe's hooks off.
fn json_switch(v: &serde_json::Value) -> Option<&'static str> {
    if v.get("disableAllHooks").and_then(|v| v.as_bool()) == Some(true) {
        return Some("disableAllHooks");
    }
    if v.pointer("/hooksConfig/enabled").and_then(|v| v.as_bool()) == Some(false)
        || v.pointer("/hooks/enabled").and_then(|v| v.as_bool()) == Some(false)
    {
        return Some("hooks disabled");
    }
    // Gemini skips every hook whose name (troupe's is `troupe`) or command is listed.
    let disabled = v.pointer("/hooksConfig/disabled").and_then(|d| d.as_array());
    if disabled.into_iter().flatten().any(|d| d.as_str().is_some_and(|d| d.contains("troupe"))) {
        return Some("hooksConfig.disabled names troupe's hook");
    }
    None
}

/// The setting of a Codex `config.toml` that switches hooks off.
fn codex_switch(t: &toml::Table) -> Option<&'static str> {
    let features = t.get("features").and_then(|f| f.as_table());
    for name in ["codex_hooks", "hooks"] {
        if features.and_then(|f| f.get(name)).and_then(|v| v.as_bool()) == Some(false) {
            return Some("[features] hooks off");
        }
    }
    let states = t.get("hooks").and_then(|h| h.get("state")).and_then(|s| s.as_table());
    let off = states.into_iter().flatten().any(|(_, s)| s.get("enabled").and_then(|e| e.as_bool()) == Some(false));
    off.then_some("a hook's state is enabled = false")
}

fn switched_off(file: &Path, setting: &str) -> String {
    format!(
        "{} switches hooks off ({setting}): a teammate started now would run without troupe's hooks; hint: \
         remove that setting from the file, then run again",
        file.display()
    )
}

/// OpenCode's plugin files, each with its inode and status-change time
/// (which a write, a rename or a `touch -d` moves, and no one can set back).
pub type Plugins = std::collections::BTreeMap<PathBuf, (u64, i64, i64)>;

/// The plugins OpenCode would load for a teammate with environment `var`:
/// the project's `.opencode/plugin{,s}/`, the user's config folder's, and
/// `OPENCODE_CONFIG_DIR`'s.
pub fn opencode_plugins(root: &Path, var: &dyn Fn(&str) -> Option<String>) -> Plugins {
    use std::os::unix::fs::MetadataExt;
    let dir = |k: &str| var(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    let config = dir("XDG_CONFIG_HOME").or_else(|| dir("HOME").map(|h| h.join(".config")));
    let bases = [Some(root.join(".opencode")), config.map(|c| c.join("opencode")), dir("OPENCODE_CONFIG_DIR")];
    let mut out = Plugins::new();
    for base in bases.into_iter().flatten() {
        for folder in ["plugin", "plugins"] {
            let Ok(entries) = std::fs::read_dir(base.join(folder)) else { continue };
            for path in entries.flatten().map(|e| e.path()) {
                if let Ok(m) = path.symlink_metadata() {
                    out.insert(path, (m.ino(), m.ctime(), m.ctime_nsec()));
                }
            }
        }
    }
    out
}

/// The OpenCode plugins there were when this process first prepared a
/// teammate's spawn, before any teammate ran.
fn plugins_at_start(root: &Path, var: &dyn Fn(&str) -> Option<String>) -> &'static Plugins {
    static START: std::sync::OnceLock<Plugins> = std::sync::OnceLock::new();
    START.get_or_init(|| opencode_plugins(root, var))
}

/// The spec files a non-Builder role writes, by the ownership matrix: the
/// hooks decide by path, so they need no list; the sandbox needs one.
/// A skill role's grant (it may write any project file the role policy lets
/// it): every top-level entry of the project, folders as `name/`; the grant
/// itself leaves out `.git/`, `.troupe/` and engines' settings folders.
fn project_entries(root: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(root) else { return Vec::new() };
    let mut out: Vec<String> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let dir = e.file_type().ok()?.is_dir();
            Some(if dir { format!("{name}/") } else { name })
        })
        .collect();
    out.sort();
    out
}

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

/// Where the engines keep their own state: the engines' folders in HOME
/// (made when missing, so an engine's first run finds them), never HOME
/// itself, scratch or not: its dotfiles (`.bashrc`, `.profile`, `.ssh/`,
/// `.gitconfig`, `.local/bin` on `PATH`) would let a teammate run code as the
/// user later. Claude Code's `~/.claude.json` is granted as a file (made as
/// `{}` when missing) for a run without a config folder of its own
/// (`wiring::claude_config`): Claude writes it in place when it cannot make a
/// temporary file beside it. Then the configured folders
/// (`CLAUDE_CONFIG_DIR`, `CODEX_HOME`, `XDG_*`); troupe's marker store; and
/// the writable parts of a Gemini home troupe made for this run.
/// The engines' own folders in HOME: Claude Code's, Gemini CLI's and
/// Codex's, OpenCode's XDG folders, and the shared caches (`~/.cache`, npm's).
const HOME_STATE: [&str; 8] = [
    ".claude",
    ".gemini",
    ".codex",
    ".cache",
    ".npm",
    ".config/opencode",
    ".local/share/opencode",
    ".local/state/opencode",
];

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
        for d in HOME_STATE {
            let dir = home.join(d);
            if !root.starts_with(&dir) && std::fs::create_dir_all(&dir).is_ok() {
                dirs.push(dir);
            }
        }
        let claude = home.join(".claude.json");
        let _ = std::fs::OpenOptions::new().write(true).create_new(true).open(&claude).and_then(|mut f| {
            use std::io::Write as _;
            f.write_all(b"{}")
        });
        files.push(claude);
    }
    for key in
        ["CLAUDE_CONFIG_DIR", "CODEX_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME"]
    {
        // The teammate's value and troupe's own: a teammate's config folder
        // troupe made for the run links into the user's.
        for v in [var(key), std::env::var(key).ok()].into_iter().flatten().filter(|v| !v.is_empty()) {
            if !dirs.contains(&PathBuf::from(&v)) {
                dirs.push(PathBuf::from(v));
            }
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

    fn env(home: &Path) -> impl Fn(&str) -> Option<String> {
        let home = home.to_path_buf();
        move |k| (k == "HOME").then(|| home.display().to_string())
    }

    fn intact(root: &Path, home: &Path, before: Option<&Plugins>) -> Result<(), String> {
        hooks_intact(root, &env(home), before)
    }

    fn put(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn a_teammates_home_is_writable_only_in_the_engines_folders() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path().canonicalize().unwrap();
        let home = tempfile::tempdir().unwrap();
        let home = home.path().canonicalize().unwrap();
        let env: Vec<(String, String)> = [
            ("TROUPE_AGENT_ID", "b1"),
            ("TROUPE_ROLE", "builder"),
            ("TROUPE_FEATURE", "f"),
            ("TROUPE_OWNED_FILES", "src/a.rs"),
            ("HOME", home.to_str().unwrap()),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let policy = policy(&root, &Config::default(), &env).unwrap().expect("this kernel sandboxes");
        assert!(!policy.dirs.iter().any(|d| home.starts_with(d)), "HOME is never granted whole: {policy:?}");
        assert!(policy.dirs.contains(&home.join(".claude")) && policy.files.contains(&home.join(".claude.json")));
        let prepared = policy.prepare().unwrap();
        let script = "echo a > ~/.bashrc; mkdir ~/.ssh; mkdir -p ~/.local/bin && echo b > ~/.local/bin/git; \
                      echo c > ~/.config/git; echo d > ~/.claude/sessions.json; echo e > ~/.cache/x; \
                      echo '{\"n\": 1}' > ~/.claude.json; echo f > ~/.config/opencode/state; echo done";
        let mut cmd = std::process::Command::new("bash");
        cmd.args(["-c", script]).env("HOME", &home).current_dir(&root);
        prepared.apply_to_std(&mut cmd);
        let out = cmd.output().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "done", "{}", String::from_utf8_lossy(&out.stderr));
        for refused in [".bashrc", ".ssh", ".local/bin", ".config/git"] {
            assert!(!home.join(refused).exists(), "{refused} was written");
        }
        for granted in [".claude/sessions.json", ".cache/x", ".config/opencode/state"] {
            assert!(home.join(granted).is_file(), "{granted} was refused: {}", String::from_utf8_lossy(&out.stderr));
        }
        assert_eq!(std::fs::read_to_string(home.join(".claude.json")).unwrap(), "{\"n\": 1}\n");
    }

    #[test]
    fn a_settings_file_that_switches_hooks_off_is_named_and_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let home = tempfile::tempdir().unwrap();
        let home = home.path();
        assert!(intact(root, home, None).is_ok());
        put(&root.join(".claude/settings.local.json"), r#"{"disableAllHooks": true}"#);
        let e = intact(root, home, None).unwrap_err();
        assert!(e.contains(".claude/settings.local.json switches hooks off"), "{e}");
        put(&root.join(".claude/settings.local.json"), r#"{"disableAllHooks": false}"#);
        put(&home.join(".gemini/settings.json"), r#"{"hooksConfig": {"enabled": false}}"#);
        assert!(intact(root, home, None).unwrap_err().contains(".gemini/settings.json"));
    }

    #[test]
    fn every_engines_way_of_removing_troupes_hooks_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let home = tempfile::tempdir().unwrap();
        let home = home.path();
        let cases: [(PathBuf, &str, &str); 5] = [
            (home.join(".claude/settings.json"), r#"{"disableAllHooks": true}"#, "disableAllHooks"),
            // Gemini skips a hook by its name: troupe's is `troupe`.
            (home.join(".gemini/settings.json"), r#"{"hooksConfig": {"disabled": ["troupe"]}}"#, "names troupe's hook"),
            (home.join(".codex/config.toml"), "[features]\ncodex_hooks = false\n", "[features] hooks off"),
            (root.join(".codex/config.toml"), "[features]\nhooks = false\n", "[features] hooks off"),
            (home.join(".codex/config.toml"), "[hooks.state.\"pre-tool-use:0\"]\nenabled = false\n", "enabled = false"),
        ];
        for (file, text, why) in cases {
            put(&file, text);
            let e = intact(root, home, None).unwrap_err();
            assert!(e.contains(&file.display().to_string()) && e.contains(why), "{e}");
            std::fs::remove_file(&file).unwrap();
        }
        put(&home.join(".gemini/settings.json"), r#"{"hooksConfig": {"disabled": ["someone-else"]}}"#);
        put(&home.join(".codex/config.toml"), "[features]\ncodex_hooks = true\n");
        assert!(intact(root, home, None).is_ok());

        // An OpenCode plugin in the user's config folder, which the sandbox
        // lets an OpenCode teammate write: refused when written during the run.
        put(&home.join(".config/opencode/plugin/old.js"), "export const Old = async () => ({});\n");
        let before = opencode_plugins(root, &env(home));
        assert!(intact(root, home, Some(&before)).is_ok(), "a plugin from before the run is the user's");
        put(&home.join(".config/opencode/plugin/x.js"), "export const X = async () => ({});\n");
        let e = intact(root, home, Some(&before)).unwrap_err();
        assert!(e.contains("opencode/plugin/x.js is an OpenCode plugin written during this run"), "{e}");
    }
}
