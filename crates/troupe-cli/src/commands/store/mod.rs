//! `troupe store …`: the project's store itself (issue 20).

use std::process::ExitCode;

use clap::{Args, Subcommand};

use crate::cli::GlobalArgs;
use crate::error::{CliError, CliResult};
use crate::output::{print_json, print_line, print_table};

#[derive(Debug, Subcommand)]
pub enum StoreCommand {
    /// Copy the project's store into an empty one on the other backend
    /// (SQLite → PostgreSQL, or back), verified by row counts and checksums.
    Migrate(MigrateArgs),
}

/// `store migrate`.
#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// The empty target: `postgres://user:password@host/db`, or an SQLite file path.
    #[arg(long)]
    pub to: String,
}

pub fn run(g: &GlobalArgs, cmd: StoreCommand) -> CliResult<ExitCode> {
    let StoreCommand::Migrate(args) = cmd;
    let project = crate::project::find(g)?;
    let config = crate::project::load_config(&project)?.store;
    let from = troupe_store::place(project.layout(), &config).map_err(crate::commands::board::store_error)?;
    let tables = troupe_store::copy::migrate(&from, &args.to).map_err(|e| match e {
        troupe_store::StoreError::BadValue { column: "store", detail } => CliError::user(detail).with_hint(
            "the target must be an empty database of the other backend (`createdb` a new one, or a new file path)",
        ),
        other => crate::commands::board::store_error(other),
    })?;
    if g.json {
        print_json(&serde_json::json!({ "to": troupe_store::postgres::mask_password(&args.to), "tables": tables }));
    } else {
        let rows: Vec<Vec<String>> =
            tables.iter().map(|t| vec![t.table.clone(), t.rows.to_string(), t.checksum[..16].to_string()]).collect();
        print_table(&["table", "rows", "sha256"], &rows, &[1]);
        print_line(&format!(
            "copied to {}; counts and checksums match. Point `[store]` (or TROUPE_DATABASE_URL) at it to use it.",
            troupe_store::postgres::mask_password(&args.to)
        ));
    }
    Ok(ExitCode::SUCCESS)
}
