//! Many rows in few statements: a plan of 100,000 tasks is written as a few
//! hundred multi-row `INSERT`s rather than one statement per row, which is
//! where most of an import's time went (each statement's step through the
//! VM, its bindings and its index updates one row at a time).

use rusqlite::{Connection, ToSql};

use crate::error::{Context, Result};

/// Rows per `INSERT`: 15 values a task row stays far below SQLite's limit of
/// 32,766 bound variables, and the statement text stays small.
const ROWS_PER_INSERT: usize = 200;

/// One task row, borrowed from the batch being created.
pub(crate) struct TaskRow<'a> {
    pub id: &'a str,
    pub subject: &'a str,
    pub description: &'a str,
    /// Created completed (assigned to its creator): a plan's work already done.
    pub done: bool,
    pub created_by: &'a str,
    /// `blocked_by` as JSON text.
    pub blocked_by: String,
    pub open_blockers: i64,
    pub feature: Option<&'a str>,
    pub wave: Option<u32>,
    pub group: Option<&'a str>,
    /// `files` as JSON text.
    pub files: String,
}

const TASK_INSERT: &str = "INSERT INTO tasks (id, subject, description, status, assignee, created_by, blocked_by, \
     open_blockers, feature, wave, grp, files, created_at, updated_at, completed_at) VALUES ";
const TASK_VALUES: &str = "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)";

/// Insert `rows`, created at `now`, in chunks of [`ROWS_PER_INSERT`].
pub(crate) fn insert_tasks(tx: &Connection, rows: &[TaskRow<'_>], now: i64) -> Result<()> {
    let completed_at = Some(now);
    for chunk in rows.chunks(ROWS_PER_INSERT) {
        let mut values: Vec<&dyn ToSql> = Vec::with_capacity(chunk.len() * 15);
        for r in chunk {
            values.extend_from_slice(&[
                &r.id,
                &r.subject,
                &r.description,
                if r.done { &"completed" } else { &"pending" },
                if r.done { &r.created_by } else { &rusqlite::types::Null },
                &r.created_by,
                &r.blocked_by,
                &r.open_blockers,
                &r.feature,
                &r.wave,
                &r.group,
                &r.files,
                &now,
                &now,
                if r.done { &completed_at } else { &rusqlite::types::Null },
            ]);
        }
        tx.prepare_cached(&statement(TASK_INSERT, TASK_VALUES, chunk.len()))
            .and_then(|mut s| s.execute(values.as_slice()))
            .op("create a task")?;
    }
    Ok(())
}

/// Record `(task, blocker)` dependencies (a pair already recorded is kept).
/// Inserted in key order: each row lands beside the last in the table's
/// B-tree instead of anywhere in it (hundreds of thousands for a large plan).
pub(crate) fn insert_deps(tx: &Connection, deps: &mut [(&str, &str)]) -> Result<()> {
    const HEAD: &str = "INSERT OR IGNORE INTO task_deps (task_id, blocker_id) VALUES ";
    deps.sort_unstable();
    for chunk in deps.chunks(ROWS_PER_INSERT * 4) {
        let values: Vec<&dyn ToSql> = chunk.iter().flat_map(|(t, b)| [t as &dyn ToSql, b as &dyn ToSql]).collect();
        tx.prepare_cached(&statement(HEAD, "(?,?)", chunk.len()))
            .and_then(|mut s| s.execute(values.as_slice()))
            .op("record dependencies")?;
    }
    Ok(())
}

/// `head` followed by `rows` copies of `values`, comma-separated. Only two
/// lengths occur per table (a full chunk and the last one), so the statement
/// cache keeps them prepared.
fn statement(head: &str, values: &str, rows: usize) -> String {
    let mut sql = String::with_capacity(head.len() + rows * (values.len() + 1));
    sql.push_str(head);
    for i in 0..rows {
        if i > 0 {
            sql.push(',');
        }
        sql.push_str(values);
    }
    sql
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_statement_holds_one_group_of_values_per_row() {
        assert_eq!(super::statement("INSERT INTO t VALUES ", "(?,?)", 3), "INSERT INTO t VALUES (?,?),(?,?),(?,?)");
    }
}
