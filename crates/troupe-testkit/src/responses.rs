//! Stub of the OpenAI Responses API (`POST /v1/responses`, streamed as SSE),
//! for the real Codex CLI.
//!
//! The turn is chosen by counting tool outputs in `input` (`*_call_output` and
//! `tool_search_output` items). Free-form tool calls
//! ([`ToolInput::Freeform`]) become
//! `custom_tool_call` items (Codex's `apply_patch`); JSON ones `function_call`
//! items (`exec_command` with `{"cmd": ...}`). An error with status 0 is a
//! stream cut before `response.completed` (Codex retries it as "Reconnecting").
//!
//! Codex's interactive session offers newer models their tools in an
//! `additional_tools` input item rather than the `tools` field (namespaces of
//! functions; its shell then only through the JavaScript of its `exec`
//! custom tool, "code mode"): those count as offered too, and such a request
//! is a turn, not a side call.
//!
//! Codex offers MCP tools only through its `tool_search` tool: a call named
//! `tool_search` becomes a `tool_search_call` item, Codex answers it with a
//! `tool_search_output` holding namespaces of functions (`mcp__troupe` with
//! `troupe__board_claim`), and those count as offered from then on, each
//! under its full name (`mcp__troupe__troupe__board_claim`); a call of such a
//! name goes out as a `function_call` in its namespace, as Codex expects.

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

/// A running Responses API stub.
pub struct ResponsesStub {
    server: StubServer,
}

impl ResponsesStub {
    /// Starts the stub on a free loopback port.
    pub fn start(script: Script) -> Self {
        Self::with_responder(script)
    }

    /// Starts the stub on a free loopback port, each turn chosen by `responder`.
    pub fn with_responder(responder: impl Responder + 'static) -> Self {
        let log: Log = Arc::new(Mutex::new(Vec::new()));
        let ctx = Ctx { responder: Arc::new(responder), log: log.clone() };
        let router = Router::new().route("/v1/responses", post(responses)).fallback(fallback).with_state(ctx);
        ResponsesStub { server: StubServer::spawn(router, log) }
    }

    /// Base URL including `/v1`, for a provider's `base_url`.
    pub fn url(&self) -> String {
        format!("{}/v1", self.server.url())
    }

    /// Bodies of the `/v1/responses` requests received so far.
    pub fn model_requests(&self) -> Vec<Value> {
        self.server.requests().into_iter().filter(|r| r.path.starts_with("/v1/responses")).map(|r| r.body).collect()
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

async fn responses(State(ctx): State<Ctx>, OriginalUri(uri): OriginalUri, body: Bytes) -> Response {
    let req = record(&ctx.log, uri.to_string(), &body);
    let model = req.get("model").and_then(Value::as_str).unwrap_or("gpt-stub").to_string();
    let has_tools =
        req.get("tools").and_then(Value::as_array).is_some_and(|t| !t.is_empty()) || !additional_tools(&req).is_empty();
    let done = req
        .get("input")
        .and_then(Value::as_array)
        .map(|items| items.iter().filter(|i| i.get("type").and_then(Value::as_str).is_some_and(is_output)).count())
        .unwrap_or(0);
    let turn = if has_tools {
        answer(&ctx.responder, conversation(&req, done)).await
    } else {
        Turn::text(ctx.responder.side_reply())
    };
    if let Some(delay) = turn.delay {
        tokio::time::sleep(delay).await;
    }
    if let Some(err) = &turn.error
        && err.status == 0
    {
        // Status 0: a stream cut before `response.completed`, which Codex retries.
        let created = json!({"type": "response.created", "sequence_number": 0,
            "response": {"id": "resp_cut", "object": "response", "status": "in_progress", "model": model, "output": []}});
        return sse_response(sse(Some("response.created"), &created));
    }
    if let Some(err) = &turn.error {
        let kind = if err.status == 429 { "rate_limit_exceeded" } else { "server_error" };
        return json_response(err.status, &json!({"error": {"message": err.message, "type": kind, "code": kind}}));
    }
    let items = items(&turn, done, &[searched(&req), additional_tools(&req)].concat());
    let resp_id = format!("resp_{done}");
    let base = json!({"id": resp_id, "object": "response", "created_at": 0, "model": model});
    let with = |status: &str, output: Value, usage: Option<Value>| {
        let mut r = base.clone();
        r["status"] = json!(status);
        r["output"] = output;
        if let Some(u) = usage {
            r["usage"] = u;
        }
        r
    };
    let mut seq = 0u64;
    let mut out = String::new();
    let mut emit = |ty: &str, mut data: Value| {
        data["type"] = json!(ty);
        data["sequence_number"] = json!(seq);
        seq += 1;
        out.push_str(&sse(Some(ty), &data));
    };
    emit("response.created", json!({"response": with("in_progress", json!([]), None)}));
    emit("response.in_progress", json!({"response": with("in_progress", json!([]), None)}));
    for (index, item) in items.iter().enumerate() {
        let mut added = item.clone();
        if item["type"] == "message" {
            added["content"] = json!([]);
            added["status"] = json!("in_progress");
        }
        emit("response.output_item.added", json!({"output_index": index, "item": added}));
        if item["type"] == "message" {
            let text = item["content"][0]["text"].clone();
            let id = item["id"].clone();
            emit(
                "response.content_part.added",
                json!({"item_id": id, "output_index": index, "content_index": 0,
                       "part": {"type": "output_text", "text": "", "annotations": []}}),
            );
            emit(
                "response.output_text.delta",
                json!({"item_id": id, "output_index": index, "content_index": 0, "delta": text}),
            );
            emit(
                "response.output_text.done",
                json!({"item_id": id, "output_index": index, "content_index": 0, "text": text}),
            );
            emit(
                "response.content_part.done",
                json!({"item_id": id, "output_index": index, "content_index": 0,
                       "part": {"type": "output_text", "text": text, "annotations": []}}),
            );
        }
        emit("response.output_item.done", json!({"output_index": index, "item": item}));
    }
    let usage = json!({"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
                       "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15});
    emit("response.completed", json!({"response": with("completed", Value::Array(items), Some(usage))}));
    sse_response(out)
}

/// Whether an `input` item of type `ty` is a tool's output.
fn is_output(ty: &str) -> bool {
    ty.ends_with("_call_output") || ty == "tool_search_output"
}

/// The tools an `additional_tools` input item offers (how Codex's
/// interactive session offers them to newer models, with no `tools` field):
/// namespaces of functions, as [`searched`] reads them.
fn additional_tools(req: &Value) -> Vec<(String, Option<String>, String)> {
    namespaced(req, "additional_tools")
}

/// The tools `tool_search` loaded so far: `(full name, namespace, name)`,
/// the full name being the namespace and the name joined with `__`.
fn searched(req: &Value) -> Vec<(String, Option<String>, String)> {
    namespaced(req, "tool_search_output")
}

/// The functions of the namespaces listed by the `input` items of type `ty`;
/// those of Codex's default namespace, `functions`, under their own names.
fn namespaced(req: &Value, ty: &str) -> Vec<(String, Option<String>, String)> {
    let mut out = Vec::new();
    let outputs = req.get("input").and_then(Value::as_array).into_iter().flatten();
    for item in outputs.filter(|i| i.get("type").and_then(Value::as_str) == Some(ty)) {
        for tool in item.get("tools").and_then(Value::as_array).into_iter().flatten() {
            let name = tool.get("name").and_then(Value::as_str).unwrap_or_default();
            match tool.get("tools").and_then(Value::as_array) {
                Some(inner) if name == "functions" => {
                    out.extend(
                        inner
                            .iter()
                            .filter_map(|f| f.get("name").and_then(Value::as_str))
                            .map(|f| (f.to_string(), None, f.to_string())),
                    );
                }
                Some(inner) => {
                    for f in inner.iter().filter_map(|f| f.get("name").and_then(Value::as_str)) {
                        out.push((format!("{name}__{f}"), Some(name.to_string()), f.to_string()));
                    }
                }
                None => out.push((name.to_string(), None, name.to_string())),
            }
        }
    }
    out
}

fn items(turn: &Turn, done: usize, searched: &[(String, Option<String>, String)]) -> Vec<Value> {
    let mut items = Vec::new();
    if let Some(t) = &turn.thinking {
        items.push(json!({"type": "reasoning", "id": format!("rs_{done}"),
                          "summary": [{"type": "summary_text", "text": t}]}));
    }
    if let Some(t) = &turn.text {
        items.push(json!({"type": "message", "id": format!("msg_{done}"), "role": "assistant", "status": "completed",
                          "content": [{"type": "output_text", "text": t, "annotations": []}]}));
    }
    for (i, call) in turn.tool_calls.iter().enumerate() {
        let call_id = format!("call_{done}_{i}");
        items.push(match &call.input {
            ToolInput::Freeform(input) => json!({"type": "custom_tool_call", "id": format!("ctc_{done}_{i}"),
                "call_id": call_id, "name": call.name, "input": input, "status": "completed"}),
            ToolInput::Json(args) if call.name == "tool_search" => json!({"type": "tool_search_call",
                "id": format!("tsc_{done}_{i}"), "call_id": call_id, "execution": "client", "arguments": args,
                "status": "completed"}),
            ToolInput::Json(args) => {
                let mut item = json!({"type": "function_call", "id": format!("fc_{done}_{i}"),
                    "call_id": call_id, "name": call.name, "arguments": args.to_string(), "status": "completed"});
                if let Some((_, Some(namespace), name)) = searched.iter().find(|(full, ..)| *full == call.name) {
                    item["namespace"] = json!(namespace);
                    item["name"] = json!(name);
                }
                item
            }
        });
    }
    items
}

/// The request as a [`Conversation`]: the instructions and the user and
/// developer messages, the tool outputs, the tool names (`tool_search` for
/// Codex's search tool, and every tool a search loaded by its full name).
fn conversation(req: &Value, turns: usize) -> Conversation {
    let mut prompt = vec![text_of(req.get("instructions").unwrap_or(&Value::Null))];
    let mut results = Vec::new();
    for item in req.get("input").and_then(Value::as_array).into_iter().flatten() {
        let ty = item.get("type").and_then(Value::as_str).unwrap_or("message");
        if ty == "tool_search_output" {
            results.push(item.get("tools").unwrap_or(&Value::Null).to_string());
        } else if is_output(ty) {
            results.push(text_of(item.get("output").unwrap_or(&Value::Null)));
        } else if ty == "message" && item.get("role").and_then(Value::as_str) != Some("assistant") {
            prompt.push(text_of(item.get("content").unwrap_or(&Value::Null)));
        }
    }
    let mut tools: Vec<String> = req
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| match t.get("type").and_then(Value::as_str) {
            Some("tool_search") => Some("tool_search".to_string()),
            _ => t.get("name").and_then(Value::as_str).map(str::to_string),
        })
        .collect();
    tools.extend(searched(req).into_iter().chain(additional_tools(req)).map(|(full, ..)| full));
    let failed = vec![false; results.len()];
    Conversation { prompt: prompt.join("\n\n"), turns, results, failed, tools }
}
