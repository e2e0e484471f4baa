//! The failure context a workflow hands to adhoc mode (seed 004's
//! `WorkflowContext`): saved as `.troupe/context/<time>-<skill>.json` when a
//! skill script fails, read by `troupe adhoc --context <file>`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{CliError, CliResult};

/// What failed, in the seed's field names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WorkflowContext {
    /// The skill whose script failed.
    pub skill_id: String,
    /// The script, relative to the project root.
    pub script_path: String,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// How it failed.
    pub error: ScriptError,
    /// When it was saved (RFC 3339).
    pub timestamp: String,
    /// What the workflow agent said last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation_summary: Option<String>,
}

/// A failed run of a script.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ScriptError {
    /// One line: what happened.
    pub message: String,
    /// The exit code (-1 when it was killed or timed out).
    pub exit_code: i64,
    /// Its standard output (clipped by the gateway).
    pub stdout: String,
    /// Its standard error (clipped by the gateway).
    pub stderr: String,
}

impl WorkflowContext {
    /// The context of a failed `script_run` event's data, or `None` when the run succeeded.
    pub fn from_run(data: &serde_json::Value, summary: Option<String>, now: jiff::Timestamp) -> Option<Self> {
        let exit_code = data["exitCode"].as_i64().unwrap_or(-1);
        let timed_out = data["timedOut"].as_bool().unwrap_or(false);
        if exit_code == 0 && !timed_out {
            return None;
        }
        let text = |k: &str| data[k].as_str().unwrap_or_default().to_string();
        let script = text("script");
        let message = if timed_out {
            format!("script {script} timed out")
        } else {
            format!("script {script} exited with code {exit_code}")
        };
        Some(WorkflowContext {
            skill_id: text("skill"),
            script_path: text("scriptPath"),
            args: data["args"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|a| a.as_str().map(str::to_string))
                .collect(),
            error: ScriptError { message, exit_code, stdout: text("stdout"), stderr: text("stderr") },
            timestamp: now.to_string(),
            conversation_summary: summary.filter(|s| !s.trim().is_empty()),
        })
    }

    /// Save it under `.troupe/context/` (atomically); returns the file.
    pub fn save(&self, troupe_dir: &Path, now: jiff::Timestamp) -> CliResult<PathBuf> {
        let dir = troupe_dir.join("context");
        std::fs::create_dir_all(&dir)
            .map_err(|e| CliError::user(format!("cannot create {}", dir.display())).with_source(&e))?;
        let stamp = now.strftime("%Y%m%dT%H%M%S%.3fZ").to_string();
        let skill: String = self
            .skill_id
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' })
            .collect();
        let path = dir.join(format!("{stamp}-{skill}.json"));
        let text = serde_json::to_string_pretty(self).expect("a context serialises");
        troupe_project::fsutil::write_atomic(&path, text.as_bytes())
            .map_err(|e| CliError::user(format!("cannot write {}", path.display())).with_source(&e))?;
        Ok(path)
    }

    /// Read a context file, naming it in every error.
    pub fn load(path: &Path) -> CliResult<Self> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| CliError::user(format!("cannot read the context {}", path.display())).with_source(&e))?;
        serde_json::from_str(&text).map_err(|e| {
            CliError::user(format!("{} is not a workflow context", path.display()))
                .with_source(&e)
                .with_hint("pass a file `troupe workflow` saved under .troupe/context/")
        })
    }

    /// The context as instructions for the adhoc agent.
    pub fn instructions(&self) -> String {
        format!(
            "# Failure context from a workflow\n\nA workflow ran script `{}` of skill `{}` and it failed: {}. \
             Investigate why and fix it.\n\n```json\n{}\n```\n",
            self.script_path,
            self.skill_id,
            self.error.message,
            serde_json::to_string_pretty(self).expect("a context serialises")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_run_becomes_a_context_and_reads_back() {
        let now: jiff::Timestamp = "2026-01-02T03:04:05Z".parse().unwrap();
        let ok = serde_json::json!({"skill": "s", "script": "a.sh", "exitCode": 0, "timedOut": false});
        assert_eq!(WorkflowContext::from_run(&ok, None, now), None);
        let failed = serde_json::json!({"skill": "deploy", "script": "a.sh", "scriptPath": ".troupe/skills/deploy/scripts/a.sh",
            "args": ["prod"], "exitCode": 3, "timedOut": false, "stdout": "o", "stderr": "boom"});
        let ctx = WorkflowContext::from_run(&failed, Some("it failed".into()), now).unwrap();
        assert_eq!((ctx.error.exit_code, ctx.error.message.as_str()), (3, "script a.sh exited with code 3"));
        let dir = tempfile::tempdir().unwrap();
        let path = ctx.save(dir.path(), now).unwrap();
        assert_eq!(path.file_name().unwrap(), "20260102T030405.000Z-deploy.json");
        let text = std::fs::read_to_string(&path).unwrap();
        for field in
            ["skillId", "scriptPath", "args", "exitCode", "stdout", "stderr", "timestamp", "conversationSummary"]
        {
            assert!(text.contains(field), "{field}: {text}");
        }
        assert_eq!(WorkflowContext::load(&path).unwrap(), ctx);
        assert!(ctx.instructions().contains("boom"));
    }
}
