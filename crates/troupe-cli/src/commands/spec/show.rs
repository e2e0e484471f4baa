use std::process::ExitCode;

use clap::Args;
use troupe_project::specs::Specs;

use crate::cli::GlobalArgs;
use crate::error::CliResult;
use crate::output::{print_json, print_line};
use crate::project::{find, spec_error};

/// Show one spec.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The feature.
    pub feature: String,
}

pub fn run(g: &GlobalArgs, args: ShowArgs) -> CliResult<ExitCode> {
    let project = find(g)?;
    let spec = Specs::new(&project).load(&args.feature).map_err(spec_error)?;
    if g.json {
        print_json(&spec);
        return Ok(ExitCode::SUCCESS);
    }
    let mut out = vec![format!("feature:  {}", spec.feature_name)];
    if !spec.description.is_empty() {
        out.push(format!("about:    {}", spec.description));
    }
    out.push(format!("phase:    {}", spec.phase));
    out.push(format!("version:  {}", spec.version));
    let refs = &spec.version_refs;
    out.push(format!(
        "design:   {}   implementation: {}",
        refs.design.as_deref().unwrap_or("-"),
        refs.implementation.as_deref().unwrap_or("-")
    ));
    if let Some(b) = &spec.blocked_info {
        out.push(format!("blocked:  by {} ({}), will return to {}", b.blocked_by, b.reason, b.blocked_at_phase));
    }
    let o = &spec.orchestration;
    out.push(format!(
        "retries:  {}/{}   spec updates: {}/{}",
        o.retry_count,
        troupe_core::spec::MAX_RETRY_COUNT,
        o.spec_update_count,
        troupe_core::spec::MAX_SPEC_UPDATE_COUNT
    ));
    if !spec.engine_override.is_empty() {
        let pairs: Vec<String> = spec.engine_override.iter().map(|(k, v)| format!("{k}={v}")).collect();
        out.push(format!("engines:  {}", pairs.join(" ")));
    }
    if !spec.implementation.files_created.is_empty() {
        out.push(format!("files:    {}", spec.implementation.files_created.join(", ")));
    }
    out.push("changelog:".to_string());
    for e in &spec.changelog {
        out.push(format!("  {}  v{}  {:24}  {}", e.at, e.version, e.action, e.summary));
    }
    print_line(&out.join("\n"));
    Ok(ExitCode::SUCCESS)
}
