//! The `troupe` binary's integration tests, all in one test binary.

mod support;

mod gateway;
mod hooks;
mod init;
mod release;
mod spec;
mod tasks;
