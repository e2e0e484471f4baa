//! The gateway's audit log on PostgreSQL. Rows are only ever inserted; a
//! trigger refuses updates and deletes.

use super::rows::{self, AUDIT_COLS, all};
use super::{Param, PgStore, now_us};
use crate::audit::{AuditFilter, AuditRecord, NewAuditRecord};
use crate::error::Result;
use crate::traits::AuditLog;

impl AuditLog for PgStore {
    fn append_audit(&self, record: NewAuditRecord) -> Result<AuditRecord> {
        self.write("append an audit record", |tx| {
            let signature = record.thinking_signature.as_ref().map(|v| v.to_string());
            let sql = format!(
                "INSERT INTO audit (at, agent, role, tool, decision, reason, duration_ms, argument_shape, \
                 thinking_signature) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING {AUDIT_COLS}"
            );
            let row = tx.one(
                "append an audit record",
                &sql,
                &[
                    &now_us(),
                    &record.agent,
                    &record.role,
                    &record.tool,
                    &record.decision.as_str(),
                    &record.reason,
                    &record.duration_ms.map(|d| i64::try_from(d).unwrap_or(i64::MAX)),
                    &record.argument_shape.to_string(),
                    &signature,
                ],
            )?;
            rows::audit(&row)
        })
    }

    fn audit(&self, filter: &AuditFilter) -> Result<Vec<AuditRecord>> {
        let mut cond = String::new();
        let mut args: Vec<Box<dyn postgres::types::ToSql + Sync>> = Vec::new();
        let mut push = |clause: &str, value: Box<dyn postgres::types::ToSql + Sync>| {
            args.push(value);
            cond.push_str(&format!(" AND {clause} ${}", args.len()));
        };
        if let Some(a) = &filter.agent {
            push("agent =", Box::new(a.clone()));
        }
        if let Some(t) = &filter.tool {
            push("tool =", Box::new(t.clone()));
        }
        if let Some(d) = filter.decision {
            push("decision =", Box::new(d.as_str().to_string()));
        }
        if let Some(since) = filter.since {
            push("at >=", Box::new(since.as_microsecond()));
        }
        let limit = filter.limit.map(|l| format!(" LIMIT {l}")).unwrap_or_default();
        let sql = format!("SELECT {AUDIT_COLS} FROM audit WHERE 1 = 1{cond} ORDER BY id DESC{limit}");
        self.read("read the audit log", |tx| {
            let values: Vec<Param<'_>> = args.iter().map(|a| a.as_ref() as Param<'_>).collect();
            all(tx.query("read the audit log", &sql, &values)?, rows::audit)
        })
    }
}
