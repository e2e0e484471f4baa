use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Args;
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

use super::daemon;
use crate::cli::GlobalArgs;
use crate::error::{CliError, CliResult};
use crate::output::{print_json, print_line};

/// Stop the gateway `troupe mcp start` started: SIGTERM (it stops its
/// backend servers and removes its pid file), then, after `--timeout`
/// seconds, SIGKILL to its whole process group, so nothing it started is
/// left running.
#[derive(Debug, Args)]
pub struct StopArgs {
    /// Seconds to wait for a graceful stop before killing it.
    #[arg(long, default_value_t = 10)]
    pub timeout: u64,
}

pub fn run(g: &GlobalArgs, args: StopArgs) -> CliResult<ExitCode> {
    let project = crate::project::find(g)?;
    let running = match daemon::read(&project)? {
        None => {
            return Err(CliError::user("no MCP gateway was started here")
                .with_hint("`troupe mcp start --background --role <role>` starts one"));
        }
        Some(Err(stale)) => {
            daemon::forget(&project, &stale);
            if g.json {
                print_json(&serde_json::json!({"stopped": false, "pid": stale.pid, "stale": true}));
            } else {
                print_line(&format!("the gateway (pid {}) was not running; removed its pid file", stale.pid));
            }
            return Ok(ExitCode::SUCCESS);
        }
        Some(Ok(running)) => running,
    };
    let pid = Pid::from_raw(running.pid);
    let _ = kill(pid, Signal::SIGTERM);
    let deadline = Instant::now() + Duration::from_secs(args.timeout);
    while daemon::alive(running.pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(25));
    }
    let forced = daemon::alive(running.pid);
    if forced {
        // Its process group: the gateway and any backend server it started.
        let _ = killpg(pid, Signal::SIGKILL);
        let _ = kill(pid, Signal::SIGKILL);
    }
    daemon::forget(&project, &running);
    if g.json {
        print_json(&serde_json::json!({"stopped": true, "pid": running.pid, "forced": forced}));
    } else if forced {
        print_line(&format!("killed the MCP gateway (pid {}) after {}s", running.pid, args.timeout));
    }
    Ok(ExitCode::SUCCESS)
}
