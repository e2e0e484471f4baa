//! The agent registry on PostgreSQL. Status changes append an event with the
//! old and new status in the same transaction, as on SQLite.

use serde_json::json;

use super::rows::{self, AGENT_COLS, all, get as col};
use super::{AGENTS_LOCK, PgStore, Tx, now_us, record};
use crate::agent::{Agent, AgentStatus, AgentUpdate, NewAgent, StaleAgent};
use crate::error::{Result, StoreError};
use crate::event::{NewEvent, kind};
use crate::lease;
use crate::lock::host_name;
use crate::sqlite::registry::{agent_event, trailing_number};
use crate::traits::Registry;

impl Registry for PgStore {
    fn register(&self, agent: NewAgent) -> Result<Agent> {
        if agent.id.trim().is_empty() {
            return Err(StoreError::EmptyAgentId);
        }
        let host = host_name();
        self.write("register an agent", |tx| {
            // Two registrations of one id: the second waits for the first's row.
            let now = now_us();
            if let Some(existing) = find(tx, &agent.id, "FOR UPDATE")?
                && lease::running(&existing, now, &host)
            {
                let how = lease::running_how(&existing, &host);
                return Err(StoreError::AgentRunning { id: agent.id.clone(), status: existing.status, how });
            }
            let lease_until = agent.lease.map(|l| lease::until(now, l));
            tx.exec(
                "register an agent",
                "INSERT INTO agents (id, name, role, engine, model, feature, task, pid, status, session_id, \
                 started_at, last_event_at, host, lease_until) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'READY', $9, $10, $10, $11, $12) \
                 ON CONFLICT (id) DO UPDATE SET name = excluded.name, role = excluded.role, \
                 engine = excluded.engine, model = excluded.model, feature = excluded.feature, task = excluded.task, \
                 pid = excluded.pid, status = 'READY', session_id = excluded.session_id, \
                 started_at = excluded.started_at, last_event_at = excluded.last_event_at, host = excluded.host, \
                 lease_until = excluded.lease_until, lease_swept_at = NULL",
                &[
                    &agent.id,
                    &agent.name,
                    &agent.role,
                    &agent.engine,
                    &agent.model,
                    &agent.feature,
                    &agent.task,
                    &agent.pid.map(i64::from),
                    &agent.session_id,
                    &now,
                    &host,
                    &lease_until,
                ],
            )?;
            let data =
                json!({ "role": agent.role, "engine": agent.engine, "pid": agent.pid, "feature": agent.feature });
            record(tx, now, &agent_event(kind::AGENT_REGISTERED, &agent.id, data))?;
            get(tx, &agent.id)
        })
    }

    fn set_status(&self, id: &str, status: AgentStatus) -> Result<Agent> {
        self.write("change an agent's status", |tx| {
            let before = get_locked(tx, id)?;
            let now = now_us();
            tx.exec(
                "change an agent's status",
                // A finished agent holds nothing: its lease ends with it.
                "UPDATE agents SET status = $2, last_event_at = $3, \
                 lease_until = CASE WHEN $4 THEN NULL ELSE lease_until END WHERE id = $1",
                &[&id, &status.as_str(), &now, &status.is_terminal()],
            )?;
            if before.status != status {
                let data = json!({ "from": before.status.as_str(), "to": status.as_str() });
                record(tx, now, &agent_event(kind::AGENT_STATUS_CHANGED, id, data))?;
            }
            get(tx, id)
        })
    }

    fn update_agent(&self, id: &str, update: AgentUpdate) -> Result<Agent> {
        self.write("update an agent", |tx| {
            let mut agent = get_locked(tx, id)?;
            let update = update.clone();
            if let Some(task) = update.task {
                agent.task = task;
            }
            if let Some(pid) = update.pid {
                agent.pid = pid;
            }
            if let Some(session) = update.session_id {
                agent.session_id = session;
            }
            if let Some(model) = update.model {
                agent.model = model;
            }
            if let Some(host) = update.host {
                agent.host = Some(host);
            }
            tx.exec(
                "update an agent",
                "UPDATE agents SET task = $2, pid = $3, session_id = $4, model = $5, last_event_at = $6, host = $7 \
                 WHERE id = $1",
                &[&id, &agent.task, &agent.pid.map(i64::from), &agent.session_id, &agent.model, &now_us(), &agent.host],
            )?;
            get(tx, id)
        })
    }

    fn agent(&self, id: &str) -> Result<Agent> {
        self.read("read an agent", |tx| get(tx, id))
    }

    fn agents(&self) -> Result<Vec<Agent>> {
        self.read("list agents", |tx| {
            let sql = format!(r#"SELECT {AGENT_COLS} FROM agents ORDER BY started_at, id COLLATE "C""#);
            all(tx.query("list agents", &sql, &[])?, rows::agent)
        })
    }

    fn remove_agent(&self, id: &str) -> Result<()> {
        self.write("remove an agent", |tx| {
            let agent = get_locked(tx, id)?;
            tx.exec("remove an agent", "DELETE FROM agents WHERE id = $1", &[&id])?;
            let data = json!({ "status": agent.status.as_str() });
            record(tx, now_us(), &agent_event(kind::AGENT_REMOVED, id, data))?;
            Ok(())
        })
    }

    fn reserve_agent_numbers(&self, count: u64) -> Result<u64> {
        let count = count.max(1);
        self.write("reserve agent numbers", |tx| {
            // Racing runs read the last block one after the other.
            tx.lock(AGENTS_LOCK)?;
            let last: Option<String> = tx
                .opt(
                    "reserve agent numbers",
                    "SELECT data FROM events WHERE kind = $1 ORDER BY id DESC LIMIT 1",
                    &[&kind::AGENT_NUMBERS_RESERVED],
                )?
                .map(|r| col(&r, 0))
                .transpose()?;
            let after_last_block = last
                .and_then(|d| serde_json::from_str::<serde_json::Value>(&d).ok())
                .and_then(|d| Some(d.get("first")?.as_u64()? + d.get("count")?.as_u64()?));
            // Only the first block looks at the registry (see SQLite's twin).
            let first = match after_last_block {
                Some(first) => first,
                None => {
                    let ids =
                        all(tx.query("reserve agent numbers", "SELECT id FROM agents", &[])?, |r| col::<String>(r, 0))?;
                    ids.iter().filter_map(|id| trailing_number(id)).max().map_or(1, |n| n + 1)
                }
            };
            let data = json!({ "first": first, "count": count });
            let event = NewEvent { kind: kind::AGENT_NUMBERS_RESERVED.into(), actor: None, subject: None, data };
            record(tx, now_us(), &event)?;
            Ok(first)
        })
    }

    fn stale_agents(&self) -> Result<Vec<StaleAgent>> {
        let (now, host) = (now_us(), host_name());
        let mut stale = Vec::new();
        for agent in self.agents()? {
            if lease::stale(&agent, now, &host).is_none() {
                continue;
            }
            let held_tasks = self.read("list held tasks", |tx| {
                let rows = tx.query(
                    "list held tasks",
                    "SELECT id FROM tasks WHERE status = 'in_progress' AND assignee = $1 ORDER BY seq",
                    &[&agent.id],
                )?;
                all(rows, |r| col(r, 0))
            })?;
            stale.push(StaleAgent { agent, held_tasks });
        }
        Ok(stale)
    }
}

fn find(tx: &mut Tx<'_>, id: &str, lock: &str) -> Result<Option<Agent>> {
    let sql = format!("SELECT {AGENT_COLS} FROM agents WHERE id = $1 {lock}");
    tx.opt("read an agent", &sql, &[&id])?.map(|r| rows::agent(&r)).transpose()
}

pub(crate) fn get(tx: &mut Tx<'_>, id: &str) -> Result<Agent> {
    find(tx, id, "")?.ok_or_else(|| StoreError::AgentNotFound(id.to_string()))
}

pub(crate) fn get_locked(tx: &mut Tx<'_>, id: &str) -> Result<Agent> {
    find(tx, id, "FOR UPDATE")?.ok_or_else(|| StoreError::AgentNotFound(id.to_string()))
}
