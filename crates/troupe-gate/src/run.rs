//! The IO around [`decide`](crate::decide::decide): read the environment, the
//! project's config and steering, the session's markers; run quality gate
//! commands when asked; apply the marker effects; render. Every failure on the
//! way is an [`Answer::Error`] naming the check, so the hook fails closed.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use troupe_core::config::{CommonCommands, Config, QualityGate, parse_common_commands};
use troupe_core::layout::{Layout, TROUPE_DIR};
use troupe_core::role::Role;

use crate::answer::{Rendered, render};
use crate::decide::{self, Answer, Context, Effect, Outcome};
use crate::engine::{Engine, Event};
use crate::input;
use crate::markers::{MarkerStore, SessionState, default_dir};
use crate::quality::{GateEnv, GateResult, run_steps};
use crate::teammate::{Teammate, env, group_files};

/// A way to read environment variables (tests pass a map).
pub type Lookup<'a> = &'a dyn Fn(&str) -> Option<String>;

/// Answer one hook call: `troupe hook <engine> <event>` with `stdin`.
pub fn run_hook(engine: &str, event: &str, stdin: &[u8], lookup: Lookup<'_>, process_cwd: &Path) -> Rendered {
    run_hook_audited(engine, event, stdin, lookup, process_cwd).0
}

/// A tool call the hook refused, for the audit log the gateway writes too.
#[derive(Debug, Clone, PartialEq)]
pub struct Denial {
    /// The project whose store holds the audit log.
    pub root: PathBuf,
    /// The teammate's id (`TROUPE_AGENT_ID`), else `session:<the engine's session id>`.
    pub agent: String,
    /// The teammate's role, else `user` (a person's own session).
    pub role: String,
    /// The tool as the engine named it.
    pub tool: String,
    /// The refusal the agent was given.
    pub reason: String,
    /// The tool's arguments (the caller records their shape).
    pub tool_input: serde_json::Value,
}

/// [`run_hook`], and the [`Denial`] to record when it refused a tool call in a project.
pub fn run_hook_audited(
    engine: &str,
    event: &str,
    stdin: &[u8],
    lookup: Lookup<'_>,
    process_cwd: &Path,
) -> (Rendered, Option<Denial>) {
    let engine: Engine = match engine.parse() {
        Ok(e) => e,
        // Without an engine there is no contract to speak; exit 2 refuses in all of them.
        Err(e) => return (render(Engine::Claude, Event::PreToolUse, &Answer::error("engine name", e)), None),
    };
    let event = match Event::parse(engine, event) {
        Ok(e) => e,
        Err(e) => return (render(engine, Event::PreToolUse, &Answer::error("event name", e)), None),
    };
    if lookup(env::HOOKS).is_some_and(|v| v.eq_ignore_ascii_case("off")) {
        return (render(engine, event, &Answer::Pass), None);
    }
    // A Stop that a Stop hook already sent back always ends (seed 001 施策2),
    // before anything that could fail: a broken marker directory or config
    // would otherwise refuse every stop and loop the session.
    if matches!(event, Event::Stop | Event::SubagentStop) && stop_hook_active(stdin) {
        return (render(engine, event, &Answer::Pass), None);
    }
    let answer = match handle(engine, event, stdin, lookup, process_cwd) {
        Ok(outcome) => outcome.answer,
        Err(answer) => answer,
    };
    let denial = if answer.is_refusal() { record(engine, event, stdin, lookup, process_cwd, &answer) } else { None };
    (render(engine, event, &answer), denial)
}

/// Where a refusal is recorded, reading the hook's input once: every refusal
/// of a teammate (troupe set its `TROUPE_AGENT_ID`) goes to its project's
/// denial log, which the Lead's and `agent run`'s displays follow; a refused
/// tool call (PreToolUse's deny or fail-closed error, the post-run check's
/// report after it) comes back as the [`Denial`] for the audit log. Only
/// refusals pay for this; an allowed call writes nothing.
fn record(
    engine: Engine,
    event: Event,
    stdin: &[u8],
    lookup: Lookup<'_>,
    process_cwd: &Path,
    answer: &Answer,
) -> Option<Denial> {
    let hook = input::parse(engine, event, stdin).ok();
    let cwd = hook.as_ref().and_then(|h| h.cwd.clone()).unwrap_or_else(|| process_cwd.to_path_buf());
    let root = project_root(lookup, &cwd)?;
    let tool = hook.as_ref().and_then(|h| h.tool_name.clone());
    let agent = lookup(env::AGENT_ID).filter(|a| !a.is_empty());
    if let Some(agent) = &agent {
        let what = match (event, &tool) {
            (Event::PreToolUse | Event::PostToolUse, Some(tool)) => tool.clone(),
            _ => event.as_str().to_string(),
        };
        let reason = match answer {
            Answer::Deny(r) | Answer::Block(r) => Some(r.clone()),
            Answer::Error { check, detail } => Some(format!("the {check} check failed: {detail}")),
            _ => None,
        };
        if let Some(reason) = reason {
            crate::denials::record(&root, &crate::denials::Denial::now(agent, &what, &reason));
        }
    }
    let reason = match (event, answer) {
        (Event::PreToolUse, Answer::Deny(reason)) => reason.clone(),
        (Event::PreToolUse, Answer::Error { check, detail }) => format!("troupe could not check {check}: {detail}"),
        // The post-run check found (and maybe reverted) writes outside the teammate's ownership.
        (Event::PostToolUse, Answer::Block(reason)) => reason.clone(),
        _ => return None,
    };
    let session = hook.as_ref().and_then(|h| h.session_id.clone()).unwrap_or_default();
    Some(Denial {
        root,
        agent: agent.unwrap_or_else(|| format!("session:{session}")),
        role: lookup(env::ROLE).filter(|r| !r.is_empty()).unwrap_or_else(|| "user".to_string()),
        tool: tool.unwrap_or_else(|| "?".to_string()),
        reason,
        tool_input: hook.map(|h| h.tool_input).unwrap_or_default(),
    })
}

/// Whether `stdin` is a JSON object whose `stop_hook_active` is `true`.
fn stop_hook_active(stdin: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(stdin)
        .is_ok_and(|v| v.get("stop_hook_active") == Some(&serde_json::Value::Bool(true)))
}

fn handle(
    engine: Engine,
    event: Event,
    stdin: &[u8],
    lookup: Lookup<'_>,
    process_cwd: &Path,
) -> Result<Outcome, Answer> {
    let hook = input::parse(engine, event, stdin).map_err(|e| Answer::error("hook input", e))?;
    let mut teammate = Teammate::from_env(lookup).map_err(|e| Answer::error("teammate identity", e))?;
    let cwd = hook.cwd.clone().unwrap_or_else(|| process_cwd.to_path_buf());
    let root = project_root(lookup, &cwd);
    let config = match &root {
        Some(root) => load_config(root)?,
        None => Config::default(),
    };
    if let (Some(t), Some(root)) = (&mut teammate, &root) {
        fill_owned_files(t, root)?;
    }
    // Ownership is decided on real paths: the root and every written path with symlinks resolved.
    let root = root.map(|r| r.canonicalize().unwrap_or(r));
    let mut ctx = Context::new(engine);
    ctx.resolve = Some(resolve_symlinks);
    ctx.gates = config.gates.clone();
    ctx.root = root;
    ctx.teammate = teammate;
    ctx.sandboxed = lookup(env::SANDBOX).is_some_and(|v| !v.is_empty());
    ctx.delegate = crate::modes::delegate_on(lookup(crate::modes::DELEGATE_ENV).as_deref());
    // Only PreToolUse asks the role policy: the other events (after every
    // tool call, at every stop) skip building it from the project's skills.
    if event == Event::PreToolUse
        && ctx.teammate.is_some()
        && let Some(root) = &ctx.root
    {
        ctx.builtin_policy = builtin_policy(root, &config.gateway.roles)?;
    }
    // A Builder in its own worktree: ownership, the post-run check and the
    // quality gates look at its files there, not at the project's tree.
    if let Some(wt) = lookup(env::WORKTREE).filter(|w| !w.is_empty() && ctx.teammate.is_some()) {
        let wt = PathBuf::from(wt);
        ctx.root = Some(wt.canonicalize().unwrap_or(wt));
    }

    let key =
        lookup(env::AGENT_ID).filter(|v| !v.is_empty()).or_else(|| hook.session_id.clone()).filter(|k| !k.is_empty());
    let needs_markers =
        matches!(event, Event::PreToolUse | Event::PostToolUse | Event::Stop | Event::SubagentStop | Event::SessionEnd);
    let store = if needs_markers || event == Event::SessionStart {
        let dir = default_dir(lookup).map_err(|e| Answer::error("marker directory", e))?;
        Some(MarkerStore::open(dir).map_err(|e| Answer::error("marker directory", e))?)
    } else {
        None
    };
    let state = match (&store, &key) {
        _ if !needs_markers => SessionState::default(),
        (_, None) => {
            return Err(Answer::error(
                "session id",
                "the hook input has no session_id and TROUPE_AGENT_ID is unset, so the session's markers cannot be found",
            ));
        }
        (Some(store), Some(key)) => store.load(key).map_err(|e| Answer::error("session markers", e))?,
        (None, Some(_)) => SessionState::default(),
    };

    let gate_dir = ctx.root.clone().unwrap_or_else(|| cwd.clone());
    let mut steering: Option<CommonCommands> = None;
    if event == Event::PreToolUse && ctx.root.is_some() {
        ctx.runtime = crate::conventions::project_runtime(steering.get_or_insert_with(|| read_steering(&gate_dir)));
    }
    let gates = ctx.gates.clone();
    let mut quality = |gate: QualityGate| -> Option<GateResult> {
        let steering = steering.get_or_insert_with(|| read_steering(&gate_dir));
        let steps = gates.steps(gate, Some(engine.as_str()), steering);
        if steps.is_empty() {
            return None;
        }
        let (from, to) = match gate {
            QualityGate::OnIdle => ("processing", "ready"),
            QualityGate::OnTaskCompleted => ("in_progress", "completed"),
        };
        let env = GateEnv {
            agent_id: lookup(env::AGENT_ID).or_else(|| hook.teammate_name.clone()),
            agent_name: lookup(env::AGENT_NAME).or_else(|| hook.teammate_name.clone()),
            last_task_id: hook.task_id.clone().or_else(|| lookup(env::TASK_ID)),
            status_from: Some(from.into()),
            status_to: Some(to.into()),
        };
        Some(run_steps(&steps, &gate_dir, &env, Duration::from_secs(gates.timeout_seconds)))
    };
    let outcome = decide::decide(&ctx, &hook, &state, &mut quality);
    if matches!(outcome.answer, Answer::Error { .. }) {
        return Ok(outcome);
    }
    let outcome = post_run_check(&ctx, &hook, store.as_ref(), key.as_deref(), outcome);
    if let (Some(store), Some(key)) = (&store, &key) {
        let max_age = Duration::from_secs(ctx.gates.marker_max_age_hours * 3600);
        for effect in &outcome.effects {
            let result = match effect {
                Effect::MarkSkill(skill) => store.mark_skill(key, skill),
                Effect::MarkCodeSession => store.mark_code_session(key),
                Effect::ClearSession => store.clear(key),
                // Old markers are litter, not a gate: failing to sweep them refuses nothing.
                Effect::Sweep => store.sweep(max_age, SystemTime::now()).map(|_| ()).or(Ok(())),
            };
            result.map_err(|e| Answer::error("marker write", e))?;
        }
    }
    Ok(outcome)
}

/// `TROUPE_PROJECT`, else the first folder from `cwd` up that holds `.troupe/`.
pub fn project_root(lookup: Lookup<'_>, cwd: &Path) -> Option<PathBuf> {
    if let Some(p) = lookup(env::PROJECT).filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    cwd.ancestors().find(|d| d.join(TROUPE_DIR).is_dir()).map(Path::to_path_buf)
}

fn load_config(root: &Path) -> Result<Config, Answer> {
    troupe_project::config::load(&Layout::new(root)).map_err(|e| Answer::error("config", e.to_string()))
}

/// A Builder without `TROUPE_OWNED_FILES` owns its group's files in tasks.yaml.
fn fill_owned_files(t: &mut Teammate, root: &Path) -> Result<(), Answer> {
    if t.role != Role::Builder || !t.owned_files.is_empty() || t.skill_role.is_some() {
        return Ok(());
    }
    let (Some(feature), Some(group)) = (&t.feature, &t.group) else { return Ok(()) };
    let path = Layout::new(root).tasks_file(feature);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| Answer::error("builder ownership", format!("cannot read {}: {e}", path.display())))?;
    t.owned_files = group_files(&text, group).ok_or_else(|| {
        Answer::error("builder ownership", format!("group '{group}' has no files in {}", path.display()))
    })?;
    Ok(())
}

/// steering's Common Commands, or none when tech.md is missing.
pub fn read_steering(root: &Path) -> CommonCommands {
    std::fs::read_to_string(Layout::new(root).steering_dir().join("tech.md"))
        .map(|t| parse_common_commands(&t))
        .unwrap_or_default()
}

/// The role policy of the project's skills (`.troupe/skills/*/SKILL.md`), the
/// same the gateway enforces, for the engines' built-in tools: every role's
/// compiled check, from the skills cache when they did not change. No
/// skills: no role policy (ownership still applies).
fn builtin_policy(
    root: &Path,
    roles: &std::collections::BTreeMap<String, troupe_core::rbac::policy::RoleSettings>,
) -> Result<Option<decide::BuiltinToolPolicy>, Answer> {
    use troupe_core::rbac::{check_builtin_tool_with, policy::Decision};
    let checks = match crate::skill_cache::role_checks(root, roles, SystemTime::now()) {
        Ok(Some(checks)) => checks,
        Ok(None) => return Ok(None),
        Err(e) => return Err(Answer::error("role policy", e)),
    };
    Ok(Some(decide::BuiltinToolPolicy(Box::new(move |t: &Teammate, tool: &str| {
        let role = t.policy_role();
        match check_builtin_tool_with(checks.get(role), role, tool) {
            Decision::Allow => Ok(()),
            Decision::Deny(reason) => Err(format!("{} may not use {tool}: {reason}", t.title())),
        }
    }))))
}

/// The refusal for a hook call that failed before its input could be read.
pub fn refuse(engine: &str, event: &str, check: &str, detail: &str) -> Rendered {
    let answer = Answer::error(check, detail);
    match engine.parse::<Engine>() {
        Ok(engine) => render(engine, Event::parse(engine, event).unwrap_or(Event::PreToolUse), &answer),
        Err(_) => render(Engine::Claude, Event::PreToolUse, &answer),
    }
}

/// Run quality gate `gate` for the project at `root`, with the command from
/// `[gates]` (per `engine`, when given) or steering. `Ok(None)`: no command is
/// configured. `Err`: the config cannot be used (the caller refuses).
pub fn run_quality_gate(
    root: &Path,
    gate: QualityGate,
    engine: Option<&str>,
    env: &GateEnv,
) -> Result<Option<GateResult>, String> {
    let config = load_config(root).map_err(|a| match a {
        Answer::Error { detail, .. } => detail,
        other => format!("{other:?}"),
    })?;
    let steps = config.gates.steps(gate, engine, &read_steering(root));
    if steps.is_empty() {
        return Ok(None);
    }
    Ok(Some(run_steps(&steps, root, env, Duration::from_secs(config.gates.timeout_seconds))))
}

/// Why the `on_task_completed` gate refused a completion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompletionRefused {
    /// The config cannot be used, so the gate cannot decide: the task stays in progress.
    Config(String),
    /// A gate command failed: the task stays in progress; the agent fixes what failed.
    Failed(crate::quality::GateRun),
}

/// The `on_task_completed` quality gate in front of completing `task` as
/// `agent`: the one place every completion of the board asks it (`troupe
/// board complete`, the gateway's `board_complete`, the HTTP API). `Ok(None)`
/// completes; `Ok(Some(warning))` completes with a warning for the user (a
/// `[gates]` command's other ends, a command that cannot run at all).
pub fn gate_task_completion(
    root: &Path,
    task: &str,
    agent: &str,
    agent_name: Option<String>,
    engine: Option<&str>,
) -> Result<Option<String>, CompletionRefused> {
    let env = GateEnv {
        agent_id: Some(agent.to_string()),
        agent_name,
        last_task_id: Some(task.to_string()),
        status_from: Some("in_progress".into()),
        status_to: Some("completed".into()),
    };
    match run_quality_gate(root, QualityGate::OnTaskCompleted, engine, &env).map_err(CompletionRefused::Config)? {
        None | Some(GateResult::Passed) => Ok(None),
        Some(GateResult::Failed(run)) => Err(CompletionRefused::Failed(run)),
        Some(other) => Ok(other.message(QualityGate::OnTaskCompleted)),
    }
}

/// Around a teammate's shell command: snapshot `git status` before it runs, and
/// after it ran report (and, when configured, revert) what changed outside the
/// teammate's ownership. Best effort by design: outside a git repository there
/// is nothing to compare, and the command-level checks in `decide` still hold.
fn post_run_check(
    ctx: &Context,
    hook: &input::HookInput,
    store: Option<&MarkerStore>,
    key: Option<&str>,
    outcome: Outcome,
) -> Outcome {
    use crate::postrun;
    use crate::tools::{ToolCall, classify};
    let (Some(teammate), Some(root), Some(store), Some(key), Some(tool)) =
        (&ctx.teammate, &ctx.root, store, key, hook.tool_name.as_deref())
    else {
        return outcome;
    };
    if !matches!(classify(ctx.engine, tool, &hook.tool_input), Ok(ToolCall::Shell { .. })) {
        return outcome;
    }
    let note = format!("snapshot-{}", hook.tool_use_id.as_deref().unwrap_or("shell"));
    match hook.event {
        Event::PreToolUse if outcome.answer == Answer::Pass => {
            if let Ok(snapshot) = postrun::snapshot(root) {
                let bytes = serde_json::to_vec(&snapshot).unwrap_or_default();
                if let Err(e) = store.save_note(key, &note, &bytes) {
                    return Outcome { answer: Answer::error("post-run snapshot", e), effects: Vec::new() };
                }
            }
            outcome
        }
        Event::PostToolUse => {
            // A sandboxed teammate's refused writes never land, so no
            // snapshot shows them: its command's output does.
            let refused = if ctx.sandboxed { postrun::sandbox_refusals(&hook.tool_response) } else { Vec::new() };
            let before: Option<postrun::Snapshot> =
                store.take_note(key, &note).and_then(|b| serde_json::from_slice(&b).ok());
            let mut found = match (before, postrun::snapshot(root)) {
                (Some(before), Ok(after)) => {
                    postrun::violations(root, &teammate.writer(), &postrun::changed_between(root, &before, &after))
                }
                _ => Vec::new(),
            };
            // What the kernel would not let this teammate write, someone else
            // wrote meanwhile: neither reported nor reverted.
            found.retain(|v| !postrun::refused_to_this_process(root, v.path()));
            let mut report = Vec::new();
            if !found.is_empty() {
                let revert = ctx.gates.revert_violations;
                let failed = if revert { postrun::revert(root, &found) } else { Vec::new() };
                report.push(postrun::message(&found, revert, &failed));
            }
            if !refused.is_empty() {
                report.push(postrun::refusal_message(&refused));
            }
            if report.is_empty() {
                return outcome;
            }
            Outcome { answer: Answer::Block(report.join("\n\n")), effects: outcome.effects }
        }
        _ => outcome,
    }
}

/// `path` with every symlink resolved, component by component, like
/// `realpath -m`: a link that exists is followed even when what it points at
/// does not (a dangling link inside an owned folder must not hide where a
/// write lands), `..` applies to the resolved folder, and the missing rest
/// stays as written. One `readlink` per component (plus at most 40 link
/// hops), so the cost grows linearly with the path.
pub fn resolve_symlinks(path: &Path) -> PathBuf {
    use std::collections::VecDeque;
    use std::path::Component;
    const MAX_HOPS: usize = 40;
    let mut todo: VecDeque<std::ffi::OsString> = VecDeque::new();
    let mut out = PathBuf::from("/");
    for c in path.components() {
        match c {
            Component::Normal(n) => todo.push_back(n.to_os_string()),
            Component::ParentDir => todo.push_back("..".into()),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
    if !path.is_absolute() {
        return path.to_path_buf();
    }
    let mut hops = 0;
    let mut exists = true;
    while let Some(name) = todo.pop_front() {
        if name == ".." {
            out.pop();
            continue;
        }
        out.push(&name);
        if !exists || hops >= MAX_HOPS {
            continue;
        }
        match std::fs::read_link(&out) {
            Ok(link) => {
                hops += 1;
                out.pop();
                if link.is_absolute() {
                    out = PathBuf::from("/");
                }
                for c in link.components().rev() {
                    match c {
                        Component::Normal(n) => todo.push_front(n.to_os_string()),
                        Component::ParentDir => todo.push_front("..".into()),
                        _ => {}
                    }
                }
            }
            // Nothing below a missing folder can be a link.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => exists = false,
            Err(_) => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only PreToolUse builds the role policy from the project's skills: a
    /// SKILL.md that does not parse refuses a tool call, but no longer the
    /// hook after it, whose time went to parsing every skill for nothing.
    #[test]
    fn only_pre_tool_use_reads_the_skills_for_the_role_policy() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join(".troupe/skills/broken")).unwrap();
        std::fs::write(root.join(".troupe/skills/broken/SKILL.md"), "---\nname: [unclosed\n---\n").unwrap();
        let vars = [
            ("TROUPE_ROLE", "architect".to_string()),
            ("TROUPE_AGENT_ID", "architect-1".to_string()),
            ("TROUPE_PROJECT", root.display().to_string()),
            ("TROUPE_STATE_DIR", root.join("state").display().to_string()),
        ];
        let lookup = |k: &str| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone());
        let input = serde_json::json!({"session_id": "s", "cwd": root, "tool_name": "Read",
            "tool_input": {"file_path": root.join("a.md")}, "tool_response": {}});
        let stdin = input.to_string();
        let call = |event| handle(Engine::Claude, event, stdin.as_bytes(), &lookup, &root);
        let refused = call(Event::PreToolUse).map(|o| o.answer).unwrap_or_else(|a| a);
        assert!(matches!(&refused, Answer::Error { check, .. } if check == "role policy"), "{refused:?}");
        let after = call(Event::PostToolUse).map(|o| o.answer).unwrap_or_else(|a| a);
        assert!(!matches!(after, Answer::Error { .. }), "{after:?}");
    }

    #[test]
    fn symlinks_are_resolved_component_by_component() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("real/sub")).unwrap();
        std::os::unix::fs::symlink("real/sub", root.join("link")).unwrap();
        std::os::unix::fs::symlink("../.claude/settings.json", root.join("real/dangling")).unwrap();
        std::os::unix::fs::symlink("loop", root.join("loop")).unwrap();
        // `..` applies to where the link points, as the kernel does it.
        assert_eq!(resolve_symlinks(&root.join("link/../x")), root.join("real/x"));
        // A dangling link is followed to where the write would land.
        assert_eq!(resolve_symlinks(&root.join("real/dangling")), root.join(".claude/settings.json"));
        // Missing parts stay as written; a loop ends.
        assert_eq!(resolve_symlinks(&root.join("nope/../a/b")), root.join("a/b"));
        assert!(resolve_symlinks(&root.join("loop/x")).starts_with(&root));
    }
}
