use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;
use troupe_gateway::Session;
use troupe_gateway::serve::{Auth, bind_http, serve_stdio};
use troupe_store::{Store, token};

use crate::cli::GlobalArgs;
use crate::error::{CliError, CliResult};
use crate::output::{note, print_json};

/// Serve the MCP gateway for one agent: over stdio by default (what an
/// engine's MCP config runs), or Streamable HTTP with `--http`, where every
/// request must carry the agent's bearer token (`Authorization: Bearer`).
/// An agent with a token (the Lead mints one per teammate) is served only to
/// its holder (`--token-file`); for an agent without one, `--http` mints a
/// token and prints it. The agent sees the tools of its role; `set_role`
/// switches only to roles whose permissions fit inside the starting role.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The role the connection starts in, and its ceiling.
    #[arg(long, env = "TROUPE_ROLE")]
    pub role: String,
    /// The agent's identity (mailbox, board, rate limits, audit). Defaults to the role.
    #[arg(long, env = "TROUPE_AGENT_ID")]
    pub agent: Option<String>,
    /// Serve Streamable HTTP at http://ADDR/mcp instead of stdio (e.g. 127.0.0.1:0); requests need the bearer token.
    #[arg(long, value_name = "ADDR")]
    pub http: Option<SocketAddr>,
    /// Delegate mode (seed 003 B5): file locks are refused to this agent whatever its role allows.
    #[arg(long, env = "TROUPE_DELEGATE")]
    pub delegate_mode: bool,
    /// The agent's gateway token, in a file only its owner can read (mode 0600).
    /// Without it, the token is read from $TROUPE_GATEWAY_TOKEN (how the Lead
    /// hands each teammate its own).
    #[arg(long, value_name = "FILE", env = "TROUPE_GATEWAY_TOKEN_FILE")]
    pub token_file: Option<std::path::PathBuf>,
}

/// The token presented: the file's, else `$TROUPE_GATEWAY_TOKEN`'s.
fn presented(token_file: Option<&std::path::Path>) -> CliResult<Option<String>> {
    if let Some(file) = token_file {
        return read_token(file).map(Some);
    }
    Ok(std::env::var(token::ENV).ok().map(|t| t.trim().to_string()).filter(|t| !t.is_empty()))
}

/// Reads a token file, refusing one that others could read.
fn read_token(path: &std::path::Path) -> CliResult<String> {
    use std::os::unix::fs::PermissionsExt;
    let cannot =
        |e: std::io::Error| CliError::user(format!("cannot read the token file {}", path.display())).with_source(&e);
    let meta = std::fs::metadata(path).map_err(cannot)?;
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(CliError::user(format!("the token file {} can be read by other users", path.display()))
            .with_hint(format!("`chmod 600 {}`, or mint a new token", path.display())));
    }
    let text = std::fs::read_to_string(path).map_err(cannot)?;
    let text = text.trim().to_string();
    if text.is_empty() {
        return Err(CliError::user(format!("the token file {} is empty", path.display())));
    }
    Ok(text)
}

/// What the connection needs: the hash of the agent's token (`None` over
/// stdio for an agent without one) and the token itself when minted here.
fn authorize(
    store: Option<&dyn Store>,
    agent: &str,
    token_file: Option<&std::path::Path>,
    http: bool,
) -> CliResult<(Option<String>, Option<String>)> {
    use crate::commands::board::store_error;
    let stored = match store {
        Some(store) => store.gateway_token(agent).map_err(store_error)?,
        None => None,
    };
    let presented = presented(token_file)?;
    match (stored, presented) {
        (Some(hash), Some(t)) if token::matches(&t, &hash) => {
            if !http && let Some(store) = store {
                beneath_the_agent(store, agent, std::time::Duration::from_secs(5))?;
            }
            Ok((Some(hash), None))
        }
        (Some(_), Some(_)) => Err(CliError::user(format!(
            "the token in {} is not agent {agent:?}'s",
            token_file.map(|p| p.display().to_string()).unwrap_or_else(|| format!("${}", token::ENV))
        ))
        .with_hint("each agent's token works for that agent only; the Lead gives each teammate its own")),
        (Some(_), None) => Err(CliError::user(format!("agent {agent:?} has a gateway token, and none was given"))
            .with_hint(format!(
                "pass it in ${} or with `--token-file <file>` (the Lead gives each teammate its own)",
                token::ENV
            ))),
        (None, Some(t)) => {
            let hash = token::hash(&t);
            if let Some(store) = store {
                store.set_gateway_token(agent, &hash).map_err(store_error)?;
            }
            Ok((Some(hash), None))
        }
        (None, None) if http => {
            let t = token::mint().map_err(|e| CliError::internal("cannot mint a gateway token").with_source(&e))?;
            let hash = token::hash(&t);
            if let Some(store) = store {
                store.set_gateway_token(agent, &hash).map_err(store_error)?;
            }
            Ok((Some(hash), Some(t)))
        }
        (None, None) => Ok((None, None)),
    }
}

/// Over stdio, the token of an agent troupe started serves only a gateway
/// started beneath that agent: the engine starts its MCP servers as its own
/// descendants, and the registry holds the pid of the process troupe started
/// for the agent (waited for up to `wait`: the supervisor records it just
/// after the spawn; ids never repeat, so a recorded pid is final). A token read out of another
/// teammate's environment (`/proc/<pid>/environ` is readable by the same
/// user) then serves no one: the thief's gateway descends from the thief. An
/// agent the registry does not know (a token a person minted with `--http`)
/// has only its token.
fn beneath_the_agent(store: &dyn Store, agent: &str, wait: std::time::Duration) -> CliResult<()> {
    use crate::commands::board::store_error;
    let ancestors = ancestors();
    let deadline = std::time::Instant::now() + wait;
    loop {
        match store.agent(agent) {
            Err(troupe_store::StoreError::AgentNotFound(_)) => return Ok(()),
            Err(e) => return Err(store_error(e)),
            Ok(a) if a.pid.is_some_and(|pid| ancestors.contains(&pid)) => return Ok(()),
            Ok(a) if a.pid.is_none() && std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(25))
            }
            Ok(_) => {
                return Err(CliError::user(format!(
                    "this gateway was not started by agent {agent:?}, whose token it was given"
                ))
                .with_hint(
                    "an agent's token serves only the gateway its own engine starts; use your own agent id and token",
                ));
            }
        }
    }
}

/// This process's ancestors, parent first, from `/proc/<pid>/stat`.
fn ancestors() -> Vec<u32> {
    let mut out = Vec::new();
    let mut pid = std::process::id();
    while pid > 1 && out.len() < 4096 {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { break };
        // `pid (comm) state ppid …`: comm may hold spaces and parentheses.
        let Some(ppid) = stat.rfind(')').and_then(|i| stat[i + 1..].split_whitespace().nth(1)?.parse().ok()) else {
            break;
        };
        out.push(ppid);
        pid = ppid;
    }
    out
}

/// Refuse a role no skill defines, naming those there are.
pub(super) fn check_role(gateway: &troupe_gateway::Gateway, role: &str) -> CliResult<()> {
    if gateway.policy.role(role).is_none() {
        let known: Vec<&str> = gateway.policy.roles().keys().map(String::as_str).collect();
        return Err(CliError::user(format!("unknown role {role:?}"))
            .with_hint(format!("roles come from the skills in .troupe/skills; known roles: {}", known.join(", "))));
    }
    Ok(())
}

/// The gateway session of `agent` starting in `role` (feature and task from
/// the environment), in delegate mode when `delegate`.
pub(crate) fn session(agent: String, role: String, delegate: bool) -> Arc<Session> {
    let mut session = Session::new(agent, role);
    session.feature = std::env::var("TROUPE_FEATURE").ok().filter(|s| !s.is_empty());
    session.task = std::env::var("TROUPE_TASK_ID").ok().filter(|s| !s.is_empty());
    session.delegate = delegate;
    Arc::new(session)
}

/// Serve `gateway` over Streamable HTTP at `addr` to the holder of the token
/// hashed `token_hash`, until Ctrl-C or SIGTERM; `on_bound` is told the
/// address once it listens. The backend servers are stopped before it
/// returns, so none outlives the gateway.
pub(super) async fn http_until_signal(
    gateway: Arc<troupe_gateway::Gateway>,
    session: Arc<Session>,
    addr: SocketAddr,
    token_hash: String,
    on_bound: impl FnOnce(SocketAddr) -> CliResult<()>,
) -> CliResult<()> {
    let cancel = tokio_util::sync::CancellationToken::new();
    let (bound, serve) = bind_http(gateway.clone(), session, addr, Auth::new(token_hash), cancel.clone())
        .await
        .map_err(|e| CliError::user(e.to_string()))?;
    let mut signals = crate::commands::agent::turn::Interrupts::install()?;
    let told = on_bound(bound);
    if told.is_ok() {
        tokio::select! {
            _ = serve => {}
            _ = signals.recv() => cancel.cancel(),
        }
    }
    gateway.backends.shutdown().await;
    told
}

pub fn run(g: &GlobalArgs, args: ServeArgs) -> CliResult<ExitCode> {
    let project = crate::project::find(g)?;
    let (gateway, warnings) = super::gateway(&project, true)?;
    for w in &warnings {
        tracing::warn!("{w}");
    }
    check_role(&gateway, &args.role)?;
    let agent = args.agent.unwrap_or_else(|| args.role.clone());
    let (token_hash, minted) =
        authorize(gateway.store.as_deref(), &agent, args.token_file.as_deref(), args.http.is_some())?;
    let session = session(agent, args.role, args.delegate_mode);
    let rt = super::runtime()?;
    rt.block_on(async move {
        match args.http {
            None => serve_stdio(gateway, session).await.map_err(|e| CliError::internal(e.to_string())),
            Some(addr) => {
                let hash = token_hash.expect("--http always has a token");
                http_until_signal(gateway, session, addr, hash, |bound| {
                    if g.json {
                        print_json(&serde_json::json!({"url": format!("http://{bound}/mcp"), "token": minted}));
                    } else {
                        note(&format!(
                            "serving the MCP gateway at http://{bound}/mcp (Ctrl-C to stop); requests need \
                             `Authorization: Bearer <token>`{}",
                            if minted.is_some() {
                                " with the token printed below it, shown only this once"
                            } else {
                                ""
                            }
                        ));
                        println!("http://{bound}/mcp");
                        if let Some(t) = &minted {
                            println!("{t}");
                        }
                    }
                    Ok(())
                })
                .await
            }
        }
    })?;
    Ok(ExitCode::SUCCESS)
}
