//! The gateway's shared state on SQLite: token hashes bound to agent ids, and
//! the calls counted against rate limits. Calls are counted here, not in a
//! gateway process, so that every gateway serving the same agent (a second
//! `troupe mcp serve --agent X`, a restarted one) draws on one budget.

use rusqlite::{OptionalExtension, params};

use super::{SqliteStore, now_us, record};
use crate::error::{Context, Result};
use crate::event::NewEvent;
use crate::traits::{CallCounts, GatewayAccess};

/// A minute in microseconds.
pub(crate) const MINUTE_US: i64 = 60_000_000;
/// An hour in microseconds.
pub(crate) const HOUR_US: i64 = 60 * MINUTE_US;

/// The counts of a window from the numbers of its first and last calls (see
/// schema V5): the last number minus the first in the window, plus one.
pub(crate) fn counts_of(
    first: Option<(i64, i64)>,
    first_in_minute: Option<(i64, i64)>,
    last: Option<(i64, i64)>,
    tool_first_in_minute: Option<(i64, i64)>,
    tool_last: Option<(i64, i64)>,
) -> CallCounts {
    let span = |from: Option<(i64, i64)>, to: Option<(i64, i64)>| match (from, to) {
        (Some((_, a)), Some((_, b))) if b >= a => (b - a + 1) as u64,
        _ => 0,
    };
    CallCounts {
        hour: span(first, last),
        minute: span(first_in_minute, last),
        tool_minute: span(tool_first_in_minute, tool_last),
        total: 0,
    }
}

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

    fn gateway_agent(&self, token_hash: &str) -> Result<Option<String>> {
        // A scan of one row per agent of the project: small, and rare enough
        // (once per HTTP request with an agent's token) to need no index.
        self.read("find a gateway token's agent", |c| {
            c.prepare_cached("SELECT agent FROM gateway_tokens WHERE hash = ?1")
                .and_then(|mut s| s.query_row(params![token_hash], |r| r.get(0)).optional())
                .op("find a gateway token's agent")
        })
    }

    fn count_call(
        &self,
        agent: &str,
        tool: &str,
        admit: &dyn Fn(&CallCounts) -> Option<String>,
    ) -> Result<Option<String>> {
        self.count_call_at(agent, tool, now_us(), admit)
    }
}

impl SqliteStore {
    /// [`GatewayAccess::count_call`] at time `now_raw` (µs since the epoch).
    fn count_call_at(
        &self,
        agent: &str,
        tool: &str,
        now_raw: i64,
        admit: &dyn Fn(&CallCounts) -> Option<String>,
    ) -> Result<Option<String>> {
        const OP: &str = "count a gateway call";
        self.write(OP, |tx| {
            // One index lookup each (see schema V5): a count is the last
            // number minus the first one in its window, plus one.
            let one = |sql: &str, p: &[&dyn rusqlite::ToSql]| -> Result<Option<(i64, i64)>> {
                tx.prepare_cached(sql)
                    .and_then(|mut s| s.query_row(p, |r| Ok((r.get(0)?, r.get(1)?))).optional())
                    .op(OP)
            };
            let last = one(
                "SELECT at, seq FROM gateway_calls WHERE agent = ?1 ORDER BY at DESC, seq DESC LIMIT 1",
                &[&agent],
            )?;
            // `at` never goes back for an agent (a clock stepped back), so that
            // numbering by `seq` and ordering by `at` agree.
            let now = last.map_or(now_raw, |(at, _)| now_raw.max(at));
            // Older calls never count again; dropping them keeps the table at one hour of calls.
            tx.prepare_cached("DELETE FROM gateway_calls WHERE agent = ?1 AND at <= ?2")
                .and_then(|mut s| s.execute(params![agent, now - HOUR_US]))
                .op(OP)?;
            let minute_ago = now - MINUTE_US;
            let first = one("SELECT at, seq FROM gateway_calls WHERE agent = ?1 ORDER BY at, seq LIMIT 1", &[&agent])?;
            let first_in_minute = one(
                "SELECT at, seq FROM gateway_calls WHERE agent = ?1 AND at > ?2 ORDER BY at, seq LIMIT 1",
                &[&agent, &minute_ago],
            )?;
            let tool_last = one(
                "SELECT at, tool_seq FROM gateway_calls WHERE agent = ?1 AND tool = ?2 \
                 ORDER BY at DESC, tool_seq DESC LIMIT 1",
                &[&agent, &tool],
            )?;
            let tool_first_in_minute = one(
                "SELECT at, tool_seq FROM gateway_calls WHERE agent = ?1 AND tool = ?2 AND at > ?3 \
                 ORDER BY at, tool_seq LIMIT 1",
                &[&agent, &tool, &minute_ago],
            )?;
            let mut counts = counts_of(first, first_in_minute, last, tool_first_in_minute, tool_last);
            counts.total = tx
                .prepare_cached("SELECT calls FROM gateway_call_totals WHERE agent = ?1")
                .and_then(|mut s| s.query_row(params![agent], |r| r.get::<_, i64>(0)).optional())
                .op(OP)?
                .unwrap_or(0) as u64;
            if let Some(refusal) = admit(&counts) {
                return Ok(Some(refusal));
            }
            tx.prepare_cached(
                "INSERT INTO gateway_call_totals (agent, calls) VALUES (?1, 1) \
                 ON CONFLICT (agent) DO UPDATE SET calls = calls + 1",
            )
            .and_then(|mut s| s.execute(params![agent]))
            .op(OP)?;
            let seq = last.map_or(1, |(_, n)| n + 1);
            let tool_seq = tool_last.map_or(1, |(_, n)| n + 1);
            tx.prepare_cached("INSERT INTO gateway_calls (agent, tool, at, seq, tool_seq) VALUES (?1, ?2, ?3, ?4, ?5)")
                .and_then(|mut s| s.execute(params![agent, tool, now, seq, tool_seq]))
                .op(OP)?;
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
        assert_eq!(store.gateway_agent("h2").unwrap().as_deref(), Some("builder-1"));
        assert_eq!(store.gateway_agent("h1").unwrap(), None, "a replaced token names nobody");
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
        assert_eq!(seen.get(), CallCounts { minute: 2, hour: 2, tool_minute: 1, total: 2 });
        assert_eq!(one.count_call("b", "t", &at_most_two).unwrap(), None);
    }

    #[test]
    fn numbered_counts_equal_counting_every_call() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("t.db")).unwrap();
        // 400 calls of two agents and three tools over two and a half hours,
        // irregularly spaced, one with the clock stepped back.
        let start = 1_000_000 * HOUR_US;
        let mut at = start;
        let mut calls: Vec<(String, String, i64)> = Vec::new();
        for i in 0..400i64 {
            at += (i * 7919 % 45) * 1_000_000 + 1;
            let now = if i == 200 { at - 5_000_000 } else { at };
            let (agent, tool) = (["a", "b"][(i % 3 == 0) as usize], ["t", "u", "v"][(i % 5 % 3) as usize]);
            let seen = std::cell::Cell::new(None);
            store
                .count_call_at(agent, tool, now, &|c| {
                    seen.set(Some(*c));
                    None
                })
                .unwrap();
            // Naive: every kept call of the agent in each window, before this one.
            let at_of = |c: &(String, String, i64)| c.2;
            let newest = calls.iter().filter(|c| c.0 == agent).map(at_of).max().unwrap_or(now);
            let now = now.max(newest);
            let mine = |c: &&(String, String, i64)| c.0 == agent && c.2 > now - HOUR_US;
            let hour = calls.iter().filter(mine).count() as u64;
            let minute = calls.iter().filter(mine).filter(|c| c.2 > now - MINUTE_US).count() as u64;
            let tool_minute = calls.iter().filter(mine).filter(|c| c.1 == tool && c.2 > now - MINUTE_US).count() as u64;
            // The lifetime count keeps the calls the hour's window dropped.
            let total = calls.iter().filter(|c| c.0 == agent).count() as u64;
            assert_eq!(seen.get(), Some(CallCounts { hour, minute, tool_minute, total }), "call {i}");
            calls.push((agent.to_string(), tool.to_string(), now));
        }
    }
}
