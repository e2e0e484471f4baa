//! `troupe init [DIR]`: create the `.troupe/` layout. Idempotent: a second run
//! changes nothing and says so; a file that already exists is never overwritten.
//! It reads the project's own commands before guessing (`detect`), checks that
//! each Common Command's program exists, refuses to nest inside another troupe
//! project, and says in a few lines what it created and updated (`-v`: every file).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use troupe_core::layout::Layout;
use troupe_project::fsutil::write_new;

use crate::cli::GlobalArgs;
use crate::error::{CliError, CliResult};
use crate::output::{note, print_json, print_line};

pub mod detect;
mod hooks;
mod templates;

/// Create the `.troupe/` layout in a project.
#[derive(Debug, Args)]
pub struct InitArgs {
    /// The project root (created if missing). Defaults to `-C DIR` or the current folder.
    pub dir: Option<PathBuf>,
    /// Only what troupe needs to run: config, steering and the built-in
    /// roles' policy skills; no editable copies of the role prompts and
    /// Inspector perspectives (the built-in ones apply) and no example skills
    /// (`troupe skill add --template` adds one when wanted).
    #[arg(long)]
    pub minimal: bool,
    #[command(flatten)]
    pub hooks: hooks::HookFlags,
}

/// A file `troupe init` writes when it is missing, relative to the project root.
pub struct ScaffoldFile {
    pub path: String,
    pub contents: String,
}

/// Every file `init` may write, from every area of troupe. Areas add their own
/// source here (skills, role prompts, inspector perspectives, ...).
fn scaffold_files(
    detected: &detect::Detected,
    checked: &[templates::Checked],
    folders: &[(String, Option<&'static str>)],
    minimal: bool,
) -> Vec<ScaffoldFile> {
    #[allow(unused_mut)] // each area of troupe appends its own files below
    let mut files = templates::files(detected, checked, folders);
    // Default skills of the built-in roles: the gateway's and the gates' policy.
    files.extend(
        troupe_core::rbac::defaults::default_skill_files()
            .into_iter()
            .map(|(path, contents)| ScaffoldFile { path, contents }),
    );
    if minimal {
        return files;
    }
    files.extend(
        troupe_lead::roles::templates()
            .into_iter()
            .map(|(path, contents)| ScaffoldFile { path, contents: contents.to_string() }),
    );
    // The review perspectives: one Inspector template each.
    files.extend(
        troupe_lead::review::role_templates()
            .into_iter()
            .map(|(path, contents)| ScaffoldFile { path, contents: contents.to_string() }),
    );
    files
}

pub fn run(g: &GlobalArgs, args: InitArgs) -> CliResult<ExitCode> {
    let root = match args.dir.or_else(|| g.project.clone()) {
        Some(d) => d,
        None => crate::project::start_dir(g)?,
    };
    if !args.hooks.uninstall_hooks
        && let Some(outer) = enclosing_project(&root)
    {
        // Like git and jj: one project, one .troupe/; a nested one would split specs and the board.
        return Err(CliError::user(format!(
            "{} is inside the troupe project at {}; troupe does not nest projects",
            std::path::absolute(&root).unwrap_or_else(|_| root.clone()).display(),
            outer.display()
        ))
        .with_hint(format!(
            "troupe commands already work here; to refresh that project run `troupe -C {} init`",
            outer.display()
        )));
    }
    fs::create_dir_all(&root)
        .map_err(|e| CliError::user(format!("cannot create {}", root.display())).with_source(&e))?;
    let root =
        root.canonicalize().map_err(|e| CliError::internal("cannot resolve the project folder").with_source(&e))?;
    let layout = Layout::new(&root);
    if args.hooks.uninstall_hooks {
        let removed = hooks::uninstall_hooks(&root)?;
        if g.json {
            print_json(&serde_json::json!({ "root": root, "removed": removed, "changed": !removed.is_empty() }));
        } else if removed.is_empty() {
            print_line("no troupe hooks were installed; nothing changed");
        } else {
            for r in &removed {
                print_line(&format!("  removed troupe's part of {r}"));
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    // A config that cannot be used is refused before anything is written,
    // as every command refuses it (the one loader; a missing file is fine).
    troupe_project::config::load(&layout).map_err(crate::project::config_file_error)?;
    let had_troupe = root.join(".troupe").exists();
    let in_git = root.ancestors().any(|d| d.join(".git").exists());
    let mut created: Vec<String> = Vec::new();
    let mut updated: Vec<String> = Vec::new();

    // Read the project before writing into it, so structure.md lists its own folders.
    let folders = detect::top_folders(&root);
    let detected = detect::detect(&root);
    let path_var = std::env::var_os("PATH");
    let checked: Vec<templates::Checked> = detect::PURPOSES
        .iter()
        .filter_map(|p| detected.command(p))
        .map(|g| (g.clone(), detect::check(&g.command, path_var.as_deref())))
        .collect();

    for dir in [layout.specs_dir(), layout.roles_dir(), layout.skills_dir(), layout.memory_dir(), layout.handover_dir()]
    {
        if !dir.exists() {
            fs::create_dir_all(&dir).map_err(|e| io_error(&dir, e))?;
            created.push(relative(&root, &dir) + "/");
        }
    }
    let state = layout.state_dir();
    if !state.exists() {
        create_private_dir(&state).map_err(|e| io_error(&state, e))?;
        created.push(relative(&root, &state) + "/");
    }
    let mut tech_written = false;
    for file in scaffold_files(&detected, &checked, &folders, args.minimal) {
        let path = root.join(&file.path);
        if write_new(&path, file.contents.as_bytes()).map_err(|e| io_error(&path, e))? {
            tech_written |= file.path == ".troupe/steering/tech.md";
            created.push(file.path);
        }
    }
    let gitignore_existed = root.join(".gitignore").exists();
    if ensure_gitignored(&root).map_err(|e| io_error(&root.join(".gitignore"), e))? {
        if gitignore_existed { &mut updated } else { &mut created }.push(".gitignore".to_string());
    }
    let config = troupe_project::config::load(&layout).map_err(crate::project::config_file_error)?;
    let hooks = hooks::install_hooks(&root, &args.hooks, &config)?;
    let engine = default_engine(&config);
    // The commands the gates will really use: those just written, or those of the user's own tech.md.
    let commands: Vec<serde_json::Value> = if tech_written {
        checked.iter().map(|(g, why)| command_json(g.purpose, &g.command, why.as_deref(), true)).collect()
    } else {
        let text = fs::read_to_string(layout.steering_dir().join("tech.md")).unwrap_or_default();
        let parsed = troupe_core::config::parse_common_commands(&text);
        [("Test", parsed.test), ("Lint", parsed.lint), ("Build", parsed.build)]
            .into_iter()
            .filter_map(|(p, c)| c.map(|c| (p, c)))
            .map(|(p, c)| command_json(p, &c, detect::check(&c, path_var.as_deref()).as_deref(), false))
            .collect()
    };
    let changed = !created.is_empty() || !updated.is_empty() || !hooks.is_empty();
    let git_warning = (!in_git).then(|| {
        format!(
            "{} is not in a git repository: `troupe run` commits after design and implementation, so it will need `--no-commit` (or run `git init` first)",
            root.display()
        )
    });
    if g.json {
        print_json(&serde_json::json!({
            "root": root,
            "created": created,
            "updated": updated,
            "hooks": hooks,
            "changed": changed,
            "runtime": detected.runtime,
            "commands": commands,
            "engine": engine,
            "git": in_git,
            "warnings": git_warning.iter().collect::<Vec<_>>(),
        }));
        return Ok(ExitCode::SUCCESS);
    }
    if !changed {
        print_line(&format!("{} is already initialized; nothing changed", root.display()));
    } else {
        let verb = if had_troupe { "updated" } else { "created" };
        print_line(&format!("{verb} .troupe/ ({})", summarize(&created)));
        if g.verbose > 0 {
            for c in created.iter().filter(|c| c.starts_with(".troupe/")) {
                print_line(&format!("  created {c}"));
            }
        }
        for c in created.iter().filter(|c| !c.starts_with(".troupe/")) {
            print_line(&format!("created {c}"));
        }
        for u in &updated {
            print_line(&format!("updated {u}"));
        }
        for h in &hooks {
            print_line(&format!("installed hooks in {h}"));
        }
    }
    print_line(&format!("engine: {}", engine["line"].as_str().unwrap_or_default()));
    if commands.is_empty() {
        print_line("Test, Lint: no commands found; add them to .troupe/steering/tech.md");
    }
    for c in &commands {
        print_line(c["line"].as_str().unwrap_or_default());
    }
    if let Some(w) = &git_warning {
        note(&format!("warning: {w}"));
    }
    if changed {
        print_line(
            "next: `troupe doctor`, describe the project in .troupe/steering/, then `troupe run <feature> \"<what>\"`",
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The nearest folder strictly above `root` that holds a `.troupe/`.
fn enclosing_project(root: &Path) -> Option<PathBuf> {
    let abs = std::path::absolute(root).ok()?;
    // Resolve symlinks of the part that exists, so /tmp and /private/tmp agree.
    let mut existing = abs.as_path();
    while !existing.exists() {
        existing = existing.parent()?;
    }
    let real = existing.canonicalize().ok()?.join(abs.strip_prefix(existing).ok()?);
    real.ancestors().skip(1).find(|d| d.join(".troupe").is_dir()).map(Path::to_path_buf)
}

fn command_json(purpose: &str, command: &str, problem: Option<&str>, written: bool) -> serde_json::Value {
    let line = match problem {
        None => format!("{purpose}: {command}"),
        Some(why) if written => format!("{purpose}: {why}; written commented out, edit .troupe/steering/tech.md"),
        Some(why) => format!("{purpose}: {why} (`{command}`); edit .troupe/steering/tech.md"),
    };
    serde_json::json!({ "purpose": purpose, "command": command, "runnable": problem.is_none(), "problem": problem, "line": line })
}

/// The engine `troupe run` will use by default, and whether it is installed.
fn default_engine(config: &troupe_core::config::Config) -> serde_json::Value {
    let id = config.engines.default.clone().unwrap_or_else(|| "claude".to_string());
    if id == "scripted" {
        return serde_json::json!({ "id": id, "installed": true, "path": null, "line": "scripted (built in)" });
    }
    let registry = troupe_engine::Registry::from_config(&config.engines);
    let (engine, _) = registry.get(&id);
    let path = engine.locate();
    let line = match &path {
        Some(p) => format!("{id} ({})", p.display()),
        None => format!("{id} (not found on PATH — troupe doctor)"),
    };
    serde_json::json!({ "id": id, "installed": path.is_some(), "path": path, "line": line })
}

/// `config, 3 steering files, 10 roles, 11 skills` from the created paths.
fn summarize(created: &[String]) -> String {
    let mut config = false;
    let (mut steering, mut roles, mut other) = (0usize, 0usize, 0usize);
    let mut skills = std::collections::BTreeSet::new();
    for c in created.iter().filter(|c| !c.ends_with('/') && c.starts_with(".troupe/")) {
        if c == ".troupe/config.toml" {
            config = true;
        } else if c.starts_with(".troupe/steering/") {
            steering += 1;
        } else if c.starts_with(".troupe/roles/") {
            roles += 1;
        } else if let Some(rest) = c.strip_prefix(".troupe/skills/") {
            skills.insert(rest.split('/').next().unwrap_or(rest).trim_end_matches(".md").to_string());
        } else {
            other += 1;
        }
    }
    let plural = |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let mut parts = Vec::new();
    if config {
        parts.push("config".to_string());
    }
    for (n, one, many) in [
        (steering, "steering file", "steering files"),
        (roles, "role", "roles"),
        (skills.len(), "skill", "skills"),
        (other, "other file", "other files"),
    ] {
        if n > 0 {
            parts.push(plural(n, one, many));
        }
    }
    if parts.is_empty() { "folders".to_string() } else { parts.join(", ") }
}

fn io_error(path: &Path, err: std::io::Error) -> CliError {
    CliError::user(format!("cannot write {}", path.display())).with_source(&err)
}

fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root).unwrap_or(path).to_string_lossy().into_owned()
}

/// `.troupe/state/` holds markers, sockets and the database: only its owner may enter.
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    fs::create_dir_all(dir)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// Add `.troupe/state/` to `.gitignore` unless a line already covers it. Returns true if it wrote.
fn ensure_gitignored(root: &Path) -> std::io::Result<bool> {
    let path = root.join(".gitignore");
    let existing = match fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e),
    };
    let covered = existing.lines().map(str::trim).any(|l| {
        matches!(l, ".troupe/state/" | ".troupe/state" | "/.troupe/state/" | "/.troupe/state" | ".troupe/" | ".troupe")
    });
    if covered {
        return Ok(false);
    }
    let mut text = existing;
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str("# troupe's local state: database, logs, markers, sockets\n.troupe/state/\n");
    troupe_project::write_atomic(&path, text.as_bytes())?;
    Ok(true)
}
