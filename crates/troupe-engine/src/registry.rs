//! The engine registry (seed 002 `LLMEngineRegistry`): the four built-in
//! agent CLIs, troupe's own `scripted` engine, and custom ones from
//! `[engines.custom]`, executables overridable with `[engines.commands]`.
//! An unknown id in config or spec.yaml falls back to `claude` with a warning
//! ([`Registry::get`]); one asked for on the command line is an error with a
//! did-you-mean ([`Registry::requested`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use troupe_core::config::{EnginesConfig, PromptPassing};
use troupe_core::role::Tier;

use crate::parse::StreamFormat;

/// The default engine (seed 002 `DEFAULT_LLM_ENGINE`).
pub const DEFAULT_ENGINE: &str = "claude";

/// The built-in engine ids (the scripted engine is troupe itself).
pub const BUILTIN: [&str; 5] = ["claude", "gemini", "codex", "opencode", "scripted"];

/// How an engine's command line is built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngineKind {
    /// Claude Code.
    Claude,
    /// Gemini CLI.
    Gemini,
    /// Codex CLI.
    Codex,
    /// OpenCode.
    OpenCode,
    /// troupe's scripted teammate (`troupe scripted-agent`), for tests and demos.
    Scripted,
    /// A user-defined command.
    Custom {
        /// Fixed arguments before the prompt.
        args: Vec<String>,
        /// How the prompt is passed.
        prompt: PromptPassing,
    },
}

/// One engine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Engine {
    /// Identifier used in config and spec.yaml.
    pub id: String,
    /// Display name.
    pub label: String,
    /// The executable (a name looked up on PATH, or a path).
    pub command: String,
    /// Its output stream format.
    #[serde(serialize_with = "ser_format")]
    pub format: StreamFormat,
    /// How arguments are built.
    #[serde(skip)]
    pub kind: EngineKind,
}

fn ser_format<S: serde::Serializer>(f: &StreamFormat, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(f.name())
}

impl Engine {
    fn builtin(id: &str) -> Engine {
        let (label, kind, format) = match id {
            "gemini" => ("Gemini CLI", EngineKind::Gemini, StreamFormat::Gemini),
            "codex" => ("Codex", EngineKind::Codex, StreamFormat::Codex),
            "opencode" => ("OpenCode", EngineKind::OpenCode, StreamFormat::OpenCode),
            "scripted" => ("troupe scripted", EngineKind::Scripted, StreamFormat::Troupe),
            _ => ("Claude Code", EngineKind::Claude, StreamFormat::Claude),
        };
        let command = match kind {
            // The running troupe binary plays the scripted teammate.
            EngineKind::Scripted => std::env::current_exe()
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_else(|_| "troupe".to_string()),
            _ => id.to_string(),
        };
        Engine { id: id.to_string(), label: label.to_string(), command, format, kind }
    }

    /// Whether it is one of the built-in engines.
    pub fn is_builtin(&self) -> bool {
        !matches!(self.kind, EngineKind::Custom { .. })
    }

    /// The model for a role tier: `[engines.models.<id>].t2/t3` when set, else
    /// the engine's default (`None`: let the engine use its own configuration).
    pub fn model_for(&self, tier: Tier, config: &EnginesConfig) -> Option<String> {
        let configured = config.models.get(&self.id).and_then(|m| match tier {
            Tier::T2 => m.t2.clone(),
            Tier::T1 | Tier::T3 => m.t3.clone(),
        });
        configured.or_else(|| default_model(&self.kind, tier).map(str::to_string))
    }

    /// The executable's path when it can be found (a path that exists, or a
    /// name on `PATH`).
    pub fn locate(&self) -> Option<PathBuf> {
        locate(&self.command, std::env::var_os("PATH").as_deref())
    }

    /// The executable, or why it cannot run: checked before anything is
    /// spawned, so that a missing CLI is one clear error and never a retry.
    pub fn installed(&self) -> Result<PathBuf, NotInstalled> {
        self.locate().ok_or_else(|| NotInstalled { engine: self.id.clone(), command: self.command.clone() })
    }
}

/// How long [`version_of`] waits: Node-based CLIs take seconds to start on a
/// loaded machine, and a version is only ever shown, never needed.
const VERSION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The first non-empty line `<path> --version` prints, or `None` when it
/// cannot be run or takes longer than 30 s (the process is then killed).
/// The one version probe of `troupe doctor` and `troupe engines`.
pub fn version_of(path: &Path) -> Option<String> {
    use std::io::Read;
    use std::process::{Command, Stdio};
    let mut child = Command::new(path)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let mut stdout = child.stdout.take()?;
    let (tx, rx) = std::sync::mpsc::channel();
    // Read on a thread: a CLI that prints more than a pipe holds would
    // otherwise block before it exits.
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        let _ = tx.send(text);
    });
    let text = rx.recv_timeout(VERSION_TIMEOUT);
    if text.is_err() {
        let _ = child.kill();
    }
    let _ = child.wait();
    text.ok()?.lines().map(str::trim).find(|l| !l.is_empty()).map(str::to_string)
}

/// An engine whose executable cannot be found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotInstalled {
    /// The engine id.
    pub engine: String,
    /// The command that was looked for.
    pub command: String,
}

impl NotInstalled {
    /// How to fix it.
    pub fn hint(&self) -> String {
        format!(
            "install it, or set its path in .troupe/config.toml: [engines.commands] {} = \"/path/to/{}\"",
            self.engine,
            Path::new(&self.command).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
        )
    }
}

impl std::fmt::Display for NotInstalled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let place = if Path::new(&self.command).components().count() > 1 { "" } else { " on PATH" };
        write!(f, "engine '{}' is not installed: `{}` was not found{place}", self.engine, self.command)
    }
}

impl std::error::Error for NotInstalled {}

/// An engine id asked for on the command line that the registry does not know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownEngine {
    /// The id that was asked for.
    pub requested: String,
    /// The closest known id, when one is close.
    pub suggestion: Option<String>,
    /// Every known id.
    pub known: Vec<String>,
}

impl std::fmt::Display for UnknownEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "unknown engine '{}'", self.requested)?;
        if let Some(s) = &self.suggestion {
            write!(f, " (did you mean '{s}'?)")?;
        }
        Ok(())
    }
}

impl UnknownEngine {
    /// How to fix it.
    pub fn hint(&self) -> String {
        format!(
            "engines: {} (custom ones go in [engines.custom] of .troupe/config.toml; see `troupe engines list`)",
            self.known.join(", ")
        )
    }
}

impl std::error::Error for UnknownEngine {}

/// Default model ids per tier (seed 000: T2 = strongest, T3 = execution).
fn default_model(kind: &EngineKind, tier: Tier) -> Option<&'static str> {
    let strong = matches!(tier, Tier::T1 | Tier::T2);
    match kind {
        EngineKind::Claude => Some(if strong { "opus" } else { "sonnet" }),
        EngineKind::Gemini => Some(if strong { "gemini-2.5-pro" } else { "gemini-2.5-flash" }),
        EngineKind::Codex => Some("gpt-5.5"),
        EngineKind::OpenCode | EngineKind::Scripted | EngineKind::Custom { .. } => None,
    }
}

/// Finds `command` as a path or on `path` (a `PATH`-style list).
pub fn locate(command: &str, path: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    let p = Path::new(command);
    if p.components().count() > 1 {
        return is_executable(p).then(|| p.to_path_buf());
    }
    std::env::split_paths(path?).map(|dir| dir.join(command)).find(|c| is_executable(c))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// A lookup that fell back to the default engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fallback {
    /// The id that was asked for.
    pub requested: String,
}

impl std::fmt::Display for Fallback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "unknown engine '{}': using '{DEFAULT_ENGINE}' instead", self.requested)
    }
}

/// The engines troupe can run.
#[derive(Debug, Clone)]
pub struct Registry {
    engines: BTreeMap<String, Engine>,
}

impl Default for Registry {
    fn default() -> Self {
        Registry::builtin()
    }
}

impl Registry {
    /// The built-in engines with their default commands.
    pub fn builtin() -> Self {
        Registry { engines: BUILTIN.iter().map(|id| (id.to_string(), Engine::builtin(id))).collect() }
    }

    /// Built-ins with `[engines.commands]` applied, plus `[engines.custom]`.
    /// A custom engine may not shadow a built-in id (config validation names it).
    pub fn from_config(config: &EnginesConfig) -> Self {
        let mut r = Registry::builtin();
        for (id, command) in &config.commands {
            if let Some(e) = r.engines.get_mut(id) {
                e.command.clone_from(command);
            }
        }
        for (id, c) in &config.custom {
            if r.engines.contains_key(id) {
                continue;
            }
            let format = StreamFormat::from_name(&c.format).unwrap_or(StreamFormat::Text);
            r.engines.insert(
                id.clone(),
                Engine {
                    id: id.clone(),
                    label: id.clone(),
                    command: config.commands.get(id).cloned().unwrap_or_else(|| c.command.clone()),
                    format,
                    kind: EngineKind::Custom { args: c.args.clone(), prompt: c.prompt },
                },
            );
        }
        r
    }

    /// Adds or replaces an engine.
    pub fn register(&mut self, engine: Engine) {
        self.engines.insert(engine.id.clone(), engine);
    }

    /// The engine `id`, or `claude` when `id` is unknown (seed 002 `getLLMEngine`);
    /// the fallback is logged as a warning and returned so callers can show it.
    pub fn get(&self, id: &str) -> (&Engine, Option<Fallback>) {
        match self.engines.get(id) {
            Some(e) => (e, None),
            None => {
                let fb = Fallback { requested: id.to_string() };
                tracing::warn!("{fb}");
                (&self.engines[DEFAULT_ENGINE], Some(fb))
            }
        }
    }

    /// The engine `id` asked for on the command line (`--engine`): unknown is
    /// an error naming the closest known id.
    pub fn requested(&self, id: &str) -> Result<&Engine, UnknownEngine> {
        self.engines.get(id).ok_or_else(|| {
            let known: Vec<String> = self.list().iter().map(|e| e.id.clone()).collect();
            let suggestion = troupe_core::names::closest(id, known.iter().map(String::as_str)).map(str::to_string);
            UnknownEngine { requested: id.to_string(), suggestion, known }
        })
    }

    /// The engine `id` when it is known.
    pub fn lookup(&self, id: &str) -> Option<&Engine> {
        self.engines.get(id)
    }

    /// Every engine, built-ins first then custom, each group by id.
    pub fn list(&self) -> Vec<&Engine> {
        let mut v: Vec<&Engine> = self.engines.values().collect();
        v.sort_by_key(|e| {
            (!e.is_builtin(), BUILTIN.iter().position(|b| *b == e.id).unwrap_or(usize::MAX), e.id.clone())
        });
        v
    }
}
