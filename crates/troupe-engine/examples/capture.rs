//! Captures real streams of the agent CLIs against the testkit stubs, as golden
//! fixtures: `cargo run -p troupe-engine --example capture -- <scenario> > file`.
//! Paths are normalised to /home/user/project like the shared fixtures.

use serde_json::json;
use troupe_testkit::anthropic::AnthropicStub;
use troupe_testkit::claude::Claude;
use troupe_testkit::{Script, Turn};

fn main() {
    let scenario = std::env::args().nth(1).expect("usage: capture <scenario>");
    let project = tempfile::tempdir().unwrap();
    let dir = project.path().to_path_buf();
    let file = dir.join("hello.txt");
    let (script, extra): (Script, Vec<&str>) = match scenario.as_str() {
        "claude-http-error" => {
            (Script::new([Turn::http_error(400, "prompt is too long: 250000 tokens > 200000 maximum")]), vec![])
        }
        "claude-max-turns" => (
            Script::new([
                Turn::tool("Bash", json!({"command": "echo one", "description": "one"})),
                Turn::tool("Bash", json!({"command": "echo two", "description": "two"})),
                Turn::text("never reached"),
            ]),
            vec!["--max-turns", "1"],
        ),
        "claude-thinking" => {
            (Script::new([Turn::text("The answer is 4.").with_thinking("2 + 2: add them, that is 4.")]), vec![])
        }
        "claude-retry" => {
            (Script::new([Turn::text("Recovered after retry.").failing_first(1, 529, "Overloaded")]), vec![])
        }
        "claude-bash" => (
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
        other => panic!("unknown scenario {other}"),
    };
    let stub = AnthropicStub::start(script);
    let claude = Claude::new(&stub.url());
    let out = claude.command("write hello", &dir).args(extra).output().unwrap();
    eprintln!("exit: {:?}\nstderr: {}", out.status.code(), String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout)
        .replace(&*dir.to_string_lossy(), "/home/user/project")
        .replace(&*claude.home().to_string_lossy(), "/home/user");
    print!("{text}");
}
