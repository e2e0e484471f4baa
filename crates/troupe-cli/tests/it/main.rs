//! The `troupe` binary's integration tests, all in one test binary.

mod support;

mod a2a;
mod a2a_spec;
mod agent;
mod board;
mod contract;
mod doctor;
mod engines;
mod errors;
mod fault;
mod gateway;
mod gateway_abuse;
mod hooks;
mod init;
mod lead;
mod lead_claude;
mod lead_hooks;
mod lead_report;
mod lists;
mod live;
mod msg;
mod obedient_run;
mod red_team_claude;
mod red_team_engines;
mod release;
mod review;
mod review_claude;
mod roadmap;
mod sandbox;
mod serve;
mod spec;
mod status;
mod store;
mod tasks;
