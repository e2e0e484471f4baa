//! Plans on PostgreSQL: the import and replace steps are SQLite's
//! ([`crate::sqlite::plans`]); these are their reads and writes.

use std::collections::HashSet;

use super::board::{exists, get, insert_task_rows};
use super::rows::{all, get as col};
use super::{Tx, record};
use crate::error::Result;
use crate::event::NewEvent;
use crate::sqlite::board::RowOptions;
use crate::sqlite::plans::{PlanRows, StoredPlan};
use crate::task::{NewTask, Task};

pub(crate) use crate::sqlite::plans::{import, replace};

impl PlanRows for Tx<'_> {
    fn ids_under(&mut self, feature: &str) -> Result<HashSet<String>> {
        // Byte order, as SQLite compares: `/` to `0` is the next byte.
        let (from, to) = (format!("{feature}/"), format!("{feature}0"));
        let rows = self.query(
            "find the plan's tasks on the board",
            r#"SELECT id FROM tasks WHERE id COLLATE "C" >= $1 AND id COLLATE "C" < $2"#,
            &[&from, &to],
        )?;
        Ok(all(rows, |r| col(r, 0))?.into_iter().collect())
    }

    fn stored_plan(&mut self, feature: &str) -> Result<Option<StoredPlan>> {
        self.opt("read the imported plan", "SELECT items, tasks FROM plans WHERE feature = $1", &[&feature])?
            .map(|r| Ok(StoredPlan { items: col(&r, 0)?, old_text: col(&r, 1)? }))
            .transpose()
    }

    fn task(&mut self, id: &str) -> Result<Task> {
        get(self, id)
    }

    fn task_exists(&mut self, id: &str) -> Result<bool> {
        exists(self, id)
    }

    fn insert_tasks(&mut self, tasks: Vec<NewTask>, now: i64, options: &RowOptions) -> Result<Vec<String>> {
        insert_task_rows(self, &tasks, now, options)
    }

    fn insert_plan(&mut self, feature: &str, digest: &str, items: &[u8], now: i64) -> Result<()> {
        self.exec(
            "remember the imported plan",
            "INSERT INTO plans (feature, digest, tasks, items, imported_at) VALUES ($1, $2, '', $3, $4)",
            &[&feature, &digest, &items, &now],
        )
        .map(drop)
    }

    fn waiting_for(&mut self, id: &str) -> Result<Vec<String>> {
        let rows = self.query(
            "find tasks waiting for the plan",
            r#"SELECT t.id FROM task_deps d JOIN tasks t ON t.seq = d.task_seq
               WHERE d.blocker_seq = (SELECT seq FROM tasks WHERE id = $1) ORDER BY t.id COLLATE "C""#,
            &[&id],
        )?;
        all(rows, |r| col(r, 0))
    }

    fn remove(&mut self, feature: &str, ids: &[String]) -> Result<()> {
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        self.exec(
            "remove the old plan's dependencies",
            "DELETE FROM task_deps WHERE task_seq IN (SELECT seq FROM tasks WHERE id = ANY($1)) \
             OR blocker_seq IN (SELECT seq FROM tasks WHERE id = ANY($1))",
            &[&ids],
        )?;
        self.exec("remove the old plan", "DELETE FROM tasks WHERE id = ANY($1)", &[&ids])?;
        self.exec("forget the old plan", "DELETE FROM plans WHERE feature = $1", &[&feature]).map(drop)
    }

    fn event(&mut self, now: i64, event: &NewEvent) -> Result<()> {
        record(self, now, event).map(drop)
    }
}
