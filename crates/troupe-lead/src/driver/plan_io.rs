//! tasks.yaml and the board, for the commands that touch them: load and
//! validate the plan, import it, mark work done or blocked.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::Path;

use troupe_core::plan::{TaskPlan, mark_done};
use troupe_project::write_atomic;
use troupe_store::{Board, ListFilter, NewTask, StoreError, TaskStatus};

use crate::machine::PlanLoad;
use crate::plan::{BuildPlan, PlanGroup, PlanTask};

/// The agent id the Lead uses on the board.
pub const LEAD: &str = "lead";

/// The board id of work item `item` of `feature` (`login/1.1`).
pub fn board_id(feature: &str, item: &str) -> String {
    format!("{feature}/{item}")
}

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
            })
        })
        .collect();
    Ok(BuildPlan { tasks, groups })
}

/// Load `plan` into the board (idempotent); returns the work items already completed there.
pub fn import(board: &dyn Board, feature: &str, plan: &BuildPlan) -> Result<Vec<String>, StoreError> {
    let existing = board.list(&ListFilter { feature: Some(feature.to_string()), ..ListFilter::default() })?;
    let by_id: BTreeMap<&str, &troupe_store::Task> = existing.iter().map(|t| (t.id.as_str(), t)).collect();
    let group_of: BTreeMap<&str, &PlanGroup> =
        plan.groups.iter().flat_map(|g| g.tasks.iter().map(move |t| (t.as_str(), g))).collect();
    let mut completed = Vec::new();
    let mut new = Vec::new();
    for t in &plan.tasks {
        let id = board_id(feature, &t.id);
        if let Some(have) = by_id.get(id.as_str()) {
            if have.status == TaskStatus::Completed {
                completed.push(t.id.clone());
            }
            continue;
        }
        let g = group_of.get(t.id.as_str());
        new.push(NewTask {
            id: Some(id),
            subject: if t.summary.is_empty() { t.id.clone() } else { t.summary.clone() },
            description: String::new(),
            created_by: LEAD.into(),
            blocked_by: t.depends.iter().map(|d| board_id(feature, d)).collect(),
            feature: Some(feature.to_string()),
            wave: g.map(|g| g.wave),
            group: g.map(|g| g.id.clone()),
            files: g.map(|g| g.files.clone()).unwrap_or_default(),
        });
    }
    if !new.is_empty() {
        board.create_tasks(new)?;
    }
    Ok(completed)
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
        let plan = parse(PLAN).unwrap();
        assert!(import(&store, "f", &plan).unwrap().is_empty());
        assert!(import(&store, "f", &plan).unwrap().is_empty());
        let file = dir.path().join("tasks.yaml");
        fs::write(&file, PLAN).unwrap();
        mark_tasks_done(&store, &file, "f", &["1.1".into(), "1.2".into()]).unwrap();
        assert_eq!(import(&store, "f", &plan).unwrap(), vec!["1.1", "1.2"]);
        let after = parse(&fs::read_to_string(&file).unwrap()).unwrap();
        assert!(after.task("1.2").unwrap().done);
    }
}
