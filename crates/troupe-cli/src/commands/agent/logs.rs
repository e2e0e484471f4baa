use std::io::Read;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Args;
use troupe_engine::supervisor::{Body, Record, group_alive};

use super::display::{Detail, line};
use crate::cli::GlobalArgs;
use crate::error::{CliError, CliResult};
use crate::output::print_line;

/// Show an agent's log (`.troupe/state/logs/<id>.jsonl`): one line per event,
/// or the raw JSON lines with `--json`. `--follow` keeps reading until the
/// agent exits.
#[derive(Debug, Args)]
pub struct LogsArgs {
    /// The agent id.
    pub id: String,
    /// Keep printing new records until the agent ends.
    #[arg(short, long)]
    pub follow: bool,
}

pub fn run(g: &GlobalArgs, args: LogsArgs) -> CliResult<ExitCode> {
    super::check_agent_id(&args.id)?;
    let project = crate::project::find(g)?;
    let path = project.layout().logs_dir().join(format!("{}.jsonl", args.id));
    let mut file = std::fs::File::open(&path).map_err(|e| {
        CliError::user(format!("no log for agent '{}' ({})", args.id, path.display()))
            .with_source(&e)
            .with_hint("`troupe agent list` shows the agents")
    })?;
    let mut pending = Vec::new();
    let mut start_ts: Option<jiff::Timestamp> = None;
    let mut pid: Option<u32> = None;
    let mut ended = false;
    let mut idle_since = Instant::now();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = file
            .read(&mut buf)
            .map_err(|e| CliError::internal(format!("cannot read {}", path.display())).with_source(&e))?;
        if n > 0 {
            idle_since = Instant::now();
            pending.extend_from_slice(&buf[..n]);
            while let Some(pos) = pending.iter().position(|b| *b == b'\n') {
                let raw: Vec<u8> = pending.drain(..=pos).collect();
                let text = String::from_utf8_lossy(&raw[..raw.len() - 1]).into_owned();
                let record: Option<Record> = serde_json::from_str(&text).ok();
                if let Some(r) = &record {
                    start_ts.get_or_insert(r.ts);
                    if let Body::Spawned { pid: p, .. } = r.body {
                        pid = Some(p);
                    }
                    if matches!(r.body, Body::Exited { .. }) {
                        ended = true;
                    }
                }
                if g.json {
                    print_line(&text);
                } else if let Some(r) = &record {
                    let elapsed = start_ts.map(|s| r.ts.duration_since(s).as_millis().max(0) as u64).unwrap_or(0);
                    if let Some(l) = line(r, Detail::Full) {
                        let t = format!("[{:>6.1}s]", elapsed as f64 / 1000.0);
                        print_line(&format!("{} {l}", crate::output::paint(&t, "2")));
                    }
                } else if !text.trim().is_empty() {
                    print_line(&format!("(unreadable log line) {}", crate::output::escape(&text)));
                }
            }
            continue;
        }
        if !args.follow || ended {
            break;
        }
        // A supervisor that died cannot write its `exited` record: stop once
        // the agent's process group is gone and the file stays quiet.
        if pid.is_some_and(|p| !group_alive(p)) && idle_since.elapsed() > Duration::from_secs(1) {
            break;
        }
        // A read past the end returns what was appended since.
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(ExitCode::SUCCESS)
}
