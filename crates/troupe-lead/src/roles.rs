//! Role prompt templates (`.troupe/roles/<role>.md`), written by `troupe init`
//! and editable, and the spawn prompt: template + the seed 000 Spec 6.1 context
//! (feature, paths, scope, instructions).

use troupe_core::role::Role;

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

/// The prompt a teammate is spawned with: its role template, then its assignment.
pub fn render(template: &str, req: &SpawnRequest) -> String {
    let c = &req.context;
    let mut p = String::with_capacity(template.len() + 1024);
    p.push_str(template.trim_end());
    p.push_str("\n\n---\n\n# Your assignment\n\n");
    p.push_str(&format!("Feature: {}\nYour id: {}\n", c.feature, req.id));
    if let Some(g) = &req.group {
        p.push_str(&format!("Group: {g}\n"));
    }
    if !req.tasks.is_empty() {
        p.push_str(&format!("Tasks: {}\n", req.tasks.join(", ")));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::SpawnContext;

    #[test]
    fn every_role_but_the_lead_has_a_template() {
        let t = templates();
        assert_eq!(t.len(), 6);
        assert!(t.iter().any(|(p, _)| p == ".troupe/roles/task-generator.md"));
        assert!(builtin(Role::Builder).unwrap().contains("RED"));
        assert!(builtin(Role::Builder).unwrap().contains("BUILDER_COMPLETE"));
        assert!(builtin(Role::Architect).unwrap().contains("troupe skill use"));
    }

    #[test]
    fn prompt_has_the_spawn_context() {
        let req = SpawnRequest {
            id: "builder-g1-3".into(),
            role: Role::Builder,
            engine_phase: "impl".into(),
            group: Some("G1".into()),
            tasks: vec!["1.1".into()],
            context: SpawnContext {
                feature: "login".into(),
                read: vec!["design.md".into()],
                write: vec!["src/a.rs".into()],
                scope: "Group G1".into(),
                instructions: vec!["do it".into()],
            },
            attempt: 1,
        };
        let p = render("# Builder", &req);
        for needle in ["Feature: login", "Group: G1", "Tasks: 1.1", "- design.md", "- src/a.rs", "1. do it", "## Scope"]
        {
            assert!(p.contains(needle), "{needle} in {p}");
        }
    }
}
