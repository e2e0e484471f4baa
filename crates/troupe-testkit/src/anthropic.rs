//! Stub of the Anthropic Messages API (`POST /v1/messages`, streamed as SSE),
//! for the real Claude Code CLI.
//!
//! The turn is chosen by counting `assistant` messages in the request; a
//! request without tools (a side call such as a title) gets plain text.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{OriginalUri, State};
use axum::response::Response;
use axum::routing::post;
use serde_json::{Value, json};

use crate::script::{Conversation, Responder, Script, ToolInput, Turn, text_of};
use crate::server::{Log, StubServer, answer, json_response, record, sse, sse_response};

#[derive(Clone)]
struct Ctx {
    responder: Arc<dyn Responder>,
    log: Log,
}

/// A running Anthropic Messages stub.
pub struct AnthropicStub {
    server: StubServer,
}

impl AnthropicStub {
    /// Starts the stub on a free loopback port.
    pub fn start(script: Script) -> Self {
        Self::with_responder(script)
    }

    /// Starts the stub on a free loopback port, each turn chosen by `responder`.
    pub fn with_responder(responder: impl Responder + 'static) -> Self {
        Self::with_responder_on(IpAddr::V4(Ipv4Addr::LOCALHOST), responder)
    }

    /// As [`AnthropicStub::with_responder`], listening on `ip`: CLIs in a
    /// test's network namespaces reach it there (`netns::Hosts::server_ip`).
    pub fn with_responder_on(ip: IpAddr, responder: impl Responder + 'static) -> Self {
        let log: Log = Arc::new(Mutex::new(Vec::new()));
        let ctx = Ctx { responder: Arc::new(responder), log: log.clone() };
        let router = Router::new()
            .route("/v1/messages", post(messages))
            .route("/v1/messages/count_tokens", post(count_tokens))
            .fallback(fallback)
            .with_state(ctx);
        AnthropicStub { server: StubServer::spawn_on(ip, router, log) }
    }

    /// Base URL for `ANTHROPIC_BASE_URL`.
    pub fn url(&self) -> String {
        self.server.url()
    }

    /// The model requests received so far (`/v1/messages` only).
    pub fn model_requests(&self) -> Vec<Value> {
        self.server
            .requests()
            .into_iter()
            .filter(|r| r.path.starts_with("/v1/messages?") || r.path == "/v1/messages")
            .map(|r| r.body)
            .collect()
    }

    /// The underlying server (all recorded requests).
    pub fn server(&self) -> &StubServer {
        &self.server
    }
}

async fn fallback(State(ctx): State<Ctx>, OriginalUri(uri): OriginalUri, body: Bytes) -> Response {
    record(&ctx.log, uri.to_string(), &body);
    json_response(404, &json!({"type": "error", "error": {"type": "not_found_error", "message": "not stubbed"}}))
}

async fn count_tokens(State(ctx): State<Ctx>, OriginalUri(uri): OriginalUri, body: Bytes) -> Response {
    record(&ctx.log, uri.to_string(), &body);
    json_response(200, &json!({"input_tokens": 10}))
}

async fn messages(State(ctx): State<Ctx>, OriginalUri(uri): OriginalUri, body: Bytes) -> Response {
    let req = record(&ctx.log, uri.to_string(), &body);
    let model = req.get("model").and_then(Value::as_str).unwrap_or("claude-stub").to_string();
    let has_tools = req.get("tools").and_then(Value::as_array).is_some_and(|t| !t.is_empty());
    let done = req
        .get("messages")
        .and_then(Value::as_array)
        .map(|m| m.iter().filter(|m| m.get("role").and_then(Value::as_str) == Some("assistant")).count())
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
        let kind = match err.status {
            429 => "rate_limit_error",
            529 => "overloaded_error",
            500..=599 => "api_error",
            401 => "authentication_error",
            _ => "invalid_request_error",
        };
        return json_response(err.status, &json!({"type": "error", "error": {"type": kind, "message": err.message}}));
    }
    let blocks = blocks(&turn, done);
    let stop_reason = if turn.tool_calls.is_empty() { "end_turn" } else { "tool_use" };
    let msg_id = format!("msg_{done}");
    if req.get("stream").and_then(Value::as_bool) != Some(true) {
        return json_response(
            200,
            &json!({"id": msg_id, "type": "message", "role": "assistant", "model": model, "content": blocks,
                    "stop_reason": stop_reason, "stop_sequence": null,
                    "usage": {"input_tokens": 10, "output_tokens": 5}}),
        );
    }
    let mut out = String::new();
    out.push_str(&sse(
        Some("message_start"),
        &json!({"type": "message_start", "message": {"id": msg_id, "type": "message", "role": "assistant",
            "model": model, "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 10, "output_tokens": 1}}}),
    ));
    for (index, block) in blocks.iter().enumerate() {
        let start = match block["type"].as_str() {
            Some("text") => json!({"type": "text", "text": ""}),
            Some("thinking") => json!({"type": "thinking", "thinking": "", "signature": ""}),
            _ => json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
        };
        out.push_str(&sse(
            Some("content_block_start"),
            &json!({"type": "content_block_start", "index": index, "content_block": start}),
        ));
        let deltas = match block["type"].as_str() {
            Some("text") => vec![json!({"type": "text_delta", "text": block["text"]})],
            Some("thinking") => vec![
                json!({"type": "thinking_delta", "thinking": block["thinking"]}),
                json!({"type": "signature_delta", "signature": block["signature"]}),
            ],
            _ => vec![json!({"type": "input_json_delta", "partial_json": block["input"].to_string()})],
        };
        for delta in deltas {
            out.push_str(&sse(
                Some("content_block_delta"),
                &json!({"type": "content_block_delta", "index": index, "delta": delta}),
            ));
        }
        out.push_str(&sse(Some("content_block_stop"), &json!({"type": "content_block_stop", "index": index})));
    }
    out.push_str(&sse(
        Some("message_delta"),
        &json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null},
                "usage": {"output_tokens": 5}}),
    ));
    out.push_str(&sse(Some("message_stop"), &json!({"type": "message_stop"})));
    sse_response(out)
}

/// The content blocks of a turn, in the Messages API's shape.
fn blocks(turn: &Turn, done: usize) -> Vec<Value> {
    let mut blocks = Vec::new();
    if let Some(t) = &turn.thinking {
        blocks.push(json!({"type": "thinking", "thinking": t, "signature": "c3R1Yg=="}));
    }
    if let Some(t) = &turn.text {
        blocks.push(json!({"type": "text", "text": t}));
    }
    for (i, call) in turn.tool_calls.iter().enumerate() {
        let input = match &call.input {
            ToolInput::Json(v) => v.clone(),
            ToolInput::Freeform(s) => json!({"input": s}),
        };
        blocks.push(json!({"type": "tool_use", "id": format!("toolu_{done}_{i}"), "name": call.name, "input": input}));
    }
    blocks
}

/// The request as a [`Conversation`]: the system prompt and the user texts,
/// the `tool_result` blocks, the tool names.
fn conversation(req: &Value, turns: usize) -> Conversation {
    let mut prompt = vec![text_of(req.get("system").unwrap_or(&Value::Null))];
    let (mut results, mut failed) = (Vec::new(), Vec::new());
    for m in req.get("messages").and_then(Value::as_array).into_iter().flatten() {
        if m.get("role").and_then(Value::as_str) != Some("user") {
            continue;
        }
        match m.get("content") {
            Some(Value::Array(blocks)) => {
                for b in blocks {
                    match b.get("type").and_then(Value::as_str) {
                        Some("tool_result") => {
                            results.push(text_of(b.get("content").unwrap_or(&Value::Null)));
                            failed.push(b.get("is_error").and_then(Value::as_bool).unwrap_or(false));
                        }
                        Some("text") => prompt.push(text_of(&b["text"])),
                        _ => {}
                    }
                }
            }
            Some(c) => prompt.push(text_of(c)),
            None => {}
        }
    }
    let tools = req
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| t.get("name").and_then(Value::as_str).map(str::to_string))
        .collect();
    Conversation { prompt: prompt.join("\n\n"), turns, results, failed, tools }
}
