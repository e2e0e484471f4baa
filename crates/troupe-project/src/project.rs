//! Finding the project a command runs in.

use std::path::{Path, PathBuf};

use troupe_core::layout::{Layout, TROUPE_DIR};

/// A troupe project: a folder with `.troupe/` in it.
#[derive(Debug, Clone)]
pub struct Project {
    layout: Layout,
}

/// No project could be found.
#[derive(Debug, thiserror::Error)]
pub enum ProjectError {
    /// Neither the folder nor any parent has `.troupe/`.
    #[error("no troupe project in {} or any folder above it", .0.display())]
    NotFound(PathBuf),
    /// The starting folder could not be read.
    #[error("cannot use {}", .path.display())]
    Io {
        /// The folder.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: std::io::Error,
    },
}

impl Project {
    /// The project whose root is exactly `root` (no search).
    pub fn at(root: impl Into<PathBuf>) -> Project {
        Project { layout: Layout::new(root) }
    }

    /// Walk up from `start` to the first folder that holds `.troupe/`.
    pub fn discover(start: &Path) -> Result<Project, ProjectError> {
        let start = start.canonicalize().map_err(|source| ProjectError::Io { path: start.to_path_buf(), source })?;
        let mut dir: Option<&Path> = Some(&start);
        while let Some(d) = dir {
            if d.join(TROUPE_DIR).is_dir() {
                return Ok(Project::at(d));
            }
            dir = d.parent();
        }
        Err(ProjectError::NotFound(start))
    }

    /// The project's paths.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The project root.
    pub fn root(&self) -> &Path {
        self.layout.root()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discover_walks_up() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".troupe")).unwrap();
        std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
        let p = Project::discover(&dir.path().join("a/b")).unwrap();
        assert_eq!(p.root(), dir.path().canonicalize().unwrap());
    }

    #[test]
    fn discover_fails_clearly() {
        let dir = tempfile::tempdir().unwrap();
        let err = Project::discover(dir.path()).unwrap_err();
        assert!(err.to_string().starts_with("no troupe project in"));
    }
}
