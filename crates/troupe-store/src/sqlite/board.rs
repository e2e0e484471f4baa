//! The task board on SQLite. Every operation is one `BEGIN IMMEDIATE`
//! transaction that also appends its events.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use rusqlite::{Connection, OptionalExtension, params};
use serde_json::json;
// FNV, not SipHash: a plan of 100,000 tasks hashes every id several times.
use troupe_core::hash::{FastMap, FastSet};

use super::bulk;
use super::rows::{self, TASK_COLS};
use super::{SqliteStore, now_us, record};
use crate::error::{ClaimRefusal, Context, Result, StoreError};
use crate::event::{NewEvent, kind};
use crate::task::{Claim, Completion, ListFilter, NewTask, Task, TaskFilter, TaskStatus};
use crate::traits::Board;

impl Board for SqliteStore {
    fn create_task(&self, task: NewTask) -> Result<Task> {
        let mut created = self.create_tasks(vec![task])?;
        Ok(created.remove(0))
    }

    fn create_tasks(&self, tasks: Vec<NewTask>) -> Result<Vec<Task>> {
        self.write("create tasks", |tx| insert_tasks(tx, tasks, now_us()))
    }

    fn add_blocker(&self, task: &str, blocker: &str, by: &str) -> Result<Task> {
        self.write("add a blocker", |tx| {
            let t = get(tx, task)?;
            let b = get(tx, blocker)?;
            if let Some(unchanged) = blocker_check(t.clone(), blocker, || path_between(tx, blocker, task))? {
                return Ok(unchanged);
            }
            let now = now_us();
            let mut list = t.blocked_by.clone();
            list.push(blocker.to_string());
            let open = i64::from(b.status != TaskStatus::Completed);
            tx.prepare_cached(
                "INSERT INTO task_deps (task_seq, blocker_seq) \
                 SELECT t.seq, b.seq FROM tasks t, tasks b WHERE t.id = ?1 AND b.id = ?2",
            )
            .and_then(|mut s| s.execute(params![task, blocker]))
            .op("add a blocker")?;
            tx.prepare_cached(
                "UPDATE tasks SET blocked_by = ?2, open_blockers = open_blockers + ?3, updated_at = ?4 WHERE id = ?1",
            )
            .and_then(|mut s| s.execute(params![task, json_text(&list), open, now]))
            .op("add a blocker")?;
            record(tx, now, &event(kind::TASK_BLOCKER_ADDED, by, task, json!({ "blocker": blocker })))?;
            get(tx, task)
        })
    }

    fn task(&self, id: &str) -> Result<Task> {
        self.read("read a task", |c| get(c, id))
    }

    fn claim(&self, id: &str, agent: &str) -> Result<Claim> {
        non_empty_agent(agent)?;
        self.write("claim a task", |tx| {
            let now = now_us();
            let claimed = tx
                .prepare_cached(&format!(
                    "UPDATE tasks SET status = 'in_progress', assignee = ?2, updated_at = ?3 \
                     WHERE id = ?1 AND status = 'pending' AND open_blockers = 0 \
                     AND (assignee IS NULL OR assignee = ?2) RETURNING {TASK_COLS}"
                ))
                .and_then(|mut s| s.query_row(params![id, agent, now], rows::task).optional())
                .op("claim a task")?;
            if let Some(task) = claimed {
                record(tx, now, &event(kind::TASK_CLAIMED, agent, id, json!({})))?;
                return Ok(Claim { task, already_held: false });
            }
            claim_refused(get(tx, id)?, agent, || open_blockers_of(tx, id))
        })
    }

    fn claim_next(&self, agent: &str, filter: &TaskFilter) -> Result<Option<Task>> {
        non_empty_agent(agent)?;
        self.write("claim the next task", |tx| {
            let now = now_us();
            // Tasks reserved for this agent come first: the Lead assigned them on purpose.
            for reserved in [true, false] {
                let (cond, args) = filter_sql(filter, 3);
                // Without statistics SQLite prefers the status index, which holds
                // every pending task; the partial index holds only the ready ones.
                let (from, who) = if reserved {
                    ("tasks", "assignee = ?1")
                } else {
                    ("tasks INDEXED BY idx_tasks_ready", "assignee IS NULL")
                };
                let sql = format!(
                    "UPDATE tasks SET status = 'in_progress', assignee = ?1, updated_at = ?2 WHERE seq = \
                     (SELECT seq FROM {from} WHERE status = 'pending' AND open_blockers = 0 AND {who}{cond} \
                     ORDER BY seq LIMIT 1) RETURNING {TASK_COLS}"
                );
                let mut values: Vec<&dyn rusqlite::ToSql> = vec![&agent, &now];
                values.extend(args.iter().map(|a| a as &dyn rusqlite::ToSql));
                let claimed = tx
                    .prepare_cached(&sql)
                    .and_then(|mut s| s.query_row(values.as_slice(), rows::task).optional())
                    .op("claim the next task")?;
                if let Some(task) = claimed {
                    record(tx, now, &event(kind::TASK_CLAIMED, agent, &task.id, json!({})))?;
                    return Ok(Some(task));
                }
            }
            Ok(None)
        })
    }

    fn complete(&self, id: &str, agent: &str) -> Result<Completion> {
        non_empty_agent(agent)?;
        self.write("complete a task", |tx| {
            let now = now_us();
            let done = tx
                .prepare_cached(&format!(
                    "UPDATE tasks SET status = 'completed', completed_at = ?3, updated_at = ?3 \
                     WHERE id = ?1 AND status = 'in_progress' AND assignee = ?2 RETURNING {TASK_COLS}"
                ))
                .and_then(|mut s| s.query_row(params![id, agent, now], rows::task).optional())
                .op("complete a task")?;
            let Some(task) = done else {
                return Err(complete_refused(get(tx, id)?, agent));
            };
            let mut unblocked: Vec<(i64, String)> = tx
                .prepare_cached(
                    "UPDATE tasks SET open_blockers = open_blockers - 1, updated_at = ?2 \
                     WHERE seq IN (SELECT task_seq FROM task_deps \
                     WHERE blocker_seq = (SELECT seq FROM tasks WHERE id = ?1)) \
                     RETURNING seq, id, open_blockers, status",
                )
                .and_then(|mut s| {
                    s.query_map(params![id, now], |r| {
                        Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?, r.get::<_, i64>(2)?, r.get::<_, String>(3)?))
                    })?
                    .filter_map(|row| match row {
                        Ok((seq, id, 0, status)) if status == "pending" => Some(Ok((seq, id))),
                        Ok(_) => None,
                        Err(e) => Some(Err(e)),
                    })
                    .collect()
                })
                .op("unblock dependent tasks")?;
            unblocked.sort();
            let unblocked: Vec<String> = unblocked.into_iter().map(|(_, id)| id).collect();
            record(tx, now, &event(kind::TASK_COMPLETED, agent, id, json!({ "unblocked": unblocked })))?;
            for u in &unblocked {
                record(tx, now, &event(kind::TASK_UNBLOCKED, agent, u, json!({ "by": id })))?;
            }
            Ok(Completion { task, unblocked })
        })
    }

    fn assign(&self, id: &str, agent: &str, by: &str) -> Result<Task> {
        non_empty_agent(agent)?;
        self.write("assign a task", |tx| {
            let task = get(tx, id)?;
            let previous = task.assignee.clone();
            if let Some(unchanged) = assign_check(task, agent)? {
                return Ok(unchanged);
            }
            let now = now_us();
            tx.prepare_cached("UPDATE tasks SET assignee = ?2, updated_at = ?3 WHERE id = ?1")
                .and_then(|mut s| s.execute(params![id, agent, now]))
                .op("assign a task")?;
            let data = json!({ "assignee": agent, "previous": previous });
            record(tx, now, &event(kind::TASK_ASSIGNED, by, id, data))?;
            get(tx, id)
        })
    }

    fn release(&self, id: &str, agent: Option<&str>, by: &str) -> Result<Task> {
        self.write("release a task", |tx| {
            let task = get(tx, id)?;
            release_check(&task, agent, by)?;
            let holder = task.assignee.clone();
            let now = now_us();
            tx.prepare_cached("UPDATE tasks SET status = 'pending', assignee = NULL, updated_at = ?2 WHERE id = ?1")
                .and_then(|mut s| s.execute(params![id, now]))
                .op("release a task")?;
            let data = json!({ "previous": holder, "status": task.status.as_str() });
            record(tx, now, &event(kind::TASK_RELEASED, by, id, data))?;
            get(tx, id)
        })
    }

    fn list(&self, filter: &ListFilter) -> Result<Vec<Task>> {
        let mut cond = String::new();
        let mut args: Vec<rusqlite::types::Value> = Vec::new();
        let mut push = |clause: &str, value: rusqlite::types::Value| {
            args.push(value);
            cond.push_str(&format!(" AND {clause} = ?{}", args.len()));
        };
        if let Some(s) = filter.status {
            push("status", s.as_str().to_string().into());
        }
        if let Some(a) = &filter.assignee {
            push("assignee", a.clone().into());
        }
        if let Some(f) = &filter.feature {
            push("feature", f.clone().into());
        }
        if let Some(w) = filter.wave {
            push("wave", i64::from(w).into());
        }
        let sql = format!("SELECT {TASK_COLS} FROM tasks WHERE 1 = 1{cond} ORDER BY seq");
        self.read("list tasks", |c| {
            c.prepare_cached(&sql)
                .and_then(|mut s| s.query_map(rusqlite::params_from_iter(args.iter()), rows::task)?.collect())
                .op("list tasks")
        })
    }

    fn available(&self, agent: &str, filter: &TaskFilter) -> Result<Vec<Task>> {
        let (cond, args) = filter_sql(filter, 2);
        let sql = format!(
            "SELECT {TASK_COLS} FROM tasks INDEXED BY idx_tasks_ready WHERE status = 'pending' AND open_blockers = 0 \
             AND (assignee IS NULL OR assignee = ?1){cond} ORDER BY seq"
        );
        self.read("list available tasks", |c| {
            let mut values: Vec<&dyn rusqlite::ToSql> = vec![&agent];
            values.extend(args.iter().map(|a| a as &dyn rusqlite::ToSql));
            c.prepare_cached(&sql)
                .and_then(|mut s| s.query_map(values.as_slice(), rows::task)?.collect())
                .op("list available tasks")
        })
    }

    fn import_plan(&self, plan: crate::plan::PlanTasks) -> Result<crate::plan::ImportOutcome> {
        self.bulk_write("import a plan", |tx| super::plans::import(&mut &**tx, plan))
    }

    fn replace_plan(&self, plan: crate::plan::PlanTasks) -> Result<crate::plan::ImportOutcome> {
        self.write("replace a plan", |tx| super::plans::replace(&mut &**tx, plan, false))
    }

    fn renew_plan(&self, plan: crate::plan::PlanTasks) -> Result<crate::plan::ImportOutcome> {
        self.write("renew a plan", |tx| super::plans::replace(&mut &**tx, plan, true))
    }
}

/// Insert a batch of new tasks: validate, give ids, refuse unknown blockers and
/// cycles, then write rows, dependencies and events. The caller's transaction
/// makes it all or nothing.
pub(crate) fn insert_tasks(tx: &Connection, tasks: Vec<NewTask>, now: i64) -> Result<Vec<Task>> {
    let ids = insert_task_rows(tx, tasks, now, &RowOptions::default())?;
    ids.iter().map(|id| get(tx, id)).collect()
}

/// How [`insert_task_rows`] treats a batch beyond creating it.
#[derive(Debug, Default)]
pub(crate) struct RowOptions {
    /// Ids of the batch to create completed (assigned to their creator): a
    /// plan's work already done.
    pub done: FastSet<String>,
    /// The caller made sure no id of the batch is on the board (one range
    /// scan for a whole plan instead of a lookup per task).
    pub ids_checked: bool,
    /// The caller records one event for the whole batch (a plan import's
    /// `plan_imported`), instead of a `task_created` per task.
    pub one_event: bool,
}

/// [`insert_tasks`] without reading the tasks back: their ids, in order (a
/// plan of 100,000 tasks is imported without decoding 100,000 rows).
pub(crate) fn insert_task_rows(
    tx: &Connection,
    tasks: Vec<NewTask>,
    now: i64,
    options: &RowOptions,
) -> Result<Vec<String>> {
    let next_number: i64 =
        tx.query_row("SELECT coalesce(max(seq), 0) + 1 FROM tasks", [], |r| r.get(0)).op("number new tasks")?;
    let ids = assign_ids(&tasks, next_number, options.ids_checked, |id| exists(tx, id))?;
    let index = batch_index(&ids);
    let blockers = Blockers::of(&tasks, &index);
    let outside = blocker_states(&ids, &blockers, |blocker| {
        tx.prepare_cached("SELECT status, seq FROM tasks WHERE id = ?1")
            .and_then(|mut s| s.query_row([blocker], |r| Ok((r.get(0)?, r.get(1)?))).optional())
            .op("look up a blocker")
    })?;
    check_batch_acyclic(&ids, &blockers)?;
    crate::phases::mark("check ids, blockers and cycles");

    // The batch is numbered from `next_number` in order: a task's number is
    // known before its row is written, and its dependencies are pairs of them.
    // Done work is created completed, and counts as closed for its dependents,
    // so that no second pass over the rows recounts their blockers.
    let mut rows = Vec::with_capacity(tasks.len());
    let mut deps: Vec<(i64, i64)> = Vec::with_capacity(blockers.list.len());
    let mut names: Vec<&str> = Vec::new();
    for (i, (task, id)) in tasks.iter().zip(&ids).enumerate() {
        let seq = next_number + i as i64;
        let mut open_blockers = 0;
        names.clear();
        for &(b, at) in blockers.of_task(i) {
            let (blocker_seq, open) = match at {
                OUTSIDE => outside.get(b).map_or((0, true), |(open, seq)| (*seq, *open)),
                at => (next_number + i64::from(at), !options.done.contains(b)),
            };
            // Once every row exists: a task may wait for one later in the batch.
            deps.push((seq, blocker_seq));
            open_blockers += i64::from(open);
            names.push(b);
        }
        rows.push(bulk::TaskRow {
            seq,
            id,
            subject: task.subject.trim(),
            description: &task.description,
            done: options.done.contains(id),
            created_by: &task.created_by,
            blocked_by: json_text(&names),
            open_blockers,
            feature: task.feature.as_deref(),
            wave: task.wave,
            group: task.group.as_deref(),
            files: json_text(&task.files),
        });
    }
    // Key order: each row lands beside the last in the table's B-tree.
    deps.sort_unstable();
    crate::phases::mark("build the rows");
    bulk::with_indexes_rebuilt(tx, rows.len(), next_number - 1, || {
        bulk::insert_tasks(tx, &rows, now)?;
        crate::phases::mark("insert task rows");
        bulk::insert_deps(tx, &deps)?;
        crate::phases::mark("insert dependency rows");
        Ok(())
    })?;
    if !options.one_event {
        let mut created = tx
            .prepare_cached("INSERT INTO events (at, kind, actor, subject, data) VALUES (?1, ?2, ?3, ?4, ?5)")
            .op("append an event")?;
        for (task, id) in tasks.iter().zip(&ids) {
            let data = CreatedData {
                subject: task.subject.trim(),
                blocked_by: &task.blocked_by,
                feature: task.feature.as_deref(),
            };
            created
                .execute(params![now, kind::TASK_CREATED, task.created_by, id, json_text(&data)])
                .op("append an event")?;
        }
    }
    Ok(ids)
}

/// Validate a batch of new tasks and give each its id: its own, or the next
/// free `t<n>` from `next_number` on. `exists` looks an id up on the board
/// (skipped for given ids when `ids_checked`).
pub(crate) fn assign_ids(
    tasks: &[NewTask],
    mut next_number: i64,
    ids_checked: bool,
    mut exists: impl FnMut(&str) -> Result<bool>,
) -> Result<Vec<String>> {
    let mut ids: Vec<String> = Vec::with_capacity(tasks.len());
    // Given ids borrowed from the tasks: a plan's 100,000 are not copied twice.
    let mut batch: FastSet<Cow<'_, str>> = FastSet::with_capacity_and_hasher(tasks.len(), Default::default());
    for task in tasks {
        if task.subject.trim().is_empty() {
            return Err(StoreError::EmptySubject);
        }
        non_empty_agent(&task.created_by)?;
        let id = match &task.id {
            Some(id) => {
                if id.is_empty() || id.chars().any(|c| c.is_whitespace() || c.is_control()) {
                    return Err(StoreError::InvalidTaskId(id.clone()));
                }
                if batch.contains(id.as_str()) || (!ids_checked && exists(id)?) {
                    return Err(StoreError::DuplicateTask(id.clone()));
                }
                batch.insert(Cow::Borrowed(id));
                id.clone()
            }
            None => loop {
                let candidate = format!("t{next_number}");
                next_number += 1;
                if !batch.contains(candidate.as_str()) && !exists(&candidate)? {
                    batch.insert(Cow::Owned(candidate.clone()));
                    break candidate;
                }
            },
        };
        ids.push(id);
    }
    Ok(ids)
}

/// A batch's ids with their positions ([`assign_ids`] made them unique):
/// what [`Blockers::of`] places each blocker by.
pub(crate) fn batch_index(ids: &[String]) -> FastMap<&str, usize> {
    let mut index = FastMap::with_capacity_and_hasher(ids.len(), Default::default());
    index.extend(ids.iter().enumerate().map(|(i, id)| (id.as_str(), i)));
    index
}

/// The blockers of a batch (`ids`, with its [`Blockers`]) that are already
/// on the board, each with whether it is open (not completed) and its number;
/// `status_of` reads a task's status and number. Refuses a task that waits
/// for itself and a blocker that is nowhere.
pub(crate) fn blocker_states(
    ids: &[String],
    blockers: &Blockers<'_>,
    mut status_of: impl FnMut(&str) -> Result<Option<(String, i64)>>,
) -> Result<FastMap<String, (bool, i64)>> {
    let mut open_outside: FastMap<String, (bool, i64)> = FastMap::default();
    for (i, id) in ids.iter().enumerate() {
        for &(blocker, at) in blockers.of_task(i) {
            if at as usize == i {
                let cycle = vec![id.clone(), id.clone()];
                return Err(StoreError::Cycle { task: id.clone(), blocker: blocker.to_string(), cycle });
            }
            if at != OUTSIDE || open_outside.contains_key(blocker) {
                continue;
            }
            match status_of(blocker)? {
                Some((s, seq)) => open_outside.insert(blocker.to_string(), (s != "completed", seq)),
                None => return Err(StoreError::UnknownBlocker { task: id.clone(), blocker: blocker.to_string() }),
            };
        }
    }
    Ok(open_outside)
}

/// Whether `blocker` may be added to task `t`: `Some(t)` when it is there
/// already, `None` when it goes ahead, or the refusal (not pending, or a
/// cycle: `path` finds a chain from the blocker back to the task).
pub(crate) fn blocker_check(
    t: Task,
    blocker: &str,
    path: impl FnOnce() -> Result<Option<Vec<String>>>,
) -> Result<Option<Task>> {
    if t.status != TaskStatus::Pending {
        return Err(StoreError::WrongStatus { task: t.id.clone(), action: "add a blocker to", status: t.status });
    }
    if t.blocked_by.iter().any(|x| x == blocker) {
        return Ok(Some(t));
    }
    if let Some(path) = path()? {
        let mut cycle = vec![t.id.clone()];
        cycle.extend(path);
        return Err(StoreError::Cycle { task: t.id.clone(), blocker: blocker.into(), cycle });
    }
    Ok(None)
}

/// Why `agent` may not claim `task` (which the claim's update did not match),
/// or that it already holds it. `open_blockers` lists the task's open blockers.
pub(crate) fn claim_refused(
    task: Task,
    agent: &str,
    open_blockers: impl FnOnce() -> Result<Vec<String>>,
) -> Result<Claim> {
    let id = task.id.clone();
    let reason = match (task.status, task.assignee.as_deref()) {
        (TaskStatus::InProgress, Some(holder)) if holder == agent => {
            return Ok(Claim { task, already_held: true });
        }
        (TaskStatus::InProgress, holder) => ClaimRefusal::HeldBy(holder.unwrap_or_default().to_string()),
        (TaskStatus::Completed, _) => ClaimRefusal::Completed,
        (TaskStatus::Pending, Some(other)) if other != agent => ClaimRefusal::AssignedTo(other.to_string()),
        (TaskStatus::Pending, _) => ClaimRefusal::Blocked(open_blockers()?),
    };
    Err(StoreError::NotClaimable { task: id, agent: agent.into(), reason })
}

/// Whether `agent` may be assigned `task`: `Some(task)` when nothing needs to
/// change, `None` when the assignment goes ahead, or the refusal.
pub(crate) fn assign_check(task: Task, agent: &str) -> Result<Option<Task>> {
    match (task.status, task.assignee.as_deref()) {
        (TaskStatus::Completed, _) => {
            Err(StoreError::WrongStatus { task: task.id.clone(), action: "assign", status: task.status })
        }
        (TaskStatus::InProgress, Some(holder)) if holder == agent => Ok(Some(task)),
        (TaskStatus::InProgress, holder) => Err(StoreError::NotClaimable {
            task: task.id.clone(),
            agent: agent.into(),
            reason: ClaimRefusal::HeldBy(holder.unwrap_or_default().to_string()),
        }),
        (TaskStatus::Pending, Some(current)) if current == agent => Ok(Some(task)),
        (TaskStatus::Pending, _) => Ok(None),
    }
}

/// Refuse a release of `task` by `agent` (`None`: anyone's) that is not allowed.
pub(crate) fn release_check(task: &Task, agent: Option<&str>, by: &str) -> Result<()> {
    if task.status == TaskStatus::Completed {
        return Err(StoreError::WrongStatus { task: task.id.clone(), action: "release", status: task.status });
    }
    let holder = task.assignee.clone();
    let allowed = match (agent, holder.as_deref()) {
        (_, None) => false,
        (Some(a), Some(h)) => a == h,
        (None, Some(_)) => true,
    };
    if !allowed {
        let agent = agent.unwrap_or(by).to_string();
        return Err(StoreError::NotAssignee { task: task.id.clone(), agent, action: "release", assignee: holder });
    }
    Ok(())
}

/// The refusal of a completion that did not match: wrong status or not the assignee.
pub(crate) fn complete_refused(task: Task, agent: &str) -> StoreError {
    match task.assignee {
        Some(holder) if holder == agent => {
            StoreError::WrongStatus { task: task.id, action: "complete", status: task.status }
        }
        assignee => StoreError::NotAssignee { task: task.id, agent: agent.into(), action: "complete", assignee },
    }
}

/// The data of a `task_created` event (written as text, with no JSON tree
/// built per task).
#[derive(serde::Serialize)]
pub(crate) struct CreatedData<'a> {
    pub subject: &'a str,
    pub blocked_by: &'a [String],
    pub feature: Option<&'a str>,
}

/// No position in the batch: a blocker already on the board.
pub(crate) const OUTSIDE: u32 = u32::MAX;

/// Each task's blockers, duplicates dropped, in order, with their position
/// in the batch (or [`OUTSIDE`]): looked up once for the cycle check, the
/// numbering of dependencies and the rows, in one allocation for the batch.
pub(crate) struct Blockers<'a> {
    /// Where each task's blockers start in `list` (one more entry than tasks).
    start: Vec<usize>,
    list: Vec<(&'a str, u32)>,
}

impl<'a> Blockers<'a> {
    /// The blockers of `tasks`, placed by `index` (see [`batch_index`]).
    pub(crate) fn of(tasks: &'a [NewTask], index: &FastMap<&str, usize>) -> Self {
        let mut start = Vec::with_capacity(tasks.len() + 1);
        let mut list: Vec<(&str, u32)> = Vec::with_capacity(tasks.iter().map(|t| t.blocked_by.len()).sum());
        for t in tasks {
            let from = list.len();
            start.push(from);
            for b in &t.blocked_by {
                if !list[from..].iter().any(|(x, _)| *x == b) {
                    list.push((b, index.get(b.as_str()).map_or(OUTSIDE, |at| *at as u32)));
                }
            }
        }
        start.push(list.len());
        Blockers { start, list }
    }

    /// Task `i`'s blockers.
    pub(crate) fn of_task(&self, i: usize) -> &[(&'a str, u32)] {
        &self.list[self.start[i]..self.start[i + 1]]
    }
}

/// Refuse a batch (`ids`, with its [`Blockers`]) whose dependencies among
/// its own tasks form a cycle, naming it.
pub(crate) fn check_batch_acyclic(ids: &[String], blockers: &Blockers<'_>) -> Result<()> {
    // Iterative DFS with colours: 0 unvisited, 1 on the stack, 2 finished;
    // one stack of (task, next blocker to look at) for the whole batch.
    let mut colour = vec![0u8; ids.len()];
    let mut stack: Vec<(usize, usize)> = Vec::new();
    for start in 0..ids.len() {
        if colour[start] != 0 {
            continue;
        }
        stack.push((start, 0));
        colour[start] = 1;
        while let Some(&mut (node, ref mut next)) = stack.last_mut() {
            let Some(&(_, at)) = blockers.of_task(node).get(*next) else {
                colour[node] = 2;
                stack.pop();
                continue;
            };
            *next += 1;
            if at == OUTSIDE {
                continue;
            }
            let to = at as usize;
            match colour[to] {
                0 => {
                    colour[to] = 1;
                    stack.push((to, 0));
                }
                1 => {
                    let from = stack.iter().position(|&(n, _)| n == to).unwrap_or(0);
                    let mut cycle: Vec<String> = stack[from..].iter().map(|&(n, _)| ids[n].clone()).collect();
                    cycle.push(ids[to].clone());
                    return Err(StoreError::Cycle { task: ids[node].clone(), blocker: ids[to].clone(), cycle });
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// A chain `from -> ... -> to` following "waits for" edges, if `from` already
/// (transitively) waits for `to`.
fn path_between(c: &Connection, from: &str, to: &str) -> Result<Option<Vec<String>>> {
    let mut stmt = c
        .prepare_cached(
            "SELECT b.id FROM task_deps d JOIN tasks b ON b.seq = d.blocker_seq \
             WHERE d.task_seq = (SELECT seq FROM tasks WHERE id = ?1)",
        )
        .op("walk dependencies")?;
    find_path(from, to, |node| {
        stmt.query_map([node], |r| r.get(0)).and_then(|rows| rows.collect()).op("walk dependencies")
    })
}

/// Breadth-first search from `from` to `to`; `blockers_of` lists the tasks a
/// task waits for. The chain of ids, both ends included.
pub(crate) fn find_path(
    from: &str,
    to: &str,
    mut blockers_of: impl FnMut(&str) -> Result<Vec<String>>,
) -> Result<Option<Vec<String>>> {
    let mut parent: HashMap<String, String> = HashMap::new();
    let mut queue = std::collections::VecDeque::from([from.to_string()]);
    let mut seen: HashSet<String> = HashSet::from([from.to_string()]);
    while let Some(node) = queue.pop_front() {
        if node == to {
            let mut path = vec![node.clone()];
            let mut cur = node;
            while let Some(p) = parent.get(&cur) {
                path.push(p.clone());
                cur = p.clone();
            }
            path.reverse();
            return Ok(Some(path));
        }
        for n in blockers_of(&node)? {
            if seen.insert(n.clone()) {
                parent.insert(n.clone(), node.clone());
                queue.push_back(n);
            }
        }
    }
    Ok(None)
}

/// The task `id`, or [`StoreError::TaskNotFound`].
pub(crate) fn get(c: &Connection, id: &str) -> Result<Task> {
    c.prepare_cached(&format!("SELECT {TASK_COLS} FROM tasks WHERE id = ?1"))
        .and_then(|mut s| s.query_row([id], rows::task).optional())
        .op("read a task")?
        .ok_or_else(|| StoreError::TaskNotFound(id.to_string()))
}

pub(crate) fn exists(c: &Connection, id: &str) -> Result<bool> {
    c.prepare_cached("SELECT 1 FROM tasks WHERE id = ?1").and_then(|mut s| s.exists([id])).op("look up a task")
}

fn open_blockers_of(c: &Connection, id: &str) -> Result<Vec<String>> {
    c.prepare_cached(
        "SELECT b.id FROM task_deps d JOIN tasks b ON b.seq = d.blocker_seq \
         WHERE d.task_seq = (SELECT seq FROM tasks WHERE id = ?1) AND b.status <> 'completed' ORDER BY b.seq",
    )
    .and_then(|mut s| s.query_map([id], |r| r.get(0))?.collect())
    .op("list open blockers")
}

/// SQL conditions for a [`TaskFilter`], numbering parameters from `first`.
fn filter_sql(filter: &TaskFilter, first: usize) -> (String, Vec<rusqlite::types::Value>) {
    let mut cond = String::new();
    let mut args: Vec<rusqlite::types::Value> = Vec::new();
    let mut push = |column: &str, value: rusqlite::types::Value| {
        cond.push_str(&format!(" AND {column} = ?{}", first + args.len()));
        args.push(value);
    };
    if let Some(f) = &filter.feature {
        push("feature", f.clone().into());
    }
    if let Some(w) = filter.wave {
        push("wave", i64::from(w).into());
    }
    if let Some(g) = &filter.group {
        push("grp", g.clone().into());
    }
    (cond, args)
}

pub(crate) fn non_empty_agent(agent: &str) -> Result<()> {
    if agent.trim().is_empty() { Err(StoreError::EmptyAgentId) } else { Ok(()) }
}

pub(crate) fn json_text<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "[]".to_string())
}

pub(crate) fn event(kind: &str, actor: &str, subject: &str, data: serde_json::Value) -> NewEvent {
    NewEvent { kind: kind.to_string(), actor: Some(actor.to_string()), subject: Some(subject.to_string()), data }
}
