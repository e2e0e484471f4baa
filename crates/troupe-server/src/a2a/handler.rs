//! The A2A operations (§3.1) on troupe: what the SDK's bindings call.

use a2a::*;
use a2a_server::{RequestHandler, ServiceParams};
use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::BoxStream;
use troupe_store::A2aTaskFilter;

use super::follow::task_stream;
use super::tasks::{blocking, document, settles, shown, state_of};
use super::{A2a, check_version, push};

/// ListTasks' page size when the client names none, and the most it may ask for.
pub const DEFAULT_PAGE_SIZE: i32 = 50;
/// The largest page ListTasks returns.
pub const MAX_PAGE_SIZE: i32 = 100;

#[async_trait]
impl RequestHandler for A2a {
    async fn send_message(
        &self,
        params: &ServiceParams,
        req: SendMessageRequest,
    ) -> Result<SendMessageResponse, A2AError> {
        check_version(params)?;
        let (immediately, history) = req
            .configuration
            .as_ref()
            .map_or((false, None), |c| (c.return_immediately.unwrap_or(false), c.history_length));
        let (task, after) = self.accept(req).await?;
        let task = if immediately || settles(&task.status.state) {
            task
        } else {
            // Blocking (the default, §3.2.2): wait for a terminal or interrupted state.
            let mut changes = task_stream(&self.state, task.clone(), after);
            while let Some(event) = changes.next().await {
                if event?.is_settling() {
                    break;
                }
            }
            self.load(&task.id).await?.0
        };
        Ok(SendMessageResponse::Task(shown(task, history, true)?))
    }

    async fn send_streaming_message(
        &self,
        params: &ServiceParams,
        req: SendMessageRequest,
    ) -> Result<BoxStream<'static, Result<StreamResponse, A2AError>>, A2AError> {
        check_version(params)?;
        let (task, after) = self.accept(req).await?;
        Ok(task_stream(&self.state, task, after))
    }

    async fn get_task(&self, params: &ServiceParams, req: GetTaskRequest) -> Result<Task, A2AError> {
        check_version(params)?;
        let (task, _) = self.load(&req.id).await?;
        shown(task, req.history_length, true)
    }

    async fn list_tasks(&self, params: &ServiceParams, req: ListTasksRequest) -> Result<ListTasksResponse, A2AError> {
        check_version(params)?;
        let size = req.page_size.unwrap_or(DEFAULT_PAGE_SIZE);
        if !(1..=MAX_PAGE_SIZE).contains(&size) {
            return Err(A2AError::invalid_params(format!("pageSize must be between 1 and {MAX_PAGE_SIZE}")));
        }
        let before = match req.page_token.as_deref().filter(|t| !t.is_empty()) {
            Some(token) => Some(parse_page_token(token)?),
            None => None,
        };
        let state = match req.status {
            Some(TaskState::Unspecified) | None => None,
            Some(s) => serde_json::to_value(&s).ok().and_then(|v| v.as_str().map(str::to_string)),
        };
        let updated_after = req
            .status_timestamp_after
            .map(|t| jiff::Timestamp::from_microsecond(t.timestamp_micros()))
            .transpose()
            .map_err(|_| A2AError::invalid_params("statusTimestampAfter is out of range"))?;
        let filter = A2aTaskFilter {
            context_id: req.context_id.clone().filter(|c| !c.is_empty()),
            state,
            updated_after,
            before,
            // One more than asked tells whether another page follows.
            limit: size as u32 + 1,
        };
        let mut page = blocking(&self.store, move |s| s.a2a_tasks(&filter)).await?;
        let more = page.tasks.len() > size as usize;
        page.tasks.truncate(size as usize);
        let next_page_token = match (more, page.tasks.last()) {
            (true, Some(last)) => format!("{}.{}", last.updated_at.as_microsecond(), last.seq),
            _ => String::new(),
        };
        let artifacts = req.include_artifacts.unwrap_or(false);
        let tasks = page
            .tasks
            .iter()
            .map(|t| document(t).and_then(|t| shown(t, req.history_length, artifacts)))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ListTasksResponse { tasks, next_page_token, page_size: size, total_size: page.total as i32 })
    }

    async fn cancel_task(&self, params: &ServiceParams, req: CancelTaskRequest) -> Result<Task, A2AError> {
        check_version(params)?;
        let (task, _) = self.load(&req.id).await?;
        if task.status.state.is_terminal() {
            return Err(A2AError::task_not_cancelable(&req.id));
        }
        self.cancel(task).await
    }

    async fn subscribe_to_task(
        &self,
        params: &ServiceParams,
        req: SubscribeToTaskRequest,
    ) -> Result<BoxStream<'static, Result<StreamResponse, A2AError>>, A2AError> {
        check_version(params)?;
        let (task, after) = self.load(&req.id).await?;
        if task.status.state.is_terminal() {
            return Err(A2AError::unsupported_operation(format!(
                "task {} is {}: a finished task has no updates to subscribe to (use GetTask)",
                task.id,
                state_name(&task.status.state)
            )));
        }
        Ok(task_stream(&self.state, task, after))
    }

    async fn create_push_config(
        &self,
        params: &ServiceParams,
        mut req: TaskPushNotificationConfig,
    ) -> Result<TaskPushNotificationConfig, A2AError> {
        check_version(params)?;
        self.load(&req.task_id).await?;
        push::check_target(&req)?;
        if req.id.as_deref().is_none_or(str::is_empty) {
            req.id = Some(new_message_id());
        }
        let stored = push::stored(&req)?;
        blocking(&self.store, move |s| s.save_a2a_push(stored)).await?;
        Ok(req)
    }

    async fn get_push_config(
        &self,
        params: &ServiceParams,
        req: GetTaskPushNotificationConfigRequest,
    ) -> Result<TaskPushNotificationConfig, A2AError> {
        check_version(params)?;
        let task = req.task_id.clone();
        let all = blocking(&self.store, move |s| s.a2a_pushes(&task)).await?;
        let found = all.into_iter().find(|c| c.id == req.id);
        // §3.1.8: a configuration that does not exist is TaskNotFoundError.
        let found = found.ok_or_else(|| {
            A2AError::task_not_found(&req.task_id)
                .with_message(format!("task {} has no push notification config `{}`", req.task_id, req.id))
        })?;
        push::config_of(found)
    }

    async fn list_push_configs(
        &self,
        params: &ServiceParams,
        req: ListTaskPushNotificationConfigsRequest,
    ) -> Result<ListTaskPushNotificationConfigsResponse, A2AError> {
        check_version(params)?;
        let task = req.task_id.clone();
        let all = blocking(&self.store, move |s| s.a2a_pushes(&task)).await?;
        let configs = all.into_iter().map(push::config_of).collect::<Result<Vec<_>, _>>()?;
        Ok(ListTaskPushNotificationConfigsResponse { configs, next_page_token: Some(String::new()) })
    }

    async fn delete_push_config(
        &self,
        params: &ServiceParams,
        req: DeleteTaskPushNotificationConfigRequest,
    ) -> Result<(), A2AError> {
        check_version(params)?;
        // Idempotent (§3.1.10): deleting what is not there is not an error.
        blocking(&self.store, move |s| s.delete_a2a_push(&req.task_id, &req.id)).await?;
        Ok(())
    }

    async fn get_extended_agent_card(
        &self,
        params: &ServiceParams,
        _req: GetExtendedAgentCardRequest,
    ) -> Result<AgentCard, A2AError> {
        check_version(params)?;
        if !self.authenticated {
            return Err(A2AError::unsupported_operation(
                "the extended agent card is served only when troupe serve requires a token (TROUPE_TOKEN)",
            ));
        }
        let host = params.get("host").and_then(|h| h.first()).cloned().unwrap_or_else(|| "127.0.0.1".into());
        let agents = blocking(&self.store, |s| s.agents()).await?;
        Ok(super::card::card(self.authenticated, &host, Some(agents)))
    }
}

trait Settling {
    fn is_settling(&self) -> bool;
}

impl Settling for StreamResponse {
    fn is_settling(&self) -> bool {
        state_of(self).is_some_and(settles)
    }
}

trait WithMessage {
    fn with_message(self, message: String) -> Self;
}

impl WithMessage for A2AError {
    fn with_message(mut self, message: String) -> Self {
        self.message = message;
        self
    }
}

/// A state as the wire names it.
pub fn state_name(state: &TaskState) -> String {
    serde_json::to_value(state).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
}

/// A page token as ListTasks hands it out: `<updated µs>.<seq>` of the last task shown.
fn parse_page_token(token: &str) -> Result<(jiff::Timestamp, i64), A2AError> {
    let bad = || A2AError::invalid_params(format!("pageToken `{token}` is not one ListTasks returned"));
    let (at, seq) = token.split_once('.').ok_or_else(bad)?;
    let at = at.parse::<i64>().ok().and_then(|us| jiff::Timestamp::from_microsecond(us).ok()).ok_or_else(bad)?;
    Ok((at, seq.parse().map_err(|_| bad())?))
}
