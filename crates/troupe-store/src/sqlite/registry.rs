//! The agent registry on SQLite. Status changes append an event with the old and
//! new status in the same transaction.

use rusqlite::{Connection, OptionalExtension, params};
use serde_json::json;

use super::rows::{self, AGENT_COLS};
use super::{SqliteStore, now_us, record};
use crate::agent::{Agent, AgentStatus, AgentUpdate, NewAgent, StaleAgent};
use crate::error::{Context, Result, StoreError};
use crate::event::{NewEvent, kind};
use crate::lease;
use crate::lock::host_name;
use crate::traits::Registry;

impl Registry for SqliteStore {
    fn register(&self, agent: NewAgent) -> Result<Agent> {
        if agent.id.trim().is_empty() {
            return Err(StoreError::EmptyAgentId);
        }
        let host = host_name();
        self.write("register an agent", |tx| {
            let now = now_us();
            if let Some(existing) = find(tx, &agent.id)?
                && lease::running(&existing, now, &host)
            {
                let how = lease::running_how(&existing, &host);
                return Err(StoreError::AgentRunning { id: agent.id.clone(), status: existing.status, how });
            }
            let lease_until = agent.lease.map(|l| lease::until(now, l));
            tx.prepare_cached(
                "INSERT INTO agents (id, name, role, engine, model, feature, task, pid, status, session_id, \
                 started_at, last_event_at, host, lease_until) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'READY', ?9, ?10, ?10, ?11, ?12) \
                 ON CONFLICT (id) DO UPDATE SET name = excluded.name, role = excluded.role, \
                 engine = excluded.engine, model = excluded.model, feature = excluded.feature, task = excluded.task, \
                 pid = excluded.pid, status = 'READY', session_id = excluded.session_id, \
                 started_at = excluded.started_at, last_event_at = excluded.last_event_at, host = excluded.host, \
                 lease_until = excluded.lease_until, lease_swept_at = NULL",
            )
            .and_then(|mut s| {
                s.execute(params![
                    agent.id,
                    agent.name,
                    agent.role,
                    agent.engine,
                    agent.model,
                    agent.feature,
                    agent.task,
                    agent.pid,
                    agent.session_id,
                    now,
                    host,
                    lease_until
                ])
            })
            .op("register an agent")?;
            let data =
                json!({ "role": agent.role, "engine": agent.engine, "pid": agent.pid, "feature": agent.feature });
            record(tx, now, &agent_event(kind::AGENT_REGISTERED, &agent.id, data))?;
            get(tx, &agent.id)
        })
    }

    fn set_status(&self, id: &str, status: AgentStatus) -> Result<Agent> {
        self.write("change an agent's status", |tx| {
            let before = get(tx, id)?;
            let now = now_us();
            // A finished agent holds nothing: its lease ends with it.
            tx.prepare_cached(
                "UPDATE agents SET status = ?2, last_event_at = ?3, \
                 lease_until = CASE WHEN ?4 THEN NULL ELSE lease_until END WHERE id = ?1",
            )
            .and_then(|mut s| s.execute(params![id, status.as_str(), now, status.is_terminal()]))
            .op("change an agent's status")?;
            if before.status != status {
                let data = json!({ "from": before.status.as_str(), "to": status.as_str() });
                record(tx, now, &agent_event(kind::AGENT_STATUS_CHANGED, id, data))?;
            }
            get(tx, id)
        })
    }

    fn update_agent(&self, id: &str, update: AgentUpdate) -> Result<Agent> {
        self.write("update an agent", |tx| {
            let mut agent = get(tx, id)?;
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
            tx.prepare_cached(
                "UPDATE agents SET task = ?2, pid = ?3, session_id = ?4, model = ?5, last_event_at = ?6, host = ?7 \
                 WHERE id = ?1",
            )
            .and_then(|mut s| {
                s.execute(params![id, agent.task, agent.pid, agent.session_id, agent.model, now_us(), agent.host])
            })
            .op("update an agent")?;
            get(tx, id)
        })
    }

    fn agent(&self, id: &str) -> Result<Agent> {
        self.read("read an agent", |c| get(c, id))
    }

    fn agents(&self) -> Result<Vec<Agent>> {
        self.read("list agents", |c| {
            c.prepare_cached(&format!("SELECT {AGENT_COLS} FROM agents ORDER BY started_at, id"))
                .and_then(|mut s| s.query_map([], rows::agent)?.collect())
                .op("list agents")
        })
    }

    fn remove_agent(&self, id: &str) -> Result<()> {
        self.write("remove an agent", |tx| {
            let agent = get(tx, id)?;
            tx.prepare_cached("DELETE FROM agents WHERE id = ?1")
                .and_then(|mut s| s.execute([id]))
                .op("remove an agent")?;
            let data = json!({ "status": agent.status.as_str() });
            record(tx, now_us(), &agent_event(kind::AGENT_REMOVED, id, data))?;
            Ok(())
        })
    }

    fn reserve_agent_numbers(&self, count: u64) -> Result<u64> {
        let count = count.max(1);
        self.write("reserve agent numbers", |tx| {
            let last: Option<String> = tx
                .prepare_cached("SELECT data FROM events WHERE kind = ?1 ORDER BY id DESC LIMIT 1")
                .and_then(|mut s| s.query_row([kind::AGENT_NUMBERS_RESERVED], |r| r.get(0)).optional())
                .op("reserve agent numbers")?;
            let after_last_block = last
                .and_then(|d| serde_json::from_str::<serde_json::Value>(&d).ok())
                .and_then(|d| Some(d.get("first")?.as_u64()? + d.get("count")?.as_u64()?));
            // Only the first block looks at the registry (ids of a project from
            // before blocks). Later ones follow the last block alone: a
            // roadmap's replay registers its recorded ids before a sibling
            // reserves, and must get the blocks the original run got.
            let first = match after_last_block {
                Some(first) => first,
                None => {
                    let mut ids = tx.prepare_cached("SELECT id FROM agents").op("reserve agent numbers")?;
                    let registered = ids
                        .query_map([], |r| r.get::<_, String>(0))
                        .op("reserve agent numbers")?
                        .filter_map(|id| trailing_number(&id.ok()?))
                        .max();
                    registered.map_or(1, |n| n + 1)
                }
            };
            let data = json!({ "first": first, "count": count });
            let event = NewEvent { kind: kind::AGENT_NUMBERS_RESERVED.into(), actor: None, subject: None, data };
            record(tx, now_us(), &event)?;
            Ok(first)
        })
    }

    fn stale_agents(&self) -> Result<Vec<StaleAgent>> {
        let agents = self.agents()?;
        let (now, host) = (now_us(), host_name());
        let mut stale = Vec::new();
        for agent in agents {
            if lease::stale(&agent, now, &host).is_none() {
                continue;
            }
            let held_tasks = self.read("list held tasks", |c| {
                c.prepare_cached("SELECT id FROM tasks WHERE status = 'in_progress' AND assignee = ?1 ORDER BY seq")
                    .and_then(|mut s| s.query_map([&agent.id], |r| r.get(0))?.collect())
                    .op("list held tasks")
            })?;
            stale.push(StaleAgent { agent, held_tasks });
        }
        Ok(stale)
    }
}

/// `builder-g1-12` → 12.
pub(crate) fn trailing_number(id: &str) -> Option<u64> {
    let digits = id.rsplit('-').next()?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

fn find(c: &Connection, id: &str) -> Result<Option<Agent>> {
    c.prepare_cached(&format!("SELECT {AGENT_COLS} FROM agents WHERE id = ?1"))
        .and_then(|mut s| s.query_row([id], rows::agent).optional())
        .op("read an agent")
}

pub(crate) fn get(c: &Connection, id: &str) -> Result<Agent> {
    find(c, id)?.ok_or_else(|| StoreError::AgentNotFound(id.to_string()))
}

pub(crate) fn agent_event(kind: &str, id: &str, data: serde_json::Value) -> NewEvent {
    NewEvent { kind: kind.to_string(), actor: Some(id.to_string()), subject: Some(id.to_string()), data }
}
