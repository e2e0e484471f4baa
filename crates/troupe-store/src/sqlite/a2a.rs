//! A2A tasks and their push targets on SQLite. A task's every change is one
//! transaction that also appends its `a2a_task` event, so a stream that reads
//! the snapshot and then follows the event log from the snapshot's
//! `last_event` never misses or repeats a change.

use jiff::Timestamp;
use rusqlite::{Connection, OptionalExtension, Row, params};
use serde_json::json;

use super::{SqliteStore, now_us, record};
use crate::a2a::{A2A_TASK_EVENT, A2aPushConfig, A2aTask, A2aTaskFilter, A2aTaskPage, A2aTaskUpdate};
use crate::error::{Context, Result, StoreError};
use crate::event::NewEvent;
use crate::traits::A2aTasks;

const COLS: &str = "id, context_id, state, body, created_at, updated_at, seq, last_event";

fn task(row: &Row<'_>) -> rusqlite::Result<A2aTask> {
    let body: String = row.get(3)?;
    let bad = |i: usize, e: Box<dyn std::error::Error + Send + Sync>| {
        rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, e)
    };
    let at = |i: usize| -> rusqlite::Result<Timestamp> {
        Timestamp::from_microsecond(row.get(i)?).map_err(|e| bad(i, Box::new(e)))
    };
    Ok(A2aTask {
        id: row.get(0)?,
        context_id: row.get(1)?,
        state: row.get(2)?,
        body: serde_json::from_str(&body).map_err(|e| bad(3, Box::new(e)))?,
        created_at: at(4)?,
        updated_at: at(5)?,
        seq: row.get(6)?,
        last_event: row.get(7)?,
    })
}

fn get(c: &Connection, id: &str) -> Result<Option<A2aTask>> {
    c.prepare_cached(&format!("SELECT {COLS} FROM a2a_tasks WHERE id = ?1"))
        .and_then(|mut s| s.query_row([id], task).optional())
        .op("read an A2A task")
}

fn need_task(c: &Connection, id: &str) -> Result<()> {
    match get(c, id)? {
        Some(_) => Ok(()),
        None => Err(StoreError::A2aTaskNotFound(id.to_string())),
    }
}

impl A2aTasks for SqliteStore {
    fn save_a2a_task(&self, update: A2aTaskUpdate) -> Result<A2aTask> {
        if update.id.trim().is_empty() || update.context_id.trim().is_empty() {
            return Err(StoreError::BadValue { column: "id", detail: "an A2A task needs an id and a context".into() });
        }
        self.write("save an A2A task", |tx| {
            let at = now_us();
            let event = NewEvent {
                kind: A2A_TASK_EVENT.into(),
                actor: Some("a2a".into()),
                subject: Some(update.id.clone()),
                data: json!({"state": update.state, "update": update.event}),
            };
            let event_id = record(tx, at, &event)?;
            tx.prepare_cached(
                "INSERT INTO a2a_tasks (id, context_id, state, body, created_at, updated_at, last_event)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6)
                 ON CONFLICT (id) DO UPDATE SET state = excluded.state, body = excluded.body,
                     updated_at = excluded.updated_at, last_event = excluded.last_event",
            )
            .and_then(|mut s| {
                s.execute(params![update.id, update.context_id, update.state, update.body.to_string(), at, event_id])
            })
            .op("save an A2A task")?;
            get(tx, &update.id)?.ok_or_else(|| StoreError::A2aTaskNotFound(update.id.clone()))
        })
    }

    fn a2a_task(&self, id: &str) -> Result<Option<A2aTask>> {
        self.read("read an A2A task", |c| get(c, id))
    }

    fn a2a_tasks(&self, filter: &A2aTaskFilter) -> Result<A2aTaskPage> {
        self.read("list A2A tasks", |c| {
            let mut cond = vec!["1 = 1".to_string()];
            let mut args: Vec<rusqlite::types::Value> = Vec::new();
            let mut arg = |cond: &mut Vec<String>, sql: &str, v: rusqlite::types::Value| {
                args.push(v);
                cond.push(sql.replace('?', &format!("?{}", args.len())));
            };
            if let Some(ctx) = &filter.context_id {
                arg(&mut cond, "context_id = ?", ctx.clone().into());
            }
            if let Some(state) = &filter.state {
                arg(&mut cond, "state = ?", state.clone().into());
            }
            if let Some(after) = filter.updated_after {
                arg(&mut cond, "updated_at > ?", after.as_microsecond().into());
            }
            let matching = cond.join(" AND ");
            let total: i64 = c
                .prepare(&format!("SELECT count(*) FROM a2a_tasks WHERE {matching}"))
                .and_then(|mut s| s.query_row(rusqlite::params_from_iter(args.iter()), |r| r.get(0)))
                .op("count A2A tasks")?;
            if let Some((at, seq)) = filter.before {
                let n = args.len();
                args.push(at.as_microsecond().into());
                args.push(seq.into());
                cond.push(format!("(updated_at < ?{} OR (updated_at = ?{} AND seq < ?{}))", n + 1, n + 1, n + 2));
            }
            args.push(i64::from(filter.limit).into());
            let sql = format!(
                "SELECT {COLS} FROM a2a_tasks WHERE {} ORDER BY updated_at DESC, seq DESC LIMIT ?{}",
                cond.join(" AND "),
                args.len()
            );
            let tasks = c
                .prepare(&sql)
                .and_then(|mut s| s.query_map(rusqlite::params_from_iter(args.iter()), task)?.collect())
                .op("list A2A tasks")?;
            Ok(A2aTaskPage { tasks, total: total as u64 })
        })
    }

    fn save_a2a_push(&self, config: A2aPushConfig) -> Result<A2aPushConfig> {
        self.write("save a push notification config", |tx| {
            need_task(tx, &config.task_id)?;
            tx.prepare_cached(
                "INSERT INTO a2a_push_configs (task_id, id, body, created_at) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (task_id, id) DO UPDATE SET body = excluded.body",
            )
            .and_then(|mut s| s.execute(params![config.task_id, config.id, config.body.to_string(), now_us()]))
            .op("save a push notification config")?;
            Ok(config)
        })
    }

    fn a2a_pushes(&self, task_id: &str) -> Result<Vec<A2aPushConfig>> {
        self.read("read push notification configs", |c| {
            need_task(c, task_id)?;
            c.prepare_cached(
                "SELECT task_id, id, body FROM a2a_push_configs WHERE task_id = ?1 ORDER BY created_at, id",
            )
            .and_then(|mut s| {
                s.query_map([task_id], |r| {
                    let body: String = r.get(2)?;
                    Ok(A2aPushConfig {
                        task_id: r.get(0)?,
                        id: r.get(1)?,
                        body: serde_json::from_str(&body).map_err(|e| {
                            rusqlite::Error::FromSqlConversionFailure(2, rusqlite::types::Type::Text, Box::new(e))
                        })?,
                    })
                })?
                .collect()
            })
            .op("read push notification configs")
        })
    }

    fn delete_a2a_push(&self, task_id: &str, id: &str) -> Result<bool> {
        self.write("delete a push notification config", |tx| {
            need_task(tx, task_id)?;
            let n = tx
                .prepare_cached("DELETE FROM a2a_push_configs WHERE task_id = ?1 AND id = ?2")
                .and_then(|mut s| s.execute(params![task_id, id]))
                .op("delete a push notification config")?;
            Ok(n > 0)
        })
    }
}
