//! File locks and the write history on SQLite (schema `V7_LOCKS`). Taking a
//! lock is one `BEGIN IMMEDIATE` transaction that first drops the path's
//! stale lock (lease passed, or its pid gone on this host), then inserts or
//! renews, so two agents racing for a file cannot both win.

use rusqlite::{Connection, OptionalExtension, Row, params};
use serde_json::json;

use super::rows::ts;
use super::{SqliteStore, now_us, record};
use crate::error::{Context, Result, StoreError};
use crate::event::NewEvent;
use crate::lock::{ChangeSource, FileChange, FileLock, LockOutcome, NewFileChange, NewLock, host_name};
use crate::pid::pid_alive;
use crate::traits::FileLocks;

/// The event kinds locks append (subject: the path).
pub mod kind {
    /// A lock was taken or renewed. Data: `expires_at`, `renewed`.
    pub const LOCK_ACQUIRED: &str = "lock_acquired";
    /// A lock ended. Data: `holder`, `reason` (`released`, `forced`, `expired`, `holder_gone`).
    pub const LOCK_RELEASED: &str = "lock_released";
}

const COLS: &str = "path, agent, pid, host, task, acquired_at, expires_at";

fn lock_row(r: &Row<'_>) -> rusqlite::Result<FileLock> {
    let t = |i: usize| ts(r, i);
    Ok(FileLock {
        path: r.get(0)?,
        agent: r.get(1)?,
        pid: r.get(2)?,
        host: r.get(3)?,
        task: r.get(4)?,
        since: t(5)?,
        expires_at: t(6)?,
    })
}

/// Why `lock` no longer holds at `now`, or `None` while it does.
pub(crate) fn stale(lock: &FileLock, now: i64, host: &str) -> Option<&'static str> {
    if lock.expires_at.as_microsecond() <= now {
        return Some("expired");
    }
    match lock.pid {
        Some(pid) if lock.host == host && !pid_alive(pid) => Some("holder_gone"),
        _ => None,
    }
}

/// When a lease of `ttl_seconds` taken at `now` ends.
pub(crate) fn lease_end(now: i64, ttl_seconds: u64) -> i64 {
    now.saturating_add(i64::try_from(ttl_seconds).unwrap_or(i64::MAX / 2_000_000) * 1_000_000)
}

/// The event of `lock` ending for `reason`, released by `by` (its holder when `None`).
pub(crate) fn released_event(lock: &FileLock, reason: &str, by: Option<&str>) -> NewEvent {
    NewEvent {
        kind: kind::LOCK_RELEASED.into(),
        actor: Some(by.unwrap_or(&lock.agent).to_string()),
        subject: Some(lock.path.clone()),
        data: json!({"holder": lock.agent, "reason": reason}),
    }
}

/// The event of `new` being taken (or renewed) until `expires`.
pub(crate) fn acquired_event(new: &NewLock, expires: i64, renewed: bool) -> NewEvent {
    NewEvent {
        kind: kind::LOCK_ACQUIRED.into(),
        actor: Some(new.agent.clone()),
        subject: Some(new.path.clone()),
        data: json!({"expires_at": expires, "renewed": renewed}),
    }
}

fn find(c: &Connection, path: &str) -> Result<Option<FileLock>> {
    c.prepare_cached(&format!("SELECT {COLS} FROM file_locks WHERE path = ?1"))
        .and_then(|mut s| s.query_row(params![path], lock_row).optional())
        .op("read a file lock")
}

fn delete(tx: &Connection, lock: &FileLock, reason: &str, by: Option<&str>, at: i64) -> Result<()> {
    tx.prepare_cached("DELETE FROM file_locks WHERE path = ?1")
        .and_then(|mut s| s.execute(params![lock.path]))
        .op("release a file lock")?;
    record(tx, at, &released_event(lock, reason, by))?;
    Ok(())
}

/// The lock on `path` that still holds, dropping a stale one.
fn live(tx: &Connection, path: &str, now: i64, host: &str) -> Result<Option<FileLock>> {
    let Some(lock) = find(tx, path)? else { return Ok(None) };
    match stale(&lock, now, host) {
        Some(reason) => {
            delete(tx, &lock, reason, None, now)?;
            Ok(None)
        }
        None => Ok(Some(lock)),
    }
}

impl FileLocks for SqliteStore {
    fn lock_file(&self, new: NewLock) -> Result<LockOutcome> {
        if new.agent.trim().is_empty() {
            return Err(StoreError::EmptyAgentId);
        }
        let host = host_name();
        self.write("take a file lock", |tx| {
            let now = now_us();
            let expires = lease_end(now, new.ttl_seconds);
            let existing = live(tx, &new.path, now, &host)?;
            if let Some(lock) = existing.as_ref().filter(|l| l.agent != new.agent) {
                return Ok(LockOutcome::Held { lock: lock.clone() });
            }
            let pid: Option<u32> = match new.pid {
                Some(pid) => Some(pid),
                None => tx
                    .prepare_cached("SELECT pid FROM agents WHERE id = ?1")
                    .and_then(|mut s| s.query_row(params![new.agent], |r| r.get(0)).optional())
                    .op("read the holder's pid")?
                    .flatten(),
            };
            let since = existing.as_ref().map_or(now, |l| l.since.as_microsecond());
            tx.prepare_cached(
                "INSERT INTO file_locks (path, agent, pid, host, task, acquired_at, expires_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (path) DO UPDATE SET pid = excluded.pid, \
                 host = excluded.host, task = excluded.task, expires_at = excluded.expires_at",
            )
            .and_then(|mut s| s.execute(params![new.path, new.agent, pid, host, new.task, since, expires]))
            .op("take a file lock")?;
            record(tx, now, &acquired_event(&new, expires, existing.is_some()))?;
            let lock = find(tx, &new.path)?.ok_or_else(|| StoreError::BadValue {
                column: "file_locks",
                detail: "the lock just taken is gone".into(),
            })?;
            Ok(LockOutcome::Acquired { lock })
        })
    }

    fn unlock_file(&self, path: &str, agent: Option<&str>) -> Result<Option<FileLock>> {
        let host = host_name();
        self.write("release a file lock", |tx| {
            let now = now_us();
            let Some(lock) = live(tx, path, now, &host)? else { return Ok(None) };
            match agent {
                Some(a) if a != lock.agent => {
                    Err(StoreError::LockHeld { path: path.to_string(), holder: lock.agent.clone() })
                }
                Some(_) => delete(tx, &lock, "released", None, now).map(|()| Some(lock)),
                None => delete(tx, &lock, "forced", Some("user"), now).map(|()| Some(lock)),
            }
        })
    }

    fn file_lock(&self, path: &str) -> Result<Option<FileLock>> {
        let host = host_name();
        let found = self.read("read a file lock", |c| find(c, path))?;
        match found {
            None => Ok(None),
            // Only a stale lock costs a write.
            Some(lock) if stale(&lock, now_us(), &host).is_some() => {
                self.write("release a stale file lock", |tx| live(tx, path, now_us(), &host))
            }
            Some(lock) => Ok(Some(lock)),
        }
    }

    fn file_locks(&self) -> Result<Vec<FileLock>> {
        let host = host_name();
        self.write("list file locks", |tx| {
            let now = now_us();
            let all: Vec<FileLock> = tx
                .prepare_cached(&format!("SELECT {COLS} FROM file_locks ORDER BY path"))
                .and_then(|mut s| s.query_map([], lock_row)?.collect())
                .op("list file locks")?;
            let mut held = Vec::with_capacity(all.len());
            for lock in all {
                match stale(&lock, now, &host) {
                    Some(reason) => delete(tx, &lock, reason, None, now)?,
                    None => held.push(lock),
                }
            }
            Ok(held)
        })
    }

    fn record_change(&self, change: NewFileChange) -> Result<()> {
        self.write("record a file change", |tx| {
            tx.prepare_cached("INSERT INTO file_changes (path, agent, task, source, at) VALUES (?1, ?2, ?3, ?4, ?5)")
                .and_then(|mut s| {
                    s.execute(params![change.path, change.agent, change.task, change.source.as_str(), now_us()])
                })
                .op("record a file change")?;
            Ok(())
        })
    }

    fn file_history(&self, path: &str, limit: u32) -> Result<Vec<FileChange>> {
        self.read("read a file's history", |c| {
            c.prepare_cached(
                "SELECT path, agent, task, source, at FROM file_changes WHERE path = ?1 ORDER BY at DESC, id DESC \
                 LIMIT ?2",
            )
            .and_then(|mut s| {
                s.query_map(params![path, limit], |r| {
                    let source = match r.get::<_, String>(3)?.as_str() {
                        "post_run" => ChangeSource::PostRun,
                        _ => ChangeSource::Hook,
                    };
                    Ok(FileChange { path: r.get(0)?, agent: r.get(1)?, task: r.get(2)?, source, at: ts(r, 4)? })
                })?
                .collect()
            })
            .op("read a file's history")
        })
    }
}
