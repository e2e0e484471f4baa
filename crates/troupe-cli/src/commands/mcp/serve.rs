use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;
use troupe_gateway::Session;
use troupe_gateway::serve::{bind_http, serve_stdio};

use crate::cli::GlobalArgs;
use crate::error::{CliError, CliResult};
use crate::output::{note, print_json};

/// Serve the MCP gateway for one agent: over stdio by default (what an
/// engine's MCP config runs), or Streamable HTTP on loopback with `--http`.
/// The agent sees the tools of its role; `set_role` switches only to roles
/// whose permissions fit inside the starting role.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The role the connection starts in, and its ceiling.
    #[arg(long, env = "TROUPE_ROLE")]
    pub role: String,
    /// The agent's identity (mailbox, board, rate limits, audit). Defaults to the role.
    #[arg(long, env = "TROUPE_AGENT_ID")]
    pub agent: Option<String>,
    /// Serve Streamable HTTP at http://ADDR/mcp instead of stdio (loopback only, e.g. 127.0.0.1:0).
    #[arg(long, value_name = "ADDR")]
    pub http: Option<SocketAddr>,
}

pub fn run(g: &GlobalArgs, args: ServeArgs) -> CliResult<ExitCode> {
    let project = crate::project::find(g)?;
    let (gateway, warnings) = super::gateway(&project, true)?;
    for w in &warnings {
        tracing::warn!("{w}");
    }
    if gateway.policy.role(&args.role).is_none() {
        let known: Vec<&str> = gateway.policy.roles().keys().map(String::as_str).collect();
        return Err(CliError::user(format!("unknown role {:?}", args.role))
            .with_hint(format!("roles come from the skills in .troupe/skills; known roles: {}", known.join(", "))));
    }
    let mut session = Session::new(args.agent.unwrap_or_else(|| args.role.clone()), args.role);
    session.feature = std::env::var("TROUPE_FEATURE").ok().filter(|s| !s.is_empty());
    session.task = std::env::var("TROUPE_TASK_ID").ok().filter(|s| !s.is_empty());
    let session = Arc::new(session);
    let rt = super::runtime()?;
    rt.block_on(async move {
        match args.http {
            None => serve_stdio(gateway, session).await.map_err(|e| CliError::internal(e.to_string())),
            Some(addr) => {
                let cancel = tokio_util::sync::CancellationToken::new();
                let (bound, serve) = bind_http(gateway.clone(), session, addr, cancel.clone())
                    .await
                    .map_err(|e| CliError::user(e.to_string()))?;
                if g.json {
                    print_json(&serde_json::json!({"url": format!("http://{bound}/mcp")}));
                } else {
                    note(&format!("serving the MCP gateway at http://{bound}/mcp (Ctrl-C to stop)"));
                    println!("http://{bound}/mcp");
                }
                tokio::select! {
                    _ = serve => {}
                    _ = tokio::signal::ctrl_c() => cancel.cancel(),
                }
                gateway.backends.shutdown().await;
                Ok(())
            }
        }
    })?;
    Ok(ExitCode::SUCCESS)
}
