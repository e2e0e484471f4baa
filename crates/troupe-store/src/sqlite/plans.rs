//! Importing a plan: compare with what the board holds, then insert in the
//! caller's transaction.

use rusqlite::{Connection, OptionalExtension, params};
use serde_json::json;

use super::board::{get, insert_tasks};
use super::{now_us, record};
use crate::error::{Context, Result, StoreError};
use crate::event::{NewEvent, kind};
use crate::plan::{ImportOutcome, PlanTasks, Snapshot, diff, digest};

pub(crate) fn import(tx: &Connection, mut plan: PlanTasks) -> Result<ImportOutcome> {
    for t in &mut plan.tasks {
        t.feature = Some(plan.feature.clone());
    }
    let snapshots: Vec<Snapshot> = plan.tasks.iter().map(Snapshot::of_new).collect();
    let text = serde_json::to_string(&snapshots).unwrap_or_default();
    let stored: Option<String> = tx
        .prepare_cached("SELECT tasks FROM plans WHERE feature = ?1")
        .and_then(|mut s| s.query_row([&plan.feature], |r| r.get(0)).optional())
        .op("read the imported plan")?;
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
        match get(tx, &s.id) {
            Ok(t) => on_board.push(Snapshot::of_task(&t)),
            Err(StoreError::TaskNotFound(_)) => {}
            Err(e) => return Err(e),
        }
    }
    let now = now_us();
    let outcome = if on_board.is_empty() {
        let by = plan.tasks.first().map(|t| t.created_by.clone()).unwrap_or_default();
        let created = insert_tasks(tx, plan.tasks, now)?.len();
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
