//! A launch's usage events as rows of the store's usage ledger: the one
//! conversion, used by the supervisor's store sink (`troupe agent run`) and
//! the Lead's driver alike.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use troupe_core::event::{AgentEvent, Usage};
use troupe_core::usage::{Meter, PriceTable};
use troupe_store::{NewUsage, UsageContext};

/// Books the turns of one launch of one teammate.
#[derive(Debug, Clone)]
pub struct LaunchLedger {
    context: UsageContext,
    meter: Meter,
    prices: Arc<PriceTable>,
}

impl LaunchLedger {
    /// A ledger for one launch of the agent `context` names; `launch` is
    /// unique among that agent's launches (its process id will do), `model`
    /// the model it was given, `prices` the project's table.
    pub fn new(context: UsageContext, launch: &str, model: Option<String>, prices: Arc<PriceTable>) -> LaunchLedger {
        let meter = Meter::new(format!("{}@{launch}", context.agent), model);
        LaunchLedger { context, meter, prices }
    }

    /// The row `event` books, if it is a turn not booked yet; an init event
    /// naming the model makes it the default of later turns.
    pub fn observe(&mut self, event: &AgentEvent) -> Option<NewUsage> {
        match event {
            AgentEvent::Init { model: Some(m), .. } => {
                self.meter.set_model(m);
                None
            }
            AgentEvent::Usage(u) => self.book(u),
            _ => None,
        }
    }

    /// The row `u` books, if any.
    pub fn book(&mut self, u: &Usage) -> Option<NewUsage> {
        let b = self.meter.book(u, &self.prices)?;
        Some(NewUsage {
            context: self.context.clone(),
            message_id: b.message_id,
            model: b.model,
            input_tokens: b.usage.input_tokens,
            output_tokens: b.usage.output_tokens,
            cache_read_tokens: b.usage.cached_input_tokens,
            cache_write_tokens: b.usage.cache_write_tokens,
            reasoning_tokens: b.usage.reasoning_tokens,
            cost_usd: b.cost_usd,
            cost_source: b.cost_source.as_str().to_string(),
        })
    }
}

/// The warning for a turn booked at $0 because no price is known for its
/// model, the first time this process books one of that model; `None` for
/// any other turn, and for the same model again (one warning per model, not
/// one per turn).
pub fn unknown_price_warning(row: &NewUsage) -> Option<String> {
    static WARNED: Mutex<Option<HashSet<String>>> = Mutex::new(None);
    if row.cost_source != troupe_core::usage::CostSource::Unknown.as_str() {
        return None;
    }
    let model = row.model.clone().unwrap_or_else(|| "(unnamed)".into());
    let mut warned = WARNED.lock().unwrap_or_else(|p| p.into_inner());
    if !warned.get_or_insert_with(HashSet::new).insert(model.clone()) {
        return None;
    }
    Some(format!(
        "no price is known for model {model} ({} engine): its turns are booked at $0 with cost_source \"unknown\"; \
         add it under [prices] in .troupe/config.toml",
        row.context.engine
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_price_is_warned_once_per_model() {
        let context = UsageContext { agent: "a".into(), engine: "opencode".into(), ..Default::default() };
        let mut ledger = LaunchLedger::new(context, "1", Some("mystery-model-x".into()), Arc::default());
        let turn = |id: &str| Usage { input_tokens: 5, message_id: Some(id.into()), ..Usage::default() };
        let first = ledger.book(&turn("m1")).unwrap();
        assert_eq!((first.cost_usd, first.cost_source.as_str()), (0.0, "unknown"));
        let warning = unknown_price_warning(&first).unwrap();
        assert!(warning.contains("mystery-model-x") && warning.contains("[prices]"), "{warning}");
        assert_eq!(unknown_price_warning(&ledger.book(&turn("m2")).unwrap()), None, "once per model");
    }
}
