//! The roles of seed 000's 3-tier hierarchy, plus the Coordinator of seed 003 B5.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A teammate's role. troupe itself is the Lead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Role {
    /// T1: troupe itself: gates, spawns, spec.yaml, commits.
    Lead,
    /// T2: writes design.md and research.md.
    Architect,
    /// T2: merges Inspector findings into a verdict.
    Auditor,
    /// T3: writes tasks.yaml.
    TaskGenerator,
    /// T3: implements a group of tasks, test first.
    Builder,
    /// T3: reviews from one perspective and writes CPF findings.
    Inspector,
    /// Delegate mode: distributes and reviews work, never writes files.
    Coordinator,
}

/// The model tier a role runs on (seed 000 Spec 1.7–1.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    /// T1: the Lead.
    T1,
    /// T2: Brain (Architect, Auditor): the strongest model.
    T2,
    /// T3: Execute (TaskGenerator, Builder, Inspector) and the Coordinator.
    T3,
}

impl Role {
    /// Every role, in hierarchy order.
    pub const ALL: [Role; 7] = [
        Role::Lead,
        Role::Architect,
        Role::Auditor,
        Role::TaskGenerator,
        Role::Builder,
        Role::Inspector,
        Role::Coordinator,
    ];

    /// The role's name as written in config, prompts and `TROUPE_ROLE`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Lead => "lead",
            Role::Architect => "architect",
            Role::Auditor => "auditor",
            Role::TaskGenerator => "task-generator",
            Role::Builder => "builder",
            Role::Inspector => "inspector",
            Role::Coordinator => "coordinator",
        }
    }

    /// The role's display name.
    pub fn title(self) -> &'static str {
        match self {
            Role::Lead => "Lead",
            Role::Architect => "Architect",
            Role::Auditor => "Auditor",
            Role::TaskGenerator => "TaskGenerator",
            Role::Builder => "Builder",
            Role::Inspector => "Inspector",
            Role::Coordinator => "Coordinator",
        }
    }

    /// The role's tier.
    pub fn tier(self) -> Tier {
        match self {
            Role::Lead => Tier::T1,
            Role::Architect | Role::Auditor => Tier::T2,
            Role::TaskGenerator | Role::Builder | Role::Inspector | Role::Coordinator => Tier::T3,
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.title())
    }
}

/// A role name troupe does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown role '{0}' (expected one of: lead, architect, auditor, task-generator, builder, inspector, coordinator)"
)]
pub struct UnknownRole(pub String);

impl FromStr for Role {
    type Err = UnknownRole;

    /// Accepts `task-generator`, `TaskGenerator`, `task_generator` and `taskgenerator`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let key: String = s.chars().filter(|c| c.is_ascii_alphanumeric()).collect::<String>().to_ascii_lowercase();
        Role::ALL.into_iter().find(|r| r.as_str().replace('-', "") == key).ok_or_else(|| UnknownRole(s.to_string()))
    }
}

/// The role a teammate runs under: one of troupe's built-in roles, or a role
/// the project's skills define (seed 004: any name in a SKILL.md's
/// `allowedRoles`, such as `mentor`, `orchestrator` or `adhoc`). Built-in
/// names win: `builder` is always [`Role::Builder`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TeamRole {
    /// A built-in role, with its prompt template, ownership and phase rules.
    Builtin(Role),
    /// A role of the skills: its tools come from the role policy alone, and
    /// it may write project files outside `.troupe/` and `.git/` when the
    /// policy grants it a write or shell tool.
    Skill(String),
}

impl TeamRole {
    /// `name` as a built-in role, else as a skill role when `defined(name)`
    /// says the skills define it; `None` when neither.
    pub fn resolve(name: &str, defined: impl Fn(&str) -> bool) -> Option<TeamRole> {
        match name.parse::<Role>() {
            Ok(r) => Some(TeamRole::Builtin(r)),
            Err(_) if defined(name) => Some(TeamRole::Skill(name.to_string())),
            Err(_) => None,
        }
    }

    /// Its name as written in `TROUPE_ROLE`, skills and the gateway's `--role`.
    pub fn as_str(&self) -> &str {
        match self {
            TeamRole::Builtin(r) => r.as_str(),
            TeamRole::Skill(s) => s,
        }
    }

    /// The built-in role, if it is one.
    pub fn builtin(&self) -> Option<Role> {
        match self {
            TeamRole::Builtin(r) => Some(*r),
            TeamRole::Skill(_) => None,
        }
    }

    /// Its model tier: a skill role runs on the execution tier (T3).
    pub fn tier(&self) -> Tier {
        self.builtin().map_or(Tier::T3, Role::tier)
    }
}

impl fmt::Display for TeamRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TeamRole::Builtin(r) => fmt::Display::fmt(r, f),
            TeamRole::Skill(s) => f.write_str(s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_spellings() {
        for s in ["task-generator", "TaskGenerator", "task_generator", "TASKGENERATOR"] {
            assert_eq!(s.parse::<Role>().unwrap(), Role::TaskGenerator);
        }
        for r in Role::ALL {
            assert_eq!(r.as_str().parse::<Role>().unwrap(), r);
            assert_eq!(r.title().parse::<Role>().unwrap(), r);
        }
        assert!("admin".parse::<Role>().is_err());
    }

    #[test]
    fn team_roles() {
        let defined = |n: &str| n == "mentor";
        assert_eq!(TeamRole::resolve("Builder", defined), Some(TeamRole::Builtin(Role::Builder)));
        assert_eq!(TeamRole::resolve("mentor", defined), Some(TeamRole::Skill("mentor".into())));
        assert_eq!(TeamRole::resolve("admin", defined), None);
        assert_eq!(TeamRole::Skill("mentor".into()).tier(), Tier::T3);
        assert_eq!(TeamRole::Builtin(Role::Architect).as_str(), "architect");
    }

    #[test]
    fn tiers() {
        assert_eq!(Role::Architect.tier(), Tier::T2);
        assert_eq!(Role::Builder.tier(), Tier::T3);
    }
}
