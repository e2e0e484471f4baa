//! Skill-driven role-based access control (seed 004, "inverted RBAC"): skills
//! declare which roles may use which tools; roles are generated from skills.
//! Pure policy, no IO: the gateway (`troupe-gateway`) and the PreToolUse hook
//! (`troupe-gate`) load the files and ask this module.
//!
//! - [`skill::Skill`]: one `SKILL.md` front matter.
//! - [`policy::Policy`]: roles from skills (two-pass `*` expansion), inheritance,
//!   effective permissions, and [`policy::Policy::check_tool`].
//! - [`check_builtin_tool`]: the same policy for the engines' built-in tools
//!   ([`check_builtin_tool_with`] on one role's compiled [`policy::RoleCheck`]).
//! - [`names`]: validation of server, tool, role and skill names.
//! - [`memory`]: memory policies and the Markdown memory file format.
//! - [`risk`]: risk levels and dangerous categories of adhoc mode.
//! - [`defaults`]: default skills of the built-in roles and `skill add` templates.

pub mod builtin;
pub mod defaults;
pub mod memory;
pub mod names;
pub mod pattern;
pub mod policy;
pub mod risk;
pub mod skill;

pub use builtin::{Capability, GATEWAY_MCP_NAME, builtin_capability, check_builtin_tool, check_builtin_tool_with};
pub use policy::{Decision, DenyReason, Policy, RoleCheck, RoleSettings};
pub use skill::Skill;
