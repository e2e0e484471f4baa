//! `troupe init [DIR]`: create the `.troupe/` layout. Idempotent: a second run
//! changes nothing and says so; a file that already exists is never overwritten.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use troupe_core::layout::Layout;
use troupe_project::fsutil::write_new;

use crate::cli::GlobalArgs;
use crate::error::{CliError, CliResult};
use crate::output::{print_json, print_line};

mod hooks;
mod templates;

/// Create the `.troupe/` layout in a project.
#[derive(Debug, Args)]
pub struct InitArgs {
    /// The project root (created if missing). Defaults to `-C DIR` or the current folder.
    pub dir: Option<PathBuf>,
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
fn scaffold_files(root: &Path) -> Vec<ScaffoldFile> {
    #[allow(unused_mut)] // each area of troupe appends its own files below
    let mut files = templates::files(root);
    // Default skills of the built-in roles: the gateway's and the gates' policy.
    files.extend(
        troupe_core::rbac::defaults::default_skill_files()
            .into_iter()
            .map(|(path, contents)| ScaffoldFile { path, contents }),
    );
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
    // Default skills of the built-in roles: the gateway's and the gates' policy.
    files.extend(
        troupe_core::rbac::defaults::default_skill_files()
            .into_iter()
            .map(|(path, contents)| ScaffoldFile { path, contents }),
    );
    files
}

pub fn run(g: &GlobalArgs, args: InitArgs) -> CliResult<ExitCode> {
    let root = match args.dir.or_else(|| g.project.clone()) {
        Some(d) => d,
        None => crate::project::start_dir(g)?,
    };
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
    let mut created: Vec<String> = Vec::new();

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
    for file in scaffold_files(&root) {
        let path = root.join(&file.path);
        if write_new(&path, file.contents.as_bytes()).map_err(|e| io_error(&path, e))? {
            created.push(file.path);
        }
    }
    if ensure_gitignored(&root).map_err(|e| io_error(&root.join(".gitignore"), e))? {
        created.push(".gitignore (added .troupe/state/)".to_string());
    }

    created.extend(hooks::install_hooks(&root, &args.hooks)?);
    if g.json {
        print_json(&serde_json::json!({ "root": root, "created": created, "changed": !created.is_empty() }));
    } else if created.is_empty() {
        print_line(&format!("{} is already initialized; nothing changed", root.display()));
    } else {
        print_line(&format!("initialized troupe in {}", root.display()));
        for c in &created {
            print_line(&format!("  created {c}"));
        }
        print_line("next: describe the project in .troupe/steering/, then `troupe spec new <feature>`");
    }
    Ok(ExitCode::SUCCESS)
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
