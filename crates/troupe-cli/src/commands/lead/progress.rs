//! The live progress of a run on stderr: one line per step (spawns, reports,
//! gates, phases, commits, escalations) and, on a terminal, a status line that
//! shows each running teammate's role, engine, elapsed time and last tool call.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::time::Instant;

use troupe_core::event::AgentEvent;
use troupe_lead::driver::Observer;
use troupe_lead::machine::{Command, Event, GateKind, GateVerdict, Lead, Outcome};

use crate::output::{escape, paint};

struct Live {
    role: String,
    engine: String,
    started: Instant,
    last_tool: Option<String>,
}

/// Prints progress to stderr; silent in JSON mode.
pub struct Progress {
    enabled: bool,
    tty: bool,
    live: BTreeMap<String, Live>,
    engines: BTreeMap<String, (String, Option<String>)>,
    status_shown: bool,
    gates: BTreeMap<u64, String>,
    started: Instant,
    /// `feature: ` when several features' runs share stderr.
    prefix: String,
}

impl Progress {
    /// A display; `enabled` false prints nothing.
    pub fn new(enabled: bool) -> Progress {
        Progress {
            enabled,
            tty: std::io::stderr().is_terminal(),
            live: BTreeMap::new(),
            engines: BTreeMap::new(),
            status_shown: false,
            gates: BTreeMap::new(),
            started: Instant::now(),
            prefix: String::new(),
        }
    }

    /// The display of one of several features that run at the same time: each
    /// line names the feature, and there is no status line (the runs would
    /// overwrite each other's).
    pub fn for_feature(enabled: bool, feature: &str) -> Progress {
        Progress { tty: false, prefix: format!("{}: ", paint(feature, "1")), ..Progress::new(enabled) }
    }

    fn line(&mut self, text: String) {
        if !self.enabled {
            return;
        }
        let mut err = std::io::stderr().lock();
        if self.status_shown {
            let _ = write!(err, "\r\x1b[K");
            self.status_shown = false;
        }
        let _ = writeln!(err, "{:>6.1}s  {}{text}", self.started.elapsed().as_secs_f64(), self.prefix);
        drop(err);
        self.status();
    }

    /// Redraw the status line (terminals only).
    fn status(&mut self) {
        if !self.enabled || !self.tty || self.live.is_empty() {
            return;
        }
        let parts: Vec<String> = self
            .live
            .iter()
            .map(|(id, l)| {
                let tool = l.last_tool.as_deref().map(|t| format!(" {t}")).unwrap_or_default();
                format!("{id} {} {} {:.0}s{tool}", l.role, l.engine, l.started.elapsed().as_secs_f64())
            })
            .collect();
        let mut text = format!("running: {}", parts.join(" | "));
        if text.chars().count() > 150 {
            text = text.chars().take(147).collect::<String>() + "...";
        }
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[K{}", paint(&text, "2"));
        let _ = err.flush();
        self.status_shown = true;
    }

    /// Clear the status line before the summary.
    pub fn finish(&mut self) {
        if self.status_shown {
            eprint!("\r\x1b[K");
            self.status_shown = false;
        }
    }
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
        if self.enabled {
            self.line(format!("warning: {text}"));
        } else {
            crate::output::note(&format!("warning: {text}"));
        }
    }

    fn command(&mut self, command: &Command, lead: &Lead) {
        match command {
            Command::Spawn(req) => {
                let (engine, model) = self.engines.get(&req.id).cloned().unwrap_or_default();
                let _ = model;
                let group =
                    req.group.as_ref().map(|g| format!(" group {g} [{}]", req.tasks.join(", "))).unwrap_or_default();
                let retry = if req.attempt > 1 { " (retry)" } else { "" };
                self.live.insert(
                    req.id.clone(),
                    Live { role: req.role.title().into(), engine, started: Instant::now(), last_tool: None },
                );
                self.line(format!("{} spawn {} {}{group}{retry}", where_(lead), paint(&req.id, "1"), req.role.title()));
            }
            Command::Resume { id, prompt } => {
                if let Some(l) = self.live.get_mut(id) {
                    l.started = Instant::now();
                } else if let Some(t) = lead.ctx().teammate(id) {
                    let engine = self.engines.get(id).map(|e| e.0.clone()).unwrap_or_default();
                    self.live.insert(
                        id.clone(),
                        Live { role: t.role.title().into(), engine, started: Instant::now(), last_tool: None },
                    );
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
                };
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
            Command::Commit { message } => self.line(format!("commit: {message}")),
            Command::Escalate { reason, .. } => self.line(paint(&format!("escalation: {}", escape(reason)), "33")),
            Command::ShutDown { id, force } => {
                self.live.remove(id);
                self.line(format!("shut down {id}{}", if *force { " (forced)" } else { "" }));
            }
            Command::Finish(outcome) => {
                let o = match outcome {
                    Outcome::Completed => paint("completed", "32"),
                    Outcome::Escalated => paint("escalated", "33"),
                    Outcome::Refused(_) => paint("refused", "31"),
                    Outcome::Interrupted => paint("interrupted", "33"),
                };
                self.line(format!("run {o}"));
                self.finish();
            }
            _ => {}
        }
    }

    fn launched(&mut self, id: &str, engine: &str, model: Option<&str>) {
        self.engines.insert(id.to_string(), (engine.to_string(), model.map(str::to_string)));
        if let Some(l) = self.live.get_mut(id) {
            l.engine = engine.to_string();
        }
    }

    fn agent_event(&mut self, id: &str, event: &AgentEvent) {
        if let AgentEvent::ToolUse { name, input, .. } = event {
            let target = ["file_path", "path", "command"]
                .iter()
                .find_map(|k| input.get(k).and_then(|v| v.as_str()))
                .map(|s| s.chars().take(60).collect::<String>())
                .unwrap_or_default();
            if let Some(l) = self.live.get_mut(id) {
                // The model's command line: escaped, or it could redraw the operator's terminal.
                l.last_tool = Some(escape(format!("{name} {target}").trim()).into_owned());
            }
            self.status();
        }
        if let AgentEvent::ToolResult { ok: false, output, .. } = event
            && output.starts_with("denied")
        {
            self.line(paint(&format!("{id}: {}", escape(output)), "33"));
        }
    }

    fn event(&mut self, event: &Event, lead: &Lead) {
        match event {
            Event::TeammateFinished { id, stats, .. } => {
                let elapsed = self.live.remove(id).map(|l| l.started.elapsed().as_secs_f64()).unwrap_or(0.0);
                self.line(format!("{} {id} reported ({} turns, {elapsed:.1}s)", where_(lead), stats.num_turns));
            }
            Event::TeammateExited { id, error, .. } => {
                self.live.remove(id);
                self.line(paint(&format!("{id} failed: {}", escape(error)), "31"));
            }
            Event::SpawnFailed { id, error } => {
                self.live.remove(id);
                self.line(paint(&format!("{id} could not start: {}", escape(error)), "31"));
            }
            Event::TeammateUnresponsive { id } => self.line(paint(&format!("{id} is unresponsive"), "33")),
            Event::GateFinished { run, verdict, output } => {
                let what = self.gates.remove(run).unwrap_or_else(|| "quality gate".into());
                let last = output.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
                match verdict {
                    GateVerdict::Passed if last.is_empty() => self.line(format!("{what}: {}", paint("passed", "32"))),
                    GateVerdict::Passed => {
                        self.line(format!("{what}: {} ({last})", paint("passed with a warning", "33")))
                    }
                    GateVerdict::Failed => self.line(format!("{what}: {} ({last})", paint("FAILED", "31"))),
                    GateVerdict::Environment => {
                        self.line(format!("{what}: {} ({last})", paint("COULD NOT RUN (environment)", "31")))
                    }
                }
            }
            Event::Committed { sha: Some(sha) } => self.line(format!("committed {sha}")),
            _ => {}
        }
    }
}
