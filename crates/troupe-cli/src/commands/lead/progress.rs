//! The live progress of a run on stderr: one line per step (spawns, reports,
//! gates, phases, commits, escalations) and, on a terminal, a status line that
//! shows each running teammate's role, engine, elapsed time and last tool call.

use std::path::Path;

use troupe_core::config::GateStep;
use troupe_core::event::AgentEvent;
use troupe_lead::driver::Observer;
use troupe_lead::machine::{Command, Event, GateKind, GateVerdict, Lead, Outcome};

use crate::live::{Live, elapsed};
use crate::output::{escape, paint_err as paint};

/// Prints progress to stderr; silent in JSON mode.
pub struct Progress {
    live: Live,
    /// What each running gate is for (`quality gate for builder-1 [1.1]`).
    gates: std::collections::BTreeMap<u64, String>,
}

impl Progress {
    /// A display of a run in the project at `root`; `enabled` false prints nothing.
    pub fn new(enabled: bool, root: &Path) -> Progress {
        Progress { live: Live::start(enabled, Some(root)), gates: Default::default() }
    }

    /// The display of one of several features that run at the same time: each
    /// line names the feature, and there is no footer (the runs would
    /// overwrite each other's).
    pub fn for_feature(enabled: bool, feature: &str, root: &Path) -> Progress {
        Progress { live: Live::for_feature(enabled, feature, Some(root)), gates: Default::default() }
    }

    fn line(&mut self, text: String) {
        self.live.line(&text);
    }

    /// Show the last denials and clear the footer before the summary.
    pub fn finish(&mut self) {
        self.live.finish();
    }
}

/// What a tool call is about, in a few words: `Write src/a.rs`, `Bash pytest -q`.
pub(crate) fn tool_call(name: &str, input: &serde_json::Value) -> String {
    let target = ["file_path", "filePath", "path", "command", "cmd", "pattern", "query", "url"]
        .iter()
        .find_map(|k| input.get(k).and_then(|v| v.as_str()))
        .map(|s| crate::live::fit(s.lines().next().unwrap_or_default(), 60))
        .unwrap_or_default();
    // The model's command line: escaped, or it could redraw the operator's terminal.
    escape(format!("{name} {target}").trim()).into_owned()
}

fn where_(lead: &Lead) -> String {
    match lead.stage() {
        Some((stage, Some(wave))) => format!("[{stage} · wave {wave}]"),
        Some((stage, None)) => format!("[{stage}]"),
        None => String::new(),
    }
}

impl Observer for Progress {
    fn note(&mut self, text: &str) {
        // Shown even when progress is off (`--json`): it is about the user's files.
        if self.live.enabled() {
            self.line(format!("warning: {text}"));
        } else {
            crate::output::note(&format!("warning: {text}"));
        }
    }

    fn command(&mut self, command: &Command, lead: &Lead) {
        match command {
            Command::Spawn(req) => {
                let group =
                    req.group.as_ref().map(|g| format!(" group {g} [{}]", req.tasks.join(", "))).unwrap_or_default();
                let retry = if req.attempt > 1 { " (retry)" } else { "" };
                self.live.teammate(&req.id, req.role.title(), "");
                self.line(format!("{} spawn {} {}{group}{retry}", where_(lead), paint(&req.id, "1"), req.role.title()));
            }
            Command::Resume { id, prompt } => {
                if let Some(t) = lead.ctx().teammate(id) {
                    self.live.teammate(id, t.role.title(), "");
                }
                // Why it is resumed is the first sentence of what it is told
                // (a failed gate, an Auditor's nudge, a fix round, ...).
                let why = prompt.split(['.', '\n']).next().unwrap_or_default().trim();
                let why: String = why.chars().take(90).collect();
                self.line(format!("{} resume {id}: {why}", where_(lead)));
            }
            Command::RunGate { run, kind } => {
                let what = match kind {
                    GateKind::TaskCompleted { agent, tasks } => {
                        format!("quality gate for {agent} [{}]", tasks.join(", "))
                    }
                    GateKind::Final => "final quality gate".to_string(),
                    GateKind::Merged { group } => format!("quality gate on the line with {group} merged"),
                };
                self.live.gate(*run, &what);
                self.gates.insert(*run, what.clone());
                self.line(format!("{} {what} ...", where_(lead)));
            }
            Command::SaveSpec(spec) => self.line(format!("phase: {}", paint(spec.phase.as_str(), "1"))),
            Command::MarkTasksDone { tasks } => self.line(format!("tasks.yaml: {} done", tasks.join(", "))),
            Command::RecordKnowledge { entries, from } => {
                for (tag, text) in entries {
                    self.line(format!("knowledge {} {} ({from})", tag.as_str(), escape(text)));
                }
            }
            Command::Commit { message } | Command::CommitIfChanged { message, .. } => {
                self.line(format!("commit: {message}"))
            }
            Command::Escalate { reason, .. } => self.line(paint(&format!("escalation: {}", escape(reason)), "33")),
            Command::MergeGroup { group, .. } => {
                self.line(format!("{} merge {group} into the feature's line", where_(lead)))
            }
            Command::UndoMerge { to } => self.line(format!("merge taken back: the line is at {to} again")),
            Command::ShutDown { id, force } => {
                self.live.teammate_ended(id);
                self.line(format!("shut down {id}{}", if *force { " (forced)" } else { "" }));
            }
            Command::Finish(outcome) => {
                let o = match outcome {
                    Outcome::Completed => paint("completed", "32"),
                    Outcome::Escalated => paint("escalated", "33"),
                    Outcome::Refused(_) => paint("refused", "31"),
                    Outcome::Interrupted => paint("interrupted", "33"),
                    Outcome::OverBudget { stopped: false, .. } => paint(troupe_lead::machine::PAUSED_BUDGET, "33"),
                    Outcome::OverBudget { stopped: true, .. } => paint(troupe_lead::machine::STOPPED_BUDGET, "33"),
                };
                self.line(format!("run {o}"));
                self.finish();
            }
            _ => {}
        }
    }

    fn launched(&mut self, id: &str, engine: &str, _model: Option<&str>) {
        self.live.engine(id, engine);
    }

    fn gate(&mut self, run: u64, steps: &[GateStep]) {
        // The footer shows the step that runs now (`Test python3 -m unittest -q`);
        // `gate_step` moves it on.
        if let Some(first) = steps.first() {
            self.live.gate(run, &step_text(first));
        }
    }

    fn gate_step(&mut self, run: u64, step: &GateStep) {
        self.live.gate_step(run, &step_text(step));
    }

    fn agent_event(&mut self, id: &str, event: &AgentEvent) {
        // Denials come from the denial log, which every engine's hooks write
        // (the live display follows it); the stream says only what was called.
        if let AgentEvent::ToolUse { name, input, .. } = event {
            let call = tool_call(name, input);
            self.live.line(&format!("{id} → {call}"));
            self.live.tool(id, &call);
        }
    }

    fn event(&mut self, event: &Event, lead: &Lead) {
        match event {
            Event::TeammateEnded { id, stats, .. } | Event::TeammateFinished { id, stats, .. } => {
                let took = self.live.teammate_ended(id).map(elapsed).unwrap_or_default();
                self.line(format!(
                    "{} {id} reported ({}, {took})",
                    where_(lead),
                    crate::output::count(stats.num_turns, "turn")
                ));
            }
            Event::TeammateExited { id, error, .. } => {
                self.live.teammate_ended(id);
                self.line(paint(&format!("{id} failed: {}", escape(error)), "31"));
            }
            Event::SpawnFailed { id, error } => {
                self.live.teammate_ended(id);
                self.line(paint(&format!("{id} could not start: {}", escape(error)), "31"));
            }
            Event::TeammateUnresponsive { id } => self.line(paint(&format!("{id} is unresponsive"), "33")),
            Event::TeammateLeaseExpired { id } => {
                self.line(paint(&format!("{id} lost its lease (no heartbeat; its host is taken for lost)"), "33"))
            }
            Event::GateFinished { run, verdict, output } => {
                let took = self.live.gate_ended(*run).map(|d| format!(" after {}", elapsed(d))).unwrap_or_default();
                let what = self.gates.remove(run).unwrap_or_else(|| "quality gate".into());
                let last = output.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
                let (verdict, colour) = match verdict {
                    GateVerdict::Passed if last.is_empty() => ("passed", "32"),
                    GateVerdict::Passed => ("passed with a warning", "33"),
                    GateVerdict::Failed => ("FAILED", "31"),
                    GateVerdict::Environment => ("COULD NOT RUN (environment)", "31"),
                };
                let last = if last.is_empty() { String::new() } else { format!(" ({})", escape(last)) };
                self.line(format!("{what}: {}{last}{took}", paint(verdict, colour)));
            }
            Event::Committed { sha: Some(sha) } => self.line(format!("committed {sha}")),
            _ => {}
        }
    }
}

/// A gate step as the footer shows it: its label and command (`Test pytest -q`).
fn step_text(step: &GateStep) -> String {
    format!("{} {}", step.label, step.command)
}

#[cfg(test)]
mod tests {
    use super::*;
    use troupe_core::config::GateRule;

    #[test]
    fn a_running_gate_shows_its_commands_and_a_tool_call_its_target() {
        let mut p = Progress { live: Live::with(false, true, String::new(), None), gates: Default::default() };
        let step = |label: &str, command: &str| GateStep {
            label: label.into(),
            command: command.into(),
            rule: GateRule::Tests,
        };
        p.gate(4, &[step("Test", "python3 -m unittest -q"), step("Lint", "ruff check .")]);
        let footer = p.live.footer().unwrap();
        assert!(footer.ends_with("│ Test python3 -m unittest -q 0s"), "only the step that runs: {footer}");
        p.gate_step(4, &step("Lint", "ruff check ."));
        let footer = p.live.footer().unwrap();
        assert!(footer.ends_with("│ Lint ruff check . 0s"), "the next step replaces it: {footer}");
        p.gate(5, &[]);
        assert!(!p.live.footer().unwrap().contains("quality"), "a gate with no command shows nothing");
        let call = tool_call("Bash", &serde_json::json!({"command": "pytest -q\nsecond line", "description": "x"}));
        assert_eq!(call, "Bash pytest -q");
        assert_eq!(tool_call("TodoWrite", &serde_json::json!({"todos": []})), "TodoWrite");
    }
}
