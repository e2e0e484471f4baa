//! Importing a plan: compare with what the board holds, then insert in the
//! caller's transaction.

use rusqlite::{Connection, OptionalExtension, params};
use serde_json::json;

use super::board::{exists, get, insert_task_rows};
use super::{now_us, record};
use crate::error::{Context, Result, StoreError};
use crate::event::{NewEvent, kind};
use crate::plan::{ImportOutcome, PlanTasks, Snapshot, diff, digest};

/// The plan's tasks as the `plans` table remembers them, and that text.
fn snapshots(plan: &mut PlanTasks) -> (Vec<Snapshot>, String) {
    for t in &mut plan.tasks {
        t.feature = Some(plan.feature.clone());
    }
    let snapshots: Vec<Snapshot> = plan.tasks.iter().map(Snapshot::of_new).collect();
    let text = serde_json::to_string(&snapshots).unwrap_or_default();
    (snapshots, text)
}

fn stored_plan(tx: &Connection, feature: &str) -> Result<Option<String>> {
    tx.prepare_cached("SELECT tasks FROM plans WHERE feature = ?1")
        .and_then(|mut s| s.query_row([feature], |r| r.get(0)).optional())
        .op("read the imported plan")
}

pub(crate) fn import(tx: &Connection, mut plan: PlanTasks) -> Result<ImportOutcome> {
    let (snapshots, text) = snapshots(&mut plan);
    let stored = stored_plan(tx, &plan.feature)?;
    if let Some(stored) = stored {
        if stored == text {
            return Ok(ImportOutcome::Unchanged);
        }
        let old: Vec<Snapshot> = serde_json::from_str(&stored)
            .map_err(|e| StoreError::BadValue { column: "plans.tasks", detail: e.to_string() })?;
        return Err(StoreError::PlanChanged { feature: plan.feature, changes: diff(&old, &snapshots) });
    }
    // Tasks may already be on the board under the plan's ids (imported by an
    // older troupe, or created by hand): adopt them only if they are the plan.
    let mut on_board = Vec::new();
    for s in &snapshots {
        // `exists` first: on a first import nothing is there, and reading whole tasks would cost more.
        if !exists(tx, &s.id)? {
            continue;
        }
        match get(tx, &s.id) {
            Ok(t) => on_board.push(Snapshot::of_task(&t)),
            Err(StoreError::TaskNotFound(_)) => {}
            Err(e) => return Err(e),
        }
    }
    let now = now_us();
    let outcome = if on_board.is_empty() {
        let by = plan.tasks.first().map(|t| t.created_by.clone()).unwrap_or_default();
        let created = insert_task_rows(tx, plan.tasks, now)?.len();
        let mut completed = 0;
        for id in &plan.done {
            completed += tx
                .prepare_cached(
                    "UPDATE tasks SET status = 'completed', assignee = ?2, completed_at = ?3, updated_at = ?3 \
                     WHERE id = ?1 AND status = 'pending'",
                )
                .and_then(|mut s| s.execute(params![id, by, now]))
                .op("mark done work completed")?;
        }
        // Completed blockers no longer block: recount for the imported tasks.
        tx.prepare_cached(
            "UPDATE tasks SET open_blockers = (SELECT count(*) FROM task_deps d JOIN tasks b ON b.id = d.blocker_id \
             WHERE d.task_id = tasks.id AND b.status <> 'completed') WHERE feature = ?1",
        )
        .and_then(|mut s| s.execute([&plan.feature]))
        .op("count open blockers")?;
        ImportOutcome::Imported { created, completed }
    } else if on_board == snapshots {
        ImportOutcome::Unchanged
    } else {
        return Err(StoreError::PlanChanged { feature: plan.feature, changes: diff(&on_board, &snapshots) });
    };
    let fingerprint = digest(&text);
    tx.prepare_cached("INSERT INTO plans (feature, digest, tasks, imported_at) VALUES (?1, ?2, ?3, ?4)")
        .and_then(|mut s| s.execute(params![plan.feature, fingerprint, text, now]))
        .op("remember the imported plan")?;
    let data = json!({ "feature": plan.feature, "tasks": snapshots.len(), "digest": fingerprint, "outcome": outcome });
    let event = NewEvent { kind: kind::PLAN_IMPORTED.into(), actor: None, subject: Some(plan.feature.clone()), data };
    record(tx, now, &event)?;
    Ok(outcome)
}

/// Replace the feature's plan; with `renew`, the same plan again too (a
/// revision's plan is new work however it reads).
pub(crate) fn replace(tx: &Connection, mut plan: PlanTasks, renew: bool) -> Result<ImportOutcome> {
    let (new, text) = snapshots(&mut plan);
    let stored = stored_plan(tx, &plan.feature)?;
    if !renew && stored.as_deref() == Some(text.as_str()) {
        return Ok(ImportOutcome::Unchanged);
    }
    let mut old: Vec<String> = match &stored {
        Some(text) => serde_json::from_str::<Vec<Snapshot>>(text)
            .map_err(|e| StoreError::BadValue { column: "plans.tasks", detail: e.to_string() })?
            .into_iter()
            .map(|s| s.id)
            .collect(),
        None => Vec::new(),
    };
    for s in &new {
        if !old.contains(&s.id) && exists(tx, &s.id)? {
            old.push(s.id.clone());
        }
    }
    if old.is_empty() {
        return import(tx, plan);
    }
    let mut busy = Vec::new();
    let mut completed = 0;
    for id in &old {
        match get(tx, id) {
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
        let waiting: Vec<String> = tx
            .prepare_cached("SELECT task_id FROM task_deps WHERE blocker_id = ?1 ORDER BY task_id")
            .and_then(|mut s| s.query_map([id], |r| r.get(0))?.collect())
            .op("find tasks waiting for the plan")?;
        for w in waiting {
            if !old.contains(&w) && !dependents.contains(&w) {
                dependents.push(w);
            }
        }
    }
    if !dependents.is_empty() {
        return Err(StoreError::PlanDependedOn { feature: plan.feature, dependents });
    }
    for id in &old {
        tx.prepare_cached("DELETE FROM task_deps WHERE task_id = ?1 OR blocker_id = ?1")
            .and_then(|mut s| s.execute([id]))
            .op("remove the old plan's dependencies")?;
    }
    for id in &old {
        tx.prepare_cached("DELETE FROM tasks WHERE id = ?1")
            .and_then(|mut s| s.execute([id]))
            .op("remove the old plan")?;
    }
    tx.prepare_cached("DELETE FROM plans WHERE feature = ?1")
        .and_then(|mut s| s.execute([&plan.feature]))
        .op("forget the old plan")?;
    let data = json!({ "feature": plan.feature, "removed": old, "completed": completed });
    let event = NewEvent { kind: kind::PLAN_REPLACED.into(), actor: None, subject: Some(plan.feature.clone()), data };
    record(tx, now_us(), &event)?;
    import(tx, plan)
}
