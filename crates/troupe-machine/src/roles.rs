//! Role prompt templates (`.troupe/roles/<role>.md`), written by `troupe init`
//! and editable, and the spawn prompt: template + the seed 000 Spec 6.1 context
//! (feature, paths, scope, instructions).

use std::path::Path;

use troupe_core::config::RequiredSkills;
use troupe_core::plan::board_id;
use troupe_core::report::{self, Tag};
use troupe_core::role::Role;
use troupe_core::tools::{self, McpNaming};

use crate::machine::SpawnRequest;

const TEMPLATES: [(Role, &str); 6] = [
    (Role::Architect, include_str!("roles/architect.md")),
    (Role::Auditor, include_str!("roles/auditor.md")),
    (Role::TaskGenerator, include_str!("roles/task-generator.md")),
    (Role::Builder, include_str!("roles/builder.md")),
    (Role::Inspector, include_str!("roles/inspector.md")),
    (Role::Coordinator, include_str!("roles/coordinator.md")),
];

/// `(path relative to the project root, contents)` of every role template, for `troupe init`.
pub fn templates() -> Vec<(String, &'static str)> {
    TEMPLATES.iter().map(|(role, text)| (format!(".troupe/roles/{}.md", role.as_str()), *text)).collect()
}

/// The built-in template of `role`.
pub fn builtin(role: Role) -> Option<&'static str> {
    TEMPLATES.iter().find(|(r, _)| *r == role).map(|(_, t)| *t)
}

/// What a role prompt is rendered for: the engine that runs the teammate (its
/// spelling of the gateway's tools), the troupe binary that started the run,
/// and the project's gate skills (`[gates.skills]`).
#[derive(Debug, Clone, Copy)]
pub struct RenderEnv<'a> {
    /// The engine's name in config (`claude`, `gemini`, `codex`, `opencode`, `scripted`, ...).
    pub engine: &'a str,
    /// The absolute path of the running `troupe` binary.
    pub troupe: &'a Path,
    /// The skills the quality gates require.
    pub skills: &'a RequiredSkills,
}

/// A placeholder a template or an instruction names that troupe cannot fill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownPlaceholder {
    /// Where it was: the template file, or the assignment.
    pub source: String,
    /// The placeholder as written (`{{tool:complete_task}}`).
    pub placeholder: String,
}

impl std::fmt::Display for UnknownPlaceholder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: unknown placeholder {}; use {{{{troupe}}}}, {{{{feature}}}}, {{{{report}}}}, {{{{skill:code|document|verification}}}} or {{{{tool:<name>}}}} with one of {}",
            self.source,
            self.placeholder,
            tools::TROUPE_TOOLS.join(", ")
        )
    }
}

/// The prompt a teammate is spawned with: its role template (read from
/// `source`, named in errors), then its assignment, with every placeholder
/// filled for `env` (see [`fill`]).
pub fn render(template: &str, source: &str, req: &SpawnRequest, env: &RenderEnv) -> Result<String, UnknownPlaceholder> {
    let role = fill(template.trim_end(), source, req, env)?;
    let assignment = fill(&assignment(req), "the assignment", req, env)?;
    Ok(format!("{role}\n\n---\n\n{assignment}"))
}

/// Fill the placeholders of `text`:
///
/// - `{{tool:<name>}}`: troupe's gateway tool `<name>` (`board_complete`) in
///   the engine's naming (`mcp__troupe__troupe__board_complete` on Claude Code);
/// - `{{troupe}}`: the absolute path of the `troupe` binary;
/// - `{{feature}}`: the feature;
/// - `{{report}}`: the role's completion report, as the report parser reads it;
/// - `{{skill:code}}`, `{{skill:document}}`, `{{skill:verification}}`: the
///   skill `[gates.skills]` requires.
///
/// Anything else between `{{` and `}}` is an error naming `source` and the
/// placeholder: a template that names a tool troupe does not serve fails the
/// spawn rather than misleading the teammate.
pub fn fill(text: &str, source: &str, req: &SpawnRequest, env: &RenderEnv) -> Result<String, UnknownPlaceholder> {
    let naming = McpNaming::of_engine(env.engine);
    let mut out = String::with_capacity(text.len() + 256);
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            out.push_str(&rest[start..]);
            return Ok(out);
        };
        let name = after[..end].trim();
        let unknown = || UnknownPlaceholder { source: source.to_string(), placeholder: format!("{{{{{name}}}}}") };
        let value = match name.split_once(':') {
            None if name == "troupe" => env.troupe.display().to_string(),
            None if name == "feature" => req.context.feature.clone(),
            None if name == "report" => report_format(req.role).ok_or_else(unknown)?,
            Some(("tool", tool)) if tools::TROUPE_TOOLS.contains(&tool.trim()) => {
                tools::engine_tool_name(naming, tool.trim())
            }
            Some(("skill", "code")) => env.skills.code.clone(),
            Some(("skill", "document")) => env.skills.document.clone(),
            Some(("skill", "verification")) => env.skills.verification.clone(),
            _ => return Err(unknown()),
        };
        out.push_str(&value);
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The completion report `role` ends with, in the form the report parser
/// (`troupe_core::report`) reads; `None` for roles that end with CPF.
pub fn report_format(role: Role) -> Option<String> {
    let marker = report::marker_of(role)?;
    let fields: &[(&str, &str)] = match role {
        Role::Builder => &[
            (report::FEATURE, "<feature>"),
            (report::TASKS_COMPLETED, "<board ids of the tasks you completed, comma-separated>"),
            (report::FILES, "<files you created or changed, comma-separated>"),
            (report::TESTS, "<the test command you ran and its result, e.g. \"12 passed\">"),
            (report::STATUS, "<one line>"),
        ],
        Role::Architect => &[
            (report::FEATURE, "<feature>"),
            ("Artifacts", "design.md, research.md"),
            ("Summary", "<one line: what the design does>"),
        ],
        Role::TaskGenerator => &[
            (report::FEATURE, "<feature>"),
            ("Tasks", "<number of work items>"),
            ("Waves", "<number of waves>"),
            ("Summary", "<one line>"),
        ],
        _ => &[("Summary", "<one line>")],
    };
    let mut out = format!("```\n{marker}_COMPLETE\n");
    for (key, value) in fields {
        out.push_str(&format!("{key}: {value}\n"));
    }
    for tag in [Tag::Pattern, Tag::Incident, Tag::Reference] {
        out.push_str(&format!("{tag} <knowledge worth keeping> (optional, any number)\n"));
    }
    out.push_str(&format!(
        "```\n\nIf you cannot finish, end with `{marker}_BLOCKED` instead, the same lines for what you did, and a `{}: <what you need>` line.",
        report::BLOCKER
    ));
    Some(out)
}

/// The assignment part of the prompt (seed 000 Spec 6.1), placeholders unfilled.
fn assignment(req: &SpawnRequest) -> String {
    let c = &req.context;
    let mut p = String::with_capacity(1024);
    p.push_str("# Your assignment\n\n");
    p.push_str(&format!("Feature: {}\nYour id: {}\n", c.feature, req.id));
    if let Some(g) = &req.group {
        p.push_str(&format!("Group: {g}\n"));
    }
    if !req.tasks.is_empty() {
        // Task ids exactly as the board stores them.
        let ids: Vec<String> = req.tasks.iter().map(|t| board_id(&c.feature, t)).collect();
        p.push_str(&format!("Tasks: {}\n", ids.join(", ")));
        p.push_str(&format!(
            "Claim each task with `{{{{tool:{}}}}}` (task_id: its id above) before you start it, and complete it with `{{{{tool:{}}}}}` when its tests pass.\n",
            tools::BOARD_CLAIM,
            tools::BOARD_COMPLETE
        ));
    }
    p.push_str(&format!("\n## Scope\n\n{}\n", c.scope));
    if !c.read.is_empty() {
        p.push_str("\n## Read first\n\n");
        for r in &c.read {
            p.push_str(&format!("- {r}\n"));
        }
    }
    p.push_str("\n## You may write\n\n");
    for w in &c.write {
        p.push_str(&format!("- {w}\n"));
    }
    p.push_str("\n## Instructions\n\n");
    for (n, i) in c.instructions.iter().enumerate() {
        p.push_str(&format!("{}. {i}\n", n + 1));
    }
    p
}

/// The contract check of issue 11, for the tests of every stage that builds
/// spawn requests: `req` rendered with its role's built-in template for every
/// engine names only gateway tools that exist and that the role's default
/// policy offers, leaves no placeholder, and names no tool, marker or id form
/// troupe does not accept.
#[cfg(test)]
pub(crate) fn assert_contract(req: &SpawnRequest) {
    use std::collections::BTreeMap;

    use troupe_core::rbac::defaults::default_skill_files;
    use troupe_core::rbac::{Policy, Skill, check_builtin_tool};

    let files = default_skill_files();
    let skills = files.iter().map(|(p, t)| Skill::parse(t).unwrap_or_else(|e| panic!("{p}: {e}"))).collect();
    let policy = Policy::build(skills, &BTreeMap::new()).unwrap();
    let required = RequiredSkills::default();
    let role = req.role;
    for engine in ["claude", "gemini", "codex", "opencode", "scripted"] {
        let what = format!("{} ({}) on {engine}", req.id, role.as_str());
        let env = RenderEnv { engine, troupe: Path::new("/opt/troupe/bin/troupe"), skills: &required };
        let prompt = render(builtin(role).unwrap(), "builtin", req, &env).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(!prompt.contains("{{") && !prompt.contains("}}"), "{what}: a placeholder is left\n{prompt}");
        let naming = McpNaming::of_engine(engine);
        let prefix = tools::engine_tool_name(naming, "");
        for (at, _) in prompt.match_indices(&prefix) {
            let rest = &prompt[at + prefix.len()..];
            let tool = &rest[..rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len())];
            assert!(tools::TROUPE_TOOLS.contains(&tool), "{what}: names unknown tool {tool}");
            assert!(
                policy.check_tool(role.as_str(), &tools::gateway_name(tool)).is_allowed(),
                "{what}: names {tool}, which the role's policy does not offer"
            );
            let canonical = tools::gateway_tool(naming, &tools::engine_tool_name(naming, tool)).into_owned();
            assert!(check_builtin_tool(&policy, role.as_str(), &canonical).is_allowed(), "{what}: {canonical}");
        }
        for old in ["complete_task", "list_tasks", "INSPECTOR_COMPLETE", "`troupe ", "send_message tool"] {
            assert!(!prompt.contains(old), "{what}: names {old} by hand\n{prompt}");
        }
        for t in &req.tasks {
            assert!(prompt.contains(&board_id(&req.context.feature, t)), "{what}: task {t} not by its board id");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use troupe_core::rbac::defaults::default_skill_files;
    use troupe_core::rbac::{Policy, Skill, check_builtin_tool};
    use troupe_core::report::{BuilderReport, Completion};

    use super::*;
    use crate::machine::SpawnContext;

    const ENGINES: [&str; 5] = ["claude", "gemini", "codex", "opencode", "scripted"];
    const ROLES: [Role; 6] =
        [Role::Architect, Role::TaskGenerator, Role::Builder, Role::Inspector, Role::Auditor, Role::Coordinator];

    fn request(role: Role, instructions: Vec<String>) -> SpawnRequest {
        let builder = role == Role::Builder;
        SpawnRequest {
            id: format!("{}-1", role.as_str()),
            role,
            engine_phase: "impl".into(),
            group: builder.then(|| "G1".into()),
            tasks: if builder { vec!["1.1".into(), "1.2".into()] } else { Vec::new() },
            context: SpawnContext {
                feature: "login".into(),
                read: vec!["design.md".into()],
                write: vec!["src/a.rs".into()],
                scope: "Group G1".into(),
                instructions,
            },
            attempt: 1,
        }
    }

    fn env<'a>(engine: &'a str, skills: &'a RequiredSkills) -> RenderEnv<'a> {
        RenderEnv { engine, troupe: Path::new("/opt/troupe/bin/troupe"), skills }
    }

    fn default_policy() -> Policy {
        let files = default_skill_files();
        let skills = files.iter().map(|(p, t)| Skill::parse(t).unwrap_or_else(|e| panic!("{p}: {e}"))).collect();
        Policy::build(skills, &BTreeMap::new()).unwrap()
    }

    /// The gateway tools a prompt names in `engine`'s spelling.
    fn tools_named(prompt: &str, engine: &str) -> Vec<String> {
        let prefix = tools::engine_tool_name(McpNaming::of_engine(engine), "");
        prompt
            .match_indices(&prefix)
            .map(|(at, _)| {
                let rest = &prompt[at + prefix.len()..];
                rest[..rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len())].to_string()
            })
            .collect()
    }

    /// The fenced block that follows the completion-report marker.
    fn example_report(prompt: &str, marker: &str) -> String {
        let at = prompt.find(&format!("{marker}_COMPLETE")).expect("a report example");
        let body = &prompt[at..];
        body[..body.find("```").unwrap_or(body.len())].to_string()
    }

    /// The contract (issue 11): every role prompt, for every engine, names only
    /// gateway tools that exist and that the role's default policy offers, its
    /// example report is accepted by troupe-core's parser, its task ids are the
    /// board's, its troupe command is the absolute path, and no placeholder is
    /// left.
    #[test]
    fn every_role_prompt_for_every_engine_names_only_what_troupe_accepts() {
        let policy = default_policy();
        let skills = RequiredSkills::default();
        let builder_steps = vec![format!(
            "Claim with `{{{{tool:{}}}}}` and complete with `{{{{tool:{}}}}}`.",
            tools::BOARD_CLAIM,
            tools::BOARD_COMPLETE
        )];
        for role in ROLES {
            let template = builtin(role).unwrap();
            let instructions = if role == Role::Builder { builder_steps.clone() } else { Vec::new() };
            let req = request(role, instructions);
            for engine in ENGINES {
                let what = format!("{} on {engine}", role.as_str());
                let prompt =
                    render(template, "builtin", &req, &env(engine, &skills)).unwrap_or_else(|e| panic!("{what}: {e}"));
                assert!(!prompt.contains("{{") && !prompt.contains("}}"), "{what}: a placeholder is left\n{prompt}");
                for tool in tools_named(&prompt, engine) {
                    assert!(tools::TROUPE_TOOLS.contains(&tool.as_str()), "{what}: names unknown tool {tool}");
                    assert!(
                        policy.check_tool(role.as_str(), &tools::gateway_name(&tool)).is_allowed(),
                        "{what}: names {tool}, which the role's policy does not offer"
                    );
                    let engine_name = tools::engine_tool_name(McpNaming::of_engine(engine), &tool);
                    let canonical = tools::gateway_tool(McpNaming::of_engine(engine), &engine_name);
                    assert!(check_builtin_tool(&policy, role.as_str(), &canonical).is_allowed(), "{what}: {canonical}");
                }
                for old in ["complete_task", "list_tasks", "INSPECTOR_COMPLETE", "`troupe "] {
                    assert!(!prompt.contains(old), "{what}: names {old} by hand\n{prompt}");
                }
                if let Some(marker) = report::marker_of(role) {
                    let example = example_report(&prompt, marker);
                    if role == Role::Builder {
                        BuilderReport::parse(&example).unwrap_or_else(|e| panic!("{what}: {e}\n{example}"));
                    } else {
                        Completion::for_role(&example, marker).unwrap_or_else(|e| panic!("{what}: {e}\n{example}"));
                    }
                    assert!(prompt.contains(&format!("{marker}_BLOCKED")), "{what}");
                }
                if role == Role::Builder {
                    assert!(prompt.contains("Tasks: login/1.1, login/1.2"), "{what}: board ids\n{prompt}");
                    assert!(prompt.contains("/opt/troupe/bin/troupe board complete"), "{what}");
                    assert!(prompt.contains(&skills.code), "{what}");
                    let named = tools_named(&prompt, engine);
                    assert!(named.iter().any(|t| t == tools::BOARD_CLAIM), "{what}: never says to claim");
                    assert!(named.iter().any(|t| t == tools::BOARD_COMPLETE), "{what}");
                }
                if role == Role::Architect {
                    assert!(prompt.contains("/opt/troupe/bin/troupe skill use document-quality-rules"), "{what}");
                }
            }
        }
    }

    #[test]
    fn engines_spell_the_tools_their_own_way() {
        let skills = RequiredSkills::default();
        let req = request(Role::Builder, Vec::new());
        let on = |engine| render(builtin(Role::Builder).unwrap(), "builtin", &req, &env(engine, &skills)).unwrap();
        assert!(on("claude").contains("`mcp__troupe__troupe__board_complete`"));
        assert!(on("codex").contains("`mcp__troupe__troupe__board_complete`"));
        assert!(on("gemini").contains("`mcp_troupe_troupe__board_complete`"));
        assert!(on("opencode").contains("`troupe_troupe__board_complete`"));
    }

    #[test]
    fn an_unknown_placeholder_names_the_file_and_the_placeholder() {
        let skills = RequiredSkills::default();
        let req = request(Role::Builder, Vec::new());
        let e = render("Use {{tool:complete_task}}.", ".troupe/roles/builder.md", &req, &env("claude", &skills))
            .unwrap_err();
        assert_eq!(e.placeholder, "{{tool:complete_task}}");
        let text = e.to_string();
        assert!(text.starts_with(".troupe/roles/builder.md: unknown placeholder {{tool:complete_task}}"), "{text}");
        assert!(text.contains("board_complete"), "{text}");
        let e =
            render("{{report}}", "x.md", &request(Role::Inspector, Vec::new()), &env("claude", &skills)).unwrap_err();
        assert_eq!(e.placeholder, "{{report}}");
        // Text without a closing brace pair stays as written.
        let ok = render("a {{ b", "x.md", &req, &env("claude", &skills)).unwrap();
        assert!(ok.starts_with("a {{ b"));
    }

    #[test]
    fn every_role_but_the_lead_has_a_template() {
        let t = templates();
        assert_eq!(t.len(), 6);
        assert!(t.iter().any(|(p, _)| p == ".troupe/roles/task-generator.md"));
        assert!(builtin(Role::Builder).unwrap().contains("RED"));
        assert!(builtin(Role::Builder).unwrap().contains("{{report}}"));
        assert!(builtin(Role::Architect).unwrap().contains("{{troupe}} skill use"));
    }

    #[test]
    fn prompt_has_the_spawn_context() {
        let skills = RequiredSkills::default();
        let mut req = request(Role::Builder, vec!["do it".into()]);
        req.tasks = vec!["1.1".into()];
        let p = render("# Builder", "x.md", &req, &env("claude", &skills)).unwrap();
        for needle in
            ["Feature: login", "Group: G1", "Tasks: login/1.1", "- design.md", "- src/a.rs", "1. do it", "## Scope"]
        {
            assert!(p.contains(needle), "{needle} in {p}");
        }
    }
}
