use std::process::ExitCode;

use clap::Args;
use troupe_core::ownership::{ArtifactKind, right};
use troupe_core::role::Role;

use crate::cli::GlobalArgs;
use crate::error::CliResult;
use crate::output::{print_json, print_line};

/// Print the artifact ownership matrix: for each artifact, what each role may do.
#[derive(Debug, Args)]
pub struct OwnershipArgs {}

pub fn run(g: &GlobalArgs, _args: OwnershipArgs) -> CliResult<ExitCode> {
    if g.json {
        let rows: Vec<_> = ArtifactKind::ALL
            .iter()
            .map(|&kind| {
                let rights: serde_json::Map<String, serde_json::Value> =
                    Role::ALL.iter().map(|&r| (r.as_str().to_string(), right(r, kind).label().into())).collect();
                serde_json::json!({ "artifact": kind.label(), "rights": rights })
            })
            .collect();
        print_json(&rows);
        return Ok(ExitCode::SUCCESS);
    }
    let mut header = format!("{:20}", "ARTIFACT");
    for role in Role::ALL {
        header.push_str(&format!("  {:14}", role.title()));
    }
    print_line(header.trim_end());
    for kind in ArtifactKind::ALL {
        let mut line = format!("{:20}", kind.label());
        for role in Role::ALL {
            line.push_str(&format!("  {:14}", right(role, kind).label()));
        }
        print_line(line.trim_end());
    }
    Ok(ExitCode::SUCCESS)
}
