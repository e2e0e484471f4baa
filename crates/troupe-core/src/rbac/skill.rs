//! Skills: `.troupe/skills/<id>/SKILL.md`, YAML front matter between `---`
//! lines, then Markdown instructions. Skills are the only source of
//! permissions (seed 004's inverted RBAC): a role exists because a skill names
//! it in `allowedRoles`.
//!
//! ```
//! use troupe_core::rbac::skill::Skill;
//!
//! let skill = Skill::parse("---\nid: reader\ndescription: Read files\nallowedRoles: [builder]\nallowedTools: [filesystem__read_file]\n---\nRead carefully.\n").unwrap();
//! assert_eq!(skill.id, "reader");
//! assert_eq!(skill.allowed_roles, ["builder"]);
//! ```

use serde::{Deserialize, Serialize};

use super::memory::MemoryPolicy;
use super::names::{self, NameError};
use super::pattern::{PatternError, ToolPattern};

/// What a skill grants besides tools.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Grants {
    /// The memory policy this skill grants its roles.
    #[serde(default)]
    pub memory: MemoryPolicy,
    /// For `memory: team`: whose memories the roles may read.
    #[serde(default)]
    pub memory_team_roles: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct FrontMatter {
    id: Option<String>,
    name: Option<String>,
    display_name: Option<String>,
    #[serde(default)]
    description: String,
    #[serde(default)]
    allowed_roles: Vec<String>,
    #[serde(default)]
    allowed_tools: Vec<String>,
    #[serde(default)]
    denied_tools: Vec<String>,
    #[serde(default)]
    grants: Grants,
}

/// One parsed, validated skill.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Skill {
    /// The skill id (`id`, or `name` when `id` is absent).
    pub id: String,
    /// A display name (`displayName`, defaulting to the id).
    pub display_name: String,
    /// What the skill is for.
    pub description: String,
    /// Roles this skill applies to; `*` means every role any skill names.
    pub allowed_roles: Vec<String>,
    /// Tools it allows.
    pub allowed_tools: Vec<ToolPattern>,
    /// Tools it denies (deny beats allow, across all of a role's skills).
    pub denied_tools: Vec<ToolPattern>,
    /// Memory and other grants.
    pub grants: Grants,
    /// The Markdown after the front matter: instructions for the agent.
    #[serde(skip)]
    pub body: String,
}

/// A SKILL.md that could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SkillError {
    /// The text does not start with a `---` front matter block.
    #[error("no YAML front matter: SKILL.md must start with a line `---`, the fields, and a closing `---`")]
    NoFrontMatter,
    /// The front matter is not valid YAML for a skill.
    #[error("front matter: {0}")]
    Yaml(String),
    /// Neither `id` nor `name` is set.
    #[error("front matter has neither `id` nor `name`")]
    MissingId,
    /// The id or a role name is not a valid name.
    #[error(transparent)]
    Name(#[from] NameError),
    /// A tool pattern is malformed.
    #[error(transparent)]
    Pattern(#[from] PatternError),
    /// A `team` memory grant with no team roles.
    #[error("grants.memory is `team` but grants.memoryTeamRoles is empty")]
    EmptyTeam,
}

impl Skill {
    /// Parses SKILL.md text.
    pub fn parse(text: &str) -> Result<Skill, SkillError> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let mut lines = text.split_inclusive('\n');
        if lines.next().map(str::trim_end) != Some("---") {
            return Err(SkillError::NoFrontMatter);
        }
        let mut yaml = String::new();
        let mut closed = false;
        for line in lines.by_ref() {
            if line.trim_end() == "---" {
                closed = true;
                break;
            }
            yaml.push_str(line);
        }
        if !closed {
            return Err(SkillError::NoFrontMatter);
        }
        let body: String = lines.collect();
        let front: FrontMatter = yaml_serde::from_str(&yaml).map_err(|e| SkillError::Yaml(e.to_string()))?;
        let id = front.id.or(front.name).ok_or(SkillError::MissingId)?;
        names::validate_skill_id(&id)?;
        for role in &front.allowed_roles {
            if role != "*" {
                names::validate_role_name(role)?;
            }
        }
        for role in &front.grants.memory_team_roles {
            names::validate_role_name(role)?;
        }
        if front.grants.memory == MemoryPolicy::Team && front.grants.memory_team_roles.is_empty() {
            return Err(SkillError::EmptyTeam);
        }
        let compile = |list: &[String]| list.iter().map(|p| ToolPattern::parse(p)).collect::<Result<Vec<_>, _>>();
        Ok(Skill {
            display_name: front.display_name.unwrap_or_else(|| id.clone()),
            id,
            description: front.description,
            allowed_roles: front.allowed_roles,
            allowed_tools: compile(&front.allowed_tools)?,
            denied_tools: compile(&front.denied_tools)?,
            grants: front.grants,
            body,
        })
    }

    /// True when the skill applies to every role (`allowedRoles: ["*"]`).
    pub fn is_for_all_roles(&self) -> bool {
        self.allowed_roles.iter().any(|r| r == "*")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_seed_example() {
        let skill = Skill::parse(
            "---\nid: memory-team\ndisplayName: Team Memory\ndescription: Team lead\nallowedRoles: [lead]\nallowedTools: []\ngrants:\n  memory: team\n  memoryTeamRoles: [frontend, backend, qa]\n---\n",
        )
        .unwrap();
        assert_eq!(skill.display_name, "Team Memory");
        assert_eq!(skill.grants.memory, MemoryPolicy::Team);
        assert_eq!(skill.grants.memory_team_roles.len(), 3);
    }

    #[test]
    fn name_stands_in_for_id() {
        let skill = Skill::parse("---\nname: x\nallowedRoles: ['*']\n---\nbody\n").unwrap();
        assert_eq!(skill.id, "x");
        assert!(skill.is_for_all_roles());
        assert_eq!(skill.body, "body\n");
    }

    #[test]
    fn errors_name_the_problem() {
        let cases = [
            ("no front matter", "NoFrontMatter"),
            ("---\nid: x\n", "NoFrontMatter"),
            ("---\nid: [\n---\n", "Yaml"),
            ("---\ndescription: d\n---\n", "MissingId"),
            ("---\nid: x\nallowedRoles: ['admin; DROP TABLE users']\n---\n", "Name"),
            ("---\nid: x\nallowedTools: ['fs__read*']\n---\n", "Pattern"),
            ("---\nid: x\ngrants: {memory: team}\n---\n", "EmptyTeam"),
            ("---\nid: x\ngrants: {memory: everything}\n---\n", "Yaml"),
        ];
        for (text, kind) in cases {
            let err = Skill::parse(text).unwrap_err();
            assert!(format!("{err:?}").starts_with(kind), "{text:?}: {err:?}");
        }
    }
}
