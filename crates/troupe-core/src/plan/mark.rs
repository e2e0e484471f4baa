//! The Lead's one right over `tasks.yaml`: setting `status: done` (seed 000,
//! Spec 4). Nothing else in the file may change.
//!
//! The edit is made on the text, so comments, quoting, key order and unknown
//! keys stay byte for byte. The result is then parsed and compared with the
//! intended document; if the text edit could not be placed exactly (flow
//! style, unusual layout), the whole document is re-rendered from its parsed
//! form instead, which keeps every key and value but not comments or layout.

use yaml_serde::Value;

use super::{DONE, PlanParseError, TaskPlan};

/// The outcome of [`mark_done`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkedDone {
    /// The new text of tasks.yaml (the input itself when nothing changed).
    pub yaml: String,
    /// Ids whose status changed, in the order given, then the tasks completed
    /// because all their subtasks are now done, in plan order.
    pub changed: Vec<String>,
    /// Whether the text edit failed and the file was re-rendered (comments lost).
    pub rerendered: bool,
}

/// Why [`mark_done`] refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MarkDoneError {
    /// The text is not a readable plan.
    #[error("tasks.yaml cannot be read: {0}")]
    Parse(#[from] PlanParseError),
    /// Some ids are no task or subtask.
    #[error("no task or subtask has the id {}", .0.join(", "))]
    UnknownIds(Vec<String>),
    /// Some ids belong to more than one task or subtask.
    #[error("the id {} belongs to more than one task or subtask", .0.join(", "))]
    AmbiguousIds(Vec<String>),
}

/// Mark the given subtask ids `done` (a task id marks the task and all its
/// subtasks), then mark `done` every task whose subtasks are all done. Returns
/// the new text; the input is not touched on error.
pub fn mark_done(text: &str, ids: &[&str]) -> Result<MarkedDone, MarkDoneError> {
    let plan = TaskPlan::from_yaml(text)?;
    let mut unknown = Vec::new();
    let mut ambiguous = Vec::new();
    for id in ids {
        let owners = plan.tasks.iter().filter(|t| t.id == *id).count()
            + plan.tasks.iter().flat_map(|t| &t.subtasks).filter(|s| s.id == *id).count();
        match owners {
            0 => unknown.push(id.to_string()),
            1 => {}
            _ => ambiguous.push(id.to_string()),
        }
    }
    if !unknown.is_empty() {
        return Err(MarkDoneError::UnknownIds(unknown));
    }
    if !ambiguous.is_empty() {
        return Err(MarkDoneError::AmbiguousIds(ambiguous));
    }

    // What changes, as (task index, subtask index or None for the task, id).
    let mut targets: Vec<(usize, Option<usize>, String)> = Vec::new();
    fn add(targets: &mut Vec<(usize, Option<usize>, String)>, t: usize, s: Option<usize>, id: &str) {
        if !targets.iter().any(|x| x.0 == t && x.1 == s) {
            targets.push((t, s, id.to_string()));
        }
    }
    for id in ids {
        for (ti, t) in plan.tasks.iter().enumerate() {
            if t.id == *id {
                for (si, s) in t.subtasks.iter().enumerate() {
                    if !s.is_done() {
                        add(&mut targets, ti, Some(si), &s.id);
                    }
                }
                if !t.is_done() {
                    add(&mut targets, ti, None, &t.id);
                }
            }
            for (si, s) in t.subtasks.iter().enumerate() {
                if s.id == *id && !s.is_done() {
                    add(&mut targets, ti, Some(si), &s.id);
                }
            }
        }
    }
    for (ti, t) in plan.tasks.iter().enumerate() {
        let now_done = |si: usize| t.subtasks[si].is_done() || targets.iter().any(|x| x.0 == ti && x.1 == Some(si));
        if !t.subtasks.is_empty() && !t.is_done() && (0..t.subtasks.len()).all(now_done) {
            add(&mut targets, ti, None, &t.id);
        }
    }
    if targets.is_empty() {
        return Ok(MarkedDone { yaml: text.to_string(), changed: Vec::new(), rerendered: false });
    }
    let changed: Vec<String> = targets.iter().map(|x| x.2.clone()).collect();

    let mut expected: Value = yaml_serde::from_str(text).map_err(|e| PlanParseError {
        message: e.to_string(),
        location: e.location().map(|l| (l.line(), l.column())),
    })?;
    for (t, s, _) in &targets {
        let task = &mut expected["tasks"][*t];
        let entry = match s {
            Some(s) => &mut task["subtasks"][*s],
            None => task,
        };
        if let Some(m) = entry.as_mapping_mut() {
            m.insert(Value::String("status".into()), Value::String(DONE.into()));
        }
    }

    if let Some(edited) = edit_text(text, &targets.iter().map(|x| x.2.as_str()).collect::<Vec<_>>())
        && yaml_serde::from_str::<Value>(&edited).ok().as_ref() == Some(&expected)
    {
        return Ok(MarkedDone { yaml: edited, changed, rerendered: false });
    }
    let yaml = yaml_serde::to_string(&expected).expect("a parsed YAML value always serializes");
    Ok(MarkedDone { yaml, changed, rerendered: true })
}

/// Set `status: done` in the block-style mapping of each id, inside the
/// top-level `tasks:` section. `None` when some id cannot be placed.
fn edit_text(text: &str, ids: &[&str]) -> Option<String> {
    let mut lines: Vec<String> = text.split_inclusive('\n').map(str::to_string).collect();
    let start = lines.iter().position(|l| key_at(l, 0) == Some("tasks"))?;
    let end = (start + 1..lines.len())
        .find(|&i| {
            let l = &lines[i];
            !l.starts_with([' ', '\t', '#', '-', '\n', '\r'])
        })
        .unwrap_or(lines.len());
    let mut inserts: Vec<(usize, usize, String)> = Vec::new();
    for id in ids {
        let (line, col) = find_id(&lines[start + 1..end], id).map(|(i, c)| (i + start + 1, c))?;
        let block = block_of(&lines, line, col, end)?;
        match block.clone().find(|&i| key_at_item(&lines[i], col) == Some("status")) {
            Some(i) => lines[i] = replace_value(&lines[i], col)?,
            None => {
                let last = block.clone().rfind(|&i| !is_blank_or_comment(&lines[i]))?;
                let nl = if lines[last].ends_with("\r\n") { "\r\n" } else { "\n" };
                if !lines[last].ends_with('\n') {
                    lines[last].push_str(nl);
                }
                inserts.push((last + 1, col, format!("{}status: {DONE}{nl}", " ".repeat(col))));
            }
        }
    }
    // Bottom up; at one position the outer mapping's line goes in first, so
    // the nested one ends up above it, inside the nested block.
    inserts.sort_by_key(|x| (std::cmp::Reverse(x.0), x.1));
    for (at, _, line) in inserts {
        lines.insert(at, line);
    }
    Some(lines.concat())
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

fn is_blank_or_comment(line: &str) -> bool {
    let t = line.trim();
    t.is_empty() || t.starts_with('#')
}

/// The key of a `key: value` line whose key starts at `col`.
fn key_at(line: &str, col: usize) -> Option<&str> {
    if indent(line) != col {
        return None;
    }
    let rest = &line[col..];
    let colon = rest.find(':')?;
    let key = &rest[..colon];
    let after = &rest[colon + 1..];
    (!key.is_empty()
        && !key.contains([' ', '"', '\'', '{', '[', '#'])
        && (after.is_empty() || after.starts_with([' ', '\n', '\r'])))
    .then_some(key)
}

/// Like [`key_at`], also for the first key of a sequence item (`- key:` with the key at `col`).
fn key_at_item(line: &str, col: usize) -> Option<&str> {
    if col >= 2 && indent(line) == col - 2 && line[col - 2..].starts_with("- ") {
        let mut shifted = " ".repeat(col);
        shifted.push_str(&line[col..]);
        return key_at(&shifted, col).map(|k| {
            let start = col;
            &line[start..start + k.len()]
        });
    }
    key_at(line, col)
}

/// The line and key column of `id: <id>` (unquoted or quoted) among `lines`.
fn find_id(lines: &[String], id: &str) -> Option<(usize, usize)> {
    let mut found = None;
    for (i, line) in lines.iter().enumerate() {
        let body = line.trim_start_matches(' ');
        let col = indent(line) + body.strip_prefix("- ").map_or(0, |rest| 2 + indent(rest));
        if key_at_item(line, col) != Some("id") {
            continue;
        }
        let value = strip_comment(&line[col + 3..]).trim();
        let unquoted = value
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .or_else(|| value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
            .unwrap_or(value);
        if unquoted == id {
            if found.is_some() {
                return None;
            }
            found = Some((i, col));
        }
    }
    found
}

fn strip_comment(value: &str) -> &str {
    match value.find(" #") {
        Some(i) if !value.trim_start().starts_with(['"', '\'']) => &value[..i],
        _ => value,
    }
}

/// The lines of the mapping whose key column is `col` and that contains `line`.
fn block_of(lines: &[String], line: usize, col: usize, end: usize) -> Option<std::ops::Range<usize>> {
    let mut first = line;
    while !(col >= 2 && indent(&lines[first]) == col - 2 && lines[first][col - 2..].starts_with("- ")) {
        if first == 0 {
            return None;
        }
        first -= 1;
        let l = &lines[first];
        if !is_blank_or_comment(l)
            && indent(l) < col
            && !(col >= 2 && indent(l) == col - 2 && l[col - 2..].starts_with("- "))
        {
            return None;
        }
    }
    let mut last = line + 1;
    while last < end && (is_blank_or_comment(&lines[last]) || indent(&lines[last]) >= col) {
        last += 1;
    }
    Some(first..last)
}

/// `status: <anything>` → `status: done`, keeping indentation, comment and line end.
fn replace_value(line: &str, col: usize) -> Option<String> {
    let key_end = col + "status:".len();
    let rest = &line[key_end..];
    let eol_len = rest.len() - rest.trim_end_matches(['\n', '\r']).len();
    let body = &rest[..rest.len() - eol_len];
    let value = strip_comment(body).trim_end();
    let comment = &body[value.len()..];
    if value.trim().starts_with(['|', '>', '[', '{', '&', '*', '!']) {
        return None;
    }
    Some(format!("{}status: {DONE}{comment}{}", &line[..col], &rest[rest.len() - eol_len..]))
}
