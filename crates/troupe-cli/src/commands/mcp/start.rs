use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Args;
use troupe_store::token;

use super::daemon::{self, Running};
use crate::cli::GlobalArgs;
use crate::error::{CliError, CliResult};
use crate::output::{note, print_json, print_line};

/// Start a long-running MCP gateway over Streamable HTTP for MCP clients
/// outside a troupe run (an editor, a desktop app). It serves one agent
/// identity in one role; every request needs its bearer token, which is
/// minted at each start and written to `.troupe/state/mcp/token` (mode 0600).
/// Loopback by default. `--background` detaches it and returns once it
/// listens; `troupe mcp stop` stops it and its backend servers.
#[derive(Debug, Args)]
pub struct StartArgs {
    /// The role its clients get (and the ceiling of `set_role`).
    #[arg(long, env = "TROUPE_ROLE")]
    pub role: String,
    /// The agent identity (audit, rate limits, mailbox); default `gateway-<role>`.
    #[arg(long)]
    pub agent: Option<String>,
    /// Where to listen; a port of 0 picks a free one.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    pub http: SocketAddr,
    /// Detach: start it in the background, print where it listens, and return.
    #[arg(long)]
    pub background: bool,
}

/// How long `--background` waits for the gateway to listen.
const STARTUP: Duration = Duration::from_secs(20);

pub fn run(g: &GlobalArgs, args: StartArgs) -> CliResult<ExitCode> {
    let project = crate::project::find(g)?;
    match daemon::read(&project)? {
        Some(Ok(running)) => {
            return Err(CliError::user(format!(
                "an MCP gateway already runs here (pid {}, {})",
                running.pid, running.url
            ))
            .with_hint("`troupe mcp stop` stops it"));
        }
        Some(Err(stale)) => daemon::forget(&project, &stale),
        None => {}
    }
    let agent = args.agent.clone().unwrap_or_else(|| format!("gateway-{}", args.role));
    if args.background {
        return background(g, &project, &args, &agent);
    }
    let (gateway, warnings) = super::gateway(&project, true)?;
    for w in &warnings {
        tracing::warn!("{w}");
    }
    super::serve::check_role(&gateway, &args.role)?;
    // A fresh token at each start: the one of a stopped gateway no longer works.
    let minted = token::mint().map_err(|e| CliError::internal("cannot mint a gateway token").with_source(&e))?;
    let hash = token::hash(&minted);
    if let Some(store) = &gateway.store {
        store.set_gateway_token(&agent, &hash).map_err(crate::commands::board::store_error)?;
    }
    let token_file = daemon::dir(&project).join("token");
    daemon::write_private(&token_file, &minted)?;
    let session = super::serve::session(agent.clone(), args.role.clone(), false);
    let pid_file = daemon::pid_file(&project);
    let mut written: Option<Running> = None;
    let rt = super::runtime()?;
    let served = rt.block_on(super::serve::http_until_signal(gateway, session, args.http, hash, |bound| {
        let running = Running {
            pid: std::process::id() as i32,
            url: format!("http://{bound}/mcp"),
            role: args.role.clone(),
            agent: agent.clone(),
            token_file: token_file.clone(),
        };
        daemon::write_private(&pid_file, &serde_json::to_string_pretty(&running).expect("serialises"))?;
        if g.json {
            print_json(&running);
        } else {
            note(&format!(
                "serving the MCP gateway at {} as {} ({}); requests need `Authorization: Bearer <token>` with the \
                 token in {}; Ctrl-C or `troupe mcp stop` stops it",
                running.url,
                agent,
                args.role,
                token_file.display()
            ));
            print_line(&running.url);
        }
        written = Some(running);
        Ok(())
    }));
    match &written {
        Some(running) => daemon::forget(&project, running),
        None => {
            let _ = std::fs::remove_file(&token_file);
        }
    }
    served.map(|()| ExitCode::SUCCESS)
}

/// Start `troupe mcp start` (without `--background`) detached, in a process
/// group of its own with its output in `.troupe/state/mcp/gateway.log`, and
/// return once its pid file says it listens.
fn background(g: &GlobalArgs, project: &troupe_project::Project, args: &StartArgs, agent: &str) -> CliResult<ExitCode> {
    use std::os::unix::process::CommandExt as _;
    let dir = daemon::dir(project);
    std::fs::create_dir_all(&dir)
        .map_err(|e| CliError::user(format!("cannot create {}", dir.display())).with_source(&e))?;
    let log_path = dir.join("gateway.log");
    let log = std::fs::File::create(&log_path)
        .map_err(|e| CliError::user(format!("cannot write {}", log_path.display())).with_source(&e))?;
    let me = std::env::current_exe()
        .map_err(|e| CliError::internal("cannot find the running troupe binary").with_source(&e))?;
    let mut child = std::process::Command::new(me)
        .arg("-C")
        .arg(project.root())
        .args(["mcp", "start", "--role", &args.role, "--agent", agent, "--http", &args.http.to_string()])
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone().map_err(|e| CliError::internal("cannot share the log file").with_source(&e))?)
        .stderr(log)
        // Its own group: the terminal's Ctrl-C does not reach it, and `stop` can end its backends with it.
        .process_group(0)
        .spawn()
        .map_err(|e| CliError::user("cannot start the gateway process").with_source(&e))?;
    let deadline = Instant::now() + STARTUP;
    loop {
        if let Some(Ok(running)) = daemon::read(project)?
            && running.pid == child.id() as i32
        {
            if g.json {
                print_json(&running);
            } else {
                print_line(&running.url);
                note(&format!(
                    "the MCP gateway runs in the background (pid {}); token in {}; `troupe mcp stop` stops it",
                    running.pid,
                    running.token_file.display()
                ));
            }
            return Ok(ExitCode::SUCCESS);
        }
        let exited = child.try_wait().ok().flatten();
        if exited.is_some() || Instant::now() > deadline {
            if exited.is_none() {
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(child.id() as i32),
                    nix::sys::signal::Signal::SIGKILL,
                );
                let _ = child.wait();
            }
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            let mut e = CliError::user(match exited {
                Some(status) => format!("the gateway exited before it listened ({status})"),
                None => format!("the gateway did not listen within {}s", STARTUP.as_secs()),
            });
            e.causes.extend(log.lines().rev().take(5).map(str::to_string).collect::<Vec<_>>().into_iter().rev());
            return Err(e.with_hint(format!("its log: {}", log_path.display())));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
