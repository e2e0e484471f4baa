//! `troupe cost`: what the team cost, from the usage ledger (one row per model
//! turn), grouped the way ccusage groups Claude Code's usage.

use std::process::ExitCode;

use clap::{Args, ValueEnum};
use jiff::Timestamp;
use serde::Serialize;
use troupe_store::UsageFilter;
use troupe_store::usage::{GroupBy, UsageTotals, summarise};

use crate::cli::GlobalArgs;
use crate::error::{CliError, CliResult};
use crate::output::{note, print_json, print_line, print_table};

/// How to group the turns.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum By {
    /// Each Lead run (a feature from one start) or `agent run`.
    Run,
    /// Each feature.
    Feature,
    /// Each role.
    Role,
    /// Each agent.
    Agent,
    /// Each model.
    Model,
    /// Each UTC day.
    Day,
    /// Each 5-hour billing block.
    Block,
}

impl By {
    fn group(self) -> GroupBy {
        match self {
            By::Run => GroupBy::Run,
            By::Feature => GroupBy::Feature,
            By::Role => GroupBy::Role,
            By::Agent => GroupBy::Agent,
            By::Model => GroupBy::Model,
            By::Day => GroupBy::Day,
            By::Block => GroupBy::Block,
        }
    }
}

/// What the team cost: tokens and US dollars per run, feature, role, agent,
/// model, day or 5-hour block, from every model turn troupe's teammates took.
#[derive(Debug, Args)]
pub struct CostArgs {
    /// How to group the turns.
    #[arg(long, value_enum, default_value = "feature")]
    pub by: By,
    /// Only turns since then: a date (2026-11-01), a time (2026-11-01T09:00:00Z)
    /// or an age (90m, 12h, 7d).
    #[arg(long, value_name = "WHEN")]
    pub since: Option<String>,
    /// Only this feature's turns.
    #[arg(long)]
    pub feature: Option<String>,
}

/// `troupe cost --json`.
#[derive(Debug, Serialize)]
struct CostReport {
    by: GroupBy,
    since: Option<Timestamp>,
    groups: Vec<UsageTotals>,
    total: UsageTotals,
}

pub fn run(g: &GlobalArgs, args: CostArgs) -> CliResult<ExitCode> {
    let since = args.since.as_deref().map(|s| parse_since(s, Timestamp::now())).transpose()?;
    let project = crate::project::find(g)?;
    let store = crate::commands::mcp::open_store(&project)?;
    let filter = UsageFilter { since, feature: args.feature, ..UsageFilter::default() };
    let rows = store.usage(&filter).map_err(|e| CliError::internal("cannot read the usage ledger").with_source(&e))?;
    let (groups, total) = summarise(&rows, args.by.group());
    if g.json {
        print_json(&CostReport { by: args.by.group(), since, groups, total });
        return Ok(ExitCode::SUCCESS);
    }
    if groups.is_empty() {
        note("no model turns booked yet; teammates' turns are booked as their engines report them");
        return Ok(ExitCode::SUCCESS);
    }
    let row = |t: &UsageTotals| {
        vec![
            t.key.clone(),
            t.models.join(", "),
            t.turns.to_string(),
            t.input_tokens.to_string(),
            t.output_tokens.to_string(),
            t.cache_write_tokens.to_string(),
            t.cache_read_tokens.to_string(),
            t.total_tokens.to_string(),
            format!("${:.4}", t.cost_usd),
        ]
    };
    let mut table: Vec<Vec<String>> = groups.iter().map(row).collect();
    table.push(row(&total));
    let key = format!("{:?}", args.by).to_uppercase();
    print_table(
        &[&key, "MODELS", "TURNS", "INPUT", "OUTPUT", "CACHE CREATE", "CACHE READ", "TOTAL TOKENS", "COST (USD)"],
        &table,
        &[2, 3, 4, 5, 6, 7, 8],
    );
    if total.calculated_usd > 0.0 {
        let as_of = troupe_core::usage::PriceTable::builtin().as_of;
        print_line(&format!(
            "${:.4} of it calculated from the price table of {as_of} (engines that report tokens only)",
            total.calculated_usd
        ));
    }
    Ok(ExitCode::SUCCESS)
}

/// `--since`: a date, a time, or an age before `now`.
fn parse_since(s: &str, now: Timestamp) -> CliResult<Timestamp> {
    let bad = || {
        CliError::usage(format!("`--since {s}` is not a date, a time or an age"))
            .with_hint("write 2026-11-01, 2026-11-01T09:00:00Z, or an age such as 90m, 12h or 7d")
    };
    if let Ok(t) = s.parse::<Timestamp>() {
        return Ok(t);
    }
    if let Ok(d) = s.parse::<jiff::civil::Date>() {
        return d.to_zoned(jiff::tz::TimeZone::UTC).map(|z| z.timestamp()).map_err(|_| bad());
    }
    let (n, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?);
    let n: i64 = n.parse().map_err(|_| bad())?;
    let secs = match unit {
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(bad()),
    };
    now.checked_sub(jiff::SignedDuration::from_secs(n.saturating_mul(secs))).map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_reads_dates_times_and_ages() {
        let now: Timestamp = "2026-11-02T12:00:00Z".parse().unwrap();
        assert_eq!(parse_since("2026-11-01", now).unwrap().to_string(), "2026-11-01T00:00:00Z");
        assert_eq!(parse_since("2026-11-01T09:00:00Z", now).unwrap().to_string(), "2026-11-01T09:00:00Z");
        assert_eq!(parse_since("12h", now).unwrap().to_string(), "2026-11-02T00:00:00Z");
        assert_eq!(parse_since("90m", now).unwrap().to_string(), "2026-11-02T10:30:00Z");
        for bad in ["yesterday", "12", "5w", "h"] {
            assert!(parse_since(bad, now).is_err(), "{bad}");
        }
    }
}
