//! Seed 000 Spec 13's execution conventions, enforced on every shell command a
//! hook sees instead of only being asked for in prompts:
//!
//! - 13.1: a command starts with the program it runs, never with a `#` comment
//!   (context belongs in the tool's description);
//! - 13.3: an inline script (`python -c`, `node -e`, `ruby -e`, `perl -e`, a
//!   heredoc or here-string into an interpreter) is prefixed with the project
//!   runtime of steering's tech.md (`uv run python -c …`), when tech.md has one.
//!
//! The refusal quotes the seed's rule, so the agent reads the convention itself.

use troupe_core::config::CommonCommands;

use crate::shell::simple_commands;

/// Seed 000 Spec 13.1, verbatim.
pub const RULE_13_1: &str = "Bash の `command` 引数は実行可能ファイルで始めなければならない。`#` コメント行をプリペンドしてはならない。人間可読なコンテキストは Bash tool の `description` パラメータを使用する";

/// Seed 000 Spec 13.3, verbatim.
pub const RULE_13_3: &str = "インラインスクリプティング（`-c` フラグ、heredocs）は `steering/tech.md` のプロジェクトランタイムをプレフィックスする（例: `uv run python -c \"...\"` であり bare `python -c \"...\"` ではない）";

/// Runners that put a command in the project's environment: `<tool> <verb> <command>`.
const RUNNERS: [(&str, &str); 8] = [
    ("uv", "run"),
    ("poetry", "run"),
    ("pipenv", "run"),
    ("pdm", "run"),
    ("hatch", "run"),
    ("rye", "run"),
    ("pixi", "run"),
    ("bundle", "exec"),
];

/// The project runtime of tech.md's Common Commands: the runner its Test (else
/// Lint, Build, any other) command starts with, such as `uv run`. `None` when
/// the commands run bare (`cargo test`, `npm test`): there is nothing to prefix.
pub fn project_runtime(commands: &CommonCommands) -> Option<String> {
    let ordered = [&commands.test, &commands.lint, &commands.build].into_iter().flatten();
    ordered.chain(commands.all.iter().map(|(_, c)| c)).find_map(|command| {
        let mut words = command.split_whitespace();
        let (tool, verb) = (words.next()?, words.next()?);
        RUNNERS.iter().find(|(t, v)| *t == tool && *v == verb).map(|(t, v)| format!("{t} {v}"))
    })
}

/// The refusal for `command`, if it breaks Spec 13.1 or (with a project
/// `runtime`) 13.3.
pub fn check(command: &str, runtime: Option<&str>) -> Option<String> {
    if command.trim_start().starts_with('#') {
        return Some(format!(
            "troupe execution convention (seed 000 Spec 13.1): {RULE_13_1}. This command starts with a `#` comment: \
             put that text in the tool's description and start the command with the program it runs."
        ));
    }
    let runtime = runtime?;
    let prefix: Vec<&str> = runtime.split_whitespace().collect();
    for words in simple_commands(command) {
        let argv = skip_wrappers(&words);
        if argv.len() >= prefix.len() && argv.iter().zip(&prefix).all(|(w, p)| w == p) {
            continue;
        }
        if let Some(how) = inline_script(argv) {
            return Some(format!(
                "troupe execution convention (seed 000 Spec 13.3): {RULE_13_3}. `{how}` runs an inline script without \
                 the project runtime of .troupe/steering/tech.md: run it as `{runtime} {how} …`."
            ));
        }
    }
    None
}

/// `argv` without `env`, `VAR=value`, `time`, `nohup`, `command`, `exec` in front.
fn skip_wrappers(mut argv: &[String]) -> &[String] {
    while let Some(w) = argv.first() {
        let assignment = w.contains('=') && !w.starts_with(['-', '=']);
        if assignment || matches!(w.as_str(), "env" | "time" | "nohup" | "command" | "exec") {
            argv = &argv[1..];
        } else {
            break;
        }
    }
    argv
}

/// `python3 -c`, `node -e`, `perl -E`, `ruby <<EOF` ...: how `argv` runs an inline script, if it does.
fn inline_script(argv: &[String]) -> Option<String> {
    let (name, args) = argv.split_first()?;
    let name = name.rsplit('/').next().unwrap_or(name);
    let flags: &[&str] = if is_python(name) {
        &["-c"]
    } else if matches!(name, "node" | "nodejs") {
        &["-e", "--eval", "-p", "--print"]
    } else if name == "ruby" {
        &["-e"]
    } else if name == "perl" {
        &["-e", "-E"]
    } else {
        return None;
    };
    // Options come before the script; what follows a script operand is the script's.
    let mut script = false;
    for arg in args {
        if arg.starts_with("<<") {
            // A heredoc into the interpreter is the script, unless it feeds a script file.
            let op = if arg.starts_with("<<<") { "<<<" } else { "<<" };
            return (!script).then(|| format!("{name} {op}"));
        }
        if script || arg == "-" {
            continue;
        }
        if flags.contains(&arg.as_str()) {
            return Some(format!("{name} {arg}"));
        }
        // A cluster of short flags ending in the script flag: `python3 -Bc`, `perl -ne`.
        if arg.len() > 2
            && arg.starts_with('-')
            && !arg.starts_with("--")
            && flags.iter().any(|f| f.len() == 2 && arg.ends_with(&f[1..]))
        {
            return Some(format!("{name} {arg}"));
        }
        script = !arg.starts_with('-');
    }
    None
}

fn is_python(name: &str) -> bool {
    name.strip_prefix("python").is_some_and(|v| v.chars().all(|c| c.is_ascii_digit() || c == '.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_uv(command: &str) -> Option<String> {
        check(command, Some("uv run"))
    }

    #[test]
    fn a_leading_comment_is_refused_with_the_seeds_rule() {
        for command in ["# run the tests\nuv run pytest", "  #!/bin/sh\nls", "#ls"] {
            let reason = check(command, None).unwrap_or_else(|| panic!("{command}"));
            assert!(reason.contains("Spec 13.1") && reason.contains(RULE_13_1), "{reason}");
        }
        for command in ["uv run pytest # all of them", "echo '#1'", "ls\n# later"] {
            assert_eq!(check(command, None), None, "{command}");
        }
    }

    #[test]
    fn inline_scripts_need_the_project_runtime() {
        for (command, how) in [
            ("python -c 'print(1)'", "python -c"),
            ("python3 -c \"import app\"", "python3 -c"),
            ("cd src && python3.12 -Bc 'x'", "python3.12 -Bc"),
            ("/usr/bin/python3 -c 1", "python3 -c"),
            ("node -e 'console.log(1)'", "node -e"),
            ("node --eval 1", "node --eval"),
            ("ruby -e 'p 1'", "ruby -e"),
            ("perl -ne 'print' f", "perl -ne"),
            ("FOO=1 python3 - <<'EOF'\nprint(1)\nEOF", "python3 <<"),
            ("python3 <<< 'print(1)'", "python3 <<<"),
            ("uv run pytest && python -c 1", "python -c"),
        ] {
            let reason = check_uv(command).unwrap_or_else(|| panic!("{command}"));
            assert!(reason.contains("Spec 13.3") && reason.contains(RULE_13_3), "{reason}");
            assert!(reason.contains(&format!("`{how}`")) && reason.contains(&format!("`uv run {how} …`")), "{reason}");
        }
        for command in [
            "uv run python -c 'print(1)'",
            "uv run python3 - <<EOF\nprint('python -c x')\nEOF",
            "FOO=1 uv run node -e 1",
            "python3 script.py",
            "python3 manage.py -c settings",
            "python3 tool.py <<EOF\ninput\nEOF",
            "python -m pytest",
            "cat <<EOF > notes.md\npython -c 1\nEOF",
            "node server.js",
            "pythonista -c x",
        ] {
            assert_eq!(check_uv(command), None, "{command}");
        }
        // Without a project runtime there is nothing to prefix with.
        assert_eq!(check("python3 -c 1", None), None);
    }

    #[test]
    fn the_runtime_comes_from_the_common_commands() {
        let commands = |test: Option<&str>, lint: Option<&str>| CommonCommands {
            test: test.map(str::to_string),
            lint: lint.map(str::to_string),
            ..Default::default()
        };
        assert_eq!(project_runtime(&commands(Some("uv run pytest -q"), None)).as_deref(), Some("uv run"));
        assert_eq!(
            project_runtime(&commands(Some("pytest"), Some("poetry run ruff ."))).as_deref(),
            Some("poetry run")
        );
        assert_eq!(project_runtime(&commands(Some("bundle exec rspec"), None)).as_deref(), Some("bundle exec"));
        assert_eq!(project_runtime(&commands(Some("cargo test"), Some("cargo clippy"))), None);
        assert_eq!(project_runtime(&CommonCommands::default()), None);
    }
}
