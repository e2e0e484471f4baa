//! The file-lock tools (`lock_file`, `unlock_file`, `list_locks`): an agent's
//! side of the locks `troupe lock` takes for people, in the same store, which
//! the hooks enforce on every engine. The holder is the session's identity,
//! never an argument, so an agent cannot lock or unlock as another.

use rmcp::model::JsonObject;
use serde_json::{Value, json};
use troupe_core::tools as names;
use troupe_store::{LockOutcome, NewLock};

use crate::gateway::Gateway;
use crate::session::Session;
use crate::tools::{ToolOutcome, json_of, need_str, store};

/// The lease when a `lock_file` call names none.
pub const DEFAULT_TTL_SECONDS: u64 = 600;

/// Runs one of the lock tools.
pub fn call(gateway: &Gateway, session: &Session, name: &str, args: &JsonObject) -> ToolOutcome {
    let store = store(gateway)?;
    let agent = session.identity.as_str();
    match name {
        names::LOCK_FILE => {
            let path = key(gateway, need_str(args, "path")?)?;
            let ttl = args.get("ttl_seconds").and_then(Value::as_u64).unwrap_or(DEFAULT_TTL_SECONDS).max(1);
            let lock = NewLock {
                path: path.clone(),
                agent: agent.to_string(),
                pid: None,
                task: session.task.clone(),
                ttl_seconds: ttl,
            };
            match store.lock_file(lock).map_err(|e| e.to_string())? {
                LockOutcome::Acquired { lock } => Ok(json!({"locked": path, "lock": json_of(&lock)})),
                LockOutcome::Held { lock } => Err(format!(
                    "{path} is locked by {} since {}; wait and retry, or ask {} (send_message) to unlock it",
                    lock.agent,
                    lock.since.strftime("%Y-%m-%d %H:%M:%S UTC"),
                    lock.agent
                )),
            }
        }
        names::UNLOCK_FILE => {
            let path = key(gateway, need_str(args, "path")?)?;
            let released = store.unlock_file(&path, Some(agent)).map_err(|e| e.to_string())?;
            Ok(json!({"path": path, "released": released.is_some()}))
        }
        _ => Ok(json!({"locks": json_of(&store.file_locks().map_err(|e| e.to_string())?)})),
    }
}

/// `path` as the store's key: relative to the project root.
fn key(gateway: &Gateway, path: &str) -> Result<String, String> {
    let root = gateway.root.as_deref().ok_or("no project: file locks need a troupe project")?;
    let real = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    let p = std::path::Path::new(path);
    troupe_store::lock::normalize(&real, p)
        .or_else(|| troupe_store::lock::normalize(root, p))
        .ok_or_else(|| format!("`{path}` is not a file inside the project"))
}
