//! The role policy: roles generated from skills (seed 004 "Wildcard Handling"
//! two-pass expansion), role inheritance, and the permission check every tool
//! call goes through.
//!
//! Everything a check needs is compiled when the policy is built: per role, the
//! effective allow and deny sets merged along its inheritance chain, as hash
//! sets of exact names and of server names. A check is then a handful of hash
//! lookups, with no pattern walking and no allocation.

use crate::hash::FnvBuild;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt;

use serde::{Deserialize, Serialize};

use super::memory::{MemoryPermission, MemoryPolicy};
use super::names::{self, GATEWAY_TOOLS, NameError};
use super::pattern::ToolPattern;
use super::skill::Skill;

/// The gateway's memory tools, granted by a skill's `grants.memory` rather than
/// by tool patterns.
pub const MEMORY_TOOLS: [&str; 3] = ["troupe__save_memory", "troupe__recall_memory", "troupe__list_memories"];

/// Per-role settings that are not permissions: `[gateway.roles.<role>]` in
/// `.troupe/config.toml`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RoleSettings {
    /// The parent role whose permissions this role inherits.
    pub inherits: Option<String>,
    /// A description shown by `list_roles` and `troupe policy roles`.
    pub description: Option<String>,
}

/// Why a call was denied. The `Display` text is for the audit log and for the
/// operator; what the gateway tells an agent is deliberately vaguer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DenyReason {
    /// The role does not exist.
    UnknownRole(String),
    /// The tool name is malformed (control characters, homoglyphs, ...).
    InvalidName(NameError),
    /// No skill of the role allows the tool.
    NotAllowed,
    /// A deny pattern matches.
    DeniedBy(String),
    /// A memory tool, and the role has no memory grant.
    NoMemoryGrant,
    /// The role's inheritance chain is broken (a cycle or an unknown parent).
    BrokenInheritance,
}

impl fmt::Display for DenyReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DenyReason::UnknownRole(role) => write!(f, "unknown role {role:?}"),
            DenyReason::InvalidName(e) => write!(f, "{e}"),
            DenyReason::NotAllowed => f.write_str("no skill of the role allows it"),
            DenyReason::DeniedBy(p) => write!(f, "denied by pattern {p}"),
            DenyReason::NoMemoryGrant => f.write_str("the role has no memory grant (grants.memory is none)"),
            DenyReason::BrokenInheritance => {
                f.write_str("the role's inheritance chain is broken, so it has no permissions")
            }
        }
    }
}

/// The outcome of a permission check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The call may go ahead.
    Allow,
    /// The call is refused.
    Deny(DenyReason),
}

impl Decision {
    /// True for [`Decision::Allow`].
    pub fn is_allowed(&self) -> bool {
        matches!(self, Decision::Allow)
    }
}

/// A role as generated from the skills.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RoleDef {
    /// The role id.
    pub id: String,
    /// Description from config, or a summary of its skills.
    pub description: String,
    /// The parent role, from config.
    pub inherits: Option<String>,
    /// Ids of the skills that apply to it (after `*` expansion), not inherited ones.
    pub skills: Vec<String>,
    /// Its own allow patterns.
    pub allow: Vec<ToolPattern>,
    /// Its own deny patterns.
    pub deny: Vec<ToolPattern>,
    /// Its own memory grant.
    pub memory: MemoryPermission,
}

// FNV-1a (`crate::hash`): the sets hold names from the project's own skills,
// and it keeps a check well under a microsecond.
type FastSet = HashSet<String, FnvBuild>;

/// What a permission check of one role reads, and nothing else: its allow
/// and deny sets merged along its inheritance chain, whether it has a memory
/// grant, whether its chain is broken. Serializable, so that a hook on every
/// tool call can read the compiled check from a cache instead of building
/// the whole [`Policy`] from the project's skills (`troupe_gate::skill_cache`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoleCheck {
    broken: bool,
    allow_all: bool,
    allow_servers: FastSet,
    allow_exact: FastSet,
    deny_all: bool,
    deny_servers: FastSet,
    deny_exact: FastSet,
    memory: bool,
}

impl RoleCheck {
    /// The permission check: may `role`, whose compiled check is `check`
    /// (`None`: no skill or config defines it), call the tool `full`
    /// (`server__tool`, or a gateway tool)? `set_role` is always allowed;
    /// memory tools need a memory grant; deny patterns beat allow patterns.
    pub fn decide(check: Option<&RoleCheck>, role: &str, full: &str) -> Decision {
        if GATEWAY_TOOLS.contains(&full) {
            return Decision::Allow;
        }
        if let Err(e) = names::validate_full_tool_name(full) {
            return Decision::Deny(DenyReason::InvalidName(e));
        }
        let Some(c) = check else {
            return Decision::Deny(DenyReason::UnknownRole(role.to_string()));
        };
        if c.broken {
            return Decision::Deny(DenyReason::BrokenInheritance);
        }
        let (server, _) = names::split_tool_name(full).unwrap_or((full, ""));
        if let Some(pattern) = c.denied_by(server, full) {
            return Decision::Deny(DenyReason::DeniedBy(pattern));
        }
        if MEMORY_TOOLS.contains(&full) {
            return if c.memory { Decision::Allow } else { Decision::Deny(DenyReason::NoMemoryGrant) };
        }
        if c.allow_all || c.allow_servers.contains(server) || c.allow_exact.contains(full) {
            Decision::Allow
        } else {
            Decision::Deny(DenyReason::NotAllowed)
        }
    }

    fn denied_by(&self, server: &str, full: &str) -> Option<String> {
        if self.deny_all {
            Some("*".into())
        } else if self.deny_servers.contains(server) {
            Some(format!("{server}__*"))
        } else if self.deny_exact.contains(full) {
            Some(full.to_string())
        } else {
            None
        }
    }
}

/// Effective permissions, merged along the inheritance chain and compiled.
#[derive(Debug, Clone, Default)]
struct Compiled {
    chain: Vec<String>,
    check: RoleCheck,
    allow: BTreeSet<ToolPattern>,
    deny: BTreeSet<ToolPattern>,
    memory: MemoryPermission,
}

impl Compiled {
    fn broken() -> Compiled {
        Compiled { check: RoleCheck { broken: true, ..RoleCheck::default() }, ..Compiled::default() }
    }

    fn add(&mut self, allow: &[ToolPattern], deny: &[ToolPattern], memory: &MemoryPermission) {
        let c = &mut self.check;
        for p in allow {
            self.allow.insert(p.clone());
            match p {
                ToolPattern::All => c.allow_all = true,
                ToolPattern::Server(s) => drop(c.allow_servers.insert(s.clone())),
                ToolPattern::Exact(n) => drop(c.allow_exact.insert(n.clone())),
            }
        }
        for p in deny {
            self.deny.insert(p.clone());
            match p {
                ToolPattern::All => c.deny_all = true,
                ToolPattern::Server(s) => drop(c.deny_servers.insert(s.clone())),
                ToolPattern::Exact(n) => drop(c.deny_exact.insert(n.clone())),
            }
        }
        self.memory.merge(memory.policy, &memory.team_roles.iter().cloned().collect::<Vec<_>>());
        c.memory = self.memory.policy > MemoryPolicy::None;
    }
}

/// A skill set that cannot become a policy.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// Two skills share an id.
    #[error("two skills have the id {0:?}; skill ids must be unique")]
    DuplicateSkill(String),
    /// A role named in config is not a valid name.
    #[error("[gateway.roles]: {0}")]
    RoleName(NameError),
}

/// The whole role policy.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    skills: Vec<Skill>,
    roles: BTreeMap<String, RoleDef>,
    compiled: HashMap<String, Compiled, FnvBuild>,
    warnings: Vec<String>,
}

impl Policy {
    /// Generates the roles from `skills` and the role settings of config.
    ///
    /// First pass: every role any skill names explicitly, plus every role in
    /// `settings`. Second pass: each skill is applied to its roles, with `*`
    /// standing for all of them. Then each role's chain is resolved; a cycle or
    /// an unknown parent leaves the role with no permissions and a warning.
    pub fn build(mut skills: Vec<Skill>, settings: &BTreeMap<String, RoleSettings>) -> Result<Policy, PolicyError> {
        skills.sort_by(|a, b| a.id.cmp(&b.id));
        if let Some(dup) = skills.windows(2).find(|w| w[0].id == w[1].id) {
            return Err(PolicyError::DuplicateSkill(dup[0].id.clone()));
        }
        for (role, s) in settings {
            names::validate_role_name(role).map_err(PolicyError::RoleName)?;
            if let Some(parent) = &s.inherits {
                names::validate_role_name(parent).map_err(PolicyError::RoleName)?;
            }
        }

        // First pass: collect explicit role ids.
        let mut ids: BTreeSet<String> = settings.keys().cloned().collect();
        for skill in &skills {
            ids.extend(skill.allowed_roles.iter().filter(|r| *r != "*").cloned());
        }
        let mut roles: BTreeMap<String, RoleDef> = ids
            .iter()
            .map(|id| {
                let s = settings.get(id);
                let def = RoleDef {
                    id: id.clone(),
                    description: s.and_then(|s| s.description.clone()).unwrap_or_default(),
                    inherits: s.and_then(|s| s.inherits.clone()),
                    skills: Vec::new(),
                    allow: Vec::new(),
                    deny: Vec::new(),
                    memory: MemoryPermission::default(),
                };
                (id.clone(), def)
            })
            .collect();

        // Second pass: apply skills, expanding `*`.
        for skill in &skills {
            let targets: Vec<String> =
                if skill.is_for_all_roles() { ids.iter().cloned().collect() } else { skill.allowed_roles.clone() };
            for role in targets {
                let Some(def) = roles.get_mut(&role) else { continue };
                def.skills.push(skill.id.clone());
                def.allow.extend(skill.allowed_tools.iter().cloned());
                def.deny.extend(skill.denied_tools.iter().cloned());
                def.memory.merge(skill.grants.memory, &skill.grants.memory_team_roles);
            }
        }
        for def in roles.values_mut() {
            if def.description.is_empty() {
                def.description = if def.skills.is_empty() {
                    "no skills".to_string()
                } else {
                    format!("skills: {}", def.skills.join(", "))
                };
            }
        }

        let mut policy = Policy { skills, roles, compiled: HashMap::default(), warnings: Vec::new() };
        let ids: Vec<String> = policy.roles.keys().cloned().collect();
        for id in ids {
            let compiled = policy.compile(&id);
            policy.compiled.insert(id, compiled);
        }
        Ok(policy)
    }

    fn compile(&mut self, id: &str) -> Compiled {
        let mut chain = vec![id.to_string()];
        let mut current = id;
        while let Some(parent) = self.roles.get(current).and_then(|r| r.inherits.as_deref()) {
            if chain.iter().any(|c| c == parent) {
                self.warnings.push(format!("Circular inheritance detected for role: {id}"));
                return Compiled::broken();
            }
            if !self.roles.contains_key(parent) {
                self.warnings.push(format!("role {id:?} inherits {parent:?}, which no skill or config defines"));
                return Compiled::broken();
            }
            chain.push(parent.to_string());
            current = parent;
        }
        let mut compiled = Compiled::default();
        for role in &chain {
            let def = &self.roles[role];
            compiled.add(&def.allow, &def.deny, &def.memory);
        }
        compiled.chain = chain;
        compiled
    }

    /// Every role, by id.
    pub fn roles(&self) -> &BTreeMap<String, RoleDef> {
        &self.roles
    }

    /// One role.
    pub fn role(&self, id: &str) -> Option<&RoleDef> {
        self.roles.get(id)
    }

    /// Every skill, sorted by id.
    pub fn skills(&self) -> &[Skill] {
        &self.skills
    }

    /// Warnings found while building (cycles, unknown parents).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The chain child → parent → grandparent; empty for a cycle or a broken
    /// chain; `None` for an unknown role.
    pub fn inheritance_chain(&self, role: &str) -> Option<&[String]> {
        self.compiled.get(role).map(|c| c.chain.as_slice())
    }

    /// The servers the role reaches, merged along its chain; `*` when it may
    /// use every server.
    pub fn effective_servers(&self, role: &str) -> BTreeSet<String> {
        let Some(c) = self.compiled.get(role) else { return BTreeSet::new() };
        let mut servers: BTreeSet<String> = c.allow.iter().filter_map(|p| p.server().map(str::to_string)).collect();
        if c.check.allow_all {
            servers.insert("*".to_string());
        }
        servers
    }

    /// The allow and deny patterns of the role, merged along its chain.
    pub fn effective_tool_permissions(&self, role: &str) -> (Vec<ToolPattern>, Vec<ToolPattern>) {
        self.compiled
            .get(role)
            .map(|c| (c.allow.iter().cloned().collect(), c.deny.iter().cloned().collect()))
            .unwrap_or_default()
    }

    /// The memory permission of the role, merged along its chain (a broken
    /// chain yields `none`).
    pub fn effective_memory(&self, role: &str) -> MemoryPermission {
        self.compiled.get(role).map(|c| c.memory.clone()).unwrap_or_default()
    }

    /// True when `role` may reach backend `server` at all (used to decide
    /// which backends to start for a role).
    pub fn may_reach_server(&self, role: &str, server: &str) -> bool {
        let Some(c) = self.compiled.get(role).map(|c| &c.check) else { return false };
        if c.deny_all || c.deny_servers.contains(server) {
            return false;
        }
        c.allow_all
            || c.allow_servers.contains(server)
            || self.compiled[role]
                .allow
                .iter()
                .any(|p| matches!(p, ToolPattern::Exact(_)) && p.server() == Some(server))
    }

    /// The permission check: may `role` call the tool `full` (`server__tool`,
    /// or a gateway tool)? See [`RoleCheck::decide`].
    pub fn check_tool(&self, role: &str, full: &str) -> Decision {
        RoleCheck::decide(self.role_check(role), role, full)
    }

    /// The compiled check of `role`, `None` for a role no skill or config defines.
    pub fn role_check(&self, role: &str) -> Option<&RoleCheck> {
        self.compiled.get(role).map(|c| &c.check)
    }

    /// Every role's compiled check, by role id.
    pub fn role_checks(&self) -> impl Iterator<Item = (&str, &RoleCheck)> {
        self.compiled.iter().map(|(role, c)| (role.as_str(), &c.check))
    }

    /// True when every call `target` may make, `ceiling` may make too (so a
    /// connection started as `ceiling` may switch to `target` without gaining
    /// anything). Decided on the compiled patterns, conservatively: a target
    /// that might reach beyond the ceiling is refused.
    pub fn within_ceiling(&self, target: &str, ceiling: &str) -> bool {
        if target == ceiling {
            return self.compiled.contains_key(target);
        }
        let (Some(t), Some(c)) = (self.compiled.get(target), self.compiled.get(ceiling)) else { return false };
        let (tc, cc) = (&t.check, &c.check);
        if cc.broken {
            return false;
        }
        if tc.broken {
            // A broken role has no permissions at all: always below any ceiling.
            return true;
        }
        let covered_by_ceiling = |p: &ToolPattern| match p {
            ToolPattern::All => cc.allow_all,
            ToolPattern::Server(s) => cc.allow_all || cc.allow_servers.contains(s),
            ToolPattern::Exact(n) => {
                cc.allow_all || cc.allow_exact.contains(n) || p.server().is_some_and(|s| cc.allow_servers.contains(s))
            }
        };
        let overlaps = |d: &ToolPattern, p: &ToolPattern| match (d, p) {
            (ToolPattern::All, _) | (_, ToolPattern::All) => true,
            (ToolPattern::Server(a), other) | (other, ToolPattern::Server(a)) => other.server() == Some(a.as_str()),
            (ToolPattern::Exact(a), ToolPattern::Exact(b)) => a == b,
        };
        let denied_by_target = |d: &ToolPattern| match d {
            ToolPattern::All => tc.deny_all,
            ToolPattern::Server(s) => tc.deny_all || tc.deny_servers.contains(s),
            ToolPattern::Exact(n) => {
                tc.deny_all || tc.deny_exact.contains(n) || d.server().is_some_and(|s| tc.deny_servers.contains(s))
            }
        };
        let tools_ok = t
            .allow
            .iter()
            .all(|p| covered_by_ceiling(p) && c.deny.iter().filter(|d| overlaps(d, p)).all(&denied_by_target));
        let memory_ok = t.memory.policy <= c.memory.policy
            && (c.memory.policy == MemoryPolicy::All
                || t.memory.policy < MemoryPolicy::Team
                || t.memory.team_roles.is_subset(&c.memory.team_roles));
        tools_ok && memory_ok
    }

    /// The skills that apply to `role` or to a role it inherits from.
    pub fn skills_for_role(&self, role: &str) -> Vec<&Skill> {
        let Some(chain) = self.inheritance_chain(role) else { return Vec::new() };
        let ids: BTreeSet<&str> =
            chain.iter().filter_map(|r| self.roles.get(r)).flat_map(|r| r.skills.iter().map(String::as_str)).collect();
        self.skills.iter().filter(|s| ids.contains(s.id.as_str())).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skill(text: &str) -> Skill {
        Skill::parse(&format!("---\n{text}\n---\n")).unwrap()
    }

    fn policy(skills: &[&str], settings: &[(&str, &str)]) -> Policy {
        let settings = settings
            .iter()
            .map(|(r, p)| (r.to_string(), RoleSettings { inherits: Some(p.to_string()), description: None }))
            .collect();
        Policy::build(skills.iter().map(|s| skill(s)).collect(), &settings).unwrap()
    }

    #[test]
    fn wildcard_roles_expand_to_every_explicit_role() {
        let p = policy(
            &[
                "id: docx\nallowedRoles: [formatter, admin]\nallowedTools: [filesystem__read_file]",
                "id: session\nallowedRoles: ['*']\nallowedTools: [session__*]",
            ],
            &[],
        );
        assert_eq!(p.roles().keys().collect::<Vec<_>>(), ["admin", "formatter"]);
        for role in ["admin", "formatter"] {
            assert!(p.check_tool(role, "session__save").is_allowed());
            assert!(p.check_tool(role, "filesystem__read_file").is_allowed());
        }
        assert!(!p.check_tool("formatter", "filesystem__write_file").is_allowed());
        assert!(matches!(p.check_tool("nobody", "session__save"), Decision::Deny(DenyReason::UnknownRole(_))));
    }

    #[test]
    fn deny_beats_allow_across_skills() {
        let p = policy(
            &[
                "id: a\nallowedRoles: [dev]\nallowedTools: ['*']",
                "id: b\nallowedRoles: [dev]\ndeniedTools: [database__drop]",
            ],
            &[],
        );
        assert!(p.check_tool("dev", "database__query").is_allowed());
        assert_eq!(
            p.check_tool("dev", "database__drop"),
            Decision::Deny(DenyReason::DeniedBy("database__drop".into()))
        );
        assert!(p.check_tool("dev", "set_role").is_allowed());
    }

    #[test]
    fn inheritance_merges_servers_tools_and_memory() {
        let p = policy(
            &[
                "id: r\nallowedRoles: [root]\nallowedTools: [filesystem__*]\ngrants: {memory: isolated}",
                "id: b\nallowedRoles: [base]\nallowedTools: [git__*]\ngrants: {memory: team, memoryTeamRoles: [qa]}",
                "id: s\nallowedRoles: [senior]\nallowedTools: [database__*]",
                "id: a\nallowedRoles: [admin]\nallowedTools: ['*']",
            ],
            &[("base", "root"), ("senior", "base"), ("admin", "senior")],
        );
        assert_eq!(p.inheritance_chain("senior").unwrap(), ["senior", "base", "root"]);
        let servers: Vec<_> = p.effective_servers("admin").into_iter().collect();
        assert_eq!(servers, ["*", "database", "filesystem", "git"]);
        assert!(p.check_tool("senior", "filesystem__read").is_allowed());
        assert!(!p.check_tool("base", "database__query").is_allowed());
        let mem = p.effective_memory("senior");
        assert_eq!(mem.policy, MemoryPolicy::Team);
        assert!(mem.team_roles.contains("qa"));
        assert!(p.check_tool("senior", "troupe__save_memory").is_allowed());
    }

    #[test]
    fn a_cycle_means_no_permissions_and_a_warning() {
        let p = policy(
            &["id: x\nallowedRoles: [a, b]\nallowedTools: ['*']\ngrants: {memory: all}"],
            &[("a", "b"), ("b", "a")],
        );
        assert_eq!(p.inheritance_chain("a"), Some(&[][..]));
        assert_eq!(p.check_tool("a", "fs__read"), Decision::Deny(DenyReason::BrokenInheritance));
        assert_eq!(p.effective_memory("a").policy, MemoryPolicy::None);
        assert!(p.warnings().iter().any(|w| w == "Circular inheritance detected for role: a"), "{:?}", p.warnings());
        assert!(p.check_tool("a", "set_role").is_allowed());
    }

    #[test]
    fn memory_tools_need_a_grant_even_with_star() {
        let p = policy(&["id: x\nallowedRoles: [guest]\nallowedTools: ['*']"], &[]);
        assert_eq!(p.check_tool("guest", "troupe__save_memory"), Decision::Deny(DenyReason::NoMemoryGrant));
        assert!(p.check_tool("guest", "troupe__board_list").is_allowed());
    }

    #[test]
    fn ceilings() {
        let p = policy(
            &[
                "id: a\nallowedRoles: [admin]\nallowedTools: ['*']\ngrants: {memory: all}",
                "id: d\nallowedRoles: [developer]\nallowedTools: [filesystem__*, git__status]\ngrants: {memory: isolated}",
                "id: g\nallowedRoles: [guest]\nallowedTools: [filesystem__read_file]",
                "id: c\nallowedRoles: [careful]\nallowedTools: ['*']\ndeniedTools: [database__*]",
            ],
            &[],
        );
        assert!(p.within_ceiling("guest", "developer"));
        assert!(p.within_ceiling("developer", "admin"));
        assert!(p.within_ceiling("careful", "admin"));
        assert!(!p.within_ceiling("admin", "developer"));
        assert!(!p.within_ceiling("developer", "guest"));
        assert!(!p.within_ceiling("admin", "careful"), "admin reaches database, careful does not");
        assert!(!p.within_ceiling("ghost", "admin"));
        assert!(p.within_ceiling("guest", "guest"));
    }

    #[test]
    fn duplicate_skills_are_an_error() {
        let err = Policy::build(vec![skill("id: x"), skill("id: x")], &BTreeMap::new()).unwrap_err();
        assert_eq!(err, PolicyError::DuplicateSkill("x".into()));
    }
}
