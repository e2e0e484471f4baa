//! `troupe lock`, `troupe unlock`, `troupe locks`: file locks held by agents,
//! which the hooks enforce on every engine, and the history of writes (seed
//! 003 file safety). The store keeps both ([`troupe_store::FileLocks`]); this
//! module turns paths into the store's keys and prints.

use std::path::Path;

use troupe_project::Project;

use crate::cli::GlobalArgs;
use crate::error::{CliError, CliResult};

pub mod list;
pub mod lock;
pub mod unlock;

/// How long a lock lasts when `--ttl` is not given.
pub const DEFAULT_TTL: &str = "10m";

/// `path` (relative to the folder the command starts from, `-C DIR` or the
/// current one, as `git -C` reads it; or absolute) as the store's key:
/// relative to the project root. A path outside the project is a usage error.
pub(crate) fn key(g: &GlobalArgs, project: &Project, path: &Path) -> CliResult<String> {
    let start = crate::project::start_dir(g)?;
    let absolute = if path.is_absolute() { path.to_path_buf() } else { start.join(path) };
    let root = project.root().canonicalize().unwrap_or_else(|_| project.root().to_path_buf());
    // The root may be reached through a symlink (`/tmp` on some systems): try both spellings.
    troupe_store::lock::normalize(&root, &absolute)
        .or_else(|| troupe_store::lock::normalize(project.root(), &absolute))
        .ok_or_else(|| {
            CliError::usage(format!("{} is not inside the project at {}", path.display(), project.root().display()))
                .with_hint("locks are on the project's files; name one by its path inside the project")
        })
}

/// `30s`, `10m`, `2h` or a number of seconds.
pub(crate) fn parse_ttl(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let (digits, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => text.split_at(i),
        None => (text, "s"),
    };
    let n: u64 = digits.parse().map_err(|_| format!("`{text}` is not a duration (like 30s, 10m or 2h)"))?;
    let factor = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        _ => return Err(format!("`{text}` is not a duration: use s, m or h (like 30s, 10m or 2h)")),
    };
    n.checked_mul(factor).filter(|&s| s > 0).ok_or_else(|| format!("`{text}` is not a positive duration"))
}

#[cfg(test)]
mod tests {
    use super::parse_ttl;

    #[test]
    fn ttls() {
        assert_eq!(parse_ttl("10m"), Ok(600));
        assert_eq!(parse_ttl("45"), Ok(45));
        assert_eq!(parse_ttl("2h"), Ok(7200));
        assert!(parse_ttl("0s").is_err());
        assert!(parse_ttl("5d").is_err());
        assert!(parse_ttl("m").is_err());
    }
}
