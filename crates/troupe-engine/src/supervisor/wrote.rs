//! The files of tool calls whose stream does not carry the change
//! ([`Change::Untold`]: Codex's `file_change` names only paths, a patch's
//! text is not the file): read as soon as the engine reports the call
//! returned, and logged as a [`Body::Wrote`] record after it, so replay can
//! write them again. A later call that changes the same file before it is
//! read gives both calls its later content: the end state is the same.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use troupe_core::event::AgentEvent;

use super::record::{Body, WrittenFile};
use crate::parse::{Change, Effect, StreamFormat};

/// Larger files are left out of the log (replay cannot write them again).
const MAX_BYTES: u64 = 4 * 1024 * 1024;

/// The calls whose files are still to be read.
pub(super) struct Untold {
    format: StreamFormat,
    cwd: PathBuf,
    calls: HashMap<String, Vec<String>>,
}

impl Untold {
    pub(super) fn new(format: StreamFormat, cwd: PathBuf) -> Untold {
        Untold { format, cwd, calls: HashMap::new() }
    }

    /// The record to log after `event`, if it ended a call with untold changes.
    pub(super) fn observe(&mut self, event: &AgentEvent) -> Option<Body> {
        match event {
            AgentEvent::ToolUse { id, name, input, .. } => {
                let Some(Effect::Files(files)) = self.format.effect(name, input) else { return None };
                let paths: Vec<String> =
                    files.into_iter().filter(|f| f.change == Change::Untold).map(|f| f.path).collect();
                if !paths.is_empty() {
                    self.calls.insert(id.clone(), paths);
                }
                None
            }
            AgentEvent::ToolResult { id, ok, .. } => {
                let paths = self.calls.remove(id)?;
                let files: Vec<WrittenFile> = paths.into_iter().filter_map(|p| read(&self.cwd, p)).collect();
                (*ok && !files.is_empty()).then(|| Body::Wrote { call: id.clone(), files })
            }
            _ => None,
        }
    }
}

/// `path` (relative to `cwd` unless absolute) as it is now; `None` when it
/// cannot be logged (too large, not text, unreadable).
fn read(cwd: &Path, path: String) -> Option<WrittenFile> {
    let full = cwd.join(&path);
    match std::fs::metadata(&full) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some(WrittenFile { path, content: None }),
        Ok(m) if m.is_file() && m.len() <= MAX_BYTES => {
            std::fs::read_to_string(&full).ok().map(|content| WrittenFile { path, content: Some(content) })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_codex_file_change_is_logged_with_what_its_files_hold_once_it_returned() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "new\n").unwrap();
        let mut untold = Untold::new(StreamFormat::Codex, dir.path().to_path_buf());
        let changes = json!({"changes": [{"path": dir.path().join("a.txt"), "kind": "update"}, {"path": "gone.txt", "kind": "add"}]});
        let call = AgentEvent::ToolUse {
            id: "item_0".into(),
            name: "file_change".into(),
            kind: troupe_core::event::ToolKind::FileEdit,
            input: changes,
        };
        assert_eq!(untold.observe(&call), None);
        let done = AgentEvent::ToolResult { id: "item_0".into(), ok: true, output: String::new() };
        let Some(Body::Wrote { call, files }) = untold.observe(&done) else { panic!("a wrote record") };
        assert_eq!(call, "item_0");
        assert_eq!(files[0].content.as_deref(), Some("new\n"));
        assert_eq!((files[1].path.as_str(), files[1].content.as_deref()), ("gone.txt", None));
        // Once only; a failed call and another engine's write (its content is in its stream) log nothing.
        assert_eq!(untold.observe(&done), None);
        let write = AgentEvent::ToolUse {
            id: "w".into(),
            name: "Write".into(),
            kind: troupe_core::event::ToolKind::FileEdit,
            input: json!({"file_path": "a.txt", "content": "x"}),
        };
        let mut claude = Untold::new(StreamFormat::Claude, dir.path().to_path_buf());
        assert_eq!(claude.observe(&write), None);
        assert_eq!(claude.observe(&AgentEvent::ToolResult { id: "w".into(), ok: true, output: String::new() }), None);
    }
}
