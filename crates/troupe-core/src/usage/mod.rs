//! The usage ledger's pure side: booking each model turn a teammate's engine
//! reports ([`Usage`] events) once, with its cost — the engine's own when it
//! reports one, otherwise calculated from the [`PriceTable`].
//!
//! A [`Meter`] follows one launch of one teammate: the store keeps what it
//! books (one row per turn, deduplicated by the engine's message id).

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

pub use crate::event::Usage;

mod prices;

pub use prices::{ModelPrice, PriceTable};

/// Where a booked cost comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CostSource {
    /// The engine reported it.
    Reported,
    /// troupe calculated it from the price table (the engine reports tokens only).
    Calculated,
    /// Neither the engine nor the price table knows the model's price: booked
    /// at $0 (add the model to `[prices]` in config.toml).
    Unknown,
}

impl CostSource {
    /// The name in the store and on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            CostSource::Reported => "reported",
            CostSource::Calculated => "calculated",
            CostSource::Unknown => "unknown",
        }
    }

    /// Parses [`CostSource::as_str`]'s names.
    pub fn from_name(name: &str) -> Option<CostSource> {
        match name {
            "reported" => Some(CostSource::Reported),
            "calculated" => Some(CostSource::Calculated),
            "unknown" => Some(CostSource::Unknown),
            _ => None,
        }
    }
}

/// One model turn as the ledger books it.
#[derive(Debug, Clone, PartialEq)]
pub struct Booking {
    /// The engine's message id, or the launch's own numbering when the
    /// engine names none.
    pub message_id: String,
    /// The turn's model, when known.
    pub model: Option<String>,
    /// Its tokens.
    pub usage: Usage,
    /// What it cost in US dollars.
    pub cost_usd: f64,
    /// Whether the engine reported that cost.
    pub cost_source: CostSource,
}

/// Books the turns of one launch: each message id once, and the engine's
/// running total (`launch_cost_usd`) as the difference to what it booked, so
/// the launch's bookings add up to what the engine reported.
#[derive(Debug, Clone)]
pub struct Meter {
    launch: String,
    model: Option<String>,
    seen: HashSet<String>,
    booked_usd: f64,
}

impl Meter {
    /// A meter for the launch named `launch` (unique among its agent's
    /// launches: it numbers turns that have no message id), of `model` when
    /// the launch was given one.
    pub fn new(launch: impl Into<String>, model: Option<String>) -> Meter {
        Meter { launch: launch.into(), model, seen: HashSet::new(), booked_usd: 0.0 }
    }

    /// The engine named its model (its init event): later turns default to it.
    pub fn set_model(&mut self, model: &str) {
        self.model = Some(model.to_string());
    }

    /// What has been booked so far, in US dollars.
    pub fn booked_usd(&self) -> f64 {
        self.booked_usd
    }

    /// Books `u`; `None` for a turn already booked, or one with neither
    /// tokens nor cost.
    pub fn book(&mut self, u: &Usage, prices: &PriceTable) -> Option<Booking> {
        let message_id = match &u.message_id {
            Some(id) => id.clone(),
            None => format!("{}#{}", self.launch, self.seen.len() + 1),
        };
        if self.seen.contains(&message_id) {
            return None;
        }
        let model = u.model.clone().or_else(|| self.model.clone());
        let price = model.as_deref().and_then(|m| prices.price(m));
        let (cost_usd, cost_source) = match (u.launch_cost_usd, u.cost_usd, price) {
            (Some(total), _, _) => ((total - self.booked_usd).max(0.0), CostSource::Reported),
            (None, Some(c), _) if c > 0.0 => (c, CostSource::Reported),
            // OpenCode reports 0 for a model it has no price for: the table may know it.
            (None, _, Some(p)) => (p.cost(u), CostSource::Calculated),
            (None, _, None) => (0.0, CostSource::Unknown),
        };
        if u.tokens() == 0 && cost_usd == 0.0 {
            return None;
        }
        self.seen.insert(message_id.clone());
        self.booked_usd += cost_usd;
        let usage = Usage { cost_usd: None, launch_cost_usd: None, message_id: None, model: None, ..u.clone() };
        Some(Booking { message_id, model, usage, cost_usd, cost_source })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(id: Option<&str>, input: u64, output: u64) -> Usage {
        Usage { input_tokens: input, output_tokens: output, message_id: id.map(str::to_string), ..Usage::default() }
    }

    #[test]
    fn a_message_is_booked_once_and_priced_from_the_table() {
        let prices = PriceTable::builtin();
        let mut m = Meter::new("a1@1", Some("claude-opus-4-8".into()));
        let b = m.book(&turn(Some("msg_1"), 10, 1), &prices).unwrap();
        assert_eq!(b.cost_source, CostSource::Calculated);
        assert!((b.cost_usd - (10.0 * 5.0 + 25.0) / 1e6).abs() < 1e-12);
        assert!(m.book(&turn(Some("msg_1"), 10, 1), &prices).is_none(), "a repeated message id is not booked twice");
        // No id: the launch numbers its turns.
        assert_eq!(m.book(&turn(None, 1, 1), &prices).unwrap().message_id, "a1@1#2");
        assert!(m.book(&turn(None, 0, 0), &prices).is_none(), "nothing to book");
    }

    #[test]
    fn the_launch_total_books_the_difference_so_the_sum_is_the_engines() {
        let prices = PriceTable::builtin();
        let mut m = Meter::new("l", Some("claude-opus-4-8".into()));
        m.book(&turn(Some("m1"), 10, 1), &prices).unwrap();
        m.book(&turn(Some("m2"), 10, 1), &prices).unwrap();
        let settle = Usage {
            output_tokens: 8,
            launch_cost_usd: Some(0.00035),
            message_id: Some("r".into()),
            ..Usage::default()
        };
        let b = m.book(&settle, &prices).unwrap();
        assert_eq!(b.cost_source, CostSource::Reported);
        assert!((m.booked_usd() - 0.00035).abs() < 1e-12);
        // A total below what was booked books nothing negative.
        let low =
            Usage { output_tokens: 1, launch_cost_usd: Some(0.0), message_id: Some("r2".into()), ..Usage::default() };
        assert_eq!(m.book(&low, &prices).unwrap().cost_usd, 0.0);
    }

    #[test]
    fn a_reported_turn_cost_is_kept_and_a_zero_for_a_known_model_is_calculated() {
        let prices = PriceTable::builtin();
        let mut m = Meter::new("l", Some("gpt-5.5".into()));
        let reported = Usage { cost_usd: Some(0.5), ..turn(Some("a"), 1, 1) };
        assert_eq!(m.book(&reported, &prices).unwrap().cost_usd, 0.5);
        let zero = Usage { cost_usd: Some(0.0), ..turn(Some("b"), 1_000_000, 0) };
        let b = m.book(&zero, &prices).unwrap();
        assert_eq!((b.cost_usd, b.cost_source), (1.25, CostSource::Calculated));
        // No price anywhere: $0, marked unknown, whether the engine said 0 or nothing.
        let mut unknown = Meter::new("l", Some("fake-model".into()));
        let b = unknown.book(&Usage { cost_usd: Some(0.0), ..turn(Some("c"), 5, 5) }, &prices).unwrap();
        assert_eq!((b.cost_usd, b.cost_source), (0.0, CostSource::Unknown));
        let b = unknown.book(&turn(Some("d"), 5, 5), &prices).unwrap();
        assert_eq!((b.cost_usd, b.cost_source), (0.0, CostSource::Unknown));
        assert_eq!(CostSource::from_name("unknown"), Some(CostSource::Unknown));
    }
}
