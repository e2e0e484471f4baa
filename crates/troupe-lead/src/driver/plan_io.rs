//! tasks.yaml and the board, for the commands that touch them: load and
//! validate the plan, import it, mark work done or blocked.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::Path;

use troupe_core::plan::{TaskPlan, mark_done};
use troupe_project::write_atomic;
use troupe_store::plan::plan_tasks;
use troupe_store::{Board, EventLog, ListFilter, NewEvent, StoreError, TaskStatus};

use crate::machine::PlanLoad;
use crate::plan::{BuildPlan, PlanGroup, PlanTask};

/// The agent id the Lead uses on the board.
pub const LEAD: &str = "lead";

pub use troupe_core::plan::board_id;

/// Read and validate tasks.yaml into the Lead's view.
pub fn load(path: &Path) -> PlanLoad {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return PlanLoad::Missing,
        Err(e) => return PlanLoad::Invalid(vec![format!("cannot read {}: {e}", path.display())]),
    };
    match parse(&text) {
        Ok(plan) => PlanLoad::Loaded(plan),
        Err(messages) => PlanLoad::Invalid(messages.into_iter().map(|m| format!("{}: {m}", path.display())).collect()),
    }
}

/// Parse and validate tasks.yaml text into a [`BuildPlan`]; every problem is reported.
pub fn parse(text: &str) -> Result<BuildPlan, Vec<String>> {
    let plan = TaskPlan::from_yaml(text).map_err(|e| vec![e.to_string()])?;
    if plan.tasks.is_empty() {
        return Err(vec!["no tasks".into()]);
    }
    let schedule = plan.validate().map_err(|e| e.errors.iter().map(|x| x.to_string()).collect::<Vec<_>>())?;
    // A task id in `depends` stands for all of its work items.
    let mut expansion: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for t in &plan.tasks {
        let items =
            if t.subtasks.is_empty() { vec![t.id.clone()] } else { t.subtasks.iter().map(|s| s.id.clone()).collect() };
        expansion.insert(&t.id, items);
        for s in &t.subtasks {
            expansion.insert(&s.id, vec![s.id.clone()]);
        }
    }
    let expand = |ids: &[String]| -> Vec<String> {
        ids.iter().flat_map(|d| expansion.get(d.as_str()).cloned().unwrap_or_else(|| vec![d.clone()])).collect()
    };
    let mut tasks = Vec::new();
    for t in &plan.tasks {
        if t.subtasks.is_empty() {
            tasks.push(PlanTask {
                id: t.id.clone(),
                summary: t.summary.clone(),
                depends: expand(&t.depends),
                done: t.is_done(),
            });
        }
        for s in &t.subtasks {
            let mut depends = expand(&s.depends);
            depends.extend(expand(&t.depends));
            depends.retain(|d| d != &s.id);
            depends.dedup();
            tasks.push(PlanTask { id: s.id.clone(), summary: s.summary.clone(), depends, done: s.is_done() });
        }
    }
    let groups = schedule
        .waves
        .iter()
        .flat_map(|w| {
            w.groups.iter().map(move |g| PlanGroup {
                id: g.id.clone(),
                wave: w.number as u32,
                tasks: g.tasks.clone(),
                files: g.files.clone(),
                reported_files: Vec::new(),
            })
        })
        .collect();
    Ok(BuildPlan { tasks, groups })
}

/// The event that keeps the files a group's Builder reported (subject
/// `<feature>/<group>`, data `{"files": [...]}`).
pub const GROUP_FILES_EVENT: &str = "group_files_reported";

/// Record the files `group` of `feature` reported.
pub fn record_group_files(log: &dyn EventLog, feature: &str, group: &str, files: &[String]) -> Result<(), String> {
    let event = NewEvent {
        kind: GROUP_FILES_EVENT.into(),
        actor: Some(LEAD.into()),
        subject: Some(format!("{feature}/{group}")),
        data: serde_json::json!({ "files": files }),
    };
    log.append_event(event).map(|_| ()).map_err(|e| e.to_string())
}

/// Fill in each group's files reported in earlier runs (the latest record of a group wins).
pub fn add_reported_files(log: &dyn EventLog, feature: &str, plan: &mut BuildPlan) -> Result<(), String> {
    let prefix = format!("{feature}/");
    let mut reported: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut after = 0;
    loop {
        let page = log.events_since(after, 1000).map_err(|e| e.to_string())?;
        let Some(last) = page.last() else { break };
        after = last.id;
        for e in page.iter().filter(|e| e.kind == GROUP_FILES_EVENT) {
            let Some(group) = e.subject.as_deref().and_then(|s| s.strip_prefix(&prefix)) else { continue };
            let files =
                e.data["files"].as_array().map(|a| a.iter().filter_map(|f| f.as_str().map(str::to_string)).collect());
            reported.insert(group.to_string(), files.unwrap_or_default());
        }
    }
    for g in &mut plan.groups {
        if let Some(files) = reported.remove(&g.id) {
            g.reported_files = files;
        }
    }
    Ok(())
}

/// A group whose files were never recorded (the Lead was killed between its
/// Builder's board completion and the record) counts the files it owns that
/// exist: its exact paths in tasks.yaml, never a glob's guess. The machine
/// reads them only for groups done before this run.
pub fn fill_unreported_files(root: &Path, plan: &mut BuildPlan) {
    for g in plan.groups.iter_mut().filter(|g| g.reported_files.is_empty()) {
        g.reported_files = g
            .files
            .iter()
            .filter(|f| !f.contains(['*', '?', '[']) && !f.ends_with('/') && root.join(f).is_file())
            .cloned()
            .collect();
    }
}

/// Load `tasks_file` onto the board through the store's plan import (the same
/// plan again changes nothing; a different one is refused with what changed,
/// or, with `replace`, supersedes the old plan; with `renew`, even the same
/// plan starts over). Returns the work items the board has completed.
pub fn import(
    board: &dyn Board,
    feature: &str,
    tasks_file: &Path,
    replace: bool,
    renew: bool,
) -> Result<Vec<String>, String> {
    let text = fs::read_to_string(tasks_file).map_err(|e| format!("cannot read {}: {e}", tasks_file.display()))?;
    let plan = TaskPlan::from_yaml(&text).map_err(|e| format!("{}: {e}", tasks_file.display()))?;
    let checked = plan.check().map_err(|e| {
        let problems: Vec<String> = e.errors.iter().map(|x| x.to_string()).collect();
        format!("{}: {}", tasks_file.display(), problems.join("; "))
    })?;
    let tasks = plan_tasks(feature, &checked, LEAD);
    let imported = match (renew, replace) {
        (true, _) => board.renew_plan(tasks),
        (false, true) => board.replace_plan(tasks),
        (false, false) => board.import_plan(tasks),
    };
    imported.map_err(|e| match e {
        StoreError::PlanChanged { .. } => format!(
            "{e}; the board never merges a changed plan: restore tasks.yaml, or put the new plan in place with `troupe board import {feature} --replace`"
        ),
        StoreError::PlanInProgress { .. } => {
            format!("{e}; release the tasks with `troupe board release <id>` once nobody works on them")
        }
        e => e.to_string(),
    })?;
    let filter =
        ListFilter { feature: Some(feature.to_string()), status: Some(TaskStatus::Completed), ..ListFilter::default() };
    let prefix = format!("{feature}/");
    let done = board.list(&filter).map_err(|e| e.to_string())?;
    Ok(done.into_iter().filter_map(|t| t.id.strip_prefix(&prefix).map(str::to_string)).collect())
}

/// Mark work items done in tasks.yaml (text edit, everything else kept) and
/// completed on the board.
pub fn mark_tasks_done(board: &dyn Board, tasks_file: &Path, feature: &str, ids: &[String]) -> Result<(), String> {
    let text = fs::read_to_string(tasks_file).map_err(|e| format!("cannot read {}: {e}", tasks_file.display()))?;
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    let marked = mark_done(&text, &refs).map_err(|e| format!("{}: {e}", tasks_file.display()))?;
    if marked.yaml != text {
        write_atomic(tasks_file, marked.yaml.as_bytes())
            .map_err(|e| format!("cannot write {}: {e}", tasks_file.display()))?;
    }
    for id in ids {
        let bid = board_id(feature, id);
        let task = match board.task(&bid) {
            Ok(t) => t,
            Err(StoreError::TaskNotFound(_)) => continue,
            Err(e) => return Err(e.to_string()),
        };
        if task.status == TaskStatus::Completed {
            continue;
        }
        // The Builder did not complete it itself: complete it as its holder, or
        // claim it as the Lead first.
        let holder = match (task.status, task.assignee.clone()) {
            (TaskStatus::InProgress, Some(a)) => a,
            _ => {
                board.claim(&bid, LEAD).map_err(|e| e.to_string())?;
                LEAD.to_string()
            }
        };
        board.complete(&bid, &holder).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Paths (relative to `root`) that are missing or empty.
pub fn missing_artifacts(root: &Path, paths: &[String]) -> Vec<String> {
    paths
        .iter()
        .filter(|p| fs::read_to_string(root.join(p)).map(|t| t.trim().is_empty()).unwrap_or(true))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAN: &str = "tasks:\n  - id: '1'\n    summary: Model\n    status: pending\n    subtasks:\n      - id: '1.1'\n        summary: struct\n        status: done\n      - id: '1.2'\n        summary: store\n        status: pending\n  - id: '2'\n    summary: Handler\n    depends: ['1']\n    status: pending\nexecution:\n  - wave: 1\n    groups:\n      - id: G1\n        tasks: ['1.1', '1.2']\n        files: [src/model.rs]\n  - wave: 2\n    groups:\n      - id: G2\n        tasks: ['2']\n        files: [src/handler.rs]\n";

    #[test]
    fn converts_a_plan_expanding_task_ids() {
        let plan = parse(PLAN).unwrap();
        assert_eq!(plan.tasks.len(), 3);
        assert!(plan.task("1.1").unwrap().done);
        assert_eq!(plan.task("2").unwrap().depends, vec!["1.1", "1.2"]);
        assert_eq!(plan.groups[1].wave, 2);
        assert_eq!(plan.groups[1].files, vec!["src/handler.rs"]);
    }

    #[test]
    fn invalid_plans_list_their_problems() {
        let bad = "tasks:\n  - id: a\n    depends: [b]\n  - id: b\n    depends: [a]\n";
        let errs = parse(bad).unwrap_err();
        assert!(errs.iter().any(|e| e.contains('a') && e.contains('b')), "{errs:?}");
        assert!(!parse("tasks: [oops").unwrap_err().is_empty());
    }

    #[test]
    fn import_is_idempotent_and_mark_done_updates_file_and_board() {
        let dir = tempfile::tempdir().unwrap();
        let store = troupe_store::SqliteStore::open(&dir.path().join("t.db")).unwrap();
        let file = dir.path().join("tasks.yaml");
        fs::write(&file, PLAN).unwrap();
        assert_eq!(import(&store, "f", &file, false, false).unwrap(), vec!["1.1"], "done in tasks.yaml: completed");
        assert_eq!(import(&store, "f", &file, false, false).unwrap(), vec!["1.1"]);
        mark_tasks_done(&store, &file, "f", &["1.2".into()]).unwrap();
        assert_eq!(import(&store, "f", &file, false, false).unwrap(), vec!["1.1", "1.2"]);
        let after = parse(&fs::read_to_string(&file).unwrap()).unwrap();
        assert!(after.task("1.2").unwrap().done);
    }

    #[test]
    fn a_changed_plan_is_refused_unless_it_replaces_the_old_one() {
        let dir = tempfile::tempdir().unwrap();
        let store = troupe_store::SqliteStore::open(&dir.path().join("t.db")).unwrap();
        let file = dir.path().join("tasks.yaml");
        fs::write(&file, PLAN).unwrap();
        import(&store, "f", &file, false, false).unwrap();
        fs::write(&file, PLAN.replace("summary: Handler", "summary: Login handler")).unwrap();
        let err = import(&store, "f", &file, false, false).unwrap_err();
        assert!(err.contains("f/2 changed its summary") && err.contains("--replace"), "{err}");
        assert_eq!(import(&store, "f", &file, true, false).unwrap(), vec!["1.1"]);
        assert_eq!(store.task("f/2").unwrap().subject, "Login handler");
    }
}
