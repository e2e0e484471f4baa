//! OpenTelemetry export of a run (`[telemetry] otlp_endpoint`), following the
//! GenAI semantic conventions: one `invoke_agent` span per teammate launch, an
//! `execute_tool` span per tool call it made (gateway calls marked
//! `troupe.gateway`), the token usage metric `gen_ai.client.token.usage` and
//! the cost `troupe.cost.usd`, from what the driver already sees.
//!
//! The export is OTLP/HTTP with the JSON encoding, written by hand and sent
//! once at the end of the run over a plain TCP connection: a few dozen lines
//! instead of the opentelemetry crates and an HTTP client in the binary.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::io::{Read, Write};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use troupe_core::event::AgentEvent;

/// One span as OTLP JSON wants it, before it is encoded.
struct Span {
    id: String,
    parent: String,
    name: String,
    start: u128,
    end: Option<u128>,
    ok: bool,
    attributes: Vec<(&'static str, Value)>,
}

/// What a run exports; fed by the driver, sent by [`Telemetry::export`].
pub(super) struct Telemetry {
    endpoint: String,
    service: String,
    trace: String,
    root: Span,
    /// Each teammate's current launch span (index into `spans`).
    agents: HashMap<String, usize>,
    /// Open tool calls by (agent, call id).
    tools: HashMap<(String, String), usize>,
    spans: Vec<Span>,
    /// (agent, input, output, turns) for the token metric; cost per agent.
    usage: HashMap<String, (u64, u64, u64, f64)>,
}

fn now_ns() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or_default()
}

/// A random hex id of `bytes` bytes (std's per-process random hash keys).
fn random_id(bytes: usize) -> String {
    let mut out = String::new();
    while out.len() < bytes * 2 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(now_ns());
        out.push_str(&format!("{:016x}", h.finish()));
    }
    out.truncate(bytes * 2);
    out
}

fn attr(key: &str, value: &Value) -> Value {
    let v = match value {
        Value::Number(n) if n.is_u64() || n.is_i64() => json!({"intValue": n.to_string()}),
        Value::Number(n) => json!({"doubleValue": n.as_f64()}),
        Value::Bool(b) => json!({"boolValue": b}),
        Value::String(s) => json!({"stringValue": s}),
        other => json!({"stringValue": other.to_string()}),
    };
    json!({"key": key, "value": v})
}

impl Telemetry {
    /// An exporter to `endpoint` for the run of `feature`, started now.
    pub(super) fn new(endpoint: &str, service: &str, feature: &str) -> Telemetry {
        let root = Span {
            id: random_id(8),
            parent: String::new(),
            name: format!("troupe run {feature}"),
            start: now_ns(),
            end: None,
            ok: true,
            attributes: vec![("troupe.feature", json!(feature))],
        };
        Telemetry {
            endpoint: endpoint.trim_end_matches('/').to_string(),
            service: service.to_string(),
            trace: random_id(16),
            root,
            agents: HashMap::new(),
            tools: HashMap::new(),
            spans: Vec::new(),
            usage: HashMap::new(),
        }
    }

    /// A teammate was launched (a spawn or a resume): its `invoke_agent` span starts.
    pub(super) fn launched(&mut self, id: &str, role: &str, engine: &str, model: Option<&str>) {
        let mut attributes = vec![
            ("gen_ai.operation.name", json!("invoke_agent")),
            ("gen_ai.agent.id", json!(id)),
            ("gen_ai.agent.name", json!(role)),
            ("gen_ai.provider.name", json!(engine)),
        ];
        if let Some(m) = model {
            attributes.push(("gen_ai.request.model", json!(m)));
        }
        let span = Span {
            id: random_id(8),
            parent: self.root.id.clone(),
            name: format!("invoke_agent {role}"),
            start: now_ns(),
            end: None,
            ok: true,
            attributes,
        };
        self.spans.push(span);
        self.agents.insert(id.to_string(), self.spans.len() - 1);
    }

    /// A tool event of teammate `id`: a call opens its `execute_tool` span, its result closes it.
    pub(super) fn tool(&mut self, id: &str, event: &AgentEvent) {
        match event {
            AgentEvent::ToolUse { id: call, name, kind, .. } => {
                let Some(parent) = self.agents.get(id).map(|&i| self.spans[i].id.clone()) else { return };
                let gateway = matches!(kind, troupe_core::event::ToolKind::Mcp);
                self.spans.push(Span {
                    id: random_id(8),
                    parent,
                    name: format!("execute_tool {name}"),
                    start: now_ns(),
                    end: None,
                    ok: true,
                    attributes: vec![
                        ("gen_ai.operation.name", json!("execute_tool")),
                        ("gen_ai.tool.name", json!(name)),
                        ("gen_ai.tool.call.id", json!(call)),
                        ("gen_ai.tool.type", json!(if gateway { "extension" } else { "function" })),
                        ("troupe.gateway", json!(gateway)),
                    ],
                });
                self.tools.insert((id.to_string(), call.clone()), self.spans.len() - 1);
            }
            AgentEvent::ToolResult { id: call, ok, .. } => {
                if let Some(i) = self.tools.remove(&(id.to_string(), call.clone())) {
                    self.spans[i].end = Some(now_ns());
                    self.spans[i].ok = *ok;
                }
            }
            _ => {}
        }
    }

    /// A booked model turn of teammate `id`.
    pub(super) fn turn(&mut self, id: &str, input: u64, output: u64, cost_usd: f64) {
        let u = self.usage.entry(id.to_string()).or_default();
        u.0 += input;
        u.1 += output;
        u.2 += 1;
        u.3 += cost_usd;
    }

    /// Teammate `id`'s launch ended (`ok`: with a result).
    pub(super) fn ended(&mut self, id: &str, ok: bool) {
        if let Some(i) = self.agents.remove(id) {
            self.spans[i].end = Some(now_ns());
            self.spans[i].ok = ok;
        }
    }

    /// The OTLP JSON of the run's spans (`/v1/traces`), every open span ended now.
    fn traces(&mut self, outcome: &str) -> Value {
        let end = now_ns();
        self.root.end = Some(end);
        self.root.attributes.push(("troupe.outcome", json!(outcome)));
        let total: f64 = self.usage.values().map(|u| u.3).sum();
        self.root.attributes.push(("troupe.cost.usd", json!(total)));
        // Each teammate's usage and cost on its last launch span.
        let mut last: HashMap<&str, usize> = HashMap::new();
        for (i, s) in self.spans.iter().enumerate() {
            if let Some(a) = s.attributes.iter().find(|(k, _)| *k == "gen_ai.agent.id").and_then(|(_, v)| v.as_str()) {
                last.insert(a, i);
            }
        }
        let placed: Vec<(usize, (u64, u64, u64, f64))> =
            last.iter().filter_map(|(a, &i)| Some((i, *self.usage.get(*a)?))).collect();
        for (i, (input, output, _, cost)) in placed {
            let s = &mut self.spans[i].attributes;
            s.push(("gen_ai.usage.input_tokens", json!(input)));
            s.push(("gen_ai.usage.output_tokens", json!(output)));
            s.push(("troupe.cost.usd", json!(cost)));
        }
        let encode = |s: &Span| {
            json!({
                "traceId": self.trace,
                "spanId": s.id,
                "parentSpanId": s.parent,
                "name": s.name,
                "kind": if s.parent.is_empty() { 1 } else { 3 },
                "startTimeUnixNano": s.start.to_string(),
                "endTimeUnixNano": s.end.unwrap_or(end).to_string(),
                "attributes": s.attributes.iter().map(|(k, v)| attr(k, v)).collect::<Vec<_>>(),
                "status": {"code": if s.ok { 1 } else { 2 }},
            })
        };
        let spans: Vec<Value> = std::iter::once(&self.root).chain(&self.spans).map(encode).collect();
        json!({"resourceSpans": [{"resource": self.resource(), "scopeSpans": [{"scope": scope(), "spans": spans}]}]})
    }

    /// The OTLP JSON of the run's metrics (`/v1/metrics`): tokens per agent
    /// and type, cost per agent, cumulative over the run.
    fn metrics(&self) -> Value {
        let (start, now) = (self.root.start.to_string(), now_ns().to_string());
        let mut tokens = Vec::new();
        let mut cost = Vec::new();
        let mut agents: Vec<_> = self.usage.iter().collect();
        agents.sort_by(|a, b| a.0.cmp(b.0));
        for (agent, (input, output, turns, usd)) in agents {
            for (kind, n) in [("input", input), ("output", output)] {
                tokens.push(json!({
                    "attributes": [attr("gen_ai.agent.id", &json!(agent)), attr("gen_ai.token.type", &json!(kind))],
                    "startTimeUnixNano": start, "timeUnixNano": now,
                    "count": turns.to_string(), "sum": *n as f64, "bucketCounts": [turns.to_string()], "explicitBounds": [],
                }));
            }
            cost.push(json!({
                "attributes": [attr("gen_ai.agent.id", &json!(agent))],
                "startTimeUnixNano": start, "timeUnixNano": now, "asDouble": usd,
            }));
        }
        let metrics = json!([
            {"name": "gen_ai.client.token.usage", "unit": "{token}", "description": "Tokens of the model turns the usage ledger booked",
             "histogram": {"aggregationTemporality": 2, "dataPoints": tokens}},
            {"name": "troupe.cost.usd", "unit": "USD", "description": "What the model turns cost, as the usage ledger booked it",
             "sum": {"aggregationTemporality": 2, "isMonotonic": true, "dataPoints": cost}},
        ]);
        json!({"resourceMetrics": [{"resource": self.resource(), "scopeMetrics": [{"scope": scope(), "metrics": metrics}]}]})
    }

    fn resource(&self) -> Value {
        json!({"attributes": [attr("service.name", &json!(self.service))]})
    }

    /// Send the run's traces and metrics; the error names what failed.
    pub(super) fn export(mut self, outcome: &str) -> Result<(), String> {
        let traces = self.traces(outcome);
        let metrics = self.metrics();
        post(&self.endpoint, "/v1/traces", &traces)?;
        post(&self.endpoint, "/v1/metrics", &metrics)
    }
}

fn scope() -> Value {
    json!({"name": "troupe", "version": env!("CARGO_PKG_VERSION")})
}

/// One OTLP/HTTP JSON request to `endpoint` (`http://host:port[/prefix]`).
fn post(endpoint: &str, path: &str, body: &Value) -> Result<(), String> {
    let fail = |e: &dyn std::fmt::Display| format!("cannot export telemetry to {endpoint}{path}: {e}");
    let rest = endpoint.strip_prefix("http://").ok_or_else(|| fail(&"not an http:// address"))?;
    let (host, prefix) = rest.split_once('/').map_or((rest, ""), |(h, p)| (h, p));
    let addr = if host.contains(':') { host.to_string() } else { format!("{host}:80") };
    let target = std::net::ToSocketAddrs::to_socket_addrs(&addr).map_err(|e| fail(&e))?.next();
    let target = target.ok_or_else(|| fail(&"the host has no address"))?;
    let timeout = Duration::from_secs(5);
    let mut stream = std::net::TcpStream::connect_timeout(&target, timeout).map_err(|e| fail(&e))?;
    stream
        .set_read_timeout(Some(timeout))
        .and_then(|_| stream.set_write_timeout(Some(timeout)))
        .map_err(|e| fail(&e))?;
    let body = body.to_string();
    let prefix = if prefix.is_empty() { String::new() } else { format!("/{}", prefix.trim_end_matches('/')) };
    let request = format!(
        "POST {prefix}{path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).map_err(|e| fail(&e))?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).map_err(|e| fail(&e))?;
    let text = String::from_utf8_lossy(&answer);
    let status = text.split_whitespace().nth(1).unwrap_or("");
    if status.starts_with('2') { Ok(()) } else { Err(fail(&format!("the collector answered {status}"))) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_nest_under_the_run_and_carry_genai_attributes() {
        let mut t = Telemetry::new("http://127.0.0.1:1", "troupe", "login");
        t.launched("builder-g1-2", "builder", "claude", Some("sonnet"));
        let call = |name: &str| AgentEvent::ToolUse {
            id: "c1".into(),
            name: name.into(),
            kind: troupe_core::event::ToolKind::Mcp,
            input: json!({}),
        };
        t.tool("builder-g1-2", &call("mcp__troupe__troupe__board_complete"));
        t.tool("builder-g1-2", &AgentEvent::ToolResult { id: "c1".into(), ok: false, output: String::new() });
        t.turn("builder-g1-2", 100, 20, 0.5);
        t.ended("builder-g1-2", true);
        let doc = t.traces("completed");
        let spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"].as_array().unwrap();
        assert_eq!(spans.len(), 3);
        assert_eq!(spans[1]["parentSpanId"], spans[0]["spanId"]);
        assert_eq!(spans[2]["parentSpanId"], spans[1]["spanId"]);
        assert_eq!(spans[2]["name"], "execute_tool mcp__troupe__troupe__board_complete");
        assert_eq!(spans[2]["status"]["code"], 2, "a failed call is an error");
        let attrs = spans[1]["attributes"].to_string();
        assert!(attrs.contains(r#"{"key":"gen_ai.usage.input_tokens","value":{"intValue":"100"}}"#), "{attrs}");
        assert!(attrs.contains(r#"{"key":"troupe.cost.usd","value":{"doubleValue":0.5}}"#), "{attrs}");
        assert_eq!(doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"].as_str().unwrap().len(), 32);
        let metrics = t.metrics().to_string();
        assert!(metrics.contains("gen_ai.client.token.usage") && metrics.contains("\"asDouble\":0.5"), "{metrics}");
    }
}
