//! message-teammate: a message in a teammate's mailbox (`x-troupe-agent`),
//! completed by the teammate's reply. In plan mode (`x-troupe-plan-mode`) the
//! teammate is asked to submit a plan first, with the gateway's plan tool and
//! this task's mailbox id as the approver, and held to it: the message is the
//! store's plan-mode request, so its hooks refuse its writes and shell
//! commands until the plan is approved; the task is then INPUT_REQUIRED
//! with the plan as an artifact, and a follow-up message approves or rejects
//! it with the same `plan_decision` the Lead writes.

use std::collections::HashMap;

use a2a::*;
use futures::StreamExt;
use serde_json::{Value, json};
use troupe_core::approval::PlanDecision;
use troupe_core::layout::is_valid_agent_id;
use troupe_core::tools;
use troupe_store::approval::{DecideError, decide_plan};
use troupe_store::event::kind;
use troupe_store::{MessageKind, NewMessage, StoreError};

use super::{keys, meta, meta_str, task_meta, text_of};
use crate::a2a::A2a;
use crate::a2a::follow::events;
use crate::a2a::tasks::{blocking, set_artifact, set_status, store_error};

/// The Lead's mailbox id: a teammate may always be reached through it.
const LEAD: &str = "lead";

/// A message-teammate request.
pub struct Args {
    agent: String,
    body: String,
    plan_mode: bool,
}

impl Args {
    /// The teammate from `x-troupe-agent`, the text as the message.
    pub fn parse(message: &Message, request: Option<&HashMap<String, Value>>) -> Result<Args, A2AError> {
        let agent = meta_str(message, request, keys::AGENT).ok_or_else(|| {
            A2AError::invalid_params(format!("message-teammate needs the teammate's agent id in `{}`", keys::AGENT))
        })?;
        if !is_valid_agent_id(&agent) {
            return Err(A2AError::invalid_params(format!("`{agent}` is not an agent id")));
        }
        let body = text_of(message).trim().to_string();
        if body.is_empty() {
            return Err(A2AError::invalid_params("message-teammate needs a text part: the message"));
        }
        let plan_mode = match meta(message, request, keys::PLAN_MODE) {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err(A2AError::invalid_params(format!("`{}` is true or false", keys::PLAN_MODE))),
        };
        Ok(Args { agent, body, plan_mode })
    }

    /// Record the request on the task.
    pub fn describe(&self, task: &mut Task) {
        let meta = task.metadata.get_or_insert_with(HashMap::new);
        meta.insert(keys::AGENT.into(), json!(self.agent));
        meta.insert(keys::PLAN_MODE.into(), json!(self.plan_mode));
        meta.insert(keys::SENDER.into(), json!(sender(&task.id)));
    }
}

/// The mailbox id of a task: teammates answer it, and it is unique per task.
pub fn sender(task_id: &str) -> String {
    format!("a2a-{task_id}")
}

/// What the teammate reads. In plan mode it names the plan tool and the
/// approver exactly as the gateway takes them.
fn render(args: &Args, me: &str) -> String {
    if args.plan_mode {
        format!(
            "{}\n\nPlan first and change nothing yet: call `{}` with your plan and approver `{me}`. When it is \
             approved, do the work, then answer with `{}` to `{me}`. When it is rejected, revise the plan with the \
             reason given and submit it again.",
            args.body,
            tools::REQUEST_PLAN_APPROVAL,
            tools::SEND_MESSAGE
        )
    } else {
        format!("{}\n\nAnswer with `{}` to `{me}`.", args.body, tools::SEND_MESSAGE)
    }
}

impl A2a {
    /// Send the message; the task is WORKING until the teammate answers.
    pub async fn start_message(&self, task: Task, args: Args, after: i64) -> Result<Task, A2AError> {
        let me = sender(&task.id);
        let agent = args.agent.clone();
        let known = blocking(&self.store, move |s| match s.agent(&agent) {
            Ok(_) => Ok(true),
            Err(StoreError::AgentNotFound(_)) => Ok(false),
            Err(e) => Err(e),
        })
        .await?;
        if !known && args.agent != LEAD {
            let why = format!("no teammate `{}` is registered (see `troupe agent list`)", args.agent);
            return self.change(&task.id, |t| vec![set_status(t, TaskState::Rejected, why)]).await;
        }
        let message = NewMessage {
            from: me.clone(),
            to: args.agent.clone(),
            priority: troupe_store::message::DEFAULT_PRIORITY,
            kind: MessageKind::Text,
            body: render(&args, &me),
            in_reply_to: None,
        };
        // In plan mode the store holds the teammate to it: its hooks refuse its
        // writes and shell commands until a plan it submits is approved.
        let plan_mode = args.plan_mode;
        blocking(&self.store, move |s| {
            if plan_mode { s.send_plan_mode(message).map(|_| ()) } else { s.send(message).map(|_| ()) }
        })
        .await?;
        let note = if args.plan_mode {
            format!("sent to {}: waiting for its plan", args.agent)
        } else {
            format!("sent to {}: waiting for its answer", args.agent)
        };
        let task = self.change(&task.id, |t| vec![set_status(t, TaskState::Working, note)]).await?;
        self.watch_message(task.clone(), after);
        Ok(task)
    }

    /// A follow-up: the decision on a waiting plan, or more words for the teammate.
    pub async fn message_follow_up(&self, task: Task, message: Message) -> Result<Task, A2AError> {
        let me = task_meta(&task, keys::SENDER).unwrap_or_else(|| sender(&task.id));
        let agent = task_meta(&task, keys::AGENT).unwrap_or_default();
        let text = text_of(&message).trim().to_string();
        if task.status.state != TaskState::InputRequired {
            if text.is_empty() {
                return Err(A2AError::invalid_params("a follow-up needs a text part"));
            }
            let note = NewMessage {
                from: me,
                to: agent.clone(),
                priority: troupe_store::message::DEFAULT_PRIORITY,
                kind: MessageKind::Text,
                body: text,
                in_reply_to: None,
            };
            blocking(&self.store, move |s| s.send(note)).await?;
            return self.load(&task.id).await.map(|(t, _)| t);
        }
        let plan: i64 = task_meta(&task, keys::PLAN_MESSAGE)
            .and_then(|p| p.parse().ok())
            .ok_or_else(|| super::super::tasks::internal("an INPUT_REQUIRED task has no plan", &task.id))?;
        let (approved, reason) = decision(&message, &text)?;
        let why = reason.clone();
        // The one writer of plan decisions (the Lead's policy and the HTTP
        // API's approve/reject write the same message).
        let decided = blocking(&self.store, move |s| Ok(decide_plan(s, plan, approved, &me, &why))).await?;
        match decided {
            Ok(_) => {}
            Err(DecideError::Store(e)) => return Err(store_error(e)),
            // Decided elsewhere already (the HTTP API): the watcher moves the task on.
            Err(DecideError::AlreadyDecided { .. }) => return self.load(&task.id).await.map(|(t, _)| t),
            Err(e) => return Err(A2AError::invalid_params(e.to_string())),
        }
        let decision = Decided { plan, approved, by: "you".into(), reason };
        self.change(&task.id, move |t| decision.apply(t)).await
    }

    /// Withdraw the request: the teammate is told, the task is CANCELED.
    pub async fn cancel_message(&self, task: Task) -> Result<Task, A2AError> {
        let me = task_meta(&task, keys::SENDER).unwrap_or_else(|| sender(&task.id));
        let agent = task_meta(&task, keys::AGENT).unwrap_or_default();
        let note = NewMessage {
            from: me,
            to: agent,
            priority: 4,
            kind: MessageKind::Text,
            body: "Withdrawn: stop working on my earlier request; no answer is needed.".into(),
            in_reply_to: None,
        };
        let _ = blocking(&self.store, move |s| s.send(note)).await;
        self.change(&task.id, |t| {
            if t.status.state.is_terminal() {
                return vec![];
            }
            vec![set_status(t, TaskState::Canceled, "canceled by the client")]
        })
        .await
        .and_then(|t| {
            if t.status.state == TaskState::Canceled { Ok(t) } else { Err(A2AError::task_not_cancelable(&t.id)) }
        })
    }

    /// Follow the task's mailbox from event `after`: a plan makes it
    /// INPUT_REQUIRED, any other message to it is the answer that completes it.
    pub fn watch_message(&self, task: Task, after: i64) {
        let me = task_meta(&task, keys::SENDER).unwrap_or_else(|| sender(&task.id));
        let a2a = self.me();
        let to = me.clone();
        // Messages to this task's mailbox id, and plan decisions (by this
        // task's follow-ups, or by anyone through the HTTP API).
        let mut arrivals = Box::pin(events(&self.state, after, move |e| {
            e.kind == kind::MESSAGE_SENT
                && (e.data.get("to").and_then(Value::as_str) == Some(to.as_str())
                    || e.data.get("kind").and_then(Value::as_str) == Some(MessageKind::PlanDecision.as_str()))
        }));
        tokio::spawn(async move {
            while let Some(Ok(event)) = arrivals.next().await {
                let Some(id) = event.subject.as_deref().and_then(|s| s.parse::<i64>().ok()) else { continue };
                let Ok(m) = blocking(&a2a.store, move |s| s.message(id)).await else { continue };
                if m.kind == MessageKind::PlanDecision {
                    let Some(d) = PlanDecision::parse(&m.body) else { continue };
                    let decision =
                        Decided { plan: d.request_id, approved: d.approved, by: m.from.clone(), reason: d.reason };
                    if a2a.change(&task.id, move |t| decision.apply(t)).await.is_err() {
                        return;
                    }
                    continue;
                }
                let changed = a2a
                    .change(&task.id, move |t| {
                        if t.status.state.is_terminal()
                            || task_meta(t, keys::PLAN_MESSAGE).is_some_and(|p| p == m.id.to_string())
                        {
                            return vec![];
                        }
                        if m.kind == MessageKind::Plan {
                            t.metadata.get_or_insert_with(HashMap::new).insert(keys::PLAN_MESSAGE.into(), json!(m.id));
                            let plan = set_artifact(t, "plan", &format!("The plan of {}", m.from), vec![Part::text(&m.body)]);
                            let ask = format!(
                                "{} submitted a plan: approve or reject it (a follow-up message on this task; `{}`: approve|reject, the text is the reason)",
                                m.from,
                                keys::DECISION
                            );
                            return vec![plan, set_status(t, TaskState::InputRequired, ask)];
                        }
                        let answer = set_artifact(t, "answer", &format!("The answer of {}", m.from), vec![Part::text(&m.body)]);
                        vec![answer, set_status(t, TaskState::Completed, format!("{} answered", m.from))]
                    })
                    .await;
                match changed {
                    Ok(t) if !t.status.state.is_terminal() => {}
                    _ => return,
                }
            }
        });
    }
}

/// A decision on the plan a task waits for.
struct Decided {
    plan: i64,
    approved: bool,
    by: String,
    reason: String,
}

impl Decided {
    /// The task works again after a decision on the plan it waits for; any
    /// other decision (another plan's, or one already applied) changes nothing.
    fn apply(self, t: &mut Task) -> Vec<StreamResponse> {
        let waiting = task_meta(t, keys::PLAN_MESSAGE).and_then(|p| p.parse::<i64>().ok());
        if t.status.state != TaskState::InputRequired || waiting != Some(self.plan) {
            return vec![];
        }
        if let Some(m) = t.metadata.as_mut() {
            m.remove(keys::PLAN_MESSAGE);
        }
        let agent = task_meta(t, keys::AGENT).unwrap_or_default();
        let note = if self.approved {
            format!("plan approved by {}: {agent} does the work", self.by)
        } else {
            format!("plan rejected by {}: {agent} revises it ({})", self.by, self.reason)
        };
        vec![set_status(t, TaskState::Working, note)]
    }
}

/// Approve or reject, from `x-troupe-decision` or the text's first word; the
/// rest of the text is the reason.
fn decision(message: &Message, text: &str) -> Result<(bool, String), A2AError> {
    let explicit = meta_str(message, None, keys::DECISION).map(|d| d.to_ascii_lowercase());
    let (word, rest) = match &explicit {
        Some(d) => (d.as_str(), text.to_string()),
        None => {
            let (first, rest) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
            (first, rest.trim().to_string())
        }
    };
    let word = word.trim_end_matches([':', ',', '.', '!']).to_ascii_lowercase();
    let approved = match word.as_str() {
        "approve" | "approved" | "yes" | "lgtm" | "ok" => true,
        "reject" | "rejected" | "no" => false,
        _ => {
            return Err(A2AError::invalid_params(format!(
                "the task waits for a decision on a plan: answer `approve` or `reject <reason>` (or set `{}`)",
                keys::DECISION
            )));
        }
    };
    if !approved && rest.is_empty() {
        return Err(A2AError::invalid_params("a rejection needs a reason: `reject <what to change>`"));
    }
    Ok((approved, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(text: &str, decision: Option<&str>) -> Message {
        let mut m = Message::new(Role::User, vec![Part::text(text)]);
        if let Some(d) = decision {
            m.metadata = Some(HashMap::from([(keys::DECISION.to_string(), json!(d))]));
        }
        m
    }

    #[test]
    fn decisions_from_the_first_word_or_the_metadata() {
        assert_eq!(decision(&msg("approve", None), "approve").unwrap(), (true, String::new()));
        assert_eq!(decision(&msg("", None), "LGTM, go").unwrap(), (true, "go".into()));
        assert_eq!(decision(&msg("", None), "reject: use OAuth").unwrap(), (false, "use OAuth".into()));
        assert_eq!(decision(&msg("", Some("reject")), "use OAuth").unwrap(), (false, "use OAuth".into()));
        assert!(decision(&msg("", None), "reject").is_err(), "a rejection needs a reason");
        assert!(decision(&msg("", None), "maybe later").is_err());
    }

    #[test]
    fn plan_mode_names_the_gateway_tools_and_this_task_as_approver() {
        let args = Args { agent: "builder-1".into(), body: "Add tests".into(), plan_mode: true };
        let text = render(&args, "a2a-t1");
        assert!(text.contains(tools::REQUEST_PLAN_APPROVAL) && text.contains("approver `a2a-t1`"), "{text}");
        assert!(text.contains(tools::SEND_MESSAGE));
    }
}
