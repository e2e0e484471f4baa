//! Artifact ownership (seed 000, Spec 4): which role may create, modify, or only
//! read each kind of artifact, and the one function the hooks and the gateway
//! ask before letting a write through: [`may_write`].

use std::path::{Component, Path, PathBuf};

use serde::Serialize;

use crate::role::Role;

/// What a path is, from troupe's point of view.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Artifact {
    /// `.troupe/specs/<feature>/spec.yaml`
    SpecYaml {
        /// The feature.
        feature: String,
    },
    /// `.troupe/specs/<feature>/design.md`
    Design {
        /// The feature.
        feature: String,
    },
    /// `.troupe/specs/<feature>/research.md`
    Research {
        /// The feature.
        feature: String,
    },
    /// `.troupe/specs/<feature>/tasks.yaml`
    Tasks {
        /// The feature.
        feature: String,
    },
    /// `.troupe/specs/<feature>/reviews/active/<inspector>.cpf`
    InspectorFindings {
        /// The feature.
        feature: String,
        /// The file stem: the Inspector's name.
        inspector: String,
    },
    /// `.troupe/specs/<feature>/reviews/active/verdict.cpf`
    Verdict {
        /// The feature.
        feature: String,
    },
    /// `reviews/B<seq>/`, `verdicts.md` and anything else under a spec folder.
    ReviewRecord {
        /// The feature.
        feature: String,
    },
    /// Anything else under `.troupe/` (config, steering, roles, skills, memory, handover, state).
    TroupeFile,
    /// Anything under `.git/`.
    GitInternals,
    /// Any other file in the project: implementation code, tests, docs.
    Code {
        /// The path relative to the project root, with `/` separators.
        path: String,
    },
    /// A path outside the project root.
    Outside,
}

/// The artifact kinds of the ownership matrix, without their paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ArtifactKind {
    /// spec.yaml
    SpecYaml,
    /// design.md
    Design,
    /// research.md
    Research,
    /// tasks.yaml
    Tasks,
    /// Implementation code (and tests).
    Code,
    /// Inspector CPF files and the Auditor's verdict.cpf.
    Reviews,
}

impl ArtifactKind {
    /// Every kind, in the seed's order.
    pub const ALL: [ArtifactKind; 6] = [
        ArtifactKind::SpecYaml,
        ArtifactKind::Design,
        ArtifactKind::Research,
        ArtifactKind::Tasks,
        ArtifactKind::Code,
        ArtifactKind::Reviews,
    ];

    /// How the kind is named in the matrix.
    pub fn label(self) -> &'static str {
        match self {
            ArtifactKind::SpecYaml => "spec.yaml",
            ArtifactKind::Design => "design.md",
            ArtifactKind::Research => "research.md",
            ArtifactKind::Tasks => "tasks.yaml",
            ArtifactKind::Code => "implementation code",
            ArtifactKind::Reviews => "review files",
        }
    }
}

/// What a role may do with an artifact kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Right {
    /// May create and change it.
    CreateModify,
    /// May change it, not create it (Builders change code that tasks.yaml assigns them).
    Modify,
    /// May only change task status (the Lead marking tasks `done`).
    StatusOnly,
    /// May read it only.
    Read,
}

impl Right {
    /// How the right is printed in the matrix.
    pub fn label(self) -> &'static str {
        match self {
            Right::CreateModify => "create+modify",
            Right::Modify => "modify",
            Right::StatusOnly => "status-only",
            Right::Read => "read",
        }
    }

    /// True for the rights that allow writing file content.
    pub fn writes(self) -> bool {
        matches!(self, Right::CreateModify | Right::Modify)
    }
}

/// The ownership matrix of seed 000 Spec 4, as data.
pub fn right(role: Role, kind: ArtifactKind) -> Right {
    use ArtifactKind as K;
    use Role as R;
    match (kind, role) {
        (K::SpecYaml, R::Lead) => Right::CreateModify,
        (K::Design | K::Research, R::Architect) => Right::CreateModify,
        (K::Tasks, R::TaskGenerator) => Right::CreateModify,
        (K::Tasks, R::Lead) => Right::StatusOnly,
        (K::Code, R::Builder) => Right::CreateModify,
        (K::Reviews, R::Inspector | R::Auditor) => Right::CreateModify,
        _ => Right::Read,
    }
}

/// Who is asking to write, and what they were given to own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Writer<'a> {
    /// The role.
    pub role: Role,
    /// The feature the teammate works on (`TROUPE_FEATURE`).
    pub feature: Option<&'a str>,
    /// For a Builder: the files of its group (exact paths or globs, relative to the root).
    pub owned_files: &'a [String],
    /// For an Inspector: its name, which is its findings file's stem.
    pub agent_name: Option<&'a str>,
}

/// The answer to "may this writer write this path?"
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "decision", rename_all = "lowercase")]
pub enum Decision {
    /// The write may go ahead.
    Allow,
    /// The write is refused.
    Deny {
        /// The rule, in words, naming the owner.
        rule: String,
    },
}

impl Decision {
    /// True for [`Decision::Allow`].
    pub fn is_allowed(&self) -> bool {
        matches!(self, Decision::Allow)
    }

    fn deny(rule: impl Into<String>) -> Decision {
        Decision::Deny { rule: rule.into() }
    }
}

/// Classify `path` (absolute, or relative to `root`) inside the project at `root`.
/// Purely lexical: `..` is resolved against the path's own components, symlinks
/// are not followed (callers that can see the filesystem resolve them first).
pub fn classify(root: &Path, path: &Path) -> Artifact {
    let joined = if path.is_absolute() { path.to_path_buf() } else { root.join(path) };
    let Some(normal) = normalize(&joined) else { return Artifact::Outside };
    let Some(root) = normalize(root) else { return Artifact::Outside };
    let Ok(rel) = normal.strip_prefix(&root) else { return Artifact::Outside };
    let parts: Vec<String> = rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    let p: Vec<&str> = parts.iter().map(String::as_str).collect();
    match p.as_slice() {
        [] => Artifact::Outside,
        [".git", ..] => Artifact::GitInternals,
        [".troupe", "specs", feature, rest @ ..] if !rest.is_empty() => {
            let feature = feature.to_string();
            match rest {
                ["spec.yaml"] => Artifact::SpecYaml { feature },
                ["design.md"] => Artifact::Design { feature },
                ["research.md"] => Artifact::Research { feature },
                ["tasks.yaml"] => Artifact::Tasks { feature },
                ["reviews", "active", "verdict.cpf"] => Artifact::Verdict { feature },
                ["reviews", "active", file] if file.ends_with(".cpf") => {
                    Artifact::InspectorFindings { feature, inspector: file.trim_end_matches(".cpf").to_string() }
                }
                _ => Artifact::ReviewRecord { feature },
            }
        }
        [".troupe", ..] => Artifact::TroupeFile,
        _ => Artifact::Code { path: parts.join("/") },
    }
}

/// May `writer` create or change the file at `path` in the project at `root`?
pub fn may_write(root: &Path, path: &Path, writer: &Writer<'_>) -> Decision {
    let artifact = classify(root, path);
    decide(&artifact, writer)
}

/// [`may_write`] for an artifact already classified.
pub fn decide(artifact: &Artifact, writer: &Writer<'_>) -> Decision {
    let role = writer.role;
    let same_feature = |f: &str| writer.feature.is_none_or(|mine| mine == f);
    let feature_rule = |f: &str| {
        format!(
            "{role} works on feature '{}' and may not write artifacts of feature '{f}'",
            writer.feature.unwrap_or("?")
        )
    };
    match artifact {
        Artifact::Outside => Decision::deny("the path is outside the project; no role writes there"),
        Artifact::GitInternals => Decision::deny(".git/ is written only by git, run by the Lead"),
        Artifact::TroupeFile => Decision::deny(format!(
            "files under .troupe/ other than spec artifacts belong to the Lead (troupe) and the user; {role} may only read them"
        )),
        Artifact::ReviewRecord { .. } => Decision::deny(format!(
            "review archives and verdicts.md are written by the Lead; {role} may only read them"
        )),
        Artifact::SpecYaml { .. } => {
            if role == Role::Lead {
                Decision::Allow
            } else {
                Decision::deny(format!("spec.yaml is owned by the Lead; {role} may only read it"))
            }
        }
        Artifact::Design { feature } | Artifact::Research { feature } => {
            let name = if matches!(artifact, Artifact::Design { .. }) { "design.md" } else { "research.md" };
            if role != Role::Architect {
                Decision::deny(format!("{name} is owned by the Architect; {role} may only read it"))
            } else if !same_feature(feature) {
                Decision::deny(feature_rule(feature))
            } else {
                Decision::Allow
            }
        }
        Artifact::Tasks { feature } => match role {
            Role::TaskGenerator if same_feature(feature) => Decision::Allow,
            Role::TaskGenerator => Decision::deny(feature_rule(feature)),
            Role::Lead => Decision::deny(
                "tasks.yaml is owned by the TaskGenerator; the Lead may only mark tasks done, through troupe",
            ),
            _ => Decision::deny(format!("tasks.yaml is owned by the TaskGenerator; {role} may only read it")),
        },
        Artifact::InspectorFindings { feature, inspector } => match role {
            Role::Inspector if !same_feature(feature) => Decision::deny(feature_rule(feature)),
            Role::Inspector => match writer.agent_name {
                Some(name) if name != inspector => Decision::deny(format!(
                    "reviews/active/{inspector}.cpf belongs to Inspector '{inspector}'; Inspector '{name}' writes reviews/active/{name}.cpf"
                )),
                _ => Decision::Allow,
            },
            _ => Decision::deny(format!("Inspector findings are written by Inspectors; {role} may only read them")),
        },
        Artifact::Verdict { feature } => match role {
            Role::Auditor if same_feature(feature) => Decision::Allow,
            Role::Auditor => Decision::deny(feature_rule(feature)),
            _ => Decision::deny(format!("verdict.cpf is written by the Auditor; {role} may only read it")),
        },
        Artifact::Code { path } => match role {
            Role::Builder => {
                if owns(writer.owned_files, path) {
                    Decision::Allow
                } else {
                    Decision::deny(format!(
                        "{path} is not in this Builder's group; a Builder writes only the files of its claimed task's group ({})",
                        if writer.owned_files.is_empty() {
                            "none assigned".to_string()
                        } else {
                            writer.owned_files.join(", ")
                        }
                    ))
                }
            }
            _ => Decision::deny(format!("implementation code is changed by Builders; {role} may only read it")),
        },
    }
}

/// True when `path` is one of `owned` (exact paths, folder prefixes ending in `/`, or globs).
fn owns(owned: &[String], path: &str) -> bool {
    owned.iter().any(|pattern| {
        let pattern = pattern.trim_start_matches("./");
        if pattern == path {
            return true;
        }
        if let Some(dir) = pattern.strip_suffix('/') {
            return path.starts_with(&format!("{dir}/"));
        }
        if pattern.contains(['*', '?', '[', '{']) {
            return globset::GlobBuilder::new(pattern)
                .literal_separator(true)
                .build()
                .map(|g| g.compile_matcher().is_match(path))
                .unwrap_or(false);
        }
        false
    })
}

/// Resolve `.` and `..` lexically; `None` when `..` climbs above the root of the path.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                if !out.pop() || out.as_os_str().is_empty() {
                    return None;
                }
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> &'static Path {
        Path::new("/repo")
    }

    fn w(role: Role) -> Writer<'static> {
        Writer { role, feature: Some("login"), owned_files: &[], agent_name: None }
    }

    fn allowed(path: &str, writer: &Writer<'_>) -> bool {
        may_write(root(), Path::new(path), writer).is_allowed()
    }

    #[test]
    fn classify_paths() {
        let c = |p: &str| classify(root(), Path::new(p));
        assert_eq!(c(".troupe/specs/login/spec.yaml"), Artifact::SpecYaml { feature: "login".into() });
        assert_eq!(c("/repo/.troupe/specs/login/design.md"), Artifact::Design { feature: "login".into() });
        assert_eq!(
            c(".troupe/specs/login/reviews/active/rules.cpf"),
            Artifact::InspectorFindings { feature: "login".into(), inspector: "rules".into() }
        );
        assert_eq!(c(".troupe/specs/login/reviews/active/verdict.cpf"), Artifact::Verdict { feature: "login".into() });
        assert_eq!(c(".troupe/specs/login/verdicts.md"), Artifact::ReviewRecord { feature: "login".into() });
        assert_eq!(c(".troupe/config.toml"), Artifact::TroupeFile);
        assert_eq!(c(".git/config"), Artifact::GitInternals);
        assert_eq!(c("src/lib.rs"), Artifact::Code { path: "src/lib.rs".into() });
        assert_eq!(c("src/../src/lib.rs"), Artifact::Code { path: "src/lib.rs".into() });
        assert_eq!(c("../other/x"), Artifact::Outside);
        assert_eq!(c("/etc/passwd"), Artifact::Outside);
        assert_eq!(c("src/../../repo2/x"), Artifact::Outside);
    }

    #[test]
    fn matrix_matches_the_seed() {
        assert_eq!(right(Role::Lead, ArtifactKind::SpecYaml), Right::CreateModify);
        assert_eq!(right(Role::Lead, ArtifactKind::Design), Right::Read);
        assert_eq!(right(Role::Lead, ArtifactKind::Tasks), Right::StatusOnly);
        assert_eq!(right(Role::Lead, ArtifactKind::Code), Right::Read);
        assert_eq!(right(Role::Architect, ArtifactKind::Design), Right::CreateModify);
        assert_eq!(right(Role::TaskGenerator, ArtifactKind::Tasks), Right::CreateModify);
        assert_eq!(right(Role::Builder, ArtifactKind::Code), Right::CreateModify);
        for role in Role::ALL {
            if role != Role::Lead {
                assert_eq!(right(role, ArtifactKind::SpecYaml), Right::Read, "{role}");
            }
            assert!(!right(Role::Coordinator, ArtifactKind::ALL[role as usize % 6]).writes());
        }
    }

    #[test]
    fn architect_writes_only_its_design_and_research() {
        let a = w(Role::Architect);
        assert!(allowed(".troupe/specs/login/design.md", &a));
        assert!(allowed(".troupe/specs/login/research.md", &a));
        assert!(!allowed(".troupe/specs/other/design.md", &a));
        assert!(!allowed(".troupe/specs/login/tasks.yaml", &a));
        assert!(!allowed(".troupe/specs/login/spec.yaml", &a));
        assert!(!allowed("src/main.rs", &a));
    }

    #[test]
    fn nobody_but_the_lead_writes_spec_yaml() {
        for role in Role::ALL {
            assert_eq!(allowed(".troupe/specs/login/spec.yaml", &w(role)), role == Role::Lead, "{role}");
        }
    }

    #[test]
    fn builder_writes_only_its_group() {
        let owned = vec!["src/auth.rs".to_string(), "tests/auth/".to_string(), "src/auth/*.rs".to_string()];
        let b = Writer { role: Role::Builder, feature: Some("login"), owned_files: &owned, agent_name: None };
        assert!(allowed("src/auth.rs", &b));
        assert!(allowed("/repo/tests/auth/login_test.rs", &b));
        assert!(allowed("src/auth/token.rs", &b));
        assert!(!allowed("src/auth/deep/x.rs", &b));
        assert!(!allowed("src/billing.rs", &b));
        assert!(!allowed(".troupe/specs/login/tasks.yaml", &b));
        let Decision::Deny { rule } = may_write(root(), Path::new("src/billing.rs"), &b) else { panic!() };
        assert!(rule.contains("not in this Builder's group"), "{rule}");
    }

    #[test]
    fn inspectors_write_their_own_findings_and_auditor_the_verdict() {
        let i = Writer { role: Role::Inspector, feature: Some("login"), owned_files: &[], agent_name: Some("rules") };
        assert!(allowed(".troupe/specs/login/reviews/active/rules.cpf", &i));
        assert!(!allowed(".troupe/specs/login/reviews/active/testability.cpf", &i));
        assert!(!allowed(".troupe/specs/login/reviews/active/verdict.cpf", &i));
        let a = w(Role::Auditor);
        assert!(allowed(".troupe/specs/login/reviews/active/verdict.cpf", &a));
        assert!(!allowed(".troupe/specs/login/reviews/active/rules.cpf", &a));
    }

    #[test]
    fn coordinator_and_lead_never_write_content() {
        for path in
            ["src/x.rs", ".troupe/specs/login/design.md", ".troupe/specs/login/tasks.yaml", ".troupe/config.toml"]
        {
            assert!(!allowed(path, &w(Role::Coordinator)), "{path}");
            assert!(!allowed(path, &w(Role::Lead)), "{path}");
        }
    }

    #[test]
    fn outside_is_always_denied() {
        for role in Role::ALL {
            assert!(!allowed("/tmp/x", &w(role)));
            assert!(!allowed("../x", &w(role)));
        }
    }
}
