//! A2A task documents in the store: loading, the one path every change takes
//! (lock, load, change, save with its event, push), and what a client is shown
//! (history length, artifacts or not).

use std::sync::Arc;

use a2a::{
    A2AError, Artifact, Message, Part, Role, StreamResponse, Task, TaskArtifactUpdateEvent, TaskState, TaskStatus,
    TaskStatusUpdateEvent,
};
use chrono::Utc;
use troupe_store::{A2aTask, A2aTaskUpdate, Store, StoreError};

use super::A2a;

/// Run `f` on the store off the async runtime's threads.
pub async fn blocking<T: Send + 'static>(
    store: &Arc<dyn Store>,
    f: impl FnOnce(&dyn Store) -> troupe_store::Result<T> + Send + 'static,
) -> Result<T, A2AError> {
    let store = store.clone();
    tokio::task::spawn_blocking(move || f(store.as_ref()))
        .await
        .map_err(|e| internal("a store call did not finish", &e))?
        .map_err(store_error)
}

/// A store error as the client sees it: refusals say what was refused; failures
/// of the database are logged and reported without detail (no paths leak).
pub fn store_error(e: StoreError) -> A2AError {
    match e {
        StoreError::A2aTaskNotFound(id) => A2AError::task_not_found(&id),
        e if e.is_refusal() => A2AError::invalid_params(e.to_string()),
        e => internal("the store failed", &e),
    }
}

/// An internal error: the cause goes to the log, the client gets `what`.
pub fn internal(what: &str, cause: &dyn std::fmt::Display) -> A2AError {
    tracing::error!(error = %cause, "{what}");
    A2AError::internal(what)
}

/// The task document of a stored task.
pub fn document(stored: &A2aTask) -> Result<Task, A2AError> {
    serde_json::from_value(stored.body.clone()).map_err(|e| internal("a stored A2A task is unreadable", &e))
}

/// A message from troupe (the agent side) with one text part.
pub fn agent_message(task: &Task, text: impl Into<String>) -> Message {
    let mut m = Message::new(Role::Agent, vec![Part::text(text)]);
    m.task_id = Some(task.id.clone());
    m.context_id = Some(task.context_id.clone());
    m
}

/// Move `task` to `state` with a status message, and say so as a stream event.
pub fn set_status(task: &mut Task, state: TaskState, text: impl Into<String>) -> StreamResponse {
    let message = agent_message(task, text);
    task.history.get_or_insert_with(Vec::new).push(message.clone());
    task.status = TaskStatus { state, message: Some(message), timestamp: Some(Utc::now()) };
    StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
        task_id: task.id.clone(),
        context_id: task.context_id.clone(),
        status: task.status.clone(),
        metadata: None,
    })
}

/// Add (or replace, by name) an artifact of `task`, and say so as a stream event.
pub fn set_artifact(task: &mut Task, name: &str, description: &str, parts: Vec<Part>) -> StreamResponse {
    let artifacts = task.artifacts.get_or_insert_with(Vec::new);
    let id = artifacts
        .iter()
        .find(|a| a.name.as_deref() == Some(name))
        .map(|a| a.artifact_id.clone())
        .unwrap_or_else(|| format!("{}-{name}", task.id));
    artifacts.retain(|a| a.artifact_id != id);
    let artifact = Artifact {
        artifact_id: id,
        name: Some(name.into()),
        description: Some(description.into()),
        parts,
        metadata: None,
        extensions: None,
    };
    artifacts.push(artifact.clone());
    StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
        task_id: task.id.clone(),
        context_id: task.context_id.clone(),
        artifact,
        append: Some(false),
        last_chunk: Some(true),
        metadata: None,
    })
}

/// The state a stream event leaves its task in, when it says.
pub fn state_of(event: &StreamResponse) -> Option<&TaskState> {
    match event {
        StreamResponse::Task(t) => Some(&t.status.state),
        StreamResponse::StatusUpdate(s) => Some(&s.status.state),
        _ => None,
    }
}

/// True for the states a blocking SendMessage returns at (§3.2.2): terminal or interrupted.
pub fn settles(state: &TaskState) -> bool {
    state.is_terminal() || matches!(state, TaskState::InputRequired | TaskState::AuthRequired)
}

/// `task` as a client asked to see it: at most `history` recent messages (§3.2.4),
/// artifacts only when wanted.
pub fn shown(mut task: Task, history: Option<i32>, artifacts: bool) -> Result<Task, A2AError> {
    match history {
        Some(n) if n < 0 => return Err(A2AError::invalid_params("historyLength must not be negative")),
        Some(0) => task.history = None,
        Some(n) => {
            if let Some(h) = task.history.as_mut() {
                let keep = n as usize;
                if h.len() > keep {
                    h.drain(..h.len() - keep);
                }
            }
        }
        None => {}
    }
    if !artifacts {
        task.artifacts = None;
    }
    Ok(task)
}

impl A2a {
    /// The task `id` with the id of the event of its last change.
    pub async fn load(&self, id: &str) -> Result<(Task, i64), A2AError> {
        let key = id.to_string();
        let stored = blocking(&self.store, move |s| s.a2a_task(&key)).await?;
        let stored = stored.ok_or_else(|| A2AError::task_not_found(id))?;
        Ok((document(&stored)?, stored.last_event))
    }

    /// Save a new task (its first event is the task itself).
    pub async fn create(&self, task: Task) -> Result<(Task, i64), A2AError> {
        let event = StreamResponse::Task(task.clone());
        self.save(&task, &event).await
    }

    /// Change task `id` by `f`, which returns the stream events its change
    /// makes (none: nothing changed, nothing is saved). Changes of one task
    /// happen one at a time; each event is saved, then pushed, in order.
    pub async fn change(&self, id: &str, f: impl FnOnce(&mut Task) -> Vec<StreamResponse>) -> Result<Task, A2AError> {
        let lock = self.lock(id);
        let _held = lock.lock().await;
        let (mut task, _) = self.load(id).await?;
        let events = f(&mut task);
        for event in &events {
            self.save(&task, event).await?;
        }
        if task.status.state.is_terminal() {
            self.locks.lock().unwrap_or_else(|p| p.into_inner()).remove(id);
        }
        Ok(task)
    }

    async fn save(&self, task: &Task, event: &StreamResponse) -> Result<(Task, i64), A2AError> {
        let body = serde_json::to_value(task).map_err(|e| internal("cannot encode a task", &e))?;
        let update = A2aTaskUpdate {
            id: task.id.clone(),
            context_id: task.context_id.clone(),
            state: serde_json::to_value(&task.status.state)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            body,
            event: serde_json::to_value(event).map_err(|e| internal("cannot encode a task event", &e))?,
        };
        let stored = blocking(&self.store, move |s| s.save_a2a_task(update)).await?;
        // Followers in this process need not wait for the next poll.
        self.state.events().poke();
        self.deliver(&task.id, event).await;
        Ok((task.clone(), stored.last_event))
    }

    fn lock(&self, id: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.locks.lock().unwrap_or_else(|p| p.into_inner()).entry(id.to_string()).or_default().clone()
    }
}
