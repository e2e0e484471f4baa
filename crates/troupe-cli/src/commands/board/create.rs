use std::process::ExitCode;

use clap::Args;
use troupe_store::NewTask;

use super::{actor, open_store, store_error};
use crate::cli::GlobalArgs;
use crate::error::CliResult;
use crate::output::{print_json, print_line};

/// Create a task on the board and print its id.
#[derive(Debug, Args)]
pub struct CreateArgs {
    /// One line saying what to do.
    pub subject: String,
    /// Details.
    #[arg(long, short, default_value = "")]
    pub description: String,
    /// A task that must be completed first (repeat for several).
    #[arg(long = "blocked-by", value_name = "ID")]
    pub blocked_by: Vec<String>,
    /// The feature the task belongs to.
    #[arg(long)]
    pub feature: Option<String>,
    /// The builder wave.
    #[arg(long)]
    pub wave: Option<u32>,
    /// An explicit id instead of the next `t<n>`.
    #[arg(long)]
    pub id: Option<String>,
}

pub fn run(g: &GlobalArgs, args: CreateArgs) -> CliResult<ExitCode> {
    let store = open_store(g)?;
    let mut new = NewTask::new(args.subject, actor()).blocked_by(args.blocked_by);
    new.id = args.id;
    new.description = args.description;
    new.feature = args.feature;
    new.wave = args.wave;
    let task = store.create_task(new).map_err(store_error)?;
    if g.json {
        print_json(&task);
    } else {
        print_line(&task.id);
    }
    Ok(ExitCode::SUCCESS)
}
