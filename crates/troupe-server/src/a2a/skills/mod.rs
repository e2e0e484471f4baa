//! What a message asks of the team. A new message names its skill in the
//! `x-troupe-skill` metadata (message or request metadata); a follow-up names
//! its task (`taskId`) and goes to that task's skill.

pub mod board;
pub mod message;
pub mod run;

use std::collections::HashMap;

use a2a::*;
use serde_json::Value;

use super::A2a;
use super::card::{MESSAGE_TEAMMATE, POST_TASK, RUN_FEATURE, SKILLS};
use super::handler::state_name;
use super::push;
use super::tasks::{blocking, document, set_status};

/// The metadata keys of troupe's extension (`x-troupe-` prefix, seed 003 §6.3).
pub mod keys {
    /// Which skill a new message asks for.
    pub const SKILL: &str = "x-troupe-skill";
    /// run-feature: the feature; post-task: the feature of the board task.
    pub const FEATURE: &str = "x-troupe-feature";
    /// run-feature: the engine of every teammate.
    pub const ENGINE: &str = "x-troupe-engine";
    /// message-teammate: the teammate's agent id.
    pub const AGENT: &str = "x-troupe-agent";
    /// message-teammate: ask for a plan first.
    pub const PLAN_MODE: &str = "x-troupe-plan-mode";
    /// A follow-up to a plan: `approve` or `reject`.
    pub const DECISION: &str = "x-troupe-decision";
    /// post-task: ids of board tasks that must be completed first.
    pub const BLOCKED_BY: &str = "x-troupe-blocked-by";
    /// On a task: the board task it follows.
    pub const BOARD_TASK: &str = "x-troupe-board-task";
    /// On a task: troupe's mailbox id for it (teammates reply to it).
    pub const SENDER: &str = "x-troupe-sender";
    /// On a task: the plan message waiting for a decision.
    pub const PLAN_MESSAGE: &str = "x-troupe-plan-message";
    /// On a run-feature task: the process id of its Lead.
    pub const PID: &str = "x-troupe-pid";
}

/// Media types a message part may have: troupe reads text and JSON data.
const ACCEPTED: [&str; 3] = ["text/plain", "application/json", "text/markdown"];

/// A string from a message's metadata, else the request's.
pub fn meta<'a>(message: &'a Message, request: Option<&'a HashMap<String, Value>>, key: &str) -> Option<&'a Value> {
    message.metadata.as_ref().and_then(|m| m.get(key)).or_else(|| request.and_then(|m| m.get(key)))
}

/// A string metadata value, trimmed; `None` when absent or empty.
pub fn meta_str(message: &Message, request: Option<&HashMap<String, Value>>, key: &str) -> Option<String> {
    meta(message, request, key).and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty()).map(str::to_string)
}

/// The text of a message: its text parts, joined by blank lines.
pub fn text_of(message: &Message) -> String {
    message.parts.iter().filter_map(|p| p.as_text()).collect::<Vec<_>>().join("\n\n")
}

/// A task's skill, as recorded when it was created.
pub fn skill_of(task: &Task) -> String {
    task_meta(task, keys::SKILL).unwrap_or_default()
}

/// A string of a task's metadata.
pub fn task_meta(task: &Task, key: &str) -> Option<String> {
    task.metadata.as_ref().and_then(|m| m.get(key)).and_then(|v| match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    })
}

/// §3.3.2 validation, and ContentTypeNotSupported for parts troupe cannot read.
fn validate(message: &Message, config: Option<&SendMessageConfiguration>) -> Result<(), A2AError> {
    if message.message_id.trim().is_empty() {
        return Err(A2AError::invalid_params("message.messageId is required"));
    }
    if message.parts.is_empty() {
        return Err(A2AError::invalid_params("message.parts must hold at least one part"));
    }
    if message.role == Role::Agent {
        return Err(A2AError::invalid_params("a client's message has role ROLE_USER"));
    }
    for part in &message.parts {
        let media = part.media_type.as_deref().unwrap_or("");
        let readable = matches!(part.content, PartContent::Text(_) | PartContent::Data(_));
        if !readable || !(media.is_empty() || ACCEPTED.contains(&media)) {
            let what = if media.is_empty() { "a file part".to_string() } else { format!("`{media}`") };
            let mut e = A2AError::content_type_not_supported();
            e.message = format!("troupe reads text and JSON parts, not {what}");
            return Err(e);
        }
    }
    if let Some(modes) = config.and_then(|c| c.accepted_output_modes.as_ref()).filter(|m| !m.is_empty())
        && !modes.iter().any(|m| ACCEPTED.contains(&m.as_str()) || m == "*/*" || m == "text/*")
    {
        let mut e = A2AError::content_type_not_supported();
        e.message = format!("troupe answers in text/plain and application/json, none of {}", modes.join(", "));
        return Err(e);
    }
    Ok(())
}

impl A2a {
    /// SendMessage's work: a new task for a new message, or the follow-up of an
    /// existing one. Returns the task and the id of the event of its snapshot.
    pub async fn accept(&self, req: SendMessageRequest) -> Result<(Task, i64), A2AError> {
        let SendMessageRequest { mut message, configuration, metadata, .. } = req;
        validate(&message, configuration.as_ref())?;
        if let Some(target) = configuration.as_ref().and_then(|c| c.task_push_notification_config.as_ref()) {
            push::check_target(target)?;
        }
        let task = match message.task_id.clone().filter(|t| !t.is_empty()) {
            Some(id) => {
                let (task, _) = self.load(&id).await?;
                if message.context_id.as_ref().is_some_and(|c| !c.is_empty() && *c != task.context_id) {
                    return Err(A2AError::invalid_params(format!(
                        "contextId does not match task {id}'s context ({})",
                        task.context_id
                    )));
                }
                if task.status.state.is_terminal() {
                    return Err(A2AError::unsupported_operation(format!(
                        "task {id} is {}: a finished task takes no more messages (start a new task)",
                        state_name(&task.status.state)
                    )));
                }
                message.context_id = Some(task.context_id.clone());
                self.follow_up(task, message).await?
            }
            None => self.start(message, metadata).await?,
        };
        if let Some(mut target) = configuration.and_then(|c| c.task_push_notification_config) {
            target.task_id = task.id.clone();
            target.id = target.id.filter(|i| !i.is_empty()).or_else(|| Some(new_message_id()));
            let stored = push::stored(&target)?;
            blocking(&self.store, move |s| s.save_a2a_push(stored)).await?;
        }
        self.load(&task.id).await
    }

    /// A new task for `message`, started by its skill.
    async fn start(&self, mut message: Message, request: Option<HashMap<String, Value>>) -> Result<Task, A2AError> {
        let skill = meta_str(&message, request.as_ref(), keys::SKILL).ok_or_else(|| {
            A2AError::invalid_params(format!(
                "say what you ask of the team: set metadata `{}` to one of {} (see the agent card's skills)",
                keys::SKILL,
                SKILLS.join(", ")
            ))
        })?;
        // Arguments are checked before anything is created.
        let plan = match skill.as_str() {
            RUN_FEATURE => Plan::Run(run::Args::parse(&message, request.as_ref())?),
            POST_TASK => Plan::Board(board::Args::parse(&message, request.as_ref())?),
            MESSAGE_TEAMMATE => Plan::Message(message::Args::parse(&message, request.as_ref())?),
            other => {
                return Err(A2AError::invalid_params(format!(
                    "unknown skill `{other}` in `{}`: troupe's skills are {}",
                    keys::SKILL,
                    SKILLS.join(", ")
                )));
            }
        };
        let id = new_task_id();
        let context_id = message.context_id.clone().filter(|c| !c.is_empty()).unwrap_or_else(new_context_id);
        message.task_id = Some(id.clone());
        message.context_id = Some(context_id.clone());
        let mut task = Task {
            id,
            context_id,
            status: TaskStatus { state: TaskState::Submitted, message: None, timestamp: Some(chrono::Utc::now()) },
            artifacts: None,
            history: Some(vec![message]),
            metadata: Some(HashMap::from([(keys::SKILL.to_string(), Value::String(skill))])),
        };
        match &plan {
            Plan::Run(args) => args.describe(&mut task),
            Plan::Board(args) => args.describe(&mut task),
            Plan::Message(args) => args.describe(&mut task),
        }
        let (task, after) = self.create(task).await?;
        match plan {
            Plan::Run(args) => self.start_run(task, args).await,
            Plan::Board(args) => self.start_board(task, args, after).await,
            Plan::Message(args) => self.start_message(task, args, after).await,
        }
    }

    /// A message for an existing, unfinished task.
    async fn follow_up(&self, task: Task, message: Message) -> Result<Task, A2AError> {
        let id = task.id.clone();
        let recorded = message.clone();
        self.change(&id, move |t| {
            t.history.get_or_insert_with(Vec::new).push(recorded);
            vec![]
        })
        .await?;
        match skill_of(&task).as_str() {
            MESSAGE_TEAMMATE => self.message_follow_up(task, message).await,
            skill => Err(A2AError::unsupported_operation(format!(
                "a {skill} task takes no follow-up messages: {}",
                match skill {
                    RUN_FEATURE => "the run goes on by itself; cancel it with CancelTask",
                    _ => "its board task is worked on by the team; follow it with GetTask or SubscribeToTask",
                }
            ))),
        }
    }

    /// CancelTask's work, by skill.
    pub async fn cancel(&self, task: Task) -> Result<Task, A2AError> {
        match skill_of(&task).as_str() {
            RUN_FEATURE => self.cancel_run(task).await,
            MESSAGE_TEAMMATE => self.cancel_message(task).await,
            _ => {
                let board = task_meta(&task, keys::BOARD_TASK).unwrap_or_default();
                let mut e = A2AError::task_not_cancelable(&task.id);
                e.message = format!(
                    "task {} follows board task {board}, which stays on the board: tasks are released or completed, never withdrawn",
                    task.id
                );
                Err(e)
            }
        }
    }
}

enum Plan {
    Run(run::Args),
    Board(board::Args),
    Message(message::Args),
}

/// Pick up the tasks a previous server left unfinished: board and mailbox
/// tasks are followed again from their last change (the event log has
/// everything since); a run this process did not start cannot be followed, so
/// its task fails with a hint to look at the feature.
pub fn resume(a2a: &std::sync::Arc<A2a>) {
    let a2a = a2a.clone();
    tokio::spawn(async move {
        let mut before = None;
        loop {
            let filter = troupe_store::A2aTaskFilter { before, limit: 200, ..Default::default() };
            let Ok(page) = blocking(&a2a.store, move |s| s.a2a_tasks(&filter)).await else { return };
            let Some(last) = page.tasks.last() else { return };
            before = Some((last.updated_at, last.seq));
            for stored in &page.tasks {
                let Ok(task) = document(stored) else { continue };
                if task.status.state.is_terminal() {
                    continue;
                }
                let after = stored.last_event;
                match skill_of(&task).as_str() {
                    POST_TASK => a2a.watch_board(task, after),
                    MESSAGE_TEAMMATE => a2a.watch_message(task, after),
                    _ if task_meta(&task, keys::PID)
                        .and_then(|p| p.parse().ok())
                        .is_some_and(troupe_store::pid::pid_alive) => {}
                    _ => {
                        let feature = task_meta(&task, keys::FEATURE).unwrap_or_default();
                        let note = format!(
                            "troupe serve stopped while this run was going; its Lead may still be running: see `troupe status {feature}`"
                        );
                        let _ = a2a.change(&task.id, |t| vec![set_status(t, TaskState::Failed, note)]).await;
                    }
                }
            }
        }
    });
}
