//! Model turns and what chooses them, shared by every stub server: a
//! [`Responder`] answers each request from the [`Conversation`] it carries; a
//! [`Script`] is the simplest responder, a fixed list of turns.

use serde_json::Value;

/// One tool call the model makes in a turn.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCall {
    /// Tool name as the CLI knows it (`Write`, `write_file`, `exec_command`, `apply_patch`, `bash`, ...).
    pub name: String,
    /// Arguments.
    pub input: ToolInput,
}

/// The arguments of a tool call.
#[derive(Clone, Debug, PartialEq)]
pub enum ToolInput {
    /// A JSON object (function tools).
    Json(Value),
    /// Free-form text (Codex's `apply_patch` custom tool).
    Freeform(String),
}

impl ToolInput {
    /// The input as JSON: the object itself, or the free-form text as a string.
    pub fn to_json(&self) -> Value {
        match self {
            ToolInput::Json(v) => v.clone(),
            ToolInput::Freeform(s) => Value::String(s.clone()),
        }
    }
}

/// An HTTP error the stub answers instead of a turn.
#[derive(Clone, Debug, PartialEq)]
pub struct HttpError {
    /// Status code (e.g. 400, 429, 500).
    pub status: u16,
    /// Error message, wrapped in the API's error shape.
    pub message: String,
}

/// One scripted model turn: optional thinking, optional text, then tool calls.
/// A turn with tool calls asks the CLI to run them; one without ends the run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Turn {
    /// Reasoning text, sent as a thinking/reasoning block where the API has one.
    pub thinking: Option<String>,
    /// Assistant text.
    pub text: Option<String>,
    /// Tool calls, executed by the CLI in order.
    pub tool_calls: Vec<ToolCall>,
    /// When set, the stub answers this HTTP error instead.
    pub error: Option<HttpError>,
    /// Answer this error the first N times the turn is requested, then the
    /// turn itself (exercises the CLIs' retries).
    pub fail_first: Option<(usize, HttpError)>,
    /// How long the stub waits before answering this turn, so that a test can
    /// keep a real CLI busy for at least a known wall-clock time.
    pub delay: Option<std::time::Duration>,
}

impl Turn {
    /// A final text answer.
    pub fn text(text: impl Into<String>) -> Self {
        Turn { text: Some(text.into()), ..Turn::default() }
    }

    /// A single function-tool call with JSON arguments.
    pub fn tool(name: impl Into<String>, input: Value) -> Self {
        Turn { tool_calls: vec![ToolCall { name: name.into(), input: ToolInput::Json(input) }], ..Turn::default() }
    }

    /// A single free-form (custom) tool call, such as Codex's `apply_patch`.
    pub fn freeform_tool(name: impl Into<String>, input: impl Into<String>) -> Self {
        Turn {
            tool_calls: vec![ToolCall { name: name.into(), input: ToolInput::Freeform(input.into()) }],
            ..Turn::default()
        }
    }

    /// An HTTP error answer (the CLI may retry it).
    pub fn http_error(status: u16, message: impl Into<String>) -> Self {
        Turn { error: Some(HttpError { status, message: message.into() }), ..Turn::default() }
    }

    /// Answers `status` the first `times` requests for this turn, then the turn.
    pub fn failing_first(mut self, times: usize, status: u16, message: impl Into<String>) -> Self {
        self.fail_first = Some((times, HttpError { status, message: message.into() }));
        self
    }

    /// Adds text before the tool calls.
    pub fn with_text(mut self, text: impl Into<String>) -> Self {
        self.text = Some(text.into());
        self
    }

    /// Adds thinking before everything else.
    pub fn with_thinking(mut self, thinking: impl Into<String>) -> Self {
        self.thinking = Some(thinking.into());
        self
    }

    /// Answers this turn only after `delay` (a model that thinks slowly).
    pub fn after(mut self, delay: std::time::Duration) -> Self {
        self.delay = Some(delay);
        self
    }

    /// Adds another function-tool call.
    pub fn and_tool(mut self, name: impl Into<String>, input: Value) -> Self {
        self.tool_calls.push(ToolCall { name: name.into(), input: ToolInput::Json(input) });
        self
    }
}

/// The turns a stub replays. Turn `n` answers the request whose conversation
/// already holds `n` model turns (counted the way each API shape allows);
/// past the end the stub answers a plain "script exhausted" text.
#[derive(Debug, Default)]
pub struct Script {
    turns: Vec<Turn>,
    side_reply: String,
    /// How many times each turn index has been answered with its `fail_first` error.
    failures: std::sync::Mutex<std::collections::HashMap<usize, usize>>,
}

impl Clone for Script {
    fn clone(&self) -> Self {
        Script { turns: self.turns.clone(), side_reply: self.side_reply.clone(), failures: Default::default() }
    }
}

impl Script {
    /// A script of turns; tool-less side calls (titles, routing) get "ok".
    pub fn new(turns: impl IntoIterator<Item = Turn>) -> Self {
        Script { turns: turns.into_iter().collect(), side_reply: "ok".into(), failures: Default::default() }
    }

    /// The text answered to side calls that carry no tools.
    pub fn with_side_reply(mut self, text: impl Into<String>) -> Self {
        self.side_reply = text.into();
        self
    }

    /// The turn for a conversation that already has `done` model turns; a
    /// turn with `fail_first` comes back as its error until it is used up.
    pub fn turn(&self, done: usize) -> Turn {
        let turn = self.turns.get(done).cloned().unwrap_or_else(|| Turn::text("script exhausted"));
        if let Some((times, err)) = &turn.fail_first {
            let mut failures = self.failures.lock().expect("script failure counts");
            let served = failures.entry(done).or_insert(0);
            if *served < *times {
                *served += 1;
                return Turn { error: Some(err.clone()), ..Turn::default() };
            }
        }
        turn
    }

    /// The answer to a side call.
    pub fn side_reply(&self) -> &str {
        &self.side_reply
    }

    /// Number of scripted turns.
    pub fn len(&self) -> usize {
        self.turns.len()
    }

    /// Whether there are no turns.
    pub fn is_empty(&self) -> bool {
        self.turns.is_empty()
    }
}

/// What a stub model sees of one request, the same for every API shape.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Conversation {
    /// The instructions and user messages, in order (system prompt first),
    /// joined with blank lines: what the model was told.
    pub prompt: String,
    /// Model turns already in the conversation.
    pub turns: usize,
    /// The text of each tool result in the conversation, in order.
    pub results: Vec<String>,
    /// Whether each result is marked as a failed call, where the API shape
    /// says so (Anthropic's `is_error`, an `error` in a Gemini function
    /// response); `false` elsewhere.
    pub failed: Vec<bool>,
    /// The names of the tools the request offers, as the model must call them.
    pub tools: Vec<String>,
}

/// Chooses the model's answer to each request of a stub server.
///
/// The stubs call it for every request that offers tools; requests without
/// tools (titles, routing, summaries) get [`Responder::side_reply`].
pub trait Responder: Send + Sync {
    /// The turn that answers `conversation`.
    fn respond(&self, conversation: &Conversation) -> Turn;

    /// The text answered to side calls that carry no tools.
    fn side_reply(&self) -> String {
        "ok".into()
    }
}

impl Responder for Script {
    fn respond(&self, conversation: &Conversation) -> Turn {
        self.turn(conversation.turns)
    }

    fn side_reply(&self) -> String {
        self.side_reply.clone()
    }
}

impl<R: Responder + ?Sized> Responder for std::sync::Arc<R> {
    fn respond(&self, conversation: &Conversation) -> Turn {
        (**self).respond(conversation)
    }

    fn side_reply(&self) -> String {
        (**self).side_reply()
    }
}

/// The text of a JSON value that is either a string or a list of content
/// parts carrying `text` (every API's content shape); other values as JSON.
pub(crate) fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .map(|p| match p.get("text").and_then(Value::as_str) {
                Some(t) => t.to_string(),
                None => text_of(p),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}
