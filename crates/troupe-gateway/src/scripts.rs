//! Skill scripts (seed 004's workflow mode): `get_skill` reads one of the
//! role's skills with the scripts it ships, `run_script` runs one of them.
//! A script is a file directly in `.troupe/skills/<id>/scripts/` of a skill
//! the role may use; it runs with the arguments given (no shell), in the
//! project root, under a timeout, its output captured. Every run is appended
//! to the store's event log (`script_run`), which `troupe workflow` reads to
//! save the failure context.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use rmcp::model::JsonObject;
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;
use troupe_core::layout::Layout;
use troupe_store::NewEvent;

use crate::gateway::Gateway;
use crate::session::Session;
use crate::tools::ToolOutcome;

/// The event kind of a script run (actor: the agent; data: skill, script,
/// args, exitCode, stdout, stderr, timedOut).
pub const SCRIPT_EVENT: &str = "script_run";

/// The timeout of a run that names none, and the most one may ask for.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
const MAX_TIMEOUT: Duration = Duration::from_secs(600);
/// Output kept of each stream (the rest is cut, and the cut said).
const OUTPUT_BYTES: usize = 64 * 1024;

fn skills_dir(gateway: &Gateway) -> Result<PathBuf, String> {
    let root = gateway.root.as_ref().ok_or("no project: run `troupe mcp serve` inside a troupe project")?;
    Ok(Layout::new(root).skills_dir())
}

/// The skill `id` if the role may use it.
fn role_skill<'a>(gateway: &'a Gateway, role: &str, id: &str) -> Result<&'a troupe_core::rbac::skill::Skill, String> {
    gateway
        .policy
        .skills_for_role(role)
        .into_iter()
        .find(|s| s.id == id)
        .ok_or_else(|| format!("skill `{id}` is not one of role {role}'s skills (list_skills shows them)"))
}

/// The scripts a skill ships: the plain files of its `scripts/` folder, sorted.
pub fn scripts_of(skills_dir: &Path, id: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(skills_dir.join(id).join("scripts")) else { return Vec::new() };
    let mut names: Vec<String> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| !n.starts_with('.'))
        .collect();
    names.sort();
    names
}

/// `get_skill`: one of the role's skills, its instructions and its scripts.
pub fn get_skill(gateway: &Gateway, role: &str, args: &JsonObject) -> ToolOutcome {
    let id = args.get("skill").and_then(Value::as_str).ok_or("missing string argument `skill`")?;
    let skill = role_skill(gateway, role, id)?;
    Ok(json!({
        "id": skill.id,
        "displayName": skill.display_name,
        "description": skill.description,
        "instructions": skill.body,
        "allowedTools": skill.allowed_tools,
        "scripts": scripts_of(&skills_dir(gateway)?, id),
    }))
}

/// The script `name` of skill `id`: a plain name of a file in its scripts
/// folder, checked again after symlinks are resolved.
fn script_path(skills_dir: &Path, id: &str, name: &str) -> Result<PathBuf, String> {
    let plain = !name.is_empty()
        && !name.starts_with('.')
        && !name.contains(['/', '\\', '\0'])
        && Path::new(name).components().count() == 1;
    if !plain {
        return Err(format!(
            "script `{name}` is not a file name: name one of the skill's scripts (get_skill lists them)"
        ));
    }
    let folder = skills_dir.join(id).join("scripts");
    let folder = folder.canonicalize().map_err(|_| format!("skill `{id}` has no scripts folder"))?;
    let path = folder.join(name).canonicalize().map_err(|_| format!("skill `{id}` has no script `{name}`"))?;
    if path.parent() != Some(folder.as_path()) || !path.is_file() {
        return Err(format!("script `{name}` of skill `{id}` is not a file in its scripts folder"));
    }
    Ok(path)
}

fn clip(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(OUTPUT_BYTES)]).into_owned();
    if bytes.len() > OUTPUT_BYTES {
        format!("{text}\n[… {} more bytes cut]", bytes.len() - OUTPUT_BYTES)
    } else {
        text
    }
}

/// `run_script`: run a script of one of the role's skills.
pub async fn run_script(gateway: &Gateway, session: &Session, role: &str, args: &JsonObject) -> ToolOutcome {
    let id = args.get("skill").and_then(Value::as_str).ok_or("missing string argument `skill`")?;
    let name = args.get("script").and_then(Value::as_str).ok_or("missing string argument `script`")?;
    let argv: Vec<String> = match args.get("args") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(str::to_string).ok_or("`args` must be a list of strings"))
            .collect::<Result<_, _>>()?,
        Some(_) => return Err("`args` must be a list of strings".into()),
    };
    let timeout = match args.get("timeout_seconds").and_then(Value::as_f64) {
        Some(s) if s > 0.0 => Duration::from_secs_f64(s).min(MAX_TIMEOUT),
        _ => DEFAULT_TIMEOUT,
    };
    role_skill(gateway, role, id)?;
    let path = script_path(&skills_dir(gateway)?, id, name)?;
    let root = gateway.root.clone().unwrap_or_default();
    let mut child = tokio::process::Command::new(&path)
        .args(&argv)
        .current_dir(&root)
        .env("TROUPE_SKILL", id)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group, so a timeout stops everything it started.
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot run script `{name}` of skill `{id}`: {e} (is it executable?)"))?;
    let (mut out, mut err) = (child.stdout.take().expect("piped"), child.stderr.take().expect("piped"));
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    let run = async {
        let (a, b, status) = tokio::join!(out.read_to_end(&mut stdout), err.read_to_end(&mut stderr), child.wait());
        let _ = (a, b);
        status
    };
    let (exit_code, timed_out) = match tokio::time::timeout(timeout, run).await {
        Ok(Ok(status)) => (status.code().unwrap_or(-1), false),
        Ok(Err(e)) => return Err(format!("script `{name}` of skill `{id}` could not be waited for: {e}")),
        Err(_) => {
            if let Some(pid) = child.id() {
                let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::SIGKILL);
            }
            let _ = child.wait().await;
            (-1, true)
        }
    };
    let script_path = path.strip_prefix(&root).unwrap_or(&path).display().to_string();
    let result = json!({
        "skill": id,
        "script": name,
        "scriptPath": script_path,
        "args": argv,
        "exitCode": exit_code,
        "timedOut": timed_out,
        "stdout": clip(&stdout),
        "stderr": clip(&stderr),
    });
    if let Some(store) = &gateway.store {
        let event = NewEvent {
            kind: SCRIPT_EVENT.to_string(),
            actor: Some(session.identity.as_str().to_string()),
            subject: Some(id.to_string()),
            data: result.clone(),
        };
        store.append_event(event).map_err(|e| format!("the run was not recorded: {e}"))?;
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_names_stay_in_the_scripts_folder() {
        let dir = tempfile::tempdir().unwrap();
        let scripts = dir.path().join("deploy/scripts");
        std::fs::create_dir_all(&scripts).unwrap();
        std::fs::write(scripts.join("run.sh"), "#!/bin/sh\n").unwrap();
        std::fs::write(dir.path().join("deploy/SKILL.md"), "x").unwrap();
        std::os::unix::fs::symlink(dir.path().join("deploy/SKILL.md"), scripts.join("link")).unwrap();
        assert!(script_path(dir.path(), "deploy", "run.sh").is_ok());
        for bad in ["../SKILL.md", "/bin/sh", "", ".hidden", "sub/x", "link", "missing"] {
            assert!(script_path(dir.path(), "deploy", bad).is_err(), "{bad}");
        }
        assert_eq!(scripts_of(dir.path(), "deploy"), ["run.sh"]);
    }
}
