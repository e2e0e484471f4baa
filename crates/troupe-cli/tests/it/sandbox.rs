//! The kernel's guarantee: a sandboxed teammate runs a generated corpus of
//! shell writes for real, and nothing outside its ownership changes; troupe's
//! own git never runs what is planted in `.git/`; without Landlock, troupe
//! refuses to start teammates unless told otherwise.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::support::{TestProject, json};

fn git(root: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git").args(args).current_dir(root).output().unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The marker the corpus writes, built at run time so that no log of the
/// command text contains it.
const MARK: &str = "PWNED";
const MARK_EXPR: &str = "$(printf 'P%sD' WNE)";

/// Files the Builder does not own, relative to the root (present ones and
/// ones that must stay absent); `../outside.txt` is beside the project.
const VICTIMS: &[&str] = &[
    "victim.txt",
    "src/other.rs",
    "src/new.rs",
    "newfile.txt",
    ".claude/settings.json",
    ".claude/settings.local.json",
    ".gemini/settings.json",
    ".git/config",
    ".git/hooks/pre-commit",
    ".git/HEAD",
    ".troupe/config.toml",
    ".troupe/steering/tech.md",
    ".troupe/specs/login/spec.yaml",
    "../outside.txt",
];

pub(crate) const OWNED: &str = "src/mine.rs";

/// Shell forms that write `{T}` (a path expression) with the marker `{M}`.
const TEMPLATES: &[&str] = &[
    "echo {M} > {T}",
    "echo {M} >> {T}",
    "echo {M} >&{T}",
    "echo {M} 1<>{T}",
    "echo {M} &>{T}",
    "echo {M} | tee {T} >/dev/null",
    "echo {M} | tee -a {T} >/dev/null",
    "echo {M} | dd of={T} status=none",
    "sed -i 's/^/{M}/' {T}",
    "sed -Ei 's/^/{M}/' {T}",
    "perl -pi -e 's/^/{M}/' {T}",
    "perl -lpi -e 's/^/{M}/' {T}",
    "cp \"$TMPDIR/src\" {T}",
    "cp -t \"$(dirname {T})\" \"$TMPDIR/src\"",
    "mv \"$TMPDIR/src\" {T}",
    "ln -sf \"$TMPDIR/src\" {T}",
    "install -m644 \"$TMPDIR/src\" {T}",
    "truncate -s0 {T}",
    "rm -f {T}",
    "nice sh -c 'echo {M} > {T}'",
    "timeout 5 sh -c 'echo {M} > {T}'",
    "find . -maxdepth 0 -exec sh -c 'echo {M} > {T}' \\;",
    "echo {T} | xargs -I{} sh -c 'echo {M} > {}'",
    "{PY} -c \"import sys; open(sys.argv[1],'a').write('{M}')\" {T}",
    ": $((1<<2)); echo {M} > {T}",
    "cat > {T} <<EOF\n{M}\nEOF",
    "cat > {T} <<'EOF'\nPW\nEOF\necho {M} >> {T}",
    "tar -cf {T} -C \"$TMPDIR\" src",
    "exec 3>{T}; echo {M} >&3; exec 3>&-",
];

/// `template` with the target `target` and the marker expression `mark`.
fn expand(template: &str, target: &str, mark: &str) -> String {
    template.replace("{T}", target).replace("{M}", mark).replace("{PY}", python())
}

/// The Python interpreter itself, started without its site packages (`-I
/// -S`): a version manager's shim in front of it (pyenv's costs about 0.15 s
/// of CPU per start) and site initialisation (0.07 s for pyenv's 3.11) were
/// most of the corpus's time, and the corpus is about the write, not about
/// how `python3` is found or set up.
fn python() -> &'static str {
    static PYTHON: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PYTHON.get_or_init(|| {
        let out = std::process::Command::new("python3")
            .args(["-c", "import sys; print(sys.executable)"])
            .output()
            .expect("python3 (the corpus writes with it)");
        let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let path = if out.status.success() && !path.is_empty() { path } else { "python3".to_string() };
        format!("{path} -I -S")
    })
}

/// Ways to name the target `rel` (relative to the root).
fn tricks(rel: &str, root: &Path) -> Vec<String> {
    let (dir, base) = match rel.rsplit_once('/') {
        Some((d, b)) => (d.to_string(), b.to_string()),
        None => (".".to_string(), rel.to_string()),
    };
    let abs = root.join(rel).display().to_string();
    vec![
        rel.to_string(),
        format!("./{rel}"),
        format!("'{abs}'"),
        format!("src/../{rel}"),
        format!("\"{dir}//{base}\""),
        format!("$(echo {rel})"),
        format!("\"$L/{base}\""),
        format!("${{PWD}}/{rel}"),
        format!("'{dir}'/./'{base}'"),
        format!("$(printf %s {rel})"),
        format!("{dir}/../{dir}/{base}"),
        format!("\"$PWD/{dir}/{base}\""),
    ]
    .into_iter()
    .map(|t| t.replace("'./'", "'.'"))
    .collect()
}

/// The corpus as a few bash scripts (one per target), every command in a
/// subshell of its own with a fresh source file, and its count; `step` keeps
/// every `step`-th command of each target (1: all of them).
fn corpus(root: &Path, dir: &Path, step: usize) -> (Vec<PathBuf>, usize) {
    let mut scripts = Vec::new();
    let mut count = 0;
    for (i, target) in VICTIMS.iter().chain([&OWNED]).enumerate() {
        let tdir = match target.rsplit_once('/') {
            Some((d, _)) => root.join(d),
            None => root.to_path_buf(),
        };
        let mut text = String::from("#!/bin/bash\n");
        // The C1 chain of issue 13, verbatim: hooks off for the next Claude teammate.
        text.push_str("echo '{\"disableAllHooks\": true}' >&.claude/settings.local.json && git add -f .claude/settings.local.json\n");
        text.push_str(&format!("L=\"$TMPDIR/link{i}\"; ln -sfn '{}' \"$L\"\n", tdir.display()));
        let forms = tricks(target, root).into_iter().flat_map(|t| TEMPLATES.iter().map(move |m| (t.clone(), m)));
        for (t, template) in forms.step_by(step) {
            let cmd = expand(template, &t, MARK_EXPR);
            text.push_str(&format!("printf 'P%sD\\n' WNE > \"$TMPDIR/src\"\n( {cmd}\n) </dev/null >/dev/null 2>&1\n"));
            count += 1;
        }
        let path = dir.join(format!("corpus-{i}.sh"));
        std::fs::write(&path, text).unwrap();
        scripts.push(path);
    }
    (scripts, count)
}

/// Every file under `dir` with its bytes (symlinks as their target), skipping `skip`.
fn files(dir: &Path, skip: &[PathBuf], out: &mut BTreeMap<PathBuf, Vec<u8>>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        if skip.iter().any(|s| p.starts_with(s)) {
            continue;
        }
        let meta = std::fs::symlink_metadata(&p).unwrap();
        if meta.is_symlink() {
            out.insert(p.clone(), std::fs::read_link(&p).unwrap().into_os_string().into_encoded_bytes());
        } else if meta.is_dir() {
            files(&p, skip, out);
        } else {
            out.insert(p.clone(), std::fs::read(&p).unwrap());
        }
    }
}

fn project(builder_actions: &str) -> (TestProject, tempfile::TempDir) {
    project_with(builder_actions, true)
}

fn project_with(builder_actions: &str, final_write: bool) -> (TestProject, tempfile::TempDir) {
    let p = TestProject::new();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(
        p.path(".troupe/steering/tech.md"),
        "# Tech\n\n## Common Commands\n\n- Test: `true`\n- Lint: `true`\n",
    )
    .unwrap();
    std::fs::create_dir_all(p.path("src")).unwrap();
    std::fs::write(p.path("src/mine.rs"), "mine\n").unwrap();
    std::fs::write(p.path("src/other.rs"), "other\n").unwrap();
    std::fs::write(p.path("victim.txt"), "victim\n").unwrap();
    std::fs::create_dir_all(p.path(".claude")).unwrap();
    std::fs::write(p.path(".claude/settings.json"), "{}\n").unwrap();
    std::fs::create_dir_all(p.path(".gemini")).unwrap();
    std::fs::write(p.path(".gemini/settings.json"), "{}\n").unwrap();
    let write =
        if final_write { format!("\n      - write: {{path: {OWNED}, content: \"built\\n\"}}") } else { String::new() };
    let script = format!(
        r##"agents:
  architect:
    - - write: {{path: ".troupe/specs/{{feature}}/design.md", content: "# Design\n"}}
      - write: {{path: ".troupe/specs/{{feature}}/research.md", content: "# Research\n"}}
      - report: "ARCHITECT_COMPLETE\nSummary: a design"
  task-generator:
    - - write:
          path: ".troupe/specs/{{feature}}/tasks.yaml"
          content: |
            tasks:
              - {{id: "1", summary: A, status: pending}}
            execution:
              - wave: 1
                groups:
                  - {{id: G1, tasks: ["1"], files: [{OWNED}]}}
      - report: "TASKGEN_COMPLETE\nTasks: 1\nWaves: 1"
  builder/G1:
    - - say: "start"{builder_actions}{write}
      - complete: "1"
      - report: "BUILDER_COMPLETE\nFeature: login\nStatus: done\nTasks completed: 1\nFiles: {OWNED}\nTests: ok"
"##
    );
    std::fs::write(p.path(".troupe/scripted.yaml"), script).unwrap();
    git(p.root(), &["init", "-q"]);
    git(p.root(), &["add", "-A"]);
    git(p.root(), &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "start"]);
    // Beside the project, so `../outside.txt` is a real file outside it.
    let _ = outside;
    (p, tempfile::tempdir().unwrap())
}

fn run(p: &TestProject) -> std::process::Output {
    p.troupe().args(["--json", "run", "login", "users log in", "--engine", "scripted", "--no-review"]).output().unwrap()
}

/// A project beside `outside.txt` (so `../outside.txt` is a real file outside
/// it), the corpus's scripts, and every file before the run.
pub(crate) struct CorpusRun {
    pub parent: tempfile::TempDir,
    pub root: PathBuf,
    pub scripts: Vec<PathBuf>,
    pub count: usize,
    _scripts_dir: tempfile::TempDir,
    _project: TestProject,
    lead_writes: Vec<PathBuf>,
    before: BTreeMap<PathBuf, Vec<u8>>,
}

impl CorpusRun {
    /// The project with its scripted Builder (which runs every script when
    /// `scripted`); `config` replaces `.troupe/config.toml` when given; the
    /// corpus keeps every `step`-th command.
    pub fn new(scripted: bool, config: Option<&str>, step: usize) -> CorpusRun {
        let scripts_dir = tempfile::tempdir().unwrap();
        let parent = tempfile::tempdir().unwrap();
        let (p, _keep) = project("");
        let root = parent.path().join("proj");
        std::fs::rename(p.root(), &root).unwrap();
        std::fs::write(parent.path().join("outside.txt"), "outside\n").unwrap();
        let (scripts, count) = corpus(&root, scripts_dir.path(), step);
        assert!(count * step >= 5_000, "the corpus has {count} commands");
        if scripted {
            let runs: String = scripts.iter().map(|s| format!("\n      - run: \"bash {}\"", s.display())).collect();
            let text = std::fs::read_to_string(root.join(".troupe/scripted.yaml")).unwrap();
            std::fs::write(
                root.join(".troupe/scripted.yaml"),
                text.replace("    - - say: \"start\"\n", &format!("    - - say: \"start\"{runs}\n")),
            )
            .unwrap();
        }
        if let Some(config) = config {
            std::fs::write(root.join(".troupe/config.toml"), config).unwrap();
            git(&root, &["add", "-A"]);
            git(&root, &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "config"]);
        }
        // What the Lead itself writes during the run (spec files, handover notes,
        // state); they are still searched for the marker below.
        let lead_writes = vec![root.join(".troupe/state"), root.join(".troupe/specs"), root.join(".troupe/handover")];
        let mut before = BTreeMap::new();
        files(parent.path(), &Self::skip(&root, &lead_writes), &mut before);
        CorpusRun { parent, root, scripts, count, _scripts_dir: scripts_dir, _project: p, lead_writes, before }
    }

    fn skip(root: &Path, lead_writes: &[PathBuf]) -> Vec<PathBuf> {
        [lead_writes, &[root.join(".git/objects")]].concat()
    }

    /// `troupe run` of the feature, in the project; `prepare` adds arguments
    /// and environment.
    pub fn run(&self, prepare: impl FnOnce(&mut assert_cmd::Command)) -> serde_json::Value {
        let mut cmd = crate::support::troupe();
        cmd.arg("-C").arg(&self.root);
        cmd.args(["--json", "run", "login", "users log in", "--no-review", "--no-commit"]);
        prepare(&mut cmd);
        let out = cmd.timeout(std::time::Duration::from_secs(600)).output().unwrap();
        assert!(
            out.status.success(),
            "stderr:\n{}\nstdout:\n{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        let report = json(&out);
        assert_eq!(report["outcome"], "completed", "{report}");
        report
    }

    /// Nothing outside the Builder's ownership changed, and the marker is
    /// nowhere the Lead wrote.
    pub fn assert_nothing_broken(&self) {
        let root = &self.root;
        let mut after = BTreeMap::new();
        files(self.parent.path(), &Self::skip(root, &self.lead_writes), &mut after);
        let owned = root.join(OWNED);
        let mut broken: Vec<String> = Vec::new();
        for (path, bytes) in &after {
            if *path == owned {
                continue;
            }
            if self.before.get(path) != Some(bytes) {
                // git's own bookkeeping is written by the Lead's git, not the teammate.
                let git_own = path.starts_with(root.join(".git")) && !String::from_utf8_lossy(bytes).contains(MARK);
                if !git_own {
                    broken.push(format!("{} changed or appeared", path.display()));
                }
            }
        }
        for path in self.before.keys().filter(|p| !after.contains_key(*p)) {
            broken.push(format!("{} was removed", path.display()));
        }
        let mut lead_files = BTreeMap::new();
        for dir in &self.lead_writes {
            files(dir, &[root.join(".troupe/state/logs")], &mut lead_files);
        }
        for (path, bytes) in &lead_files {
            if String::from_utf8_lossy(bytes).contains(MARK) && !path.to_string_lossy().contains("troupe.db") {
                broken.push(format!("{} holds the marker", path.display()));
            }
        }
        assert!(
            broken.is_empty(),
            "{} of {} commands broke ownership:\n{}",
            broken.len(),
            self.count,
            broken.join("\n")
        );
    }
}

#[test]
fn a_sandboxed_builder_running_the_corpus_changes_nothing_it_does_not_own() {
    let c = CorpusRun::new(true, None, 1);
    c.run(|cmd| {
        cmd.args(["--engine", "scripted"]);
    });
    c.assert_nothing_broken();
    // The same commands did run: the Builder's log is there.
    let logs = std::fs::read_dir(c.root.join(".troupe/state/logs")).unwrap().count();
    assert!(logs > 0);
}

#[test]
fn the_corpus_writes_for_real_when_the_target_is_owned() {
    // The control: the same shell forms on the file the Builder owns do
    // change it, so the corpus test fails if the sandbox stops refusing.
    // (`sed -i` and `perl -i` replace the file through a new one in its
    // folder, which a file-level grant refuses: an owned file is edited in place.)
    let scripts_dir = tempfile::tempdir().unwrap();
    let script = scripts_dir.path().join("owned.sh");
    let mut text = String::from("#!/bin/bash\nn=0\n");
    let writes: Vec<&str> = TEMPLATES
        .iter()
        .copied()
        .filter(|t| t.contains("{M}") && !t.contains("sed -") && !t.contains("perl -"))
        .collect();
    for template in &writes {
        let cmd = expand(template, OWNED, MARK_EXPR);
        text.push_str(&format!(
            "printf 'mine\\n' > {OWNED}\n( {cmd}\n) </dev/null >/dev/null 2>&1\ngrep -q {MARK} {OWNED} && n=$((n+1))\n"
        ));
    }
    text.push_str(&format!("echo \"hits=$n\" > {OWNED}\n"));
    std::fs::write(&script, text).unwrap();
    let (p, _keep) = project_with(&format!("\n      - run: \"bash {}\"", script.display()), false);
    let out = run(&p);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let hits = std::fs::read_to_string(p.path(OWNED)).unwrap();
    assert_eq!(hits.trim(), format!("hits={}", writes.len()), "every shell form writes an owned file");
}

#[test]
fn planted_fsmonitor_and_pre_commit_hook_never_run_during_a_troupe_run() {
    let (p, _keep) = project("");
    let witness = tempfile::tempdir().unwrap();
    let ran = witness.path().join("ran");
    let plant = format!("sh -c 'echo planted >> {}'", ran.display());
    git(p.root(), &["config", "core.fsmonitor", &plant]);
    let hook = p.path(".git/hooks/pre-commit");
    std::fs::write(&hook, format!("#!/bin/sh\necho hook >> {}\n", ran.display())).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = run(&p);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(json(&out)["outcome"], "completed");
    assert!(git(p.root(), &["-c", "core.fsmonitor=false", "log", "--format=%s"]).lines().count() >= 3);
    assert!(!ran.exists(), "a planted command ran: {:?}", std::fs::read_to_string(&ran));
}

#[test]
fn without_landlock_teammates_do_not_start_unless_the_config_allows_it() {
    let (p, _keep) = project("");
    let before = p.snapshot();
    let out = p
        .troupe()
        .env("TROUPE_SANDBOX_ABI", "2")
        .args(["run", "login", "users log in", "--engine", "scripted", "--no-review", "--no-commit"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("Landlock ABI 2") && err.contains("[sandbox] required = false"), "{err}");
    let _ = before;

    let doctor = p.troupe().env("TROUPE_SANDBOX_ABI", "0").args(["--json", "doctor", "--no-run"]).output().unwrap();
    let report = String::from_utf8_lossy(&doctor.stdout);
    assert!(report.contains("no Landlock"), "{report}");
    let doctor = p.troupe().args(["--json", "doctor", "--no-run"]).output().unwrap();
    assert!(String::from_utf8_lossy(&doctor.stdout).contains("Landlock ABI"));

    let agent = p
        .troupe()
        .env("TROUPE_SANDBOX_ABI", "0")
        .args(["agent", "run", "--engine", "scripted", "--role", "builder", "hello"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&agent.stderr);
    assert!(!agent.status.success() && err.contains("cannot sandbox"), "{err}");

    let config = std::fs::read_to_string(p.path(".troupe/config.toml")).unwrap_or_default();
    std::fs::write(p.path(".troupe/config.toml"), format!("{config}\n[sandbox]\nrequired = false\n")).unwrap();
    git(p.root(), &["add", "-A"]);
    git(p.root(), &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "unsandboxed"]);
    let out = run(&p);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// A teammate whose shell command runs while the Lead writes beside it: the
/// post-run check of its hooks must not take the Lead's file for its own
/// (nor revert it) when the sandbox would not have let it write there, and
/// must, as before, when nothing refused it (no sandbox). The agent is a
/// script that does what an engine does around one shell command: its
/// PreToolUse hook, the command (waiting for the Lead's write), its
/// PostToolUse hook.
#[test]
fn the_post_run_check_does_not_blame_a_sandboxed_teammate_for_the_leads_writes() {
    let lead_writes_beside = |sandboxed: bool| {
        let (p, _keep) = project("");
        std::fs::create_dir_all(p.path("notes")).unwrap();
        std::fs::write(p.path("notes/lead.md"), "one\n").unwrap();
        let config = std::fs::read_to_string(p.path(".troupe/config.toml")).unwrap_or_default();
        let sandbox = if sandboxed { "" } else { "\n[sandbox]\nrequired = false\n" };
        let agent = p.path("agent.sh");
        let hook = |event: &str, extra: &str| {
            format!(
                r#"printf '%s' "{{\"session_id\":\"s1\",\"cwd\":\"$PWD\",\"hook_event_name\":\"{event}\",\"tool_name\":\"Bash\",\"tool_input\":{{\"command\":\"cat notes/lead.md\"}},\"tool_use_id\":\"t1\"{extra}}}" | "$TROUPE_BIN" hook claude {event}"#
            )
        };
        let script = format!(
            "#!/bin/sh\n{pre} >/dev/null\ntouch \"$TMPDIR/ready\"\ni=0\nwhile ! grep -q two notes/lead.md && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done\n{post} >&2\necho '{{\"type\":\"result\",\"subtype\":\"success\",\"result\":\"done\",\"is_error\":false}}'\n",
            pre = hook("PreToolUse", ""),
            post = hook("PostToolUse", r#",\"tool_response\":{\"stdout\":\"one\",\"stderr\":\"\"}"#),
        );
        std::fs::write(&agent, script).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(
            p.path(".troupe/config.toml"),
            format!(
                "{}{sandbox}\n[engines.custom.sh]\ncommand = \"{}\"\nformat = \"claude\"\n",
                config.replacen("[gates]\n", "[gates]\nrevert_violations = true\n", 1),
                agent.display()
            ),
        )
        .unwrap();
        git(p.root(), &["add", "-A"]);
        git(p.root(), &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "agent"]);
        let tmp = tempfile::tempdir().unwrap();
        let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("troupe"));
        cmd.current_dir(p.root())
            .env("TMPDIR", tmp.path())
            .args(["agent", "run", "--role", "builder", "--engine", "sh", "--id", "b1", "go"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        if !sandboxed {
            cmd.env("TROUPE_SANDBOX_ABI", "0");
        }
        let child = cmd.spawn().unwrap();
        // The Lead's write, once the snapshot before the command is taken.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !std::fs::read_dir(tmp.path())
            .unwrap()
            .flatten()
            .any(|d| d.path().join("ready").exists() || d.file_name() == "ready")
        {
            assert!(std::time::Instant::now() < deadline, "the agent never ran its PreToolUse hook");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        std::fs::write(p.path("notes/lead.md"), "two\n").unwrap();
        let out = child.wait_with_output().unwrap();
        let lead = std::fs::read_to_string(p.path("notes/lead.md")).unwrap();
        let denials = p.troupe().args(["--json", "audit", "denials", "--agent", "b1"]).output().unwrap();
        (out, lead, String::from_utf8_lossy(&denials.stdout).into_owned())
    };
    let (out, lead, denials) = lead_writes_beside(true);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(lead, "two\n", "the Lead's write stays: {denials}");
    assert!(!denials.contains("notes/lead.md"), "{denials}");
    // The control: nothing refused the teammate, so the change is its own.
    let (_, lead, denials) = lead_writes_beside(false);
    assert_eq!(lead, "one\n", "reverted: {denials}");
    assert!(denials.contains("notes/lead.md"), "{denials}");
}

/// Where unprivileged user namespaces are switched off (some distributions
/// do), spec.yaml cannot be bound read-only for a teammate given its spec
/// folder: such a teammate does not start, and the error and `troupe doctor`
/// say why and how to allow them.
#[test]
fn without_user_namespaces_a_spec_writer_does_not_start_and_doctor_says_why() {
    let (p, _keep) = project("");
    let out = p
        .troupe()
        .env("TROUPE_SANDBOX_USERNS", "0")
        .args(["run", "login", "users log in", "--engine", "scripted", "--no-review", "--no-commit"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("spec.yaml read-only") && err.contains("user namespaces"), "{err}");
    assert!(err.contains("apparmor_restrict_unprivileged_userns"), "{err}");
    let doctor = p.troupe().env("TROUPE_SANDBOX_USERNS", "0").args(["--json", "doctor", "--no-run"]).output().unwrap();
    let report = String::from_utf8_lossy(&doctor.stdout);
    assert!(report.contains("no user namespaces"), "{report}");
    let doctor = p.troupe().args(["--json", "doctor", "--no-run"]).output().unwrap();
    assert!(!String::from_utf8_lossy(&doctor.stdout).contains("no user namespaces"));
}
