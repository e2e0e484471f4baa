//! The gates as one pure function: event, input, session state and context in;
//! the answer and the marker effects out. Quality gate commands are the only
//! thing it needs from outside, and it asks for them through a closure, so the
//! tests hand it canned results.

use std::path::{Path, PathBuf};

use troupe_core::config::{FileKind, GatesConfig, QualityGate};
use troupe_core::ownership::{self, Decision};
use troupe_core::role::Role;

use crate::conventions;
use crate::engine::{Engine, Event};
use crate::input::HookInput;
use crate::markers::SessionState;
use crate::quality::GateResult;
use crate::shell::{self, pattern, pattern::WILD};
use crate::teammate::Teammate;
use crate::tools::{self, ToolCall};

/// A policy on built-in tools per role (the gateway's RBAC); `Err` holds the rule that refuses.
pub struct BuiltinToolPolicy(pub Box<PolicyFn>);

/// The check behind a [`BuiltinToolPolicy`].
pub type PolicyFn = dyn Fn(&Teammate, &str) -> Result<(), String>;

impl std::fmt::Debug for BuiltinToolPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BuiltinToolPolicy(..)")
    }
}

/// What the gates know besides the event.
#[derive(Debug)]
pub struct Context {
    /// The engine that called.
    pub engine: Engine,
    /// `[gates]`.
    pub gates: GatesConfig,
    /// The project root, when known.
    pub root: Option<PathBuf>,
    /// The teammate the hook runs for, if troupe spawned it.
    pub teammate: Option<Teammate>,
    /// The role policy for built-in tools, when one is available.
    pub builtin_policy: Option<BuiltinToolPolicy>,
    /// Resolves symlinks in a path (the IO layer's `canonicalize`), so a link
    /// inside a Builder's group cannot point a write at someone else's file.
    pub resolve: Option<fn(&Path) -> PathBuf>,
    /// The project runtime of steering's tech.md (`uv run`), which inline
    /// scripts must be prefixed with (seed 000 Spec 13.3); see [`conventions`].
    pub runtime: Option<String>,
    /// Whether the teammate runs in troupe's sandbox (`TROUPE_SANDBOX`), so
    /// that "Permission denied" in its commands' output is the kernel refusing.
    pub sandboxed: bool,
    /// Delegate mode (`TROUPE_DELEGATE`, seed 003 B5): no writes, no commands.
    pub delegate: bool,
}

impl Context {
    /// Defaults: no project, no teammate, default `[gates]`.
    pub fn new(engine: Engine) -> Context {
        Context {
            engine,
            gates: GatesConfig::default(),
            root: None,
            teammate: None,
            builtin_policy: None,
            resolve: None,
            runtime: None,
            sandboxed: false,
            delegate: false,
        }
    }
}

/// The answer, before it is dressed in an engine's contract.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Nothing to say: go ahead.
    Pass,
    /// Refuse the tool call, with the reason the agent sees.
    Deny(String),
    /// Refuse to stop, complete the task or go idle: keep working on this.
    Block(String),
    /// Go ahead, with this added to the agent's context.
    Context(String),
    /// Go ahead, with this warning for the user.
    Warn(String),
    /// A check could not run: refuse (fail closed).
    Error {
        /// The check, e.g. "session id".
        check: String,
        /// What went wrong.
        detail: String,
    },
}

impl Answer {
    /// True for answers that stop what the agent wanted to do.
    pub fn is_refusal(&self) -> bool {
        matches!(self, Answer::Deny(_) | Answer::Block(_) | Answer::Error { .. })
    }

    /// A fail-closed error.
    pub fn error(check: impl Into<String>, detail: impl ToString) -> Answer {
        Answer::Error { check: check.into(), detail: detail.to_string() }
    }
}

/// A change to the session's markers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// The session invoked this skill.
    MarkSkill(String),
    /// The session wrote a code file.
    MarkCodeSession,
    /// The session ended: remove its markers.
    ClearSession,
    /// Remove markers older than the configured age.
    Sweep,
}

/// The answer plus what to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// What the engine is told.
    pub answer: Answer,
    /// Marker changes, applied only when the answer is not an error.
    pub effects: Vec<Effect>,
}

impl Outcome {
    fn just(answer: Answer) -> Outcome {
        Outcome { answer, effects: Vec::new() }
    }
}

/// Runs a quality gate when asked; `None` when no command is configured for it.
pub type QualityRunner<'a> = dyn FnMut(QualityGate) -> Option<GateResult> + 'a;

/// Decide the answer to one hook call.
pub fn decide(ctx: &Context, input: &HookInput, state: &SessionState, quality: &mut QualityRunner<'_>) -> Outcome {
    match input.event {
        Event::SessionStart => Outcome { answer: session_start(ctx), effects: vec![Effect::Sweep] },
        Event::SessionEnd => Outcome { answer: Answer::Pass, effects: vec![Effect::ClearSession, Effect::Sweep] },
        Event::UserPromptSubmit => Outcome::just(user_prompt(ctx, input)),
        Event::PreToolUse => pre_tool_use(ctx, input, state),
        Event::PostToolUse => post_tool_use(ctx, input),
        Event::Stop | Event::SubagentStop => Outcome::just(stop(ctx, input, state, quality)),
        Event::TaskCompleted => Outcome::just(quality_answer(QualityGate::OnTaskCompleted, quality)),
        Event::TeammateIdle => Outcome::just(quality_answer(QualityGate::OnIdle, quality)),
        Event::PreCompact => Outcome::just(Answer::Pass),
    }
}

fn skill_hint(ctx: &Context, skill: &str) -> String {
    match ctx.engine {
        Engine::Claude => format!("invoke the `{skill}` skill with the Skill tool (or run `troupe skill use {skill}`)"),
        _ => format!("run `troupe skill use {skill}` in the shell and follow what it prints"),
    }
}

fn session_start(ctx: &Context) -> Answer {
    let s = &ctx.gates.skills;
    Answer::Context(format!(
        "troupe gates are active in this session. Before editing a code file, {}; before editing a document, {}. \
         After changing code, {} before you finish. Writes without the skill are denied.",
        skill_hint(ctx, &s.code),
        skill_hint(ctx, &s.document),
        skill_hint(ctx, &s.verification),
    ))
}

fn user_prompt(ctx: &Context, input: &HookInput) -> Answer {
    let Some(prompt) = &input.prompt else {
        return Answer::error("prompt", "the UserPromptSubmit input has no 'prompt' field");
    };
    let phase = crate::phase::classify(prompt);
    match phase.guidance(&ctx.gates.skills.code, &ctx.gates.skills.verification) {
        Some(text) => Answer::Context(text),
        None => Answer::Pass,
    }
}

fn pre_tool_use(ctx: &Context, input: &HookInput, state: &SessionState) -> Outcome {
    let Some(tool) = input.tool_name.as_deref() else {
        return Outcome::just(Answer::error("tool name", "the PreToolUse input has no 'tool_name' field"));
    };
    if let (Some(t), Some(policy)) = (&ctx.teammate, &ctx.builtin_policy)
        && let Err(rule) = (policy.0)(t, &tools::gateway_tool_name(ctx.engine, tool))
    {
        return Outcome::just(Answer::Deny(format!("troupe role policy: {rule}")));
    }
    // A skill role exists only through the skills: without them nothing says what it may do.
    if let Some(t) = &ctx.teammate
        && ctx.builtin_policy.is_none()
        && let Some(name) = &t.skill_role
    {
        return Outcome::just(Answer::error(
            "role policy",
            format!("role '{name}' is defined by the project's skills, and no skill is loaded"),
        ));
    }
    let call = match tools::classify(ctx.engine, tool, &input.tool_input) {
        Ok(call) => call,
        Err(e) => return Outcome::just(Answer::error("tool input", e)),
    };
    if ctx.delegate {
        let answer = crate::modes::delegate(&call, tool);
        if answer != Answer::Pass {
            return Outcome::just(answer);
        }
    }
    let (paths, from_shell) = match &call {
        ToolCall::Write { paths, .. } => (paths.clone(), false),
        ToolCall::Shell { command, .. } => {
            if let Some(rule) = conventions::check(command, ctx.runtime.as_deref()) {
                return Outcome::just(Answer::Deny(rule));
            }
            (shell::read(&call.shell_from_cwd().unwrap_or_default()).writes, true)
        }
        ToolCall::Skill { .. } | ToolCall::Other => return Outcome::just(Answer::Pass),
    };
    let protected = protected_files(ctx, input);
    let mut code = false;
    for raw in &paths {
        let target = match target(ctx, input, raw) {
            Ok(t) => t,
            Err(answer) => return Outcome::just(answer),
        };
        if let Some(rel) = protected.iter().find(|(_, file)| can_change(&target, file)).map(|(rel, _)| *rel) {
            return Outcome::just(Answer::Deny(format!(
                "troupe: {rel} holds troupe's hooks and is changed only by `troupe init --<engine>` or \
                 `troupe init --uninstall-hooks`, run by a person; ask the user instead."
            )));
        }
        let shown = raw.replace(WILD, "*");
        if let Some(t) = &ctx.teammate {
            let Some(root) = &ctx.root else {
                return Outcome::just(Answer::error(
                    "project root",
                    "a teammate's write cannot be checked against ownership: no .troupe/ folder above the cwd and TROUPE_PROJECT is unset",
                ));
            };
            let path = match &target {
                Target::Pattern(_) => {
                    return Outcome::just(Answer::Deny(format!(
                        "troupe ownership: {} may not write `{shown}`: which file it names is only known when the \
                         command runs (`*` stands for a variable, a glob or a command's output); name each file \
                         you own literally.",
                        t.title()
                    )));
                }
                Target::Path(path) => path,
            };
            if let Decision::Deny { rule } = ownership::may_write(root, path, &t.writer()) {
                return Outcome::just(Answer::Deny(format!(
                    "troupe ownership: {} may not write {}: {rule}.",
                    t.title(),
                    display(root, path)
                )));
            }
        }
        // Shell writes outside the project (scratch files in /tmp) are not the skill gate's business.
        let inside = match &target {
            Target::Path(path) => ctx.root.as_deref().or(input.cwd.as_deref()).is_none_or(|r| path.starts_with(r)),
            Target::Pattern(_) => true,
        };
        if from_shell && !inside {
            continue;
        }
        let kind = ctx.gates.file_kind(&shown);
        if let Some(skill) = ctx.gates.skill_for(kind)
            && !state.has_skill(skill)
        {
            let what = if kind == FileKind::Code { "a code file" } else { "a document" };
            return Outcome::just(Answer::Deny(format!(
                "troupe skill gate: writing {} ({what}) requires the `{skill}` skill, which this session has not invoked. \
                 First {}, then retry the write.",
                shown,
                skill_hint(ctx, skill)
            )));
        }
        code |= kind == FileKind::Code;
    }
    Outcome { answer: Answer::Pass, effects: if code { vec![Effect::MarkCodeSession] } else { Vec::new() } }
}

fn post_tool_use(ctx: &Context, input: &HookInput) -> Outcome {
    let Some(tool) = input.tool_name.as_deref() else {
        return Outcome::just(Answer::error("tool name", "the PostToolUse input has no 'tool_name' field"));
    };
    let effects = match tools::classify(ctx.engine, tool, &input.tool_input) {
        // A failed call loaded no skill.
        _ if input.tool_failed => Vec::new(),
        Ok(ToolCall::Skill { name }) => vec![Effect::MarkSkill(name)],
        Ok(ToolCall::Shell { command, .. }) => shell::skill_uses(&command).into_iter().map(Effect::MarkSkill).collect(),
        // The tool already ran; a malformed input here changes nothing the gates rely on.
        _ => Vec::new(),
    };
    Outcome { answer: Answer::Pass, effects }
}

fn stop(ctx: &Context, input: &HookInput, state: &SessionState, quality: &mut QualityRunner<'_>) -> Answer {
    if input.stop_hook_active {
        return Answer::Pass;
    }
    let verification = &ctx.gates.skills.verification;
    if state.code_session && !state.has_skill(verification) {
        return Answer::Block(format!(
            "troupe stop gate: this session changed code but has not verified it. {} (it runs the project's tests and \
             lint), fix what fails, then finish.",
            capitalise(&skill_hint(ctx, verification))
        ));
    }
    // A teammate stopping is a teammate going idle (seed 003 B2 on_idle). Only
    // one that can have changed code answers for the tests: a Builder, or any
    // session that wrote code. An Architect, a TaskGenerator or an Inspector
    // cannot fix a red suite and would only pay for a run of it (six
    // Inspectors and an Auditor stopping at once would run it seven times).
    // A skill role answers for them only once it wrote code.
    if let Some(t) = &ctx.teammate
        && ((t.role == Role::Builder && t.skill_role.is_none()) || state.code_session)
    {
        return quality_answer(QualityGate::OnIdle, quality);
    }
    Answer::Pass
}

fn quality_answer(gate: QualityGate, quality: &mut QualityRunner<'_>) -> Answer {
    match quality(gate) {
        None | Some(GateResult::Passed) => Answer::Pass,
        Some(result) => {
            let message = result.message(gate).unwrap_or_default();
            if result.allows() { Answer::Warn(message) } else { Answer::Block(message) }
        }
    }
}

/// Where a written path points: a real path, or a pattern when part of it is
/// only known at run time (see [`shell::pattern`]).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    /// Absolute, `.`/`..` resolved, symlinks resolved when the context can.
    Path(PathBuf),
    /// Absolute, or starting with a wildcard (anywhere).
    Pattern(String),
}

/// `raw` as a [`Target`]: made absolute against the cwd (or the root),
/// `..` resolved lexically, then symlinks (dangling ones too) resolved.
fn target(ctx: &Context, input: &HookInput, raw: &str) -> Result<Target, Answer> {
    let joined = if raw.starts_with('/') || raw.starts_with(WILD) {
        raw.to_string()
    } else {
        match input.cwd.as_deref().or(ctx.root.as_deref()) {
            Some(base) => format!("{}/{raw}", base.display()),
            None => return Err(Answer::error("path", format!("'{raw}' is relative and the hook input has no 'cwd'"))),
        }
    };
    let normal = pattern::normalize(&joined);
    if pattern::is_pattern(&normal) {
        return Ok(Target::Pattern(normal));
    }
    let path = PathBuf::from(normal);
    Ok(Target::Path(ctx.resolve.map_or(path.clone(), |resolve| resolve(&path))))
}

/// Whether writing `target` can change `file` (the file itself or a folder above it).
fn can_change(target: &Target, file: &str) -> bool {
    match target {
        Target::Path(path) => path.to_str().is_some_and(|p| pattern::can_change(p, file)),
        Target::Pattern(p) => pattern::can_change(p, file),
    }
}

/// The files that wire troupe's hooks in; an agent editing them could switch its own gates off.
const HOOK_CONFIG: [&str; 6] = [
    ".claude/settings.json",
    ".claude/settings.local.json",
    ".gemini/settings.json",
    ".codex/hooks.json",
    ".opencode/plugin/troupe-gates.js",
    ".troupe/hooks-installed.json",
];

/// Every [`HOOK_CONFIG`] file under the root and the cwd, as given and with symlinks resolved.
fn protected_files(ctx: &Context, input: &HookInput) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    // The cwd is most often the root: its files are resolved once (a
    // `readlink` per component of each, on every write the hook checks).
    let cwd = input.cwd.as_deref().filter(|cwd| Some(*cwd) != ctx.root.as_deref());
    for base in [ctx.root.as_deref(), cwd].into_iter().flatten() {
        for rel in HOOK_CONFIG {
            let file = base.join(rel);
            let resolved = ctx.resolve.map(|resolve| resolve(&file));
            for f in std::iter::once(file).chain(resolved) {
                if let Some(s) = f.to_str() {
                    out.push((rel, pattern::normalize(s)));
                }
            }
        }
    }
    out
}

fn display(root: &Path, path: &Path) -> String {
    path.strip_prefix(root).unwrap_or(path).display().to_string()
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default()
}

#[cfg(test)]
mod tests;
