//! The gateway's audit log on SQLite. Rows are only ever inserted; triggers in
//! the schema refuse updates and deletes.

use rusqlite::params;

use super::rows::{self, AUDIT_COLS};
use super::{SqliteStore, now_us};
use crate::audit::{AuditFilter, AuditRecord, NewAuditRecord};
use crate::error::{Context, Result};
use crate::traits::AuditLog;

impl AuditLog for SqliteStore {
    fn append_audit(&self, record: NewAuditRecord) -> Result<AuditRecord> {
        self.write("append an audit record", |tx| {
            let signature = record.thinking_signature.as_ref().map(|v| v.to_string());
            tx.prepare_cached(&format!(
                "INSERT INTO audit (at, agent, role, tool, decision, reason, duration_ms, argument_shape, \
                 thinking_signature) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) RETURNING {AUDIT_COLS}"
            ))
            .and_then(|mut s| {
                s.query_row(
                    params![
                        now_us(),
                        record.agent,
                        record.role,
                        record.tool,
                        record.decision.as_str(),
                        record.reason,
                        record.duration_ms.map(|d| i64::try_from(d).unwrap_or(i64::MAX)),
                        record.argument_shape.to_string(),
                        signature,
                    ],
                    rows::audit,
                )
            })
            .op("append an audit record")
        })
    }

    fn audit(&self, filter: &AuditFilter) -> Result<Vec<AuditRecord>> {
        let mut cond = String::new();
        let mut args: Vec<rusqlite::types::Value> = Vec::new();
        let mut push = |clause: &str, value: rusqlite::types::Value| {
            args.push(value);
            cond.push_str(&format!(" AND {clause} ?{}", args.len()));
        };
        if let Some(a) = &filter.agent {
            push("agent =", a.clone().into());
        }
        if let Some(t) = &filter.tool {
            push("tool =", t.clone().into());
        }
        if let Some(d) = filter.decision {
            push("decision =", d.as_str().to_string().into());
        }
        if let Some(since) = filter.since {
            push("at >=", since.as_microsecond().into());
        }
        let limit = filter.limit.map(|l| format!(" LIMIT {l}")).unwrap_or_default();
        let sql = format!("SELECT {AUDIT_COLS} FROM audit WHERE 1 = 1{cond} ORDER BY id DESC{limit}");
        self.read("read the audit log", |c| {
            c.prepare_cached(&sql)
                .and_then(|mut s| s.query_map(rusqlite::params_from_iter(args.iter()), rows::audit)?.collect())
                .op("read the audit log")
        })
    }
}
