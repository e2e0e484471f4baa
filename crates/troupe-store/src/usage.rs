//! The usage ledger: one row per model turn a teammate's engine reported,
//! deduplicated by the engine's message id, with its tokens and cost
//! (`reported` by the engine or `calculated` from troupe's price table; see
//! `troupe_core::usage`). Rows are only ever inserted.
//!
//! [`summarise`] groups rows the way `troupe cost` and `GET /api/cost` show
//! them, including ccusage's 5-hour billing blocks.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// Who spent a turn and on what.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageContext {
    /// The run (one Lead run, or one `troupe agent run`).
    pub run: String,
    /// The feature, when the agent works on one.
    pub feature: Option<String>,
    /// The phase it was spawned for.
    pub phase: Option<String>,
    /// Its board task.
    pub task: Option<String>,
    /// The agent id.
    pub agent: String,
    /// Its role.
    pub role: String,
    /// Its engine id.
    pub engine: String,
}

/// One turn to book.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewUsage {
    /// Who spent it.
    #[serde(flatten)]
    pub context: UsageContext,
    /// The engine's message id (unique per agent).
    pub message_id: String,
    /// The model, when known.
    pub model: Option<String>,
    /// Fresh input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Input tokens read from a cache.
    pub cache_read_tokens: u64,
    /// Input tokens written to a cache.
    pub cache_write_tokens: u64,
    /// Reasoning tokens (part of the output tokens).
    pub reasoning_tokens: u64,
    /// Cost in US dollars.
    pub cost_usd: f64,
    /// `reported` or `calculated`.
    pub cost_source: String,
}

impl NewUsage {
    /// Every token of the turn.
    pub fn tokens(&self) -> u64 {
        self.input_tokens + self.output_tokens + self.cache_read_tokens + self.cache_write_tokens
    }
}

/// A booked turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsageRecord {
    /// Increasing id.
    pub id: i64,
    /// When it was booked.
    pub at: Timestamp,
    /// The turn.
    #[serde(flatten)]
    pub usage: NewUsage,
}

/// Which rows to read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UsageFilter {
    /// Booked at or after.
    pub since: Option<Timestamp>,
    /// Of this run only.
    pub run: Option<String>,
    /// Of this feature only.
    pub feature: Option<String>,
    /// Of this agent only.
    pub agent: Option<String>,
}

/// How [`summarise`] groups rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupBy {
    /// By run.
    Run,
    /// By feature (`-` for none).
    Feature,
    /// By role.
    Role,
    /// By agent.
    Agent,
    /// By model (`-` when unknown).
    Model,
    /// By UTC day.
    Day,
    /// By 5-hour billing block: a block starts at the hour of the first turn
    /// after the previous block ended and lasts five hours.
    Block,
}

impl GroupBy {
    /// Every grouping, by its name.
    pub const ALL: [(&'static str, GroupBy); 7] = [
        ("run", GroupBy::Run),
        ("feature", GroupBy::Feature),
        ("role", GroupBy::Role),
        ("agent", GroupBy::Agent),
        ("model", GroupBy::Model),
        ("day", GroupBy::Day),
        ("block", GroupBy::Block),
    ];

    /// The grouping named `name`.
    pub fn from_name(name: &str) -> Option<GroupBy> {
        Self::ALL.iter().find(|(n, _)| *n == name).map(|(_, g)| *g)
    }
}

/// The sums of one group of rows.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UsageTotals {
    /// The group's key (run id, feature, day `YYYY-MM-DD`, a block's start, …).
    pub key: String,
    /// The models seen, in order of name.
    pub models: Vec<String>,
    /// Turns booked.
    pub turns: u64,
    /// Fresh input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Cache reads.
    pub cache_read_tokens: u64,
    /// Cache writes.
    pub cache_write_tokens: u64,
    /// Reasoning tokens.
    pub reasoning_tokens: u64,
    /// Every token.
    pub total_tokens: u64,
    /// Cost in US dollars.
    pub cost_usd: f64,
    /// Of that cost, what troupe calculated (the rest the engines reported).
    pub calculated_usd: f64,
    /// The first and last turn.
    pub first: Option<Timestamp>,
    /// The last turn.
    pub last: Option<Timestamp>,
}

impl UsageTotals {
    /// Adds one row.
    pub fn add(&mut self, r: &UsageRecord) {
        let u = &r.usage;
        if let Some(m) = &u.model
            && let Err(i) = self.models.binary_search(m)
        {
            self.models.insert(i, m.clone());
        }
        self.turns += 1;
        self.input_tokens += u.input_tokens;
        self.output_tokens += u.output_tokens;
        self.cache_read_tokens += u.cache_read_tokens;
        self.cache_write_tokens += u.cache_write_tokens;
        self.reasoning_tokens += u.reasoning_tokens;
        self.total_tokens += u.tokens();
        self.cost_usd += u.cost_usd;
        if u.cost_source == "calculated" {
            self.calculated_usd += u.cost_usd;
        }
        self.first = Some(self.first.map_or(r.at, |f| f.min(r.at)));
        self.last = Some(self.last.map_or(r.at, |l| l.max(r.at)));
    }
}

const BLOCK_SECONDS: i64 = 5 * 3600;

/// Groups `rows` (oldest first) by `by`, groups in order of their first row,
/// and the sum of everything.
pub fn summarise(rows: &[UsageRecord], by: GroupBy) -> (Vec<UsageTotals>, UsageTotals) {
    let mut total = UsageTotals { key: "total".into(), ..UsageTotals::default() };
    let mut order: Vec<String> = Vec::new();
    let mut groups: BTreeMap<String, UsageTotals> = BTreeMap::new();
    let mut block_end: Option<i64> = None;
    let mut block_key = String::new();
    for r in rows {
        total.add(r);
        let u = &r.usage;
        let key = match by {
            GroupBy::Run => u.context.run.clone(),
            GroupBy::Feature => u.context.feature.clone().unwrap_or_else(|| "-".into()),
            GroupBy::Role => u.context.role.clone(),
            GroupBy::Agent => u.context.agent.clone(),
            GroupBy::Model => u.model.clone().unwrap_or_else(|| "-".into()),
            GroupBy::Day => r.at.strftime("%Y-%m-%d").to_string(),
            GroupBy::Block => {
                let s = r.at.as_second();
                if block_end.is_none_or(|end| s >= end) {
                    let start = s - s.rem_euclid(3600);
                    block_end = Some(start + BLOCK_SECONDS);
                    block_key = Timestamp::from_second(start)
                        .map(|t| t.strftime("%Y-%m-%d %H:%M").to_string())
                        .unwrap_or_default();
                }
                block_key.clone()
            }
        };
        let g = groups.entry(key.clone()).or_insert_with(|| {
            order.push(key.clone());
            UsageTotals { key, ..UsageTotals::default() }
        });
        g.add(r);
    }
    let list = order.into_iter().filter_map(|k| groups.remove(&k)).collect();
    (list, total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: i64, at: &str, agent: &str, cost: f64, source: &str) -> UsageRecord {
        UsageRecord {
            id,
            at: at.parse().unwrap(),
            usage: NewUsage {
                context: UsageContext {
                    run: "r1".into(),
                    agent: agent.into(),
                    role: "builder".into(),
                    ..Default::default()
                },
                message_id: format!("m{id}"),
                model: Some("claude-opus-4-8".into()),
                input_tokens: 10,
                output_tokens: 5,
                cache_read_tokens: 1,
                cache_write_tokens: 0,
                reasoning_tokens: 0,
                cost_usd: cost,
                cost_source: source.into(),
            },
        }
    }

    #[test]
    fn groups_by_agent_in_order_of_first_turn_and_totals_everything() {
        let rows = [
            row(1, "2026-01-01T10:00:00Z", "b2", 1.0, "reported"),
            row(2, "2026-01-01T10:01:00Z", "b1", 2.0, "calculated"),
            row(3, "2026-01-01T10:02:00Z", "b2", 0.5, "reported"),
        ];
        let (groups, total) = summarise(&rows, GroupBy::Agent);
        assert_eq!(groups.iter().map(|g| g.key.as_str()).collect::<Vec<_>>(), ["b2", "b1"]);
        assert_eq!((groups[0].turns, groups[0].cost_usd), (2, 1.5));
        assert_eq!((total.turns, total.cost_usd, total.calculated_usd, total.total_tokens), (3, 3.5, 2.0, 48));
        assert_eq!(total.models, ["claude-opus-4-8"]);
    }

    #[test]
    fn five_hour_blocks_start_at_the_hour_of_the_first_turn_after_the_last_block() {
        let rows = [
            row(1, "2026-01-01T10:30:00Z", "a", 1.0, "reported"),
            row(2, "2026-01-01T14:59:59Z", "a", 1.0, "reported"),
            row(3, "2026-01-01T15:00:00Z", "a", 1.0, "reported"),
            row(4, "2026-01-02T09:10:00Z", "a", 1.0, "reported"),
        ];
        let (groups, _) = summarise(&rows, GroupBy::Block);
        let keys: Vec<_> = groups.iter().map(|g| (g.key.as_str(), g.turns)).collect();
        assert_eq!(keys, [("2026-01-01 10:00", 2), ("2026-01-01 15:00", 1), ("2026-01-02 09:00", 1)]);
        let (days, _) = summarise(&rows, GroupBy::Day);
        assert_eq!(days.len(), 2);
    }
}
