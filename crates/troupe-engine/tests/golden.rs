//! Golden tests: real captured streams of the four CLIs (tests/fixtures, from
//! the shared captures and `examples/capture.rs`) → normalised events.
//! The full event list of each fixture is an insta snapshot; the facts that
//! matter are also asserted by hand.

use troupe_core::event::{AgentEvent, ParsedOutput, ResultType, ToolKind};
use troupe_engine::parse::{StreamFormat, parse_events, parse_output};

fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/fixtures/{name}.jsonl", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("read {path}: {e}"))
}

fn format_of(name: &str) -> StreamFormat {
    StreamFormat::from_name(name.split('-').next().unwrap()).unwrap()
}

/// Events of a fixture, snapshotted, plus its outcome when the process exited 0.
fn check(name: &str) -> (Vec<AgentEvent>, ParsedOutput) {
    let data = fixture(name);
    let events = parse_events(format_of(name), &data);
    insta::assert_json_snapshot!(name, events);
    // Every byte arrives in whatever chunks the pipe gives: the result must not depend on it.
    for chunk in [1, 7, 4096] {
        let mut n = troupe_engine::parse::Normaliser::new(format_of(name));
        let mut chunked = Vec::new();
        for c in data.chunks(chunk) {
            n.push(c, |e| chunked.push(e.clone()));
        }
        n.finish(|e| chunked.push(e.clone()));
        assert_eq!(chunked, events, "{name} split in chunks of {chunk}");
    }
    (events, parse_output(format_of(name), &data, Some(0)))
}

fn tool_uses(events: &[AgentEvent]) -> Vec<(&str, ToolKind)> {
    events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolUse { name, kind, .. } => Some((name.as_str(), *kind)),
            _ => None,
        })
        .collect()
}

fn results(events: &[AgentEvent]) -> Vec<(bool, &str)> {
    events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolResult { ok, output, .. } => Some((*ok, output.as_str())),
            _ => None,
        })
        .collect()
}

#[test]
fn claude_write_success() {
    let (events, out) = check("claude-write-success");
    assert!(matches!(&events[2], AgentEvent::Init { session_id: Some(s), model: Some(m) }
        if s == "e816a659-0852-4e85-9ed7-a5424c93b692" && m == "claude-opus-4-8[1m]"));
    assert_eq!(tool_uses(&events), [("Write", ToolKind::FileEdit)]);
    assert!(results(&events)[0].0);
    assert_eq!(out.kind, ResultType::Success);
    assert_eq!(out.result.as_deref(), Some("Done. Wrote hello.txt"));
    let stats = out.stats.unwrap();
    assert_eq!((stats.num_turns, stats.duration_ms, stats.total_cost_usd), (2, 160, 0.00035));
}

#[test]
fn claude_bash_with_failing_command() {
    let (events, out) = check("claude-bash");
    assert_eq!(tool_uses(&events), [("Write", ToolKind::FileEdit), ("Bash", ToolKind::Command)]);
    let r = results(&events);
    assert!(r[0].0);
    assert_eq!(r[1], (false, "Exit code 3\nhi from fake model\nshell-ok"));
    assert_eq!(out.kind, ResultType::Success);
    assert_eq!(out.stats.unwrap().num_turns, 3);
}

#[test]
fn claude_api_error_is_error_with_subtype_success() {
    let (_, out) = check("claude-http-error");
    assert_eq!(out.kind, ResultType::Error);
    assert!(out.error_message.unwrap().starts_with("Prompt is too long"));
    assert_eq!(out.result, None);
}

#[test]
fn claude_max_turns_has_no_result_field() {
    let (_, out) = check("claude-max-turns");
    assert_eq!(out.kind, ResultType::MaxTurns);
    assert_eq!(out.error_message.as_deref(), Some("Reached maximum number of turns (1)"));
    assert_eq!(out.stats.unwrap().num_turns, 2);
}

#[test]
fn claude_thinking_and_retry() {
    let (events, out) = check("claude-thinking");
    assert!(events.iter().any(|e| matches!(e, AgentEvent::Thinking { text } if text.contains("2 + 2"))));
    assert_eq!(out.result.as_deref(), Some("The answer is 4."));
    let (events, out) = check("claude-retry");
    assert!(events.iter().any(|e| matches!(e, AgentEvent::Error { retry: true, message } if message.contains("529"))));
    assert_eq!(out.kind, ResultType::Success);
}

#[test]
fn gemini_success_and_hook_deny() {
    let (events, out) = check("gemini-success");
    assert_eq!(tool_uses(&events), [("write_file", ToolKind::FileEdit)]);
    assert_eq!(out.kind, ResultType::Success);
    assert_eq!(out.session_id.as_deref(), Some("bb804ff5-e470-4000-8fe4-27bbd36d5813"));
    assert_eq!(out.result.as_deref(), Some("Done. Wrote hello.txt"));
    assert_eq!(out.stats.unwrap().duration_ms, 204);
    assert_eq!(out.stats.unwrap().num_turns, 2);
    let (events, _) = check("gemini-hook-deny");
    assert_eq!(results(&events), [(false, "Tool execution blocked: blocked by test hook")]);
    check("gemini-with-hook");
}

#[test]
fn codex_success_text_and_hooks() {
    let (events, out) = check("codex-success");
    assert_eq!(tool_uses(&events), [("file_change", ToolKind::FileEdit), ("command_execution", ToolKind::Command)]);
    assert_eq!(results(&events)[1], (true, "hi from fake codex\nshell-ok\n"));
    assert_eq!(out.kind, ResultType::Success);
    assert_eq!(out.session_id.as_deref(), Some("01a20347-f3aa-7fa1-9872-3680cec9aea9"));
    assert_eq!(out.result.as_deref(), Some("Done. Wrote hello.txt"));
    let (_, out) = check("codex-text-only");
    assert_eq!(out.result.as_deref(), Some("hello only"));
    let (events, out) = check("codex-hook-deny");
    assert!(tool_uses(&events).is_empty(), "a denied call produces no item");
    assert!(events.iter().any(|e| matches!(e, AgentEvent::Error { retry: true, .. })));
    assert_eq!(out.kind, ResultType::Success);
    check("codex-with-hook");
}

#[test]
fn opencode_success_and_hook_deny() {
    let (events, out) = check("opencode-success");
    assert_eq!(tool_uses(&events), [("write", ToolKind::FileEdit), ("bash", ToolKind::Command)]);
    assert_eq!(out.kind, ResultType::Success);
    assert_eq!(out.result.as_deref(), Some("Done. Wrote hello.txt"));
    assert_eq!(out.session_id.as_deref(), Some("ses_dfcb702dcffeZvnwMYJSLhHB7C"));
    assert_eq!(out.stats.unwrap().num_turns, 3);
    let (events, _) = check("opencode-hook-deny");
    assert_eq!(results(&events), [(false, "blocked by test hook"), (false, "blocked by test hook")]);
    check("opencode-with-hook");
}

#[test]
fn garbage_and_unknown_lines_are_raw_events() {
    for format in ["claude", "gemini", "codex", "opencode"] {
        let f = StreamFormat::from_name(format).unwrap();
        let events =
            parse_events(f, b"not json at all\n{\"type\":\"brand_new_event\",\"x\":1}\n\n[1,2]\n{\"no_type\":true}\n");
        assert_eq!(events.len(), 4, "{format}: {events:?}");
        assert!(events.iter().all(|e| matches!(e, AgentEvent::Raw { .. })), "{format}: {events:?}");
        assert_eq!(parse_output(f, b"garbage", Some(0)).kind, ResultType::Interrupted);
        let err = parse_output(f, b"garbage", Some(2));
        assert_eq!(err.kind, ResultType::Error);
        assert!(err.error_message.unwrap().contains("status 2"));
    }
}

#[test]
fn a_cut_stream_is_interrupted() {
    let data = fixture("claude-write-success");
    let cut = &data[..data.len() - 200];
    assert_eq!(parse_output(StreamFormat::Claude, cut, None).kind, ResultType::Interrupted);
    let data = fixture("opencode-success");
    let lines: Vec<&[u8]> = data.split(|b| *b == b'\n').collect();
    let cut = lines[..lines.len() - 3].join(&b'\n');
    assert_eq!(parse_output(StreamFormat::OpenCode, &cut, Some(0)).kind, ResultType::Interrupted);
}

#[test]
fn gemini_api_error_result() {
    let (_, out) = check("gemini-http-error");
    assert_eq!(out.kind, ResultType::Error);
    assert!(out.error_message.unwrap().contains("API key not valid"));
    let (_, out) = check("gemini-thinking");
    assert_eq!(out.result.as_deref(), Some("The answer is 4."));
}

#[test]
fn codex_errors_retries_and_reasoning() {
    let (events, out) = check("codex-stream-retry");
    assert!(
        events
            .iter()
            .any(|e| matches!(e, AgentEvent::Error { retry: true, message } if message.starts_with("Reconnecting")))
    );
    assert_eq!(out.kind, ResultType::Success);
    assert_eq!(out.result.as_deref(), Some("Recovered after reconnecting."));
    let (events, out) = check("codex-http-error");
    assert!(events.iter().any(|e| matches!(e, AgentEvent::Error { retry: false, .. })));
    assert_eq!(out.kind, ResultType::Error);
    assert!(out.error_message.unwrap().contains("API key not valid"));
    let (events, _) = check("codex-thinking");
    assert!(events.iter().any(|e| matches!(e, AgentEvent::Thinking { text } if text.contains("2 + 2"))));
}

#[test]
fn opencode_api_error_and_reasoning() {
    let (_, out) = check("opencode-http-error");
    assert_eq!(out.kind, ResultType::Error);
    assert_eq!(out.error_message.as_deref(), Some("API key not valid. Please pass a valid API key."));
    let (events, out) = check("opencode-thinking");
    assert!(events.iter().any(|e| matches!(e, AgentEvent::Thinking { .. })));
    assert_eq!(out.result.as_deref(), Some("The answer is 4."));
}

/// What a recorded stream's engine itself reported: its cost (Claude's
/// `total_cost_usd`, OpenCode's step costs), or for engines that report tokens
/// only, its token totals priced by `prices` (Gemini's result stats, Codex's
/// `turn.completed`), read from the raw JSON, not through troupe's parser.
fn engine_reported(name: &str, prices: &troupe_core::usage::PriceTable, model: &str) -> (f64, u64) {
    use serde_json::Value;
    let lines: Vec<Value> =
        fixture(name).split(|b| *b == b'\n').filter_map(|l| serde_json::from_slice(l).ok()).collect();
    let of = |ty: &'static str| lines.iter().filter(move |l| l["type"] == ty);
    let n = |v: &Value| v.as_u64().unwrap_or(0);
    let priced = |fresh: u64, cached: u64, output: u64| {
        let u = troupe_core::event::Usage {
            input_tokens: fresh,
            cached_input_tokens: cached,
            output_tokens: output,
            ..Default::default()
        };
        prices.price(model).map_or(0.0, |p| p.cost(&u))
    };
    match format_of(name) {
        StreamFormat::Claude => {
            let r = of("result").next_back().unwrap();
            let u = &r["usage"];
            let tokens = ["input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"]
                .iter()
                .map(|k| n(&u[*k]))
                .sum();
            (r["total_cost_usd"].as_f64().unwrap(), tokens)
        }
        StreamFormat::OpenCode => of("step_finish").fold((0.0, 0), |(c, t), l| {
            let tk = &l["part"]["tokens"];
            (
                c + l["part"]["cost"].as_f64().unwrap(),
                t + n(&tk["input"]) + n(&tk["output"]) + n(&tk["cache"]["read"]) + n(&tk["cache"]["write"]),
            )
        }),
        StreamFormat::Gemini => {
            let s = &of("result").next_back().unwrap()["stats"];
            (priced(n(&s["input"]), n(&s["cached"]), n(&s["output_tokens"])), n(&s["total_tokens"]))
        }
        StreamFormat::Codex => of("turn.completed").fold((0.0, 0), |(c, t), l| {
            let u = &l["usage"];
            let (input, cached, output) = (n(&u["input_tokens"]), n(&u["cached_input_tokens"]), n(&u["output_tokens"]));
            (c + priced(input - cached, cached, output), t + input + output)
        }),
        other => panic!("no engine report for {other:?}"),
    }
}

#[test]
fn the_usage_ledger_adds_up_to_what_every_engine_reported_within_one_percent() {
    use std::sync::Arc;
    use troupe_core::usage::{ModelPrice, PriceTable};
    use troupe_engine::ledger::LaunchLedger;
    // The stubs' models: Gemini's and OpenCode's are priced by config.toml's
    // `[prices]`, as a user would price a model the built-in table lacks.
    let mut overrides = std::collections::BTreeMap::new();
    overrides.insert(
        "fake-gemini".to_string(),
        ModelPrice { input: 1.25, output: 10.0, cache_read: 0.31, cache_write: 0.0 },
    );
    let prices = Arc::new(PriceTable::with_overrides(&overrides));
    for (name, model, source) in [
        ("claude-bash", "claude-opus-4-8", "reported"),
        ("claude-write-success", "claude-opus-4-8", "reported"),
        ("claude-thinking", "claude-opus-4-8", "reported"),
        ("opencode-priced", "fake/fake-model", "reported"),
        ("gemini-success", "fake-gemini", "calculated"),
        ("codex-success", "gpt-5.5", "calculated"),
    ] {
        let context = troupe_store::UsageContext { agent: "a1".into(), ..Default::default() };
        let mut ledger = LaunchLedger::new(context, "1", Some(model.to_string()), prices.clone());
        let rows: Vec<_> =
            parse_events(format_of(name), &fixture(name)).iter().filter_map(|e| ledger.observe(e)).collect();
        let (cost, tokens) =
            (rows.iter().map(|r| r.cost_usd).sum::<f64>(), rows.iter().map(|r| r.tokens()).sum::<u64>());
        let (want_cost, want_tokens) = engine_reported(name, &prices, model);
        assert!(want_cost > 0.0, "{name}: the engine's report prices to something");
        assert!(
            (cost - want_cost).abs() <= want_cost * 0.01,
            "{name}: booked ${cost}, the engine reported ${want_cost}"
        );
        assert_eq!(tokens, want_tokens, "{name}: tokens");
        assert!(rows.iter().any(|r| r.cost_source == source), "{name}: {rows:?}");
        let mut ids: Vec<_> = rows.iter().map(|r| &r.message_id).collect();
        ids.dedup();
        assert_eq!(ids.len(), rows.len(), "{name}: a message is booked once");
    }
}
