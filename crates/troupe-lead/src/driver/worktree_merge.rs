//! A group's merge commit with no git process of its own: written by the
//! run's one `git hash-object -t commit -w --stdin-paths`, the group's
//! branch read by its one `git cat-file --batch-check` ([`Served`], killed
//! with the run). Merges are one at a time on the Lead's path (wave order),
//! 200 of them in a 200-group plan, and a process start is most of a
//! plumbing command's cost. (The merged tree stays a one-shot `git
//! merge-tree --write-tree`: `merge-tree --stdin` holds its answers in its
//! output buffer until its input ends, so it cannot serve one merge at a
//! time.)
//!
//! Each answer is what the one-shot command would give, or nothing: then
//! the caller runs that command (`commit-tree`), which fails, or not, as it
//! always did.
//!
//! The commit object is the one `git commit-tree <tree> -p <ours> -p
//! <theirs> -m <message>` writes: `tree`, `parent` lines, `author` and
//! `committer` (the identities `git var` gives, dated now, or at the
//! `GIT_AUTHOR_DATE` / `GIT_COMMITTER_DATE` the environment fixes), a blank
//! line and the message ending in a newline. A repository that asks for
//! another message encoding (`i18n.commitEncoding`) keeps `commit-tree`:
//! that adds an `encoding` header.

use std::path::Path;

use super::super::git::{Identity, Served, git};

/// The run's served merge processes, each started when first needed.
#[derive(Debug, Default)]
pub(crate) struct Merger {
    /// `cat-file --batch-check=%(objectname)`: a branch's commit, and the
    /// merges' abbreviated ids (`Worktrees::short`).
    names: Option<Served>,
    /// `hash-object -t commit -w --stdin-paths`: the merge commits.
    objects: Option<Served>,
    /// Who commits (`None`: not read yet; `Some(None)`: `commit-tree` makes
    /// the run's commits).
    idents: Option<Option<Idents>>,
}

/// The author and committer a commit of this run carries.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Idents {
    author: Ident,
    committer: Ident,
}

/// One identity as `git var` gave it: `Name <email>`, and the whole line
/// with its date when the environment fixes the date.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Ident {
    who: String,
    fixed: Option<String>,
}

impl Ident {
    /// `GIT_*_IDENT`'s value (`Name <email> <seconds> <offset>`); `fixed`
    /// when the environment sets the date.
    fn parse(line: &str, fixed: bool) -> Option<Ident> {
        let (rest, _offset) = line.rsplit_once(' ')?;
        let (who, _seconds) = rest.rsplit_once(' ')?;
        who.ends_with('>').then(|| Ident { who: who.to_string(), fixed: fixed.then(|| line.to_string()) })
    }

    /// The identity as a commit's `author`/`committer` line carries it, at `now`.
    fn dated(&self, now: &str) -> String {
        match &self.fixed {
            Some(line) => line.clone(),
            None => format!("{} {now}", self.who),
        }
    }
}

impl Merger {
    /// The commit `name` (a full ref name) points at in the repository of `root`.
    pub(crate) async fn resolve(&mut self, root: &Path, name: &str) -> Option<String> {
        self.look_up(root, name).await.filter(|said| is_id(said))
    }

    /// What the run's `cat-file --batch-check=%(objectname)` says of `name`
    /// (an object's id, or `<name> missing` / `<name> ambiguous`); `None`
    /// when it cannot answer (then dropped, and started again when next asked).
    pub(crate) async fn look_up(&mut self, root: &Path, name: &str) -> Option<String> {
        if self.names.is_none() {
            self.names = Served::start(root, &["cat-file", "--batch-check=%(objectname)"]).ok();
        }
        match self.names.as_mut()?.ask(&format!("{name}\n"), 1).await {
            Ok(said) if said.len() == 1 => said.into_iter().next(),
            _ => {
                self.names = None;
                None
            }
        }
    }

    /// The merge commit of `tree` with `parents` and `message`, written as
    /// `commit-tree` writes it; `scratch` is a file of the run's state it may
    /// write the object's text to. `None` when it cannot be written here.
    pub(crate) async fn commit(
        &mut self,
        root: &Path,
        scratch: &Path,
        identity: Identity,
        tree: &str,
        parents: &[&str],
        message: &str,
    ) -> Option<String> {
        if self.idents.is_none() {
            self.idents = Some(idents(root, identity).await);
        }
        let idents = self.idents.clone()??;
        let now = now();
        let text = commit_text(tree, parents, &idents.author.dated(&now), &idents.committer.dated(&now), message);
        std::fs::write(scratch, text).ok()?;
        if self.objects.is_none() {
            let args = ["hash-object", "-t", "commit", "-w", "--no-filters", "--stdin-paths"];
            self.objects = Served::start(root, &args).ok();
        }
        let written = self.objects.as_mut()?.ask(&format!("{}\n", scratch.display()), 1).await;
        let _ = std::fs::remove_file(scratch);
        match written {
            Ok(said) if said.len() == 1 && is_id(&said[0]) => said.into_iter().next(),
            _ => {
                self.objects = None;
                None
            }
        }
    }

    /// The served processes' ids (tests check that they end with the run).
    #[cfg(test)]
    pub(crate) fn pids(&self) -> Vec<u32> {
        [self.names.as_ref(), self.objects.as_ref()].into_iter().flatten().filter_map(Served::pid).collect()
    }
}

/// Whether `s` is a full object id (SHA-1 or SHA-256).
fn is_id(s: &str) -> bool {
    (s.len() == 40 || s.len() == 64) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The identities of commits made under `identity` in `root`, from one `git
/// var -l`; `None` when git cannot say or the repository wants a message
/// encoding other than UTF-8.
async fn idents(root: &Path, identity: Identity) -> Option<Idents> {
    let mut args = identity.args().to_vec();
    args.extend(["var", "-l"]);
    let vars = git(root, &args).await.ok()?;
    let value = |key: &str| vars.lines().rev().find_map(|l| l.strip_prefix(key)?.strip_prefix('='));
    if value("i18n.commitencoding").is_some_and(|e| !e.eq_ignore_ascii_case("utf-8") && !e.eq_ignore_ascii_case("utf8"))
    {
        return None;
    }
    let fixed = |var: &str| std::env::var_os(var).is_some();
    Some(Idents {
        author: Ident::parse(value("GIT_AUTHOR_IDENT")?, fixed("GIT_AUTHOR_DATE"))?,
        committer: Ident::parse(value("GIT_COMMITTER_IDENT")?, fixed("GIT_COMMITTER_DATE"))?,
    })
}

/// Now as git dates a commit: seconds since the epoch and the local offset.
fn now() -> String {
    let now = jiff::Zoned::now();
    let offset = now.offset().seconds();
    let (sign, abs) = if offset < 0 { ('-', -offset) } else { ('+', offset) };
    format!("{} {sign}{:02}{:02}", now.timestamp().as_second(), abs / 3600, abs % 3600 / 60)
}

/// A commit object's text, as `commit-tree -m <message>` writes it.
fn commit_text(tree: &str, parents: &[&str], author: &str, committer: &str, message: &str) -> String {
    let mut text = format!("tree {tree}\n");
    for p in parents {
        text.push_str(&format!("parent {p}\n"));
    }
    text.push_str(&format!("author {author}\ncommitter {committer}\n\n{message}"));
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(root: &Path, env: &[(&str, &str)], args: &[&str]) -> String {
        super::super::test_git(root, env, args)
    }

    /// A repository where `ours` and `theirs` branched from `start`:
    /// theirs adds b.txt, ours adds c.txt, and `clash` changes a.txt on both.
    fn repo() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        run(r, &[], &["init", "-q", "-b", "main"]);
        std::fs::write(r.join("a.txt"), "a\n").unwrap();
        run(r, &[], &["add", "-A"]);
        run(r, &[], &["commit", "-q", "-m", "start"]);
        for (branch, file) in [("theirs", "b.txt"), ("clash", "a.txt"), ("main", "c.txt")] {
            run(r, &[], &["checkout", "-q", "-B", branch, "main"]);
            std::fs::write(r.join(file), branch).unwrap();
            run(r, &[], &["add", "-A"]);
            run(r, &[], &["commit", "-q", "-m", branch]);
        }
        d
    }

    #[tokio::test]
    async fn a_branch_is_read_by_the_served_cat_file() {
        let d = repo();
        let r = d.path();
        let mut m = Merger::default();
        assert_eq!(m.resolve(r, "refs/heads/theirs").await.unwrap(), run(r, &[], &["rev-parse", "theirs"]));
        assert_eq!(m.resolve(r, "refs/heads/none").await, None, "no such branch");
        assert_eq!(m.resolve(r, "refs/heads/clash").await.unwrap(), run(r, &[], &["rev-parse", "clash"]));
    }

    #[tokio::test]
    async fn the_merge_commit_is_the_one_commit_tree_writes() {
        let d = repo();
        let r = d.path();
        let (main, theirs) = (run(r, &[], &["rev-parse", "main"]), run(r, &[], &["rev-parse", "theirs"]));
        let tree = run(r, &[], &["merge-tree", "--write-tree", &main, &theirs]);
        let dates = [("GIT_AUTHOR_DATE", "1700000000 +0130"), ("GIT_COMMITTER_DATE", "1700000100 -0500")];
        for message in ["merge group G1\n\nTroupe-Merge: f/G1@1", "one line\n", "two\nlines"] {
            let args = ["commit-tree", &tree, "-p", &main, "-p", &theirs, "-m", message];
            let expected = run(r, &dates, &args);
            let mut m = Merger {
                idents: Some(Some(Idents {
                    author: Ident::parse("t <t@localhost> 1700000000 +0130", true).unwrap(),
                    committer: Ident::parse("t <t@localhost> 1700000100 -0500", true).unwrap(),
                })),
                ..Merger::default()
            };
            let scratch = r.join(".git").join("scratch");
            let made = m.commit(r, &scratch, Identity::Configured, &tree, &[&main, &theirs], message).await;
            assert_eq!(made.as_deref(), Some(expected.as_str()), "{message:?}");
            assert!(!scratch.exists());
        }
    }

    #[tokio::test]
    async fn a_commit_dated_now_carries_the_identity_git_gives() {
        let d = repo();
        let r = d.path();
        run(r, &[], &["config", "user.name", "Someone Else"]);
        run(r, &[], &["config", "user.email", "se@localhost"]);
        let tree = run(r, &[], &["rev-parse", "main^{tree}"]);
        let main = run(r, &[], &["rev-parse", "main"]);
        let mut m = Merger::default();
        let made = m.commit(r, &r.join(".git/scratch"), Identity::Configured, &tree, &[&main], "m").await.unwrap();
        let show = |f: &str| run(r, &[], &["show", "-s", &format!("--format={f}"), &made]);
        assert_eq!(
            show("%an <%ae>|%cn <%ce>|%s|%P"),
            format!("Someone Else <se@localhost>|Someone Else <se@localhost>|m|{main}")
        );
        let age = jiff::Timestamp::now().as_second() - show("%ct").parse::<i64>().unwrap();
        assert!((0..60).contains(&age), "dated now: {age} s ago");
        // The offset is the local one, as git writes it.
        let git_offset = run(r, &[], &["var", "GIT_COMMITTER_IDENT"]).rsplit(' ').next().unwrap().to_string();
        assert_eq!(show("%cd").rsplit(' ').next().unwrap(), git_offset);
        // A repository that wants another encoding keeps commit-tree.
        run(r, &[], &["config", "i18n.commitEncoding", "ISO-8859-1"]);
        assert_eq!(idents(r, Identity::Configured).await, None);
    }
}
