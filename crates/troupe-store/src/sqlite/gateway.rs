//! The gateway's shared state on SQLite: token hashes bound to agent ids, and
//! the calls counted against rate limits. Calls are counted here, not in a
//! gateway process, so that every gateway serving the same agent (a second
//! `troupe mcp serve --agent X`, a restarted one) draws on one budget.

use rusqlite::{OptionalExtension, params};

use super::{SqliteStore, now_us, record};
use crate::error::{Context, Result};
use crate::event::NewEvent;
use crate::traits::{CallCounts, GatewayAccess};

const MINUTE_US: i64 = 60_000_000;
const HOUR_US: i64 = 60 * MINUTE_US;

impl GatewayAccess for SqliteStore {
    fn set_gateway_token(&self, agent: &str, token_hash: &str) -> Result<()> {
        self.write("store a gateway token", |tx| {
            let at = now_us();
            tx.prepare_cached(
                "INSERT INTO gateway_tokens (agent, hash, created_at) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (agent) DO UPDATE SET hash = excluded.hash, created_at = excluded.created_at",
            )
            .and_then(|mut s| s.execute(params![agent, token_hash, at]))
            .op("store a gateway token")?;
            // The event says a token changed hands, never which.
            record(
                tx,
                at,
                &NewEvent {
                    kind: "gateway_token".into(),
                    actor: None,
                    subject: Some(agent.to_string()),
                    data: serde_json::Value::Null,
                },
            )?;
            Ok(())
        })
    }

    fn gateway_token(&self, agent: &str) -> Result<Option<String>> {
        self.read("read a gateway token", |c| {
            c.prepare_cached("SELECT hash FROM gateway_tokens WHERE agent = ?1")
                .and_then(|mut s| s.query_row(params![agent], |r| r.get(0)).optional())
                .op("read a gateway token")
        })
    }

    fn count_call(
        &self,
        agent: &str,
        tool: &str,
        admit: &dyn Fn(&CallCounts) -> Option<String>,
    ) -> Result<Option<String>> {
        self.write("count a gateway call", |tx| {
            let now = now_us();
            // Older calls never count again; dropping them keeps the table at one hour of calls.
            tx.prepare_cached("DELETE FROM gateway_calls WHERE agent = ?1 AND at <= ?2")
                .and_then(|mut s| s.execute(params![agent, now - HOUR_US]))
                .op("count a gateway call")?;
            let counts = tx
                // Three index range counts: no table row is read.
                .prepare_cached(
                    "SELECT (SELECT count(*) FROM gateway_calls WHERE agent = ?1), \
                            (SELECT count(*) FROM gateway_calls WHERE agent = ?1 AND at > ?2), \
                            (SELECT count(*) FROM gateway_calls WHERE agent = ?1 AND tool = ?3 AND at > ?2)",
                )
                .and_then(|mut s| {
                    s.query_row(params![agent, now - MINUTE_US, tool], |r| {
                        Ok(CallCounts { hour: r.get(0)?, minute: r.get(1)?, tool_minute: r.get(2)? })
                    })
                })
                .op("count a gateway call")?;
            if let Some(refusal) = admit(&counts) {
                return Ok(Some(refusal));
            }
            tx.prepare_cached("INSERT INTO gateway_calls (agent, tool, at) VALUES (?1, ?2, ?3)")
                .and_then(|mut s| s.execute(params![agent, tool, now]))
                .op("count a gateway call")?;
            Ok(None)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SqliteStore;

    #[test]
    fn tokens_are_bound_to_one_agent_and_replaced_whole() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("t.db")).unwrap();
        assert_eq!(store.gateway_token("builder-1").unwrap(), None);
        store.set_gateway_token("builder-1", "h1").unwrap();
        store.set_gateway_token("builder-1", "h2").unwrap();
        assert_eq!(store.gateway_token("builder-1").unwrap().as_deref(), Some("h2"));
        assert_eq!(store.gateway_token("builder-2").unwrap(), None);
    }

    #[test]
    fn calls_are_counted_per_agent_across_openers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let (one, two) = (SqliteStore::open(&path).unwrap(), SqliteStore::open(&path).unwrap());
        let at_most_two = |c: &CallCounts| (c.minute >= 2).then(|| format!("{} calls", c.minute));
        assert_eq!(one.count_call("a", "t", &at_most_two).unwrap(), None);
        // Another opener (another gateway process) sees the same count.
        assert_eq!(two.count_call("a", "u", &at_most_two).unwrap(), None);
        assert_eq!(two.count_call("a", "t", &at_most_two).unwrap().as_deref(), Some("2 calls"));
        // A refused call is not counted; another agent has its own budget.
        let seen = std::cell::Cell::new(CallCounts::default());
        one.count_call("a", "t", &|c| {
            seen.set(*c);
            None
        })
        .unwrap();
        assert_eq!(seen.get(), CallCounts { minute: 2, hour: 2, tool_minute: 1 });
        assert_eq!(one.count_call("b", "t", &at_most_two).unwrap(), None);
    }
}
