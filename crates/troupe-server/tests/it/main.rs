//! troupe-server over real HTTP: a server on a loopback port of its own per
//! test (port 0), a real SQLite store in a temporary project, and ureq as
//! the client.

mod approval;
mod board;
mod dashboard;
mod endpoints;
mod events;
mod openapi;
mod security;
mod support;
