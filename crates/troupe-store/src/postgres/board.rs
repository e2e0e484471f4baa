//! The task board on PostgreSQL. The checks and refusals are SQLite's own
//! ([`crate::sqlite::board`]); what differs is how rows are locked (see the
//! module documentation of [`super`]).

use serde_json::json;

use super::rows::{self, TASK_COLS, all, get as col};
use super::{BOARD_LOCK, NOTIFIED, Param, PgStore, Tx, now_us, record};
use crate::error::{Result, StoreError};
use crate::event::kind;
use crate::sqlite::board::{
    Blockers, CreatedData, RowOptions, assign_check, assign_ids, batch_index, blocker_check, blocker_states,
    check_batch_acyclic, claim_refused, complete_refused, event, find_path, json_text, non_empty_agent, release_check,
};
use crate::task::{Claim, Completion, ListFilter, NewTask, Task, TaskFilter, TaskStatus};
use crate::traits::Board;

/// How many columns [`TASK_COLS`] names: a claim function's own columns follow them.
const TASK_COLUMNS: usize = columns(TASK_COLS);

const fn columns(list: &str) -> usize {
    let bytes = list.as_bytes();
    let (mut i, mut n) = (0, 1);
    while i < bytes.len() {
        n += (bytes[i] == b',') as usize;
        i += 1;
    }
    n
}

impl Board for PgStore {
    fn create_task(&self, task: NewTask) -> Result<Task> {
        let mut created = self.create_tasks(vec![task])?;
        Ok(created.remove(0))
    }

    fn create_tasks(&self, tasks: Vec<NewTask>) -> Result<Vec<Task>> {
        self.write("create tasks", |tx| {
            let ids = insert_task_rows(tx, &tasks, now_us(), &RowOptions::default())?;
            ids.iter().map(|id| get(tx, id)).collect()
        })
    }

    fn add_blocker(&self, task: &str, blocker: &str, by: &str) -> Result<Task> {
        self.write("add a blocker", |tx| {
            tx.lock(BOARD_LOCK)?;
            let t = get_locked(tx, task, "FOR UPDATE")?;
            let b = get_locked(tx, blocker, "FOR SHARE")?;
            if let Some(unchanged) = blocker_check(t.clone(), blocker, || path_between(tx, blocker, task))? {
                return Ok(unchanged);
            }
            let now = now_us();
            let mut list = t.blocked_by.clone();
            list.push(blocker.to_string());
            let open = i64::from(b.status != TaskStatus::Completed);
            tx.exec(
                "add a blocker",
                "INSERT INTO task_deps (task_seq, blocker_seq) \
                 SELECT t.seq, b.seq FROM tasks t, tasks b WHERE t.id = $1 AND b.id = $2",
                &[&task, &blocker],
            )?;
            tx.exec(
                "add a blocker",
                "UPDATE tasks SET blocked_by = $2, open_blockers = open_blockers + $3, updated_at = $4 WHERE id = $1",
                &[&task, &json_text(&list), &open, &now],
            )?;
            record(tx, now, &event(kind::TASK_BLOCKER_ADDED, by, task, json!({ "blocker": blocker })))?;
            get(tx, task)
        })
    }

    fn task(&self, id: &str) -> Result<Task> {
        self.read("read a task", |tx| get(tx, id))
    }

    fn claim(&self, id: &str, agent: &str) -> Result<Claim> {
        non_empty_agent(agent)?;
        // One statement (`troupe_claim`): the claim, its event and the
        // wake-up, or the task as it is when it cannot be taken.
        let found = self.statement(
            "claim a task",
            &format!(
                "SELECT {TASK_COLS}, c.taken, CASE WHEN c.taken THEN {NOTIFIED} END \
                 FROM troupe_claim($1, $2, $3, $4, $5) c, LATERAL (SELECT (c.task).*) t"
            ),
            &[&id, &agent, &now_us(), &kind::TASK_CLAIMED, &json!({}).to_string()],
        )?;
        let row = found.first().ok_or_else(|| StoreError::TaskNotFound(id.to_string()))?;
        let task = rows::task(row)?;
        if col(row, TASK_COLUMNS)? {
            return Ok(Claim { task, already_held: false });
        }
        // The claim changed nothing and held no lock: the blockers are read
        // as the next statement of its transaction would have read them.
        claim_refused(task, agent, || self.read("list open blockers", |tx| open_blockers_of(tx, id)))
    }

    fn claim_next(&self, agent: &str, filter: &TaskFilter) -> Result<Option<Task>> {
        non_empty_agent(agent)?;
        // One statement (`troupe_claim_next`): reserved tasks first, then
        // free ones, the event, and the wake-up when a task was taken (a row).
        let claimed = self.statement(
            "claim the next task",
            &format!("SELECT {TASK_COLS}, {NOTIFIED} FROM troupe_claim_next($1, $2, $3, $4, $5, $6, $7)"),
            &[
                &agent,
                &now_us(),
                &filter.feature,
                &filter.wave.map(i64::from),
                &filter.group,
                &kind::TASK_CLAIMED,
                &json!({}).to_string(),
            ],
        )?;
        claimed.first().map(rows::task).transpose()
    }

    fn complete(&self, id: &str, agent: &str) -> Result<Completion> {
        non_empty_agent(agent)?;
        // One statement (`troupe_complete`): the completion, its dependents
        // unblocked, the events and the wake-up, or the task as it is when refused.
        let found = self.statement(
            "complete a task",
            &format!(
                "SELECT {TASK_COLS}, c.done, c.unblocked, CASE WHEN c.done THEN {NOTIFIED} END \
                 FROM troupe_complete($1, $2, $3, $4, $5) c, LATERAL (SELECT (c.task).*) t"
            ),
            &[&id, &agent, &now_us(), &kind::TASK_COMPLETED, &kind::TASK_UNBLOCKED],
        )?;
        let row = found.first().ok_or_else(|| StoreError::TaskNotFound(id.to_string()))?;
        let task = rows::task(row)?;
        if !col::<bool>(row, TASK_COLUMNS)? {
            return Err(complete_refused(task, agent));
        }
        Ok(Completion { task, unblocked: col(row, TASK_COLUMNS + 1)? })
    }

    fn assign(&self, id: &str, agent: &str, by: &str) -> Result<Task> {
        non_empty_agent(agent)?;
        self.write("assign a task", |tx| {
            let task = get_locked(tx, id, "FOR UPDATE")?;
            let previous = task.assignee.clone();
            if let Some(unchanged) = assign_check(task, agent)? {
                return Ok(unchanged);
            }
            let now = now_us();
            tx.exec(
                "assign a task",
                "UPDATE tasks SET assignee = $2, updated_at = $3 WHERE id = $1",
                &[&id, &agent, &now],
            )?;
            let data = json!({ "assignee": agent, "previous": previous });
            record(tx, now, &event(kind::TASK_ASSIGNED, by, id, data))?;
            get(tx, id)
        })
    }

    fn release(&self, id: &str, agent: Option<&str>, by: &str) -> Result<Task> {
        self.write("release a task", |tx| {
            let task = get_locked(tx, id, "FOR UPDATE")?;
            release_check(&task, agent, by)?;
            let now = now_us();
            tx.exec(
                "release a task",
                "UPDATE tasks SET status = 'pending', assignee = NULL, updated_at = $2 WHERE id = $1",
                &[&id, &now],
            )?;
            let data = json!({ "previous": task.assignee, "status": task.status.as_str() });
            record(tx, now, &event(kind::TASK_RELEASED, by, id, data))?;
            get(tx, id)
        })
    }

    fn list(&self, filter: &ListFilter) -> Result<Vec<Task>> {
        let mut cond = String::new();
        let mut args: Vec<Box<dyn postgres::types::ToSql + Sync>> = Vec::new();
        let mut push = |clause: &str, value: Box<dyn postgres::types::ToSql + Sync>| {
            args.push(value);
            cond.push_str(&format!(" AND {clause} = ${}", args.len()));
        };
        if let Some(s) = filter.status {
            push("status", Box::new(s.as_str().to_string()));
        }
        if let Some(a) = &filter.assignee {
            push("assignee", Box::new(a.clone()));
        }
        if let Some(f) = &filter.feature {
            push("feature", Box::new(f.clone()));
        }
        if let Some(w) = filter.wave {
            push("wave", Box::new(i64::from(w)));
        }
        let sql = format!("SELECT {TASK_COLS} FROM tasks WHERE 1 = 1{cond} ORDER BY seq");
        self.read("list tasks", |tx| {
            let values: Vec<Param<'_>> = args.iter().map(|a| a.as_ref() as Param<'_>).collect();
            all(tx.query("list tasks", &sql, &values)?, rows::task)
        })
    }

    fn available(&self, agent: &str, filter: &TaskFilter) -> Result<Vec<Task>> {
        let (cond, args) = filter_sql(filter, 2);
        let sql = format!(
            "SELECT {TASK_COLS} FROM tasks WHERE status = 'pending' AND open_blockers = 0 \
             AND (assignee IS NULL OR assignee = $1){cond} ORDER BY seq"
        );
        self.read("list available tasks", |tx| {
            let mut values: Vec<Param<'_>> = vec![&agent];
            values.extend(args.iter().map(|a| a.as_ref() as Param<'_>));
            all(tx.query("list available tasks", &sql, &values)?, rows::task)
        })
    }

    fn import_plan(&self, plan: crate::plan::PlanTasks) -> Result<crate::plan::ImportOutcome> {
        self.write("import a plan", |tx| {
            tx.lock(BOARD_LOCK)?;
            super::plans::import(tx, plan.clone())
        })
    }

    fn replace_plan(&self, plan: crate::plan::PlanTasks) -> Result<crate::plan::ImportOutcome> {
        self.write("replace a plan", |tx| {
            tx.lock(BOARD_LOCK)?;
            super::plans::replace(tx, plan.clone(), false)
        })
    }

    fn renew_plan(&self, plan: crate::plan::PlanTasks) -> Result<crate::plan::ImportOutcome> {
        self.write("renew a plan", |tx| {
            tx.lock(BOARD_LOCK)?;
            super::plans::replace(tx, plan.clone(), true)
        })
    }
}

/// Insert a batch of new tasks under the board lock (ids are numbered from
/// the board and cycles checked against it): the twin of SQLite's
/// `insert_task_rows`. Blockers already on the board are read `FOR SHARE`, so
/// a blocker completing meanwhile either finishes first (and is counted
/// closed) or waits and then sees the new dependency.
pub(crate) fn insert_task_rows(
    tx: &mut Tx<'_>,
    tasks: &[NewTask],
    now: i64,
    options: &RowOptions,
) -> Result<Vec<String>> {
    tx.lock(BOARD_LOCK)?;
    let next_number: i64 = col(&tx.one("number new tasks", "SELECT coalesce(max(seq), 0) + 1 FROM tasks", &[])?, 0)?;
    let ids = assign_ids(tasks, next_number, options.ids_checked, |id| exists(tx, id))?;
    let index = batch_index(&ids);
    let blockers = Blockers::of(tasks, &index);
    let open_outside = blocker_states(&ids, &blockers, |blocker| {
        tx.opt("look up a blocker", "SELECT status, seq FROM tasks WHERE id = $1 FOR SHARE", &[&blocker])?
            .map(|r| Ok((col::<String>(&r, 0)?, col::<i64>(&r, 1)?)))
            .transpose()
    })?;
    check_batch_acyclic(&ids, &blockers)?;
    let open_blocker = |b: &str| match open_outside.get(b) {
        Some((open, _)) => *open,
        None => !options.done.contains(b),
    };
    let mut blockers: Vec<&String> = Vec::new();
    // Each task's number as the server drew it: its dependencies name it.
    let mut seqs: Vec<i64> = Vec::with_capacity(tasks.len());
    for (task, id) in tasks.iter().zip(&ids) {
        blockers.clear();
        for b in &task.blocked_by {
            if !blockers.contains(&b) {
                blockers.push(b);
            }
        }
        let open = blockers.iter().filter(|b| open_blocker(b)).count() as i64;
        let done = options.done.contains(id);
        let subject = task.subject.trim();
        let row = tx.one(
            "create a task",
            "INSERT INTO tasks (id, subject, description, status, assignee, created_by, blocked_by, open_blockers, \
             feature, wave, grp, files, created_at, updated_at, completed_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $13, $14) RETURNING seq",
            &[
                id,
                &subject,
                &task.description,
                &if done { "completed" } else { "pending" },
                &done.then_some(&task.created_by),
                &task.created_by,
                &json_text(&blockers),
                &open,
                &task.feature,
                &task.wave.map(i64::from),
                &task.group,
                &json_text(&task.files),
                &now,
                &done.then_some(now),
            ],
        )?;
        seqs.push(col(&row, 0)?);
        // A plan import records one `plan_imported` for all its tasks instead.
        if !options.one_event {
            let data = CreatedData { subject, blocked_by: &task.blocked_by, feature: task.feature.as_deref() };
            let data = serde_json::to_value(&data).unwrap_or_default();
            record(tx, now, &event(kind::TASK_CREATED, &task.created_by, id, data))?;
        }
    }
    let seq_of = |b: &str| match index.get(b) {
        Some(i) => seqs[*i],
        None => open_outside.get(b).map_or(0, |(_, seq)| *seq),
    };
    for (task, seq) in tasks.iter().zip(&seqs) {
        for blocker in &task.blocked_by {
            tx.exec(
                "record dependencies",
                "INSERT INTO task_deps (task_seq, blocker_seq) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                &[seq, &seq_of(blocker)],
            )?;
        }
    }
    Ok(ids)
}

/// A chain `from -> ... -> to` following "waits for" edges, if `from` already
/// (transitively) waits for `to`.
fn path_between(tx: &mut Tx<'_>, from: &str, to: &str) -> Result<Option<Vec<String>>> {
    find_path(from, to, |node| {
        let next = tx.query(
            "walk dependencies",
            "SELECT b.id FROM task_deps d JOIN tasks b ON b.seq = d.blocker_seq \
             WHERE d.task_seq = (SELECT seq FROM tasks WHERE id = $1)",
            &[&node],
        )?;
        all(next, |r| col(r, 0))
    })
}

/// The task `id`, or [`StoreError::TaskNotFound`].
pub(crate) fn get(tx: &mut Tx<'_>, id: &str) -> Result<Task> {
    get_locked(tx, id, "")
}

/// [`get`] with a row lock (`FOR UPDATE`, `FOR SHARE`) or none (``).
fn get_locked(tx: &mut Tx<'_>, id: &str, lock: &str) -> Result<Task> {
    let sql = format!("SELECT {TASK_COLS} FROM tasks WHERE id = $1 {lock}");
    match tx.opt("read a task", &sql, &[&id])? {
        Some(row) => rows::task(&row),
        None => Err(StoreError::TaskNotFound(id.to_string())),
    }
}

pub(crate) fn exists(tx: &mut Tx<'_>, id: &str) -> Result<bool> {
    Ok(tx.opt("look up a task", "SELECT 1 FROM tasks WHERE id = $1", &[&id])?.is_some())
}

fn open_blockers_of(tx: &mut Tx<'_>, id: &str) -> Result<Vec<String>> {
    let rows = tx.query(
        "list open blockers",
        "SELECT b.id FROM task_deps d JOIN tasks b ON b.seq = d.blocker_seq \
         WHERE d.task_seq = (SELECT seq FROM tasks WHERE id = $1) AND b.status <> 'completed' ORDER BY b.seq",
        &[&id],
    )?;
    all(rows, |r| col(r, 0))
}

/// SQL conditions for a [`TaskFilter`], numbering parameters from `first`.
fn filter_sql(filter: &TaskFilter, first: usize) -> (String, Vec<Box<dyn postgres::types::ToSql + Sync>>) {
    let mut cond = String::new();
    let mut args: Vec<Box<dyn postgres::types::ToSql + Sync>> = Vec::new();
    let mut push = |column: &str, value: Box<dyn postgres::types::ToSql + Sync>| {
        cond.push_str(&format!(" AND {column} = ${}", first + args.len()));
        args.push(value);
    };
    if let Some(f) = &filter.feature {
        push("feature", Box::new(f.clone()));
    }
    if let Some(w) = filter.wave {
        push("wave", Box::new(i64::from(w)));
    }
    if let Some(g) = &filter.group {
        push("grp", Box::new(g.clone()));
    }
    (cond, args)
}
