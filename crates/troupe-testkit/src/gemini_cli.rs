//! Running the real Gemini CLI offline against a [`GeminiStub`](crate::gemini::GeminiStub),
//! in a scratch `HOME` whose `.gemini/settings.json` selects API-key auth and
//! turns off updates and telemetry.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};
use tempfile::TempDir;

use crate::peers;

/// A scratch Gemini CLI installation pointed at a stub.
pub struct GeminiCli {
    home: TempDir,
    base_url: String,
}

/// The model the stub-driven runs use (`-m` avoids a routing call).
pub const MODEL: &str = "gemini-2.5-pro";

impl GeminiCli {
    /// A fresh scratch `HOME` with the settings PEERS.md names.
    pub fn new(base_url: &str) -> Self {
        let home = tempfile::Builder::new().prefix("troupe-gemini-home-").tempdir().expect("scratch HOME for gemini");
        let cli = GeminiCli { home, base_url: base_url.to_string() };
        cli.write_settings(json!({}));
        cli
    }

    /// Rewrites `.gemini/settings.json` with `extra` merged over the base
    /// settings (for example `{"hooks": {...}}`).
    pub fn write_settings(&self, extra: Value) {
        let mut settings = json!({
            "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
            "privacy": {"usageStatisticsEnabled": false},
            "telemetry": {"enabled": false},
            "security": {"auth": {"selectedType": "gemini-api-key"}},
        });
        if let (Some(base), Value::Object(extra)) = (settings.as_object_mut(), extra) {
            base.extend(extra);
        }
        let dir = self.home.path().join(".gemini");
        std::fs::create_dir_all(&dir).expect("create .gemini");
        std::fs::write(dir.join("settings.json"), settings.to_string()).expect("write gemini settings");
    }

    /// The scratch `HOME`.
    pub fn home(&self) -> &Path {
        self.home.path()
    }

    /// The `gemini` binary.
    pub fn bin() -> PathBuf {
        peers::bin("gemini")
    }

    /// The environment a run needs.
    ///
    /// `GEMINI_CLI_NO_RELAUNCH`: on a machine with more memory than Node's
    /// default heap limit (any CI or developer machine), Gemini CLI starts a
    /// second Node process with `--max-old-space-size` set to half the RAM,
    /// which loads its whole bundle again: about 1 s of CPU of each Gemini
    /// process (`gemini --version` 2.9 s against 1.9 s at load 15), for
    /// heap a stub's short sessions never use. troupe's wiring leaves it on
    /// for users, whose long sessions may need that heap.
    pub fn env(&self) -> Vec<(OsString, OsString)> {
        vec![
            ("HOME".into(), self.home.path().into()),
            ("GOOGLE_GEMINI_BASE_URL".into(), self.base_url.clone().into()),
            ("GEMINI_API_KEY".into(), "stub-key".into()),
            ("GEMINI_CLI_NO_RELAUNCH".into(), "true".into()),
        ]
    }

    /// Inherited variables that would point the CLI elsewhere.
    pub fn inherited_to_remove() -> Vec<OsString> {
        std::env::vars_os()
            .map(|(k, _)| k)
            .filter(|k| {
                let k = k.to_string_lossy();
                k.starts_with("GEMINI_") || k.starts_with("GOOGLE_") || k.starts_with("XDG_CONFIG")
            })
            .collect()
    }

    /// Applies [`GeminiCli::env`] after removing interfering variables.
    pub fn apply_env(&self, cmd: &mut Command) {
        for k in Self::inherited_to_remove() {
            cmd.env_remove(k);
        }
        cmd.envs(self.env());
    }

    /// `gemini -m gemini-2.5-pro -p <prompt> --output-format stream-json --yolo --skip-trust` in `cwd`.
    pub fn command(&self, prompt: &str, cwd: impl AsRef<Path>) -> Command {
        let mut cmd = Command::new(Self::bin());
        cmd.current_dir(cwd)
            .args(["-m", MODEL, "-p", prompt, "--output-format", "stream-json", "--yolo", "--skip-trust"])
            .stdin(std::process::Stdio::null());
        self.apply_env(&mut cmd);
        cmd
    }
}
