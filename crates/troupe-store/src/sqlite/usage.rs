//! The usage ledger on SQLite: inserted only (triggers refuse the rest), a
//! turn booked twice is ignored by its `(agent, message_id)` key.

use rusqlite::{Row, params};

use super::{SqliteStore, now_us};
use crate::error::{Context, Result};
use crate::traits::UsageLedger;
use crate::usage::{NewUsage, UsageContext, UsageFilter, UsageRecord};

pub(crate) const COLS: &str = "id, at, run, feature, phase, task, agent, role, engine, model, message_id, input_tokens, \
                    output_tokens, cache_read_tokens, cache_write_tokens, reasoning_tokens, cost_usd, cost_source";

fn n(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn row(r: &Row<'_>) -> rusqlite::Result<UsageRecord> {
    let at: i64 = r.get(1)?;
    let at = jiff::Timestamp::from_microsecond(at)
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(1, rusqlite::types::Type::Integer, Box::new(e)))?;
    let u = |i: usize| -> rusqlite::Result<u64> { Ok(r.get::<_, i64>(i)?.max(0) as u64) };
    Ok(UsageRecord {
        id: r.get(0)?,
        at,
        usage: NewUsage {
            context: UsageContext {
                run: r.get(2)?,
                feature: r.get(3)?,
                phase: r.get(4)?,
                task: r.get(5)?,
                agent: r.get(6)?,
                role: r.get(7)?,
                engine: r.get(8)?,
            },
            model: r.get(9)?,
            message_id: r.get(10)?,
            input_tokens: u(11)?,
            output_tokens: u(12)?,
            cache_read_tokens: u(13)?,
            cache_write_tokens: u(14)?,
            reasoning_tokens: u(15)?,
            cost_usd: r.get(16)?,
            cost_source: r.get(17)?,
        },
    })
}

impl UsageLedger for SqliteStore {
    fn record_usage(&self, u: NewUsage) -> Result<bool> {
        self.write("book a model turn", |tx| {
            let c = &u.context;
            tx.prepare_cached(
                "INSERT INTO usage (at, run, feature, phase, task, agent, role, engine, model, message_id, \
                 input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, reasoning_tokens, cost_usd, \
                 cost_source) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17) \
                 ON CONFLICT (agent, message_id) DO NOTHING",
            )
            .and_then(|mut s| {
                s.execute(params![
                    now_us(),
                    c.run,
                    c.feature,
                    c.phase,
                    c.task,
                    c.agent,
                    c.role,
                    c.engine,
                    u.model,
                    u.message_id,
                    n(u.input_tokens),
                    n(u.output_tokens),
                    n(u.cache_read_tokens),
                    n(u.cache_write_tokens),
                    n(u.reasoning_tokens),
                    u.cost_usd.max(0.0),
                    u.cost_source,
                ])
            })
            .map(|inserted| inserted == 1)
            .op("book a model turn")
        })
    }

    fn usage(&self, filter: &UsageFilter) -> Result<Vec<UsageRecord>> {
        let mut cond = String::new();
        let mut args: Vec<rusqlite::types::Value> = Vec::new();
        let mut push = |clause: &str, value: rusqlite::types::Value| {
            args.push(value);
            cond.push_str(&format!(" AND {clause} ?{}", args.len()));
        };
        if let Some(since) = filter.since {
            push("at >=", since.as_microsecond().into());
        }
        for (col, v) in [("run =", &filter.run), ("feature =", &filter.feature), ("agent =", &filter.agent)] {
            if let Some(v) = v {
                push(col, v.clone().into());
            }
        }
        let sql = format!("SELECT {COLS} FROM usage WHERE 1 = 1{cond} ORDER BY id");
        self.read("read the usage ledger", |c| {
            c.prepare_cached(&sql)
                .and_then(|mut s| s.query_map(rusqlite::params_from_iter(args.iter()), row)?.collect())
                .op("read the usage ledger")
        })
    }
}
