//! A2A tasks and their push targets on PostgreSQL. A task's every change is
//! one transaction that also appends its `a2a_task` event, as on SQLite.

use serde_json::json;

use super::rows::{self, A2A_COLS, all, get as col};
use super::{Param, PgStore, Tx, now_us, record_now};
use crate::a2a::{A2A_TASK_EVENT, A2aPushConfig, A2aTask, A2aTaskFilter, A2aTaskPage, A2aTaskUpdate};
use crate::error::{Result, StoreError};
use crate::event::NewEvent;
use crate::traits::A2aTasks;

fn get(tx: &mut Tx<'_>, id: &str) -> Result<Option<A2aTask>> {
    let sql = format!("SELECT {A2A_COLS} FROM a2a_tasks WHERE id = $1");
    tx.opt("read an A2A task", &sql, &[&id])?.map(|r| rows::a2a_task(&r)).transpose()
}

fn need_task(tx: &mut Tx<'_>, id: &str) -> Result<()> {
    match get(tx, id)? {
        Some(_) => Ok(()),
        None => Err(StoreError::A2aTaskNotFound(id.to_string())),
    }
}

impl A2aTasks for PgStore {
    fn save_a2a_task(&self, update: A2aTaskUpdate) -> Result<A2aTask> {
        if update.id.trim().is_empty() || update.context_id.trim().is_empty() {
            return Err(StoreError::BadValue { column: "id", detail: "an A2A task needs an id and a context".into() });
        }
        self.write("save an A2A task", |tx| {
            let at = now_us();
            // The row first (locking it), then the event, then the row names its event.
            tx.exec(
                "save an A2A task",
                "INSERT INTO a2a_tasks (id, context_id, state, body, created_at, updated_at, last_event)
                 VALUES ($1, $2, $3, $4, $5, $5, 0)
                 ON CONFLICT (id) DO UPDATE SET state = excluded.state, body = excluded.body,
                     updated_at = excluded.updated_at",
                &[&update.id, &update.context_id, &update.state, &update.body.to_string(), &at],
            )?;
            let event = NewEvent {
                kind: A2A_TASK_EVENT.into(),
                actor: Some("a2a".into()),
                subject: Some(update.id.clone()),
                data: json!({"state": update.state, "update": update.event}),
            };
            let event_id = record_now(tx, at, &event)?;
            tx.exec(
                "save an A2A task",
                "UPDATE a2a_tasks SET last_event = $2 WHERE id = $1",
                &[&update.id, &event_id],
            )?;
            get(tx, &update.id)?.ok_or_else(|| StoreError::A2aTaskNotFound(update.id.clone()))
        })
    }

    fn a2a_task(&self, id: &str) -> Result<Option<A2aTask>> {
        self.read("read an A2A task", |tx| get(tx, id))
    }

    fn a2a_tasks(&self, filter: &A2aTaskFilter) -> Result<A2aTaskPage> {
        self.read("list A2A tasks", |tx| {
            let mut cond = vec!["1 = 1".to_string()];
            let mut args: Vec<Box<dyn postgres::types::ToSql + Sync>> = Vec::new();
            let mut arg = |cond: &mut Vec<String>, sql: &str, v: Box<dyn postgres::types::ToSql + Sync>| {
                args.push(v);
                cond.push(sql.replace('?', &format!("${}", args.len())));
            };
            if let Some(ctx) = &filter.context_id {
                arg(&mut cond, "context_id = ?", Box::new(ctx.clone()));
            }
            if let Some(state) = &filter.state {
                arg(&mut cond, "state = ?", Box::new(state.clone()));
            }
            if let Some(after) = filter.updated_after {
                arg(&mut cond, "updated_at > ?", Box::new(after.as_microsecond()));
            }
            let matching = cond.join(" AND ");
            let values: Vec<Param<'_>> = args.iter().map(|a| a.as_ref() as Param<'_>).collect();
            let total: i64 = col(
                &tx.one("count A2A tasks", &format!("SELECT count(*) FROM a2a_tasks WHERE {matching}"), &values)?,
                0,
            )?;
            if let Some((at, seq)) = filter.before {
                let n = args.len();
                args.push(Box::new(at.as_microsecond()));
                args.push(Box::new(seq));
                cond.push(format!("(updated_at < ${} OR (updated_at = ${} AND seq < ${}))", n + 1, n + 1, n + 2));
            }
            args.push(Box::new(i64::from(filter.limit)));
            let sql = format!(
                "SELECT {A2A_COLS} FROM a2a_tasks WHERE {} ORDER BY updated_at DESC, seq DESC LIMIT ${}",
                cond.join(" AND "),
                args.len()
            );
            let values: Vec<Param<'_>> = args.iter().map(|a| a.as_ref() as Param<'_>).collect();
            let tasks = all(tx.query("list A2A tasks", &sql, &values)?, rows::a2a_task)?;
            Ok(A2aTaskPage { tasks, total: total as u64 })
        })
    }

    fn save_a2a_push(&self, config: A2aPushConfig) -> Result<A2aPushConfig> {
        self.write("save a push notification config", |tx| {
            need_task(tx, &config.task_id)?;
            tx.exec(
                "save a push notification config",
                "INSERT INTO a2a_push_configs (task_id, id, body, created_at) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (task_id, id) DO UPDATE SET body = excluded.body",
                &[&config.task_id, &config.id, &config.body.to_string(), &now_us()],
            )?;
            Ok(config.clone())
        })
    }

    fn a2a_pushes(&self, task_id: &str) -> Result<Vec<A2aPushConfig>> {
        self.read("read push notification configs", |tx| {
            need_task(tx, task_id)?;
            let rows = tx.query(
                "read push notification configs",
                r#"SELECT task_id, id, body FROM a2a_push_configs WHERE task_id = $1 ORDER BY created_at, id COLLATE "C""#,
                &[&task_id],
            )?;
            all(rows, |r| {
                Ok(A2aPushConfig {
                    task_id: col(r, 0)?,
                    id: col(r, 1)?,
                    body: serde_json::from_str(col(r, 2)?)
                        .map_err(|e| StoreError::BadValue { column: "body", detail: e.to_string() })?,
                })
            })
        })
    }

    fn delete_a2a_push(&self, task_id: &str, id: &str) -> Result<bool> {
        self.write("delete a push notification config", |tx| {
            need_task(tx, task_id)?;
            let n = tx.exec(
                "delete a push notification config",
                "DELETE FROM a2a_push_configs WHERE task_id = $1 AND id = $2",
                &[&task_id, &id],
            )?;
            Ok(n > 0)
        })
    }
}
