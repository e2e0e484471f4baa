//! Stub of the OpenAI Chat Completions API (`POST /v1/chat/completions`,
//! streamed as `chat.completion.chunk`s ending in `[DONE]`), for the real
//! OpenCode CLI.
//!
//! The turn is chosen by counting `role: "tool"` messages; a request without
//! tools (OpenCode's title request) gets plain text.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{OriginalUri, State};
use axum::response::Response;
use axum::routing::post;
use serde_json::{Value, json};

use crate::script::{Conversation, Responder, Script, Turn, text_of};
use crate::server::{Log, StubServer, answer, json_response, record, sse_response};

#[derive(Clone)]
struct Ctx {
    responder: Arc<dyn Responder>,
    log: Log,
}

/// A running Chat Completions stub.
pub struct ChatStub {
    server: StubServer,
}

impl ChatStub {
    /// Starts the stub on a free loopback port.
    pub fn start(script: Script) -> Self {
        Self::with_responder(script)
    }

    /// Starts the stub on a free loopback port, each turn chosen by `responder`.
    pub fn with_responder(responder: impl Responder + 'static) -> Self {
        let log: Log = Arc::new(Mutex::new(Vec::new()));
        let ctx = Ctx { responder: Arc::new(responder), log: log.clone() };
        let router = Router::new().route("/v1/chat/completions", post(chat)).fallback(fallback).with_state(ctx);
        ChatStub { server: StubServer::spawn(router, log) }
    }

    /// Base URL including `/v1`, for a provider's `baseURL`.
    pub fn url(&self) -> String {
        format!("{}/v1", self.server.url())
    }

    /// Bodies of the chat requests that carried tools: the conversation's
    /// turns, in order. OpenCode's side calls (a session's title, asked with
    /// no tools) are left out: they run beside the conversation, so under
    /// load one may arrive after its last turn, and a test reading "the last
    /// request" read the title's.
    pub fn model_requests(&self) -> Vec<Value> {
        self.server
            .requests()
            .into_iter()
            .filter(|r| r.path.starts_with("/v1/chat/completions"))
            .map(|r| r.body)
            .filter(|b| b["tools"].as_array().is_some_and(|t| !t.is_empty()))
            .collect()
    }

    /// The underlying server.
    pub fn server(&self) -> &StubServer {
        &self.server
    }
}

async fn fallback(State(ctx): State<Ctx>, OriginalUri(uri): OriginalUri, body: Bytes) -> Response {
    record(&ctx.log, uri.to_string(), &body);
    json_response(404, &json!({"error": {"message": "not stubbed", "type": "invalid_request_error"}}))
}

async fn chat(State(ctx): State<Ctx>, OriginalUri(uri): OriginalUri, body: Bytes) -> Response {
    let req = record(&ctx.log, uri.to_string(), &body);
    let model = req.get("model").and_then(Value::as_str).unwrap_or("fake-model").to_string();
    let has_tools = req.get("tools").and_then(Value::as_array).is_some_and(|t| !t.is_empty());
    let done = req
        .get("messages")
        .and_then(Value::as_array)
        .map(|m| m.iter().filter(|m| m.get("role").and_then(Value::as_str) == Some("tool")).count())
        .unwrap_or(0);
    let turn = if has_tools {
        answer(&ctx.responder, conversation(&req, done)).await
    } else {
        Turn::text(ctx.responder.side_reply())
    };
    if let Some(delay) = turn.delay {
        tokio::time::sleep(delay).await;
    }
    if let Some(err) = &turn.error {
        return json_response(err.status, &json!({"error": {"message": err.message, "type": "server_error"}}));
    }
    let finish = if turn.tool_calls.is_empty() { "stop" } else { "tool_calls" };
    let tool_calls: Vec<Value> = turn
        .tool_calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let args = match c.input.to_json() {
                Value::String(s) => s,
                v => v.to_string(),
            };
            json!({"index": i, "id": format!("call_{done}_{i}"), "type": "function",
                   "function": {"name": c.name, "arguments": args}})
        })
        .collect();
    let id = format!("chatcmpl-{done}");
    let usage = json!({"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15});
    if req.get("stream").and_then(Value::as_bool) != Some(true) {
        let mut message = json!({"role": "assistant", "content": turn.text});
        if !tool_calls.is_empty() {
            message["tool_calls"] = Value::Array(tool_calls);
        }
        return json_response(
            200,
            &json!({"id": id, "object": "chat.completion", "created": 0, "model": model,
                    "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage}),
        );
    }
    let chunk = |delta: Value, finish: Option<&str>| {
        json!({"id": id, "object": "chat.completion.chunk", "created": 0, "model": model,
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let mut chunks = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
    if let Some(t) = &turn.thinking {
        chunks.push(chunk(json!({"reasoning_content": t}), None));
    }
    if let Some(t) = &turn.text {
        chunks.push(chunk(json!({"content": t}), None));
    }
    if !tool_calls.is_empty() {
        chunks.push(chunk(json!({"tool_calls": tool_calls}), None));
    }
    chunks.push(chunk(json!({}), Some(finish)));
    chunks.push(json!({"id": id, "object": "chat.completion.chunk", "created": 0, "model": model, "choices": [],
                       "usage": usage}));
    let mut out = String::new();
    for c in chunks {
        out.push_str(&format!("data: {c}\n\n"));
    }
    out.push_str("data: [DONE]\n\n");
    sse_response(out)
}

/// The request as a [`Conversation`]: the system and user messages, the
/// `tool` messages, the function names.
fn conversation(req: &Value, turns: usize) -> Conversation {
    let mut prompt = Vec::new();
    let mut results = Vec::new();
    for m in req.get("messages").and_then(Value::as_array).into_iter().flatten() {
        let content = text_of(m.get("content").unwrap_or(&Value::Null));
        match m.get("role").and_then(Value::as_str) {
            Some("tool") => results.push(content),
            Some("system" | "user") => prompt.push(content),
            _ => {}
        }
    }
    let tools = req
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| t.pointer("/function/name").and_then(Value::as_str).map(str::to_string))
        .collect();
    let failed = vec![false; results.len()];
    Conversation { prompt: prompt.join("\n\n"), turns, results, failed, tools }
}
