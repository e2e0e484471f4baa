//! Captures real streams of the agent CLIs against the testkit stubs, as golden
//! fixtures: `cargo run -p troupe-engine --example capture -- <scenario> > file`.
//! Paths are normalised to /home/user/project like the shared fixtures.

use std::path::Path;
use std::process::Command;

use serde_json::json;
use troupe_testkit::anthropic::AnthropicStub;
use troupe_testkit::chat::ChatStub;
use troupe_testkit::claude::Claude;
use troupe_testkit::codex::Codex;
use troupe_testkit::gemini::GeminiStub;
use troupe_testkit::gemini_cli::GeminiCli;
use troupe_testkit::opencode::OpenCode;
use troupe_testkit::responses::ResponsesStub;
use troupe_testkit::{Script, Turn};

fn claude_script(scenario: &str, file: &Path) -> (Script, Vec<&'static str>) {
    match scenario {
        "http-error" => {
            (Script::new([Turn::http_error(400, "prompt is too long: 250000 tokens > 200000 maximum")]), vec![])
        }
        "max-turns" => (
            Script::new([
                Turn::tool("Bash", json!({"command": "echo one", "description": "one"})),
                Turn::tool("Bash", json!({"command": "echo two", "description": "two"})),
                Turn::text("never reached"),
            ]),
            vec!["--max-turns", "1"],
        ),
        "thinking" => {
            (Script::new([Turn::text("The answer is 4.").with_thinking("2 + 2: add them, that is 4.")]), vec![])
        }
        "retry" => (Script::new([Turn::text("Recovered after retry.").failing_first(1, 529, "Overloaded")]), vec![]),
        "bash" => (
            Script::new([
                Turn::tool("Write", json!({"file_path": file, "content": "hi from fake model\n"}))
                    .with_text("I'll write the file."),
                Turn::tool(
                    "Bash",
                    json!({"command": "cat hello.txt && echo shell-ok && exit 3", "description": "show"}),
                ),
                Turn::text("Done. Wrote hello.txt"),
            ]),
            vec![],
        ),
        other => panic!("unknown claude scenario {other}"),
    }
}

fn simple_script(scenario: &str) -> Script {
    match scenario {
        "http-error" => Script::new([Turn::http_error(400, "API key not valid. Please pass a valid API key.")]),
        "thinking" => Script::new([Turn::text("The answer is 4.").with_thinking("2 + 2: add them, that is 4.")]),
        "retry" => Script::new([Turn::text("Recovered after retry.").failing_first(1, 500, "upstream hiccup")]),
        "stream-retry" => Script::new([Turn::text("Recovered after reconnecting.").failing_first(1, 0, "cut")]),
        other => panic!("unknown scenario {other}"),
    }
}

fn main() {
    let arg = std::env::args().nth(1).expect("usage: capture <engine>-<scenario>");
    let (engine, scenario) = arg.split_once('-').expect("<engine>-<scenario>");
    let project = tempfile::tempdir().unwrap();
    let dir = project.path().to_path_buf();
    let file = dir.join("hello.txt");
    let mut scratch = Vec::new();
    let (mut cmd, _stubs): (Command, Box<dyn std::any::Any>) = match engine {
        "claude" => {
            let (script, extra) = claude_script(scenario, &file);
            let stub = AnthropicStub::start(script);
            let claude = Claude::new(&stub.url());
            let mut cmd = claude.command("write hello", &dir);
            cmd.args(extra);
            scratch.push(claude.home().to_path_buf());
            (cmd, Box::new((stub, claude)))
        }
        "gemini" => {
            let stub = GeminiStub::start(simple_script(scenario));
            let gemini = GeminiCli::new(&stub.url());
            let cmd = gemini.command("write hello", &dir);
            scratch.push(gemini.home().to_path_buf());
            (cmd, Box::new((stub, gemini)))
        }
        "codex" => {
            let stub = ResponsesStub::start(simple_script(scenario));
            let codex = Codex::new(&stub.url());
            if scenario.ends_with("retry") {
                codex.append_config("");
                let cfg = codex.home().join("config.toml");
                let text = std::fs::read_to_string(&cfg)
                    .unwrap()
                    .replace("stream_max_retries = 0", "stream_max_retries = 2")
                    .replace("request_max_retries = 0", "request_max_retries = 2");
                std::fs::write(cfg, text).unwrap();
            }
            let cmd = codex.command("write hello", &dir);
            scratch.push(codex.home().to_path_buf());
            (cmd, Box::new((stub, codex)))
        }
        "opencode" => {
            // `priced`: the model has a price in OpenCode's config, so OpenCode
            // reports a cost per step (the ledger's accuracy test).
            let script = if scenario == "priced" { simple_script("thinking") } else { simple_script(scenario) };
            let stub = ChatStub::start(script);
            let opencode = OpenCode::new(&stub.url());
            if scenario == "priced" {
                let cfg = opencode.root().join("opencode.json");
                let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&cfg).unwrap()).unwrap();
                v["provider"]["fake"]["models"]["fake-model"]["cost"] = json!({"input": 2.0, "output": 8.0});
                std::fs::write(cfg, v.to_string()).unwrap();
            }
            let mut cmd = opencode.command("write hello", &dir);
            if scenario == "thinking" {
                cmd.arg("--thinking");
            }
            scratch.push(opencode.root().to_path_buf());
            (cmd, Box::new((stub, opencode)))
        }
        other => panic!("unknown engine {other}"),
    };
    let out = cmd.output().unwrap();
    eprintln!("exit: {:?}\nstderr: {}", out.status.code(), String::from_utf8_lossy(&out.stderr));
    let mut text = String::from_utf8_lossy(&out.stdout).replace(&*dir.to_string_lossy(), "/home/user/project");
    for s in scratch {
        text = text.replace(&*s.to_string_lossy(), "/home/user");
    }
    print!("{text}");
}
