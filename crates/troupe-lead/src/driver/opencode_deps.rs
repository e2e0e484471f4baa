//! OpenCode's plugin package in a project's `.opencode` folder, recorded
//! before a sandboxed OpenCode teammate starts.
//!
//! At every start OpenCode (1.18) installs its plugin package
//! `@opencode-ai/plugin` into each of its config folders it can write — an
//! npm install (its bundled arborist) that fetches from the registry — unless
//! the folder has `node_modules/` and its `package-lock.json` names, under
//! `packages[""]`, every dependency of its `package.json` and that package
//! (names only); and when any plugin is configured (troupe's bridge always
//! is) it waits for those installs before the session starts. A project's
//! `.opencode` is one of those folders, and no teammate may write it
//! (`troupe_engine::sandbox::grant::forbidden`); but Landlock does not answer
//! `access(W_OK)`, by which OpenCode decides it may, so every sandboxed start
//! began the install again and failed it (a read-only bind instead makes
//! OpenCode crash). The Lead, outside the sandbox, records the package there
//! once, as OpenCode's own install would have: an empty `node_modules/`, the
//! name in the lock file, and OpenCode's `.gitignore` for these files when
//! the folder has none, so none of them reaches a commit.
//!
//! Nothing is downloaded: troupe's bridge plugin imports node built-ins only.
//! A plugin of the project's own that imports `@opencode-ai/plugin` at run
//! time (its types alone need nothing) needs the package installed there
//! (`npm install @opencode-ai/plugin` in `.opencode`), which a sandboxed
//! teammate could never have done.

use std::path::Path;

use serde_json::{Value, json};

/// The package OpenCode installs into each of its config folders.
pub const PLUGIN_PACKAGE: &str = "@opencode-ai/plugin";

/// The `.gitignore` OpenCode writes into a config folder it installs into.
const GITIGNORE: &str = "node_modules\npackage.json\npackage-lock.json\nbun.lock\n.gitignore";

/// Records [`PLUGIN_PACKAGE`] as installed in the `.opencode` folder of
/// `workdir` (where the teammate starts: the project root or its worktree),
/// so that OpenCode does not try to install it. Nothing happens when there is
/// no such folder, when it already says so, or when its lock file is not
/// JSON (that is the user's to repair; OpenCode would install over it).
/// Returns whether it wrote anything.
pub fn record_plugin_package(workdir: &Path) -> Result<bool, String> {
    let dir = workdir.join(".opencode");
    if !dir.is_dir() {
        return Ok(false);
    }
    let lock_path = dir.join("package-lock.json");
    let mut lock = match std::fs::read_to_string(&lock_path) {
        Ok(text) => match serde_json::from_str::<Value>(&text) {
            Ok(v) if v.is_object() => v,
            _ => return Ok(false),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => json!({"lockfileVersion": 3}),
        Err(e) => return Err(format!("cannot read {}: {e}", lock_path.display())),
    };
    let modules = dir.join("node_modules");
    let named = lock.pointer(&format!("/packages//dependencies/{}", PLUGIN_PACKAGE.replace('/', "~1"))).is_some();
    if named && modules.is_dir() {
        return Ok(false);
    }
    std::fs::create_dir_all(&modules).map_err(|e| format!("cannot create {}: {e}", modules.display()))?;
    if !named {
        let root = object_at(object_at(&mut lock, "packages"), "");
        object_at(root, "dependencies")[PLUGIN_PACKAGE] = json!("*");
        let text = serde_json::to_string_pretty(&lock).expect("JSON serializes");
        std::fs::write(&lock_path, text + "\n").map_err(|e| format!("cannot write {}: {e}", lock_path.display()))?;
    }
    let ignore = dir.join(".gitignore");
    if !ignore.exists() {
        std::fs::write(&ignore, GITIGNORE).map_err(|e| format!("cannot write {}: {e}", ignore.display()))?;
    }
    Ok(true)
}

/// The object under `key` of `v` (an object), made one if it is not.
fn object_at<'a>(v: &'a mut Value, key: &str) -> &'a mut Value {
    let slot = &mut v[key];
    if !slot.is_object() {
        *slot = json!({});
    }
    slot
}

#[cfg(test)]
mod tests {
    use super::*;

    /// OpenCode's own test, from its 1.18 `Npm.install`: a folder needs an
    /// install when it lacks `node_modules/` or its lock does not name every
    /// dependency of its package.json and the plugin package.
    fn opencode_would_install(dir: &Path) -> bool {
        let read = |f: &str| -> Value {
            std::fs::read_to_string(dir.join(f)).ok().and_then(|t| serde_json::from_str(&t).ok()).unwrap_or(json!({}))
        };
        if !dir.join("node_modules").is_dir() {
            return true;
        }
        let (package, lock) = (read("package.json"), read("package-lock.json"));
        let root = &lock["packages"][""];
        let names = |v: &Value| -> Vec<String> {
            ["dependencies", "devDependencies", "peerDependencies", "optionalDependencies"]
                .iter()
                .filter_map(|k| v[*k].as_object())
                .flat_map(|m| m.keys().cloned())
                .collect()
        };
        let locked = names(root);
        names(&package).into_iter().chain([PLUGIN_PACKAGE.to_string()]).any(|n| !locked.contains(&n))
    }

    #[test]
    fn a_project_opencode_folder_is_left_needing_no_install_once() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(".opencode");
        std::fs::create_dir_all(dir.join("plugin")).unwrap();
        assert!(opencode_would_install(&dir));
        assert!(record_plugin_package(tmp.path()).unwrap());
        assert!(!opencode_would_install(&dir));
        assert_eq!(std::fs::read_to_string(dir.join(".gitignore")).unwrap(), GITIGNORE);
        // Once recorded, the next teammate's start changes nothing.
        assert!(!record_plugin_package(tmp.path()).unwrap());
    }

    #[test]
    fn a_lock_of_the_users_keeps_what_it_says_and_a_broken_one_is_left_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(".opencode");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(".gitignore"), "mine\n").unwrap();
        std::fs::write(dir.join("package.json"), r#"{"dependencies":{"left-pad":"1"}}"#).unwrap();
        let lock = json!({"lockfileVersion": 3, "packages": {"": {"dependencies": {"left-pad": "1"}},
            "node_modules/left-pad": {"version": "1.0.0"}}});
        std::fs::write(dir.join("package-lock.json"), lock.to_string()).unwrap();
        assert!(record_plugin_package(tmp.path()).unwrap());
        assert!(!opencode_would_install(&dir));
        let after: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("package-lock.json")).unwrap()).unwrap();
        assert_eq!(after["packages"][""]["dependencies"], json!({"left-pad": "1", PLUGIN_PACKAGE: "*"}));
        assert_eq!(after["packages"]["node_modules/left-pad"], lock["packages"]["node_modules/left-pad"]);
        assert_eq!(std::fs::read_to_string(dir.join(".gitignore")).unwrap(), "mine\n", "the user's stays");

        std::fs::write(dir.join("package-lock.json"), "{ not json").unwrap();
        assert!(!record_plugin_package(tmp.path()).unwrap());
        assert_eq!(std::fs::read_to_string(dir.join("package-lock.json")).unwrap(), "{ not json");
    }

    #[test]
    fn a_project_without_an_opencode_folder_gets_none() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(!record_plugin_package(tmp.path()).unwrap());
        assert!(!tmp.path().join(".opencode").exists());
    }
}
