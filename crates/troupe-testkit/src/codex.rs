//! Running the real Codex CLI offline against a [`ResponsesStub`](crate::responses::ResponsesStub),
//! with a scratch `CODEX_HOME` whose `config.toml` defines a `fake` provider
//! and turns off updates, analytics, plugins and remote lookups.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use tempfile::TempDir;

use crate::peers;

/// A scratch Codex installation pointed at a stub.
pub struct Codex {
    home: TempDir,
}

/// The model slug the runs use (one Codex knows).
pub const MODEL: &str = "gpt-5.5";

impl Codex {
    /// A fresh scratch `CODEX_HOME` (also used as `HOME`) for the stub whose
    /// base URL (with `/v1`) is `base_url`.
    pub fn new(base_url: &str) -> Self {
        let home = tempfile::Builder::new().prefix("troupe-codex-home-").tempdir().expect("scratch CODEX_HOME");
        let config = format!(
            r#"model = "{MODEL}"
model_provider = "fake"
check_for_update_on_startup = false

[model_providers.fake]
name = "Fake"
base_url = "{base_url}"
wire_api = "responses"
env_key = "FAKE_API_KEY"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false

[feedback]
enabled = false

[features]
plugins = false
apps = false
remote_plugin = false
"#
        );
        std::fs::write(home.path().join("config.toml"), config).expect("write codex config.toml");
        Codex { home }
    }

    /// The scratch `CODEX_HOME`.
    pub fn home(&self) -> &Path {
        self.home.path()
    }

    /// Appends TOML to `config.toml` (for example a `stream_max_retries` override).
    pub fn append_config(&self, toml: &str) {
        let path = self.home.path().join("config.toml");
        let mut text = std::fs::read_to_string(&path).expect("read codex config.toml");
        text.push_str(toml);
        std::fs::write(path, text).expect("write codex config.toml");
    }

    /// The `codex` binary: the native executable of the npm package's
    /// platform dependency, which the package's `codex` launcher (a Node
    /// script) finds and `execve`s with the variables of
    /// `Codex::launcher_env`.
    ///
    /// Why not the launcher: Node's start is about 0.1 s of CPU per Codex
    /// process and does nothing else (the launcher replaces itself with
    /// this binary), and the suite starts Codex dozens of times (26 for the
    /// full obedient run alone) on CI's two cores.
    pub fn bin() -> PathBuf {
        let native = Self::package().and_then(|p| {
            let native = p.parent()?.join("codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex");
            native.is_file().then_some(native)
        });
        // Another platform, or a package layout that moved: the launcher finds it.
        native.unwrap_or_else(|| peers::bin("codex"))
    }

    /// The `@openai/codex` package folder (the launcher is its `bin/codex.js`).
    fn package() -> Option<PathBuf> {
        let launcher = peers::bin("codex").canonicalize().ok()?;
        Some(launcher.parent()?.parent()?.to_path_buf())
    }

    /// What the npm launcher adds to Codex's environment before it starts the
    /// native binary: which package manager installed it and where.
    fn launcher_env() -> Vec<(OsString, OsString)> {
        Self::package().map_or_else(Vec::new, |package| {
            vec![("CODEX_MANAGED_PACKAGE_ROOT".into(), package.into()), ("CODEX_MANAGED_BY_NPM".into(), "1".into())]
        })
    }

    /// The environment a run needs.
    pub fn env(&self) -> Vec<(OsString, OsString)> {
        let mut env: Vec<(OsString, OsString)> = vec![
            ("CODEX_HOME".into(), self.home.path().into()),
            ("HOME".into(), self.home.path().into()),
            ("FAKE_API_KEY".into(), "stub-key".into()),
        ];
        env.extend(Self::launcher_env());
        env
    }

    /// Inherited variables that would point the CLI elsewhere.
    pub fn inherited_to_remove() -> Vec<OsString> {
        std::env::vars_os()
            .map(|(k, _)| k)
            .filter(|k| {
                let k = k.to_string_lossy();
                k.starts_with("OPENAI_") || k.starts_with("CODEX_")
            })
            .collect()
    }

    /// Applies [`Codex::env`] after removing interfering variables.
    pub fn apply_env(&self, cmd: &mut Command) {
        for k in Self::inherited_to_remove() {
            cmd.env_remove(k);
        }
        cmd.envs(self.env());
    }

    /// `codex exec --json --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox <prompt>`
    /// in `cwd`, stdin closed.
    pub fn command(&self, prompt: &str, cwd: impl AsRef<Path>) -> Command {
        let mut cmd = Command::new(Self::bin());
        cmd.current_dir(cwd)
            .args(["exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", prompt])
            .stdin(std::process::Stdio::null());
        self.apply_env(&mut cmd);
        cmd
    }
}

/// An `apply_patch` body that adds `path` with `content` (each line prefixed with `+`).
pub fn add_file_patch(path: &str, content: &str) -> String {
    let mut patch = format!("*** Begin Patch\n*** Add File: {path}\n");
    for line in content.lines() {
        patch.push('+');
        patch.push_str(line);
        patch.push('\n');
    }
    patch.push_str("*** End Patch\n");
    patch
}
