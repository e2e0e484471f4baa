//! The design stage (seed 000 Flow 1–2 for `troupe design`): gate, spawn the
//! Architect, verify design.md and research.md exist and are non-empty, set
//! phase `design-generated` with `version_refs.design`, commit.

use troupe_core::gate::Operation;
use troupe_core::layout::Layout;
use troupe_core::role::Role;

use crate::machine::{
    AgentId, Command, Ctx, DecisionKind, Event, KnowledgeTag, SpawnContext, SpawnRequest, Stage, Step, gate_step,
};

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Idle,
    Working,
    Checking,
    Committing,
}

/// Runs the Architect. Retries once on a missing report, a crash, a hang or
/// missing artifacts; escalates after that.
#[derive(Debug)]
pub struct DesignStage {
    state: State,
    attempt: u32,
    architect: Option<AgentId>,
    summary: String,
}

impl Default for DesignStage {
    fn default() -> Self {
        DesignStage::new()
    }
}

impl DesignStage {
    /// A design stage that has not started.
    pub fn new() -> DesignStage {
        DesignStage { state: State::Idle, attempt: 0, architect: None, summary: String::new() }
    }

    fn artifacts(ctx: &Ctx) -> Vec<String> {
        let l = Layout::new("");
        let f = ctx.feature();
        [l.design_file(f), l.research_file(f)].iter().map(|p| p.to_string_lossy().into_owned()).collect()
    }

    fn spawn(&mut self, ctx: &mut Ctx, problem: Option<String>) {
        self.attempt += 1;
        let id = ctx.new_agent_id(Role::Architect, None);
        let l = Layout::new("");
        let f = ctx.feature().to_string();
        let desc = ctx.spec().description.clone();
        let mut instructions = vec![
            "Read the steering files and spec.yaml to understand the product, the tech stack and the structure.".into(),
            format!(
                "Write {} with the design: overview, architecture, components and interfaces, data model, error handling, testing strategy.",
                l.design_file(&f).display()
            ),
            format!(
                "Write {} with the research behind it: options considered, decisions and why, references.",
                l.research_file(&f).display()
            ),
            "Write no other file; spec.yaml belongs to the Lead.".into(),
            "End with the ARCHITECT_COMPLETE report of your role prompt (or ARCHITECT_BLOCKED with a Blocker: line)."
                .into(),
        ];
        if let Some(p) = problem {
            instructions.insert(0, format!("A previous attempt failed: {p}. Make sure this one finishes."));
        }
        let read = ["product.md", "tech.md", "structure.md"]
            .iter()
            .map(|s| l.steering_dir().join(s))
            .chain([l.spec_file(&f)])
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        let request = SpawnRequest {
            id: id.clone(),
            role: Role::Architect,
            engine_phase: "design".into(),
            group: None,
            tasks: Vec::new(),
            context: SpawnContext {
                feature: f.clone(),
                read,
                write: Self::artifacts(ctx),
                scope: if desc.is_empty() {
                    format!("The design of feature {f}.")
                } else {
                    format!("The design of feature {f}: {desc}")
                },
                instructions,
            },
            attempt: self.attempt,
        };
        ctx.spawn(request);
        self.architect = Some(id);
        self.state = State::Working;
    }

    /// An attempt failed: retry once, then escalate.
    fn fail(&mut self, ctx: &mut Ctx, why: String) -> Step {
        let id = self.architect.clone().unwrap_or_default();
        ctx.session_line(format!("Architect {id}: failed ({why})"));
        if self.attempt < 2 {
            self.spawn(ctx, Some(why));
            return Step::Continue;
        }
        let f = ctx.feature().to_string();
        ctx.escalate(
            format!("the Architect failed twice for {f}: {why}"),
            format!("see `troupe agent logs {id}`, fix the cause, then run `troupe design {f}` again"),
        );
        Step::Escalated
    }
}

impl Stage for DesignStage {
    fn name(&self) -> &'static str {
        "design"
    }

    fn start(&mut self, ctx: &mut Ctx) -> Step {
        if let Some(refused) = gate_step(ctx, Operation::Design) {
            return refused;
        }
        self.spawn(ctx, None);
        Step::Continue
    }

    fn handle_event(&mut self, event: &Event, ctx: &mut Ctx) -> Step {
        let mine = |id: &str| self.architect.as_deref() == Some(id);
        match (event, &self.state) {
            (Event::TeammateFinished { id, report, .. }, State::Working) if mine(id) => {
                let parsed = report.as_ref().map(|r| r.completion("ARCHITECT"));
                match parsed {
                    None => self.fail(ctx, "it ended without an ARCHITECT_COMPLETE report".into()),
                    Some(Err(e)) => self.fail(ctx, format!("it ended without an ARCHITECT_COMPLETE report ({e})")),
                    Some(Ok(r)) if r.is_blocked() => {
                        let blocker = r.field("blocker").or(r.field("status")).unwrap_or("no reason given").to_string();
                        ctx.session_line(format!("Architect {id}: blocked ({blocker})"));
                        let f = ctx.feature().to_string();
                        ctx.escalate(
                            format!("the Architect is blocked on {f}: {blocker}"),
                            format!("resolve the blocker (add it to the description or steering), then run `troupe design {f}`"),
                        );
                        Step::Escalated
                    }
                    Some(Ok(r)) => {
                        if !r.knowledge.is_empty() {
                            let entries = KnowledgeTag::entries(&r.knowledge);
                            ctx.push(Command::RecordKnowledge { from: id.clone(), entries });
                        }
                        self.summary = r.field("summary").unwrap_or("design generated").to_string();
                        ctx.push(Command::CheckArtifacts { paths: Self::artifacts(ctx) });
                        self.state = State::Checking;
                        Step::Continue
                    }
                }
            }
            (Event::TeammateExited { id, error, .. }, State::Working) if mine(id) => {
                self.fail(ctx, format!("its process ended without a result: {error}"))
            }
            (Event::SpawnFailed { id, error }, State::Working) if mine(id) => {
                self.fail(ctx, format!("it could not be started: {error}"))
            }
            (Event::TeammateUnresponsive { id }, State::Working) if mine(id) => {
                self.fail(ctx, "it stopped responding and was shut down".into())
            }
            (Event::ArtifactsChecked { missing }, State::Checking) => {
                if !missing.is_empty() {
                    return self.fail(ctx, format!("it did not write {}", missing.join(" and ")));
                }
                let (now, summary) = (ctx.now(), self.summary.clone());
                if let Err(e) = ctx.change_spec(|s| s.mark_design_generated(now, &summary)) {
                    ctx.escalate(e.to_string(), "check spec.yaml with `troupe spec show`".into());
                    return Step::Escalated;
                }
                let id = self.architect.clone().unwrap_or_default();
                ctx.session_line(format!("Architect {id}: design.md and research.md written ({summary})"));
                if ctx.config().commit {
                    let message = ctx.commit_message(&format!("design ({summary})"));
                    ctx.push(Command::Commit { message });
                    self.state = State::Committing;
                    Step::Continue
                } else {
                    Step::Done
                }
            }
            (Event::Committed { sha }, State::Committing) => {
                let what = sha
                    .as_deref()
                    .map(|s| format!("design committed as {s}"))
                    .unwrap_or("design: nothing to commit".into());
                ctx.decide(DecisionKind::Commit, what);
                Step::Done
            }
            (Event::CommandFailed { command, error }, State::Checking | State::Committing) => {
                let hint = format!("fix the cause, then run `troupe resume {}`", ctx.feature());
                ctx.escalate(format!("{command} failed: {error}"), hint);
                Step::Escalated
            }
            _ => Step::Continue,
        }
    }
}
