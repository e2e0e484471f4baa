//! Agents (the registry, their status, the stale ones), a teammate's
//! normalised log (paged), and messages (send, inbox, threads).

use std::io::BufRead;

use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use troupe_store::{MessageKind, NewMessage};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::ids::agent_id;
use crate::caller::Caller;
use crate::error::{ApiError, ApiJson, ApiPath, ApiQuery, ApiResult, ErrorBody};
use crate::state::AppState;

/// The routes of agents and messages.
pub(crate) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(agents))
        .routes(routes!(stale))
        .routes(routes!(agent))
        .routes(routes!(log))
        .routes(routes!(inbox))
        .routes(routes!(send))
        .routes(routes!(thread))
}

/// An agent of the registry.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Agent {
    /// Its id (`$TROUPE_AGENT_ID`).
    pub id: String,
    /// A human-readable name.
    pub name: String,
    /// Its role.
    pub role: String,
    /// The engine running it.
    pub engine: String,
    /// The model, when known.
    pub model: Option<String>,
    /// The feature it works on.
    pub feature: Option<String>,
    /// The task it works on.
    pub task: Option<String>,
    /// Its process id.
    pub pid: Option<u32>,
    /// `ready`, `processing`, `waiting`, `done`, `shutting_down`, `failed` or `interrupted`.
    pub status: String,
    /// RFC 3339.
    #[schema(value_type = String, format = DateTime)]
    pub started_at: jiff::Timestamp,
    /// RFC 3339: when it last reported anything.
    #[schema(value_type = String, format = DateTime)]
    pub last_event_at: jiff::Timestamp,
}

impl From<troupe_store::Agent> for Agent {
    fn from(a: troupe_store::Agent) -> Self {
        Agent {
            id: a.id,
            name: a.name,
            role: a.role,
            engine: a.engine,
            model: a.model,
            feature: a.feature,
            task: a.task,
            pid: a.pid,
            status: a.status.to_string(),
            started_at: a.started_at,
            last_event_at: a.last_event_at,
        }
    }
}

/// Agents, oldest first.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct AgentList {
    /// The agents.
    pub agents: Vec<Agent>,
}

/// Every registered agent.
#[utoipa::path(get, path = "/agents", tag = "agents", responses((status = 200, body = AgentList)))]
async fn agents(state: axum::extract::State<AppState>) -> ApiResult<ApiJson<AgentList>> {
    let agents = state.with_store(|s| Ok(s.agents()?)).await?;
    Ok(ApiJson(AgentList { agents: agents.into_iter().map(Agent::from).collect() }))
}

/// An agent whose process is gone while its status says it is not finished.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Stale {
    /// The agent.
    pub agent: Agent,
    /// Tasks it still holds, which nobody will complete.
    pub held_tasks: Vec<String>,
}

/// Stale agents and the tasks they hold (release them to recover).
#[utoipa::path(get, path = "/agents/stale", tag = "agents", responses((status = 200, body = Vec<Stale>)))]
async fn stale(state: axum::extract::State<AppState>) -> ApiResult<ApiJson<Vec<Stale>>> {
    let stale = state.with_store(|s| Ok(s.stale_agents()?)).await?;
    Ok(ApiJson(stale.into_iter().map(|s| Stale { agent: s.agent.into(), held_tasks: s.held_tasks }).collect()))
}

/// One agent.
#[utoipa::path(get, path = "/agents/{id}", tag = "agents", params(("id" = String, Path, description = "The agent id")),
    responses((status = 200, body = Agent), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn agent(state: axum::extract::State<AppState>, ApiPath(id): ApiPath<String>) -> ApiResult<ApiJson<Agent>> {
    agent_id(&id)?;
    let agent = state.with_store(move |s| Ok(s.agent(&id)?)).await?;
    Ok(ApiJson(agent.into()))
}

/// A page of a log.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct Page {
    /// The first record (0-based).
    #[serde(default)]
    pub offset: usize,
    /// At most this many records (default 200, at most 1000).
    pub limit: Option<usize>,
}

/// Records of a teammate's normalised log.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct LogPage {
    /// The records, as troupe wrote them (`seq`, `ts`, `agent`, `kind`, …).
    #[schema(value_type = Vec<Object>)]
    pub records: Vec<serde_json::Value>,
    /// The offset of the next page, when there is more.
    pub next: Option<usize>,
}

/// A teammate's normalised log (`.troupe/state/logs/<id>.jsonl`), paged.
#[utoipa::path(get, path = "/agents/{id}/log", tag = "agents", params(("id" = String, Path, description = "The agent id"), Page),
    responses((status = 200, body = LogPage), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn log(
    state: axum::extract::State<AppState>,
    ApiPath(id): ApiPath<String>,
    ApiQuery(page): ApiQuery<Page>,
) -> ApiResult<ApiJson<LogPage>> {
    agent_id(&id)?;
    let limit = page.limit.unwrap_or(200).clamp(1, 1000);
    let path = state.layout().logs_dir().join(format!("{id}.jsonl"));
    let read = tokio::task::spawn_blocking(move || -> ApiResult<LogPage> {
        let file = match std::fs::File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(ApiError::not_found(format!("agent `{id}` has no log")));
            }
            Err(e) => return Err(ApiError::internal(format!("{}: {e}", path.display()))),
        };
        let mut lines = std::io::BufReader::new(file).lines().skip(page.offset);
        let mut records = Vec::new();
        for line in lines.by_ref().take(limit) {
            let line = line.map_err(|e| ApiError::internal(format!("{}: {e}", path.display())))?;
            // A line cut short by a crash is shown as text, not dropped.
            records.push(serde_json::from_str(&line).unwrap_or(serde_json::Value::String(line)));
        }
        let next = lines.next().is_some().then_some(page.offset + records.len());
        Ok(LogPage { records, next })
    });
    read.await.map_err(|e| ApiError::internal(format!("log reader failed: {e}")))?.map(ApiJson)
}

/// A message as its recipient sees it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Message {
    /// Its id.
    pub id: i64,
    /// The sender.
    pub from: String,
    /// The recipient.
    pub to: String,
    /// Sent to everyone.
    pub broadcast: bool,
    /// 1 (lowest) to 5 (highest).
    pub priority: u8,
    /// `text`, `plan`, `plan_decision`, `shutdown_request`, …
    pub kind: String,
    /// The text.
    pub body: String,
    /// The message it answers.
    pub in_reply_to: Option<i64>,
    /// The first message of its thread.
    pub thread: i64,
    /// RFC 3339.
    #[schema(value_type = String, format = DateTime)]
    pub created_at: jiff::Timestamp,
    /// RFC 3339, once listed in the recipient's inbox.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub delivered_at: Option<jiff::Timestamp>,
    /// RFC 3339, once read.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub read_at: Option<jiff::Timestamp>,
}

impl From<troupe_store::Message> for Message {
    fn from(m: troupe_store::Message) -> Self {
        Message {
            id: m.id,
            from: m.from,
            to: m.to,
            broadcast: m.broadcast,
            priority: m.priority,
            kind: m.kind.as_str().to_string(),
            body: m.body,
            in_reply_to: m.in_reply_to,
            thread: m.thread,
            created_at: m.created_at,
            delivered_at: m.delivered_at,
            read_at: m.read_at,
        }
    }
}

/// Messages.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct MessageList {
    /// The messages.
    pub messages: Vec<Message>,
}

fn messages(list: Vec<troupe_store::Message>) -> MessageList {
    MessageList { messages: list.into_iter().map(Message::from).collect() }
}

/// Which messages of an inbox.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct InboxQuery {
    /// Only unread messages.
    #[serde(default)]
    pub unread: bool,
}

/// An agent's inbox, highest priority first, then oldest; listing marks the messages delivered.
#[utoipa::path(get, path = "/agents/{id}/inbox", tag = "messages", params(("id" = String, Path, description = "The agent id"), InboxQuery),
    responses((status = 200, body = MessageList), (status = 403, body = ErrorBody), (status = 400, body = ErrorBody)))]
async fn inbox(
    state: axum::extract::State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<InboxQuery>,
) -> ApiResult<ApiJson<MessageList>> {
    agent_id(&id)?;
    // Listing marks messages delivered: only their recipient (or a person) may.
    caller.act_as(&id)?;
    let list = state.with_store(move |s| Ok(s.inbox(&id, q.unread)?)).await?;
    Ok(ApiJson(messages(list)))
}

/// A message to send.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SendBody {
    /// The sender (default `api`).
    pub from: Option<String>,
    /// An agent id, or `*` for every agent.
    pub to: String,
    /// The text.
    pub body: String,
    /// `text` (default), `plan`, `plan_decision`, `shutdown_request`, …
    pub kind: Option<String>,
    /// 1 (lowest) to 5 (highest); default 3.
    pub priority: Option<u8>,
    /// The message this answers.
    pub in_reply_to: Option<i64>,
}

/// Send a message; a broadcast (`to: "*"`) gives one message per recipient.
#[utoipa::path(post, path = "/messages", tag = "messages", request_body = SendBody,
    responses((status = 201, body = MessageList), (status = 403, body = ErrorBody), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn send(
    state: axum::extract::State<AppState>,
    caller: Caller,
    ApiJson(b): ApiJson<SendBody>,
) -> ApiResult<(StatusCode, ApiJson<MessageList>)> {
    let from = caller.actor(b.from, super::API_ACTOR)?;
    agent_id(&from)?;
    if b.to != troupe_store::BROADCAST {
        agent_id(&b.to)?;
    }
    let kind = match b.kind.as_deref() {
        None => MessageKind::Text,
        Some(k) => {
            k.parse().map_err(|e: troupe_store::message::UnknownMessageKind| ApiError::bad_request(e.to_string()))?
        }
    };
    if kind == MessageKind::PlanDecision {
        caller.person("decide a plan")?;
    }
    let mut message = NewMessage::text(from, b.to, b.body);
    message.kind = kind;
    message.in_reply_to = b.in_reply_to;
    if let Some(p) = b.priority {
        message.priority = p;
    }
    let sent = state.with_store(move |s| Ok(s.send(message)?)).await?;
    Ok((StatusCode::CREATED, ApiJson(messages(sent))))
}

/// The whole thread a message belongs to, oldest first.
#[utoipa::path(get, path = "/messages/{id}/thread", tag = "messages", params(("id" = i64, Path, description = "Any message of the thread")),
    responses((status = 200, body = MessageList), (status = 404, body = ErrorBody)))]
async fn thread(state: axum::extract::State<AppState>, ApiPath(id): ApiPath<i64>) -> ApiResult<ApiJson<MessageList>> {
    let list = state.with_store(move |s| Ok(s.thread(id)?)).await?;
    Ok(ApiJson(messages(list)))
}
