//! `troupe hook <engine> <event>`: what an engine runs before and after tool
//! calls. Reads the event JSON on stdin and answers in the engine's own contract
//! (exit code, stdout JSON, stderr). Not for people: `troupe init --claude` (and
//! `--gemini`, `--codex`, `--opencode`) install it.
//!
//! It speaks the engine's protocol, not troupe's: no `--json`, no `error:`
//! lines, and every failure is a refusal (fail closed).

use std::cell::RefCell;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::rc::Rc;

use clap::Args;

use crate::cli::GlobalArgs;
use crate::error::CliResult;

pub mod answerer;
mod delivery;
mod file_safety;
mod lease;
mod plan_mode;

use troupe_store::Store;

/// The project's store, opened at most once per hook call: plan mode, file
/// safety, delivery and the audit of a denial may each need it, and opening
/// it (config, SQLite, pragmas, schema check) costs more than what they read.
#[derive(Default)]
pub(super) struct Stores {
    opened: RefCell<Vec<Opened>>,
    ahead: RefCell<Option<Ahead>>,
    /// The answerer's stores, kept between calls ([`answerer`]).
    kept: Option<Rc<Kept>>,
}

/// The stores a hook answerer's worker keeps open between calls, by project
/// and by what the store is ([`file_safety::open_kept`]'s key: the config's
/// `[store]` and the database file's identity), so that a changed config or
/// a replaced database is opened anew.
#[derive(Default)]
pub(super) struct Kept {
    stores: RefCell<Vec<KeptStore>>,
}

/// A project root, the key its store was opened under, and the store.
type KeptStore = (PathBuf, String, Rc<dyn Store>);

impl Kept {
    /// Projects kept at once; an answerer serves one or a few.
    const PROJECTS: usize = 8;

    fn get(&self, root: &Path, key: &str) -> Option<Rc<dyn Store>> {
        self.stores.borrow().iter().find(|(r, k, _)| r == root && k == key).map(|(_, _, s)| s.clone())
    }

    fn put(&self, root: &Path, key: String, store: Rc<dyn Store>) {
        let mut stores = self.stores.borrow_mut();
        stores.retain(|(r, _, _)| r != root);
        if stores.len() >= Self::PROJECTS {
            stores.remove(0);
        }
        stores.push((root.to_path_buf(), key, store));
    }
}

/// A project root and its store (`None`: it has no database).
type Opened = (PathBuf, Option<Rc<dyn Store>>);

/// A store being opened on another thread while the gates decide.
struct Ahead {
    root: PathBuf,
    agent: String,
    opening: std::thread::JoinHandle<Option<Box<dyn Store>>>,
}

impl Stores {
    /// Stores for one call that take and keep their stores in `kept`.
    pub(super) fn keeping(kept: Rc<Kept>) -> Stores {
        Stores { opened: RefCell::default(), ahead: RefCell::default(), kept: Some(kept) }
    }

    /// The store of the project at `root` when it has a database already
    /// (see [`file_safety::open`]); opened on first use (renewing `agent`'s
    /// lease when due), then shared.
    pub(super) fn get(&self, root: &Path, agent: &str) -> Option<Rc<dyn Store>> {
        if let Some((_, store)) = self.opened.borrow().iter().find(|(r, _)| r == root) {
            return store.clone();
        }
        let ahead = self.ahead.borrow_mut().take_if(|a| a.root == root && a.agent == agent);
        let store: Option<Rc<dyn Store>> = match (&self.kept, ahead.map(|a| a.opening.join())) {
            (Some(kept), _) => file_safety::open_kept(root, agent, kept),
            (None, Some(Ok(store))) => store.map(Rc::from),
            // A panic there is one here, which the hook turns into a refusal.
            (None, Some(Err(panic))) => std::panic::resume_unwind(panic),
            (None, None) => file_safety::open(root, agent).map(Rc::from),
        };
        self.opened.borrow_mut().push((root.to_path_buf(), store.clone()));
        store
    }

    /// Start opening the store of the project at `root` for `agent` on
    /// another thread, for a call that will read it whatever the gates
    /// decide (plan mode's [`plan_mode::Candidate`]: allowed, plan mode reads
    /// it; refused, the denial is audited in it). Opening SQLite (the schema
    /// parse) and the gates' role policy (a `stat` per skill) then overlap
    /// on a second core instead of running one after the other. [`Stores::get`]
    /// waits for it; nothing is read before it is asked for, so what the
    /// call reads is as fresh as when opened in turn.
    pub(super) fn open_ahead(&self, root: &Path, agent: &str) {
        // A kept store is at hand already.
        if self.kept.is_some() {
            return;
        }
        let (dir, who) = (root.to_path_buf(), agent.to_string());
        let spawned = std::thread::Builder::new().spawn(move || file_safety::open(&dir, &who));
        // Without a thread, `get` opens it in turn.
        if let Ok(opening) = spawned {
            *self.ahead.borrow_mut() = Some(Ahead { root: root.to_path_buf(), agent: agent.to_string(), opening });
        }
    }
}

impl Drop for Stores {
    /// A store opened ahead and never asked for (the hook panicked) still
    /// finishes its lease renewal and closes before the process exits.
    fn drop(&mut self) {
        if let Some(ahead) = self.ahead.get_mut().take() {
            let _ = ahead.opening.join();
        }
    }
}

/// Set in a debug build, the hook panics (tests of the panic's refusal).
#[cfg(debug_assertions)]
const TEST_PANIC_ENV: &str = "TROUPE_HOOK_TEST_PANIC";

/// Most bytes of hook input read; engines send a few KiB.
const MAX_INPUT: u64 = 16 * 1024 * 1024;

/// Answer one hook call from an engine (reads the event JSON on stdin).
#[derive(Debug, Args)]
pub struct HookArgs {
    /// The engine: claude, gemini, codex or opencode.
    pub engine: String,
    /// The engine's event name (Claude: PreToolUse, Stop, ...; Gemini: BeforeTool, AfterTool, ...).
    pub event: String,
}

/// `troupe hook <engine> <event>` exactly as the installed hooks call it, handled
/// without clap; any other shape (flags, help) goes through the normal parser.
pub fn fast_path() -> Option<ExitCode> {
    let mut args = std::env::args_os().skip(1);
    let (Some(noun), Some(engine), Some(event), None) = (args.next(), args.next(), args.next(), args.next()) else {
        return None;
    };
    if noun != "hook" {
        return None;
    }
    let (Some(engine), Some(event)) = (engine.to_str(), event.to_str()) else { return None };
    if engine.starts_with('-') || event.starts_with('-') {
        return None;
    }
    Some(answer(None, HookArgs { engine: engine.to_string(), event: event.to_string() }))
}

pub fn run(g: &GlobalArgs, args: HookArgs) -> CliResult<ExitCode> {
    Ok(answer(g.project.clone(), args))
}

fn answer(project: Option<std::path::PathBuf>, args: HookArgs) -> ExitCode {
    let mut input = Vec::new();
    let read = std::io::stdin().lock().take(MAX_INPUT + 1).read_to_end(&mut input);
    let cwd = match project {
        Some(p) => p,
        None => std::env::current_dir().unwrap_or_else(|_| "/".into()),
    };
    let rendered = match read {
        Ok(n) if n as u64 > MAX_INPUT => {
            troupe_gate::run::refuse(&args.engine, &args.event, "hook input", "more than 16 MiB on stdin")
        }
        Ok(_) => match answerer::ask(&args.engine, &args.event, &cwd, &input) {
            Some(rendered) => rendered,
            None => {
                let lookup = |k: &str| std::env::var(k).ok();
                match answer_call(&args.engine, &args.event, &input, &lookup, &cwd, &Stores::default()) {
                    (rendered, true) => rendered,
                    (rendered, false) => held(&args, &input, &cwd).unwrap_or(rendered),
                }
            }
        },
        Err(e) => troupe_gate::run::refuse(&args.engine, &args.event, "hook input", &format!("cannot read stdin: {e}")),
    };
    // A reader that went away cannot be answered; the exit code still is.
    let _ = std::io::stdout().lock().write_all(rendered.stdout.as_bytes());
    let _ = std::io::stderr().lock().write_all(rendered.stderr.as_bytes());
    ExitCode::from(rendered.exit_code)
}

/// What troupe answers the hook call `engine` `event` with `input`, whose
/// environment is `lookup` and folder `cwd`, and whether it refused it (a
/// refusal is audited here): the one answer of the hook process and of the
/// [`answerer`] alike.
pub(super) fn answer_call(
    engine: &str,
    event: &str,
    input: &[u8],
    lookup: troupe_gate::run::Lookup<'_>,
    cwd: &Path,
    stores: &Stores,
) -> (troupe_gate::answer::Rendered, bool) {
    // A panic would exit 101, which engines take as a non-blocking error
    // and run the tool anyway: it is a refusal like every other failure.
    let answered = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // Debug builds only: a real panic for the tests to see unwind
        // to this refusal through the binary as it is linked.
        #[cfg(debug_assertions)]
        if std::env::var_os(TEST_PANIC_ENV).is_some() {
            panic!("{TEST_PANIC_ENV} is set");
        }
        let candidate = plan_mode::candidate(engine, event, input, lookup, cwd);
        if let Some(c) = &candidate {
            stores.open_ahead(&c.root, &c.agent);
        }
        let (rendered, denial) = troupe_gate::run::run_hook_audited(engine, event, input, lookup, cwd);
        match denial {
            Some(denial) => (rendered, Some(denial)),
            None => plan_mode::apply(candidate, lookup, stores).unwrap_or_else(|| {
                match file_safety::apply(engine, event, input, lookup, cwd, rendered, stores) {
                    (rendered, None) => (delivery::apply(engine, event, lookup, cwd, rendered, stores), None),
                    refused => refused,
                }
            }),
        }
    }));
    match answered {
        Ok((rendered, Some(denial))) => {
            record(denial, stores);
            (rendered, true)
        }
        Ok((rendered, None)) => (rendered, false),
        Err(_) => (troupe_gate::run::refuse(engine, event, "hook", "troupe's hook panicked"), true),
    }
}

/// In an adhoc session, a tool call the gates allowed may still wait for a
/// person (`adhoc::approval`); the refusal when they say no.
fn held(args: &HookArgs, input: &[u8], cwd: &std::path::Path) -> Option<troupe_gate::answer::Rendered> {
    use troupe_gate::engine::Event;
    std::env::var_os(super::adhoc::approval::APPROVALS_ENV)?;
    let engine: troupe_gate::Engine = args.engine.parse().ok()?;
    let event = Event::parse(engine, &args.event).ok()?;
    if event != Event::PreToolUse {
        return None;
    }
    let hook = troupe_gate::input::parse(engine, event, input).ok()?;
    let lookup = |k: &str| std::env::var(k).ok();
    let root = troupe_gate::run::project_root(&lookup, hook.cwd.as_deref().unwrap_or(cwd))?;
    let agent = lookup("TROUPE_AGENT_ID").unwrap_or_default();
    let role = lookup("TROUPE_ROLE").unwrap_or_default();
    let tool = hook.tool_name.clone()?;
    let reason = super::adhoc::approval::hold(&root, &agent, &role, &tool, &hook.tool_input)?;
    troupe_gate::denials::record(&root, &troupe_gate::denials::Denial::now(&agent, &tool, &reason));
    Some(troupe_gate::answer::render(engine, event, &troupe_gate::decide::Answer::Deny(reason)))
}

/// Put a hook denial in the audit log the gateway writes (the store's audit
/// table), so `troupe audit denials` shows both. Only denials open the store:
/// the hook's common path stays free of SQLite. A failure to record never
/// changes the answer, which was a refusal already.
fn record(denial: troupe_gate::run::Denial, stores: &Stores) {
    let store = match stores.get(&denial.root, &denial.agent) {
        Some(store) => store,
        None => {
            let layout = troupe_core::layout::Layout::new(&denial.root);
            // The one config loader: a missing file is the defaults, a broken one records nothing.
            let Ok(config) = troupe_project::config::load(&layout) else { return };
            let Ok(store) = troupe_store::open_brief(&layout, &config.store) else { return };
            Rc::from(store)
        }
    };
    let _ = store.append_audit(troupe_store::audit::NewAuditRecord {
        agent: denial.agent,
        role: denial.role,
        tool: denial.tool,
        decision: troupe_store::Decision::Denied,
        reason: Some(denial.reason),
        duration_ms: None,
        argument_shape: troupe_gateway::audit::shape(&denial.tool_input),
        thinking_signature: None,
    });
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use troupe_core::layout::Layout;
    use troupe_store::{NewAgent, Registry, SqliteStore};

    use super::*;

    #[test]
    fn a_store_opened_ahead_is_the_one_asked_for_and_renews_the_lease_even_if_never_asked_for() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let store = SqliteStore::open_project(&Layout::new(root)).unwrap();
        for agent in ["builder-1", "builder-2"] {
            let lease = Some(Duration::from_secs(1));
            store.register(NewAgent { lease, ..NewAgent::new(agent, "builder", "claude") }).unwrap();
        }
        let until = |agent: &str| store.agent(agent).unwrap().lease_until.unwrap();
        let registered = until("builder-1");

        let stores = Stores::default();
        stores.open_ahead(root, "builder-1");
        let first = stores.get(root, "builder-1").expect("the project has a database");
        assert!(stores.ahead.borrow().is_none(), "taken by the first ask");
        assert!(Rc::ptr_eq(&first, &stores.get(root, "builder-1").unwrap()), "one store per call");
        // The configured lease (30 s) replaced the registration's 1 s.
        assert!(until("builder-1").duration_since(registered).as_secs() >= 20);

        // Opened ahead for a call that then never asked (a panic): renewed before the hook exits.
        let stores = Stores::default();
        stores.open_ahead(root, "builder-2");
        drop(stores);
        assert!(until("builder-2").duration_since(registered).as_secs() >= 20);

        // Another project than the one opened ahead is opened in turn; none has no database.
        let other = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(other.path().join(".troupe")).unwrap();
        let stores = Stores::default();
        stores.open_ahead(other.path(), "builder-1");
        assert!(stores.get(root, "builder-1").is_some());
        assert!(stores.get(other.path(), "builder-1").is_none());
        assert!(!Layout::new(other.path()).database_file().exists(), "a hook never creates a database");
    }
}
