//! Many rows in few statements: a plan of 100,000 tasks is written as a few
//! hundred multi-row `INSERT`s rather than one statement per row, which is
//! where most of an import's time went (each statement's step through the
//! VM, its bindings and its index updates one row at a time).

use rusqlite::{Connection, ToSql};

use crate::error::{Context, Result};

/// Rows per `INSERT`: 16 values a task row stays far below SQLite's limit of
/// 32,766 bound variables, and the statement text stays small.
const ROWS_PER_INSERT: usize = 200;

/// A batch at least this large, into tables holding fewer rows than it, is
/// inserted with the tables' secondary indexes dropped and built again after.
const REBUILD_INDEXES_AT: usize = 10_000;

/// Run `insert` (of `rows` new tasks into a board of `existing` tasks) with
/// the secondary indexes of `tasks` and `task_deps` dropped, and create them
/// again after, when the batch outnumbers the board: SQLite builds an index
/// from sorted keys in one pass, cheaper than maintaining it row by row.
/// Inside the caller's transaction, so all or nothing: a failed insert or a
/// crash rolls the drop back with it. Each index is created again from its own
/// definition in the database's schema, so the migrations stay its one source.
pub(crate) fn with_indexes_rebuilt<T>(
    tx: &Connection,
    rows: usize,
    existing: i64,
    insert: impl FnOnce() -> Result<T>,
) -> Result<T> {
    if rows < REBUILD_INDEXES_AT || i64::try_from(rows).unwrap_or(i64::MAX) <= existing {
        return insert();
    }
    let indexes = board_indexes(tx)?;
    for (name, _) in &indexes {
        tx.execute_batch(&format!("DROP INDEX \"{}\"", name.replace('"', "\"\"")))
            .op("drop an index for a bulk insert")?;
    }
    crate::phases::mark("drop the indexes");
    let value = insert()?;
    for (_, sql) in &indexes {
        tx.execute_batch(sql).op("build an index after a bulk insert")?;
        crate::phases::mark("build the indexes");
    }
    Ok(value)
}

/// The secondary indexes of `tasks` and `task_deps` (name, definition); the
/// indexes of their keys (no definition) are not among them.
fn board_indexes(tx: &Connection) -> Result<Vec<(String, String)>> {
    tx.prepare(
        "SELECT name, sql FROM sqlite_schema \
         WHERE type = 'index' AND tbl_name IN ('tasks', 'task_deps') AND sql IS NOT NULL ORDER BY name",
    )
    .and_then(|mut s| s.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect())
    .op("list the board's indexes")
}

/// One task row, borrowed from the batch being created.
pub(crate) struct TaskRow<'a> {
    /// Its number (`seq`), given so dependencies can name it before it is written.
    pub seq: i64,
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

const TASK_INSERT: &str = "INSERT INTO tasks (seq, id, subject, description, status, assignee, created_by, blocked_by, \
     open_blockers, feature, wave, grp, files, created_at, updated_at, completed_at) VALUES ";
const TASK_VALUES: &str = "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)";

/// Insert `rows`, created at `now`, in chunks of [`ROWS_PER_INSERT`]. A
/// batch of at least [`REBUILD_INDEXES_AT`] rows that all meet the table's
/// `CHECK`s ([`meets_task_checks`]) goes in with SQLite's evaluation of them
/// off: per row they cost about as much as the rest of the insert (`trim`
/// copies the subject). A batch with a row that fails them goes in with them
/// on, so SQLite refuses it with its own error, as for any other write.
pub(crate) fn insert_tasks(tx: &Connection, rows: &[TaskRow<'_>], now: i64) -> Result<()> {
    if rows.len() < REBUILD_INDEXES_AT || !rows.iter().all(meets_task_checks) {
        return insert_task_chunks(tx, rows, now);
    }
    // A connection flag, and one that may change inside a transaction;
    // changing it expires every prepared statement, so none compiled without
    // the checks runs after it is back on. Put back whatever the insert returns.
    tx.pragma_update(None, "ignore_check_constraints", true).op("create tasks in bulk")?;
    let inserted = insert_task_chunks(tx, rows, now);
    let restored = tx.pragma_update(None, "ignore_check_constraints", false).op("create tasks in bulk");
    inserted?;
    restored
}

/// Whether `r`, written by [`insert_task_chunks`], meets every `CHECK` of
/// the `tasks` table (schema `V1`), written out here. Most hold by how the
/// row is written: status `completed` with `completed_at` and an assignee
/// (its creator) when done, else `pending` with neither.
fn meets_task_checks(r: &TaskRow<'_>) -> bool {
    // `length(trim(subject)) > 0`: SQLite's `trim` takes spaces only.
    let subject = !r.subject.trim_matches(' ').is_empty();
    // `open_blockers >= 0` and `status = 'pending' OR open_blockers = 0`.
    let blockers = r.open_blockers >= 0 && (!r.done || r.open_blockers == 0);
    subject && blockers
}

fn insert_task_chunks(tx: &Connection, rows: &[TaskRow<'_>], now: i64) -> Result<()> {
    let completed_at = Some(now);
    for chunk in rows.chunks(ROWS_PER_INSERT) {
        let mut values: Vec<&dyn ToSql> = Vec::with_capacity(chunk.len() * 16);
        for r in chunk {
            values.extend_from_slice(&[
                &r.seq,
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

/// Record `(task, blocker)` dependencies by task number (a pair already
/// recorded is kept), given in the table's key order: each row lands beside
/// the last in the B-tree instead of anywhere in it (hundreds of thousands
/// for a large plan).
pub(crate) fn insert_deps(tx: &Connection, deps: &[(i64, i64)]) -> Result<()> {
    const HEAD: &str = "INSERT OR IGNORE INTO task_deps (task_seq, blocker_seq) VALUES ";
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
    use rusqlite::Connection;

    use super::{REBUILD_INDEXES_AT, with_indexes_rebuilt};
    use crate::error::{Result, StoreError};

    fn indexes(c: &Connection) -> Vec<(String, String)> {
        super::board_indexes(c).unwrap()
    }

    #[test]
    fn a_large_batch_drops_the_indexes_and_builds_them_again_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::SqliteStore::open(&dir.path().join("t.db")).unwrap();
        let mut conn = store.lock();
        let schema = indexes(&conn);
        assert_eq!(schema.len(), 5, "{schema:?}");
        let tx = conn.transaction().unwrap();
        // Small, or not larger than the board: maintained row by row.
        let kept = with_indexes_rebuilt(&tx, REBUILD_INDEXES_AT - 1, 0, || Ok(indexes(&tx).len())).unwrap();
        let kept_on_a_larger_board =
            with_indexes_rebuilt(&tx, REBUILD_INDEXES_AT, REBUILD_INDEXES_AT as i64, || Ok(indexes(&tx).len()))
                .unwrap();
        assert_eq!((kept, kept_on_a_larger_board), (5, 5));
        // Large: gone while the rows go in, the same definitions after.
        let inside = with_indexes_rebuilt(&tx, REBUILD_INDEXES_AT, 0, || Ok(indexes(&tx).len())).unwrap();
        assert_eq!(inside, 0);
        assert_eq!(indexes(&tx), schema);
        // A failed insert rolls the drop back with the transaction.
        let failed: Result<()> = with_indexes_rebuilt(&tx, REBUILD_INDEXES_AT, 0, || Err(StoreError::EmptySubject));
        assert!(failed.is_err());
        tx.rollback().unwrap();
        assert_eq!(indexes(&conn), schema);
    }

    /// `n` pending rows numbered from 1, none waiting for another.
    fn rows(ids: &[String]) -> Vec<super::TaskRow<'_>> {
        ids.iter()
            .enumerate()
            .map(|(i, id)| super::TaskRow {
                seq: i as i64 + 1,
                id,
                subject: "do it",
                description: "",
                done: false,
                created_by: "lead",
                blocked_by: "[]".into(),
                open_blockers: 0,
                feature: Some("f"),
                wave: Some(1),
                group: None,
                files: "[]".into(),
            })
            .collect()
    }

    fn checks_ignored(c: &Connection) -> bool {
        c.pragma_query_value(None, "ignore_check_constraints", |r| r.get(0)).unwrap()
    }

    #[test]
    fn a_large_batch_skips_the_checks_it_meets_and_puts_them_back() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::SqliteStore::open(&dir.path().join("t.db")).unwrap();
        let mut conn = store.lock();
        let ids: Vec<String> = (0..REBUILD_INDEXES_AT).map(|i| format!("f/{i}")).collect();
        let tx = conn.transaction().unwrap();
        super::insert_tasks(&tx, &rows(&ids), 1).unwrap();
        assert!(!checks_ignored(&tx));
        // The checks hold again for the next statement, a cached one included.
        let broken = tx.execute("UPDATE tasks SET status = 'completed' WHERE seq = 1", []).unwrap_err();
        assert!(broken.to_string().contains("CHECK constraint failed"), "{broken}");
        tx.commit().unwrap();
        drop(conn);
        // `integrity_check` evaluates the CHECKs of every row.
        let problems = store.verify().unwrap();
        assert!(problems.is_empty(), "{problems:?}");
    }

    #[test]
    fn a_large_batch_with_a_row_that_fails_a_check_is_refused_by_sqlite() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::SqliteStore::open(&dir.path().join("t.db")).unwrap();
        let mut conn = store.lock();
        let ids: Vec<String> = (0..REBUILD_INDEXES_AT).map(|i| format!("f/{i}")).collect();
        let mut batch = rows(&ids);
        // Done while one of its blockers is still open.
        (batch[7].done, batch[7].open_blockers) = (true, 1);
        let tx = conn.transaction().unwrap();
        let err = super::insert_tasks(&tx, &batch, 1).unwrap_err();
        assert!(
            matches!(&err, StoreError::Sqlite { source, .. } if source.to_string().contains("CHECK constraint failed")),
            "{err:?}"
        );
        assert!(!checks_ignored(&tx));
    }

    /// `meets_task_checks` restates the `tasks` table's CHECKs: a migration
    /// that adds, drops or changes one must change it too.
    #[test]
    fn the_tasks_table_has_the_checks_written_out() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::SqliteStore::open(&dir.path().join("t.db")).unwrap();
        let conn = store.lock();
        let sql: String = conn
            .query_row("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'tasks'", [], |r| r.get(0))
            .unwrap();
        let checks: Vec<&str> = sql.split("CHECK").skip(1).map(|c| c.split_once(')').map_or(c, |(c, _)| c)).collect();
        let expected = [
            " (length(trim(subject", // `> 0`
            " (status IN ('pending', 'in_progress', 'completed'",
            " (open_blockers >= 0",
            " ((status = 'completed'", // `= (completed_at IS NOT NULL)`
            " (status = 'pending' OR assignee IS NOT NULL",
            " (status = 'pending' OR open_blockers = 0",
        ];
        assert_eq!(checks, expected, "the tasks table's CHECKs changed: update meets_task_checks\n{sql}");
    }

    #[test]
    fn the_written_out_checks_are_the_schemas() {
        let ids = ["f/a".to_string()];
        let ok = |edit: fn(&mut super::TaskRow<'_>)| {
            let mut row = rows(&ids).remove(0);
            edit(&mut row);
            super::meets_task_checks(&row)
        };
        assert!(ok(|_| {}));
        assert!(!ok(|r| r.subject = "  "), "SQLite's trim takes spaces");
        assert!(ok(|r| r.subject = "\t"), "and nothing else");
        assert!(!ok(|r| r.open_blockers = -1));
        assert!(!ok(|r| (r.done, r.open_blockers) = (true, 2)));
        assert!(ok(|r| (r.done, r.open_blockers) = (false, 2)));
        assert!(ok(|r| r.done = true));
    }

    #[test]
    fn a_statement_holds_one_group_of_values_per_row() {
        assert_eq!(super::statement("INSERT INTO t VALUES ", "(?,?)", 3), "INSERT INTO t VALUES (?,?),(?,?),(?,?)");
    }
}
