//! `[telemetry] otlp_endpoint`: a run exports OTLP/HTTP JSON to a local
//! receiver, with the GenAI semantic conventions' span names and attributes
//! and the fields of the OTLP JSON encoding.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;

use serde_json::Value;

use crate::support::json;

/// A one-thread OTLP/HTTP receiver on port 0: answers 200 to `n` requests and
/// hands back (path, body).
fn receiver(n: usize) -> (String, std::thread::JoinHandle<Vec<(String, Value)>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let handle = std::thread::spawn(move || {
        let mut got = Vec::new();
        for stream in listener.incoming().take(n) {
            let mut stream = stream.unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            let path = line.split_whitespace().nth(1).unwrap_or_default().to_string();
            let mut length = 0;
            loop {
                let mut header = String::new();
                reader.read_line(&mut header).unwrap();
                if header.trim().is_empty() {
                    break;
                }
                if let Some(v) = header.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap();
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
                .unwrap();
            got.push((path, serde_json::from_slice(&body).unwrap()));
        }
        got
    });
    (url, handle)
}

fn attr<'a>(item: &'a Value, key: &str) -> Option<&'a Value> {
    item["attributes"].as_array()?.iter().find(|a| a["key"] == key).map(|a| &a["value"])
}

#[test]
fn a_run_exports_genai_spans_and_token_and_cost_metrics() {
    let p = crate::lead::project(&crate::budget::spending_script(0.25));
    let (url, handle) = receiver(2);
    let config = p.path(".troupe/config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!("\n[telemetry]\notlp_endpoint = \"{url}\"\n"));
    std::fs::write(&config, text).unwrap();
    let out = p
        .troupe()
        .args(["--json", "run", "login", "users log in", "--engine", "scripted", "--no-review"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(json(&out)["outcome"], "completed");
    let got = handle.join().unwrap();
    let (path, traces) = &got[0];
    assert_eq!(path, "/v1/traces");
    let resource = &traces["resourceSpans"][0];
    assert_eq!(attr(&resource["resource"], "service.name").unwrap()["stringValue"], "troupe");
    let spans = resource["scopeSpans"][0]["spans"].as_array().unwrap();
    let root = &spans[0];
    assert_eq!(root["name"], "troupe run login");
    assert_eq!(attr(root, "troupe.cost.usd").unwrap()["doubleValue"], 0.75);
    let agents: Vec<&Value> = spans
        .iter()
        .filter(|s| attr(s, "gen_ai.operation.name").is_some_and(|v| v["stringValue"] == "invoke_agent"))
        .collect();
    assert_eq!(agents.len(), 5, "one invoke_agent span per teammate");
    assert!(agents.iter().all(|s| s["parentSpanId"] == root["spanId"] && s["traceId"] == root["traceId"]));
    let builder = agents.iter().find(|s| s["name"] == "invoke_agent builder").unwrap();
    assert_eq!(attr(builder, "gen_ai.usage.input_tokens").unwrap()["intValue"], "100");
    assert_eq!(attr(builder, "gen_ai.usage.output_tokens").unwrap()["intValue"], "10");
    assert_eq!(attr(builder, "gen_ai.provider.name").unwrap()["stringValue"], "scripted");
    for s in spans {
        for field in ["traceId", "spanId", "name", "kind", "startTimeUnixNano", "endTimeUnixNano", "status"] {
            assert!(!s[field].is_null(), "{field} in {s}");
        }
        assert!(s["startTimeUnixNano"].as_str().unwrap().parse::<u128>().unwrap() > 0);
    }
    let gateway: Vec<&Value> =
        spans.iter().filter(|s| attr(s, "troupe.gateway").is_some_and(|v| v["boolValue"] == true)).collect();
    assert_eq!(gateway.len(), 3, "each Builder's board_complete went through the gateway");
    assert_eq!(gateway[0]["name"], "execute_tool mcp__troupe__troupe__board_complete");
    assert_eq!(attr(gateway[0], "gen_ai.operation.name").unwrap()["stringValue"], "execute_tool");
    assert!(agents.iter().any(|a| a["spanId"] == gateway[0]["parentSpanId"]), "a tool call nests in its teammate");

    let (path, metrics) = &got[1];
    assert_eq!(path, "/v1/metrics");
    let metrics = metrics["resourceMetrics"][0]["scopeMetrics"][0]["metrics"].as_array().unwrap();
    let tokens = metrics.iter().find(|m| m["name"] == "gen_ai.client.token.usage").unwrap();
    let points = tokens["histogram"]["dataPoints"].as_array().unwrap();
    assert_eq!(points.len(), 6, "input and output of three Builders");
    let cost = metrics.iter().find(|m| m["name"] == "troupe.cost.usd").unwrap();
    let total: f64 =
        cost["sum"]["dataPoints"].as_array().unwrap().iter().map(|d| d["asDouble"].as_f64().unwrap()).sum();
    assert!((total - 0.75).abs() < 1e-9);
}
