//! The review perspectives (seed 000 Spec 1.6): six Inspectors for design and
//! impl reviews, four for dead-code. Each perspective is a role template under
//! `.troupe/roles/inspectors/<name>.md` that `troupe init` writes and the user
//! may edit; an Inspector is told to read its template first, so the machine
//! never needs the file's contents.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Which review runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReviewKind {
    /// design.md and research.md against the spec and steering.
    Design,
    /// The implementation against design.md and tasks.yaml.
    Impl,
    /// Unused settings, dead code, stale specs, orphan tests.
    DeadCode,
}

impl ReviewKind {
    /// Every kind.
    pub const ALL: [ReviewKind; 3] = [ReviewKind::Design, ReviewKind::Impl, ReviewKind::DeadCode];

    /// The spelling on the command line and in verdicts.md.
    pub fn as_str(self) -> &'static str {
        match self {
            ReviewKind::Design => "design",
            ReviewKind::Impl => "impl",
            ReviewKind::DeadCode => "dead-code",
        }
    }

    /// The Inspectors' perspectives, in spawn order.
    pub fn perspectives(self) -> &'static [Perspective] {
        match self {
            ReviewKind::Design | ReviewKind::Impl => &FULL,
            ReviewKind::DeadCode => &DEAD_CODE,
        }
    }

    /// The pipeline phase for the engine resolution.
    pub fn engine_phase(self) -> &'static str {
        "review"
    }
}

impl fmt::Display for ReviewKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A review kind troupe does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown review '{0}' (expected design, impl or dead-code)")]
pub struct UnknownReviewKind(pub String);

impl FromStr for ReviewKind {
    type Err = UnknownReviewKind;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ReviewKind::ALL.into_iter().find(|k| k.as_str() == s).ok_or_else(|| UnknownReviewKind(s.to_string()))
    }
}

/// One Inspector's point of view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Perspective {
    /// The short name: template file stem and part of the Inspector's id.
    pub name: &'static str,
    /// What it looks at, in one line (for the spawn context's scope).
    pub focus: &'static str,
    /// The template's text.
    template: &'static str,
}

impl Perspective {
    /// `.troupe/roles/inspectors/<name>.md`, relative to the project root.
    pub fn template_path(&self) -> String {
        format!(".troupe/roles/inspectors/{}.md", self.name)
    }
}

const FULL: [Perspective; 6] = [
    Perspective {
        name: "rules",
        focus: "conformance to the spec's requirements and the steering rules",
        template: include_str!("templates/rules.md"),
    },
    Perspective {
        name: "testability",
        focus: "whether every requirement can be, and is, tested",
        template: include_str!("templates/testability.md"),
    },
    Perspective {
        name: "architecture",
        focus: "structure, boundaries, dependencies and data flow",
        template: include_str!("templates/architecture.md"),
    },
    Perspective {
        name: "consistency",
        focus: "consistency between spec, design, tasks and code, and within each",
        template: include_str!("templates/consistency.md"),
    },
    Perspective {
        name: "best-practices",
        focus: "error handling, security, performance and the conventions of the stack",
        template: include_str!("templates/best-practices.md"),
    },
    Perspective {
        name: "holistic",
        focus: "the whole: does it deliver the product intent, what is missing",
        template: include_str!("templates/holistic.md"),
    },
];

const DEAD_CODE: [Perspective; 4] = [
    Perspective {
        name: "unused-settings",
        focus: "configuration keys, flags and environment variables nothing reads",
        template: include_str!("templates/unused-settings.md"),
    },
    Perspective {
        name: "dead-code",
        focus: "functions, types, modules and branches nothing reaches",
        template: include_str!("templates/dead-code.md"),
    },
    Perspective {
        name: "stale-specs",
        focus: "specs and design documents that no longer match the code",
        template: include_str!("templates/stale-specs.md"),
    },
    Perspective {
        name: "orphan-tests",
        focus: "tests of code that no longer exists, or that can never fail",
        template: include_str!("templates/orphan-tests.md"),
    },
];

/// Every perspective template as (path relative to the project root, contents),
/// for `troupe init` to write (never overwriting a file the user changed).
pub fn role_templates() -> Vec<(String, &'static str)> {
    FULL.iter().chain(DEAD_CODE.iter()).map(|p| (p.template_path(), p.template)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn six_inspectors_for_design_and_impl_four_for_dead_code() {
        assert_eq!(ReviewKind::Design.perspectives().len(), 6);
        assert_eq!(ReviewKind::Impl.perspectives().len(), 6);
        assert_eq!(ReviewKind::DeadCode.perspectives().len(), 4);
    }

    #[test]
    fn templates_are_distinct_files_that_name_their_output() {
        let t = role_templates();
        assert_eq!(t.len(), 10);
        let mut paths: Vec<&str> = t.iter().map(|(p, _)| p.as_str()).collect();
        paths.dedup();
        assert_eq!(paths.len(), 10);
        for (path, text) in &t {
            assert!(path.starts_with(".troupe/roles/inspectors/") && path.ends_with(".md"), "{path}");
            assert!(text.starts_with("# Inspector: "), "{path}");
            assert!(text.contains("reviews/active/"), "{path} must say where findings go");
            assert!(text.contains("send_message"), "{path} must say how findings reach the Auditor");
        }
    }

    #[test]
    fn kinds_parse() {
        for k in ReviewKind::ALL {
            assert_eq!(k.as_str().parse::<ReviewKind>().unwrap(), k);
        }
        assert!("style".parse::<ReviewKind>().is_err());
    }
}
