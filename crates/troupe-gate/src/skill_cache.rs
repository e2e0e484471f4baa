//! The project's skills (`.troupe/skills/*/SKILL.md`) for the role policy of a
//! hook call, parsed once and kept in `.troupe/state/cache/skills.json`, keyed
//! by every SKILL.md's inode, size, mtime and ctime. A hook runs on every tool
//! call and parsing YAML front matter costs ~21 µs a skill; checking the key
//! costs one `stat` a skill (relative to the open skills folder, so the
//! kernel walks two path components, not the whole absolute path).
//!
//! What a hook asks is narrower still: one role's permission check. So the
//! role policy built from the skills and `[gateway.roles]` is compiled too,
//! every role's [`RoleCheck`] in `.troupe/state/cache/role-policy.json`, keyed
//! by a hash of the same stamps and of the role settings: a hook whose
//! skills did not change reads one small record and builds nothing
//! ([`role_checks`]).
//!
//! Never stale: the key is rebuilt from the files on every call, so a changed,
//! added or removed SKILL.md misses the cache and is parsed again; a file
//! changed in the last [`SETTLE`] is never cached (its next change could keep
//! the same timestamp), and ctime cannot be set back by `touch`. Fails closed:
//! a cache that cannot be read, parsed or matched is ignored, and the skills
//! are parsed from their files, whose errors refuse as before.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use troupe_core::layout::Layout;
use troupe_core::rbac::pattern::ToolPattern;
use troupe_core::rbac::policy::{Policy, RoleCheck, RoleSettings};
use troupe_core::rbac::skill::{Grants, Skill};

mod kept;
pub use kept::keep_in_memory;

/// Every role's compiled permission check, by role name.
pub type Checks = BTreeMap<String, RoleCheck>;

/// How old every SKILL.md must be before its parse is cached.
pub const SETTLE: Duration = Duration::from_secs(2);

/// One SKILL.md as the key sees it: folder name and file identity, or absent.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
struct Stamp {
    name: String,
    file: Option<(u64, u64, i64, i64, i64, i64)>,
}

/// What the cache holds for a skill: what the role policy reads.
#[derive(Debug, Serialize, Deserialize)]
struct Cached {
    id: String,
    display_name: String,
    description: String,
    allowed_roles: Vec<String>,
    allowed_tools: Vec<String>,
    denied_tools: Vec<String>,
    grants: Grants,
}

#[derive(Serialize, Deserialize)]
struct CacheFile {
    version: u32,
    key: Vec<Stamp>,
    skills: Vec<Cached>,
}

const VERSION: u32 = 1;

/// The skills of the project at `root`: `Ok(None)` without a skills folder;
/// `Err((file, error))` for a SKILL.md that does not parse.
pub fn load(root: &Path, now: SystemTime) -> Result<Option<Vec<Skill>>, (std::path::PathBuf, String)> {
    let layout = Layout::new(root);
    let Some(key) = stamps(&layout.skills_dir()) else { return Ok(None) };
    load_keyed(&layout, &key, now).map(Some)
}

/// Every role's compiled permission check, from the skills of the project
/// at `root` and `[gateway.roles]` (`roles`): `Ok(None)` without skills (no
/// role policy); `Err` for a SKILL.md that does not parse (`file: error`) or
/// skills that make no policy (two with one id).
pub fn role_checks(
    root: &Path,
    roles: &BTreeMap<String, RoleSettings>,
    now: SystemTime,
) -> Result<Option<Arc<Checks>>, String> {
    let layout = Layout::new(root);
    let dir = layout.skills_dir();
    let keep = kept::enabled();
    let roles_json = if keep { serde_json::to_vec(roles).unwrap_or_default() } else { Vec::new() };
    if keep && let Some(checks) = kept::unchanged(root, &dir, &roles_json) {
        return Ok(Some(checks));
    }
    // Armed before the stamps are taken: whatever changes after them is an event.
    let watch = if keep { kept::Watch::arm(&dir) } else { None };
    let Some(key) = stamps(&dir) else { return Ok(None) };
    let hash = policy_key(&key, roles);
    let settled = settled(&key, now);
    // A key too fresh to trust is never kept, with or without a watch.
    let keep = keep && settled;
    let mut watch = watch.filter(|_| keep);
    if keep && let Some(checks) = kept::get(root, hash, &mut watch) {
        return Ok(Some(checks));
    }
    let cache = cache_dir(&layout).join(POLICY_FILE);
    let checks = match read_policy(&cache, hash) {
        Some(checks) => checks,
        None => {
            let skills = load_keyed(&layout, &key, now).map_err(|(file, e)| format!("{}: {e}", file.display()))?;
            if skills.is_empty() {
                return Ok(None);
            }
            let policy = Policy::build(skills, roles).map_err(|e| e.to_string())?;
            let checks: BTreeMap<String, RoleCheck> =
                policy.role_checks().map(|(r, c)| (r.to_string(), c.clone())).collect();
            if !settled || !layout.state_dir().is_dir() {
                return Ok(Some(Arc::new(checks)));
            }
            let file = PolicyFile { version: VERSION, key: hash, checks };
            write_atomic(&cache, &file);
            file.checks
        }
    };
    let checks = Arc::new(checks);
    if keep {
        kept::put(root, hash, roles_json, &checks, watch);
    }
    Ok(Some(checks))
}

/// The skills behind `key`, from the cache when it matches, else parsed
/// (and cached once they settled).
fn load_keyed(layout: &Layout, key: &[Stamp], now: SystemTime) -> Result<Vec<Skill>, (std::path::PathBuf, String)> {
    let dir = layout.skills_dir();
    let cache = cache_dir(layout).join("skills.json");
    if let Some(skills) = read_cache(&cache, key) {
        return Ok(skills);
    }
    let mut skills = Vec::new();
    for stamp in key {
        let file = dir.join(&stamp.name).join("SKILL.md");
        let Ok(text) = std::fs::read_to_string(&file) else { continue };
        skills.push(Skill::parse(&text).map_err(|e| (file, e.to_string()))?);
    }
    if settled(key, now) && layout.state_dir().is_dir() {
        write_cache(&cache, key.to_vec(), &skills);
    }
    Ok(skills)
}

/// Whether every SKILL.md of `key` is older than [`SETTLE`] at `now`.
fn settled(key: &[Stamp], now: SystemTime) -> bool {
    key.iter().filter_map(|s| s.file).all(|(_, _, m, mn, c, cn)| {
        let newest = (m, mn).max((c, cn));
        let at = SystemTime::UNIX_EPOCH + Duration::new(newest.0.max(0) as u64, newest.1.clamp(0, 999_999_999) as u32);
        now.duration_since(at).is_ok_and(|age| age >= SETTLE)
    })
}

fn cache_dir(layout: &Layout) -> std::path::PathBuf {
    layout.state_dir().join("cache")
}

/// Write the caches now if they are missing or stale (and the skills
/// settled): for a process outside the teammates' sandbox (the Lead, before
/// a spawn), since the hooks inside it may read the caches but never write
/// them. The role settings are the project's config's (a config that does
/// not load warms nothing: the hooks refuse on it before asking the skills).
pub fn warm(root: &Path) {
    let Ok(config) = troupe_project::config::load(&Layout::new(root)) else { return };
    let _ = role_checks(root, &config.gateway.roles, SystemTime::now());
}

/// The folder's entries, sorted, each with its SKILL.md's identity; `None`
/// when the folder cannot be read. The stats are relative to the open
/// folder: two path components each instead of the whole absolute path.
fn stamps(dir: &Path) -> Option<Vec<Stamp>> {
    let entries = std::fs::read_dir(dir).ok()?;
    let folder = std::fs::File::open(dir).ok()?;
    let mut names: Vec<String> = entries.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    Some(names.into_iter().map(|name| Stamp { file: stamp(&folder, &name), name }).collect())
}

fn stamp(folder: &std::fs::File, name: &str) -> Option<(u64, u64, i64, i64, i64, i64)> {
    use nix::fcntl::AtFlags;
    use nix::sys::stat::{SFlag, fstatat};
    let m = fstatat(folder, Path::new(name).join("SKILL.md").as_path(), AtFlags::empty()).ok()?;
    let is_file = SFlag::from_bits_truncate(m.st_mode) & SFlag::S_IFMT == SFlag::S_IFREG;
    is_file.then_some((m.st_ino, m.st_size as u64, m.st_mtime, m.st_mtime_nsec, m.st_ctime, m.st_ctime_nsec))
}

/// The compiled role policy's cache file.
const POLICY_FILE: &str = "role-policy.json";

#[derive(Serialize, Deserialize)]
struct PolicyFile {
    version: u32,
    /// [`policy_key`] of what the checks were built from.
    key: u64,
    checks: BTreeMap<String, RoleCheck>,
}

/// One hash of the skills' stamps and the role settings: any change to
/// either is a miss.
fn policy_key(key: &[Stamp], roles: &BTreeMap<String, RoleSettings>) -> u64 {
    let mut h = troupe_core::hash::Fnv::default();
    VERSION.hash(&mut h);
    key.hash(&mut h);
    serde_json::to_vec(roles).unwrap_or_default().hash(&mut h);
    h.finish()
}

fn read_policy(path: &Path, key: u64) -> Option<BTreeMap<String, RoleCheck>> {
    let file: PolicyFile = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
    (file.version == VERSION && file.key == key).then_some(file.checks)
}

fn read_cache(path: &Path, key: &[Stamp]) -> Option<Vec<Skill>> {
    let bytes = std::fs::read(path).ok()?;
    let file: CacheFile = serde_json::from_slice(&bytes).ok()?;
    if file.version != VERSION || file.key != key {
        return None;
    }
    let patterns = |list: Vec<String>| list.iter().map(|p| ToolPattern::parse(p)).collect::<Result<Vec<_>, _>>().ok();
    file.skills
        .into_iter()
        .map(|c| {
            Some(Skill {
                id: c.id,
                display_name: c.display_name,
                description: c.description,
                allowed_roles: c.allowed_roles,
                allowed_tools: patterns(c.allowed_tools)?,
                denied_tools: patterns(c.denied_tools)?,
                grants: c.grants,
                body: String::new(),
            })
        })
        .collect()
}

fn write_cache(path: &Path, key: Vec<Stamp>, skills: &[Skill]) {
    let skills = skills
        .iter()
        .map(|s| Cached {
            id: s.id.clone(),
            display_name: s.display_name.clone(),
            description: s.description.clone(),
            allowed_roles: s.allowed_roles.clone(),
            allowed_tools: s.allowed_tools.iter().map(ToString::to_string).collect(),
            denied_tools: s.denied_tools.iter().map(ToString::to_string).collect(),
            grants: s.grants.clone(),
        })
        .collect();
    write_atomic(path, &CacheFile { version: VERSION, key, skills });
}

/// Written aside and renamed: a reader sees the old file or the new one, never half of one.
fn write_atomic(path: &Path, value: &impl Serialize) {
    let Ok(bytes) = serde_json::to_vec(value) else { return };
    let Some(dir) = path.parent() else { return };
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    let Some(name) = path.file_name() else { return };
    let tmp = dir.join(format!("{}.{}", name.to_string_lossy(), std::process::id()));
    if std::fs::write(&tmp, bytes).is_ok() && std::fs::rename(&tmp, path).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skill(id: &str, tools: &str) -> String {
        format!("---\nid: {id}\nallowedRoles: [builder]\nallowedTools: [\"{tools}\"]\n---\nbody\n")
    }

    fn ids_and_tools(skills: &[Skill]) -> Vec<String> {
        skills
            .iter()
            .map(|s| {
                format!("{}:{}", s.id, s.allowed_tools.iter().map(ToString::to_string).collect::<Vec<_>>().join(","))
            })
            .collect()
    }

    /// A project with a state folder (so the caches are written).
    fn project() -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join(".troupe/state")).unwrap();
        tmp
    }

    fn write_skill(root: &Path, id: &str, text: &str) {
        std::fs::create_dir_all(root.join(format!(".troupe/skills/{id}"))).unwrap();
        std::fs::write(root.join(format!(".troupe/skills/{id}/SKILL.md")), text).unwrap();
    }

    #[test]
    fn a_changed_skill_is_seen_on_the_next_call_and_a_broken_one_refuses() {
        let tmp = project();
        let root = tmp.path();
        let write = |id: &str, text: &str| write_skill(root, id, text);
        write("a", &skill("a", "fs__read"));
        write("b", &skill("b", "fs__*"));
        let later = SystemTime::now() + Duration::from_secs(60);
        let cache = root.join(".troupe/state/cache/skills.json");
        // Too fresh to cache.
        assert_eq!(ids_and_tools(&load(root, SystemTime::now()).unwrap().unwrap()), ["a:fs__read", "b:fs__*"]);
        assert!(!cache.exists());
        // Settled: cached, and the cache answers the same.
        assert_eq!(ids_and_tools(&load(root, later).unwrap().unwrap()), ["a:fs__read", "b:fs__*"]);
        assert!(cache.is_file());
        assert_eq!(ids_and_tools(&load(root, later).unwrap().unwrap()), ["a:fs__read", "b:fs__*"]);
        // A changed skill is seen at once. (Here the size changes too: this test
        // fakes the clock, so a rewrite within the same timestamp tick is only
        // excluded by SETTLE in real time.)
        write("a", &skill("a", "fs__write"));
        assert_eq!(ids_and_tools(&load(root, later).unwrap().unwrap()), ["a:fs__write", "b:fs__*"]);
        // Added and removed skills are seen.
        write("c", &skill("c", "*"));
        std::fs::remove_dir_all(root.join(".troupe/skills/b")).unwrap();
        assert_eq!(ids_and_tools(&load(root, later).unwrap().unwrap()), ["a:fs__write", "c:*"]);
        // A broken SKILL.md refuses, cache or not.
        write("c", "no front matter\n");
        let (file, error) = load(root, later).unwrap_err();
        assert!(file.ends_with("c/SKILL.md") && error.contains("front matter"), "{error}");
        // A damaged cache is ignored, never trusted.
        write("c", &skill("c", "*"));
        load(root, later).unwrap();
        std::fs::write(&cache, b"{not json").unwrap();
        assert_eq!(ids_and_tools(&load(root, later).unwrap().unwrap()), ["a:fs__write", "c:*"]);
        // No skills folder: no skills.
        assert!(load(&root.join("elsewhere"), later).unwrap().is_none());
    }

    /// A long-lived process (the hook answerer) keeps the compiled checks in
    /// memory: a settled key is answered without the cache file, a key too
    /// fresh to cache is never kept, and every change to the skills is seen
    /// on the next call, whether the skills' watch saw it (a SKILL.md
    /// rewritten, a skill added, the whole folder put in place of another)
    /// or the stamps did (a skill reached through a symbolic link, which
    /// gets no watch).
    #[test]
    fn the_role_policy_kept_in_memory_sees_every_change() {
        use troupe_core::rbac::check_builtin_tool_with;
        keep_in_memory();
        let tmp = project();
        let root = tmp.path();
        write_skill(root, "a", &skill("a", "builtin__read"));
        let later = SystemTime::now() + Duration::from_secs(60);
        let no_roles = BTreeMap::new();
        let checks = || role_checks(root, &no_roles, later).unwrap().unwrap();
        let allows = |c: &Checks, tool: &str| check_builtin_tool_with(c.get("builder"), "builder", tool).is_allowed();
        let fresh = || role_checks(root, &no_roles, SystemTime::now()).unwrap().unwrap();
        assert!(!Arc::ptr_eq(&fresh(), &fresh()), "too fresh: built on every call, never kept");
        let first = checks();
        std::fs::remove_file(root.join(".troupe/state/cache/role-policy.json")).unwrap();
        let kept = checks();
        assert!(Arc::ptr_eq(&first, &kept), "answered from memory, not rebuilt");
        assert!(kept::watched(root), "and watched: no stat needed");
        // Rewritten in place: the watch sees it.
        let skill_md = root.join(".troupe/skills/a/SKILL.md");
        std::fs::write(&skill_md, skill("a", "builtin__write")).unwrap();
        let changed = checks();
        assert!(allows(&changed, "Write") && !allows(&changed, "Read"));
        assert!(Arc::ptr_eq(&changed, &checks()), "kept again");
        // A skill added.
        write_skill(root, "b", &skill("b", "builtin__read"));
        let added = checks();
        assert!(allows(&added, "Write") && allows(&added, "Read"));
        assert!(Arc::ptr_eq(&added, &checks()));
        // Another folder put in place of the skills folder.
        let skills = root.join(".troupe/skills");
        std::fs::rename(&skills, root.join("old-skills")).unwrap();
        write_skill(root, "a", &skill("a", "builtin__web"));
        let replaced = checks();
        assert!(kept::watched(root));
        assert!(allows(&replaced, "WebFetch") && !allows(&replaced, "Read") && !allows(&replaced, "Write"));
        // A SKILL.md that links elsewhere: no watch, so a change to its target is seen by its stamp.
        let target = root.join("target.md");
        std::fs::write(&target, skill("a", "builtin__read")).unwrap();
        std::fs::remove_file(skills.join("a/SKILL.md")).unwrap();
        std::os::unix::fs::symlink(&target, skills.join("a/SKILL.md")).unwrap();
        assert!(allows(&checks(), "Read"));
        assert!(!kept::watched(root), "a linked SKILL.md is not watched");
        std::fs::write(&target, skill("a", "builtin__shell")).unwrap();
        let linked = checks();
        assert!(allows(&linked, "Bash") && !allows(&linked, "Read"));
        // Another project with the same skills is its own entry.
        let other = project();
        write_skill(other.path(), "a", &skill("a", "builtin__read"));
        let theirs = role_checks(other.path(), &no_roles, later).unwrap().unwrap();
        assert!(allows(&theirs, "Read") && !Arc::ptr_eq(&theirs, &linked));
    }

    /// The compiled role policy answers as the policy built from the
    /// files, and any change to a skill or to the role settings is a miss.
    #[test]
    fn the_compiled_role_policy_is_cached_and_never_stale() {
        use troupe_core::rbac::check_builtin_tool_with;
        let tmp = project();
        let root = tmp.path();
        let write = |id: &str, text: &str| write_skill(root, id, text);
        write("a", &skill("a", "builtin__read"));
        let later = SystemTime::now() + Duration::from_secs(60);
        let cache = root.join(".troupe/state/cache/role-policy.json");
        let no_roles = BTreeMap::new();
        let allows = |roles: &BTreeMap<String, RoleSettings>, role: &str, tool: &str| {
            let checks = role_checks(root, roles, later).unwrap().unwrap();
            check_builtin_tool_with(checks.get(role), role, tool).is_allowed()
        };
        assert!(role_checks(root, &no_roles, SystemTime::now()).unwrap().is_some());
        assert!(!cache.exists(), "too fresh to cache");
        assert!(allows(&no_roles, "builder", "Read") && !allows(&no_roles, "builder", "Write"));
        assert!(cache.is_file());
        // What the cache holds is what the policy built from the files says.
        let built = Policy::build(load(root, later).unwrap().unwrap(), &no_roles).unwrap();
        let cached = role_checks(root, &no_roles, later).unwrap().unwrap();
        assert_eq!(cached.get("builder"), built.role_check("builder"));
        assert!(!allows(&no_roles, "reviewer", "Read"), "a role no skill names is unknown");
        // A changed skill is a miss.
        write("a", &skill("a", "builtin__write"));
        assert!(allows(&no_roles, "builder", "Write") && !allows(&no_roles, "builder", "Read"));
        // So is a change of the role settings: here a role inheriting the builder's skills.
        let inherits = RoleSettings { inherits: Some("builder".into()), description: None };
        let roles = BTreeMap::from([("reviewer".to_string(), inherits)]);
        assert!(allows(&roles, "reviewer", "Write"));
        assert!(!allows(&no_roles, "reviewer", "Write"));
        // A damaged cache is ignored; errors refuse, cache or not.
        std::fs::write(&cache, b"{not json").unwrap();
        assert!(allows(&no_roles, "builder", "Write"));
        write("b", &skill("a", "*"));
        let error = role_checks(root, &no_roles, later).unwrap_err();
        assert!(error.contains("two skills have the id"), "{error}");
        write("b", "no front matter\n");
        let error = role_checks(root, &no_roles, later).unwrap_err();
        assert!(error.contains("b/SKILL.md: ") && error.contains("front matter"), "{error}");
        assert!(role_checks(&root.join("elsewhere"), &no_roles, later).unwrap().is_none());
    }
}
