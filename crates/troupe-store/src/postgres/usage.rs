//! The usage ledger on PostgreSQL, as on SQLite ([`crate::sqlite::usage`]):
//! inserted only (a trigger refuses the rest), a turn booked twice ignored by
//! its `(agent, message_id)` key.

use postgres::Row;

use super::rows::{all, get, ts};
use super::{PgStore, now_us};
use crate::error::Result;
use crate::sqlite::usage::COLS;
use crate::traits::UsageLedger;
use crate::usage::{NewUsage, UsageContext, UsageFilter, UsageRecord};

fn n(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn record(row: &Row) -> Result<UsageRecord> {
    let at = ts(row, 1)?;
    let tokens = |i: usize| -> Result<u64> { Ok(get::<i64>(row, i)?.max(0) as u64) };
    Ok(UsageRecord {
        id: get(row, 0)?,
        at,
        usage: NewUsage {
            context: UsageContext {
                run: get(row, 2)?,
                feature: get(row, 3)?,
                phase: get(row, 4)?,
                task: get(row, 5)?,
                agent: get(row, 6)?,
                role: get(row, 7)?,
                engine: get(row, 8)?,
            },
            model: get(row, 9)?,
            message_id: get(row, 10)?,
            input_tokens: tokens(11)?,
            output_tokens: tokens(12)?,
            cache_read_tokens: tokens(13)?,
            cache_write_tokens: tokens(14)?,
            reasoning_tokens: tokens(15)?,
            cost_usd: get(row, 16)?,
            cost_source: get(row, 17)?,
        },
    })
}

impl UsageLedger for PgStore {
    fn record_usage(&self, u: NewUsage) -> Result<bool> {
        self.write("book a model turn", |tx| {
            let c = &u.context;
            tx.exec(
                "book a model turn",
                "INSERT INTO usage (at, run, feature, phase, task, agent, role, engine, model, message_id, \
                 input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, reasoning_tokens, cost_usd, \
                 cost_source) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17) \
                 ON CONFLICT (agent, message_id) DO NOTHING",
                &[
                    &now_us(),
                    &c.run,
                    &c.feature,
                    &c.phase,
                    &c.task,
                    &c.agent,
                    &c.role,
                    &c.engine,
                    &u.model,
                    &u.message_id,
                    &n(u.input_tokens),
                    &n(u.output_tokens),
                    &n(u.cache_read_tokens),
                    &n(u.cache_write_tokens),
                    &n(u.reasoning_tokens),
                    &u.cost_usd.max(0.0),
                    &u.cost_source,
                ],
            )
            .map(|inserted| inserted == 1)
        })
    }

    fn usage(&self, filter: &UsageFilter) -> Result<Vec<UsageRecord>> {
        let mut cond = String::new();
        let mut args: Vec<Box<dyn postgres::types::ToSql + Sync>> = Vec::new();
        let mut push = |clause: &str, value: Box<dyn postgres::types::ToSql + Sync>| {
            args.push(value);
            cond.push_str(&format!(" AND {clause} ${}", args.len()));
        };
        if let Some(since) = filter.since {
            push("at >=", Box::new(since.as_microsecond()));
        }
        for (col, v) in [("run =", &filter.run), ("feature =", &filter.feature), ("agent =", &filter.agent)] {
            if let Some(v) = v {
                push(col, Box::new(v.clone()));
            }
        }
        let sql = format!("SELECT {COLS} FROM usage WHERE 1 = 1{cond} ORDER BY id");
        self.read("read the usage ledger", |tx| {
            let values: Vec<super::Param<'_>> = args.iter().map(|a| a.as_ref() as super::Param<'_>).collect();
            all(tx.query("read the usage ledger", &sql, &values)?, record)
        })
    }
}
