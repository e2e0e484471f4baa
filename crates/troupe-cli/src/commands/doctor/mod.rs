//! `troupe doctor`: everything a run depends on, checked in one screen — the
//! config, the engines the phases use (installed, version, credentials), each
//! Common Command run once as a quality gate would run it, git, hooks, the
//! store and the specs. Exits 1 when something would stop `troupe run`.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Args;
use serde::Serialize;
use troupe_core::config::{Config, ENGINE_PHASES};
use troupe_core::config::{GateRule, GateStep};
use troupe_gate::quality::{GateEnv, GateResult, run_step};
use troupe_project::Project;

use crate::cli::GlobalArgs;
use crate::error::CliResult;
use crate::output::{paint, print_json, print_line};

/// Check that this project can run: config, engines (installed, version,
/// credentials), each Common Command (run once, with a timeout), git, hooks,
/// the store and the specs. Exits 1 when something blocks `troupe run`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Seconds each Common Command may run before it is killed.
    #[arg(long, value_name = "SECS", default_value_t = 300)]
    pub timeout: u64,
    /// Do not run the Common Commands; only check that their programs exist.
    #[arg(long)]
    pub no_run: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Status {
    Ok,
    Warn,
    /// Blocks a run.
    Fail,
}

#[derive(Debug, Serialize)]
struct Check {
    area: &'static str,
    name: String,
    status: Status,
    detail: String,
    hint: Option<String>,
}

fn check(area: &'static str, name: impl Into<String>, status: Status, detail: impl Into<String>) -> Check {
    Check { area, name: name.into(), status, detail: detail.into(), hint: None }
}

impl Check {
    fn hint(mut self, hint: impl Into<String>) -> Check {
        self.hint = Some(hint.into());
        self
    }
}

pub fn run(g: &GlobalArgs, args: DoctorArgs) -> CliResult<ExitCode> {
    let project = crate::project::find(g)?;
    let root = project.root().to_path_buf();
    let mut checks = Vec::new();
    let config = config_check(&project, &mut checks);
    checks.extend(engine_checks(&config));
    checks.extend(command_checks(&root, &args));
    checks.push(git_check(&root));
    checks.push(sandbox_check(&config));
    checks.push(hooks_check(&root));
    checks.push(store_check(&project, &config));
    checks.extend(spec_checks(&project));

    let blocking = checks.iter().filter(|c| c.status == Status::Fail).count();
    let warnings = checks.iter().filter(|c| c.status == Status::Warn).count();
    if g.json {
        print_json(&serde_json::json!({
            "root": root,
            "ok": blocking == 0,
            "blocking": blocking,
            "warnings": warnings,
            "checks": checks,
        }));
    } else {
        print_line(&format!("troupe doctor: {}", root.display()));
        for c in &checks {
            let tag = match c.status {
                Status::Ok => paint("ok  ", "32"),
                Status::Warn => paint("warn", "33"),
                Status::Fail => paint("FAIL", "31"),
            };
            let label =
                if c.area == "command" || c.name == c.area { c.name.clone() } else { format!("{} {}", c.area, c.name) };
            print_line(&format!("{tag}  {label:<16} {}", c.detail));
            if let Some(h) = &c.hint {
                print_line(&format!("      hint: {h}"));
            }
        }
        let plural = |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        print_line(&match (blocking, warnings) {
            (0, 0) => "ready: nothing blocks a run".to_string(),
            (0, w) => format!("ready, with {}", plural(w, "warning", "warnings")),
            (b, w) => format!(
                "not ready: {} a run, {}",
                plural(b, "problem blocks", "problems block"),
                plural(w, "warning", "warnings")
            ),
        });
    }
    Ok(if blocking == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// The config through the one loader every command uses; a broken one is
/// reported with the cause every other command gives (and its hint), and the
/// defaults are used for the rest of the checks.
fn config_check(project: &Project, checks: &mut Vec<Check>) -> Config {
    let path = project.layout().config_file();
    let shown = path.strip_prefix(project.root()).unwrap_or(&path).display().to_string();
    match troupe_project::config::load(project.layout()) {
        Ok(c) if path.exists() => {
            checks.push(check("config", "config", Status::Ok, shown));
            c
        }
        Ok(c) => {
            checks.push(check("config", "config", Status::Ok, format!("{shown} missing: every default applies")));
            c
        }
        Err(e) => {
            let detail = format!("{shown}: {}", e.detail());
            let hint = crate::project::config_file_error(e).hint.unwrap_or_default();
            checks.push(check("config", "config", Status::Fail, detail).hint(hint));
            Config::default()
        }
    }
}

/// Each engine a phase resolves to: installed, its version, and whether credentials are present.
fn engine_checks(config: &Config) -> Vec<Check> {
    let mut phases: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for p in ENGINE_PHASES {
        let id = troupe_engine::resolve::resolve(p, None, Ok(&config.engines)).engine;
        phases.entry(id).or_default().push(p);
    }
    let registry = troupe_engine::Registry::from_config(&config.engines);
    let ids: Vec<(String, Vec<&str>)> = phases.into_iter().collect();
    std::thread::scope(|s| {
        let handles: Vec<_> = ids
            .iter()
            .map(|(id, used_by)| {
                let registry = &registry;
                s.spawn(move || one_engine(registry, id, used_by))
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap_or_default()).collect()
    })
}

fn one_engine(registry: &troupe_engine::Registry, id: &str, used_by: &[&str]) -> Vec<Check> {
    let used = if used_by.len() == ENGINE_PHASES.len() {
        "every phase".to_string()
    } else {
        format!("phases {}", used_by.join(", "))
    };
    if id == "scripted" {
        return vec![check("engine", id, Status::Ok, format!("built in, for {used}"))];
    }
    let (engine, fallback) = registry.get(id);
    if let Some(f) = fallback {
        return vec![check("engine", id, Status::Fail, format!("{f} (for {used})")).hint(
            "name a built-in engine (claude, gemini, codex, opencode) or define it under [engines.custom] in .troupe/config.toml",
        )];
    }
    let Some(path) = engine.locate() else {
        return vec![
            check("engine", id, Status::Fail, format!("`{}` not found on PATH (for {used})", engine.command)).hint(
                format!(
                    "install {}, set [engines.commands] {id} = \"/path/to/{}\", or choose another engine with [engines] default in .troupe/config.toml",
                    engine.label, engine.command
                ),
            ),
        ];
    };
    let version = troupe_engine::registry::version_of(&path);
    let mut out = vec![check(
        "engine",
        id,
        Status::Ok,
        format!("{} ({}), for {used}", version.as_deref().unwrap_or("version unknown"), path.display()),
    )];
    if let Some((what, hint)) = missing_credentials(id) {
        out.push(check("auth", id, Status::Warn, what).hint(hint));
    }
    out
}

/// A hint when none of the usual credentials of a built-in engine is present.
fn missing_credentials(id: &str) -> Option<(String, String)> {
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from).unwrap_or_default();
    let env = |k: &str| std::env::var_os(k).is_some_and(|v| !v.is_empty());
    let (vars, files, login): (&[&str], &[&str], &str) = match id {
        "claude" => (
            &["ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"],
            &[".claude/.credentials.json"],
            "run `claude` once and log in",
        ),
        "gemini" => {
            (&["GEMINI_API_KEY", "GOOGLE_API_KEY"], &[".gemini/oauth_creds.json"], "run `gemini` once and log in")
        }
        "codex" => (&["OPENAI_API_KEY"], &[".codex/auth.json"], "run `codex login`"),
        "opencode" => (&[], &[".local/share/opencode/auth.json"], "run `opencode auth login`"),
        _ => return None,
    };
    let codex_home = std::env::var_os("CODEX_HOME").map(|h| Path::new(&h).join("auth.json"));
    let found = vars.iter().any(|v| env(v))
        || files.iter().any(|f| home.join(f).exists())
        || (id == "codex" && codex_home.is_some_and(|p| p.exists()));
    if found {
        return None;
    }
    let looked: Vec<String> =
        vars.iter().map(|v| format!("${v}")).chain(files.iter().map(|f| format!("~/{f}"))).collect();
    let set = vars.first().map(|v| format!(", or set {v}")).unwrap_or_default();
    Some((format!("no credentials found (looked at {})", looked.join(", ")), format!("{login}{set}")))
}

/// Each Common Command of tech.md, run once in the project root as a gate runs it.
fn command_checks(root: &Path, args: &DoctorArgs) -> Vec<Check> {
    let steering = troupe_gate::run::read_steering(root);
    let mut out = Vec::new();
    if steering.test.is_none() && steering.lint.is_none() {
        out.push(
            check("command", "Test, Lint", Status::Warn, "none in .troupe/steering/tech.md: the quality gates have nothing to run")
                .hint("add `- Test: <command>` and `- Lint: <command>` under `## Common Commands` in .troupe/steering/tech.md"),
        );
    }
    let path = std::env::var_os("PATH");
    for (label, command) in &steering.all {
        let name = title(label);
        if label.contains("format") || label.contains("fmt") {
            out.push(check("command", name, Status::Ok, format!("`{command}` not run (it rewrites files)")));
            continue;
        }
        if let Some(why) = crate::commands::init::detect::check(command, path.as_deref()) {
            out.push(
                check("command", name, Status::Fail, format!("`{command}`: {why}"))
                    .hint("install it, or change the command in .troupe/steering/tech.md"),
            );
            continue;
        }
        if args.no_run {
            out.push(check("command", name, Status::Ok, format!("`{command}` (program found; not run)")));
            continue;
        }
        let started = Instant::now();
        // Exactly as a gate runs a Common Command: a test, any non-zero exit refuses.
        let step = GateStep { label: name.clone(), command: command.clone(), rule: GateRule::Tests };
        let result = run_step(&step, root, &GateEnv::default(), Duration::from_secs(args.timeout));
        let took = format!("{:.1}s", started.elapsed().as_secs_f64());
        out.push(match result {
            GateResult::Passed => check("command", name, Status::Ok, format!("`{command}`: exit 0 in {took}")),
            GateResult::Failed(run) => check(
                "command",
                name,
                Status::Warn,
                format!("`{command}`: {} in {took}: {}", run.detail, last_line(&run.tail)),
            )
            .hint("it fails before any change: teammates' quality gates will refuse until it passes"),
            GateResult::Unrunnable(run) => check(
                "command",
                name,
                Status::Fail,
                format!("`{command}`: {} (it cannot run) in {took}: {}", run.detail, last_line(&run.tail)),
            )
            .hint("install the missing program, or change the command in .troupe/steering/tech.md"),
            GateResult::Errored(run) => check(
                "command",
                name,
                Status::Warn,
                format!("`{command}`: {} in {took}: {}", run.detail, last_line(&run.tail)),
            )
            .hint("it fails before any change: the final quality gate of `troupe run` will report it"),
        });
    }
    out
}

fn title(label: &str) -> String {
    let mut c = label.chars();
    c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default()
}

fn last_line(tail: &str) -> String {
    let line = tail.lines().map(str::trim).rfind(|l| !l.is_empty()).unwrap_or("(no output)");
    line.chars().take(80).collect()
}

fn git(root: &Path, args: &[&str]) -> Option<String> {
    let out = troupe_project::git::command(root).args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn git_check(root: &Path) -> Check {
    if git(root, &["rev-parse", "--is-inside-work-tree"]).as_deref() != Some("true") {
        return check(
            "git",
            "git",
            Status::Fail,
            "not a git repository: `troupe run` commits after design and implementation",
        )
        .hint("run `git init` (and commit your code), or pass `--no-commit` to troupe run");
    }
    let branch = git(root, &["symbolic-ref", "--short", "-q", "HEAD"]).unwrap_or_else(|| "a detached HEAD".into());
    let commits = git(root, &["rev-parse", "--verify", "-q", "HEAD"]).is_some();
    let changes = git(root, &["status", "--porcelain"]).map(|s| s.lines().count()).unwrap_or(0);
    let detail = format!(
        "on {branch}{}, {}",
        if commits { "" } else { " (no commits yet)" },
        match changes {
            0 => "clean".to_string(),
            1 => "1 uncommitted change".to_string(),
            n => format!("{n} uncommitted changes"),
        }
    );
    check("git", "git", Status::Ok, detail)
}

/// Whether teammates can run in their Landlock sandbox: a Fail blocks `troupe
/// run` unless `[sandbox] required = false`, then it is a warning.
fn sandbox_check(config: &Config) -> Check {
    use troupe_engine::sandbox::{State, state};
    let s = state();
    match (s, config.sandbox.required) {
        (State::Available { .. }, _) if !troupe_engine::sandbox::user_namespaces() => check(
            "sandbox",
            "sandbox",
            Status::Fail,
            format!(
                "{}, but no user namespaces: spec.yaml cannot be kept read-only, so an Architect or \
                 task generator cannot start",
                s.describe()
            ),
        )
        .hint(
            "allow unprivileged user namespaces: `sysctl kernel.apparmor_restrict_unprivileged_userns=0` \
             (Ubuntu) or `kernel.unprivileged_userns_clone=1` (older Debian kernels)",
        ),
        (State::Available { .. }, _) => check("sandbox", "sandbox", Status::Ok, s.describe()),
        (_, true) => check("sandbox", "sandbox", Status::Fail, format!("{}: teammates cannot start", s.describe()))
            .hint("use Linux 6.2+ with Landlock enabled, or set `[sandbox] required = false` in .troupe/config.toml"),
        (_, false) => check(
            "sandbox",
            "sandbox",
            Status::Warn,
            format!("{}: teammates run unsandboxed ([sandbox] required = false)", s.describe()),
        ),
    }
}

/// troupe's hooks in the engines' project settings (for your own sessions; teammates get theirs per run).
fn hooks_check(root: &Path) -> Check {
    let targets = [
        ("claude", ".claude/settings.json"),
        ("gemini", ".gemini/settings.json"),
        ("codex", ".codex/hooks.json"),
        ("opencode", ".opencode/plugin/troupe-gates.js"),
    ];
    let installed: Vec<&str> = targets
        .iter()
        .filter(|(engine, file)| {
            std::fs::read_to_string(root.join(file)).is_ok_and(|t| {
                if *engine == "opencode" { t.contains("troupe") } else { t.contains(&format!(" hook {engine} ")) }
            })
        })
        .map(|(engine, _)| *engine)
        .chain(root.join(".troupe/claude-plugin").is_dir().then_some("claude-plugin"))
        .collect();
    if installed.is_empty() {
        check(
            "hooks",
            "hooks",
            Status::Ok,
            "none in the project's engine settings (teammates troupe starts are gated without them)",
        )
        .hint("`troupe init --claude` (or --gemini, --codex, --opencode) gates your own agent sessions too")
    } else {
        check("hooks", "hooks", Status::Ok, format!("installed for {}", installed.join(", ")))
    }
}

fn store_check(project: &Project, config: &Config) -> Check {
    let layout = project.layout();
    // The backend and place as the store resolves them (TROUPE_DATABASE_URL
    // wins), with a PostgreSQL URL's password masked.
    let (backend, place) = match troupe_store::location(layout, &config.store) {
        Ok(found) => found,
        Err(e) => return check("store", config.store.backend.clone(), Status::Fail, e.to_string()),
    };
    if backend == "sqlite" && config.store.url.is_none() && !layout.database_file().exists() {
        return check("store", backend, Status::Ok, "no database yet; the first command that needs it creates it");
    }
    match troupe_store::open(layout, &config.store) {
        Ok(_) => check("store", backend, Status::Ok, format!("{place} opens; schema up to date")),
        Err(e) => check("store", backend, Status::Fail, e.to_string())
            .hint("a database from a newer troupe needs that troupe; a damaged .troupe/state/troupe.db can be moved aside (the board and mailbox start empty); a PostgreSQL store needs its server reachable at [store] url or TROUPE_DATABASE_URL"),
    }
}

/// Every spec.yaml that cannot be read, each on its own line; the others are counted.
fn spec_checks(project: &Project) -> Vec<Check> {
    let specs = troupe_project::specs::Specs::new(project);
    let names = match specs.names() {
        Ok(n) => n,
        Err(e) => return vec![check("specs", "specs", Status::Fail, e.to_string())],
    };
    let mut out = Vec::new();
    let mut good = 0;
    for name in &names {
        match specs.load(name) {
            Ok(_) => good += 1,
            Err(e) => out.push(
                check("specs", name.clone(), Status::Warn, e.to_string())
                    .hint("fix the file by hand (troupe never rewrites a spec.yaml it cannot read), or restore it with `git checkout`"),
            ),
        }
    }
    let detail = match good {
        0 if names.is_empty() => "none yet: `troupe run <feature> \"<what>\"` creates one".to_string(),
        1 => "1 spec readable".to_string(),
        n => format!("{n} specs readable"),
    };
    out.insert(0, check("specs", "specs", Status::Ok, detail));
    out
}
