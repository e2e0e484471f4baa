//! Reading and writing `spec.yaml` files. Writes are atomic; a file that does
//! not parse is reported with its path, line and column and is never overwritten.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use jiff::Timestamp;
use troupe_core::layout::is_valid_feature_name;
use troupe_core::spec::{Spec, SpecParseError, TransitionError};

use crate::fsutil::write_atomic;
use crate::project::Project;

/// Why a spec could not be read or changed.
#[derive(Debug, thiserror::Error)]
pub enum SpecFileError {
    /// No spec.yaml for this feature.
    #[error("no spec named '{feature}' (looked for {})", .path.display())]
    NotFound {
        /// The feature asked for.
        feature: String,
        /// Where it was looked for.
        path: PathBuf,
    },
    /// `spec new` for a feature that already has a spec.
    #[error("a spec named '{feature}' already exists at {}", .path.display())]
    AlreadyExists {
        /// The feature.
        feature: String,
        /// Its spec.yaml.
        path: PathBuf,
    },
    /// The name cannot be a feature name.
    #[error(
        "'{0}' is not a valid feature name: use lowercase letters, digits, '-', '_' or '.', starting with a letter or digit, at most 64 characters"
    )]
    InvalidName(String),
    /// The file is not valid spec.yaml.
    #[error("{}{}: {}", .path.display(), .error.location.map(|(l, c)| format!(":{l}:{c}")).unwrap_or_default(), .error.message)]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong and where.
        error: SpecParseError,
    },
    /// The file names a different feature than its folder.
    #[error("{}: feature_name is '{found}' but the folder is '{expected}'", .path.display())]
    NameMismatch {
        /// The file.
        path: PathBuf,
        /// The folder's name.
        expected: String,
        /// `feature_name` in the file.
        found: String,
    },
    /// The state machine refused the change.
    #[error(transparent)]
    Transition(#[from] TransitionError),
    /// Reading or writing failed.
    #[error("cannot access {}", .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: io::Error,
    },
}

/// The specs of one project.
#[derive(Debug, Clone)]
pub struct Specs<'p> {
    project: &'p Project,
}

impl<'p> Specs<'p> {
    /// The specs of `project`.
    pub fn new(project: &'p Project) -> Self {
        Specs { project }
    }

    /// The spec.yaml path of `feature`.
    pub fn path(&self, feature: &str) -> PathBuf {
        self.project.layout().spec_file(feature)
    }

    /// Load and validate `feature`'s spec.yaml.
    pub fn load(&self, feature: &str) -> Result<Spec, SpecFileError> {
        if !is_valid_feature_name(feature) {
            return Err(SpecFileError::InvalidName(feature.to_string()));
        }
        let path = self.path(feature);
        let text = match fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(SpecFileError::NotFound { feature: feature.to_string(), path });
            }
            Err(source) => return Err(SpecFileError::Io { path, source }),
        };
        let spec = Spec::from_yaml(&text).map_err(|error| SpecFileError::Malformed { path: path.clone(), error })?;
        if spec.feature_name != feature {
            return Err(SpecFileError::NameMismatch { path, expected: feature.to_string(), found: spec.feature_name });
        }
        Ok(spec)
    }

    /// Write `spec` to its spec.yaml, atomically.
    pub fn save(&self, spec: &Spec) -> Result<(), SpecFileError> {
        let path = self.path(&spec.feature_name);
        write_atomic(&path, spec.to_yaml().as_bytes()).map_err(|source| SpecFileError::Io { path, source })
    }

    /// Create a new spec in phase `initialized`. Refuses an existing feature.
    pub fn create(&self, feature: &str, description: &str, now: Timestamp) -> Result<Spec, SpecFileError> {
        if !is_valid_feature_name(feature) {
            return Err(SpecFileError::InvalidName(feature.to_string()));
        }
        let path = self.path(feature);
        if path.exists() {
            return Err(SpecFileError::AlreadyExists { feature: feature.to_string(), path });
        }
        let mut spec = Spec::new(feature, now);
        spec.description = description.to_string();
        self.save(&spec)?;
        Ok(spec)
    }

    /// Load, change with `change`, and save only if `change` succeeded.
    pub fn update<T>(
        &self,
        feature: &str,
        change: impl FnOnce(&mut Spec) -> Result<T, TransitionError>,
    ) -> Result<(Spec, T), SpecFileError> {
        let mut spec = self.load(feature)?;
        let out = change(&mut spec)?;
        self.save(&spec)?;
        Ok((spec, out))
    }

    /// The feature names that have a spec folder, sorted.
    pub fn names(&self) -> Result<Vec<String>, SpecFileError> {
        let dir = self.project.layout().specs_dir();
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => return Err(SpecFileError::Io { path: dir, source }),
        };
        let mut names: Vec<String> = entries
            .filter_map(Result::ok)
            .filter(|e| e.path().join("spec.yaml").is_file())
            .filter_map(|e| e.file_name().to_str().map(str::to_string))
            .collect();
        names.sort();
        Ok(names)
    }
}

/// Read a file into a string, with the path in the error.
pub fn read_text(path: &Path) -> Result<String, SpecFileError> {
    fs::read_to_string(path).map_err(|source| SpecFileError::Io { path: path.to_path_buf(), source })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, Project) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".troupe")).unwrap();
        let p = Project::at(dir.path());
        (dir, p)
    }

    #[test]
    fn create_load_update() {
        let (_d, p) = setup();
        let specs = Specs::new(&p);
        specs.create("login", "users log in", Timestamp::UNIX_EPOCH).unwrap();
        assert!(matches!(specs.create("login", "", Timestamp::UNIX_EPOCH), Err(SpecFileError::AlreadyExists { .. })));
        let (s, ()) = specs.update("login", |s| s.mark_design_generated(Timestamp::UNIX_EPOCH, "d")).unwrap();
        assert_eq!(specs.load("login").unwrap(), s);
        assert_eq!(specs.names().unwrap(), vec!["login"]);
    }

    #[test]
    fn malformed_file_is_reported_and_left_alone() {
        let (_d, p) = setup();
        let specs = Specs::new(&p);
        let path = specs.path("bad");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "feature_name: bad\nphase: [oops\n").unwrap();
        let err = specs.update("bad", |s| s.unblock(Timestamp::UNIX_EPOCH, "x")).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("spec.yaml:"), "{msg}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "feature_name: bad\nphase: [oops\n");
    }

    #[test]
    fn refused_transition_changes_nothing() {
        let (_d, p) = setup();
        let specs = Specs::new(&p);
        specs.create("a", "", Timestamp::UNIX_EPOCH).unwrap();
        let before = std::fs::read(specs.path("a")).unwrap();
        assert!(specs.update("a", |s| s.revise(Timestamp::UNIX_EPOCH, "x")).is_err());
        assert_eq!(std::fs::read(specs.path("a")).unwrap(), before);
    }

    #[test]
    fn invalid_names_are_refused() {
        let (_d, p) = setup();
        let specs = Specs::new(&p);
        assert!(matches!(specs.create("../evil", "", Timestamp::UNIX_EPOCH), Err(SpecFileError::InvalidName(_))));
        assert!(matches!(specs.load("../evil"), Err(SpecFileError::InvalidName(_))));
    }
}
