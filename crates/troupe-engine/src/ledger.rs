//! A launch's usage events as rows of the store's usage ledger: the one
//! conversion, used by the supervisor's store sink (`troupe agent run`) and
//! the Lead's driver alike.

use std::sync::Arc;

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
