//! Running the real OpenCode CLI offline against a [`ChatStub`](crate::chat::ChatStub),
//! with `HOME` and every XDG directory in a scratch dir and a config file
//! defining a `fake` OpenAI-compatible provider.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;
use tempfile::TempDir;

use crate::peers;

/// The version of `@opencode-ai/plugin` OpenCode 1.18.x asks for (it compares
/// the names only).
const PLUGIN_PACKAGE_VERSION: &str = "1.18.33";

/// Writes into OpenCode config folder `dir` (created if missing) what tells
/// OpenCode its dependency `@opencode-ai/plugin` is installed: `package.json`
/// and a `package-lock.json` naming it at its root, beside a `node_modules`
/// folder.
///
/// Why: OpenCode installs `@opencode-ai/plugin` into each of its config
/// folders (`$XDG_CONFIG_HOME/opencode`, a project's `.opencode`) that lacks
/// `node_modules` or whose lock file does not name it — an npm install (its
/// bundled arborist) that fetches from the registry and unpacks 64 MB — and,
/// when any plugin is configured (troupe's bridge plugin always is), waits
/// for those installs before it loads plugins and starts the session. In a
/// fresh scratch folder that cost every process of a test, several at once:
/// one `opencode run` that lived 76 s spent 24 s of CPU against 8 s for one
/// that skipped it, and a process that exits first leaves the install
/// unfinished for the next to begin again. The package only serves
/// TypeScript plugins that import it; troupe's bridge plugin imports node
/// built-ins only. Call it for a project's `.opencode` folder too (`troupe
/// init --opencode` makes one).
pub fn satisfy_plugin_dependency(dir: &Path) {
    let deps = json!({"@opencode-ai/plugin": PLUGIN_PACKAGE_VERSION});
    let lock = json!({"lockfileVersion": 3, "packages": {"": {"dependencies": deps}}});
    std::fs::create_dir_all(dir.join("node_modules")).expect("create an opencode node_modules");
    std::fs::write(dir.join("package.json"), json!({"dependencies": deps}).to_string()).expect("write package.json");
    std::fs::write(dir.join("package-lock.json"), lock.to_string()).expect("write package-lock.json");
}

/// A scratch OpenCode installation pointed at a stub.
pub struct OpenCode {
    root: TempDir,
}

impl OpenCode {
    /// A fresh scratch root for the stub whose base URL (with `/v1`) is `base_url`.
    ///
    /// # Panics
    /// When `rg` is not on `PATH`: OpenCode's `skill`, `grep` and `glob` tools
    /// run ripgrep, and without one it downloads it from GitHub, which an
    /// offline test cannot ("ripgrep execution failed" in the middle of a
    /// run). Debian's `ripgrep` package provides it (`.ci/run` installs it).
    pub fn new(base_url: &str) -> Self {
        let on_path =
            std::env::var_os("PATH").is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join("rg").is_file()));
        assert!(
            on_path,
            "OpenCode needs ripgrep (`rg`) on PATH for its skill, grep and glob tools and would download it: \
             install Debian's `ripgrep` package (.ci/run does)"
        );
        let root = tempfile::Builder::new().prefix("troupe-opencode-home-").tempdir().expect("scratch opencode root");
        for d in ["home", "config", "data", "cache", "state"] {
            std::fs::create_dir_all(root.path().join(d)).expect("create opencode scratch dirs");
        }
        let config = json!({
            "$schema": "https://opencode.ai/config.json",
            "autoupdate": false,
            "share": "disabled",
            "model": "fake/fake-model",
            "small_model": "fake/fake-model",
            "provider": {"fake": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Fake",
                "options": {"baseURL": base_url, "apiKey": "x"},
                "models": {"fake-model": {"name": "Fake", "tool_call": true, "limit": {"context": 100000, "output": 8000}}},
            }},
            "permission": {"edit": "allow", "bash": "allow", "webfetch": "allow", "external_directory": "allow"},
        });
        std::fs::write(root.path().join("opencode.json"), config.to_string()).expect("write opencode config");
        satisfy_plugin_dependency(&root.path().join("config/opencode"));
        OpenCode { root }
    }

    /// The scratch root (HOME is `<root>/home`).
    pub fn root(&self) -> &Path {
        self.root.path()
    }

    /// The `opencode` binary.
    pub fn bin() -> PathBuf {
        peers::bin("opencode")
    }

    /// The environment a run needs.
    pub fn env(&self) -> Vec<(OsString, OsString)> {
        let r = self.root.path();
        vec![
            ("HOME".into(), r.join("home").into()),
            ("XDG_CONFIG_HOME".into(), r.join("config").into()),
            ("XDG_DATA_HOME".into(), r.join("data").into()),
            ("XDG_CACHE_HOME".into(), r.join("cache").into()),
            ("XDG_STATE_HOME".into(), r.join("state").into()),
            ("OPENCODE_CONFIG".into(), r.join("opencode.json").into()),
            ("OPENCODE_DISABLE_AUTOUPDATE".into(), "1".into()),
            ("OPENCODE_DISABLE_MODELS_FETCH".into(), "1".into()),
            ("OPENCODE_DISABLE_SHARE".into(), "1".into()),
        ]
    }

    /// Inherited variables that would point the CLI elsewhere.
    pub fn inherited_to_remove() -> Vec<OsString> {
        std::env::vars_os().map(|(k, _)| k).filter(|k| k.to_string_lossy().starts_with("OPENCODE")).collect()
    }

    /// Applies [`OpenCode::env`] after removing interfering variables.
    pub fn apply_env(&self, cmd: &mut Command) {
        for k in Self::inherited_to_remove() {
            cmd.env_remove(k);
        }
        cmd.envs(self.env());
    }

    /// `opencode run --format json --dir <cwd> <prompt>` in `cwd`, stdin closed.
    /// (`--dir` because OpenCode does not take its project directory from the
    /// process's working directory alone.)
    pub fn command(&self, prompt: &str, cwd: impl AsRef<Path>) -> Command {
        let cwd = cwd.as_ref();
        let mut cmd = Command::new(Self::bin());
        cmd.current_dir(cwd)
            .args(["run", "--format", "json", "--dir"])
            .arg(cwd)
            .arg(prompt)
            .env("PWD", cwd)
            .stdin(std::process::Stdio::null());
        self.apply_env(&mut cmd);
        cmd
    }
}
