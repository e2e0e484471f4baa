use std::process::ExitCode;

use clap::Args;

use crate::cli::GlobalArgs;
use crate::error::CliResult;
use crate::output::{note, print_json, print_line};

/// Start every backend MCP server of the project, list its tools and report
/// its health (a backend that fails or hangs is reported with its stderr).
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Only show the configuration; start nothing.
    #[arg(long)]
    pub no_connect: bool,
}

pub fn run(g: &GlobalArgs, args: StatusArgs) -> CliResult<ExitCode> {
    let project = crate::project::find(g)?;
    let (gateway, warnings) = super::gateway(&project, false)?;
    let rt = super::runtime()?;
    let status = rt.block_on(async {
        let status = gateway.status(!args.no_connect).await;
        gateway.backends.shutdown().await;
        status
    });
    let failed = status.iter().any(|s| s.state == "failed");
    if g.json {
        print_json(&serde_json::json!({"servers": status, "warnings": warnings}));
    } else if status.is_empty() {
        note("no backend MCP servers; add `[mcp.servers.<name>]` to .troupe/config.toml or a .mcp.json");
    } else {
        for s in &status {
            print_line(&format!("{}  {}  ({})", s.name, s.state, s.command));
            if !s.tools.is_empty() {
                print_line(&format!("  tools: {}", s.tools.join(", ")));
            }
            if let Some(e) = &s.error {
                print_line(&format!("  error: {e}"));
            }
            for line in s.stderr_tail.iter().filter(|_| s.state == "failed") {
                print_line(&format!("  stderr: {line}"));
            }
        }
    }
    if !g.json {
        for w in &warnings {
            note(&format!("warning: {w}"));
        }
    }
    Ok(if failed { ExitCode::from(1) } else { ExitCode::SUCCESS })
}
