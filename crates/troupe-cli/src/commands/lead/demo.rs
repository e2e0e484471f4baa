//! `troupe demo`: a sample project in a temporary folder, and `troupe run` on it
//! with the built-in scripted engine, showing every moving part in seconds.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use troupe_lead::machine::Job;
use troupe_project::Project;

use super::LeadFlags;
use crate::cli::GlobalArgs;
use crate::error::{CliError, CliResult};
use crate::output::{json_mode, paint, print_line};

/// The scripted teammates of the demo.
pub const SCRIPT: &str = include_str!("demo_script.yaml");

const FEATURE: &str = "calculator";
const DESCRIPTION: &str = "add, multiply, and a calc command line (sh src/calc.sh 2 + 3)";

/// Run troupe's main job on a sample project with the scripted engine: phase
/// gates, the Architect's design, a design review (six Inspectors and an
/// Auditor), tasks.yaml, two waves of parallel Builders, a quality gate that
/// fails once and is fixed, the impl review, knowledge tags, and commits.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Create the sample project here instead of a new temporary folder (must not exist yet).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

fn io(what: &str, e: std::io::Error) -> CliError {
    CliError::internal(format!("demo: cannot {what}")).with_source(&e)
}

fn write(root: &Path, rel: &str, text: &str) -> CliResult<()> {
    let path = root.join(rel);
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).map_err(|e| io(&format!("create {}", d.display()), e))?;
    }
    std::fs::write(&path, text).map_err(|e| io(&format!("write {}", path.display()), e))
}

fn sh(root: &Path, program: &Path, args: &[&str]) -> CliResult<String> {
    let out = std::process::Command::new(program)
        .args(args)
        .current_dir(root)
        .output()
        .map_err(|e| io(&format!("run {}", program.display()), e))?;
    if !out.status.success() {
        return Err(CliError::internal(format!(
            "demo: `{} {}` failed: {}",
            program.display(),
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Lay out the sample project: a tiny POSIX sh codebase with a test runner and
/// a linter, troupe's `.troupe/` (via `troupe init`), steering whose Common
/// Commands are those two, the demo script, and a first commit.
pub fn create_sample(root: &Path, troupe: &Path) -> CliResult<()> {
    let git = Path::new("git");
    write(root, "README.md", "# calc\n\nA tiny calculator in POSIX sh, built by troupe's demo.\n")?;
    write(
        root,
        "tests/run.sh",
        "# Runs every tests/test_*.sh; fails if one fails.\nstatus=0\nfor t in tests/test_*.sh; do\n  [ -e \"$t\" ] || continue\n  if sh \"$t\"; then echo \"ok   $t\"; else echo \"FAIL $t\"; status=1; fi\ndone\nexit $status\n",
    )?;
    write(
        root,
        "tests/lint.sh",
        "# Syntax-checks src/*.sh and refuses TODO markers.\nstatus=0\nfor f in src/*.sh; do\n  [ -e \"$f\" ] || continue\n  sh -n \"$f\" || status=1\n  if grep -n TODO \"$f\"; then echo \"lint: $f has a TODO marker\"; status=1; fi\ndone\nexit $status\n",
    )?;
    sh(root, git, &["init", "-q"])?;
    sh(root, troupe, &["init", "-C", &root.display().to_string()]).map(|_| ())?;
    write(
        root,
        ".troupe/steering/tech.md",
        "# Tech\n\nPOSIX sh, no dependencies.\n\n## Common Commands\n\n- Test: `sh tests/run.sh`\n- Lint: `sh tests/lint.sh`\n",
    )?;
    write(root, ".troupe/steering/product.md", "# Product\n\nA calculator for the command line.\n")?;
    write(root, ".troupe/scripted.yaml", SCRIPT)?;
    // The scripted engine by default, so that the commands the demo suggests
    // afterwards (`troupe status`, `resume`, `revise`) run there without `--engine`.
    let config_path = root.join(".troupe/config.toml");
    let config =
        std::fs::read_to_string(&config_path).map_err(|e| io(&format!("read {}", config_path.display()), e))?;
    let config = config.replacen("[engines]\n", "[engines]\ndefault = \"scripted\"\n", 1);
    write(root, ".troupe/config.toml", &config)?;
    sh(root, git, &["add", "-A"])?;
    sh(
        root,
        git,
        &[
            "-c",
            "user.name=troupe demo",
            "-c",
            "user.email=demo@localhost",
            "commit",
            "-q",
            "-m",
            "calc: empty project",
        ],
    )?;
    Ok(())
}

pub fn run(g: &GlobalArgs, args: DemoArgs) -> CliResult<ExitCode> {
    let root = match args.dir {
        Some(d) => {
            if d.exists() {
                return Err(
                    CliError::user(format!("{} already exists", d.display())).with_hint("pass a new folder to --dir")
                );
            }
            std::fs::create_dir_all(&d).map_err(|e| io("create the folder", e))?;
            d
        }
        None => tempfile::Builder::new()
            .prefix("troupe-demo-")
            .tempdir()
            .map_err(|e| io("create a temporary folder", e))?
            .keep(),
    };
    let root = root.canonicalize().map_err(|e| io("resolve the folder", e))?;
    let troupe = std::env::current_exe().map_err(|e| io("find the troupe executable", e))?;
    if !json_mode() {
        eprintln!("{}", paint(&format!("troupe demo: a sample project in {}", root.display()), "1"));
        eprintln!("troupe run {FEATURE} \"{DESCRIPTION}\" --engine scripted\n");
    }
    create_sample(&root, &troupe)?;
    let project = Project::at(&root);
    super::run::ensure_spec(&project, FEATURE, Some(DESCRIPTION))?;
    let flags = LeadFlags {
        engine: Some("scripted".into()),
        no_commit: false,
        commit: false,
        script: None,
        serve: None,
        budget: None,
    };
    let job = match super::ReviewFlags::default().resolve(&project, FEATURE)? {
        Some(options) => Job::RunReviewed(options),
        None => Job::Run,
    };
    let report = super::drive_report(g, &project, FEATURE, job, &flags)?;
    super::print_report(g, &report);
    if !g.json {
        let log = sh(&root, Path::new("git"), &["log", "--oneline"]).unwrap_or_default();
        let knowledge = std::fs::read_to_string(root.join(".troupe/handover/knowledge.md")).unwrap_or_default();
        let tags: Vec<&str> = knowledge.lines().filter(|l| l.starts_with("- [")).collect();
        let verdicts =
            std::fs::read_to_string(project.layout().spec_dir(FEATURE).join("verdicts.md")).unwrap_or_default();
        let rounds: Vec<&str> =
            verdicts.lines().filter(|l| l.starts_with("## [B") || l.starts_with("- verdict:")).collect();
        print_line(&format!("\nverdicts.md:\n{}", rounds.join("\n")));
        print_line(&format!("\ngit log:\n{}", log.trim_end()));
        print_line(&format!("\nknowledge.md:\n{}", tags.join("\n")));
        print_line(&format!(
            "\nLook around: cd {} && git show --stat HEAD && cat .troupe/handover/decisions.md .troupe/specs/{FEATURE}/verdicts.md",
            root.display()
        ));
    }
    super::exit_for(g, &report)
}
