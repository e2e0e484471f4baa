//! The one loader of `.troupe/config.toml`: every command, the hooks, the
//! gateway and the Lead read the file through [`load`], so a damaged file is
//! refused the same way everywhere — never read as "no config" with the
//! defaults in its place.

use std::path::{Path, PathBuf};

use troupe_core::config::{Config, ConfigError};
use troupe_core::layout::Layout;

/// Why `.troupe/config.toml` cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigFileError {
    /// It exists but cannot be read (permissions, a folder in its place).
    #[error("cannot read {}", .path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A byte that is not UTF-8 (TOML is UTF-8, and nothing of the file may be
    /// guessed at).
    #[error("{}:{line}:{column}: the file is not UTF-8 (a byte that is not text at line {line}, column {column})", .path.display())]
    NotUtf8 {
        /// The file.
        path: PathBuf,
        /// 1-based line of the first bad byte.
        line: usize,
        /// 1-based column (in bytes) of the first bad byte.
        column: usize,
    },
    /// It does not parse, or a value is invalid.
    #[error("{}{}: {}", .path.display(), .error.location.map(|(l, c)| format!(":{l}:{c}")).unwrap_or_default(), .error.message)]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, and where when known.
        error: ConfigError,
    },
}

impl ConfigFileError {
    /// What is wrong, without the file's path (for errors that name it already).
    pub fn detail(&self) -> String {
        match self {
            ConfigFileError::Unreadable { source, .. } => format!("cannot read it: {source}"),
            ConfigFileError::NotUtf8 { line, column, .. } => {
                format!("the file is not UTF-8 (a byte that is not text at line {line}, column {column})")
            }
            ConfigFileError::Invalid { error, .. } => error.to_string(),
        }
    }

    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            ConfigFileError::Unreadable { path, .. }
            | ConfigFileError::NotUtf8 { path, .. }
            | ConfigFileError::Invalid { path, .. } => path,
        }
    }
}

/// Load the project's config; a missing file means the defaults.
pub fn load(layout: &Layout) -> Result<Config, ConfigFileError> {
    load_file(&layout.config_file())
}

/// Load the config file at `path`; a missing file means the defaults.
pub fn load_file(path: &Path) -> Result<Config, ConfigFileError> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Config::default()),
        Err(source) => return Err(ConfigFileError::Unreadable { path: path.to_path_buf(), source }),
    };
    let text = std::str::from_utf8(&bytes).map_err(|e| {
        let good = &bytes[..e.valid_up_to()];
        let line = good.iter().filter(|b| **b == b'\n').count() + 1;
        let column = good.len() - good.iter().rposition(|b| *b == b'\n').map(|i| i + 1).unwrap_or(0) + 1;
        ConfigFileError::NotUtf8 { path: path.to_path_buf(), line, column }
    })?;
    Config::from_toml(text).map_err(|error| ConfigFileError::Invalid { path: path.to_path_buf(), error })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_file_is_the_defaults_and_a_damaged_one_is_refused_with_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        assert_eq!(load_file(&path).unwrap(), Config::default());
        std::fs::write(&path, b"[team]\nmax_concurrent = 2\n# caf\xe9\n").unwrap();
        let err = load_file(&path).unwrap_err();
        assert!(matches!(err, ConfigFileError::NotUtf8 { line: 3, column: 6, .. }), "{err:?}");
        assert!(err.to_string().starts_with(&format!("{}:3:6: the file is not UTF-8", path.display())), "{err}");
        std::fs::write(&path, "[team]\nmax_concurrent = 2\nno_such_key = 1\n").unwrap();
        let err = load_file(&path).unwrap_err();
        assert!(err.to_string().starts_with(&format!("{}:3:", path.display())), "{err}");
        std::fs::write(&path, "[team]\nmax_concurrent = 2\n").unwrap();
        assert_eq!(load_file(&path).unwrap().team.max_concurrent, 2);
    }
}
