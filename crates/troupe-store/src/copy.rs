//! Copying a whole store between backends (`troupe store migrate`): SQLite to
//! PostgreSQL and back. Both backends hold the same tables and columns at the
//! same schema version (see `postgres::schema`), so the copy is generic: every
//! table of the schema, in foreign-key order, rows in primary-key order. The
//! target must be empty; afterwards each table's row count and a SHA-256 of
//! its rows are compared on both sides, and any difference is an error.

use std::collections::BTreeMap;

use rusqlite::types::ValueRef;
use sha2::{Digest, Sha256};

use crate::error::{Context, Result, StoreError};
use crate::{PgStore, SqliteStore};

/// One table as copied.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TableCopy {
    /// The table.
    pub table: String,
    /// Rows copied (equal on both sides).
    pub rows: u64,
    /// SHA-256 of the rows in primary-key order (equal on both sides).
    pub checksum: String,
}

/// A value of a troupe column: every column is an integer or text.
#[derive(Debug, Clone, PartialEq)]
enum Value {
    Null,
    Int(i64),
    Text(String),
}

/// A store to copy from or to: a PostgreSQL URL, or an SQLite file path.
enum Db {
    Sqlite(rusqlite::Connection),
    Postgres(postgres::Client),
}

/// Copy the store at `from` into the empty store at `to` (each a
/// `postgres://` URL or an SQLite file path, one of each), then verify it.
pub fn migrate(from: &str, to: &str) -> Result<Vec<TableCopy>> {
    crate::postgres::off_runtime(|| migrate_here(from, to))
}

fn migrate_here(from: &str, to: &str) -> Result<Vec<TableCopy>> {
    let (mut source, mut target) = (connect(from)?, connect(to)?);
    let tables = match (&source, &target) {
        (Db::Sqlite(c), Db::Postgres(_)) | (Db::Postgres(_), Db::Sqlite(c)) => tables(c)?,
        _ => return Err(bad("migrate copies between SQLite and PostgreSQL: give one of each")),
    };
    for (table, _, _) in &tables {
        if count(&mut target, table)? > 0 {
            return Err(bad(&format!(
                "the target is not empty (table `{table}` has rows); migrate into a new database"
            )));
        }
    }
    let mut copied = Vec::new();
    let mut rows_of = BTreeMap::new();
    for (table, columns, order) in &tables {
        rows_of.insert(table.clone(), read(&mut source, table, columns, order)?);
    }
    write(&mut target, &tables, &rows_of)?;
    for (table, columns, order) in &tables {
        let (a, b) = (checksum(&rows_of[table]), checksum(&read(&mut target, table, columns, order)?));
        if a != b {
            return Err(bad(&format!("table `{table}` differs after the copy (checksum {a} vs {b})")));
        }
        copied.push(TableCopy { table: table.clone(), rows: rows_of[table].len() as u64, checksum: a });
    }
    Ok(copied)
}

/// Snapshot the store at `from` (an SQLite file path or a `postgres://` URL)
/// into a new SQLite file `to` (`troupe replay`'s copy of the store as a run
/// found it), and return the id of the newest event it holds (0 when none).
/// An SQLite store is copied with `VACUUM INTO`, a consistent copy taken in
/// one read transaction beside running writers; PostgreSQL through [`migrate`].
pub fn snapshot(from: &str, to: &std::path::Path) -> Result<i64> {
    crate::postgres::off_runtime(|| snapshot_here(from, to))
}

fn snapshot_here(from: &str, to: &std::path::Path) -> Result<i64> {
    if to.exists() {
        return Err(bad(&format!("{} exists already; a snapshot goes into a new file", to.display())));
    }
    let target = to.display().to_string();
    if from.starts_with("postgres://") || from.starts_with("postgresql://") {
        migrate(from, &target)?;
    } else {
        let c = rusqlite::Connection::open(from).op("open the database")?;
        c.execute("VACUUM INTO ?1", [&target]).op("snapshot the database")?;
    }
    let c = rusqlite::Connection::open(to).op("open the snapshot")?;
    // `VACUUM INTO` writes a rollback-journal database; the store runs in WAL
    // mode (a sandboxed teammate may write the database, never create a journal).
    c.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0)).op("snapshot the database")?;
    c.query_row("SELECT coalesce(max(id), 0) FROM events", [], |r| r.get(0)).op("read the snapshot's events")
}

fn bad(detail: &str) -> StoreError {
    StoreError::BadValue { column: "store", detail: detail.to_string() }
}

/// Open through the store (creating or migrating its schema), then take a plain connection.
fn connect(place: &str) -> Result<Db> {
    if place.starts_with("postgres://") || place.starts_with("postgresql://") {
        Ok(Db::Postgres(PgStore::open(place)?.client()?))
    } else {
        let path = std::path::Path::new(place);
        drop(SqliteStore::open(path)?);
        Ok(Db::Sqlite(rusqlite::Connection::open(path).op("open the database")?))
    }
}

/// The schema's tables (from SQLite's catalog) with their columns and
/// primary-key order, parents before the tables that refer to them.
fn tables(c: &rusqlite::Connection) -> Result<Vec<(String, Vec<String>, String)>> {
    let names: Vec<String> = c
        .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
        .op("list tables")?;
    let mut info = Vec::new();
    for name in &names {
        let cols: Vec<(String, i64)> = c
            .prepare(&format!("SELECT name, pk FROM pragma_table_info('{name}') ORDER BY cid"))
            .and_then(|mut s| s.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect())
            .op("read a table's columns")?;
        let mut pk: Vec<&(String, i64)> = cols.iter().filter(|(_, k)| *k > 0).collect();
        pk.sort_by_key(|(_, k)| *k);
        let order = pk.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(", ");
        let parents: Vec<String> = c
            .prepare(&format!("SELECT DISTINCT \"table\" FROM pragma_foreign_key_list('{name}')"))
            .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
            .op("read a table's keys")?;
        info.push((name.clone(), cols.into_iter().map(|(n, _)| n).collect::<Vec<_>>(), order, parents));
    }
    // Parents first (a table referring to itself, like messages, is ordered by its own key).
    let mut ordered: Vec<(String, Vec<String>, String)> = Vec::new();
    while ordered.len() < info.len() {
        let before = ordered.len();
        for (name, cols, order, parents) in &info {
            let placed = |t: &String| ordered.iter().any(|(n, _, _)| n == t);
            if !placed(name) && parents.iter().all(|p| p == name || placed(p)) {
                ordered.push((name.clone(), cols.clone(), order.clone()));
            }
        }
        if ordered.len() == before {
            return Err(bad("the tables' foreign keys form a cycle"));
        }
    }
    Ok(ordered)
}

fn count(db: &mut Db, table: &str) -> Result<i64> {
    let sql = format!("SELECT count(*) FROM {table}");
    match db {
        Db::Sqlite(c) => c.query_row(&sql, [], |r| r.get(0)).op("count rows"),
        Db::Postgres(c) => Ok(c.query_one(&sql, &[]).op("count rows")?.get(0)),
    }
}

fn read(db: &mut Db, table: &str, columns: &[String], order: &str) -> Result<Vec<Vec<Value>>> {
    let sql = format!("SELECT {} FROM {table} ORDER BY {order}", columns.join(", "));
    match db {
        Db::Sqlite(c) => {
            let mut stmt = c.prepare(&sql).op("read a table")?;
            let rows = stmt
                .query_map([], |r| {
                    (0..columns.len())
                        .map(|i| {
                            Ok(match r.get_ref(i)? {
                                ValueRef::Null => Value::Null,
                                ValueRef::Integer(v) => Value::Int(v),
                                ValueRef::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
                                other => Value::Text(format!("{other:?}")),
                            })
                        })
                        .collect::<rusqlite::Result<Vec<Value>>>()
                })
                .op("read a table")?;
            rows.collect::<rusqlite::Result<Vec<_>>>().op("read a table")
        }
        Db::Postgres(c) => {
            let rows = c.query(&sql, &[]).op("read a table")?;
            rows.iter()
                .map(|r| {
                    (0..columns.len())
                        .map(|i| {
                            let int = *r.columns()[i].type_() == postgres::types::Type::INT8;
                            Ok(if int {
                                r.try_get::<_, Option<i64>>(i).op("read a value")?.map_or(Value::Null, Value::Int)
                            } else {
                                r.try_get::<_, Option<String>>(i).op("read a value")?.map_or(Value::Null, Value::Text)
                            })
                        })
                        .collect()
                })
                .collect()
        }
    }
}

type Tables = [(String, Vec<String>, String)];

fn write(db: &mut Db, tables: &Tables, rows_of: &BTreeMap<String, Vec<Vec<Value>>>) -> Result<()> {
    match db {
        Db::Sqlite(c) => {
            let tx = c.transaction().op("copy into SQLite")?;
            for (table, columns, _) in tables {
                let marks: Vec<String> = (1..=columns.len()).map(|i| format!("?{i}")).collect();
                let sql = format!("INSERT INTO {table} ({}) VALUES ({})", columns.join(", "), marks.join(", "));
                let mut stmt = tx.prepare(&sql).op("copy a table")?;
                for row in &rows_of[table] {
                    let values: Vec<rusqlite::types::Value> = row
                        .iter()
                        .map(|v| match v {
                            Value::Null => rusqlite::types::Value::Null,
                            Value::Int(i) => rusqlite::types::Value::Integer(*i),
                            Value::Text(t) => rusqlite::types::Value::Text(t.clone()),
                        })
                        .collect();
                    stmt.execute(rusqlite::params_from_iter(values)).op("copy a row")?;
                }
            }
            tx.commit().op("copy into SQLite")
        }
        Db::Postgres(c) => {
            let mut tx = c.transaction().op("copy into PostgreSQL")?;
            for (table, columns, _) in tables {
                let marks: Vec<String> = (1..=columns.len()).map(|i| format!("${i}")).collect();
                let sql = format!("INSERT INTO {table} ({}) VALUES ({})", columns.join(", "), marks.join(", "));
                let stmt = tx.prepare(&sql).op("copy a table")?;
                for row in &rows_of[table] {
                    let params: Vec<Box<dyn postgres::types::ToSql + Sync>> = row
                        .iter()
                        .zip(stmt.params())
                        .map(|(v, ty)| -> Box<dyn postgres::types::ToSql + Sync> {
                            match v {
                                Value::Int(i) => Box::new(*i),
                                Value::Text(t) => Box::new(t.clone()),
                                Value::Null if *ty == postgres::types::Type::INT8 => Box::new(None::<i64>),
                                Value::Null => Box::new(None::<String>),
                            }
                        })
                        .collect();
                    let refs: Vec<&(dyn postgres::types::ToSql + Sync)> = params.iter().map(|p| p.as_ref()).collect();
                    tx.execute(&stmt, &refs).op("copy a row")?;
                }
                // Serial columns continue after the copied ids.
                for column in columns {
                    let seq: Option<String> = tx
                        .query_one("SELECT pg_get_serial_sequence($1, $2)", &[table, column])
                        .op("find a sequence")?
                        .get(0);
                    if let Some(seq) = seq {
                        let sql = format!(
                            "SELECT setval($1::text::regclass, max({column})) FROM {table} HAVING max({column}) IS NOT NULL"
                        );
                        tx.query(&sql, &[&seq]).op("continue a sequence")?;
                    }
                }
            }
            tx.commit().op("copy into PostgreSQL")
        }
    }
}

/// SHA-256 of rows, each value tagged with its kind so `1` and `"1"` differ.
fn checksum(rows: &[Vec<Value>]) -> String {
    let mut hash = Sha256::new();
    for row in rows {
        for v in row {
            match v {
                Value::Null => hash.update(b"N;"),
                Value::Int(i) => hash.update(format!("I{i};").as_bytes()),
                Value::Text(t) => hash.update(format!("T{}:{t};", t.len()).as_bytes()),
            }
        }
        hash.update(b"\n");
    }
    hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
}
