//! The help that teaches: `troupe --help` lists the commands by the user's
//! path (start here, features, team, policy) instead of alphabetically, and
//! every command's help ends with an `Examples:` section. The tree is the
//! derived one of `cli.rs`, decorated here so that each verb's file keeps only
//! its arguments.

use clap::{Command, CommandFactory};

use crate::cli::Cli;

/// The root help's command groups, in the order a newcomer needs them.
pub const GROUPS: &[(&str, &[&str])] = &[
    ("Start here", &["init", "demo", "doctor", "run", "status", "resume", "cost"]),
    ("Features", &["design", "impl", "review", "revise", "roadmap", "release", "spec", "tasks", "replay"]),
    (
        "Team",
        &[
            "board", "msg", "team", "agent", "kill", "approve", "reject", "lock", "unlock", "locks", "engines",
            "serve", "store", "worker",
        ],
    ),
    ("Talk", &["chat", "ask", "workflow", "adhoc"]),
    ("Policy", &["policy", "skill", "mcp", "audit"]),
    ("Shell", &["completions", "man"]),
];

/// `Examples:` of every visible command, by its path below `troupe`.
pub const EXAMPLES: &[(&str, &str)] = &[
    (
        "",
        "troupe demo                              # the whole pipeline on a sample project, in seconds
  troupe init && troupe doctor             # start on your own repository
  troupe run login \"users log in with email and password\"
  troupe status                            # where every feature stands, and what to type next",
    ),
    (
        "init",
        "troupe init                      # here: .troupe/, steering with checked Common Commands
  troupe init ../api -v            # another folder; list every file written
  troupe init --minimal            # config, steering and role policy only; no templates
  troupe init --claude             # also gate your own Claude Code sessions with troupe's hooks
  troupe init --uninstall-hooks    # remove exactly what the hook flags installed",
    ),
    (
        "demo",
        "troupe demo                      # a sample project in a temporary folder
  troupe demo --dir /tmp/calc      # keep it somewhere you choose",
    ),
    (
        "doctor",
        "troupe doctor                    # everything, Common Commands included
  troupe doctor --no-run           # only check that the commands' programs exist
  troupe doctor --timeout 30       # give each command at most 30 s
  troupe doctor --json             # one JSON document; exit 1 when a run would be blocked",
    ),
    (
        "run",
        "troupe run login \"users log in with email and password\"
  troupe run login \"...\" --engine codex      # every teammate on Codex
  troupe run login \"...\" --no-review         # skip the design and impl reviews this time
  troupe run notes \"...\" --no-commit         # outside git, or to commit yourself",
    ),
    (
        "status",
        "troupe status                    # every feature: phase, next command, teammates
  troupe status login              # one feature
  troupe status --json",
    ),
    (
        "resume",
        "troupe resume login              # continue from spec.yaml and the board
  troupe resume login --engine gemini
  troupe resume login --budget +5   # after a run paused on its budget: five dollars more",
    ),
    (
        "design",
        "troupe design login              # the Architect writes design.md and research.md
  troupe design login --engine claude",
    ),
    (
        "impl",
        "troupe impl login                # tasks.yaml, Builders in waves, quality gates, commit
  troupe impl login --no-commit",
    ),
    (
        "review",
        "troupe review impl login                  # 6 Inspectors and an Auditor
  troupe review impl login --consensus 3    # 3 pipelines, majority verdict
  troupe review design login --no-fix       # stop at NO-GO instead of fixing",
    ),
    (
        "review design",
        "troupe review design login
  troupe review design login --no-fix",
    ),
    (
        "review impl",
        "troupe review impl login
  troupe review impl login --consensus 3",
    ),
    ("review dead-code", "troupe review dead-code login"),
    ("revise", "troupe revise login \"also accept a phone number\"   # revise, then design, review, impl again"),
    (
        "roadmap",
        "troupe roadmap create payments cart --depends cart:payments
  troupe roadmap run
  troupe roadmap status",
    ),
    (
        "roadmap create",
        "troupe roadmap create payments cart search checkout \\
    --depends cart:payments --depends checkout:cart --depends checkout:search",
    ),
    (
        "roadmap status",
        "troupe roadmap status           # WAVE FEATURE STATUS PHASE BLOCKED
  troupe roadmap status --json",
    ),
    ("roadmap run", "troupe roadmap run              # wave by wave, a wave's features side by side"),
    ("roadmap fix", "troupe roadmap fix payments     # unblock its dependents once you fixed it"),
    ("roadmap skip", "troupe roadmap skip payments    # go on without it"),
    (
        "release",
        "troupe release patch \"fix the login redirect\"
  troupe release minor \"phone number login\"",
    ),
    (
        "spec",
        "troupe spec new login -d \"users log in with email and password\"
  troupe spec list
  troupe spec show login",
    ),
    ("spec new", "troupe spec new login -d \"users log in with email and password\""),
    (
        "spec list",
        "troupe spec list
  troupe spec list --json",
    ),
    ("spec show", "troupe spec show login           # phase, versions, blocking, counters, changelog"),
    ("spec gate", "troupe spec gate login impl      # exit 0 if impl may run now, else exit 1 and the reason"),
    ("spec block", "troupe spec block checkout --by payments --reason upstream_failure"),
    ("spec unblock", "troupe spec unblock checkout     # back to the phase it was blocked at"),
    (
        "spec revise",
        "troupe spec revise login         # implementation-complete → design-generated only
  troupe revise login \"<change>\"    # the whole thing: revise and run the pipeline again",
    ),
    (
        "tasks",
        "troupe tasks validate login
  troupe tasks waves login",
    ),
    ("tasks validate", "troupe tasks validate login      # exit 0 and a summary, or exit 1 and every problem"),
    ("tasks waves", "troupe tasks waves login         # waves, groups, files, and what can start now"),
    (
        "board",
        "troupe board list --available
  troupe board create \"Session struct\"
  troupe board claim --next --agent builder-1",
    ),
    (
        "board list",
        "troupe board list
  troupe board list --status pending --feature login
  troupe board list --available",
    ),
    (
        "board create",
        "troupe board create \"Session struct\"
  troupe board create \"Login handler\" --blocked-by t1",
    ),
    ("board assign", "troupe board assign t2 builder-2     # reserve a pending task for an agent"),
    (
        "board claim",
        "troupe board claim t1 --agent builder-1
  troupe board claim --next --agent builder-1",
    ),
    ("board complete", "troupe board complete t1 --agent builder-1"),
    ("board release", "troupe board release t2 --agent builder-2   # back to pending"),
    ("board show", "troupe board show t2"),
    ("board import", "troupe board import login           # tasks.yaml → board tasks login/1.1, ..."),
    (
        "msg",
        "troupe msg send builder-1 \"rebase on main first\"
  troupe msg inbox --agent builder-1 --unread",
    ),
    (
        "msg send",
        "troupe msg send builder-1 \"rebase on main first\" --priority 4
  troupe msg send '*' \"wrap up\" --kind shutdown_request",
    ),
    ("msg inbox", "troupe msg inbox --agent builder-1 --unread --mark-read"),
    (
        "team",
        "troupe team start claude gemini codex --coordinator claude
  troupe team list
  troupe team stop",
    ),
    (
        "team start",
        "troupe team start claude gemini codex --layout tiled
  troupe team start claude gemini --role gemini=inspector --coordinator claude",
    ),
    ("team list", "troupe team list --json"),
    ("team attach", "troupe team attach                 # Ctrl-b d detaches again"),
    ("team stop", "troupe team stop                   # every pane and process of the team\n  troupe team stop gemini --force"),
    (
        "agent",
        "troupe agent list
  troupe agent run --role builder --feature login \"Implement task T3\"",
    ),
    (
        "agent run",
        "troupe agent run --role builder --feature login \"Implement task T3\"
  troupe agent run --role architect --engine gemini - < prompt.md",
    ),
    (
        "ask",
        "troupe ask \"What does src/auth.rs do?\"
  echo \"Review this design\" | troupe ask --role mentor      # any role the skills define
  troupe ask --json --engine gemini \"List the public API\"   # one document: answer, turns, cost, tool calls, denials",
    ),
    (
        "chat",
        "troupe chat                                  # as the coordinator; /help lists the commands
  troupe chat --role mentor --engine gemini    # any role the skills define
  troupe chat --sessions                       # the saved sessions (/save in the REPL)
  troupe chat --resume 3                       # continue saved session 3",
    ),
    (
        "workflow",
        "troupe workflow --list                       # the orchestrator's skills and their scripts
  troupe workflow \"deploy the docs\"             # scripts only; a failure's context goes to .troupe/context/
  troupe workflow \"deploy\" --on-failure auto    # escalate to adhoc mode with the context",
    ),
    (
        "adhoc",
        "troupe adhoc \"why does the build fail?\"
  troupe adhoc --context .troupe/context/20260102T030405.000Z-deploy.json",
    ),
    (
        "agent list",
        "troupe agent list                # registry: status, engine, model, pid
  troupe agent list --running
  troupe agent list --stale        # process gone while working, and the tasks it holds",
    ),
    ("agent logs", "troupe agent logs builder-1a2b3c --follow"),
    (
        "agent stop",
        "troupe agent stop builder-1a2b3c
  troupe agent stop builder-1a2b3c --force",
    ),
    ("engines", "troupe engines list"),
    (
        "engines list",
        "troupe engines list              # installed?, version, phases that use it
  troupe engines list --no-version",
    ),
    (
        "policy",
        "troupe policy ownership
  troupe policy check --role builder --tool Write",
    ),
    ("policy ownership", "troupe policy ownership          # who may write which artifact"),
    (
        "policy check",
        "troupe policy check --role coordinator
  troupe policy check --role coordinator --tool Write   # exit 1: denied",
    ),
    ("policy roles", "troupe policy roles"),
    (
        "skill",
        "troupe skill list
  troupe skill use verification-before-completion",
    ),
    ("skill use", "troupe skill use verification-before-completion"),
    ("skill add", "troupe skill add reviewer-tools --template code-reviewer"),
    ("skill list", "troupe skill list"),
    ("skill templates", "troupe skill templates           # basic, browser-limited, code-reviewer, ..."),
    (
        "mcp",
        "troupe mcp status
  troupe mcp serve --role builder --agent builder-1",
    ),
    (
        "mcp serve",
        "troupe mcp serve --role builder --agent builder-1    # stdio, what an engine runs
  troupe mcp serve --role builder --http 127.0.0.1:0   # Streamable HTTP on loopback",
    ),
    ("mcp status", "troupe mcp status                # start each backend, list its tools"),
    (
        "mcp start",
        "troupe mcp start --role coordinator --background    # detached; prints its URL, token in .troupe/state/mcp/token
  troupe mcp start --role builder --http 0.0.0.0:8765  # off loopback: the bearer token is the guard",
    ),
    ("mcp stop", "troupe mcp stop                  # SIGTERM, then SIGKILL to its process group after --timeout"),
    (
        "serve",
        "troupe serve                                   # http://127.0.0.1:7878, open on loopback
  troupe serve --bind 127.0.0.1:0 --json         # a free port, printed as JSON
  TROUPE_TOKEN=... troupe serve --bind 0.0.0.0:7878
  troupe serve --bind 0.0.0.0:7878 --generate-token   # make a token, print it once",
    ),
    (
        "kill",
        "troupe kill builder-g1-1          # ask it to stop (shutdown_request), then SIGTERM
  troupe kill builder-g1-1 -f       # at once",
    ),
    (
        "approve",
        "troupe approve --list             # the plans waiting for a decision
  troupe approve 42                 # approve plan message 42; the teammate goes on",
    ),
    ("reject", "troupe reject 42 \"split the migration from the API change\""),
    (
        "lock",
        "troupe lock src/schema.rs                      # held by you (`user`) for 10 minutes
  troupe lock src/api.rs --agent builder-1 --ttl 30m",
    ),
    (
        "unlock",
        "troupe unlock src/schema.rs
  troupe unlock src/api.rs --force          # whoever holds it",
    ),
    (
        "locks",
        "troupe locks                              # the locks held now
  troupe locks --history src/api.rs         # who wrote it, for which task, when",
    ),
    ("store", "troupe store migrate --to postgres://troupe@db.internal/troupe"),
    (
        "worker",
        "troupe worker --engines claude,codex --max 4    # on a build host: take the Lead's spawn jobs
  troupe worker list
  troupe worker stop build-7",
    ),
    (
        "worker list",
        "troupe worker list                 # hosts, their load, teammates and stale leases
  troupe worker list --json",
    ),
    (
        "worker stop",
        "troupe worker stop                 # this host: finish its teammates, take no new job, exit
  troupe worker stop build-7",
    ),
    (
        "store migrate",
        "troupe store migrate --to postgres://troupe@db.internal/troupe   # SQLite to PostgreSQL, verified
  troupe store migrate --to /backups/troupe.db                      # a PostgreSQL store back into an empty SQLite file",
    ),
    (
        "cost",
        "troupe cost                      # every feature: turns, tokens, dollars
  troupe cost --by block           # ccusage's 5-hour billing blocks
  troupe cost --by agent --since 12h
  troupe cost --by model --json",
    ),
    (
        "replay",
        "troupe replay login                            # its latest run again, no model: same events and board?
  troupe replay last --json                      # the replay's events, numbered, and any difference
  troupe replay login --until 40 --dir /tmp/at40 && troupe -C /tmp/at40 board list   # the state at event 40",
    ),
    (
        "audit",
        "troupe audit stats
  troupe audit denials --limit 20",
    ),
    ("audit stats", "troupe audit stats               # counts by decision, role, tool, agent"),
    ("audit denials", "troupe audit denials --limit 20"),
    ("audit export", "troupe audit export --format csv > audit.csv"),
    ("audit thinking", "troupe audit thinking            # coverage, tokens, and the reasoning behind each call"),
    (
        "completions",
        "troupe completions bash > ~/.local/share/bash-completion/completions/troupe
  troupe completions zsh > \"${fpath[1]}/_troupe\"
  troupe completions fish > ~/.config/fish/completions/troupe.fish",
    ),
    (
        "man",
        "troupe man > troupe.1 && man ./troupe.1
  troupe man | gzip > /usr/local/share/man/man1/troupe.1.gz",
    ),
];

/// The command tree with the grouped root help and every command's examples.
pub fn command() -> Command {
    let mut root = Cli::command();
    root = decorate(root, "");
    let mut listing = String::new();
    for (heading, names) in GROUPS {
        listing.push_str(&format!("{heading}:\n"));
        for name in *names {
            let about =
                root.find_subcommand(name).and_then(|c| c.get_about()).map(|a| a.to_string()).unwrap_or_default();
            // A help template reads `{...}` as its own variables: `v{version}` becomes `v<version>`.
            let about = about.replace('{', "<").replace('}', ">");
            listing.push_str(&format!("  {name:<12} {about}\n"));
        }
        listing.push('\n');
    }
    root.help_template(format!(
        "{{about-with-newline}}\n{{usage-heading}} {{usage}}\n\n{listing}Global options:\n{{options}}{{after-help}}"
    ))
}

fn decorate(mut cmd: Command, path: &str) -> Command {
    if let Some((_, examples)) = EXAMPLES.iter().find(|(p, _)| *p == path) {
        cmd = cmd.after_help(format!("Examples:\n  {examples}"));
    }
    let names: Vec<String> = cmd.get_subcommands().map(|s| s.get_name().to_string()).collect();
    for name in names {
        let sub_path = if path.is_empty() { name.clone() } else { format!("{path} {name}") };
        cmd = cmd.mut_subcommand(&name, |s| decorate(s, &sub_path));
    }
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    fn visible(cmd: &Command, path: &str, out: &mut Vec<(String, bool)>) {
        for s in cmd.get_subcommands().filter(|s| !s.is_hide_set() && s.get_name() != "help") {
            let p = if path.is_empty() { s.get_name().to_string() } else { format!("{path} {}", s.get_name()) };
            let has = s.get_after_help().is_some_and(|h| h.to_string().starts_with("Examples:\n"));
            out.push((p.clone(), has));
            visible(s, &p, out);
        }
    }

    #[test]
    fn every_visible_command_has_examples() {
        let root = command();
        let mut all = Vec::new();
        visible(&root, "", &mut all);
        let missing: Vec<&str> = all.iter().filter(|(_, has)| !has).map(|(p, _)| p.as_str()).collect();
        assert!(missing.is_empty(), "commands without an Examples: section: {missing:?}");
        for (path, _) in EXAMPLES {
            assert!(
                path.is_empty() || all.iter().any(|(p, _)| p == path),
                "examples for a command that does not exist: {path}"
            );
        }
    }

    /// `troupe run login "a b"  # comment` → ["troupe", "run", "login", "a b"].
    fn words(line: &str) -> Vec<String> {
        let line = line.split("  #").next().unwrap_or(line);
        let (mut out, mut word, mut quote, mut any) = (Vec::new(), String::new(), None, false);
        for c in line.chars() {
            match (quote, c) {
                (None, '"' | '\'') => (quote, any) = (Some(c), true),
                (Some(q), c) if c == q => quote = None,
                (None, ' ') => {
                    if any {
                        out.push(std::mem::take(&mut word));
                    }
                    any = false;
                }
                (_, c) => (word, any) = (word + &c.to_string(), true),
            }
        }
        if any {
            out.push(word);
        }
        out
    }

    #[test]
    fn every_example_parses() {
        use clap::FromArgMatches;
        for (path, text) in EXAMPLES {
            for line in text.lines().map(str::trim).filter(|l| l.starts_with("troupe ")) {
                // Shell around the command (redirections, pipes, chains, continuations) is not troupe's.
                let line =
                    [" > ", " < ", " | ", " && ", " \\"].iter().fold(line, |l, cut| l.split(cut).next().unwrap_or(l));
                let matches = command().try_get_matches_from(words(line));
                let parsed = matches.and_then(|m| crate::cli::Cli::from_arg_matches(&m));
                assert!(parsed.is_ok(), "example of `{path}` does not parse: {line}\n{}", parsed.unwrap_err());
            }
        }
    }

    #[test]
    fn every_visible_command_is_in_exactly_one_group() {
        let root = command();
        for s in root.get_subcommands().filter(|s| !s.is_hide_set() && s.get_name() != "help") {
            let n = GROUPS.iter().filter(|(_, names)| names.contains(&s.get_name())).count();
            assert_eq!(n, 1, "{} is in {n} groups of `troupe --help`", s.get_name());
        }
        for (_, names) in GROUPS {
            for name in *names {
                let sub = root.find_subcommand(name).unwrap_or_else(|| panic!("{name} is grouped but not a command"));
                assert!(!sub.is_hide_set(), "{name} is hidden");
            }
        }
        assert!(root.find_subcommand("hook").is_some_and(|h| h.is_hide_set()));
        assert!(root.find_subcommand("scripted-agent").is_some_and(|h| h.is_hide_set()));
    }
}
