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
    fn tiers() {
        assert_eq!(Role::Architect.tier(), Tier::T2);
        assert_eq!(Role::Builder.tier(), Tier::T3);
    }
}
