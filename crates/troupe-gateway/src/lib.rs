//! troupe's MCP gateway: the skill-driven RBAC router every teammate talks
//! through (seed 004). One [`Gateway`] holds the role policy, the backend MCP
//! servers (started lazily, stderr captured, calls bounded by timeouts),
//! troupe's own tools (board, mailbox, reports, plan approval, shutdown
//! answers, context, roles, skills, memory), rate limits per identity and the
//! audit log. Each client connection is a [`Session`] with an identity, a
//! ceiling role and a current role; [`server::GatewayHandler`] is its rmcp face.
//!
//! Every `tools/call` goes through [`Gateway::call`]: the permission is checked
//! on each call, never only when listing, and a refusal reads the same whether
//! the tool is hidden or does not exist.
#![deny(missing_docs)]

pub mod audit;
pub mod backend;
pub mod gateway;
pub mod lease;
pub mod locks;
pub mod memory;
pub mod ratelimit;
pub mod scripts;
pub mod serve;
pub mod server;
pub mod session;
pub mod setup;
pub mod tools;
pub mod wire;

pub use gateway::{Gateway, GatewayParts, not_available};
pub use session::Session;
pub use setup::{Setup, SetupError};
