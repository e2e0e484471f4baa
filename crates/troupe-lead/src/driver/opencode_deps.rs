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
//! The run puts the folder back as it found it at its end ([`Recorded::restore`],
//! once every teammate has stopped): a user's tree is left as found, with no
//! lock file changed under their `.gitignore` or in their commits (`git
//! status` clean after a run). A run killed before its end leaves the record,
//! which changes nothing OpenCode reads but the install it skips.
//!
//! Nothing is downloaded: troupe's bridge plugin imports node built-ins only.
//! A plugin of the project's own that imports `@opencode-ai/plugin` at run
//! time (its types alone need nothing) needs the package installed there
//! (`npm install @opencode-ai/plugin` in `.opencode`), which a sandboxed
//! teammate could never have done.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

/// The package OpenCode installs into each of its config folders.
pub const PLUGIN_PACKAGE: &str = "@opencode-ai/plugin";

/// The `.gitignore` OpenCode writes into a config folder it installs into.
const GITIGNORE: &str = "node_modules\npackage.json\npackage-lock.json\nbun.lock\n.gitignore";

/// What [`record_plugin_package`] changed in one `.opencode` folder, so that
/// the run can put it back at its end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    dir: PathBuf,
    /// `node_modules/` was made by the record.
    made_modules: bool,
    /// The lock file's text before the record (`None`: there was none), when
    /// the record wrote it.
    lock_before: Option<Option<String>>,
    /// The `.gitignore` was written by the record.
    made_ignore: bool,
}

impl Recorded {
    /// Puts the folder back as the record found it. Anything gone already
    /// (a worktree removed with its group) is fine; `node_modules/` goes only
    /// while empty (something else put files there since: it stays).
    pub fn restore(&self) -> Result<(), String> {
        let gone = |r: std::io::Result<()>, what: &Path| match r {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(format!("cannot restore {}: {e}", what.display()))
            }
            _ => Ok(()),
        };
        let lock = self.dir.join("package-lock.json");
        match &self.lock_before {
            Some(Some(text)) => gone(std::fs::write(&lock, text), &lock)?,
            Some(None) => gone(std::fs::remove_file(&lock), &lock)?,
            _ => {}
        }
        if self.made_ignore {
            let ignore = self.dir.join(".gitignore");
            gone(std::fs::remove_file(&ignore), &ignore)?;
        }
        if self.made_modules {
            // `remove_dir` refuses a folder that is not empty: what is in it is not ours.
            let _ = std::fs::remove_dir(self.dir.join("node_modules"));
        }
        Ok(())
    }
}

/// Records [`PLUGIN_PACKAGE`] as installed in the `.opencode` folder of
/// `workdir` (where the teammate starts: the project root or its worktree),
/// so that OpenCode does not try to install it. Nothing happens when there is
/// no such folder, when it already says so, or when its lock file is not
/// JSON (that is the user's to repair; OpenCode would install over it).
/// Returns what it wrote, to [`Recorded::restore`] at the run's end.
pub fn record_plugin_package(workdir: &Path) -> Result<Option<Recorded>, String> {
    let dir = workdir.join(".opencode");
    if !dir.is_dir() {
        return Ok(None);
    }
    let lock_path = dir.join("package-lock.json");
    let (mut lock, before) = match std::fs::read_to_string(&lock_path) {
        Ok(text) => match serde_json::from_str::<Value>(&text) {
            Ok(v) if v.is_object() => (v, Some(text)),
            _ => return Ok(None),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (json!({"lockfileVersion": 3}), None),
        Err(e) => return Err(format!("cannot read {}: {e}", lock_path.display())),
    };
    let modules = dir.join("node_modules");
    let named = lock.pointer(&format!("/packages//dependencies/{}", PLUGIN_PACKAGE.replace('/', "~1"))).is_some();
    if named && modules.is_dir() {
        return Ok(None);
    }
    let mut recorded =
        Recorded { dir: dir.clone(), made_modules: !modules.is_dir(), lock_before: None, made_ignore: false };
    std::fs::create_dir_all(&modules).map_err(|e| format!("cannot create {}: {e}", modules.display()))?;
    if !named {
        let root = object_at(object_at(&mut lock, "packages"), "");
        object_at(root, "dependencies")[PLUGIN_PACKAGE] = json!("*");
        let text = serde_json::to_string_pretty(&lock).expect("JSON serializes");
        std::fs::write(&lock_path, text + "\n").map_err(|e| format!("cannot write {}: {e}", lock_path.display()))?;
        recorded.lock_before = Some(before);
    }
    let ignore = dir.join(".gitignore");
    if !ignore.exists() {
        std::fs::write(&ignore, GITIGNORE).map_err(|e| format!("cannot write {}: {e}", ignore.display()))?;
        recorded.made_ignore = true;
    }
    Ok(Some(recorded))
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

    /// Every file under `dir` with its text (folders end in `/`), in order.
    fn tree(dir: &Path) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let name = e.path().strip_prefix(dir).unwrap().display().to_string();
                if e.path().is_dir() {
                    out.push((format!("{name}/"), String::new()));
                    stack.push(e.path());
                } else {
                    out.push((name, std::fs::read_to_string(e.path()).unwrap()));
                }
            }
        }
        out.sort();
        out
    }

    #[test]
    fn a_project_opencode_folder_is_left_needing_no_install_once_and_restored_at_the_end() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(".opencode");
        std::fs::create_dir_all(dir.join("plugin")).unwrap();
        let found = tree(&dir);
        assert!(opencode_would_install(&dir));
        let recorded = record_plugin_package(tmp.path()).unwrap().expect("recorded");
        assert!(!opencode_would_install(&dir));
        assert_eq!(std::fs::read_to_string(dir.join(".gitignore")).unwrap(), GITIGNORE);
        // Once recorded, the next teammate's start changes nothing.
        assert_eq!(record_plugin_package(tmp.path()).unwrap(), None);
        recorded.restore().unwrap();
        assert_eq!(tree(&dir), found, "the folder as the run found it");
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
        let found = tree(&dir);
        let recorded = record_plugin_package(tmp.path()).unwrap().expect("recorded");
        assert!(!opencode_would_install(&dir));
        let after: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("package-lock.json")).unwrap()).unwrap();
        assert_eq!(after["packages"][""]["dependencies"], json!({"left-pad": "1", PLUGIN_PACKAGE: "*"}));
        assert_eq!(after["packages"]["node_modules/left-pad"], lock["packages"]["node_modules/left-pad"]);
        assert_eq!(std::fs::read_to_string(dir.join(".gitignore")).unwrap(), "mine\n", "the user's stays");
        recorded.restore().unwrap();
        assert_eq!(tree(&dir), found, "their lock byte for byte, no node_modules");

        std::fs::write(dir.join("package-lock.json"), "{ not json").unwrap();
        assert_eq!(record_plugin_package(tmp.path()).unwrap(), None);
        assert_eq!(std::fs::read_to_string(dir.join("package-lock.json")).unwrap(), "{ not json");
    }

    /// A `node_modules/` something else filled during the run stays; a folder
    /// gone by the end (a removed worktree) is no error.
    #[test]
    fn a_restore_leaves_what_is_not_its_own() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(".opencode");
        std::fs::create_dir_all(&dir).unwrap();
        let recorded = record_plugin_package(tmp.path()).unwrap().expect("recorded");
        std::fs::write(dir.join("node_modules/installed"), "x").unwrap();
        recorded.restore().unwrap();
        assert_eq!(
            tree(&dir),
            [("node_modules/".into(), String::new()), ("node_modules/installed".into(), "x".into())]
        );
        std::fs::remove_dir_all(&dir).unwrap();
        recorded.restore().unwrap();
    }

    #[test]
    fn a_project_without_an_opencode_folder_gets_none() {
        let tmp = tempfile::tempdir().unwrap();
        assert_eq!(record_plugin_package(tmp.path()).unwrap(), None);
        assert!(!tmp.path().join(".opencode").exists());
    }
}
