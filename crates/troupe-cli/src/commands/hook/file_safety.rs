//! File safety in the hooks (seed 003 category A): after troupe's gates let a
//! write through, a file locked by another agent is still refused, with who
//! holds it and since when; a write to a file another agent changed recently
//! goes ahead with that as context; and every write the hook sees is recorded
//! for `troupe locks --history`. The locks and history live in the store
//! ([`troupe_store::FileLocks`]), so this runs only where a project database
//! exists, and opens it only for calls that write files.
//!
//! Kept apart from `troupe_gate`'s pure gates, which never touch the store.

use std::path::{Path, PathBuf};

use troupe_core::layout::Layout;
use troupe_gate::answer::{Rendered, render};
use troupe_gate::decide::Answer;
use troupe_gate::run::{Denial, Lookup, project_root};
use troupe_gate::shell::{self, pattern};
use troupe_gate::teammate::env;
use troupe_gate::tools::{ToolCall, classify};
use troupe_gate::{Engine, Event, input};
use troupe_store::{ChangeSource, NewFileChange, Store};

/// Who writes in a session troupe did not start (no `TROUPE_AGENT_ID`):
/// the same holder `troupe lock` and the board give a person.
const PERSON: &str = "user";

/// How long after another agent's write an edit of the same file is told so.
const RECENT_SECONDS: i64 = 10 * 60;

/// The files one hook call writes, as the store's keys, and who writes them.
struct Writes {
    root: PathBuf,
    agent: String,
    role: Option<String>,
    task: Option<String>,
    tool: String,
    tool_input: serde_json::Value,
    keys: Vec<String>,
    failed: bool,
}

/// The hook's answer with file safety applied: a PreToolUse the gates passed
/// may become a deny (a lock) or context (a recent change); a PostToolUse
/// records the write. Returns the answer to give and a denial to audit.
pub(super) fn apply(
    engine: &str,
    event: &str,
    stdin: &[u8],
    lookup: Lookup<'_>,
    cwd: &Path,
    rendered: Rendered,
    stores: &super::Stores,
) -> (Rendered, Option<Denial>) {
    if lookup(env::HOOKS).is_some_and(|v| v.eq_ignore_ascii_case("off")) {
        return (rendered, None);
    }
    let (Ok(engine), Some(event)) =
        (engine.parse::<Engine>(), engine.parse::<Engine>().ok().and_then(|e| Event::parse(e, event).ok()))
    else {
        return (rendered, None);
    };
    let passed = rendered == render(engine, event, &Answer::Pass);
    let wanted = match event {
        Event::PreToolUse => passed,
        Event::PostToolUse => true,
        _ => false,
    };
    if !wanted {
        return (rendered, None);
    }
    let Some(writes) = writes(engine, event, stdin, lookup, cwd) else { return (rendered, None) };
    let Some(store) = stores.get(&writes.root, &writes.agent) else { return (rendered, None) };
    match event {
        Event::PreToolUse => match check(store.as_ref(), &writes) {
            Answer::Pass => (rendered, None),
            answer => {
                let denial = match &answer {
                    Answer::Deny(reason) => Some(deny_record(&writes, reason)),
                    _ => None,
                };
                (render(engine, event, &answer), denial)
            }
        },
        _ => {
            if !writes.failed {
                for key in &writes.keys {
                    // A history that misses one write refuses nothing.
                    let _ = store.record_change(NewFileChange {
                        path: key.clone(),
                        agent: writes.agent.clone(),
                        task: writes.task.clone(),
                        source: ChangeSource::Hook,
                    });
                }
            }
            (rendered, None)
        }
    }
}

/// Deny a write to a file another agent holds; else tell of recent changes by others.
fn check(store: &dyn Store, w: &Writes) -> Answer {
    // The Lead is troupe itself: a teammate's lock never stops it.
    if w.role.as_deref() == Some("lead") {
        return Answer::Pass;
    }
    let now = jiff::Timestamp::now();
    let mut notes = Vec::new();
    for key in &w.keys {
        match store.file_lock(key) {
            Ok(Some(lock)) if lock.agent != w.agent => {
                return Answer::Deny(format!(
                    "troupe file lock: {key} is locked by {} since {} ({} ago){}; another agent is editing it. \
                     Work on something else and retry later, or ask {} (send_message) to unlock it.",
                    lock.agent,
                    lock.since.strftime("%Y-%m-%d %H:%M:%S UTC"),
                    span(now.as_second() - lock.since.as_second()),
                    lock.task.as_deref().map(|t| format!(" for task {t}")).unwrap_or_default(),
                    lock.agent,
                ));
            }
            Ok(_) => {}
            Err(e) => return Answer::error("file lock", e),
        }
        if let Ok(history) = store.file_history(key, 20)
            && let Some(c) =
                history.iter().find(|c| c.agent != w.agent && now.as_second() - c.at.as_second() < RECENT_SECONDS)
        {
            notes.push(format!(
                "{key} was changed by {} {} ago{}",
                c.agent,
                span(now.as_second() - c.at.as_second()),
                c.task.as_deref().map(|t| format!(" for task {t}")).unwrap_or_default()
            ));
        }
    }
    if notes.is_empty() {
        Answer::Pass
    } else {
        Answer::Context(format!("troupe file history: {}. Read it again before you edit it.", notes.join("; ")))
    }
}

/// `3 min`, `45 s`, `2 h`.
fn span(seconds: i64) -> String {
    match seconds.max(0) {
        s if s < 60 => format!("{s} s"),
        s if s < 3600 => format!("{} min", s / 60),
        s => format!("{} h", s / 3600),
    }
}

fn writes(engine: Engine, event: Event, stdin: &[u8], lookup: Lookup<'_>, cwd: &Path) -> Option<Writes> {
    let hook = input::parse(engine, event, stdin).ok()?;
    let tool = hook.tool_name.clone()?;
    let call = classify(engine, &tool, &hook.tool_input).ok()?;
    let raw = match &call {
        ToolCall::Write { paths, .. } => paths.clone(),
        ToolCall::Shell { .. } => shell::read(&call.shell_from_cwd()?).writes,
        _ => return None,
    };
    let base = hook.cwd.clone().unwrap_or_else(|| cwd.to_path_buf());
    let root = project_root(lookup, &base)?;
    let real_root = root.canonicalize().unwrap_or_else(|_| root.clone());
    let mut keys = Vec::new();
    for raw in raw {
        let joined = if raw.starts_with('/') { raw } else { format!("{}/{raw}", base.display()) };
        let normal = pattern::normalize(&joined);
        if pattern::is_pattern(&normal) {
            continue;
        }
        let path = Path::new(&normal);
        if let Some(key) =
            troupe_store::lock::normalize(&real_root, path).or_else(|| troupe_store::lock::normalize(&root, path))
            && !keys.contains(&key)
        {
            keys.push(key);
        }
    }
    if keys.is_empty() {
        return None;
    }
    let get = |k: &str| lookup(k).filter(|v| !v.trim().is_empty());
    Some(Writes {
        // A person's own session acts as `user`, the holder `troupe lock` gives a person's locks.
        agent: get(env::AGENT_ID).unwrap_or_else(|| PERSON.to_string()),
        role: get(env::ROLE),
        task: get(env::TASK_ID),
        tool,
        tool_input: hook.tool_input.clone(),
        failed: hook.tool_failed,
        keys,
        root,
    })
}

/// The project's store when it has a database already (a project without
/// one has no locks and no one to tell of a write). A hook that opens the
/// store is `agent`'s heartbeat too: its lease is renewed (see
/// troupe-store's `lease`) when due ([`super::lease`]), wherever the agent
/// runs; a person has none.
pub(super) fn open(root: &Path, agent: &str) -> Option<Box<dyn Store>> {
    let layout = Layout::new(root);
    let config = troupe_project::config::load(&layout).ok()?;
    if config.store.url.is_none() && !layout.database_file().exists() {
        return None;
    }
    // Brief: a hook runs on every tool call; closing leaves the WAL as it is.
    let store = troupe_store::open_brief(&layout, &config.store).ok()?;
    renew(&layout, &config, store.as_ref(), agent);
    Some(store)
}

/// [`open`] for the hook answerer: the store kept in `kept` when it is still
/// the one the config and the database file name (a changed `[store]`, a
/// database removed or replaced: opened anew), else opened and kept. A kept
/// SQLite connection reads every commit as a new one would.
pub(super) fn open_kept(root: &Path, agent: &str, kept: &super::Kept) -> Option<std::rc::Rc<dyn Store>> {
    use std::os::unix::fs::MetadataExt;
    let layout = Layout::new(root);
    let config = troupe_project::config::load(&layout).ok()?;
    let key = match &config.store.url {
        Some(_) => format!("{:?}", config.store),
        None => {
            let file = std::fs::metadata(layout.database_file()).ok()?;
            format!("{:?} {}:{}", config.store, file.dev(), file.ino())
        }
    };
    let store = match kept.get(root, &key) {
        Some(store) => store,
        None => {
            let store: std::rc::Rc<dyn Store> = troupe_store::open_brief(&layout, &config.store).ok()?.into();
            kept.put(root, key, store.clone());
            store
        }
    };
    renew(&layout, &config, store.as_ref(), agent);
    Some(store)
}

/// A hook that opens the store is `agent`'s heartbeat: its lease is renewed when due.
fn renew(layout: &Layout, config: &troupe_core::config::Config, store: &dyn Store, agent: &str) {
    if agent != PERSON && super::lease::due(layout, agent, config.store.lease(), std::time::SystemTime::now()) {
        // Best effort: an agent the registry does not know has no lease.
        let _ = store.renew_lease(agent, config.store.lease());
    }
}

fn deny_record(w: &Writes, reason: &str) -> Denial {
    if w.agent != PERSON {
        troupe_gate::denials::record(&w.root, &troupe_gate::denials::Denial::now(&w.agent, &w.tool, reason));
    }
    Denial {
        root: w.root.clone(),
        agent: w.agent.clone(),
        role: w.role.clone().unwrap_or_else(|| "user".to_string()),
        tool: w.tool.clone(),
        reason: reason.to_string(),
        tool_input: w.tool_input.clone(),
    }
}
