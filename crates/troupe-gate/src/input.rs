//! The event JSON an engine sends on stdin, parsed into one shape for all
//! engines. Unknown fields are ignored (engines add fields often); a field troupe
//! reads that has the wrong type is an error, so nothing is guessed.

use std::path::PathBuf;

use serde_json::{Map, Value};

use crate::engine::{Engine, Event};

/// One hook call, normalised.
#[derive(Debug, Clone, PartialEq)]
pub struct HookInput {
    /// The engine that called.
    pub engine: Engine,
    /// The event.
    pub event: Event,
    /// The engine's session id (`session_id`).
    pub session_id: Option<String>,
    /// The folder the agent works in (`cwd`).
    pub cwd: Option<PathBuf>,
    /// The tool, for tool events.
    pub tool_name: Option<String>,
    /// The tool's arguments (`Null` when absent).
    pub tool_input: Value,
    /// What the tool returned, for PostToolUse (`Null` when absent); for a
    /// failed call (Claude's PostToolUseFailure) its `error`.
    pub tool_response: Value,
    /// True when the tool call failed (Claude's PostToolUseFailure): what it
    /// would have done (a skill it would have loaded) did not happen.
    pub tool_failed: bool,
    /// The tool call's id (`tool_use_id`, or the OpenCode bridge's `call_id`).
    pub tool_use_id: Option<String>,
    /// The user's prompt, for UserPromptSubmit.
    pub prompt: Option<String>,
    /// True when the agent is already continuing because of a Stop hook.
    pub stop_hook_active: bool,
    /// The task, for TaskCompleted.
    pub task_id: Option<String>,
    /// The task's subject, for TaskCompleted.
    pub task_subject: Option<String>,
    /// The teammate, for TaskCompleted and TeammateIdle.
    pub teammate_name: Option<String>,
}

/// Why the input could not be used. Each names what it checked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    /// stdin was not JSON.
    #[error("the hook input on stdin is not JSON ({0})")]
    NotJson(String),
    /// stdin was JSON but not an object.
    #[error("the hook input on stdin is JSON but not an object")]
    NotObject,
    /// A field had the wrong type.
    #[error("the hook input field '{field}' should be {expected}")]
    FieldType {
        /// The field.
        field: &'static str,
        /// What it should be.
        expected: &'static str,
    },
    /// The input says it is another event than the command line.
    #[error("the hook was installed for {arg} but received a {given} event")]
    EventMismatch {
        /// The event on the command line.
        arg: String,
        /// `hook_event_name` in the input.
        given: String,
    },
}

/// Claude Code's event after a tool call that failed (a shell command that
/// exited non-zero), which troupe handles as PostToolUse.
pub const FAILURE: &str = "PostToolUseFailure";

/// Parse the bytes an engine wrote on stdin for `event`.
pub fn parse(engine: Engine, event: Event, bytes: &[u8]) -> Result<HookInput, InputError> {
    let value: Value = serde_json::from_slice(bytes).map_err(|e| InputError::NotJson(e.to_string()))?;
    let Value::Object(map) = value else { return Err(InputError::NotObject) };
    let given_event = string(&map, "hook_event_name")?;
    let tool_failed = given_event.as_deref() == Some(FAILURE);
    if let Some(given) = given_event {
        let same = Event::parse(engine, &given).map(|e| e == event).unwrap_or(false)
            || (event == Event::SubagentStop && given == "SubagentStop");
        if !same {
            return Err(InputError::EventMismatch { arg: event.engine_name(engine).into(), given });
        }
    }
    Ok(HookInput {
        engine,
        event,
        session_id: string(&map, "session_id")?.or(string(&map, "sessionID")?),
        cwd: string(&map, "cwd")?.map(PathBuf::from),
        tool_name: string(&map, "tool_name")?,
        tool_input: map.get("tool_input").cloned().unwrap_or(Value::Null),
        tool_response: map.get("tool_response").or_else(|| map.get("error")).cloned().unwrap_or(Value::Null),
        tool_failed,
        tool_use_id: string(&map, "tool_use_id")?.or(string(&map, "call_id")?),
        prompt: string(&map, "prompt")?,
        stop_hook_active: match map.get("stop_hook_active") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err(InputError::FieldType { field: "stop_hook_active", expected: "true or false" }),
        },
        task_id: string(&map, "task_id")?,
        task_subject: string(&map, "task_subject")?,
        teammate_name: string(&map, "teammate_name")?,
    })
}

fn string(map: &Map<String, Value>, field: &'static str) -> Result<Option<String>, InputError> {
    match map.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(InputError::FieldType { field, expected: "a string" }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_check() {
        assert!(matches!(parse(Engine::Claude, Event::Stop, b"{"), Err(InputError::NotJson(_))));
        assert_eq!(parse(Engine::Claude, Event::Stop, b"[1]"), Err(InputError::NotObject));
        assert_eq!(
            parse(Engine::Claude, Event::Stop, br#"{"session_id":3}"#),
            Err(InputError::FieldType { field: "session_id", expected: "a string" })
        );
        let err = parse(Engine::Claude, Event::Stop, br#"{"hook_event_name":"PreToolUse"}"#).unwrap_err();
        assert_eq!(err.to_string(), "the hook was installed for Stop but received a PreToolUse event");
        let ok = parse(Engine::Gemini, Event::PreToolUse, br#"{"hook_event_name":"BeforeTool","session_id":"g"}"#);
        assert_eq!(ok.unwrap().session_id.as_deref(), Some("g"));
    }
}
