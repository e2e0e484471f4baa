//! `troupe serve`: the HTTP API (REST, events, A2A) over the project, and the
//! same server inside a run's process (`--serve` on run, impl, review and
//! roadmap run).

use std::net::{SocketAddr, ToSocketAddrs};
use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;
use troupe_project::Project;
use troupe_server::AppState;
use troupe_server::auth::{self, AuthError, TokenSource};
use troupe_store::Store;

use crate::cli::GlobalArgs;
use crate::error::{CliError, CliResult};
use crate::output::{note, print_json, print_line};

/// Serve the HTTP API: the board, messages, agents, specs, runs, audit,
/// engines, live events (SSE) and A2A. Loopback by default; any other address
/// needs a bearer token ($TROUPE_TOKEN, `[server] token_file`, or
/// `--generate-token`), which every request must then send as
/// `Authorization: Bearer <token>`. Stops gracefully on Ctrl-C or SIGTERM.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on [default: `[server] bind`, else 127.0.0.1:7878]; port 0 picks a free one.
    #[arg(long, value_name = "ADDR")]
    pub bind: Option<String>,
    /// Require a token kept in .troupe/state/server.token (mode 0600), made and printed once if absent.
    #[arg(long)]
    pub generate_token: bool,
}

pub fn run(g: &GlobalArgs, args: ServeArgs) -> CliResult<ExitCode> {
    let project = crate::project::find(g)?;
    let config = crate::project::load_config(&project)?;
    let store = crate::commands::mcp::open_store(&project)?;
    let rt = crate::commands::mcp::runtime()?;
    rt.block_on(async {
        let server = start(&project, store, config, args.bind.as_deref(), args.generate_token).await?;
        announce(g, &server);
        server.wait(troupe_server::shutdown_signal()).await
    })?;
    Ok(ExitCode::SUCCESS)
}

/// A server bound and ready to serve.
pub struct Bound {
    listener: tokio::net::TcpListener,
    state: AppState,
    /// Where it listens.
    pub addr: SocketAddr,
    /// Where its token came from.
    pub source: TokenSource,
}

impl Bound {
    /// Serve until `shutdown` resolves.
    pub async fn wait(self, shutdown: impl std::future::Future<Output = ()> + Send + 'static) -> CliResult<()> {
        troupe_server::serve(self.listener, self.state, shutdown)
            .await
            .map_err(|e| CliError::internal("the HTTP server failed").with_source(&e))
    }
}

/// Decide the address and token rule, and bind: everything that can refuse
/// happens here, before anything is served.
pub async fn start(
    project: &Project,
    store: Arc<dyn Store>,
    config: troupe_core::config::Config,
    bind: Option<&str>,
    generate_token: bool,
) -> CliResult<Bound> {
    let text = bind.unwrap_or(&config.server.bind);
    let addr = parse_addr(text)?;
    let env_token = std::env::var(auth::TOKEN_ENV).ok();
    let resolved =
        auth::resolve(addr, env_token, &config.server, project.layout(), generate_token).map_err(auth_error)?;
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
        CliError::user(format!("cannot listen on {addr}"))
            .with_source(&e)
            .with_hint("choose another address with `--bind` (port 0 picks a free one), or stop what uses it")
    })?;
    let addr = listener.local_addr().unwrap_or(addr);
    let state = AppState::new(project.layout().clone(), store, config, resolved.auth);
    Ok(Bound { listener, state, addr, source: resolved.source })
}

/// Say where the server listens (stdout: scripts read the port when they
/// asked for port 0), and the token if it was made just now — the only time
/// it is shown.
pub fn announce(g: &GlobalArgs, server: &Bound) {
    let url = format!("http://{}", server.addr);
    let new_token = match &server.source {
        TokenSource::NewlyGenerated(t) => Some(t.as_str()),
        _ => None,
    };
    let dashboard = dashboard_link(&url, &server.source);
    if g.json {
        print_json(&serde_json::json!({
            "url": url,
            "dashboard": dashboard,
            "token_required": server.source != TokenSource::None,
            "token": new_token,
        }));
    } else {
        print_line(&format!("serving on {url}"));
        // On stderr: scripts read stdout's first line for the address and
        // may close the pipe after it.
        note(&format!("dashboard: {dashboard}"));
        if let Some(token) = new_token {
            print_line(&format!("token: {token}"));
            note("the token is saved in .troupe/state/server.token (mode 0600) and not shown again");
        }
    }
}

/// Where a browser opens the dashboard: with a token the user has in hand
/// (made now, or `$TROUPE_TOKEN`), a login link that puts it in a cookie and
/// leaves the address bar at once; with a token kept elsewhere, the login page.
fn dashboard_link(url: &str, source: &TokenSource) -> String {
    let login = troupe_server::dashboard::LOGIN;
    let token = match source {
        TokenSource::None => return format!("{url}/"),
        TokenSource::NewlyGenerated(t) => Some(t.clone()),
        TokenSource::Env => std::env::var(auth::TOKEN_ENV).ok().map(|t| t.trim().to_string()),
        _ => None,
    };
    match token {
        Some(t) => format!("{url}{login}?token={}", troupe_server::dashboard::html::seg(&t)),
        None => format!("{url}{login}"),
    }
}

fn parse_addr(text: &str) -> CliResult<SocketAddr> {
    let bad = || {
        CliError::usage(format!("`{text}` is not an address to listen on"))
            .with_hint("give HOST:PORT, e.g. `--bind 127.0.0.1:7878` (or `[server] bind` in .troupe/config.toml)")
    };
    text.to_socket_addrs().map_err(|_| bad())?.next().ok_or_else(bad)
}

fn auth_error(err: AuthError) -> CliError {
    let message = err.to_string();
    match &err {
        AuthError::TokenRequired { .. } => CliError::user(message).with_hint(format!(
            "set {} (or `[server] token_file`), or pass `--generate-token`; or bind a loopback address such as 127.0.0.1",
            auth::TOKEN_ENV
        )),
        AuthError::EmptyToken(_) => CliError::user(message).with_hint("give a non-empty token"),
        AuthError::TokenFileShared(path) => {
            CliError::user(message).with_hint(format!("`chmod 600 {}`", path.display()))
        }
        AuthError::TokenFile { .. } => CliError::config(message).with_source(&err),
    }
}

/// The server a Lead command hosts with `--serve`: on the run's runtime, in
/// the Lead's process, so the API and the event stream see the run live.
pub struct Hosted {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<CliResult<()>>,
}

impl Hosted {
    /// Stop serving (gracefully: event streams end, requests in flight finish).
    pub fn stop(self, runtime: &tokio::runtime::Runtime) {
        let _ = self.stop.send(());
        match runtime.block_on(self.task) {
            Ok(Err(e)) => note(&format!("warning: {}", e.message)),
            Err(e) => note(&format!("warning: the HTTP server ended abnormally: {e}")),
            Ok(Ok(())) => {}
        }
    }
}

/// With `--serve [ADDR]` (`Some("")`: `[server] bind`), start serving before
/// the run starts; every refusal (address, token) stops the command first.
/// Where it listens goes to stderr: stdout carries the run's report.
pub fn host_if(project: &Project, runtime: &tokio::runtime::Runtime, addr: Option<&str>) -> CliResult<Option<Hosted>> {
    let Some(addr) = addr else { return Ok(None) };
    let config = crate::project::load_config(project)?;
    let store = crate::commands::mcp::open_store(project)?;
    let bind = Some(addr).filter(|a| !a.is_empty());
    let server = runtime.block_on(start(project, store, config, bind, false))?;
    note(&format!("serving the run's API on http://{}", server.addr));
    note(&format!("dashboard: {}", dashboard_link(&format!("http://{}", server.addr), &server.source)));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = runtime.spawn(server.wait(async move {
        let _ = stopped.await;
    }));
    Ok(Some(Hosted { stop, task }))
}
