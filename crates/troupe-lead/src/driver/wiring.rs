//! What each engine needs to reach troupe during one teammate's run: troupe's
//! hooks (`troupe hook <engine> <event>`, entries from
//! `troupe_gate::install::teammate_hooks`) and troupe's MCP gateway (`troupe mcp
//! serve --role R --agent ID`). Always for that run only: the user's and the
//! project's engine settings are never edited.
//!
//! | Engine | Hooks | Gateway |
//! |---|---|---|
//! | Claude Code | `--settings '<json>'` (gate skills: `--plugin-dir`; a config folder of its own, `CLAUDE_CONFIG_DIR`) | `--mcp-config '<json>'` |
//! | Gemini CLI | a `~/.gemini` of its own (`GEMINI_CLI_HOME`): the user's settings plus troupe's (gate skills: its `skills/`) | the same settings' `mcpServers` |
//! | Codex | `-c hooks.<Event>=…` and `--dangerously-bypass-hook-trust` | `-c mcp_servers.troupe.*` |
//! | OpenCode | the bridge plugin, added through `OPENCODE_CONFIG_CONTENT` (gate skills: its `skills.paths`; a database of its own, `OPENCODE_DB`; no title call, no snapshots; its plugin package recorded in a sandboxed project's `.opencode`) | the same config's `mcp` |
//!
//! Per-run files live under `.troupe/state/hooks/<agent>/`. The teammate's
//! gateway token is not among them: every teammate may read the project, so
//! a file there would be every teammate's. It is minted for each launch, its
//! hash bound to the agent id in the store (so that the gateway serves that
//! agent to the holder of that token only), and handed over in the
//! teammate's environment (`TROUPE_GATEWAY_TOKEN`), which its engine passes
//! on to the gateway it starts: Claude Code and OpenCode pass their whole
//! environment, Gemini CLI only what `env` names (`$TROUPE_GATEWAY_TOKEN`),
//! Codex only what `env_vars` lists. No command line carries it (any process
//! may read another's). The environment is not a perfect secret either: a
//! process of the same user may read `/proc/<pid>/environ`, which Landlock
//! did not refuse across sandboxes on the kernel measured. So a token is not
//! enough over stdio: the gateway serves an agent troupe started only when it
//! runs beneath that agent's registered process (`troupe mcp serve`).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use troupe_core::layout::Layout;
use troupe_gate::install::InstallOptions;
#[cfg(test)]
use troupe_gate::install::TEAMMATE_EVENTS;
use troupe_gate::{Engine, Event};

use crate::driver::launch::LaunchEnv;
use crate::machine::SpawnRequest;

/// The teammate a run is wired for.
#[derive(Debug, Clone, Copy)]
pub struct Who<'a> {
    /// Its agent id.
    pub id: &'a str,
    /// Its role's name: a built-in role's, or one the project's skills define.
    pub role: &'a str,
    /// Delegate mode (seed 003 B5): its gateway refuses file locks
    /// (`troupe mcp serve --delegate-mode`); its hooks read `TROUPE_DELEGATE`.
    pub delegate: bool,
}

impl<'a> From<&'a SpawnRequest> for Who<'a> {
    fn from(req: &'a SpawnRequest) -> Self {
        Who { id: &req.id, role: req.role.as_str(), delegate: false }
    }
}

/// The name troupe's gateway has in every engine's MCP config.
pub const GATEWAY: &str = "troupe";

/// A new teammate starts with no session markers: its hooks key them by agent
/// id, and an id from an earlier run of the project must not lend it the skills
/// that run invoked. Best effort: without a state folder the hooks refuse anyway.
pub fn forget_markers(id: &str) {
    use troupe_gate::markers::{MarkerStore, default_dir};
    if let Ok(store) = default_dir(|k| std::env::var(k).ok()).and_then(MarkerStore::open) {
        let _ = store.clear(id);
    }
}

fn options(env: &LaunchEnv<'_>) -> InstallOptions {
    InstallOptions { troupe: env.troupe.to_path_buf(), gates: env.config.gates.clone(), commands: Default::default() }
}

/// troupe's hooks for one teammate run on `engine` (`{"hooks": …}`).
/// A live `troupe team` agent's events add the prompt's (`LIVE_EVENTS`).
pub fn hooks_with(engine: Engine, env: &LaunchEnv<'_>, events: &[Event]) -> Value {
    troupe_gate::install::hooks_for(engine, &options(env), events).unwrap_or_else(|| json!({}))
}

/// The gateway's command line for `who`: (program, arguments). Its token
/// comes from the environment (see the module docs), never from here.
pub fn gateway(env: &LaunchEnv<'_>, who: Who<'_>) -> (String, Vec<String>) {
    let mut args = ["mcp", "serve", "-C", &env.root.display().to_string(), "--role", who.role, "--agent", who.id]
        .map(str::to_string)
        .to_vec();
    if who.delegate {
        // On the command line, not in the environment: Gemini CLI and Codex
        // hand a server only the variables their config names.
        args.push("--delegate-mode".into());
    }
    (env.troupe.display().to_string(), args)
}

/// A fresh token for `id`, its hash bound to `id` in the store (replacing
/// the one of a launch before): the value of the teammate's
/// `TROUPE_GATEWAY_TOKEN`.
pub fn gateway_token(env: &LaunchEnv<'_>, id: &str) -> Result<String, String> {
    let token = troupe_store::token::mint().map_err(|e| format!("cannot mint a gateway token: {e}"))?;
    let store = troupe_store::open(&Layout::new(env.root), &env.config.store)
        .map_err(|e| format!("cannot open the store for the gateway token: {e}"))?;
    store
        .set_gateway_token(id, &troupe_store::token::hash(&token))
        .map_err(|e| format!("cannot store the gateway token: {e}"))?;
    Ok(token)
}

/// Claude Code's `--mcp-config`: `{"mcpServers": {"troupe": {command, args}}}`.
pub fn claude_mcp(env: &LaunchEnv<'_>, who: Who<'_>) -> String {
    let (command, args) = gateway(env, who);
    json!({ "mcpServers": { GATEWAY: { "command": command, "args": args } } }).to_string()
}

/// The folder of a teammate's per-run files.
fn run_dir(env: &LaunchEnv<'_>, id: &str) -> Result<PathBuf, String> {
    let dir = Layout::new(env.root).state_dir().join("hooks").join(id);
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    Ok(dir)
}

/// A Claude Code config folder for this run (`CLAUDE_CONFIG_DIR`): every
/// entry of the user's (`$CLAUDE_CONFIG_DIR`, else `~/.claude`) linked, and a
/// copy of the user's global config file, which the variable moves into the
/// folder (`.claude.json`). Claude Code guards that file with a lock folder
/// and a temporary file beside it; the sandbox cannot grant those in HOME
/// without granting all of HOME, so teammates sharing `~/.claude.json` wrote
/// it in place at once, and one starting meanwhile read half a file and
/// exited ("Configuration error … JSON Parse error"). With a copy of its own,
/// each teammate locks and replaces its own (a refreshed OAuth token goes back
/// to the user's: `claude_credentials`). Transcripts stay in the user's
/// `projects/` (made if missing), so a later run resumes any session.
pub fn claude_config(env: &LaunchEnv<'_>, who: Who<'_>) -> Result<PathBuf, String> {
    let dir = run_dir(env, who.id)?.join("claude-config");
    let global = env_path("CLAUDE_CONFIG_DIR").or_else(|| env_path("HOME")).map(|d| d.join(".claude.json"));
    fill_claude_config(&dir, user_claude_dir().as_deref(), global.as_deref())?;
    Ok(dir)
}

/// The user's Claude Code config folder: `$CLAUDE_CONFIG_DIR`, else `~/.claude`.
pub fn user_claude_dir() -> Option<PathBuf> {
    env_path("CLAUDE_CONFIG_DIR").or_else(|| env_path("HOME").map(|h| h.join(".claude")))
}

fn env_path(key: &str) -> Option<PathBuf> {
    std::env::var_os(key).filter(|v| !v.is_empty()).map(PathBuf::from)
}

/// Make `dir` from the user's Claude config folder `user` and global config file `global`.
fn fill_claude_config(dir: &Path, user: Option<&Path>, global: Option<&Path>) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    if let Some(user) = user {
        let _ = std::fs::create_dir_all(user.join("projects"));
        if user.is_dir() {
            link_entries(user, dir, &[".claude.json", ".claude.json.lock"])?;
        }
    }
    let copy = dir.join(".claude.json");
    let _ = std::fs::remove_file(&copy);
    if let Some(text) = global.and_then(|g| std::fs::read(g).ok()) {
        // Mode 0600, as Claude Code writes it: it may hold an API key.
        super::claude_credentials::write_private(&copy, &text)
            .map_err(|e| format!("cannot write {}: {e}", copy.display()))?;
    }
    Ok(())
}

/// A Claude Code plugin folder for this run (`--plugin-dir`) holding troupe's
/// gate skills under the names `[gates.skills]` gives them, with the project's
/// test and lint commands in the verification skill, so that the Skill tool
/// finds them (as `troupe:<name>`) after a plain `troupe init`.
pub fn claude_skills(env: &LaunchEnv<'_>, who: Who<'_>) -> Result<PathBuf, String> {
    let dir = run_dir(env, who.id)?.join("claude-plugin");
    let manifest = dir.join(".claude-plugin");
    std::fs::create_dir_all(&manifest).map_err(|e| format!("cannot create {}: {e}", manifest.display()))?;
    write(
        &manifest.join("plugin.json"),
        &json!({"name": GATEWAY, "description": "troupe's gate skills for one teammate run"}).to_string(),
    )?;
    write_gate_skills(env, &dir.join("skills"))?;
    Ok(dir)
}

/// troupe's gate skills as `skills/<name>/SKILL.md`, the layout both Claude
/// Code's plugins and Gemini CLI's skill folders read: the names
/// `[gates.skills]` gives them, the project's test and lint commands in the
/// verification skill. A skill of the same name already there is replaced.
fn write_gate_skills(env: &LaunchEnv<'_>, skills: &Path) -> Result<(), String> {
    let steering = troupe_gate::run::read_steering(env.root);
    for skill in troupe_gate::skills::gate_skills(&env.config.gates, &steering) {
        let folder = skills.join(&skill.name);
        if folder.symlink_metadata().is_ok_and(|m| m.file_type().is_symlink()) {
            // A link to the user's own skill of that name: the link goes, never what it points to.
            std::fs::remove_file(&folder).map_err(|e| format!("cannot replace {}: {e}", folder.display()))?;
        }
        std::fs::create_dir_all(&folder).map_err(|e| format!("cannot create {}: {e}", folder.display()))?;
        write(&folder.join("SKILL.md"), &skill.text)?;
    }
    Ok(())
}

/// Remove the per-run files of `ids` when the run is over (best effort). Links
/// into the user's `~/.gemini` are removed as links; what they point to stays.
pub fn cleanup<'a>(root: &Path, ids: impl IntoIterator<Item = &'a String>) {
    let hooks = Layout::new(root).state_dir().join("hooks");
    for id in ids {
        let _ = std::fs::remove_dir_all(hooks.join(id));
    }
    let _ = std::fs::remove_dir(&hooks);
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// A Gemini CLI home for this run (`GEMINI_CLI_HOME`, which moves only Gemini's
/// `~/.gemini`): the user's `settings.json` with troupe's hooks and gateway
/// added, and every other entry of the user's `~/.gemini` (credentials, trusted
/// folders, session history) linked, so the run sees the user's setup and its
/// sessions can be resumed. User-level hooks run in untrusted folders too,
/// where a project's `.gemini/settings.json` hooks do not; Gemini's system
/// settings file cannot be used instead, as it is skipped unless root owns it
/// and every folder above it.
pub fn gemini_home_with(env: &LaunchEnv<'_>, who: Who<'_>, events: &[Event]) -> Result<PathBuf, String> {
    let home = run_dir(env, who.id)?.join("gemini-home");
    let user = std::env::var_os("GEMINI_CLI_HOME")
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var_os("HOME"))
        .map(|h| PathBuf::from(h).join(".gemini"));
    let mut ours = hooks_with(Engine::Gemini, env, events);
    let (command, args) = gateway(env, who);
    // Gemini hands a server none of its environment's `*TOKEN*` variables
    // unless `env` names them; `$NAME` is expanded from its own environment,
    // so the settings file holds no secret.
    let token = format!("${}", troupe_store::token::ENV);
    ours["mcpServers"] =
        json!({ GATEWAY: { "command": command, "args": args, "env": { troupe_store::token::ENV: token } } });
    // Gemini CLI ends a turn that repeats one tool call five times, which is
    // what an Auditor waiting for slow Inspectors does (`read_messages` with
    // the same `wait_for`); troupe bounds its teammates itself (hang timeout).
    ours["model"] = json!({ "disableLoopDetection": true });
    fill_gemini_home(&home, user.as_deref(), &ours)?;
    // The gate skills where Gemini CLI looks for the user's skills (its
    // `activate_skill` tool, which the hooks count as loading the skill).
    write_gate_skills(env, &home.join(".gemini").join("skills"))?;
    Ok(home)
}

/// Make `home/.gemini` from the user's Gemini folder `user` and troupe's `ours`
/// settings: `hooks` lists are added to the user's, other objects merged key by key.
fn fill_gemini_home(home: &Path, user: Option<&Path>, ours: &Value) -> Result<(), String> {
    let dir = home.join(".gemini");
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let mut settings = json!({});
    if let Some(user) = user.filter(|u| u.is_dir()) {
        link_entries(user, &dir, &["settings.json", "skills"])?;
        // The user's skills, one link each, in a folder of the run's own
        // that troupe's gate skills join.
        let skills = user.join("skills");
        if skills.is_dir() {
            let ours = dir.join("skills");
            std::fs::create_dir_all(&ours).map_err(|e| format!("cannot create {}: {e}", ours.display()))?;
            link_entries(&skills, &ours, &[])?;
        }
        let file = user.join("settings.json");
        if let Ok(text) = std::fs::read_to_string(&file) {
            settings = serde_json::from_str::<Value>(&text).ok().filter(Value::is_object).ok_or_else(|| {
                format!("{} is not a JSON object; fix it so troupe can add its hooks", file.display())
            })?;
        }
    }
    for (key, value) in ours.as_object().into_iter().flatten() {
        let slot = settings.as_object_mut().expect("an object").entry(key.clone()).or_insert_with(|| json!({}));
        if !slot.is_object() {
            *slot = json!({});
        }
        let slot = slot.as_object_mut().expect("an object");
        for (k, v) in value.as_object().into_iter().flatten() {
            match (key == "hooks", slot.get_mut(k).and_then(Value::as_array_mut), v.as_array()) {
                (true, Some(have), Some(add)) => have.extend(add.iter().cloned()),
                _ => {
                    slot.insert(k.clone(), v.clone());
                }
            }
        }
    }
    write(&dir.join("settings.json"), &settings.to_string())
}

/// Link every entry of folder `from` into `to`, except the names in `skip`
/// and those `to` already holds.
fn link_entries(from: &Path, to: &Path, skip: &[&str]) -> Result<(), String> {
    for entry in std::fs::read_dir(from).map_err(|e| format!("cannot read {}: {e}", from.display()))?.flatten() {
        let link = to.join(entry.file_name());
        if skip.iter().any(|s| entry.file_name() == *s) || link.symlink_metadata().is_ok() {
            continue;
        }
        std::os::unix::fs::symlink(entry.path(), &link).map_err(|e| format!("cannot link {}: {e}", link.display()))?;
    }
    Ok(())
}

/// Codex config overrides (each passed with `-c`): `hooks.<Event>=<inline TOML>`
/// per event, and the gateway as `mcp_servers.troupe`.
pub fn codex_config_with(env: &LaunchEnv<'_>, who: Who<'_>, events: &[Event]) -> Result<Vec<String>, String> {
    let ours = hooks_with(Engine::Codex, env, events);
    let mut overrides = Vec::new();
    for (event, list) in ours["hooks"].as_object().into_iter().flatten() {
        overrides.push(format!("hooks.{event}={}", inline_toml(list)));
    }
    let (command, gateway_args) = gateway(env, who);
    overrides.push(format!("mcp_servers.{GATEWAY}.command={}", inline_toml(&json!(command))));
    overrides.push(format!("mcp_servers.{GATEWAY}.args={}", inline_toml(&json!(gateway_args))));
    // Codex starts a server with a few basic variables only, plus those `env_vars` lists.
    overrides.push(format!("mcp_servers.{GATEWAY}.env_vars={}", inline_toml(&json!([troupe_store::token::ENV]))));
    Ok(overrides)
}

/// A JSON value as TOML inline syntax (JSON strings are valid TOML basic strings).
fn inline_toml(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let fields: Vec<String> =
                m.iter().map(|(k, v)| format!("{}={}", Value::from(k.as_str()), inline_toml(v))).collect();
            format!("{{{}}}", fields.join(","))
        }
        Value::Array(a) => format!("[{}]", a.iter().map(inline_toml).collect::<Vec<_>>().join(",")),
        Value::Null => "\"\"".into(),
        other => other.to_string(),
    }
}

/// `OPENCODE_CONFIG_CONTENT` for this run: troupe's bridge plugin and gate
/// skills (written to the run's folder; OpenCode's `skill` tool loads a skill
/// found under `skills.paths`) and the gateway, with no session title (the
/// `title` agent disabled) and no snapshots, over what the variable already
/// held.
pub fn opencode_config(env: &LaunchEnv<'_>, who: Who<'_>) -> Result<String, String> {
    let dir = run_dir(env, who.id)?;
    let plugin = dir.join("troupe-gates.js");
    write(&plugin, &troupe_gate::install::opencode_plugin(&options(env)))?;
    let skills = dir.join("opencode-skills");
    write_gate_skills(env, &skills)?;
    let (command, args) = gateway(env, who);
    let inherited = std::env::var("OPENCODE_CONFIG_CONTENT").ok();
    Ok(without_snapshots(&merge_opencode_config(inherited.as_deref(), &plugin, &skills, command, args)))
}

/// `config` (an OpenCode config document) with OpenCode's snapshots off,
/// unless it says otherwise. At every step OpenCode copies the work tree
/// into a git repository of its own (`snapshot`), which serves its undo and
/// revert; a teammate troupe runs uses neither (troupe keeps the work in
/// the project's git; OpenCode has no session a person works in beside a
/// teammate, `docs/live-teams.md`). Its git processes cost every step, more
/// the larger the tree: ≈ 0.8 s of a 10 s start answering one turn in a
/// one-file project (BENCHMARKS.md).
fn without_snapshots(config: &str) -> String {
    let mut v: Value = serde_json::from_str(config).expect("merge_opencode_config writes an object");
    v.as_object_mut().expect("an object").entry("snapshot").or_insert(json!(false));
    v.to_string()
}

/// `OPENCODE_DB` for this teammate: a database of its own, named by its
/// project's folder and its agent id, inside OpenCode's data folder (a
/// relative name is OpenCode's data folder's). Teammates started together (a
/// review starts seven) would otherwise share OpenCode's one `opencode.db`,
/// and one of them fails at start with "database is locked"; a resume finds
/// its session again under the same name. `None` when the user chose a
/// database (`user_set`, their own `OPENCODE_DB`).
pub fn opencode_db(env: &LaunchEnv<'_>, who: Who<'_>, user_set: bool) -> Option<String> {
    if user_set {
        return None;
    }
    let project = env.root.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let safe = |s: &str| -> String {
        s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect()
    };
    Some(format!("troupe-{}-{}.db", safe(&project), safe(who.id)))
}

/// OpenCode merges `OPENCODE_CONFIG_CONTENT` over the user's and the project's
/// config, adding to their `plugin` lists; an inherited value keeps everything
/// it says, its `skills.paths` too (the gate skills' folder joins them).
fn merge_opencode_config(
    inherited: Option<&str>,
    plugin: &Path,
    skills: &Path,
    command: String,
    args: Vec<String>,
) -> String {
    let mut config = inherited
        .and_then(|t| serde_json::from_str::<Value>(t).ok())
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({}));
    let obj = config.as_object_mut().expect("an object");
    push(obj, "plugin", json!(format!("file://{}", plugin.display())));
    let skill_config = obj.entry("skills").or_insert_with(|| json!({}));
    if !skill_config.is_object() {
        *skill_config = json!({});
    }
    push(skill_config.as_object_mut().expect("an object"), "paths", json!(skills.display().to_string()));
    let mcp = obj.entry("mcp").or_insert_with(|| json!({}));
    if !mcp.is_object() {
        *mcp = json!({});
    }
    let command: Vec<String> = std::iter::once(command).chain(args).collect();
    mcp[GATEWAY] = json!({ "type": "local", "command": command, "enabled": true });
    // No session title: OpenCode asks its small model for one at every start,
    // a paid call beside the teammate's work whose answer troupe never reads
    // (it keeps a teammate's session by id). A title agent the user
    // configured stays theirs.
    let agents = obj.entry("agent").or_insert_with(|| json!({}));
    if !agents.is_object() {
        *agents = json!({});
    }
    agents.as_object_mut().expect("an object").entry("title").or_insert_with(|| json!({"disable": true}));
    config.to_string()
}

/// Add `value` to the list `key` of `obj` (made a list if it is not one).
fn push(obj: &mut serde_json::Map<String, Value>, key: &str, value: Value) {
    let list = obj.entry(key).or_insert_with(|| json!([]));
    match list.as_array_mut() {
        Some(l) => l.push(value),
        None => *list = json!([value]),
    }
}

#[cfg(test)]
mod tests {
    use troupe_core::config::Config;
    use troupe_core::role::Role;

    use super::*;
    use crate::machine::SpawnContext;

    fn env_in<'a>(root: &'a Path, config: &'a Config) -> LaunchEnv<'a> {
        LaunchEnv { root, troupe: Path::new("/bin/troupe"), script: Path::new("s.yaml"), config, workdir: None }
    }

    fn builder() -> SpawnRequest {
        SpawnRequest {
            id: "builder-g1-3".into(),
            role: Role::Builder,
            engine_phase: "impl".into(),
            group: Some("G1".into()),
            tasks: vec!["1.1".into()],
            context: SpawnContext {
                feature: "login".into(),
                read: Vec::new(),
                write: vec!["src/a.rs".into()],
                scope: String::new(),
                instructions: Vec::new(),
            },
            attempt: 1,
        }
    }

    #[test]
    fn a_claude_teammate_has_a_config_folder_of_its_own_over_the_users() {
        let home = tempfile::tempdir().unwrap();
        let user = home.path().join(".claude");
        std::fs::create_dir_all(user.join("skills/mine")).unwrap();
        std::fs::write(user.join(".credentials.json"), "{}").unwrap();
        std::fs::write(home.path().join(".claude.json"), r#"{"hasCompletedOnboarding":true}"#).unwrap();
        let dir = home.path().join("run/claude-config");
        let global = home.path().join(".claude.json");
        fill_claude_config(&dir, Some(&user), Some(&global)).unwrap();
        // Twice, as for a respawn under the same id: the copy is refreshed, links kept.
        fill_claude_config(&dir, Some(&user), Some(&global)).unwrap();
        for linked in ["skills", ".credentials.json", "projects"] {
            let link = dir.join(linked);
            assert!(link.symlink_metadata().unwrap().file_type().is_symlink(), "{linked}");
            assert_eq!(std::fs::read_link(&link).unwrap(), user.join(linked));
        }
        let copy = dir.join(".claude.json");
        assert!(!copy.symlink_metadata().unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read_to_string(&copy).unwrap(), r#"{"hasCompletedOnboarding":true}"#);
        use std::os::unix::fs::PermissionsExt as _;
        assert_eq!(copy.metadata().unwrap().permissions().mode() & 0o777, 0o600);
        // Writing the copy leaves the user's file alone.
        std::fs::write(&copy, "{}").unwrap();
        assert_eq!(std::fs::read_to_string(&global).unwrap(), r#"{"hasCompletedOnboarding":true}"#);
    }

    #[test]
    fn claude_gets_every_teammate_hook_and_the_gateway() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config::default();
        let env = env_in(dir.path(), &config);
        let claude = hooks_with(Engine::Claude, &env, &TEAMMATE_EVENTS);
        for event in ["SessionStart", "PreToolUse", "PostToolUse", "Stop"] {
            let command = claude["hooks"][event][0]["hooks"][0]["command"].as_str().unwrap();
            assert_eq!(command, format!("/bin/troupe hook claude {event}"));
        }
        let mcp: Value = serde_json::from_str(&claude_mcp(&env, (&builder()).into())).unwrap();
        let args = mcp["mcpServers"]["troupe"]["args"].to_string();
        assert!(args.ends_with(r#""--role","builder","--agent","builder-g1-3"]"#), "{args}");
    }

    #[test]
    fn each_launch_gets_a_token_bound_to_its_agent_only_and_written_nowhere() {
        use troupe_store::token::matches;
        let dir = tempfile::tempdir().unwrap();
        let config = Config::default();
        let env = env_in(dir.path(), &config);
        let first = gateway_token(&env, "builder-g1-3").unwrap();
        let store = troupe_store::open(&Layout::new(dir.path()), &config.store).unwrap();
        let hash = store.gateway_token("builder-g1-3").unwrap().unwrap();
        assert!(matches(&first, &hash));
        assert_ne!(hash, first, "the store keeps the hash, never the token");
        assert_eq!(store.gateway_token("builder-g1-4").unwrap(), None);
        // A resumed launch gets a new token; the old one stops working.
        let second = gateway_token(&env, "builder-g1-3").unwrap();
        let hash = store.gateway_token("builder-g1-3").unwrap().unwrap();
        assert!(matches(&second, &hash) && !matches(&first, &hash));
        // No engine's wiring carries the token itself (files, arguments, config).
        let req = builder();
        let who: Who<'_> = (&req).into();
        let wired = [
            claude_mcp(&env, who),
            std::fs::read_to_string(
                gemini_home_with(&env, who, &TEAMMATE_EVENTS).unwrap().join(".gemini/settings.json"),
            )
            .unwrap(),
            codex_config_with(&env, who, &TEAMMATE_EVENTS).unwrap().join("\n"),
            opencode_config(&env, who).unwrap(),
        ];
        let current = gateway_token(&env, "builder-g1-3").unwrap();
        for text in &wired {
            assert!(![&first, &second, &current].iter().any(|t| text.contains(t.as_str())), "{text}");
        }
        let gemini: Value = serde_json::from_str(&wired[1]).unwrap();
        assert_eq!(gemini["mcpServers"]["troupe"]["env"]["TROUPE_GATEWAY_TOKEN"], "$TROUPE_GATEWAY_TOKEN");
        assert!(wired[2].contains(r#"mcp_servers.troupe.env_vars=["TROUPE_GATEWAY_TOKEN"]"#), "{}", wired[2]);
    }

    #[test]
    fn codex_overrides_parse_as_toml_the_way_codex_reads_them() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config::default();
        let env = env_in(dir.path(), &config);
        let overrides = codex_config_with(&env, (&builder()).into(), &TEAMMATE_EVENTS).unwrap();
        // Each `-c key.path=value` is a TOML document of its own, merged into the config.
        fn merge(into: &mut toml::Table, doc: toml::Table) {
            for (k, v) in doc {
                match (into.get_mut(&k), v) {
                    (Some(toml::Value::Table(have)), toml::Value::Table(add)) => merge(have, add),
                    (_, v) => {
                        into.insert(k, v);
                    }
                }
            }
        }
        let mut merged = toml::Table::new();
        for o in &overrides {
            merge(&mut merged, toml::from_str(o).unwrap_or_else(|e| panic!("{o}: {e}")));
        }
        let hooks = merged["hooks"].as_table().unwrap();
        assert_eq!(hooks.keys().collect::<Vec<_>>(), ["SessionStart", "PreToolUse", "PostToolUse", "Stop"]);
        assert_eq!(hooks["Stop"][0]["hooks"][0]["command"].as_str(), Some("/bin/troupe hook codex Stop"));
        assert_eq!(hooks["Stop"][0]["hooks"][0]["timeout"].as_integer(), Some(630));
        let gateway = &merged["mcp_servers"]["troupe"];
        assert_eq!(gateway["command"].as_str(), Some("/bin/troupe"));
        assert_eq!(gateway["args"][7].as_str(), Some("builder-g1-3"));
    }

    #[test]
    fn a_gemini_home_keeps_the_users_settings_and_files() {
        let dir = tempfile::tempdir().unwrap();
        let user = dir.path().join("user/.gemini");
        std::fs::create_dir_all(&user).unwrap();
        std::fs::write(user.join("oauth_creds.json"), "{}").unwrap();
        let mine = json!({"security": {"auth": {"selectedType": "gemini-api-key"}},
            "mcpServers": {"theirs": {"command": "x"}},
            "hooks": {"BeforeTool": [{"matcher": "x", "hooks": [{"type": "command", "command": "mine"}]}]}});
        std::fs::write(user.join("settings.json"), mine.to_string()).unwrap();
        let config = Config::default();
        let env = env_in(dir.path(), &config);
        let mut ours = hooks_with(Engine::Gemini, &env, &TEAMMATE_EVENTS);
        ours["mcpServers"] = json!({"troupe": {"command": "/bin/troupe"}});
        let home = dir.path().join("run");
        fill_gemini_home(&home, Some(&user), &ours).unwrap();
        let read = || -> Value {
            serde_json::from_str(&std::fs::read_to_string(home.join(".gemini/settings.json")).unwrap()).unwrap()
        };
        let written = read();
        assert_eq!(written["security"], mine["security"]);
        let before: Vec<&str> = written["hooks"]["BeforeTool"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["hooks"][0]["command"].as_str().unwrap())
            .collect();
        assert_eq!(before, ["mine", "/bin/troupe hook gemini BeforeTool"]);
        assert!(written["hooks"]["AfterAgent"].is_array());
        assert_eq!(written["mcpServers"]["theirs"]["command"], "x");
        assert_eq!(written["mcpServers"]["troupe"]["command"], "/bin/troupe");
        assert!(home.join(".gemini/oauth_creds.json").symlink_metadata().unwrap().file_type().is_symlink());
        // Again (a resume): the same result, links kept.
        fill_gemini_home(&home, Some(&user), &ours).unwrap();
        assert_eq!(read(), written);
        // A broken user settings file is named, not overwritten.
        std::fs::write(user.join("settings.json"), "{oops").unwrap();
        let err = fill_gemini_home(&home, Some(&user), &json!({})).unwrap_err();
        assert!(err.contains("settings.json is not a JSON object"), "{err}");
    }

    #[test]
    fn a_gemini_teammate_runs_without_the_clis_loop_detector() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config::default();
        let env = env_in(dir.path(), &config);
        let home = gemini_home_with(&env, (&builder()).into(), &TEAMMATE_EVENTS).unwrap();
        let text = std::fs::read_to_string(home.join(".gemini/settings.json")).unwrap();
        let settings: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(settings["model"]["disableLoopDetection"], true, "{settings}");
        assert_eq!(settings["mcpServers"]["troupe"]["command"], "/bin/troupe");
        let skill = home.join(".gemini/skills").join(&config.gates.skills.verification).join("SKILL.md");
        assert!(skill.is_file(), "the gate skills are Gemini's skills for the run");
    }

    /// Gemini CLI reads skills from `<GEMINI_CLI_HOME>/.gemini/skills/`: the
    /// gate skills are there for the run, beside the user's own skills, and a
    /// user's skill of a gate skill's name is shadowed, never overwritten.
    #[test]
    fn a_gemini_teammate_finds_the_gate_skills_beside_the_users_own() {
        let dir = tempfile::tempdir().unwrap();
        let user = dir.path().join("user/.gemini");
        let config = Config::default();
        let names = [&config.gates.skills.code, &config.gates.skills.document, &config.gates.skills.verification];
        for (name, text) in [("mine", "---\nname: mine\n---\n"), (names[1].as_str(), "theirs")] {
            std::fs::create_dir_all(user.join("skills").join(name)).unwrap();
            std::fs::write(user.join("skills").join(name).join("SKILL.md"), text).unwrap();
        }
        let env = env_in(dir.path(), &config);
        let home = dir.path().join("run");
        for _ in 0..2 {
            // Twice: a resume wires the same home again.
            fill_gemini_home(&home, Some(&user), &json!({})).unwrap();
            write_gate_skills(&env, &home.join(".gemini/skills")).unwrap();
        }
        let skills = home.join(".gemini/skills");
        assert!(!skills.symlink_metadata().unwrap().file_type().is_symlink(), "a folder of the run's own");
        for name in names {
            let text = std::fs::read_to_string(skills.join(name).join("SKILL.md")).unwrap();
            assert!(text.starts_with(&format!("---\nname: {name}\n")), "{text}");
        }
        assert!(skills.join("mine").symlink_metadata().unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read_to_string(skills.join("mine/SKILL.md")).unwrap(), "---\nname: mine\n---\n");
        let theirs = user.join("skills").join(names[1]).join("SKILL.md");
        assert_eq!(std::fs::read_to_string(theirs).unwrap(), "theirs", "the user's skill is untouched");
    }

    #[test]
    fn cleanup_removes_the_run_files_but_not_what_they_link_to() {
        let dir = tempfile::tempdir().unwrap();
        let user = dir.path().join("user/.gemini");
        std::fs::create_dir_all(&user).unwrap();
        std::fs::write(user.join("oauth_creds.json"), "{}").unwrap();
        let config = Config::default();
        let env = env_in(dir.path(), &config);
        let home = run_dir(&env, "architect-1").unwrap().join("gemini-home");
        fill_gemini_home(&home, Some(&user), &json!({})).unwrap();
        run_dir(&env, "builder-2").unwrap();
        cleanup(dir.path(), [&"architect-1".to_string()]);
        assert!(!home.exists());
        assert!(user.join("oauth_creds.json").is_file(), "the user's file stays");
        assert!(Layout::new(dir.path()).state_dir().join("hooks/builder-2").is_dir(), "other runs' files stay");
        cleanup(dir.path(), [&"builder-2".to_string()]);
        assert!(!Layout::new(dir.path()).state_dir().join("hooks").exists());
    }

    #[test]
    fn each_opencode_teammate_gets_a_database_of_its_own_unless_the_user_chose_one() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config::default();
        let root = dir.path().join("my app");
        let env = env_in(&root, &config);
        let who = |id| Who { id, role: "builder", delegate: false };
        assert_eq!(opencode_db(&env, who("builder-g1-3"), false).as_deref(), Some("troupe-my_app-builder-g1-3.db"));
        assert_ne!(opencode_db(&env, who("inspector-rules-2"), false), opencode_db(&env, who("auditor-7"), false));
        assert_eq!(opencode_db(&env, who("auditor-7"), true), None);
    }

    #[test]
    fn opencode_config_adds_plugin_and_gateway_to_what_it_inherits() {
        let plugin = Path::new("/p/troupe-gates.js");
        let gateway = || ("/bin/troupe".to_string(), vec!["mcp".to_string(), "serve".to_string()]);
        let (c, a) = gateway();
        let skills = Path::new("/p/opencode-skills");
        let fresh: Value = serde_json::from_str(&merge_opencode_config(None, plugin, skills, c, a)).unwrap();
        assert_eq!(
            fresh,
            json!({"plugin": ["file:///p/troupe-gates.js"], "skills": {"paths": ["/p/opencode-skills"]},
                "mcp": {"troupe": {"type": "local", "command": ["/bin/troupe", "mcp", "serve"], "enabled": true}},
                "agent": {"title": {"disable": true}}})
        );
        let inherited = r#"{"model": "m/x", "plugin": ["theirs"], "skills": {"paths": ["/mine"]}, "mcp": {"other": {"type": "remote"}},
            "agent": {"title": {"model": "m/small"}, "build": {"temperature": 0}}}"#;
        let (c, a) = gateway();
        let merged: Value =
            serde_json::from_str(&merge_opencode_config(Some(inherited), plugin, skills, c, a)).unwrap();
        assert_eq!(merged["model"], "m/x");
        assert_eq!(merged["plugin"], json!(["theirs", "file:///p/troupe-gates.js"]));
        assert_eq!(merged["skills"]["paths"], json!(["/mine", "/p/opencode-skills"]));
        assert_eq!(merged["mcp"]["other"], json!({"type": "remote"}));
        assert_eq!(merged["mcp"]["troupe"]["type"], "local");
        assert_eq!(merged["agent"], json!({"title": {"model": "m/small"}, "build": {"temperature": 0}}), "theirs");
    }

    #[test]
    fn a_headless_opencode_teammate_takes_no_snapshots_unless_the_config_says_so() {
        assert_eq!(serde_json::from_str::<Value>(&without_snapshots("{}")).unwrap(), json!({"snapshot": false}));
        let theirs = without_snapshots(r#"{"snapshot": true, "model": "m/x"}"#);
        assert_eq!(serde_json::from_str::<Value>(&theirs).unwrap(), json!({"snapshot": true, "model": "m/x"}));
    }
}
