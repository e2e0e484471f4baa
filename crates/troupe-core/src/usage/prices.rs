//! The price table: dated data in the repository (`prices.toml`), extended or
//! overridden by `[prices]` in config.toml.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Usage;

/// The built-in table, as published on its `as_of` date.
const BUILTIN: &str = include_str!("prices.toml");

/// Prices of one model in US dollars per million tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelPrice {
    /// Fresh input tokens.
    pub input: f64,
    /// Output tokens (reasoning included).
    pub output: f64,
    /// Input tokens read from a cache.
    pub cache_read: f64,
    /// Input tokens written to a cache.
    pub cache_write: f64,
}

impl ModelPrice {
    /// What `usage` costs at these prices.
    pub fn cost(&self, u: &Usage) -> f64 {
        (u.input_tokens as f64 * self.input
            + u.output_tokens as f64 * self.output
            + u.cached_input_tokens as f64 * self.cache_read
            + u.cache_write_tokens as f64 * self.cache_write)
            / 1_000_000.0
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TableFile {
    as_of: String,
    models: BTreeMap<String, ModelPrice>,
}

/// Model prices by model-name prefix.
#[derive(Debug, Clone, PartialEq)]
pub struct PriceTable {
    /// The date the built-in prices were published.
    pub as_of: String,
    models: BTreeMap<String, ModelPrice>,
}

impl Default for PriceTable {
    fn default() -> Self {
        Self::builtin()
    }
}

impl PriceTable {
    /// The table shipped with troupe.
    pub fn builtin() -> PriceTable {
        let file: TableFile = toml::from_str(BUILTIN).expect("the built-in prices.toml parses (a unit test checks it)");
        PriceTable { as_of: file.as_of, models: file.models }
    }

    /// The built-in table with `overrides` (config.toml's `[prices]`) on top.
    pub fn with_overrides(overrides: &BTreeMap<String, ModelPrice>) -> PriceTable {
        let mut t = Self::builtin();
        t.models.extend(overrides.iter().map(|(k, v)| (k.clone(), *v)));
        t
    }

    /// The prices of `model`: the longest key its name starts with, once a
    /// `provider/` prefix and a `[...]` suffix (Claude's `[1m]`) are dropped.
    pub fn price(&self, model: &str) -> Option<&ModelPrice> {
        let name = model.rsplit('/').next().unwrap_or(model);
        let name = name.split('[').next().unwrap_or(name).trim();
        self.models.iter().filter(|(k, _)| name.starts_with(k.as_str())).max_by_key(|(k, _)| k.len()).map(|(_, p)| p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_table_parses_and_matches_the_longest_prefix() {
        let t = PriceTable::builtin();
        assert!(!t.as_of.is_empty());
        assert_eq!(t.price("claude-opus-4-8[1m]").unwrap().input, 5.0);
        assert_eq!(t.price("claude-opus-4-1-20250805").unwrap().input, 15.0);
        assert_eq!(t.price("openai/gpt-5-mini").unwrap().input, 0.25);
        assert_eq!(t.price("gpt-5.5").unwrap().input, 1.25);
        assert!(t.price("fake-model").is_none());
    }

    #[test]
    fn overrides_win_and_cost_is_per_million() {
        let mut o = BTreeMap::new();
        o.insert("fake".to_string(), ModelPrice { input: 2.0, output: 4.0, cache_read: 1.0, cache_write: 3.0 });
        o.insert("claude-opus-4".to_string(), ModelPrice { input: 1.0, ..ModelPrice::default() });
        let t = PriceTable::with_overrides(&o);
        let u = Usage {
            input_tokens: 1_000_000,
            output_tokens: 500_000,
            cached_input_tokens: 1_000_000,
            cache_write_tokens: 1_000_000,
            ..Usage::default()
        };
        assert_eq!(t.price("fake-model").unwrap().cost(&u), 2.0 + 2.0 + 1.0 + 3.0);
        assert_eq!(t.price("claude-opus-4-8").unwrap().input, 1.0);
    }
}
