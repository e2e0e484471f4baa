//! Importing a plan: compare with what the board holds, then insert in the
//! caller's transaction. The steps are written once over [`PlanRows`], the
//! few reads and writes they need, which each backend implements.

use std::collections::HashSet;

use rusqlite::{Connection, OptionalExtension, params};
use serde_json::json;
use troupe_core::hash::FastSet;

use super::board::{RowOptions, exists, get, insert_task_rows};
use super::{now_us, record};
use crate::error::{Context, Result, StoreError};
use crate::event::{NewEvent, kind};
use crate::plan::{ImportOutcome, Item, PlanTasks, Snapshot, SnapshotRef, diff, digest, items, read_items};
use crate::task::{NewTask, Task};

/// What importing and replacing a plan reads and writes, inside one transaction.
pub(crate) trait PlanRows {
    /// The ids on the board that start with `<feature>/` (every id a plan of
    /// `feature` gives its tasks).
    fn ids_under(&mut self, feature: &str) -> Result<HashSet<String>>;
    /// The plan as the `plans` table remembers it.
    fn stored_plan(&mut self, feature: &str) -> Result<Option<StoredPlan>>;
    /// One task.
    fn task(&mut self, id: &str) -> Result<Task>;
    /// Whether a task is on the board.
    fn task_exists(&mut self, id: &str) -> Result<bool>;
    /// Create the plan's tasks; their ids.
    fn insert_tasks(&mut self, tasks: Vec<NewTask>, now: i64, options: &RowOptions) -> Result<Vec<String>>;
    /// Remember the imported plan by its [`crate::plan::items`].
    fn insert_plan(&mut self, feature: &str, digest: &str, items: &[u8], now: i64) -> Result<()>;
    /// The tasks that wait for `id`, by id.
    fn waiting_for(&mut self, id: &str) -> Result<Vec<String>>;
    /// Remove tasks with their dependencies, and the feature's plan.
    fn remove(&mut self, feature: &str, ids: &[String]) -> Result<()>;
    /// Append an event.
    fn event(&mut self, now: i64, event: &NewEvent) -> Result<()>;
}

impl PlanRows for &Connection {
    fn ids_under(&mut self, feature: &str) -> Result<HashSet<String>> {
        // A range of the id index, `/` to `0` being the next byte.
        let (from, to) = (format!("{feature}/"), format!("{feature}0"));
        self.prepare_cached("SELECT id FROM tasks WHERE id >= ?1 AND id < ?2")
            .and_then(|mut s| s.query_map(params![from, to], |r| r.get(0))?.collect())
            .op("find the plan's tasks on the board")
    }

    fn stored_plan(&mut self, feature: &str) -> Result<Option<StoredPlan>> {
        self.prepare_cached("SELECT items, tasks FROM plans WHERE feature = ?1")
            .and_then(|mut s| {
                s.query_row([feature], |r| Ok(StoredPlan { items: r.get(0)?, old_text: r.get(1)? })).optional()
            })
            .op("read the imported plan")
    }

    fn task(&mut self, id: &str) -> Result<Task> {
        get(self, id)
    }

    fn task_exists(&mut self, id: &str) -> Result<bool> {
        exists(self, id)
    }

    fn insert_tasks(&mut self, tasks: Vec<NewTask>, now: i64, options: &RowOptions) -> Result<Vec<String>> {
        insert_task_rows(self, tasks, now, options)
    }

    fn insert_plan(&mut self, feature: &str, digest: &str, items: &[u8], now: i64) -> Result<()> {
        self.prepare_cached(
            "INSERT INTO plans (feature, digest, tasks, items, imported_at) VALUES (?1, ?2, '', ?3, ?4)",
        )
        .and_then(|mut s| s.execute(params![feature, digest, items, now]))
        .op("remember the imported plan")
        .map(drop)
    }

    fn waiting_for(&mut self, id: &str) -> Result<Vec<String>> {
        self.prepare_cached(
            "SELECT t.id FROM task_deps d JOIN tasks t ON t.seq = d.task_seq \
             WHERE d.blocker_seq = (SELECT seq FROM tasks WHERE id = ?1) ORDER BY t.id",
        )
        .and_then(|mut s| s.query_map([id], |r| r.get(0))?.collect())
        .op("find tasks waiting for the plan")
    }

    fn remove(&mut self, feature: &str, ids: &[String]) -> Result<()> {
        for id in ids {
            self.prepare_cached(
                "DELETE FROM task_deps WHERE task_seq = (SELECT seq FROM tasks WHERE id = ?1) \
                 OR blocker_seq = (SELECT seq FROM tasks WHERE id = ?1)",
            )
            .and_then(|mut s| s.execute([id]))
            .op("remove the old plan's dependencies")?;
        }
        for id in ids {
            self.prepare_cached("DELETE FROM tasks WHERE id = ?1")
                .and_then(|mut s| s.execute([id]))
                .op("remove the old plan")?;
        }
        self.prepare_cached("DELETE FROM plans WHERE feature = ?1")
            .and_then(|mut s| s.execute([feature]))
            .op("forget the old plan")
            .map(drop)
    }

    fn event(&mut self, now: i64, event: &NewEvent) -> Result<()> {
        record(self, now, event).map(drop)
    }
}

/// A row of the `plans` table: the plan's [`crate::plan::items`], or (a row
/// written before schema version 15) its tasks as JSON snapshots.
pub(crate) struct StoredPlan {
    pub items: Option<Vec<u8>>,
    pub old_text: String,
}

impl StoredPlan {
    /// The stored plan's items, whichever way it was stored.
    fn items(&self) -> Result<Vec<u8>> {
        let bad = |detail: String| StoreError::BadValue { column: "plans.items", detail };
        match &self.items {
            Some(items) => {
                read_items(items).ok_or_else(|| bad("not a list of task digests".into()))?;
                Ok(items.clone())
            }
            None => {
                let old: Vec<Snapshot> = serde_json::from_str(&self.old_text).map_err(|e| bad(e.to_string()))?;
                Ok(items(old.iter().map(SnapshotRef::of_old)))
            }
        }
    }
}

/// Read back items this module wrote or checked ([`StoredPlan::items`]).
fn decoded(bytes: &[u8]) -> Vec<Item> {
    read_items(bytes).unwrap_or_default()
}

/// The plan's [`crate::plan::items`], each task given its feature first.
fn plan_items(plan: &mut PlanTasks) -> Vec<u8> {
    for t in &mut plan.tasks {
        if t.feature.as_deref() != Some(plan.feature.as_str()) {
            t.feature = Some(plan.feature.clone());
        }
    }
    items(plan.tasks.iter().map(SnapshotRef::of_new))
}

pub(crate) fn import(tx: &mut impl PlanRows, mut plan: PlanTasks) -> Result<ImportOutcome> {
    let new = plan_items(&mut plan);
    crate::phases::mark("digest the plan");
    if let Some(stored) = tx.stored_plan(&plan.feature)? {
        let old = stored.items()?;
        if old == new {
            return Ok(ImportOutcome::Unchanged);
        }
        let changes = diff(&decoded(&old), &decoded(&new));
        return Err(StoreError::PlanChanged { feature: plan.feature, changes });
    }
    // Tasks may already be on the board under the plan's ids (imported by an
    // older troupe, or created by hand): adopt them only if they are the plan.
    // Every id of the plan starts with `<feature>/`: one range scan of the id
    // index finds them all, instead of a lookup per task.
    let present = tx.ids_under(&plan.feature)?;
    crate::phases::mark("read the stored plan and the ids on the board");
    let mut on_board = Vec::new();
    for id in plan.tasks.iter().filter_map(|t| t.id.as_ref()).filter(|id| present.contains(*id)) {
        match tx.task(id) {
            Ok(t) => on_board.push(t),
            Err(StoreError::TaskNotFound(_)) => {}
            Err(e) => return Err(e),
        }
    }
    let now = now_us();
    let count = plan.tasks.len();
    let outcome = if on_board.is_empty() {
        let ids: FastSet<&str> = plan.tasks.iter().filter_map(|t| t.id.as_deref()).collect();
        // Work tasks.yaml marks done is created completed (by the plan's creator).
        let done: FastSet<String> = plan.done.iter().filter(|d| ids.contains(d.as_str())).cloned().collect();
        let completed = done.len();
        let prefix = format!("{}/", plan.feature);
        let ids_checked = plan.tasks.iter().all(|t| t.id.as_deref().is_some_and(|id| id.starts_with(&prefix)));
        // One `plan_imported` event (below) stands for the plan's tasks.
        let options = RowOptions { done, ids_checked, one_event: true };
        let created = tx.insert_tasks(plan.tasks, now, &options)?.len();
        ImportOutcome::Imported { created, completed }
    } else {
        let board = items(on_board.iter().map(SnapshotRef::of_task));
        if board != new {
            return Err(StoreError::PlanChanged {
                feature: plan.feature,
                changes: diff(&decoded(&board), &decoded(&new)),
            });
        }
        ImportOutcome::Unchanged
    };
    let fingerprint = digest(&new);
    tx.insert_plan(&plan.feature, &fingerprint, &new, now)?;
    crate::phases::mark("insert the plan's digests");
    let data = json!({ "feature": plan.feature, "tasks": count, "digest": fingerprint, "outcome": outcome });
    let event = NewEvent { kind: kind::PLAN_IMPORTED.into(), actor: None, subject: Some(plan.feature.clone()), data };
    tx.event(now, &event)?;
    Ok(outcome)
}

/// Replace the feature's plan; with `renew`, the same plan again too (a
/// revision's plan is new work however it reads).
pub(crate) fn replace(tx: &mut impl PlanRows, mut plan: PlanTasks, renew: bool) -> Result<ImportOutcome> {
    let new = plan_items(&mut plan);
    let stored = tx.stored_plan(&plan.feature)?.map(|s| s.items()).transpose()?;
    if !renew && stored.as_ref() == Some(&new) {
        return Ok(ImportOutcome::Unchanged);
    }
    let mut old: Vec<String> = stored.map(|s| decoded(&s).into_iter().map(|i| i.id).collect()).unwrap_or_default();
    // Sets beside the ordered list: a plan of 100,000 tasks is replaced
    // without a linear search per task.
    let mut old_set: HashSet<String> = old.iter().cloned().collect();
    let present = tx.ids_under(&plan.feature)?;
    let prefix = format!("{}/", plan.feature);
    for id in plan.tasks.iter().map(|t| t.id.clone().unwrap_or_default()) {
        let on_board = present.contains(&id) || (!id.starts_with(&prefix) && tx.task_exists(&id)?);
        if !old_set.contains(&id) && on_board {
            old_set.insert(id.clone());
            old.push(id);
        }
    }
    if old.is_empty() {
        return import(tx, plan);
    }
    let mut busy = Vec::new();
    let mut completed = 0;
    for id in &old {
        match tx.task(id) {
            Ok(t) if t.status == crate::task::TaskStatus::InProgress => busy.push(id.clone()),
            Ok(t) if t.status == crate::task::TaskStatus::Completed => completed += 1,
            Ok(_) | Err(StoreError::TaskNotFound(_)) => {}
            Err(e) => return Err(e),
        }
    }
    if !busy.is_empty() {
        return Err(StoreError::PlanInProgress { feature: plan.feature, tasks: busy });
    }
    let mut dependents = Vec::new();
    for id in &old {
        for w in tx.waiting_for(id)? {
            if !old_set.contains(&w) && !dependents.contains(&w) {
                dependents.push(w);
            }
        }
    }
    if !dependents.is_empty() {
        return Err(StoreError::PlanDependedOn { feature: plan.feature, dependents });
    }
    tx.remove(&plan.feature, &old)?;
    let data = json!({ "feature": plan.feature, "removed": old, "completed": completed });
    let event = NewEvent { kind: kind::PLAN_REPLACED.into(), actor: None, subject: Some(plan.feature.clone()), data };
    tx.event(now_us(), &event)?;
    import(tx, plan)
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use troupe_core::plan::TaskPlan;

    use crate::error::StoreError;
    use crate::plan::{ImportOutcome, plan_tasks};
    use crate::{Board, SqliteStore};

    fn tasks(yaml: &str) -> crate::PlanTasks {
        let plan = TaskPlan::from_yaml(yaml).unwrap();
        plan_tasks("f", &plan.check().unwrap(), "lead")
    }

    const PLAN: &str = "tasks:\n  - id: a\n    summary: A\n  - id: b\n    summary: B\n    depends: [a]\n";

    /// A plan remembered before schema version 15 (its tasks as JSON text, no
    /// items) is still compared, diffed and replaced by what it was.
    #[test]
    fn a_plan_remembered_as_text_before_version_15_is_still_read() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("t.db")).unwrap();
        store.import_plan(tasks(PLAN)).unwrap();
        // The JSON the `plans` row held before: one object per task.
        let old: Vec<serde_json::Value> = tasks(PLAN)
            .tasks
            .iter()
            .map(|t| {
                json!({ "id": t.id, "subject": t.subject, "description": t.description, "blocked_by": t.blocked_by,
                        "wave": t.wave, "group": t.group, "files": t.files })
            })
            .collect();
        let old = serde_json::Value::from(old);
        store.lock().execute("UPDATE plans SET items = NULL, tasks = ?1", [old.to_string()]).unwrap();
        assert_eq!(store.import_plan(tasks(PLAN)).unwrap(), ImportOutcome::Unchanged);
        let err = store.import_plan(tasks(&PLAN.replace("summary: B", "summary: B2"))).unwrap_err();
        assert!(
            matches!(&err, StoreError::PlanChanged { changes, .. } if changes == &["f/b changed its summary"]),
            "{err}"
        );
        let replaced = store.replace_plan(tasks(&PLAN.replace("summary: B", "summary: B2"))).unwrap();
        assert_eq!(replaced, ImportOutcome::Imported { created: 2, completed: 0 });
        let items: Option<Vec<u8>> = store.lock().query_row("SELECT items FROM plans", [], |r| r.get(0)).unwrap();
        assert!(items.is_some(), "a plan imported now is remembered by its items");
    }
}
