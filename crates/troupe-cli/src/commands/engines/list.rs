use std::process::ExitCode;

use clap::Args;
use serde_json::json;
use troupe_core::config::{ENGINE_PHASES, EnginesConfig};
use troupe_engine::Registry;
use troupe_engine::resolve::resolve;

use crate::cli::GlobalArgs;
use crate::error::CliResult;
use crate::output::{print_json, print_table_styled};

/// List every engine troupe knows (the four built-in CLIs and `[engines.custom]`
/// ones): its command, whether it is installed (on PATH or at its configured
/// path), its version, and the phases that run on it.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Skip asking each installed engine for its version (faster).
    #[arg(long)]
    pub no_version: bool,
}

pub fn run(g: &GlobalArgs, args: ListArgs) -> CliResult<ExitCode> {
    // Outside a project: the built-in engines and defaults.
    let engines_config = super::load_config(g)?.map(|c| c.engines).unwrap_or_else(EnginesConfig::default);
    let registry = Registry::from_config(&engines_config);
    let engines = registry.list();
    // Versions are asked in parallel: some CLIs take seconds to start.
    let rows: Vec<serde_json::Value> = std::thread::scope(|s| {
        let handles: Vec<_> = engines
            .iter()
            .map(|e| {
                let no_version = args.no_version;
                s.spawn(move || {
                    let path = e.locate();
                    let version = match (&path, no_version) {
                        (Some(p), false) => troupe_engine::registry::version_of(p),
                        _ => None,
                    };
                    (path, version)
                })
            })
            .collect();
        engines
            .iter()
            .zip(handles)
            .map(|(e, h)| {
                let (path, version) = h.join().unwrap_or((None, None));
                let phases: Vec<&str> = ENGINE_PHASES
                    .iter()
                    .copied()
                    .filter(|p| resolve(p, None, Ok(&engines_config)).engine == e.id)
                    .collect();
                json!({
                    "id": e.id,
                    "label": e.label,
                    "command": e.command,
                    "format": e.format.name(),
                    "builtin": e.is_builtin(),
                    "installed": path.is_some(),
                    "path": path.map(|p| p.display().to_string()),
                    "version": version,
                    "phases": phases,
                })
            })
            .collect()
    });
    if g.json {
        print_json(&json!({"engines": rows}));
        return Ok(ExitCode::SUCCESS);
    }
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let phases: Vec<&str> = r["phases"].as_array().into_iter().flatten().filter_map(|p| p.as_str()).collect();
            vec![
                r["id"].as_str().unwrap_or_default().to_string(),
                r["label"].as_str().unwrap_or_default().to_string(),
                if r["installed"] == true { "yes" } else { "no" }.to_string(),
                r["version"].as_str().unwrap_or("-").to_string(),
                r["path"].as_str().or(r["command"].as_str()).unwrap_or_default().to_string(),
                if phases.is_empty() { "-".to_string() } else { phases.join(",") },
            ]
        })
        .collect();
    let style = |r: usize, c: usize| match (c, table[r][2].as_str()) {
        (2, "yes") => Some("32"),
        (2, _) => Some("31"),
        _ => None,
    };
    print_table_styled(&["ENGINE", "LABEL", "INSTALLED", "VERSION", "COMMAND", "PHASES"], &table, &[], &style);
    Ok(ExitCode::SUCCESS)
}
