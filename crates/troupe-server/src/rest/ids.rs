//! Ids from the request, checked before they reach the store or the file
//! system: agent ids and feature names become file and folder names, so one
//! that could climb out of its folder (`..`, `/`) is refused with 400 rather
//! than looked up.

use troupe_core::layout::{is_valid_agent_id, is_valid_feature_name};

use crate::error::{ApiError, ApiResult};

/// A board task id: non-empty, at most 200 bytes, no white space or control
/// characters, and no `.`/`..` segment (`<feature>/<subtask>` has one `/`).
pub(crate) fn task_id(id: &str) -> ApiResult<&str> {
    let bad_segment = id.split('/').any(|s| s.is_empty() || s == "." || s == "..");
    if id.is_empty() || id.len() > 200 || bad_segment || id.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(ApiError::bad_request(format!("`{}` is not a task id", printable(id)))
            .with_hint("task ids look like `t12` or `login/1.1` (percent-encode the `/` in a path)"));
    }
    Ok(id)
}

/// An agent id (it names log and heartbeat files).
pub(crate) fn agent_id(id: &str) -> ApiResult<&str> {
    if !is_valid_agent_id(id) {
        return Err(ApiError::bad_request(format!("`{}` is not an agent id", printable(id)))
            .with_hint("agent ids are ASCII letters, digits, '.', '_' and '-', not starting with '.'"));
    }
    Ok(id)
}

/// A feature name (it names a folder under `.troupe/specs/`).
pub(crate) fn feature(name: &str) -> ApiResult<&str> {
    if !is_valid_feature_name(name) {
        return Err(ApiError::bad_request(format!("`{}` is not a feature name", printable(name)))
            .with_hint("feature names are lowercase letters, digits, '-', '_' or '.'"));
    }
    Ok(name)
}

/// The input as it can be shown back: control characters escaped, cut short.
fn printable(text: &str) -> String {
    let shown: String = text.chars().take(80).flat_map(char::escape_debug).collect();
    if text.chars().count() > 80 { format!("{shown}…") } else { shown }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_that_climb_are_refused() {
        for ok in ["t1", "login/1.1", "a.b"] {
            assert!(task_id(ok).is_ok(), "{ok}");
        }
        for bad in ["", "..", "../x", "a/../b", "/etc/passwd", "a//b", "a b", "a\nb", "./x"] {
            assert!(task_id(bad).is_err(), "{bad:?}");
        }
        assert!(agent_id("../builder").is_err());
        assert!(feature("../../etc").is_err());
        assert!(feature("login").is_ok());
    }
}
