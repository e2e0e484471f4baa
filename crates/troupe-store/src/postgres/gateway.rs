//! The gateway's shared state on PostgreSQL: token hashes and the calls
//! counted against rate limits, as on SQLite (see schema V5 for the numbering
//! that makes a count two index lookups).

use super::rows::get as col;
use super::{Param, PgStore, Tx, now_us, record};
use crate::error::Result;
use crate::event::NewEvent;
use crate::sqlite::gateway::{HOUR_US, MINUTE_US, counts_of};
use crate::traits::{CallCounts, GatewayAccess};

impl GatewayAccess for PgStore {
    fn set_gateway_token(&self, agent: &str, token_hash: &str) -> Result<()> {
        self.write("store a gateway token", |tx| {
            let at = now_us();
            tx.exec(
                "store a gateway token",
                "INSERT INTO gateway_tokens (agent, hash, created_at) VALUES ($1, $2, $3) \
                 ON CONFLICT (agent) DO UPDATE SET hash = excluded.hash, created_at = excluded.created_at",
                &[&agent, &token_hash, &at],
            )?;
            // The event says a token changed hands, never which.
            let event = NewEvent {
                kind: "gateway_token".into(),
                actor: None,
                subject: Some(agent.to_string()),
                data: serde_json::Value::Null,
            };
            record(tx, at, &event).map(drop)
        })
    }

    fn gateway_token(&self, agent: &str) -> Result<Option<String>> {
        self.read("read a gateway token", |tx| {
            tx.opt("read a gateway token", "SELECT hash FROM gateway_tokens WHERE agent = $1", &[&agent])?
                .map(|r| col(&r, 0))
                .transpose()
        })
    }

    fn gateway_agent(&self, token_hash: &str) -> Result<Option<String>> {
        // One row per agent of the project: small, and asked once per HTTP
        // request with an agent's token, so no index (as on SQLite).
        self.read("find a gateway token's agent", |tx| {
            tx.opt("find a gateway token's agent", "SELECT agent FROM gateway_tokens WHERE hash = $1", &[&token_hash])?
                .map(|r| col(&r, 0))
                .transpose()
        })
    }

    fn count_call(
        &self,
        agent: &str,
        tool: &str,
        admit: &dyn Fn(&CallCounts) -> Option<String>,
    ) -> Result<Option<String>> {
        const OP: &str = "count a gateway call";
        self.write(OP, |tx| {
            // One agent's calls are counted one at a time (its numbers are gap-free).
            tx.exec(OP, "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", &[&agent])?;
            let last = pair(
                tx,
                "SELECT at, seq FROM gateway_calls WHERE agent = $1 ORDER BY at DESC, seq DESC LIMIT 1",
                &[&agent],
            )?;
            let now = last.map_or(now_us(), |(at, _)| now_us().max(at));
            tx.exec(OP, "DELETE FROM gateway_calls WHERE agent = $1 AND at <= $2", &[&agent, &(now - HOUR_US)])?;
            let minute_ago = now - MINUTE_US;
            let first =
                pair(tx, "SELECT at, seq FROM gateway_calls WHERE agent = $1 ORDER BY at, seq LIMIT 1", &[&agent])?;
            let first_in_minute = pair(
                tx,
                "SELECT at, seq FROM gateway_calls WHERE agent = $1 AND at > $2 ORDER BY at, seq LIMIT 1",
                &[&agent, &minute_ago],
            )?;
            let tool_last = pair(
                tx,
                "SELECT at, tool_seq FROM gateway_calls WHERE agent = $1 AND tool = $2 \
                 ORDER BY at DESC, tool_seq DESC LIMIT 1",
                &[&agent, &tool],
            )?;
            let tool_first_in_minute = pair(
                tx,
                "SELECT at, tool_seq FROM gateway_calls WHERE agent = $1 AND tool = $2 AND at > $3 \
                 ORDER BY at, tool_seq LIMIT 1",
                &[&agent, &tool, &minute_ago],
            )?;
            let mut counts = counts_of(first, first_in_minute, last, tool_first_in_minute, tool_last);
            let total = tx.opt(OP, "SELECT calls FROM gateway_call_totals WHERE agent = $1", &[&agent])?;
            counts.total = total.map(|r| col::<i64>(&r, 0)).transpose()?.unwrap_or(0) as u64;
            if let Some(refusal) = admit(&counts) {
                return Ok(Some(refusal));
            }
            tx.exec(
                OP,
                "INSERT INTO gateway_call_totals (agent, calls) VALUES ($1, 1) \
                 ON CONFLICT (agent) DO UPDATE SET calls = gateway_call_totals.calls + 1",
                &[&agent],
            )?;
            let seq = last.map_or(1, |(_, n)| n + 1);
            let tool_seq = tool_last.map_or(1, |(_, n)| n + 1);
            tx.exec(
                OP,
                "INSERT INTO gateway_calls (agent, tool, at, seq, tool_seq) VALUES ($1, $2, $3, $4, $5)",
                &[&agent, &tool, &now, &seq, &tool_seq],
            )?;
            Ok(None)
        })
    }
}

/// The `(at, number)` of the one row `sql` selects, if any.
fn pair(tx: &mut Tx<'_>, sql: &str, params: &[Param<'_>]) -> Result<Option<(i64, i64)>> {
    tx.opt("count a gateway call", sql, params)?.map(|r| Ok((col(&r, 0)?, col(&r, 1)?))).transpose()
}
