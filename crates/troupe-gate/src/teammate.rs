//! Who the hook runs for: a teammate troupe spawned (`TROUPE_ROLE` set) or a
//! person's own session. A teammate's identity comes from the environment troupe
//! gave it, never from the engine's JSON, which the model can influence.

use troupe_core::ownership::Writer;
use troupe_core::role::Role;

/// Environment variables troupe sets for a teammate and its hooks.
pub mod env {
    /// The teammate's role (`builder`, `architect`, …).
    pub const ROLE: &str = "TROUPE_ROLE";
    /// The feature it works on.
    pub const FEATURE: &str = "TROUPE_FEATURE";
    /// Its agent id; also the key of its session markers.
    pub const AGENT_ID: &str = "TROUPE_AGENT_ID";
    /// Its display name (an Inspector's name is its findings file's stem).
    pub const AGENT_NAME: &str = "TROUPE_AGENT_NAME";
    /// The board task it works on.
    pub const TASK_ID: &str = "TROUPE_TASK_ID";
    /// A Builder's group id in tasks.yaml's `execution` waves.
    pub const GROUP: &str = "TROUPE_GROUP";
    /// A Builder's files, one per line (or comma-separated); wins over `TROUPE_GROUP`.
    pub const OWNED_FILES: &str = "TROUPE_OWNED_FILES";
    /// The project root, when the hook's cwd is not inside it.
    pub const PROJECT: &str = "TROUPE_PROJECT";
    /// A Builder's own git worktree (`[team] isolation = "worktree"`): where
    /// its files, its ownership checks and its quality gates are; the
    /// project's config, store and markers stay at `TROUPE_PROJECT`.
    pub const WORKTREE: &str = "TROUPE_WORKTREE";
    /// `off` turns every troupe hook into a no-op (the documented way out).
    pub const HOOKS: &str = "TROUPE_HOOKS";
    /// How often (milliseconds) a quality gate its hooks run touches its
    /// heartbeat: the Lead derives it from `[team]`'s hang timeout.
    pub const HEARTBEAT_MS: &str = "TROUPE_HEARTBEAT_MS";
    /// Set (to `landlock`) by the supervisor when the teammate runs in its
    /// sandbox: the post-run check then reports the kernel's refusals.
    pub const SANDBOX: &str = "TROUPE_SANDBOX";
}

/// A teammate's identity and what it owns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Teammate {
    /// Its role; for a skill role (see [`skill_role`](Self::skill_role)) the
    /// ownership class it writes under: a Builder owning every project file
    /// (`.troupe/` and `.git/` stay out of reach, and the role policy decides
    /// whether it may write at all).
    pub role: Role,
    /// The name of a role the project's skills define, when `TROUPE_ROLE`
    /// names no built-in role (seed 004: `mentor`, `orchestrator`, `adhoc`).
    pub skill_role: Option<String>,
    /// Its feature.
    pub feature: Option<String>,
    /// Its agent id.
    pub agent_id: Option<String>,
    /// Its name.
    pub agent_name: Option<String>,
    /// Its board task.
    pub task_id: Option<String>,
    /// Its Builder group.
    pub group: Option<String>,
    /// The files it may write (Builders).
    pub owned_files: Vec<String>,
}

/// `TROUPE_ROLE` holds something that is not a role.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "TROUPE_ROLE is '{0}', which is not a role (expected lead, architect, auditor, task-generator, builder, inspector, coordinator or a role name of the skills)"
)]
pub struct BadRole(pub String);

impl Teammate {
    /// The teammate described by the environment, or `None` when `TROUPE_ROLE` is unset.
    pub fn from_env(lookup: impl Fn(&str) -> Option<String>) -> Result<Option<Teammate>, BadRole> {
        let get = |k: &str| lookup(k).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        let Some(role) = get(env::ROLE) else { return Ok(None) };
        let (role, skill_role, owned_files) = match role.parse::<Role>() {
            Ok(r) => (r, None, get(env::OWNED_FILES).map(|v| split_list(&v)).unwrap_or_default()),
            // Whether the skills define it is the role policy's question, asked on every call.
            Err(_) => {
                troupe_core::rbac::names::validate_role_name(&role).map_err(|_| BadRole(role.clone()))?;
                (Role::Builder, Some(role), vec![SKILL_ROLE_FILES.to_string()])
            }
        };
        Ok(Some(Teammate {
            role,
            skill_role,
            feature: get(env::FEATURE),
            agent_id: get(env::AGENT_ID),
            agent_name: get(env::AGENT_NAME),
            task_id: get(env::TASK_ID),
            group: get(env::GROUP),
            owned_files,
        }))
    }

    /// The role's name for the role policy: the skill role's, or the built-in one's.
    pub fn policy_role(&self) -> &str {
        self.skill_role.as_deref().unwrap_or(self.role.as_str())
    }

    /// The role as shown in refusals.
    pub fn title(&self) -> &str {
        self.skill_role.as_deref().unwrap_or(self.role.title())
    }

    /// The ownership check's view of this teammate.
    pub fn writer(&self) -> Writer<'_> {
        Writer {
            role: self.role,
            feature: self.feature.as_deref(),
            owned_files: &self.owned_files,
            agent_name: self.agent_name.as_deref(),
        }
    }
}

/// What a skill role owns: every project file (ownership still keeps
/// `.troupe/` and `.git/` out of reach).
pub const SKILL_ROLE_FILES: &str = "**";

fn split_list(v: &str) -> Vec<String> {
    v.split(['\n', ',']).map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect()
}

/// The files of group `group` in a tasks.yaml (`execution: [{wave, groups: [{id, tasks, files}]}]`
/// or `execution: {waves: [...]}`), or `None` when the group is not there.
pub fn group_files(tasks_yaml: &str, group: &str) -> Option<Vec<String>> {
    let doc: yaml_serde::Value = yaml_serde::from_str(tasks_yaml).ok()?;
    let execution = doc.get("execution")?;
    let waves: Vec<&yaml_serde::Value> = match execution {
        yaml_serde::Value::Sequence(s) => s.iter().collect(),
        other => other.get("waves")?.as_sequence()?.iter().collect(),
    };
    for wave in waves {
        for g in wave.get("groups").and_then(|g| g.as_sequence()).into_iter().flatten() {
            let id = match g.get("id") {
                Some(yaml_serde::Value::String(s)) => s.clone(),
                Some(yaml_serde::Value::Number(n)) => n.to_string(),
                _ => continue,
            };
            if id == group {
                let files = g.get("files")?.as_sequence()?;
                return Some(files.iter().filter_map(|f| f.as_str().map(str::to_string)).collect());
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_from_environment() {
        let vars = [("TROUPE_ROLE", "builder"), ("TROUPE_OWNED_FILES", "src/a.rs\nsrc/b/, tests/*.rs")];
        let t =
            Teammate::from_env(|k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())).unwrap().unwrap();
        assert_eq!(t.role, Role::Builder);
        assert_eq!(t.owned_files, ["src/a.rs", "src/b/", "tests/*.rs"]);
        assert_eq!(Teammate::from_env(|_| None).unwrap(), None);
        let err = Teammate::from_env(|k| (k == "TROUPE_ROLE").then(|| "ad min".to_string())).unwrap_err();
        assert!(err.to_string().contains("'ad min'"));
        let t = Teammate::from_env(|k| (k == "TROUPE_ROLE").then(|| "mentor".to_string())).unwrap().unwrap();
        assert_eq!((t.skill_role.as_deref(), t.policy_role(), t.title()), (Some("mentor"), "mentor", "mentor"));
        assert_eq!(t.owned_files, [SKILL_ROLE_FILES]);
    }

    #[test]
    fn group_files_from_tasks_yaml() {
        let yaml = "tasks: []\nexecution:\n  - wave: 1\n    groups:\n      - id: G1\n        tasks: [\"1.1\"]\n        files: [src/a.rs, src/b.rs]\n      - id: G2\n        files: [src/c.rs]\n";
        assert_eq!(group_files(yaml, "G2").unwrap(), ["src/c.rs"]);
        assert_eq!(group_files(yaml, "G1").unwrap(), ["src/a.rs", "src/b.rs"]);
        assert_eq!(group_files(yaml, "G9"), None);
        let waves = "execution:\n  waves:\n    - groups:\n        - {id: A, files: [x.rs]}\n";
        assert_eq!(group_files(waves, "A").unwrap(), ["x.rs"]);
    }
}
