//! What `troupe mcp start` leaves for `troupe mcp stop` (and for clients):
//! `.troupe/state/mcp/gateway.json` (pid, URL, role, agent, token file)
//! while the gateway runs, and the bearer token in `token` (mode 0600).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use troupe_project::Project;

use crate::error::{CliError, CliResult};

/// A running long-lived gateway, as its pid file records it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Running {
    pub pid: i32,
    pub url: String,
    pub role: String,
    pub agent: String,
    pub token_file: PathBuf,
}

/// The folder of the long-lived gateway's files.
pub(super) fn dir(project: &Project) -> PathBuf {
    project.layout().state_dir().join("mcp")
}

/// The pid file.
pub(super) fn pid_file(project: &Project) -> PathBuf {
    dir(project).join("gateway.json")
}

/// The pid file's gateway, when there is one; a process that is gone (or is
/// no troupe gateway any more) is reported as `Err(stale)`.
pub(super) fn read(project: &Project) -> CliResult<Option<Result<Running, Running>>> {
    let path = pid_file(project);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(CliError::user(format!("cannot read {}", path.display())).with_source(&e)),
    };
    let running: Running = serde_json::from_str(&text).map_err(|e| {
        CliError::user(format!("{} is not a gateway pid file", path.display()))
            .with_source(&e)
            .with_hint(format!("remove it if no gateway runs: rm {}", path.display()))
    })?;
    Ok(Some(if alive(running.pid) { Ok(running) } else { Err(running) }))
}

/// Whether `pid` is a live troupe gateway (its command line names `mcp start`,
/// so a reused pid is not mistaken for it).
pub(super) fn alive(pid: i32) -> bool {
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else { return false };
    let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // A zombie has finished: it only waits to be reaped.
    let zombie = stat.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z'));
    !zombie && args.windows(2).any(|w| w[0] == b"mcp" && w[1] == b"start")
}

/// Write `path` readable by its owner only, whole or not at all: a reader
/// never sees it half written (`mcp start --background` polls the pid file
/// while the gateway writes it, and read an empty one under load).
pub(super) fn write_private(path: &Path, text: &str) -> CliResult<()> {
    troupe_project::fsutil::write_atomic_private(path, text.as_bytes())
        .map_err(|e| CliError::user(format!("cannot write {}", path.display())).with_source(&e))
}

/// Remove the pid and token files of `running`.
pub(super) fn forget(project: &Project, running: &Running) {
    let _ = std::fs::remove_file(pid_file(project));
    let _ = std::fs::remove_file(&running.token_file);
}
