//! Stub of the Gemini API (`POST /v1beta/models/<model>:streamGenerateContent?alt=sse`,
//! `:generateContent`, `:countTokens`), for the real Gemini CLI.
//!
//! The turn is chosen by counting `role: "model"` entries in `contents`; a
//! request without tools (routing, summaries) gets plain text.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{OriginalUri, State};
use axum::response::Response;
use axum::routing::post;
use serde_json::{Value, json};

use crate::script::{Conversation, Responder, Script, Turn, text_of};
use crate::server::{Log, StubServer, answer, json_response, record, sse, sse_response};

#[derive(Clone)]
struct Ctx {
    responder: Arc<dyn Responder>,
    log: Log,
}

/// A running Gemini API stub.
pub struct GeminiStub {
    server: StubServer,
}

impl GeminiStub {
    /// Starts the stub on a free loopback port.
    pub fn start(script: Script) -> Self {
        Self::with_responder(script)
    }

    /// Starts the stub on a free loopback port, each turn chosen by `responder`.
    pub fn with_responder(responder: impl Responder + 'static) -> Self {
        let log: Log = Arc::new(Mutex::new(Vec::new()));
        let ctx = Ctx { responder: Arc::new(responder), log: log.clone() };
        let router = Router::new().route("/v1beta/models/{*rest}", post(models)).fallback(fallback).with_state(ctx);
        GeminiStub { server: StubServer::spawn(router, log) }
    }

    /// Base URL for `GOOGLE_GEMINI_BASE_URL`.
    pub fn url(&self) -> String {
        self.server.url()
    }

    /// Bodies of the generate requests received so far.
    pub fn model_requests(&self) -> Vec<Value> {
        self.server.requests().into_iter().filter(|r| r.path.contains("enerateContent")).map(|r| r.body).collect()
    }

    /// The underlying server.
    pub fn server(&self) -> &StubServer {
        &self.server
    }
}

async fn fallback(State(ctx): State<Ctx>, OriginalUri(uri): OriginalUri, body: Bytes) -> Response {
    record(&ctx.log, uri.to_string(), &body);
    json_response(404, &json!({"error": {"code": 404, "message": "not stubbed", "status": "NOT_FOUND"}}))
}

async fn models(State(ctx): State<Ctx>, OriginalUri(uri): OriginalUri, body: Bytes) -> Response {
    let req = record(&ctx.log, uri.to_string(), &body);
    let path = uri.path();
    if path.ends_with(":countTokens") {
        return json_response(200, &json!({"totalTokens": 10}));
    }
    let model = path.rsplit('/').next().and_then(|s| s.split(':').next()).unwrap_or("gemini-stub").to_string();
    let has_tools = req.get("tools").and_then(Value::as_array).is_some_and(|t| {
        t.iter().any(|t| t.get("functionDeclarations").and_then(Value::as_array).is_some_and(|f| !f.is_empty()))
    });
    let done = req
        .get("contents")
        .and_then(Value::as_array)
        .map(|c| c.iter().filter(|c| c.get("role").and_then(Value::as_str) == Some("model")).count())
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
        let status = match err.status {
            429 => "RESOURCE_EXHAUSTED",
            500 => "INTERNAL",
            503 => "UNAVAILABLE",
            401 | 403 => "PERMISSION_DENIED",
            _ => "INVALID_ARGUMENT",
        };
        return json_response(
            err.status,
            &json!({"error": {"code": err.status, "message": err.message, "status": status}}),
        );
    }
    let mut parts = Vec::new();
    if let Some(t) = &turn.thinking {
        parts.push(json!({"text": t, "thought": true}));
    }
    if let Some(t) = &turn.text {
        parts.push(json!({"text": t}));
    }
    for call in &turn.tool_calls {
        parts.push(json!({"functionCall": {"name": call.name, "args": call.input.to_json()}}));
    }
    let chunk = json!({
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
        "modelVersion": model,
    });
    if path.ends_with(":streamGenerateContent") { sse_response(sse(None, &chunk)) } else { json_response(200, &chunk) }
}

/// The request as a [`Conversation`]: the system instruction and the user
/// texts, the `functionResponse` parts, the function declarations.
fn conversation(req: &Value, turns: usize) -> Conversation {
    let mut prompt = vec![text_of(req.pointer("/systemInstruction/parts").unwrap_or(&Value::Null))];
    let (mut results, mut failed) = (Vec::new(), Vec::new());
    for c in req.get("contents").and_then(Value::as_array).into_iter().flatten() {
        if c.get("role").and_then(Value::as_str) != Some("user") {
            continue;
        }
        for part in c.get("parts").and_then(Value::as_array).into_iter().flatten() {
            if let Some(r) = part.get("functionResponse") {
                let response = r.get("response").unwrap_or(&Value::Null);
                // Gemini CLI wraps a tool's text as {"output": text}.
                results.push(text_of(response.get("output").or(response.get("error")).unwrap_or(response)));
                failed.push(response.get("error").is_some());
            } else if let Some(t) = part.get("text") {
                prompt.push(text_of(t));
            }
        }
    }
    let tools = req
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .flat_map(|t| t.get("functionDeclarations").and_then(Value::as_array).into_iter().flatten())
        .filter_map(|f| f.get("name").and_then(Value::as_str).map(str::to_string))
        .collect();
    Conversation { prompt: prompt.join("\n\n"), turns, results, failed, tools }
}
