//! What a teammate may write, from what troupe knows: its ownership for this
//! assignment, its engine's own state, its temporary folder and the
//! project's build outputs.
//!
//! Landlock cannot deny a path beneath an allowed folder, so a folder is
//! granted only when it is *clean*: neither it nor anything beneath it nor
//! any folder above it (within the project) is [`forbidden`]. A file that must
//! be written in an unclean folder (design.md next to spec.yaml, an owned
//! file at the project root next to `.git/`) is granted on its own; a new one
//! is created empty first, since a file-level grant needs a file.
//!
//! One exception: a new spec file (the Architect's design.md, the
//! TaskGenerator's tasks.yaml, an Inspector's findings) lives in or beneath the
//! folder of spec.yaml, and an engine's write
//! tool will not overwrite a file it has not read (Claude Code's `Write`), so
//! it cannot be made empty first; that teammate gets its spec folder, and
//! spec.yaml there is bound read-only for it ([`Policy::readonly`]): only
//! troupe's spec writer, the Lead, ever writes it.

use std::path::{Component, Path, PathBuf};

use troupe_core::ownership::{Writer, may_write};

use super::{Policy, SandboxError};

/// What [`grant`] needs to know about one teammate.
#[derive(Debug, Clone)]
pub struct Grant<'a> {
    /// Where it works: the project root, or a Builder's own worktree.
    pub root: &'a Path,
    /// The project's state folder (`.troupe/state`): the store, heartbeats
    /// and per-run settings, which a Builder's worktree does not have.
    pub state: &'a Path,
    /// Its role and ownership (the hooks' own rule).
    pub writer: Writer<'a>,
    /// Its agent id (names its temporary folder and its heartbeat).
    pub agent: &'a str,
    /// Folders of its engine's own state (sessions, caches), absolute.
    pub engine_state: Vec<PathBuf>,
    /// Single files of its engine's own state, absolute (granted if they exist).
    pub engine_files: Vec<PathBuf>,
    /// Files of troupe's own state its hooks and gateway write (the store,
    /// its heartbeat): granted one by one, and only under `.troupe/state/`
    /// outside the per-run settings (`.troupe/state/hooks/`).
    pub troupe_files: Vec<PathBuf>,
    /// Build outputs relative to the root (`[sandbox] writable`).
    pub writable: &'a [String],
    /// Where its temporary folder goes (the system's temporary folder).
    pub temp_base: PathBuf,
}

/// Paths no teammate may ever write: `.git/`, `.troupe/` (its files are
/// granted one by one), and every engine's project settings.
pub fn forbidden(root: &Path) -> Vec<PathBuf> {
    [".git", ".troupe", ".claude", ".gemini", ".codex", ".opencode"].iter().map(|d| root.join(d)).collect()
}

/// Whether granting `dir` as a whole would grant something forbidden.
fn clean(dir: &Path, forbidden: &[PathBuf]) -> bool {
    forbidden.iter().all(|f| !f.starts_with(dir) && !dir.starts_with(f))
}

/// The literal folder part of an ownership entry: `src/auth/` for
/// `src/auth/**/*.rs`, the parent for a plain file.
fn literal_folder(pattern: &str) -> (PathBuf, bool) {
    let is_glob = pattern.contains(['*', '?', '[', '{']);
    if let Some(dir) = pattern.strip_suffix('/') {
        return (PathBuf::from(dir), true);
    }
    if !is_glob {
        return (Path::new(pattern).parent().map(Path::to_path_buf).unwrap_or_default(), false);
    }
    let mut dir = PathBuf::new();
    for part in pattern.split('/') {
        if part.contains(['*', '?', '[', '{']) {
            break;
        }
        dir.push(part);
    }
    (dir, true)
}

/// Whether `dir` is a feature's spec folder (`.troupe/specs/<feature>`) or
/// one beneath it (`reviews/active/`), made if missing.
fn spec_folder(root: &Path, dir: &Path) -> bool {
    let specs = root.join(".troupe/specs");
    dir.starts_with(&specs) && dir != specs && std::fs::create_dir_all(dir).is_ok()
}

/// Lexical normalisation (no symlinks followed): `a/./b/../c` → `a/c`;
/// `None` when `..` climbs out of the path.
fn normal(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    Some(out)
}

/// Decides what the teammate may write, creating what the grant needs (its
/// temporary folder, the folders of new owned files, empty new owned files in
/// unclean folders). `owned` is what it was given to write (files, folders
/// ending in `/`, or globs, relative to the root); an entry the ownership
/// rule refuses is never granted, whatever the list says.
pub fn grant(g: &Grant<'_>, owned: &[String]) -> Result<Policy, SandboxError> {
    let root = g.root.canonicalize().map_err(|source| SandboxError::Create { path: g.root.to_path_buf(), source })?;
    let forbidden = forbidden(&root);
    let mut policy = Policy::default();
    let mkdir = |p: &Path| std::fs::create_dir_all(p).map_err(|source| SandboxError::Create { path: p.into(), source });

    for entry in owned {
        let entry = entry.trim_start_matches("./");
        let Some(rel) = normal(Path::new(entry)) else { continue };
        if rel.is_absolute() || rel.as_os_str().is_empty() {
            continue;
        }
        let (folder, is_folder_grant) = literal_folder(entry);
        let Some(folder) = normal(&folder) else { continue };
        let folder = root.join(folder);
        let file = root.join(&rel);
        if !is_folder_grant && !may_write(&root, &rel, &g.writer).is_allowed() {
            continue;
        }
        if !is_folder_grant && file.is_file() {
            policy.files.push(file);
            continue;
        }
        if clean(&folder, &forbidden) && folder.starts_with(&root) && folder != root {
            mkdir(&folder)?;
            policy.dirs.push(folder);
        } else if !is_folder_grant && spec_folder(&root, &folder) {
            // A new spec file (design.md, tasks.yaml, findings) in its feature's folder: an
            // engine's write tool refuses to overwrite a file it has not read,
            // so the file cannot be made for it; the folder is granted, and
            // spec.yaml there is bound read-only (see the module doc).
            let spec = folder.join("spec.yaml");
            if spec.is_file() {
                policy.readonly.push(spec);
            }
            policy.dirs.push(folder);
        } else if !is_folder_grant {
            // A new file in a folder that holds something forbidden: make it
            // (empty) so it can be granted on its own.
            if let Some(parent) = file.parent() {
                mkdir(parent)?;
            }
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&file)
                .map_err(|source| SandboxError::Create { path: file.clone(), source })?;
            policy.files.push(file);
        }
    }

    for out in g.writable {
        let Some(rel) = normal(Path::new(out.trim_end_matches('/'))) else { continue };
        let dir = root.join(rel);
        // A build output is made only where its ecosystem is (its parent exists).
        if !dir.exists() && dir.parent().is_some_and(Path::is_dir) && clean(&dir, &forbidden) {
            mkdir(&dir)?;
        }
        if dir.is_dir() && clean(&dir, &forbidden) && dir != root {
            policy.dirs.push(dir);
        }
    }

    // The engine's folder inside troupe's per-run files of this agent (the
    // `.gemini` of its Gemini home) is its own: no other teammate reads it,
    // troupe writes its settings anew before every spawn of this agent, and
    // `hooks_intact` checks them then.
    let state = g.state.canonicalize().unwrap_or_else(|_| g.state.to_path_buf());
    let run_dir = state.join("hooks").join(g.agent);
    let private = |dir: &Path| dir.starts_with(&run_dir) && dir != run_dir;
    for dir in &g.engine_state {
        let Ok(dir) = dir.canonicalize() else { continue };
        if dir.is_dir() && (clean(&dir, &forbidden) || private(&dir)) && !root.starts_with(&dir) {
            policy.dirs.push(dir);
        }
    }
    for file in g.engine_files.iter().filter_map(|f| f.canonicalize().ok()) {
        let file = &file;
        if file.is_file() && !forbidden.iter().any(|f| file.starts_with(f)) {
            policy.files.push(file.clone());
        }
    }
    for file in g.troupe_files.iter().filter_map(|f| f.canonicalize().ok()) {
        let file = &file;
        if file.is_file() && file.starts_with(&state) && !file.starts_with(state.join("hooks")) {
            policy.files.push(file.clone());
        }
    }

    let tmp = g.temp_base.join(format!("troupe-{}-{}", g.agent, std::process::id()));
    // Removed by the teammate's supervisor, or by the guardian if this
    // process dies first or the spawn never happens: listed before it is
    // made, so no instant exists in which it is neither.
    crate::supervisor::guard::temporary(&tmp);
    mkdir(&tmp)?;
    policy.dirs.push(tmp.clone());
    policy.tmp = Some(tmp);
    policy.dirs.sort();
    policy.dirs.dedup();
    policy.files.sort();
    policy.files.dedup();
    policy.readonly.sort();
    policy.readonly.dedup();
    Ok(policy)
}

#[cfg(test)]
mod tests {
    use troupe_core::role::Role;

    use super::*;

    fn grant_for(root: &Path, role: Role, owned: &[String], writable: &[String]) -> Policy {
        let writer = Writer { role, feature: Some("f"), owned_files: owned, agent_name: None };
        let g = Grant {
            root,
            state: &root.join(".troupe/state"),
            writer,
            agent: "builder-1",
            engine_state: vec![],
            engine_files: vec![],
            troupe_files: vec![],
            writable,
            temp_base: root.join("tmpbase"),
        };
        grant(&g, owned).unwrap()
    }

    #[test]
    fn folders_are_granted_only_when_nothing_forbidden_is_in_or_above_them() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::write(root.join("src/lib.rs"), "").unwrap();
        std::fs::write(root.join("Cargo.toml"), "").unwrap();
        let owned: Vec<String> =
            ["src/lib.rs", "src/auth/mod.rs", "README.md", "tests/**/*.rs", ".git/config", "../escape"]
                .iter()
                .map(|s| s.to_string())
                .collect();
        let p = grant_for(&root, Role::Builder, &owned, &["target/".into(), "node_modules/.cache/".into()]);
        assert!(p.files.contains(&root.join("src/lib.rs")));
        assert!(p.dirs.contains(&root.join("src/auth")) && root.join("src/auth").is_dir());
        assert!(p.dirs.contains(&root.join("tests")));
        assert!(p.files.contains(&root.join("README.md")), "a new file at the root is granted alone");
        assert_eq!(std::fs::read(root.join("README.md")).unwrap(), b"");
        assert!(p.dirs.contains(&root.join("target")), "a Rust project's build output");
        assert!(!root.join("node_modules").exists(), "no ecosystem, no output folder");
        for path in p.dirs.iter().chain(&p.files) {
            assert!(!path.starts_with(root.join(".git")) && path != &root, "{path:?}");
        }
        assert!(p.tmp.as_ref().is_some_and(|t| p.dirs.contains(t)));
    }

    #[test]
    fn an_architect_gets_its_spec_folder_and_an_inspector_only_its_findings_file() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let spec = root.join(".troupe/specs/f");
        std::fs::create_dir_all(&spec).unwrap();
        std::fs::write(spec.join("spec.yaml"), "x").unwrap();
        let owned: Vec<String> = [".troupe/specs/f/design.md", ".troupe/specs/f/spec.yaml", ".troupe/specs/f/"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let p = grant_for(&root, Role::Architect, &owned, &[]);
        assert!(p.files.is_empty(), "{p:?}");
        assert_eq!(p.readonly, vec![spec.join("spec.yaml")], "spec.yaml stays the Lead's");
        assert_eq!(p.dirs, vec![spec.clone(), p.tmp.clone().unwrap()]);
        assert!(!spec.join("design.md").exists(), "a write tool will make it");
        let owned = vec![".troupe/specs/f/reviews/active/i1.cpf".to_string()];
        let writer = Writer { role: Role::Inspector, feature: Some("f"), owned_files: &owned, agent_name: Some("i1") };
        let g = Grant {
            root: &root,
            state: &root.join(".troupe/state"),
            writer,
            agent: "i1",
            engine_state: vec![],
            engine_files: vec![],
            troupe_files: vec![],
            writable: &[],
            temp_base: root.join("tmpbase"),
        };
        let p = grant(&g, &owned).unwrap();
        assert!(p.files.is_empty());
        assert!(p.dirs.contains(&spec.join("reviews/active")), "{p:?}");
    }

    #[test]
    fn a_builder_in_its_worktree_still_reaches_the_projects_store() {
        let tmp = tempfile::tempdir().unwrap();
        let project = tmp.path().canonicalize().unwrap();
        let state = project.join(".troupe/state");
        std::fs::create_dir_all(&state).unwrap();
        std::fs::write(state.join("troupe.db"), "").unwrap();
        let worktree = project.join("wt/g1");
        std::fs::create_dir_all(worktree.join("src")).unwrap();
        let owned = vec!["src/a.rs".to_string()];
        let writer = Writer { role: Role::Builder, feature: Some("f"), owned_files: &owned, agent_name: Some("b1") };
        let g = Grant {
            root: &worktree,
            state: &state,
            writer,
            agent: "b1",
            engine_state: vec![],
            engine_files: vec![],
            troupe_files: vec![state.join("troupe.db"), worktree.join(".troupe/state/troupe.db")],
            writable: &[],
            temp_base: project.join("tmpbase"),
        };
        let p = grant(&g, &owned).unwrap();
        assert!(p.files.contains(&state.join("troupe.db")), "{p:?}");
        assert!(p.dirs.contains(&worktree.join("src")), "its files are the worktree's: {p:?}");
        assert!(!p.files.iter().any(|f| f.starts_with(worktree.join(".troupe"))), "{p:?}");
    }
}
