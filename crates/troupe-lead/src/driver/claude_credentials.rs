//! Handing a Claude teammate's refreshed OAuth token back to the user.
//!
//! A Claude teammate's config folder (`wiring::claude_config`) links the
//! user's `.credentials.json`. Claude Code replaces that file by writing a
//! temporary file beside it and renaming it over the old one, so a token
//! refresh inside a teammate replaces the link with a file of the teammate's
//! own. The user's file then keeps a refresh token the server may just have
//! rotated away: the user, and every other teammate still linked to it, would
//! be logged out. The Lead's watcher calls [`sync`] on each tick: a replaced
//! file whose token expires later than the user's is written back to the
//! user's file (atomically, mode 0600), and the teammate's link is restored,
//! so every Claude process of the run reads one file again, as Claude Code
//! expects when several of its processes share one login.

use std::path::{Path, PathBuf};

/// The credentials file's name, in the user's folder and in a teammate's.
const CREDENTIALS: &str = ".credentials.json";

/// Hand back every refreshed token under `hooks` (`.troupe/state/hooks/<agent>/claude-config`)
/// to the user's Claude folder `user`. Returns the teammates whose file was
/// replaced, and whether the user's was updated from it.
pub fn sync(hooks: &Path, user: &Path) -> Vec<(String, Result<bool, String>)> {
    let Ok(entries) = std::fs::read_dir(hooks) else { return Vec::new() };
    let mut synced = Vec::new();
    for entry in entries.flatten() {
        let file = entry.path().join("claude-config").join(CREDENTIALS);
        // A link (or nothing) is the normal case: nothing was refreshed.
        if !file.symlink_metadata().is_ok_and(|m| m.file_type().is_file()) {
            continue;
        }
        let id = entry.file_name().to_string_lossy().into_owned();
        synced.push((id, hand_back(&file, &user.join(CREDENTIALS))));
    }
    synced
}

/// Write `theirs` over `ours` if its token lasts longer, then link `theirs` to `ours` again.
fn hand_back(theirs: &Path, ours: &Path) -> Result<bool, String> {
    let text = std::fs::read(theirs).map_err(|e| format!("cannot read {}: {e}", theirs.display()))?;
    // A user's file that is missing or unreadable loses to any token.
    let newer = expires_at(&text) > std::fs::read(ours).ok().as_deref().and_then(expires_at).or(Some(i64::MIN));
    if newer {
        replace(ours, |tmp| write_private(tmp, &text))?;
    }
    replace(theirs, |tmp| std::os::unix::fs::symlink(ours, tmp).map_err(|e| e.to_string()))?;
    Ok(newer)
}

/// `claudeAiOauth.expiresAt` (ms since the epoch) of a credentials file.
fn expires_at(text: &[u8]) -> Option<i64> {
    let json: serde_json::Value = serde_json::from_slice(text).ok()?;
    json["claudeAiOauth"]["expiresAt"].as_i64()
}

/// Make `path` anew through a temporary sibling and a rename, so no reader
/// ever sees half of it.
fn replace(path: &Path, make: impl FnOnce(&Path) -> Result<(), String>) -> Result<(), String> {
    let tmp = PathBuf::from(format!("{}.troupe.{}", path.display(), std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    make(&tmp).map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("cannot replace {}: {e}", path.display())
    })
}

/// Write a new file only its owner may read (mode 0600): Claude's config and
/// credentials hold secrets. Fails if `path` exists.
pub(super) fn write_private(path: &Path, text: &[u8]) -> Result<(), String> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut f| f.write_all(text))
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(access: &str, expires: i64) -> String {
        serde_json::json!({"claudeAiOauth": {"accessToken": access, "refreshToken": format!("r-{access}"), "expiresAt": expires}})
            .to_string()
    }

    /// What Claude Code does on a refresh: a temporary file renamed over the old one.
    fn refresh_like_claude(file: &Path, text: &str) {
        let tmp = file.with_extension("json.tmp.1a2b3c4d");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, file).unwrap();
    }

    #[test]
    fn a_refreshed_token_goes_back_to_the_user_and_the_link_comes_back() {
        let dir = tempfile::tempdir().unwrap();
        let (user, hooks) = (dir.path().join("home/.claude"), dir.path().join("hooks"));
        let config = hooks.join("builder-1/claude-config");
        std::fs::create_dir_all(&user).unwrap();
        std::fs::create_dir_all(&config).unwrap();
        std::fs::write(user.join(CREDENTIALS), token("old", 1_000)).unwrap();
        std::os::unix::fs::symlink(user.join(CREDENTIALS), config.join(CREDENTIALS)).unwrap();
        assert!(sync(&hooks, &user).is_empty(), "a link: nothing refreshed");

        refresh_like_claude(&config.join(CREDENTIALS), &token("new", 2_000));
        assert_eq!(sync(&hooks, &user), [("builder-1".to_string(), Ok(true))]);
        assert_eq!(std::fs::read_to_string(user.join(CREDENTIALS)).unwrap(), token("new", 2_000));
        assert!(config.join(CREDENTIALS).symlink_metadata().unwrap().file_type().is_symlink());
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(user.join(CREDENTIALS)).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);

        // A teammate holding an older token than the user's (another refreshed
        // meanwhile) is relinked without overwriting the newer one.
        refresh_like_claude(&config.join(CREDENTIALS), &token("older", 1_500));
        assert_eq!(sync(&hooks, &user), [("builder-1".to_string(), Ok(false))]);
        assert_eq!(std::fs::read_to_string(user.join(CREDENTIALS)).unwrap(), token("new", 2_000));
        assert!(config.join(CREDENTIALS).symlink_metadata().unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read_dir(&user).unwrap().count(), 1, "no temporary file left");
    }
}
