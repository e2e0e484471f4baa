//! File locks and the write history on PostgreSQL (schema `V7_LOCKS`), with
//! SQLite's rules ([`crate::sqlite::locks`]): a write first drops the path's
//! stale lock, then inserts or renews, under [`FILE_LOCKS_LOCK`] so that two
//! agents racing for a free file cannot both win.

use postgres::Row;

use super::rows::{all, get, ts};
use super::{FILE_LOCKS_LOCK, PgStore, Tx, now_us, record};
use crate::error::{Result, StoreError};
use crate::lock::{ChangeSource, FileChange, FileLock, LockOutcome, NewFileChange, NewLock, host_name};
use crate::sqlite::locks::{acquired_event, lease_end, released_event, stale};
use crate::traits::FileLocks;

const COLS: &str = "path, agent, pid, host, task, acquired_at, expires_at";

fn lock_row(row: &Row) -> Result<FileLock> {
    let pid: Option<i64> = get(row, 2)?;
    Ok(FileLock {
        path: get(row, 0)?,
        agent: get(row, 1)?,
        pid: pid.and_then(|p| u32::try_from(p).ok()),
        host: get(row, 3)?,
        task: get(row, 4)?,
        since: ts(row, 5)?,
        expires_at: ts(row, 6)?,
    })
}

fn find(tx: &mut Tx<'_>, path: &str) -> Result<Option<FileLock>> {
    let sql = format!("SELECT {COLS} FROM file_locks WHERE path = $1");
    tx.opt("read a file lock", &sql, &[&path])?.as_ref().map(lock_row).transpose()
}

fn delete(tx: &mut Tx<'_>, lock: &FileLock, reason: &str, by: Option<&str>, now: i64) -> Result<()> {
    tx.exec("release a file lock", "DELETE FROM file_locks WHERE path = $1", &[&lock.path])?;
    record(tx, now, &released_event(lock, reason, by))
}

/// The lock on `path` that still holds, dropping a stale one.
fn live(tx: &mut Tx<'_>, path: &str, now: i64, host: &str) -> Result<Option<FileLock>> {
    let Some(lock) = find(tx, path)? else { return Ok(None) };
    match stale(&lock, now, host) {
        Some(reason) => delete(tx, &lock, reason, None, now).map(|()| None),
        None => Ok(Some(lock)),
    }
}

impl FileLocks for PgStore {
    fn lock_file(&self, new: NewLock) -> Result<LockOutcome> {
        if new.agent.trim().is_empty() {
            return Err(StoreError::EmptyAgentId);
        }
        let host = host_name();
        self.write("take a file lock", |tx| {
            tx.lock(FILE_LOCKS_LOCK)?;
            let now = now_us();
            let expires = lease_end(now, new.ttl_seconds);
            let existing = live(tx, &new.path, now, &host)?;
            if let Some(lock) = existing.as_ref().filter(|l| l.agent != new.agent) {
                return Ok(LockOutcome::Held { lock: lock.clone() });
            }
            let pid: Option<i64> = match new.pid {
                Some(pid) => Some(i64::from(pid)),
                None => match tx.opt("read the holder's pid", "SELECT pid FROM agents WHERE id = $1", &[&new.agent])? {
                    Some(row) => get(&row, 0)?,
                    None => None,
                },
            };
            let since = existing.as_ref().map_or(now, |l| l.since.as_microsecond());
            tx.exec(
                "take a file lock",
                "INSERT INTO file_locks (path, agent, pid, host, task, acquired_at, expires_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (path) DO UPDATE SET pid = excluded.pid, \
                 host = excluded.host, task = excluded.task, expires_at = excluded.expires_at",
                &[&new.path, &new.agent, &pid, &host, &new.task, &since, &expires],
            )?;
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
            tx.lock(FILE_LOCKS_LOCK)?;
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
        let found = self.read("read a file lock", |tx| find(tx, path))?;
        match found {
            None => Ok(None),
            // Only a stale lock costs a write.
            Some(lock) if stale(&lock, now_us(), &host).is_some() => self.write("release a stale file lock", |tx| {
                tx.lock(FILE_LOCKS_LOCK)?;
                live(tx, path, now_us(), &host)
            }),
            Some(lock) => Ok(Some(lock)),
        }
    }

    fn file_locks(&self) -> Result<Vec<FileLock>> {
        let host = host_name();
        self.write("list file locks", |tx| {
            tx.lock(FILE_LOCKS_LOCK)?;
            let now = now_us();
            let sql = format!("SELECT {COLS} FROM file_locks ORDER BY path");
            let locks = all(tx.query("list file locks", &sql, &[])?, lock_row)?;
            let mut held = Vec::with_capacity(locks.len());
            for lock in locks {
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
            tx.exec(
                "record a file change",
                "INSERT INTO file_changes (path, agent, task, source, at) VALUES ($1, $2, $3, $4, $5)",
                &[&change.path, &change.agent, &change.task, &change.source.as_str(), &now_us()],
            )
            .map(drop)
        })
    }

    fn file_history(&self, path: &str, limit: u32) -> Result<Vec<FileChange>> {
        self.read("read a file's history", |tx| {
            let rows = tx.query(
                "read a file's history",
                "SELECT path, agent, task, source, at FROM file_changes WHERE path = $1 ORDER BY at DESC, id DESC \
                 LIMIT $2",
                &[&path, &i64::from(limit)],
            )?;
            all(rows, |row| {
                let source = match get::<&str>(row, 3)? {
                    "post_run" => ChangeSource::PostRun,
                    _ => ChangeSource::Hook,
                };
                Ok(FileChange { path: get(row, 0)?, agent: get(row, 1)?, task: get(row, 2)?, source, at: ts(row, 4)? })
            })
        })
    }
}
