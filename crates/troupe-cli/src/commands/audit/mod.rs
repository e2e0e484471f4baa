//! `troupe audit …`: the gateway's audit log (seed 004 audit logs and thinking signatures).

use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};
use serde_json::json;
use troupe_gateway::audit::{stats, thinking_stats, to_csv};
use troupe_store::{AuditFilter, Decision};

use crate::cli::GlobalArgs;
use crate::error::{CliError, CliResult};
use crate::output::{ago, escape, note, print_json, print_line, print_table};

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Counts of allowed, denied and rate-limited calls, by role, tool and agent.
    Stats(FilterArgs),
    /// The most recent denied calls.
    Denials(DenialsArgs),
    /// Every record, as CSV or JSON.
    Export(ExportArgs),
    /// Thinking-signature statistics and the calls that carry one.
    Thinking(FilterArgs),
}

/// Which records to consider.
#[derive(Debug, Args)]
pub struct FilterArgs {
    /// Only this agent's calls.
    #[arg(long)]
    pub agent: Option<String>,
}

/// `audit denials`.
#[derive(Debug, Args)]
pub struct DenialsArgs {
    /// How many.
    #[arg(long, default_value_t = 10)]
    pub limit: u32,
    /// Only this agent's calls.
    #[arg(long)]
    pub agent: Option<String>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Format {
    Csv,
    Json,
}

/// `audit export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Output format.
    #[arg(long, value_enum, default_value = "json")]
    pub format: Format,
    /// Only this agent's calls.
    #[arg(long)]
    pub agent: Option<String>,
}

pub fn run(g: &GlobalArgs, cmd: AuditCommand) -> CliResult<ExitCode> {
    let project = crate::project::find(g)?;
    let store = crate::commands::mcp::open_store(&project)?;
    let query = |filter: AuditFilter| {
        store.audit(&filter).map_err(|e| CliError::internal("cannot read the audit log").with_source(&e))
    };
    match cmd {
        AuditCommand::Stats(a) => {
            let records = query(AuditFilter { agent: a.agent, ..AuditFilter::default() })?;
            let s = stats(&records);
            if g.json {
                print_json(&s);
            } else {
                print_line(&format!(
                    "{} calls: {} allowed, {} denied, {} rate-limited ({:.1}% denied)",
                    s.total,
                    s.allowed,
                    s.denied,
                    s.rate_limited,
                    s.denial_rate * 100.0
                ));
                for (role, n) in &s.by_role {
                    print_line(&format!("  role {}: {n}", escape(role)));
                }
                for (tool, n) in &s.by_tool {
                    print_line(&format!("  tool {}: {n}", escape(tool)));
                }
                for (agent, n) in &s.by_agent {
                    print_line(&format!("  agent {}: {n}", escape(agent)));
                }
            }
        }
        AuditCommand::Denials(a) => {
            let records = query(AuditFilter {
                agent: a.agent,
                decision: Some(Decision::Denied),
                limit: Some(a.limit),
                ..AuditFilter::default()
            })?;
            if g.json {
                print_json(&records);
            } else if records.is_empty() {
                note("no denials in the gateway's audit log; `troupe audit stats` counts every call");
            } else {
                let now = jiff::Timestamp::now();
                let rows: Vec<Vec<String>> = records
                    .iter()
                    .map(|r| {
                        let reason = r.reason.as_deref().unwrap_or("").split_whitespace().collect::<Vec<_>>().join(" ");
                        vec![ago(r.at, now), r.agent.clone(), r.role.clone(), r.tool.clone(), reason]
                    })
                    .collect();
                print_table(&["WHEN", "AGENT", "ROLE", "TOOL", "REASON"], &rows, &[]);
            }
        }
        AuditCommand::Export(a) => {
            let mut records = query(AuditFilter { agent: a.agent, ..AuditFilter::default() })?;
            records.reverse();
            match a.format {
                Format::Csv => print!("{}", to_csv(&records)),
                Format::Json => print_json(&records),
            }
        }
        AuditCommand::Thinking(a) => {
            let records = query(AuditFilter { agent: a.agent, ..AuditFilter::default() })?;
            let s = thinking_stats(&records);
            let with: Vec<_> = records.iter().filter(|r| r.thinking_signature.is_some()).collect();
            if g.json {
                let report: Vec<_> = with
                    .iter()
                    .map(|r| json!({"at": r.at, "agent": r.agent, "role": r.role, "tool": r.tool, "decision": r.decision, "thinking": r.thinking_signature}))
                    .collect();
                print_json(&json!({"stats": s, "entries": report}));
            } else {
                print_line(&format!(
                    "{} of {} calls carry thinking ({:.1}%); {} thinking tokens, {:.0} on average",
                    s.entries_with_thinking,
                    records.len(),
                    s.thinking_coverage_rate * 100.0,
                    s.total_thinking_tokens,
                    s.avg_thinking_tokens
                ));
                for (kind, n) in &s.by_type {
                    print_line(&format!("  {}: {n}", escape(kind)));
                }
                for r in with {
                    let text = r
                        .thinking_signature
                        .as_ref()
                        .and_then(|t| t.get("thinking"))
                        .and_then(|t| t.as_str())
                        .unwrap_or("");
                    print_line(&format!(
                        "{}  {} as {}  {} ({})\n    {}",
                        ago(r.at, jiff::Timestamp::now()),
                        r.agent,
                        r.role,
                        r.tool,
                        r.decision,
                        // Thinking keeps its lines, each indented and escaped on its own.
                        text.lines().map(escape).collect::<Vec<_>>().join("\n    ")
                    ));
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
