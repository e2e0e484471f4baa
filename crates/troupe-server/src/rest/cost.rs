//! `GET /cost`: what the team cost, from the usage ledger, grouped as
//! `troupe cost` groups it (the same `troupe_store::usage::summarise`).

use serde::{Deserialize, Serialize};
use troupe_store::UsageFilter;
use troupe_store::usage::{GroupBy, UsageTotals, summarise};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::ids::feature;
use crate::error::{ApiError, ApiJson, ApiQuery, ApiResult, ErrorBody};
use crate::state::AppState;

/// The cost route.
pub(crate) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(cost))
}

/// Which turns, grouped how.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CostQuery {
    /// `run`, `feature` (default), `role`, `agent`, `model`, `day` or `block` (5 hours).
    pub by: Option<String>,
    /// Only turns booked at or after this time (RFC 3339).
    pub since: Option<String>,
    /// Only this feature's turns.
    pub feature: Option<String>,
}

/// The sums of one group of model turns.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CostGroup {
    /// The group: a run, feature, role, agent, model, day or block start; `total` for the sum.
    pub key: String,
    /// The models seen.
    pub models: Vec<String>,
    /// Model turns.
    pub turns: u64,
    /// Fresh input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Tokens read from a cache.
    pub cache_read_tokens: u64,
    /// Tokens written to a cache.
    pub cache_write_tokens: u64,
    /// Reasoning tokens (part of the output).
    pub reasoning_tokens: u64,
    /// Every token.
    pub total_tokens: u64,
    /// Cost in US dollars.
    pub cost_usd: f64,
    /// Of it, what troupe calculated from its price table.
    pub calculated_usd: f64,
}

impl From<UsageTotals> for CostGroup {
    fn from(t: UsageTotals) -> Self {
        CostGroup {
            key: t.key,
            models: t.models,
            turns: t.turns,
            input_tokens: t.input_tokens,
            output_tokens: t.output_tokens,
            cache_read_tokens: t.cache_read_tokens,
            cache_write_tokens: t.cache_write_tokens,
            reasoning_tokens: t.reasoning_tokens,
            total_tokens: t.total_tokens,
            cost_usd: t.cost_usd,
            calculated_usd: t.calculated_usd,
        }
    }
}

/// What the team cost.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Cost {
    /// The grouping.
    pub by: String,
    /// The groups, in order of their first turn.
    pub groups: Vec<CostGroup>,
    /// Everything.
    pub total: CostGroup,
}

/// Tokens and US dollars of every model turn teammates took, grouped.
#[utoipa::path(get, path = "/cost", tag = "runs", params(CostQuery),
    responses((status = 200, body = Cost), (status = 400, body = ErrorBody)))]
async fn cost(state: axum::extract::State<AppState>, ApiQuery(q): ApiQuery<CostQuery>) -> ApiResult<ApiJson<Cost>> {
    let by_name = q.by.as_deref().unwrap_or("feature");
    let by = GroupBy::from_name(by_name).ok_or_else(|| {
        ApiError::bad_request(format!("cannot group by `{by_name}`"))
            .with_hint("by is one of run, feature, role, agent, model, day, block")
    })?;
    if let Some(f) = &q.feature {
        feature(f)?;
    }
    let since = match &q.since {
        Some(s) => Some(s.parse::<jiff::Timestamp>().map_err(|_| {
            ApiError::bad_request("since is not an RFC 3339 time").with_hint("for example 2026-11-01T00:00:00Z")
        })?),
        None => None,
    };
    let filter = UsageFilter { since, feature: q.feature.clone(), ..UsageFilter::default() };
    let rows = state.with_store(move |s| Ok(s.usage(&filter)?)).await?;
    let (groups, total) = summarise(&rows, by);
    Ok(ApiJson(Cost {
        by: by_name.to_string(),
        groups: groups.into_iter().map(CostGroup::from).collect(),
        total: total.into(),
    }))
}
