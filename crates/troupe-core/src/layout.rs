//! Where things live inside a project, as relative paths. Pure path arithmetic:
//! nothing here touches the filesystem.

use std::path::{Path, PathBuf};

/// The folder troupe keeps everything in, at the project root.
pub const TROUPE_DIR: &str = ".troupe";

/// The paths of a project rooted at `root`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    root: PathBuf,
}

impl Layout {
    /// A layout for the project whose root folder is `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Layout { root: root.into() }
    }

    /// The project root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `.troupe/`
    pub fn troupe_dir(&self) -> PathBuf {
        self.root.join(TROUPE_DIR)
    }

    /// `.troupe/config.toml`
    pub fn config_file(&self) -> PathBuf {
        self.troupe_dir().join("config.toml")
    }

    /// `.troupe/steering/`
    pub fn steering_dir(&self) -> PathBuf {
        self.troupe_dir().join("steering")
    }

    /// `.troupe/specs/`
    pub fn specs_dir(&self) -> PathBuf {
        self.troupe_dir().join("specs")
    }

    /// `.troupe/specs/<feature>/`
    pub fn spec_dir(&self, feature: &str) -> PathBuf {
        self.specs_dir().join(feature)
    }

    /// `.troupe/specs/<feature>/spec.yaml`
    pub fn spec_file(&self, feature: &str) -> PathBuf {
        self.spec_dir(feature).join("spec.yaml")
    }

    /// `.troupe/specs/<feature>/tasks.yaml`
    pub fn tasks_file(&self, feature: &str) -> PathBuf {
        self.spec_dir(feature).join("tasks.yaml")
    }

    /// `.troupe/specs/<feature>/design.md`
    pub fn design_file(&self, feature: &str) -> PathBuf {
        self.spec_dir(feature).join("design.md")
    }

    /// `.troupe/specs/<feature>/research.md`
    pub fn research_file(&self, feature: &str) -> PathBuf {
        self.spec_dir(feature).join("research.md")
    }

    /// `.troupe/specs/<feature>/reviews/`
    pub fn reviews_dir(&self, feature: &str) -> PathBuf {
        self.spec_dir(feature).join("reviews")
    }

    /// `.troupe/roles/`
    pub fn roles_dir(&self) -> PathBuf {
        self.troupe_dir().join("roles")
    }

    /// `.troupe/skills/`
    pub fn skills_dir(&self) -> PathBuf {
        self.troupe_dir().join("skills")
    }

    /// `.troupe/memory/`
    pub fn memory_dir(&self) -> PathBuf {
        self.troupe_dir().join("memory")
    }

    /// `.troupe/handover/`
    pub fn handover_dir(&self) -> PathBuf {
        self.troupe_dir().join("handover")
    }

    /// `.troupe/state/` (git-ignored: database, logs, markers, sockets).
    pub fn state_dir(&self) -> PathBuf {
        self.troupe_dir().join("state")
    }

    /// `.troupe/state/troupe.db`
    pub fn database_file(&self) -> PathBuf {
        self.state_dir().join("troupe.db")
    }

    /// `.troupe/state/logs/`
    pub fn logs_dir(&self) -> PathBuf {
        self.state_dir().join("logs")
    }

    /// `.troupe/state/runs/`: a folder per run with what `troupe replay`
    /// needs to run it again (its job, the tree and the store as it started).
    pub fn runs_dir(&self) -> PathBuf {
        self.state_dir().join("runs")
    }

    /// `.troupe/state/heartbeats/`: a file per agent whose quality gate is
    /// running, touched while it runs (holding the command), so that the Lead
    /// does not take an agent waiting for its gate (no engine output
    /// meanwhile) for a hung one, and live displays show what it waits for.
    pub fn heartbeats_dir(&self) -> PathBuf {
        self.state_dir().join("heartbeats")
    }

    /// `.troupe/state/denials.jsonl`: one JSON line per tool call, stop or
    /// task completion troupe refused a teammate, appended by whoever refused
    /// it (the hooks in the engine's process, the scripted engine), so that
    /// live displays show every engine's denials as they happen.
    pub fn denials_file(&self) -> PathBuf {
        self.state_dir().join("denials.jsonl")
    }
}

/// True when `id` is usable as an agent id: agent ids become file names (logs,
/// heartbeats, per-run settings), so they are kept to ASCII letters, digits,
/// `.`, `_` and `-`, at most 100 characters, never starting with `.`.
pub fn is_valid_agent_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 100
        && !id.starts_with('.')
        && id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// True when `name` is usable as a feature name: it becomes a folder name and
/// appears in commit messages, so it is kept to `[a-z0-9][a-z0-9._-]*`, at most
/// 64 characters, and never `.` or `..`.
pub fn is_valid_feature_name(name: &str) -> bool {
    let mut chars = name.chars();
    let Some(first) = chars.next() else { return false };
    name.len() <= 64
        && (first.is_ascii_lowercase() || first.is_ascii_digit())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_' | '.'))
        && !name.contains("..")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feature_names() {
        for ok in ["login", "a", "user-auth", "v2.api", "x_1"] {
            assert!(is_valid_feature_name(ok), "{ok}");
        }
        for bad in ["", "Login", "-x", ".", "..", "a..b", "a/b", "a b", "ü", &"a".repeat(65)] {
            assert!(!is_valid_feature_name(bad), "{bad}");
        }
    }

    #[test]
    fn paths() {
        let l = Layout::new("/p");
        assert_eq!(l.spec_file("f"), PathBuf::from("/p/.troupe/specs/f/spec.yaml"));
        assert_eq!(l.database_file(), PathBuf::from("/p/.troupe/state/troupe.db"));
    }
}
