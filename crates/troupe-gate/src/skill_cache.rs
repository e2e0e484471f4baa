//! The project's skills (`.troupe/skills/*/SKILL.md`) for the role policy of a
//! hook call, parsed once and kept in `.troupe/state/cache/skills.json`, keyed
//! by every SKILL.md's inode, size, mtime and ctime. A hook runs on every tool
//! call and parsing YAML front matter costs ~21 µs a skill; checking the key
//! costs one `stat` a skill.
//!
//! Never stale: the key is rebuilt from the files on every call, so a changed,
//! added or removed SKILL.md misses the cache and is parsed again; a file
//! changed in the last [`SETTLE`] is never cached (its next change could keep
//! the same timestamp), and ctime cannot be set back by `touch`. Fails closed:
//! a cache that cannot be read, parsed or matched is ignored, and the skills
//! are parsed from their files, whose errors refuse as before.

use std::path::Path;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use troupe_core::layout::Layout;
use troupe_core::rbac::pattern::ToolPattern;
use troupe_core::rbac::skill::{Grants, Skill};

/// How old every SKILL.md must be before its parse is cached.
pub const SETTLE: Duration = Duration::from_secs(2);

/// One SKILL.md as the key sees it: folder name and file identity, or absent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
    let dir = layout.skills_dir();
    let Ok(entries) = std::fs::read_dir(&dir) else { return Ok(None) };
    let mut names: Vec<String> = entries.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    let key: Vec<Stamp> =
        names.iter().map(|name| Stamp { name: name.clone(), file: stamp(&dir.join(name).join("SKILL.md")) }).collect();
    let cache = layout.state_dir().join("cache").join("skills.json");
    if let Some(skills) = read_cache(&cache, &key) {
        return Ok(Some(skills));
    }
    let mut skills = Vec::new();
    for stamp in &key {
        let file = dir.join(&stamp.name).join("SKILL.md");
        let Ok(text) = std::fs::read_to_string(&file) else { continue };
        skills.push(Skill::parse(&text).map_err(|e| (file, e.to_string()))?);
    }
    let settled = key.iter().filter_map(|s| s.file).all(|(_, _, m, mn, c, cn)| {
        let newest = (m, mn).max((c, cn));
        let at = SystemTime::UNIX_EPOCH + Duration::new(newest.0.max(0) as u64, newest.1.clamp(0, 999_999_999) as u32);
        now.duration_since(at).is_ok_and(|age| age >= SETTLE)
    });
    if settled && layout.state_dir().is_dir() {
        write_cache(&cache, key, &skills);
    }
    Ok(Some(skills))
}

/// Write the cache now if it is missing or stale (and the skills settled):
/// for a process outside the teammates' sandbox (the Lead, before a spawn),
/// since the hooks inside it may read the cache but never write it.
pub fn warm(root: &Path) {
    let _ = load(root, SystemTime::now());
}

fn stamp(file: &Path) -> Option<(u64, u64, i64, i64, i64, i64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(file).ok()?;
    m.is_file().then(|| (m.ino(), m.size(), m.mtime(), m.mtime_nsec(), m.ctime(), m.ctime_nsec()))
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
    let Ok(bytes) = serde_json::to_vec(&CacheFile { version: VERSION, key, skills }) else { return };
    let Some(dir) = path.parent() else { return };
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    // Written aside and renamed: a reader sees the old cache or the new one, never half of one.
    let tmp = dir.join(format!("skills.json.{}", std::process::id()));
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

    #[test]
    fn a_changed_skill_is_seen_on_the_next_call_and_a_broken_one_refuses() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        std::fs::create_dir_all(root.join(".troupe/state")).unwrap();
        let write = |id: &str, text: &str| {
            std::fs::create_dir_all(root.join(format!(".troupe/skills/{id}"))).unwrap();
            std::fs::write(root.join(format!(".troupe/skills/{id}/SKILL.md")), text).unwrap();
        };
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
}
