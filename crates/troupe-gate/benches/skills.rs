//! The role policy a teammate's hook builds on every tool call, with 200
//! skills in `.troupe/skills/`: parsed from every SKILL.md (what each call did
//! before the cache) versus read from `.troupe/state/cache/skills.json` after
//! one `stat` per SKILL.md. Both include `Policy::build`. Beside them, what
//! a hook does since the role policy is compiled into the cache: the same
//! stats, then one small record (`skill_cache::role_checks`).
//!
//! Run: `cargo bench -p troupe-gate --bench skills`. Prints p50 / p99; asserts
//! only that both ways give the same skills.

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime};

use troupe_core::rbac::policy::Policy;
use troupe_gate::skill_cache;

const SKILLS: usize = 200;
const RUNS: usize = 300;

fn main() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    std::fs::create_dir_all(root.join(".troupe/state")).unwrap();
    for i in 0..SKILLS {
        let dir = root.join(format!(".troupe/skills/skill-{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("SKILL.md"),
            format!(
                "---\nname: skill-{i}\ndescription: Rules for part {i} of the project, a line of realistic length.\n\
                 allowedRoles: [builder, architect]\nallowedTools: [\"fs__read_file\", \"fs__write_file\", \"git__*\"]\n\
                 deniedTools: [\"shell__rm\"]\n---\n# Skill {i}\n\nSeveral paragraphs of instructions follow.\n"
            ),
        )
        .unwrap();
    }
    let roles = BTreeMap::new();
    // Never settled, so never cached: every call parses every file.
    let epoch = SystemTime::UNIX_EPOCH;
    let parsed = time(|| Policy::build(skill_cache::load(root, epoch).unwrap().unwrap(), &roles).unwrap());
    let later = SystemTime::now() + Duration::from_secs(3600);
    let first = skill_cache::load(root, later).unwrap().unwrap();
    let cached = time(|| Policy::build(skill_cache::load(root, later).unwrap().unwrap(), &roles).unwrap());
    let load_only = time(|| skill_cache::load(root, later).unwrap().unwrap());
    let compiled = time(|| skill_cache::role_checks(root, &roles, later).unwrap().unwrap());
    assert!(root.join(".troupe/state/cache/role-policy.json").is_file(), "the role policy is cached");
    let stat_only = time(|| {
        let dir = root.join(".troupe/skills");
        let mut names: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.file_name()).collect();
        names.sort();
        names.iter().filter_map(|n| std::fs::metadata(dir.join(n).join("SKILL.md")).ok()).count()
    });
    assert_eq!(first.len(), SKILLS);
    println!("role policy of {SKILLS} skills, {RUNS} runs (p50 / p99)");
    println!("  parsed from SKILL.md files: {}", summary(parsed));
    println!("  from the cache:             {}", summary(cached));
    println!("  of which the cache alone:   {}", summary(load_only));
    println!("  of which listing + stat:    {}", summary(stat_only));
    println!("  compiled role policy:       {}", summary(compiled));
}

fn time<T>(mut f: impl FnMut() -> T) -> Vec<Duration> {
    (0..RUNS)
        .map(|_| {
            let started = Instant::now();
            std::hint::black_box(f());
            started.elapsed()
        })
        .collect()
}

fn summary(mut times: Vec<Duration>) -> String {
    times.sort();
    let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize].as_secs_f64() * 1000.0;
    format!("{:.3} ms / {:.3} ms", at(0.5), at(0.99))
}
