//! A slice of the red-team corpus of `sandbox.rs` (every 20th of its 5,000+
//! shell writes, each aimed at a file the Builder does not own: about 260
//! commands, every template and target) run for real by a Builder on the
//! real Claude Code, Gemini CLI, Codex and OpenCode (the whole corpus through Claude Code
//! passes too, in about six minutes on a loaded 2-core machine: set `STEP` to 1), started the way troupe starts teammates: its
//! stub model issues one shell tool call per script of the corpus, the hooks
//! let the scripts run (they cannot read them), and the kernel refuses every
//! write outside the Builder's ownership. Nothing outside it changes, and the
//! post-run check tells the model about the refusals.

use std::ffi::OsString;
use std::path::Path;

use serde_json::json;
use troupe_testkit::anthropic::AnthropicStub;
use troupe_testkit::chat::ChatStub;
use troupe_testkit::claude::Claude;
use troupe_testkit::codex::Codex;
use troupe_testkit::gemini::GeminiStub;
use troupe_testkit::gemini_cli::{self, GeminiCli};
use troupe_testkit::opencode::OpenCode;
use troupe_testkit::responses::ResponsesStub;
use troupe_testkit::{Script, Turn};

use crate::sandbox::{CorpusRun, OWNED};

/// Every how many commands of the corpus the slice keeps.
const STEP: usize = 20;

const REPORT: &str =
    "BUILDER_COMPLETE\nFeature: login\nStatus: done\nTasks completed: 1\nFiles: src/mine.rs\nTests: ok";

/// Design and plan on the scripted engine, the Builder on `engine` run from `bin`.
fn config(engine: &str, bin: &Path, extra: &str) -> String {
    format!(
        "[engines]\ndefault = \"{engine}\"\n\n[engines.phases]\ndesign = \"scripted\"\ntasks = \"scripted\"\n\n[engines.commands]\n{engine} = \"{}\"\n{extra}",
        bin.display()
    )
}

/// One shell tool call per script, then the report.
fn turns(c: &CorpusRun, shell: impl Fn(String) -> Turn) -> Script {
    let mut turns: Vec<Turn> = c.scripts.iter().map(|s| shell(format!("bash {}", s.display()))).collect();
    turns.push(Turn::text(REPORT));
    Script::new(turns)
}

/// Runs the feature with the Builder's engine environment (`remove` taken
/// out of the inherited one, `env` added), then checks that nothing it does
/// not own changed and that the model was told about the refusals
/// (`told`: everything the stub received).
fn check(
    c: &CorpusRun,
    engine: &str,
    remove: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    told: impl Fn() -> String,
) {
    let report = c.run(|cmd| {
        for k in remove {
            cmd.env_remove(k);
        }
        cmd.envs(env);
    });
    assert_eq!(report["teammates"][2]["engine"], engine, "{report}");
    c.assert_nothing_broken();
    // Each script starts with the C1 chain, whose refusal the command's output shows.
    assert!(told().contains("troupe sandbox: the kernel refused"), "the post-run check reported the refusals");
    assert!(!c.root.join(".claude/settings.local.json").exists());
    assert!(!std::fs::read_to_string(c.root.join(OWNED)).unwrap().is_empty());
}

#[test]
fn the_corpus_through_a_real_claude_builder_changes_nothing_it_does_not_own() {
    let c = CorpusRun::new(false, Some(&config("claude", &Claude::bin(), "")), STEP);
    let stub = AnthropicStub::start(turns(&c, |cmd| Turn::tool("Bash", json!({"command": cmd, "description": "run"}))));
    let claude = Claude::new(&stub.url());
    check(&c, "claude", Claude::inherited_to_remove(), claude.env(), || requests(stub.model_requests()));
}

#[test]
fn the_corpus_through_a_real_gemini_builder_changes_nothing_it_does_not_own() {
    let models = format!("\n[engines.models.gemini]\nt3 = \"{}\"\n", gemini_cli::MODEL);
    let c = CorpusRun::new(false, Some(&config("gemini", &GeminiCli::bin(), &models)), STEP);
    let stub = GeminiStub::start(turns(&c, |cmd| Turn::tool("run_shell_command", json!({"command": cmd}))));
    let gemini = GeminiCli::new(&stub.url());
    check(&c, "gemini", GeminiCli::inherited_to_remove(), gemini.env(), || requests(stub.model_requests()));
}

#[test]
fn the_corpus_through_a_real_codex_builder_changes_nothing_it_does_not_own() {
    let c = CorpusRun::new(false, Some(&config("codex", &Codex::bin(), "")), STEP);
    let stub =
        ResponsesStub::start(turns(&c, |cmd| Turn::tool("exec_command", json!({"cmd": cmd, "yield_time_ms": 120000}))));
    let codex = Codex::new(&stub.url());
    check(&c, "codex", Codex::inherited_to_remove(), codex.env(), || requests(stub.model_requests()));
}

#[test]
fn the_corpus_through_a_real_opencode_builder_changes_nothing_it_does_not_own() {
    let c = CorpusRun::new(false, Some(&config("opencode", &OpenCode::bin(), "")), STEP);
    let stub = ChatStub::start(turns(&c, |cmd| Turn::tool("bash", json!({"command": cmd, "description": "run"}))));
    let opencode = OpenCode::new(&stub.url());
    check(&c, "opencode", OpenCode::inherited_to_remove(), opencode.env(), || requests(stub.model_requests()));
}

fn requests(all: Vec<serde_json::Value>) -> String {
    all.iter().map(|r| r.to_string()).collect()
}
