//! An obedient stub model: a [`Responder`] whose turns are derived from what
//! troupe told the teammate, not hand-picked to pass.
//!
//! It reads the rendered role prompt and assignment out of each request (the
//! role, feature, id, group, board task ids, the files it may write, the
//! instructions, the completion report block), and the tools the request
//! offers, and does what they say in order: load the skills the prompt names,
//! claim its tasks with the board tool the prompt names, write its files, run
//! the test command of the `tech.md` the prompt points at, complete the tasks,
//! and end with the report the prompt shows, each field filled. Inspectors
//! write the CPF file they are told to, send it to the Auditor named, and end
//! with it; the Auditor reads its messages until every Inspector it is told to
//! wait for has sent findings, applies the verdict rule, writes the verdict
//! file and ends with it.
//!
//! Only the *content* comes from the test, through [`Knowledge`]: what a file
//! holds, what an Inspector finds. The *protocol* (tool names, ids, markers,
//! fields, paths) comes from the prompt: when the prompt does not say something
//! the stub needs, it fails loudly — the request is answered with an HTTP 400
//! naming the missing piece, and [`Obedient::assert_obeyed`] panics with it —
//! so a drift between what troupe says and what it accepts fails a test.
//!
//! Engine knowledge (which tool writes a file or runs a command, and its
//! arguments) is the model's own, chosen by the tools the request offers.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use crate::script::{Conversation, Responder, ToolCall, ToolInput, Turn};

/// Each engine's skill tool and the argument naming the skill.
const SKILL_TOOLS: [(&str, &str); 3] = [("Skill", "skill"), ("activate_skill", "name"), ("skill", "name")];

/// What a teammate was told: the parts of troupe's rendered prompt the
/// obedient stub acts on.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Assignment {
    /// The role, from the template's `# Role: <name>` heading (`Builder`).
    pub role: String,
    /// `Feature:`.
    pub feature: String,
    /// `Your id:`.
    pub id: String,
    /// `Group:`, when there is one (a Builder's group, an Inspector's perspective).
    pub group: Option<String>,
    /// `Tasks:`, the board ids as given.
    pub tasks: Vec<String>,
    /// The `## Scope` paragraph.
    pub scope: String,
    /// The `## Read first` list.
    pub read: Vec<String>,
    /// The `## You may write` list.
    pub write: Vec<String>,
    /// The numbered `## Instructions`.
    pub instructions: Vec<String>,
    /// The completion report block the role template shows (inside its fence).
    pub report: Option<String>,
    /// The whole prompt from the role heading on.
    pub text: String,
}

impl Assignment {
    /// Parses the troupe prompt inside `prompt` (a CLI may wrap it in its own
    /// text); `None` when it holds no role heading and assignment.
    pub fn parse(prompt: &str) -> Option<Assignment> {
        let at = prompt.find("# Role: ")?;
        let text = &prompt[at..];
        let assignment_at = text.find("# Your assignment")?;
        let (template, assignment) = text.split_at(assignment_at);
        let heading = template.lines().next()?.trim_start_matches("# Role: ");
        let role = heading.split([' ', '(']).next().unwrap_or_default().to_string();
        let mut a = Assignment { role, text: text.to_string(), ..Assignment::default() };
        for line in assignment.lines() {
            if let Some(v) = line.strip_prefix("Feature: ") {
                a.feature = v.trim().to_string();
            } else if let Some(v) = line.strip_prefix("Your id: ") {
                a.id = v.trim().to_string();
            } else if let Some(v) = line.strip_prefix("Group: ") {
                a.group = Some(v.trim().to_string());
            } else if let Some(v) = line.strip_prefix("Tasks: ") {
                a.tasks = v.split(',').map(|t| t.trim().to_string()).filter(|t| !t.is_empty()).collect();
            }
            if line.starts_with("## ") && !a.feature.is_empty() {
                break;
            }
        }
        a.scope = section(assignment, "## Scope").trim().to_string();
        a.read = bullets(section(assignment, "## Read first"));
        a.write = bullets(section(assignment, "## You may write"));
        let mut items: Vec<String> = Vec::new();
        for line in section(assignment, "## Instructions").lines() {
            let numbered =
                line.split_once(". ").filter(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
            match (numbered, items.last_mut()) {
                (Some((_, rest)), _) => items.push(rest.to_string()),
                (None, Some(last)) => {
                    last.push('\n');
                    last.push_str(line);
                }
                (None, None) => {}
            }
        }
        a.instructions = items.into_iter().map(|i| i.trim_end().to_string()).collect();
        a.report = report_block(template);
        Some(a)
    }

    /// The instruction that contains `needle`.
    pub fn instruction(&self, needle: &str) -> Option<&str> {
        self.instructions.iter().map(String::as_str).find(|i| i.contains(needle))
    }
}

/// The text of markdown section `heading` up to the next `## ` heading.
fn section<'a>(text: &'a str, heading: &str) -> &'a str {
    let Some(at) = text.find(&format!("{heading}\n")) else { return "" };
    let rest = &text[at + heading.len() + 1..];
    &rest[..rest.find("\n## ").map(|i| i + 1).unwrap_or(rest.len())]
}

fn bullets(text: &str) -> Vec<String> {
    text.lines().filter_map(|l| l.strip_prefix("- ")).map(|l| l.trim().to_string()).collect()
}

/// The fenced block holding `<MARKER>_COMPLETE`.
fn report_block(template: &str) -> Option<String> {
    let mut parts = template.split("```");
    parts.next();
    while let Some(inside) = parts.next() {
        let inside = inside.trim_start_matches(|c: char| c.is_ascii_alphanumeric()).trim_matches('\n');
        if inside.lines().next().is_some_and(|l| l.trim().ends_with("_COMPLETE")) {
            return Some(inside.to_string());
        }
        parts.next();
    }
    None
}

/// The content a test knows and troupe's prompts cannot say: what the demo
/// feature's files hold, what an Inspector finds.
pub trait Knowledge: Send + Sync {
    /// The content teammate `a` writes to `path` (as its assignment lists it),
    /// or `None` to leave the file alone.
    fn file(&self, a: &Assignment, path: &str) -> Option<String>;

    /// The `ISSUES:` rows (`sev|category|location|description`) Inspector `a` finds.
    fn findings(&self, a: &Assignment) -> Vec<String> {
        let _ = a;
        Vec::new()
    }

    /// The value of report field `key` whose placeholder only the content can
    /// fill (a TaskGenerator's `Tasks:` count, a `Summary:`).
    fn field(&self, a: &Assignment, key: &str) -> Option<String> {
        let _ = (a, key);
        None
    }

    /// `(role, group)` of a teammate that must have started before `a`
    /// answers its report (a Builder whose board completion unblocks a
    /// successor: the Lead starts it without waiting for the report). The
    /// stub holds the report up to 120 s for it.
    fn report_after(&self, a: &Assignment) -> Option<(String, String)> {
        let _ = a;
        None
    }
}

/// One step of a teammate's plan.
#[derive(Clone, Debug)]
enum Step {
    /// One tool call.
    Call(ToolCall),
    /// Tool `name` called until the tool results hold findings from `until`
    /// senders (the Auditor waiting for its Inspectors); with `wait`, the
    /// call asks the tool to wait for the missing ones (`wait_for`,
    /// `wait_seconds`), as the prompt says, else it polls.
    Poll { name: String, until: usize, wait: Option<u64> },
    /// The Auditor's verdict, made from what its inbox held when it gets
    /// there: written to `path`, then the final answer.
    Verdict { path: String },
    /// The final answer.
    Say(String),
}

/// A plan, or why the prompt did not allow one.
type Plan = Result<Arc<Vec<Step>>, String>;

/// The obedient stub model. Share it with [`Arc`] between a stub server and
/// the test, which calls [`Obedient::assert_obeyed`] at the end.
pub struct Obedient {
    root: PathBuf,
    knowledge: Box<dyn Knowledge>,
    /// Plans by teammate id: made from the first request, so that what the
    /// teammate changes on disk does not change its plan mid-way.
    plans: Mutex<HashMap<String, Plan>>,
    /// The Auditor's verdict steps (write, answer) by teammate id.
    verdicts: Mutex<HashMap<String, Arc<Vec<Step>>>>,
    /// Every teammate that asked for a turn, in the order of its first request.
    seen: Mutex<Vec<Assignment>>,
    /// `(teammate id, event)` in order: `started`, `reported`.
    log: Mutex<Vec<(String, &'static str)>>,
    failures: Mutex<Vec<String>>,
    /// How long a polling turn waits (a model that reads its inbox again later).
    poll: Duration,
}

impl Obedient {
    /// An obedient model for teammates working in `root` (the project root),
    /// writing what `knowledge` says.
    pub fn new(root: impl Into<PathBuf>, knowledge: impl Knowledge + 'static) -> Arc<Obedient> {
        Arc::new(Obedient {
            root: root.into(),
            knowledge: Box::new(knowledge),
            plans: Mutex::new(HashMap::new()),
            verdicts: Mutex::new(HashMap::new()),
            seen: Mutex::new(Vec::new()),
            log: Mutex::new(Vec::new()),
            failures: Mutex::new(Vec::new()),
            poll: Duration::from_millis(50),
        })
    }

    /// Every request that could not be answered as the prompt says, so far.
    pub fn failures(&self) -> Vec<String> {
        self.failures.lock().expect("obedient failures").clone()
    }

    /// Panics with every missing piece of the contract the teammates met.
    pub fn assert_obeyed(&self) {
        let failures = self.failures();
        assert!(
            failures.is_empty(),
            "the prompts did not say what an obedient teammate needs:\n{}",
            failures.join("\n")
        );
    }

    /// The assignment of every teammate that asked for a turn, in the order
    /// of its first request.
    pub fn teammates(&self) -> Vec<Assignment> {
        self.seen.lock().expect("obedient teammates").clone()
    }

    /// `(teammate id, "started" | "reported")`, in the order they happened:
    /// a teammate starts with its first request and reports when the stub
    /// answers its final text.
    pub fn log(&self) -> Vec<(String, &'static str)> {
        self.log.lock().expect("obedient log").clone()
    }

    fn fail(&self, why: String) -> Turn {
        self.failures.lock().expect("obedient failures").push(why.clone());
        Turn::http_error(400, format!("obedient stub: {why}"))
    }

    fn plan(&self, a: &Assignment, c: &Conversation) -> Plan {
        let mut plans = self.plans.lock().expect("obedient plans");
        plans.entry(a.id.clone()).or_insert_with(|| Teammate::new(a, c, &self.root, &*self.knowledge).plan()).clone()
    }

    fn note(&self, a: &Assignment) {
        let mut seen = self.seen.lock().expect("obedient teammates");
        if !seen.iter().any(|s| s.id == a.id) {
            seen.push(a.clone());
            self.log.lock().expect("obedient log").push((a.id.clone(), "started"));
        }
    }

    /// The final answer, after the teammate the knowledge says to wait for
    /// has started (or a deadline).
    fn say(&self, a: &Assignment, text: String) -> Turn {
        if let Some((role, group)) = self.knowledge.report_after(a) {
            let deadline = std::time::Instant::now() + REPORT_HOLD;
            let started =
                || self.teammates().iter().any(|s| s.role == role && s.group.as_deref() == Some(group.as_str()));
            while !started() && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let mut log = self.log.lock().expect("obedient log");
        if !log.iter().any(|(id, e)| *id == a.id && *e == "reported") {
            log.push((a.id.clone(), "reported"));
        }
        Turn::text(text)
    }

    /// The Auditor's merged findings and verdict from its inbox (`results`)
    /// or, in recovery mode, from its assignment.
    fn verdict(&self, a: &Assignment, results: &[String]) -> String {
        let mut findings: Vec<(String, String)> = Vec::new();
        for r in results {
            collect_findings(&json_of(r), &mut findings);
        }
        let mut seen = std::collections::BTreeSet::new();
        findings.retain(|(from, _)| seen.insert(from.clone()));
        for i in &a.instructions {
            if let Some((head, cpf)) = i.split_once(" findings:\n")
                && let Some(id) = head.strip_prefix("Inspector ").and_then(|h| h.split_whitespace().next())
            {
                findings.push((id.to_string(), cpf.to_string()));
            }
        }
        let rows: Vec<String> = findings
            .iter()
            .flat_map(|(from, cpf)| cpf_rows(cpf, "ISSUES:").into_iter().map(move |r| format!("{from}|{r}")))
            .collect();
        format!(
            "VERDICT:{}\nSCOPE:{}\nVERIFIED:\n{}REMOVED:\nNOTES:\nmerged the findings of {} Inspectors",
            verdict_of(&rows, 1),
            a.feature,
            rows.iter().map(|r| format!("{r}\n")).collect::<String>(),
            findings.len()
        )
    }
}

/// How long a teammate's report waits for the teammate it is told to wait
/// for: a deadline, not a delay. A successor counts as started at its first
/// model request, and Gemini CLI or OpenCode starting beside others on a busy
/// 2-core machine makes its first request a minute or more after its spawn.
const REPORT_HOLD: Duration = Duration::from_secs(120);

/// The JSON a tool result holds: the whole text, or each line that is JSON
/// (Codex puts a header such as `Wall time: …` before an MCP tool's output).
fn json_of(result: &str) -> Value {
    serde_json::from_str(result)
        .unwrap_or_else(|_| Value::Array(result.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()))
}

/// The `(from, body)` of every `findings` message in a tool result.
fn collect_findings(v: &Value, out: &mut Vec<(String, String)>) {
    match v {
        Value::Object(o) => {
            if o.get("kind").and_then(Value::as_str) == Some("findings")
                && let (Some(from), Some(body)) =
                    (o.get("from").and_then(Value::as_str), o.get("body").and_then(Value::as_str))
            {
                out.push((from.to_string(), body.to_string()));
                return;
            }
            o.values().for_each(|v| collect_findings(v, out));
        }
        Value::Array(a) => a.iter().for_each(|v| collect_findings(v, out)),
        Value::String(s) => {
            if let Ok(inner) = serde_json::from_str::<Value>(s) {
                collect_findings(&inner, out);
            }
        }
        _ => {}
    }
}

impl Responder for Obedient {
    fn respond(&self, c: &Conversation) -> Turn {
        let Some(a) = Assignment::parse(&c.prompt) else {
            return self.fail(format!("no troupe role prompt with an assignment in the request:\n{}", tail(&c.prompt)));
        };
        if a.id.is_empty() || a.feature.is_empty() {
            return self.fail(format!("the assignment names no `Your id:` or `Feature:`:\n{}", a.text));
        }
        self.note(&a);
        if c.turns > c.results.len() {
            // The teammate gave its final answer and was told something more
            // (a hook holding it, a gate sending it back): an obedient
            // teammate did all it was told, so this is a drift.
            return self.fail(format!("{} ({}) was held after its final answer:\n{}", a.id, a.role, tail(&c.prompt)));
        }
        let steps = match self.plan(&a, c) {
            Ok(steps) => steps,
            Err(why) => return self.fail(format!("{} ({}): {why}", a.id, a.role)),
        };
        // Walk the plan along the tool results so far: one result per call.
        let (mut at, mut used, mut polled_from) = (0, 0, 0);
        while used < c.results.len() {
            match steps.get(at) {
                Some(Step::Call(call)) => {
                    if c.failed.get(used).copied().unwrap_or(false) {
                        // The prompt told it to make this call, and troupe or the CLI refused it.
                        return self.fail(format!(
                            "{} ({}): {} {} failed: {}",
                            a.id,
                            a.role,
                            call.name,
                            call.input.to_json(),
                            c.results[used]
                        ));
                    }
                    at += 1;
                    used += 1;
                    polled_from = used;
                }
                Some(Step::Poll { until, .. }) => {
                    used += 1;
                    if senders(&c.results[..used]) >= *until {
                        at += 1;
                    }
                }
                _ => break,
            }
        }
        let next = match steps.get(at).or(steps.last()) {
            Some(Step::Call(call)) => Some(&call.name),
            Some(Step::Poll { name, .. }) => Some(name),
            _ => None,
        };
        if let Some(name) = next.filter(|n| !c.tools.contains(n)) {
            return self.fail(format!(
                "{} ({}): the engine does not offer {name} now (offered: {}; the last tool result: {})",
                a.id,
                a.role,
                c.tools.join(", "),
                c.results.last().map(|r| tail(r)).unwrap_or_default()
            ));
        }
        match steps.get(at).or(steps.last()) {
            Some(Step::Call(call)) => Turn { tool_calls: vec![call.clone()], ..Turn::default() },
            Some(Step::Poll { name, until, wait }) => {
                let missing = until.saturating_sub(senders(&c.results[..used]));
                let input = match wait {
                    Some(secs) => json!({"wait_for": missing, "wait_seconds": secs}),
                    None => json!({}),
                };
                let turn = Turn {
                    tool_calls: vec![ToolCall { name: name.clone(), input: ToolInput::Json(input) }],
                    ..Turn::default()
                };
                if used > polled_from && wait.is_none() { turn.after(self.poll) } else { turn }
            }
            Some(Step::Verdict { path }) => {
                // Made once, when the step is reached: the file it writes
                // exists on the requests after, which would change the steps.
                let mut verdicts = self.verdicts.lock().expect("obedient verdicts");
                let rest = match verdicts.get(&a.id) {
                    Some(rest) => rest.clone(),
                    None => {
                        let verdict = self.verdict(&a, &c.results[..used]);
                        let t = Teammate::new(&a, c, &self.root, &*self.knowledge);
                        let mut rest = match t.write(path, &verdict) {
                            Ok(steps) => steps,
                            Err(why) => return self.fail(format!("{}: {why}", a.id)),
                        };
                        rest.push(Step::Say(verdict));
                        verdicts.entry(a.id.clone()).or_insert(Arc::new(rest)).clone()
                    }
                };
                drop(verdicts);
                match &rest[(c.results.len() - used).min(rest.len() - 1)] {
                    Step::Call(call) => Turn { tool_calls: vec![call.clone()], ..Turn::default() },
                    Step::Say(text) => self.say(&a, text.clone()),
                    _ => unreachable!("a verdict is written, then said"),
                }
            }
            Some(Step::Say(text)) => self.say(&a, text.clone()),
            None => self.fail(format!("{}: an empty plan", a.id)),
        }
    }
}

/// The last part of a long prompt, for an error.
fn tail(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    chars[chars.len().saturating_sub(1500)..].iter().collect()
}

/// How many teammates the results hold findings (or a recovery notice) from:
/// messages read twice count once.
fn senders(results: &[String]) -> usize {
    fn collect(v: &Value, out: &mut std::collections::BTreeSet<String>) {
        match v {
            Value::Object(o) => {
                let kind = o.get("kind").and_then(Value::as_str);
                if matches!(kind, Some("findings" | "recovery_notice")) {
                    let from = o.get("from").and_then(Value::as_str).unwrap_or_default();
                    let body = o.get("body").and_then(Value::as_str).unwrap_or_default();
                    // A recovery notice stands for the Inspector it names.
                    out.insert(format!("{from}:{}", if kind == Some("findings") { "" } else { body }));
                }
                o.values().for_each(|v| collect(v, out));
            }
            Value::Array(a) => a.iter().for_each(|v| collect(v, out)),
            Value::String(s) => {
                if let Ok(inner) = serde_json::from_str::<Value>(s) {
                    collect(&inner, out);
                }
            }
            _ => {}
        }
    }
    let mut out = std::collections::BTreeSet::new();
    for r in results {
        collect(&json_of(r), &mut out);
    }
    out.len()
}

/// The `ISSUES:` (or `VERIFIED:`) rows of a CPF text.
fn cpf_rows(cpf: &str, section: &str) -> Vec<String> {
    let mut rows = Vec::new();
    let mut inside = false;
    for line in cpf.lines() {
        let line = line.trim();
        if line.ends_with(':') && line.chars().all(|c| c.is_ascii_uppercase() || c == '_' || c == ':') {
            inside = line == section;
        } else if inside && line.matches('|').count() >= 3 {
            rows.push(line.to_string());
        }
    }
    rows
}

/// The rule the Auditor is told, applied to the severities of `rows` (`sev` at `col`).
fn verdict_of(rows: &[String], col: usize) -> &'static str {
    let sev = |s: &str| rows.iter().any(|r| r.split('|').nth(col) == Some(s));
    if sev("C") {
        "NO-GO"
    } else if sev("H") {
        "CONDITIONAL"
    } else {
        "GO"
    }
}

/// One teammate's plan being made.
struct Teammate<'a> {
    a: &'a Assignment,
    c: &'a Conversation,
    root: &'a Path,
    k: &'a dyn Knowledge,
    /// The tools searched for so far (see [`Teammate::reach`]).
    searched: std::cell::RefCell<std::collections::BTreeSet<String>>,
}

/// The search tool of an engine that defers tools behind it (Codex).
const SEARCH: &str = "tool_search";

impl<'a> Teammate<'a> {
    fn new(a: &'a Assignment, c: &'a Conversation, root: &'a Path, k: &'a dyn Knowledge) -> Self {
        Teammate { a, c, root, k, searched: Default::default() }
    }

    fn plan(&self) -> Plan {
        let steps = match self.a.role.as_str() {
            "Architect" | "TaskGenerator" => self.author()?,
            "Builder" => self.builder()?,
            "Inspector" => self.inspector()?,
            "Auditor" => self.auditor()?,
            other => return Err(format!("no obedient behaviour for role {other}")),
        };
        Ok(Arc::new(steps))
    }

    /// The absolute path of `path` as the prompt gives it, relative to
    /// where the teammate works.
    fn abs(&self, path: &str) -> PathBuf {
        let p = Path::new(path);
        if p.is_absolute() { p.to_path_buf() } else { self.base().join(p) }
    }

    /// Where the teammate works: the working directory its CLI's system
    /// prompt names when that is inside the project (a Builder's own git
    /// worktree under `[team] isolation = "worktree"`), else the project root.
    fn base(&self) -> PathBuf {
        let lines: Vec<&str> = self.c.prompt.lines().map(|l| l.trim().trim_start_matches("- ")).collect();
        let named = lines.iter().enumerate().find_map(|(i, l)| {
            // Claude Code, OpenCode, Codex (`<cwd>` of its environment
            // context), Gemini CLI (the first of its workspace directories).
            l.strip_prefix("Primary working directory: ")
                .or_else(|| l.strip_prefix("Working directory: "))
                .or_else(|| l.strip_prefix("<cwd>").and_then(|d| d.strip_suffix("</cwd>")))
                .or_else(|| (*l == "**Workspace Directories:**").then(|| lines.get(i + 1).copied()).flatten())
        });
        named
            .map(|d| PathBuf::from(d.trim()))
            .filter(|d| d.starts_with(self.root))
            .unwrap_or_else(|| self.root.to_path_buf())
    }

    fn offers(&self, tool: &str) -> bool {
        self.c.tools.iter().any(|t| t == tool)
    }

    /// The gateway tool `name` (`board_claim`) as the prompt names it: a
    /// code-span token ending in `name` that the request offers.
    fn gateway(&self, name: &str) -> Result<String, String> {
        let named: Vec<&str> = self
            .a
            .text
            .split('`')
            .skip(1)
            .step_by(2)
            .filter(|t| t.ends_with(&format!("__{name}")) || t.ends_with(&format!("_{name}")))
            .collect();
        match named.iter().find(|t| self.offers(t)) {
            Some(t) => Ok(t.to_string()),
            None if named.is_empty() => Err(format!("the prompt names no tool to {name}")),
            // Codex offers MCP tools only through its search tool: a model
            // searches for the tool the prompt names (see `reach`).
            None if self.offers(SEARCH) => Ok(named[0].to_string()),
            None => Err(format!(
                "the prompt names {} for {name}, which the engine does not offer (offered: {})",
                named.join(", "),
                self.c.tools.join(", ")
            )),
        }
    }

    /// The search that makes `tool` callable when the engine offers it only
    /// through its search tool (Codex's `tool_search` over MCP tools), once
    /// per tool; `None` when it is offered as it is. The query is the MCP
    /// tool's own name: Codex names a tool `mcp__<server>__<tool>` and
    /// indexes `<tool>`, each query word having to match.
    fn reach(&self, tool: &str) -> Option<Step> {
        let search = !self.offers(tool) && self.offers(SEARCH);
        let own = tool.strip_prefix("mcp__").and_then(|rest| rest.split_once("__")).map_or(tool, |(_, own)| own);
        (search && self.searched.borrow_mut().insert(tool.to_string()))
            .then(|| self.call(SEARCH, json!({"query": own})))
    }

    fn call(&self, name: &str, input: Value) -> Step {
        Step::Call(ToolCall { name: name.into(), input: ToolInput::Json(input) })
    }

    /// A shell command, with the engine's shell tool.
    fn shell(&self, cmd: &str) -> Result<Step, String> {
        let input = if self.offers("Bash") || self.offers("bash") {
            json!({"command": cmd, "description": "run"})
        } else if self.offers("run_shell_command") {
            json!({"command": cmd})
        } else if self.offers("exec_command") {
            json!({"cmd": cmd})
        } else if self.offers("shell") {
            json!({"command": ["bash", "-lc", cmd]})
        } else {
            return Err(format!("the engine offers no shell tool (offered: {})", self.c.tools.join(", ")));
        };
        let name = ["Bash", "bash", "run_shell_command", "exec_command", "shell"].into_iter().find(|t| self.offers(t));
        Ok(self.call(name.unwrap_or_default(), input))
    }

    /// Writing `content` to `path`, with the engine's write tool (Claude Code
    /// reads a file before it may overwrite it).
    fn write(&self, path: &str, content: &str) -> Result<Vec<Step>, String> {
        let abs = self.abs(path).display().to_string();
        if self.offers("Write") {
            let write = self.call("Write", json!({"file_path": abs, "content": content}));
            return Ok(if self.abs(path).exists() {
                vec![self.call("Read", json!({"file_path": abs})), write]
            } else {
                vec![write]
            });
        }
        if self.offers("write_file") {
            return Ok(vec![self.call("write_file", json!({"file_path": abs, "content": content}))]);
        }
        if self.offers("write") {
            return Ok(vec![self.call("write", json!({"filePath": abs, "content": content}))]);
        }
        if self.offers("apply_patch") {
            let patch = |body: String| {
                Step::Call(ToolCall {
                    name: "apply_patch".into(),
                    input: ToolInput::Freeform(format!("*** Begin Patch\n{body}*** End Patch")),
                })
            };
            let mut steps = Vec::new();
            if self.abs(path).exists() {
                steps.push(patch(format!("*** Delete File: {abs}\n")));
            }
            let lines: String = content.lines().map(|l| format!("+{l}\n")).collect();
            steps.push(patch(format!("*** Add File: {abs}\n{lines}")));
            return Ok(steps);
        }
        Err(format!("the engine offers no tool to write files (offered: {})", self.c.tools.join(", ")))
    }

    /// The skills the prompt says to load, in order, each as the prompt says:
    /// the engine's skill tool where it offers one (Claude Code's `Skill`,
    /// Gemini CLI's `activate_skill`, OpenCode's `skill`), else the `troupe
    /// skill use` command the prompt gives.
    fn skills(&self) -> Result<Vec<Step>, String> {
        let mut names: Vec<(String, String)> = Vec::new();
        for (at, _) in self.a.text.match_indices(" skill use ") {
            let before = &self.a.text[..at];
            let troupe = &before[before.rfind('`').map(|i| i + 1).unwrap_or(0)..];
            let rest = &self.a.text[at + " skill use ".len()..];
            let name: String =
                rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_').collect();
            if troupe.contains(char::is_whitespace) || name.is_empty() {
                return Err(format!(
                    "a `skill use` command with no troupe path or skill: …{}",
                    &self.a.text[at.saturating_sub(60)..at + 40]
                ));
            }
            if !names.iter().any(|(n, _)| *n == name) {
                names.push((name, troupe.to_string()));
            }
        }
        // "before you end, load `x`": skills named only in backticks after "load".
        let text = self.a.text.split_whitespace().collect::<Vec<_>>().join(" ");
        for (at, _) in text.match_indices("load `") {
            let rest = &text[at + "load `".len()..];
            let name = &rest[..rest.find('`').unwrap_or(0)];
            if !name.is_empty() && !names.iter().any(|(n, _)| n == name) {
                let troupe = names.first().map(|(_, t)| t.clone()).ok_or_else(|| {
                    format!("the prompt says to load {name} but gives no `troupe skill use` command to load it with")
                })?;
                names.push((name.to_string(), troupe));
            }
        }
        names
            .into_iter()
            .map(|(name, troupe)| match SKILL_TOOLS.iter().find(|(tool, _)| self.offers(tool)) {
                Some((tool, key)) => Ok(self.call(tool, json!({ *key: name }))),
                None => self.shell(&format!("{troupe} skill use {name}")),
            })
            .collect()
    }

    /// The test command of the `tech.md` the prompt points at.
    fn test_command(&self) -> Result<String, String> {
        let tech = self
            .a
            .read
            .iter()
            .chain(self.a.instructions.iter())
            .find_map(|s| s.split_whitespace().find(|w| w.trim_end_matches(['.', ',', ')']).ends_with("tech.md")))
            .map(|w| w.trim_end_matches(['.', ',', ')']).to_string())
            .ok_or("the prompt does not say where the test command is (no tech.md)")?;
        let text = std::fs::read_to_string(self.abs(&tech)).map_err(|e| format!("{tech}: {e}"))?;
        text.lines()
            .find(|l| l.contains("Test:"))
            .and_then(|l| l.split('`').nth(1))
            .map(str::to_string)
            .ok_or(format!("{tech} names no `Test:` command"))
    }

    /// The completion report the prompt shows, every placeholder filled.
    fn report(&self, files: &[String], tests: Option<&str>) -> Result<String, String> {
        let block = self.a.report.as_deref().ok_or("the prompt shows no completion report block")?;
        let mut out = Vec::new();
        for line in block.lines() {
            if line.starts_with('[') {
                continue; // optional knowledge tags
            }
            let Some((key, value)) = line.split_once(": ") else {
                out.push(line.to_string());
                continue;
            };
            if !value.contains('<') {
                out.push(line.to_string());
                continue;
            }
            let list = |v: &[String]| if v.is_empty() { "none".to_string() } else { v.join(", ") };
            let filled = match key {
                "Feature" => self.a.feature.clone(),
                "Tasks completed" => list(&self.a.tasks),
                "Files" => list(files),
                "Tests" => match tests {
                    Some(cmd) => format!("`{cmd}` passed"),
                    None => return Err("the report asks for Tests: but the prompt named no test command".into()),
                },
                "Status" => "done".to_string(),
                _ => self
                    .k
                    .field(self.a, key)
                    .or_else(|| (key == "Summary").then(|| format!("{} done as assigned", self.a.role)))
                    .ok_or_else(|| {
                        format!("the report asks for `{key}: {value}` and the test's knowledge has no value")
                    })?,
            };
            out.push(format!("{key}: {filled}"));
        }
        Ok(out.join("\n"))
    }

    /// The files of the assignment the knowledge has content for, written.
    fn write_files(&self) -> Result<(Vec<Step>, Vec<String>), String> {
        let mut steps = Vec::new();
        let mut written = Vec::new();
        for path in &self.a.write {
            if let Some(content) = self.k.file(self.a, path) {
                steps.extend(self.write(path, &content)?);
                written.push(path.clone());
            }
        }
        if written.is_empty() {
            return Err(format!(
                "the test's knowledge has content for none of the files it may write: {:?}",
                self.a.write
            ));
        }
        Ok((steps, written))
    }

    /// Architect and TaskGenerator: skills, the documents, the report.
    fn author(&self) -> Result<Vec<Step>, String> {
        let mut steps = self.skills()?;
        let (writes, files) = self.write_files()?;
        steps.extend(writes);
        steps.push(Step::Say(self.report(&files, None)?));
        Ok(steps)
    }

    /// Builder: claim, the first skill, files, tests, complete, the other skills, report.
    fn builder(&self) -> Result<Vec<Step>, String> {
        let mut steps = Vec::new();
        if !self.a.tasks.is_empty() {
            let claim = self.gateway("board_claim")?;
            steps.extend(self.reach(&claim));
            for t in &self.a.tasks {
                steps.push(self.call(&claim, json!({"task_id": t})));
            }
        }
        let mut skills = self.skills()?.into_iter();
        steps.extend(skills.next());
        let (writes, files) = self.write_files()?;
        steps.extend(writes);
        let test = self.test_command()?;
        steps.push(self.shell(&test)?);
        if !self.a.tasks.is_empty() {
            let complete = self.gateway("board_complete")?;
            steps.extend(self.reach(&complete));
            for t in &self.a.tasks {
                steps.push(self.call(&complete, json!({"task_id": t})));
            }
        }
        steps.extend(skills);
        steps.push(Step::Say(self.report(&files, Some(&test))?));
        Ok(steps)
    }

    /// Inspector: the CPF file, the message to the Auditor, the CPF as the answer.
    fn inspector(&self) -> Result<Vec<Step>, String> {
        let path = self
            .a
            .instruction("Write your findings in CPF to ")
            .and_then(|i| i.split("CPF to ").nth(1))
            .and_then(|r| r.split(':').next())
            .map(str::trim)
            .ok_or("the prompt does not say which file the findings go to")?;
        if !self.a.write.iter().any(|w| w == path) {
            return Err(format!("told to write {path}, which is not in `You may write`: {:?}", self.a.write));
        }
        let auditor = self
            .a
            .instruction("to the Auditor ")
            .and_then(|i| i.split("to the Auditor ").nth(1))
            .and_then(|r| r.split_whitespace().next())
            .ok_or("the prompt does not name the Auditor to send findings to")?;
        let rows = self.k.findings(self.a);
        let cpf = format!(
            "VERDICT:{}\nSCOPE:{}\nISSUES:\n{}NOTES:\nreviewed as {}",
            verdict_of(&rows, 0),
            self.a.feature,
            rows.iter().map(|r| format!("{r}\n")).collect::<String>(),
            self.a.group.as_deref().unwrap_or("an inspector")
        );
        let mut steps = self.write(path, &cpf)?;
        let send = self.gateway("send_message")?;
        steps.extend(self.reach(&send));
        steps.push(self.call(&send, json!({"to": auditor, "kind": "findings", "body": cpf})));
        steps.push(Step::Say(cpf));
        Ok(steps)
    }

    /// Auditor: wait for the findings, merge them by the rule told, the verdict file and answer.
    fn auditor(&self) -> Result<Vec<Step>, String> {
        let path = self
            .a
            .instructions
            .iter()
            .find_map(|i| {
                i.strip_prefix("Write ").and_then(|r| r.split(" in CPF").next()).filter(|p| p.ends_with(".cpf"))
            })
            .ok_or("the prompt does not say which file the verdict goes to")?
            .to_string();
        let recovery = self.a.instructions.iter().any(|i| i.starts_with("RECOVERY MODE"));
        let mut steps = Vec::new();
        if !recovery {
            let wait = self.a.instruction("Wait for ").ok_or("the prompt does not say whose findings to wait for")?;
            let n: usize = wait
                .split("each of the ")
                .nth(1)
                .and_then(|r| r.split_whitespace().next())
                .and_then(|n| n.parse().ok())
                .ok_or(format!("the prompt does not say how many Inspectors to wait for: {wait}"))?;
            let name = self.gateway("read_messages")?;
            steps.extend(self.reach(&name));
            // "(`wait_for`: …, `wait_seconds`: 20)": the tool waits, as told.
            let wait = wait
                .contains("`wait_for`")
                .then(|| {
                    wait.split("`wait_seconds`: ").nth(1)?.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
                })
                .flatten();
            steps.push(Step::Poll { name, until: n, wait });
        }
        // The rows come from the messages read: the plan is made before they
        // arrive, so the verdict is made when the step is reached.
        steps.push(Step::Verdict { path });
        Ok(steps)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Builder prompt in the shape troupe renders (role template, `---`, assignment).
    fn builder_prompt(complete: &str) -> String {
        format!(
            "You are Claude Code.\n\n# Role: Builder (T3)\n\nClaim with `mcp__troupe__troupe__board_claim`, complete with `{complete}`.\n\
             Load `/opt/troupe skill use code-quality-rules`; before you end, load\n`verification-before-completion`.\n\n\
             ```\nBUILDER_COMPLETE\nFeature: <feature>\nTasks completed: <ids>\nFiles: <files>\nTests: <result>\nStatus: <one line>\n\
             [PATTERN] <knowledge worth keeping> (optional, any number)\n```\n\n---\n\n# Your assignment\n\n\
             Feature: login\nYour id: builder-g1-3\nGroup: G1\nTasks: login/1.1\n\n## Scope\n\nGroup G1.\n\n\
             ## Read first\n\n- .troupe/steering/tech.md\n\n## You may write\n\n- src/a.sh\n\n## Instructions\n\n\
             1. Implement these tasks.\n2. Run tests with the commands in .troupe/steering/tech.md.\n"
        )
    }

    struct Files;
    impl Knowledge for Files {
        fn file(&self, _: &Assignment, path: &str) -> Option<String> {
            Some(format!("# {path}\n"))
        }
    }

    fn conversation(prompt: String) -> Conversation {
        let tools = [
            "Bash",
            "Write",
            "Read",
            "Skill",
            "mcp__troupe__troupe__board_claim",
            "mcp__troupe__troupe__board_complete",
        ];
        Conversation { prompt, tools: tools.map(String::from).to_vec(), ..Conversation::default() }
    }

    fn project() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".troupe/steering")).unwrap();
        std::fs::write(dir.path().join(".troupe/steering/tech.md"), "- Test: `sh check.sh`\n").unwrap();
        dir
    }

    #[test]
    fn parses_the_assignment() {
        let a = Assignment::parse(&builder_prompt("x")).unwrap();
        assert_eq!((a.role.as_str(), a.id.as_str(), a.group.as_deref()), ("Builder", "builder-g1-3", Some("G1")));
        assert_eq!(a.tasks, ["login/1.1"]);
        assert_eq!(a.write, ["src/a.sh"]);
        assert_eq!(a.instructions.len(), 2);
        assert!(a.report.unwrap().starts_with("BUILDER_COMPLETE\nFeature: <feature>"));
    }

    #[test]
    fn a_builder_does_what_its_prompt_says_in_order() {
        let dir = project();
        let model = Obedient::new(dir.path(), Files);
        let mut c = conversation(builder_prompt("mcp__troupe__troupe__board_complete"));
        let mut calls = Vec::new();
        loop {
            let turn = model.respond(&c);
            assert!(turn.error.is_none(), "{:?}", model.failures());
            let Some(call) = turn.tool_calls.first() else {
                assert!(turn.text.as_deref().unwrap().contains("Tasks completed: login/1.1\nFiles: src/a.sh\n"));
                assert!(!turn.text.unwrap().contains('<'), "every placeholder is filled");
                break;
            };
            calls.push(format!("{} {}", call.name, call.input.to_json()));
            c.turns += 1;
            c.results.push("ok".into());
            c.failed.push(false);
        }
        let names: Vec<&str> = calls.iter().map(|c| c.split(' ').next().unwrap()).collect();
        assert_eq!(
            names,
            [
                "mcp__troupe__troupe__board_claim",
                "Skill",
                "Write",
                "Bash",
                "mcp__troupe__troupe__board_complete",
                "Skill"
            ]
        );
        assert!(calls[3].contains("sh check.sh"), "{calls:?}");
        assert!(calls[5].contains("verification-before-completion"), "{calls:?}");
        model.assert_obeyed();
    }

    #[test]
    fn a_tool_the_engine_offers_only_through_its_search_is_searched_for_first() {
        let dir = project();
        let model = Obedient::new(dir.path(), Files);
        let prompt = builder_prompt("mcp__troupe__troupe__board_complete");
        let tools = ["exec_command", "apply_patch", "tool_search"].map(String::from).to_vec();
        let mut c = Conversation { prompt, tools, ..Conversation::default() };
        let mut names = Vec::new();
        while let Some(call) = model.respond(&c).tool_calls.first().cloned() {
            if call.name == "tool_search" {
                // Codex loads the tool the search names, under its full name.
                c.tools.push(format!("mcp__troupe__{}", call.input.to_json()["query"].as_str().unwrap()));
            }
            names.push(call.name);
            c.turns += 1;
            c.results.push("ok".into());
            c.failed.push(false);
        }
        model.assert_obeyed();
        let claim = "mcp__troupe__troupe__board_claim";
        let complete = "mcp__troupe__troupe__board_complete";
        let expected = [
            "tool_search",
            claim,
            "exec_command",
            "apply_patch",
            "exec_command",
            "tool_search",
            complete,
            "exec_command",
        ];
        assert_eq!(names, expected);

        // A search that does not load the tool: the call it was for is not made.
        let model = Obedient::new(dir.path(), Files);
        c.tools.retain(|t| !t.starts_with("mcp__"));
        c.turns = 1;
        c.results.truncate(1);
        c.failed.truncate(1);
        assert!(model.respond(&c).error.is_some());
        assert!(
            model.failures()[0].contains("does not offer mcp__troupe__troupe__board_claim"),
            "{:?}",
            model.failures()
        );
    }

    #[test]
    fn a_prompt_that_names_a_tool_troupe_does_not_serve_fails_loudly() {
        let dir = project();
        let model = Obedient::new(dir.path(), Files);
        let turn = model.respond(&conversation(builder_prompt("complete_task")));
        assert_eq!(turn.error.map(|e| e.status), Some(400));
        assert!(model.failures()[0].contains("names no tool to board_complete"), "{:?}", model.failures());
        assert!(std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| model.assert_obeyed())).is_err());
    }

    #[test]
    fn a_refused_call_fails_loudly() {
        let dir = project();
        let model = Obedient::new(dir.path(), Files);
        let mut c = conversation(builder_prompt("mcp__troupe__troupe__board_complete"));
        c.turns = 1;
        c.results.push("task login/1.1 not found".into());
        c.failed.push(true);
        assert!(model.respond(&c).error.is_some());
        assert!(model.failures()[0].contains("board_claim"), "{:?}", model.failures());
    }
}
