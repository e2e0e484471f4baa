//! Registry, argument building and engine resolution.

use std::collections::BTreeMap;

use troupe_core::config::{Config, EnginesConfig};
use troupe_core::role::Tier;
use troupe_engine::resolve::{Source, resolve};
use troupe_engine::{Registry, RunOptions};

fn opts(prompt: &str) -> RunOptions {
    RunOptions { prompt: prompt.into(), skip_permissions: true, ..RunOptions::default() }
}

fn args(engine: &str, o: &RunOptions) -> (Vec<String>, Vec<&'static str>) {
    let r = Registry::builtin();
    let inv = r.get(engine).0.build(o);
    (inv.args, inv.ignored)
}

#[test]
fn claude_args_follow_the_seed() {
    let (a, ignored) = args("claude", &opts("do it"));
    assert_eq!(
        a,
        [
            "-p",
            "do it",
            "--verbose",
            "--output-format",
            "stream-json",
            "--dangerously-skip-permissions",
            "--disallowedTools=AskUserQuestion"
        ]
    );
    assert!(ignored.is_empty());
    let full = RunOptions {
        allowed_tools: vec!["Read".into(), "Write".into()],
        disallowed_tools: vec!["WebFetch".into()],
        model: Some("opus".into()),
        append_system_prompt: Some("be brief".into()),
        resume_session: Some("s-1".into()),
        settings: Some("{\"hooks\":{}}".into()),
        mcp_config: Some("/tmp/mcp.json".into()),
        max_turns: Some(5),
        skip_permissions: false,
        ..opts("x")
    };
    let (a, _) = args("claude", &full);
    let joined = a.join(" ");
    assert!(!joined.contains("--dangerously-skip-permissions"));
    for want in [
        "--disallowedTools=AskUserQuestion,WebFetch",
        "--allowedTools=Read,Write",
        "--model opus",
        "--append-system-prompt be brief",
        "--resume s-1",
        "--settings {\"hooks\":{}} --setting-sources= ",
        "--mcp-config /tmp/mcp.json",
        "--max-turns 5",
    ] {
        assert!(joined.contains(want), "{want} missing in {joined}");
    }
    // With troupe's gateway configured, Claude Code must connect it before its
    // first turn, not in the background.
    let inv = Registry::builtin().get("claude").0.build(&full);
    assert!(inv.env.iter().any(|(k, v)| k == "MCP_CONNECTION_NONBLOCKING" && v == "0"), "{:?}", inv.env);
    assert!(
        !Registry::builtin()
            .get("claude")
            .0
            .build(&opts("x"))
            .env
            .iter()
            .any(|(k, _)| k == "MCP_CONNECTION_NONBLOCKING")
    );
}

#[test]
fn a_prompt_that_looks_like_a_flag_is_not_parsed_as_one() {
    let r = Registry::builtin();
    let inv = r.get("claude").0.build(&opts("--help me"));
    assert_eq!(inv.stdin.as_deref(), Some("--help me"));
    assert!(!inv.args.contains(&"--help me".to_string()));
    assert!(args("gemini", &opts("--x")).0.contains(&"--prompt=--x".to_string()));
    let (a, _) = args("codex", &opts("-y"));
    assert_eq!(&a[a.len() - 2..], ["--", "-y"]);
}

#[test]
fn gemini_codex_opencode_args() {
    let o = RunOptions { model: Some("m1".into()), ..opts("p") };
    assert_eq!(
        args("gemini", &o).0,
        ["-m", "m1", "--prompt=p", "--output-format", "stream-json", "--yolo", "--skip-trust"]
    );
    assert_eq!(
        args("codex", &o).0,
        [
            "exec",
            "--json",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
            "-m",
            "m1",
            "--",
            "p"
        ]
    );
    let oc = RunOptions { cwd: Some("/w".into()), resume_session: Some("ses_1".into()), ..o.clone() };
    assert_eq!(
        args("opencode", &oc).0,
        ["run", "--format", "json", "--dir", "/w", "--auto", "-m", "m1", "-s", "ses_1", "--", "p"]
    );
    let resume = RunOptions { resume_session: Some("th-1".into()), ..opts("again") };
    assert_eq!(
        args("codex", &resume).0,
        [
            "exec",
            "resume",
            "--json",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
            "th-1",
            "--",
            "again"
        ]
    );
    assert!(
        args("gemini", &RunOptions { resume_session: Some("3".into()), ..opts("p") })
            .0
            .ends_with(&["--resume".into(), "3".into()])
    );
}

#[test]
fn options_an_engine_lacks_are_ignored_and_listed() {
    let o = RunOptions {
        allowed_tools: vec!["Read".into()],
        append_system_prompt: Some("x".into()),
        max_turns: Some(3),
        ..opts("p")
    };
    let (a, ignored) = args("gemini", &o);
    assert_eq!(ignored, ["allowed_tools", "append_system_prompt", "max_turns"]);
    assert!(!a.join(" ").contains("Read"));
    assert_eq!(args("opencode", &o).1, ["allowed_tools", "append_system_prompt", "max_turns"]);
}

#[test]
fn codex_gets_mcp_servers_as_config_overrides() {
    let o = RunOptions {
        mcp_config: Some(r#"{"mcpServers":{"troupe":{"command":"/bin/troupe","args":["mcp","serve"],"env":{"TROUPE_ROLE":"builder"}}}}"#.into()),
        ..opts("p")
    };
    let (a, ignored) = args("codex", &o);
    assert!(ignored.is_empty());
    let j = a.join(" ");
    assert!(j.contains(r#"-c mcp_servers.troupe.command="/bin/troupe""#), "{j}");
    assert!(j.contains(r#"-c mcp_servers.troupe.args=["mcp","serve"]"#), "{j}");
    assert!(j.contains(r#"-c mcp_servers.troupe.env={"TROUPE_ROLE"="builder"}"#), "{j}");
}

#[test]
fn unknown_engine_falls_back_to_claude_with_a_warning() {
    let r = Registry::builtin();
    let (e, fb) = r.get("gpt-cli");
    assert_eq!(e.id, "claude");
    assert_eq!(fb.unwrap().to_string(), "unknown engine 'gpt-cli': using 'claude' instead");
    assert!(r.get("codex").1.is_none());
}

fn config(toml: &str) -> EnginesConfig {
    Config::from_toml(toml).unwrap().engines
}

#[test]
fn custom_engines_and_command_paths_come_from_config() {
    let c = config(
        r#"
[engines.commands]
claude = "/opt/claude/bin/claude"
[engines.custom.aider]
command = "aider"
args = ["--yes", "--message"]
format = "text"
[engines.custom.mine]
command = "my-agent"
prompt = "stdin"
format = "claude"
"#,
    );
    let r = Registry::from_config(&c);
    assert_eq!(r.get("claude").0.command, "/opt/claude/bin/claude");
    let ids: Vec<&str> = r.list().iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids, ["claude", "gemini", "codex", "opencode", "scripted", "aider", "mine"]);
    let inv = r.get("aider").0.build(&RunOptions { model: Some("x".into()), ..opts("fix it") });
    assert_eq!(inv.args, ["--yes", "--message", "fix it"]);
    assert_eq!(inv.ignored, ["skip_permissions", "model"]);
    let inv = r.get("mine").0.build(&opts("hello"));
    assert_eq!((inv.args.len(), inv.stdin.as_deref()), (0, Some("hello")));
    assert_eq!(inv.format.name(), "claude");
}

#[test]
fn an_engine_asked_for_by_name_must_exist_and_a_near_miss_is_named() {
    let r = Registry::builtin();
    assert_eq!(r.requested("gemini").unwrap().id, "gemini");
    let err = r.requested("gemni").unwrap_err();
    assert_eq!(err.to_string(), "unknown engine 'gemni' (did you mean 'gemini'?)");
    assert!(err.hint().contains("claude, gemini, codex, opencode, scripted"), "{}", err.hint());
    assert_eq!(r.requested("xyzzy").unwrap_err().suggestion, None);
    // Config and spec.yaml ids still fall back to claude.
    assert_eq!(r.get("xyzzy").0.id, "claude");
}

#[test]
fn the_scripted_engine_is_an_engine_like_the_others() {
    let r = Registry::builtin();
    let e = r.lookup("scripted").expect("scripted is registered");
    assert!(e.is_builtin());
    assert_eq!(e.format.name(), "troupe");
    let inv = e.build(&RunOptions { script: Some("s.yaml".into()), turn: 2, ..opts("ignored") });
    assert_eq!(inv.args, ["scripted-agent", "--script", "s.yaml", "--turn", "2"]);
    assert!(e.installed().is_ok(), "the running binary plays it");
}

#[test]
fn a_missing_engine_binary_names_the_engine_the_command_and_the_config_key() {
    let mut c = EnginesConfig::default();
    c.commands.insert("gemini".into(), "/nonexistent/bin/gemini".into());
    let r = Registry::from_config(&c);
    let err = r.lookup("gemini").unwrap().installed().unwrap_err();
    assert_eq!(err.to_string(), "engine 'gemini' is not installed: `/nonexistent/bin/gemini` was not found");
    assert!(err.hint().contains("[engines.commands] gemini = \"/path/to/gemini\""), "{}", err.hint());
}

#[test]
fn per_run_wiring_reaches_each_engine_its_own_way() {
    let r = Registry::builtin();
    let o = RunOptions {
        engine_home: Some("/run/g".into()),
        config_overrides: vec!["hooks.Stop=[]".into()],
        inline_config: Some("{}".into()),
        plugin_dirs: vec!["/run/skills".into()],
        ..opts("go")
    };
    let claude = r.get("claude").0.build(&o);
    assert!(claude.args.windows(2).any(|w| w == ["--plugin-dir", "/run/skills"]), "{:?}", claude.args);
    let gemini = r.get("gemini").0.build(&o);
    assert_eq!(gemini.env, [("GEMINI_CLI_HOME".to_string(), "/run/g".to_string())]);
    let codex = r.get("codex").0.build(&o);
    assert!(codex.args.contains(&"--dangerously-bypass-hook-trust".to_string()));
    assert!(codex.args.windows(2).any(|w| w == ["-c", "hooks.Stop=[]"]), "{:?}", codex.args);
    let opencode = r.get("opencode").0.build(&o);
    assert_eq!(opencode.env, [("OPENCODE_CONFIG_CONTENT".to_string(), "{}".to_string())]);
}

#[test]
fn a_custom_engine_cannot_shadow_a_builtin() {
    let err = Config::from_toml("[engines.custom.claude]\ncommand = \"x\"\n").unwrap_err();
    assert!(err.message.contains("engines.custom.claude"), "{err}");
}

#[test]
fn models_per_tier() {
    let r = Registry::builtin();
    let none = EnginesConfig::default();
    assert_eq!(r.get("claude").0.model_for(Tier::T2, &none).as_deref(), Some("opus"));
    assert_eq!(r.get("claude").0.model_for(Tier::T3, &none).as_deref(), Some("sonnet"));
    assert_eq!(r.get("gemini").0.model_for(Tier::T3, &none).as_deref(), Some("gemini-2.5-flash"));
    assert_eq!(r.get("opencode").0.model_for(Tier::T3, &none), None);
    let c = config("[engines.models.claude]\nt2 = \"claude-opus-4-8\"\n");
    assert_eq!(r.get("claude").0.model_for(Tier::T2, &c).as_deref(), Some("claude-opus-4-8"));
    assert_eq!(r.get("claude").0.model_for(Tier::T3, &c).as_deref(), Some("sonnet"));
}

#[test]
fn resolution_order() {
    let c = config("[engines]\ndefault = \"codex\"\n[engines.phases]\ndesign = \"gemini\"\n");
    let mut over = BTreeMap::new();
    over.insert("design".to_string(), "opencode".to_string());
    let check = |phase: &str, o: Option<&BTreeMap<String, String>>, c: &EnginesConfig| {
        let r = resolve(phase, o, Ok(c));
        (r.engine, r.source)
    };
    assert_eq!(check("design", Some(&over), &c), ("opencode".into(), Source::SpecOverride));
    assert_eq!(check("design", None, &c), ("gemini".into(), Source::PhaseConfig));
    assert_eq!(check("impl", Some(&over), &c), ("codex".into(), Source::ConfigDefault));
    assert_eq!(check("impl", None, &EnginesConfig::default()), ("claude".into(), Source::BuiltinDefault));
    let err = Config::from_toml("[engines]\ndefualt = 1\n").unwrap_err();
    let r = resolve("impl", None, Err(&err));
    assert_eq!((r.engine.as_str(), r.source), ("claude", Source::ConfigUnreadable));
    assert!(r.note.unwrap().contains("defualt"));
    // The spec override still wins over an unreadable config.
    assert_eq!(resolve("design", Some(&over), Err(&err)).engine, "opencode");
}

#[test]
fn locate_finds_executables_on_path() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("fake-engine");
    std::fs::write(&bin, "#!/bin/sh\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = std::env::join_paths([dir.path()]).unwrap();
    assert_eq!(troupe_engine::registry::locate("fake-engine", Some(&path)), Some(bin.clone()));
    assert_eq!(troupe_engine::registry::locate("missing-engine", Some(&path)), None);
    assert_eq!(troupe_engine::registry::locate(bin.to_str().unwrap(), None), Some(bin));
}
