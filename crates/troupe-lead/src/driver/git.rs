//! Commits (seed 000 Spec 14): trunk-based, on the current branch, never
//! `.troupe/state/`.
//!
//! A commit holds exactly what its step produced (seed 000 Spec 14.8): a run
//! commits only its [`Scope`] — its spec folder, the handover files,
//! roadmap.yaml and the files its teammates were given to write — never `git add
//! -A`. So an untracked secret, the user's own edits elsewhere, or a sibling
//! feature's half-written files (features of one roadmap wave share the work
//! tree) stay out. What was already changed before the run ([`Baseline`]) stays
//! out too unless a teammate changed it since. Commits of all runs of the
//! process go one at a time, since two `git` commands that write the index at
//! once collide on its lock.

use std::collections::HashMap;
use std::path::Path;
use std::process::Stdio;
use std::sync::OnceLock;

use tokio::io::AsyncWriteExt;
use tokio::process::Command;
use troupe_core::layout::Layout;
use troupe_core::ownership::{Artifact, Decision, Writer, decide};
use troupe_core::role::Role;

/// One commit at a time in this process: `git add` and `git commit` of two runs
/// would otherwise interleave (one run's add swept into the other's commit) or
/// fail on `.git/index.lock`.
pub(super) fn commit_lock() -> &'static tokio::sync::Mutex<()> {
    static LOCK: OnceLock<tokio::sync::Mutex<()>> = OnceLock::new();
    LOCK.get_or_init(|| tokio::sync::Mutex::new(()))
}

/// The paths one feature's commits may hold when other features change the
/// work tree at the same time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    feature: String,
    owned: Vec<String>,
    before: Baseline,
}

/// The paths that were changed in the work tree before a run, each with a
/// fingerprint of its content then (`None`: absent). They are the user's: a
/// commit takes one only if a teammate has changed it since.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Baseline(HashMap<String, Option<u64>>);

impl Baseline {
    /// What is changed in the work tree at `root` now.
    pub async fn capture(root: &Path) -> Result<Baseline, String> {
        let changed = changed(root).await?;
        Ok(Baseline(changed.into_iter().map(|p| (p.clone(), fingerprint(&root.join(&p)))).collect()))
    }

    /// The changed paths, sorted.
    pub fn paths(&self) -> Vec<&str> {
        let mut paths: Vec<&str> = self.0.keys().map(String::as_str).collect();
        paths.sort_unstable();
        paths
    }

    /// Whether `path` is as it was before the run although changed against HEAD.
    fn untouched(&self, root: &Path, path: &str) -> bool {
        self.0.get(path).is_some_and(|before| *before == fingerprint(&root.join(path)))
    }
}

fn fingerprint(path: &Path) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let bytes = std::fs::read(path).ok()?;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    Some(h.finish())
}

impl Scope {
    /// The scope of `feature`: so far its spec folder, the handover files and roadmap.yaml.
    pub fn new(feature: &str) -> Scope {
        Scope { feature: feature.to_string(), owned: Vec::new(), before: Baseline::default() }
    }

    /// Leave out what was changed before the run and is still as it was then,
    /// except troupe's own files, which are the run's to commit.
    pub fn keep_out(&mut self, mut before: Baseline) {
        before.0.retain(|p, _| !self.is_troupes(p));
        self.before = before;
    }

    /// Files of the feature's plan (what its Builders were given, in this run
    /// or an interrupted one): troupe's, not the user's, even when an earlier
    /// run left them changed. `troupe resume` commits them.
    pub fn claim(&mut self, files: &[String]) {
        self.own(files);
        let plan = Scope { feature: self.feature.clone(), owned: files.to_vec(), before: Baseline::default() };
        self.before.0.retain(|p, _| !plan.contains(p));
    }

    /// The user's paths changed before the run (see [`Scope::keep_out`]).
    pub fn kept_out(&self) -> Vec<&str> {
        self.before.paths()
    }

    /// Add what a teammate of the feature was given to write (exact paths,
    /// folders ending in `/`, or globs, relative to the project root).
    pub fn own(&mut self, write: &[String]) {
        for w in write {
            if !self.owned.contains(w) {
                self.owned.push(w.clone());
            }
        }
    }

    /// Is `path` one of troupe's own files of the feature (its spec folder, the
    /// handover files, roadmap.yaml)? troupe writes them; they are never the user's.
    pub fn is_troupes(&self, path: &str) -> bool {
        let layout = Layout::new("");
        let rel = |p: std::path::PathBuf| p.to_string_lossy().replace('\\', "/");
        let under = |dir: String| path.starts_with(&format!("{}/", dir.trim_end_matches('/')));
        under(rel(layout.spec_dir(&self.feature)))
            || under(rel(layout.handover_dir()))
            || path == rel(layout.troupe_dir().join("roadmap.yaml"))
    }

    /// Does `path` (relative to the project root, `/`-separated) belong to the feature?
    pub fn contains(&self, path: &str) -> bool {
        if is_in_flight(path) {
            return false;
        }
        let layout = Layout::new("");
        let rel = |p: std::path::PathBuf| p.to_string_lossy().replace('\\', "/");
        let under = |dir: String| path.starts_with(&format!("{}/", dir.trim_end_matches('/')));
        if under(rel(layout.state_dir())) {
            return false;
        }
        if self.is_troupes(path) {
            return true;
        }
        // The rule the hooks apply to a Builder of these files: what the
        // feature's teammates may write is what the feature may have changed.
        let writer =
            Writer { role: Role::Builder, feature: Some(&self.feature), owned_files: &self.owned, agent_name: None };
        decide(&Artifact::Code { path: path.to_string() }, &writer) == Decision::Allow
    }

    /// The paths of `changed` that belong to the feature.
    pub fn select<'a>(&self, changed: &'a [String]) -> Vec<&'a str> {
        changed.iter().map(String::as_str).filter(|p| self.contains(p)).collect()
    }
}

/// A file troupe is writing right now (`write_atomic`'s `.{name}.tmp-{pid}-{n}`,
/// renamed over `{name}` a moment later): never content, and gone by the time
/// `git add` would look for it.
fn is_in_flight(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.starts_with('.') && name.contains(".tmp-")
}

/// Remove from `dirs` the temporary files of atomic writes whose writer died
/// before its rename (`.{name}.tmp-{pid}-{n}` of a process that no longer
/// exists): a killed run must not leave them for `git status` to show. A live
/// writer's file is left alone.
pub fn sweep_dead_writes(dirs: &[std::path::PathBuf]) {
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(dir) else { continue };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !is_in_flight(&name) {
                continue;
            }
            let pid = name.rsplit_once(".tmp-").and_then(|(_, rest)| rest.split('-').next()?.parse::<i32>().ok());
            let alive = pid.is_some_and(|p| nix::sys::signal::kill(nix::unistd::Pid::from_raw(p), None).is_ok());
            if pid.is_some() && !alive {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
}

/// `git` in `root` with repository hooks, fsmonitor and drivers off
/// (`troupe_project::git`): nothing planted in `.git/` runs at a commit.
pub(super) fn git_in(root: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(root).args(troupe_project::git::hardened_args(root)).env("GIT_TERMINAL_PROMPT", "0");
    cmd
}

/// Whether `root` is inside a git work tree.
pub async fn is_repo(root: &Path) -> bool {
    git_in(root).args(["rev-parse", "--is-inside-work-tree"]).output().await.is_ok_and(|o| o.status.success())
}

/// `git args...` in `root`: its trimmed stdout, or an error naming the
/// command and git's message.
///
/// Git lists a repository's worktrees without a lock, and `git worktree add`
/// creates the new worktree's `commondir` file empty before it writes it: a
/// command that lists worktrees in that moment (another add, `branch -D`,
/// `checkout -B`, `worktree move`) dies with "failed to read
/// .git/worktrees/…/commondir" before it changed anything. So this process
/// adds one worktree at a time ([`worktree_add_lock`]), and a command that
/// died of that race is run again.
pub(super) async fn git(root: &Path, args: &[&str]) -> Result<String, String> {
    let _adding = match args.starts_with(&["worktree", "add"]) {
        true => Some(worktree_add_lock().lock().await),
        false => None,
    };
    let mut attempt = 0;
    loop {
        let out = git_in(root).args(args).output().await.map_err(|e| format!("cannot run git: {e}"))?;
        if out.status.success() {
            return Ok(String::from_utf8_lossy(&out.stdout).trim().to_string());
        }
        let stderr = String::from_utf8_lossy(&out.stderr);
        attempt += 1;
        if attempt < WORKTREE_RACE_RETRIES && died_listing_a_worktree_being_added(&stderr) {
            tokio::time::sleep(std::time::Duration::from_millis(5 * attempt)).await;
            continue;
        }
        return Err(format!("git {} failed: {}", args.join(" "), stderr.trim()));
    }
}

/// How often a command that died listing a worktree being added is run in all.
const WORKTREE_RACE_RETRIES: u64 = 5;

/// Whether git's message is the one it dies with when it reads a worktree's
/// `commondir` that `git worktree add` has created but not yet written.
fn died_listing_a_worktree_being_added(stderr: &str) -> bool {
    stderr
        .lines()
        .any(|l| l.starts_with("fatal: failed to read ") && l.contains("/worktrees/") && l.contains("/commondir"))
}

/// One `git worktree add` at a time in this process (see [`git`]).
fn worktree_add_lock() -> &'static tokio::sync::Mutex<()> {
    static LOCK: OnceLock<tokio::sync::Mutex<()>> = OnceLock::new();
    LOCK.get_or_init(|| tokio::sync::Mutex::new(()))
}

/// `git args...` with `paths` as NUL-separated literal pathspecs on stdin
/// (no command-line limit, no glob magic in file names).
pub(super) async fn git_paths(root: &Path, args: &[&str], paths: &[&str]) -> Result<(), String> {
    let mut child = git_in(root)
        .args(args)
        .args(["--pathspec-from-file=-", "--pathspec-file-nul"])
        .env("GIT_LITERAL_PATHSPECS", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run git: {e}"))?;
    let mut input = Vec::new();
    for p in paths {
        input.extend_from_slice(p.as_bytes());
        input.push(0);
    }
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(&input).await.map_err(|e| format!("cannot write to git: {e}"))?;
    }
    let out = child.wait_with_output().await.map_err(|e| format!("cannot run git: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("git {} failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()))
    }
}

/// A git process that serves a run's requests over its stdin and stdout
/// (`update-ref --stdin`, `cat-file --batch-check`): one process start for
/// the run instead of one per request, which is most of a plumbing
/// command's cost (about 2.5 ms of CPU each here). It is killed when dropped
/// (a run's end, its Ctrl-C) and gets end-of-file on its stdin if the Lead
/// dies, so it never outlives the run. Any failure ends it: the caller then
/// runs the one-shot command, which fails, or not, as it always did.
#[derive(Debug)]
pub(super) struct Served {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    stdout: tokio::io::BufReader<tokio::process::ChildStdout>,
}

impl Served {
    /// `git args...` in `root`, kept running.
    pub(super) fn start(root: &Path, args: &[&str]) -> Result<Served, String> {
        let mut child = git_in(root)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            // What git says when it refuses: the one-shot fallback says it again.
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot run git: {e}"))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err("cannot talk to git: no pipes".into());
        };
        Ok(Served { child, stdin, stdout: tokio::io::BufReader::new(stdout) })
    }

    /// Write `input` and read `lines` lines of the answer (trimmed). An
    /// error when git ended before answering them all.
    pub(super) async fn ask(&mut self, input: &str, lines: usize) -> Result<Vec<String>, String> {
        use tokio::io::AsyncBufReadExt;
        self.stdin.write_all(input.as_bytes()).await.map_err(|e| format!("cannot write to git: {e}"))?;
        self.stdin.flush().await.map_err(|e| format!("cannot write to git: {e}"))?;
        let mut answer = Vec::with_capacity(lines);
        for _ in 0..lines {
            let mut line = String::new();
            match self.stdout.read_line(&mut line).await {
                Ok(0) => {
                    let status = self.child.wait().await.map_or_else(|e| e.to_string(), |s| s.to_string());
                    return Err(format!("git ended before it answered ({status})"));
                }
                Ok(_) => answer.push(line.trim_end().to_string()),
                Err(e) => return Err(format!("cannot read from git: {e}")),
            }
        }
        Ok(answer)
    }

    /// The process id (tests check that it ends with its owner).
    #[cfg(test)]
    pub(super) fn pid(&self) -> Option<u32> {
        self.child.id()
    }
}

/// The run's `git update-ref --stdin` ([`Served`]), shared by the Lead's
/// loop (the line's guarded move, a group's branch) and the background work
/// on its worktrees (a closed group's branch deleted and its worktree
/// detached, a spare's `HEAD` moved): one process for every ref the run
/// moves. Started when first asked; dropped with the last holder.
#[derive(Debug, Clone)]
pub(super) struct ServedRefs {
    root: std::path::PathBuf,
    served: std::sync::Arc<tokio::sync::Mutex<Option<Served>>>,
}

impl ServedRefs {
    /// Ref moves in the repository of `root`.
    pub(super) fn new(root: &Path) -> ServedRefs {
        ServedRefs { root: root.to_path_buf(), served: Default::default() }
    }

    /// Carry out `updates` (`update-ref --stdin` lines) as one transaction;
    /// whether it was made. When git refused (an old value that no longer
    /// holds) or ended, the process is dropped and started again when next
    /// needed: the caller runs the one-shot command instead.
    pub(super) async fn update(&self, updates: &str) -> bool {
        let mut served = self.served.lock().await;
        if served.is_none() {
            *served = Served::start(&self.root, &["update-ref", "-m", "troupe: merge", "--stdin"]).ok();
        }
        let Some(refs) = served.as_mut() else { return false };
        match refs.ask(&format!("start\n{updates}prepare\ncommit\n"), 3).await {
            Ok(said) if said == ["start: ok", "prepare: ok", "commit: ok"] => true,
            _ => {
                *served = None;
                false
            }
        }
    }

    /// The serving process's id, while there is one.
    #[cfg(test)]
    pub(super) async fn pid(&self) -> Option<u32> {
        self.served.lock().await.as_ref().and_then(Served::pid)
    }
}

/// Whether any of `paths` (relative to `root`) is changed in the work tree.
pub async fn any_changed(root: &Path, paths: &[String]) -> Result<bool, String> {
    let changed = changed(root).await?;
    Ok(changed.iter().any(|c| paths.contains(c)))
}

/// Paths changed in the work tree (modified, added, deleted, untracked and not
/// ignored), relative to `root`.
pub(super) async fn changed(root: &Path) -> Result<Vec<String>, String> {
    // `git status` names paths from the top of the repository; the project may be a folder in it.
    let prefix = git(root, &["rev-parse", "--show-prefix"]).await?;
    changed_under(root, &prefix).await
}

/// [`changed`] for a caller that knows `root`'s folder inside its repository
/// (`git rev-parse --show-prefix`): one git process fewer.
pub(super) async fn changed_under(root: &Path, prefix: &str) -> Result<Vec<String>, String> {
    // No optional locks: `git status` would otherwise write the index it
    // refreshed, which races a sibling feature's merge or commit in the same
    // tree (features of a roadmap wave share it) and leaves that one failing.
    let out = git_in(root)
        .env("GIT_OPTIONAL_LOCKS", "0")
        .args(["status", "--porcelain=v1", "-z", "--no-renames", "--untracked-files=all", "--", "."])
        .output()
        .await
        .map_err(|e| format!("cannot run git: {e}"))?;
    if !out.status.success() {
        return Err(format!("git status failed: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    Ok(parse_status(&String::from_utf8_lossy(&out.stdout), prefix))
}

/// The paths of `git status --porcelain=v1 -z --no-renames` output, made relative to `prefix`.
fn parse_status(out: &str, prefix: &str) -> Vec<String> {
    out.split('\0').filter(|e| e.len() > 3).filter_map(|e| e[3..].strip_prefix(prefix).map(str::to_string)).collect()
}

/// Commit what is staged (or only `only`) in `root` with `message`; the new
/// commit's short id.
pub(super) async fn commit_staged(root: &Path, message: &str, only: Option<&[&str]>) -> Result<String, String> {
    commit_as(root, message, only, Identity::of(root).await).await?;
    git(root, &["rev-parse", "--short", "HEAD"]).await
}

/// Whose name a commit troupe makes carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Identity {
    /// The repository's configured user.
    Configured,
    /// None is configured: troupe's own, so a machine without a git identity
    /// still gets its commits.
    Troupe,
}

impl Identity {
    /// The identity of commits in `root`: the configured user's, if any.
    pub(super) async fn of(root: &Path) -> Identity {
        match git(root, &["config", "user.email"]).await.is_ok_and(|e| !e.is_empty()) {
            true => Identity::Configured,
            false => Identity::Troupe,
        }
    }

    /// The `-c` arguments that go before a committing subcommand.
    pub(super) fn args(self) -> &'static [&'static str] {
        match self {
            Identity::Configured => &[],
            Identity::Troupe => &["-c", "user.name=troupe", "-c", "user.email=troupe@localhost"],
        }
    }
}

/// [`commit_staged`] under a known [`Identity`], without reading the new id.
pub(super) async fn commit_as(
    root: &Path,
    message: &str,
    only: Option<&[&str]>,
    identity: Identity,
) -> Result<(), String> {
    let mut args = identity.args().to_vec();
    args.extend(["commit", "-q", "-m", message]);
    match only {
        // `--only`: these paths, whatever else is staged (by the user, before the run).
        Some(paths) => {
            args.push("--only");
            git_paths(root, &args, paths).await?;
        }
        None => {
            git(root, &args).await?;
        }
    }
    Ok(())
}

/// Commit with `message` only the changed paths of `scope`, leaving every
/// other change (a sibling feature's files) as it is. `Ok(None)` when the
/// feature changed nothing.
pub async fn commit_scoped(root: &Path, message: &str, scope: &Scope) -> Result<Option<String>, String> {
    let _one_at_a_time = commit_lock().lock().await;
    let mut attempt = 1;
    loop {
        let changed = changed(root).await?;
        let mut paths = scope.select(&changed);
        paths.retain(|p| !scope.before.untouched(root, p));
        if paths.is_empty() {
            return Ok(None);
        }
        // `add -A` records deletions too; `commit --only` then takes exactly these paths.
        let committed = match git_paths(root, &["add", "-A"], &paths).await {
            Ok(()) => commit_staged(root, message, Some(&paths)).await,
            Err(e) => Err(e),
        };
        match committed {
            Ok(sha) => {
                // `commit --only` reads each path twice, for the commit and for
                // the index; a file a sibling appends to meanwhile (decisions.md)
                // can leave the index holding another version than the commit.
                // A staged difference makes every later merge in this tree
                // refuse ("your local changes would be overwritten"), so the
                // index takes the committed version of these paths back. Best
                // effort: the commit is made, and reporting it failed would be
                // false (a later merge names the staged file if this failed).
                let _ = git_paths(root, &["reset", "-q"], &paths).await;
                return Ok(Some(sha));
            }
            // Siblings change the tree meanwhile: a path listed a moment ago may be
            // gone (a pathspec that matches nothing fails). Look again.
            Err(_) if attempt < 3 => attempt += 1,
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope() -> Scope {
        let mut s = Scope::new("pay");
        s.own(&["src/pay.rs".into(), "src/pay/".into(), "tests/pay_*.rs".into()]);
        s.own(&["src/pay.rs".into()]);
        s
    }

    #[test]
    fn only_the_worktree_listing_race_is_run_again() {
        // Both forms git 2.47 printed when run in that moment (errno of the
        // empty read, or of a file removed between stat and read).
        for raced in [
            "fatal: failed to read .git/worktrees/-spare-1/commondir: Success",
            "fatal: failed to read /r/.git/worktrees/-spare-0/commondir: No such file or directory",
        ] {
            assert!(died_listing_a_worktree_being_added(raced), "{raced}");
        }
        for other in [
            "fatal: failed to read object 1234: No such file or directory",
            "fatal: '/r/wt' already exists",
            "fatal: a branch named 'troupe/f/G1' already exists",
        ] {
            assert!(!died_listing_a_worktree_being_added(other), "{other}");
        }
    }

    #[tokio::test]
    async fn worktrees_added_at_once_all_succeed() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        for args in [
            &["init", "-q"][..],
            &["-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "c"],
        ] {
            git(root, args).await.unwrap();
        }
        let adds = (0..8).map(|i| {
            let (root, path) = (root.to_path_buf(), root.join(format!("wt-{i}")));
            tokio::spawn(async move {
                git(&root, &["worktree", "add", "-q", "--detach", &path.to_string_lossy(), "HEAD"]).await
            })
        });
        let lists = (0..8).map(|_| {
            let root = root.to_path_buf();
            tokio::spawn(async move { git(&root, &["worktree", "list", "--porcelain"]).await.map(drop) })
        });
        let (adds, lists) = (adds.collect::<Vec<_>>(), lists.collect::<Vec<_>>());
        for t in adds {
            t.await.unwrap().unwrap();
        }
        for t in lists {
            t.await.unwrap().unwrap();
        }
        assert_eq!(git(root, &["worktree", "list"]).await.unwrap().lines().count(), 9);
    }

    #[test]
    fn a_scope_holds_its_spec_folder_handover_roadmap_and_owned_files() {
        let s = scope();
        for p in [
            ".troupe/specs/pay/spec.yaml",
            ".troupe/specs/pay/reviews/B1/verdict.cpf",
            ".troupe/handover/decisions.md",
            ".troupe/roadmap.yaml",
            "src/pay.rs",
            "src/pay/card.rs",
            "tests/pay_card.rs",
        ] {
            assert!(s.contains(p), "{p} is pay's");
        }
        for p in [
            ".troupe/specs/cart/design.md",
            ".troupe/specs/payments/spec.yaml",
            ".troupe/state/troupe.db",
            ".troupe/state/logs/builder-pay-g1-3.jsonl",
            ".troupe/config.toml",
            "src/cart.rs",
            "src/payment.rs",
            "tests/sub/pay_x.rs",
            "cart.txt",
            ".troupe/handover/.buffer.md.tmp-2140-2",
            ".troupe/specs/pay/.spec.yaml.tmp-1-1",
        ] {
            assert!(!s.contains(p), "{p} is not pay's");
        }
        assert_eq!(s.owned.len(), 3, "owned once");
    }

    #[test]
    fn select_keeps_only_the_features_paths_in_order() {
        let changed: Vec<String> =
            ["cart.txt", "src/pay.rs", ".troupe/specs/cart/spec.yaml", ".troupe/specs/pay/tasks.yaml"]
                .map(String::from)
                .to_vec();
        assert_eq!(scope().select(&changed), vec!["src/pay.rs", ".troupe/specs/pay/tasks.yaml"]);
        assert!(Scope::new("x").select(&changed).is_empty());
    }

    #[test]
    fn status_paths_are_made_relative_to_the_project() {
        let out = " M sub/a.rs\0?? sub/.troupe/specs/x/spec.yaml\0D  other/b.rs\0 D sub/gone.rs\0";
        assert_eq!(parse_status(out, "sub/"), vec!["a.rs", ".troupe/specs/x/spec.yaml", "gone.rs"]);
        assert_eq!(parse_status("?? a b.txt\0", ""), vec!["a b.txt"]);
    }

    fn repo() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let run = |args: &[&str]| {
            let o = std::process::Command::new("git").args(args).current_dir(d.path()).output().unwrap();
            assert!(o.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&o.stderr));
        };
        run(&["init", "-q"]);
        run(&["config", "user.email", "t@localhost"]);
        run(&["config", "user.name", "t"]);
        std::fs::write(d.path().join("old.txt"), "x").unwrap();
        std::fs::write(d.path().join(".gitignore"), ".troupe/state/\n").unwrap();
        run(&["add", "-A"]);
        run(&["commit", "-q", "-m", "start"]);
        d
    }

    fn files_of(root: &Path, rev: &str) -> Vec<String> {
        let o = std::process::Command::new("git")
            .args(["show", "--name-only", "--format=", rev])
            .current_dir(root)
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).lines().map(str::to_string).collect()
    }

    #[tokio::test]
    async fn a_scoped_commit_leaves_other_features_files_alone() {
        let d = repo();
        let root = d.path();
        for (p, text) in [
            (".troupe/specs/pay/design.md", "pay"),
            (".troupe/specs/cart/design.md", "cart"),
            ("src/pay.rs", "pay"),
            ("cart.txt", "cart"),
            (".troupe/state/x.db", "state"),
        ] {
            std::fs::create_dir_all(root.join(p).parent().unwrap()).unwrap();
            std::fs::write(root.join(p), text).unwrap();
        }
        std::fs::remove_file(root.join("old.txt")).unwrap();
        let mut s = Scope::new("pay");
        s.own(&["src/pay.rs".into(), "old.txt".into()]);
        let sha = commit_scoped(root, "Wave 1: pay design", &s).await.unwrap();
        assert!(sha.is_some());
        assert_eq!(files_of(root, "HEAD"), vec![".troupe/specs/pay/design.md", "old.txt", "src/pay.rs"]);
        // Nothing more of pay's: no commit.
        assert_eq!(commit_scoped(root, "again", &s).await.unwrap(), None);
    }

    #[tokio::test]
    async fn what_was_changed_before_the_run_stays_out_unless_a_teammate_changes_it() {
        let d = repo();
        let root = d.path();
        std::fs::write(root.join(".env.local"), "SECRET=1").unwrap();
        std::fs::write(root.join("old.txt"), "the user's edit").unwrap();
        std::fs::write(root.join("notes.txt"), "the user's").unwrap();
        std::fs::create_dir_all(root.join(".troupe/specs/pay")).unwrap();
        std::fs::write(root.join(".troupe/specs/pay/spec.yaml"), "created by troupe run").unwrap();
        let mut s = Scope::new("pay");
        s.own(&["old.txt".into(), "notes.txt".into(), ".env.local".into(), "src/pay.rs".into()]);
        s.keep_out(Baseline::capture(root).await.unwrap());
        assert_eq!(s.kept_out(), [".env.local", "notes.txt", "old.txt"], "troupe's own files are never the user's");
        // A teammate changes one of them and writes its own file.
        std::fs::write(root.join("notes.txt"), "changed by a teammate").unwrap();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::write(root.join("src/pay.rs"), "pay").unwrap();
        commit_scoped(root, "pay", &s).await.unwrap().unwrap();
        assert_eq!(files_of(root, "HEAD"), vec![".troupe/specs/pay/spec.yaml", "notes.txt", "src/pay.rs"]);
    }

    #[tokio::test]
    async fn a_project_in_a_folder_of_the_repository_commits_its_own_paths() {
        let d = repo();
        let root = d.path().join("app");
        std::fs::create_dir_all(root.join(".troupe/specs/pay")).unwrap();
        std::fs::write(root.join(".troupe/specs/pay/design.md"), "pay").unwrap();
        std::fs::write(root.join("pay.txt"), "pay").unwrap();
        std::fs::write(root.join("cart.txt"), "cart").unwrap();
        std::fs::write(d.path().join("pay.txt"), "outside the project").unwrap();
        let mut s = Scope::new("pay");
        s.own(&["pay.txt".into()]);
        commit_scoped(&root, "Wave 1: pay design", &s).await.unwrap().unwrap();
        assert_eq!(files_of(d.path(), "HEAD"), vec!["app/.troupe/specs/pay/design.md", "app/pay.txt"]);
    }

    #[tokio::test]
    async fn commits_of_parallel_runs_go_one_at_a_time() {
        let d = repo();
        let root = d.path().to_path_buf();
        let mut runs = tokio::task::JoinSet::new();
        for f in ["a", "b", "c", "d"] {
            std::fs::write(root.join(format!("{f}.txt")), f).unwrap();
            let root = root.clone();
            runs.spawn(async move {
                let mut s = Scope::new(f);
                s.own(&[format!("{f}.txt")]);
                commit_scoped(&root, &format!("Wave 1: {f}"), &s).await
            });
        }
        while let Some(r) = runs.join_next().await {
            assert!(r.unwrap().unwrap().is_some(), "no index.lock collision");
        }
        for n in 0..4 {
            assert_eq!(files_of(&root, &format!("HEAD~{n}")).len(), 1, "one feature's file per commit");
        }
    }
}
