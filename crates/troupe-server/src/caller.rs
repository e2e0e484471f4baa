//! Who a request comes from, decided by the token rule's middleware
//! ([`crate::auth::require_token`]) from the bearer token alone, never from a
//! header or a body the caller chooses:
//!
//! - the server's token (or no token on an open loopback server): a person,
//!   who may act for any agent, as the CLI may;
//! - a teammate's gateway token (minted by the Lead, its hash bound to the
//!   agent in the store): that agent, and only that agent. A body naming
//!   another agent is answered 403, and what only people decide (plan
//!   approvals, plan imports, engine settings) is refused to it.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use crate::error::{ApiError, ErrorKind};

/// The identity a request acts with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// A person (the server's token, or an open loopback server).
    Person,
    /// The agent whose gateway token the request carried.
    Agent(String),
}

impl Caller {
    /// Refuses unless the caller may act as `agent` (a person may act as anyone).
    pub fn act_as(&self, agent: &str) -> Result<(), ApiError> {
        match self {
            Caller::Agent(me) if me != agent => Err(ApiError::new(
                ErrorKind::Forbidden,
                format!("this token is agent {me}'s: it cannot act as {agent}"),
            )
            .with_hint("an agent's token acts only as that agent; use your own id (or omit it where it is optional)")),
            _ => Ok(()),
        }
    }

    /// Who an action is recorded as: an agent is always itself (naming
    /// another is refused); a person is whoever it names, else `default`.
    pub fn actor(&self, named: Option<String>, default: &str) -> Result<String, ApiError> {
        match (self, named) {
            (Caller::Agent(me), named) => {
                if let Some(n) = &named {
                    self.act_as(n)?;
                }
                Ok(me.clone())
            }
            (Caller::Person, named) => Ok(named.unwrap_or_else(|| default.to_string())),
        }
    }

    /// Refuses an agent: `what` is for people (and the Lead) to decide.
    pub fn person(&self, what: &str) -> Result<(), ApiError> {
        match self {
            Caller::Person => Ok(()),
            Caller::Agent(me) => Err(ApiError::new(
                ErrorKind::Forbidden,
                format!("agent {me} may not {what}: that is decided by people, with the server's token"),
            )),
        }
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        // The middleware runs in front of every route and always says who;
        // a route reached without it would be a wiring bug, refused as such.
        parts.extensions.get::<Caller>().cloned().ok_or_else(|| ApiError::internal("no caller identified"))
    }
}
