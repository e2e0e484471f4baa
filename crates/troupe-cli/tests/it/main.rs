//! The `troupe` binary's integration tests, all in one test binary.

mod support;

mod init;
mod spec;
mod tasks;
