use super::*;

/// The writes of `command`, wildcards shown as `*`.
fn w(command: &str) -> Vec<String> {
    written_paths(command).into_iter().map(|p| p.replace(pattern::WILD, "*")).collect()
}

fn check(command: &str, expected: &[&str]) {
    assert_eq!(w(command), expected, "{command}");
}

#[test]
fn obvious_writes() {
    check("cat hello.txt && echo shell-ok", &[]);
    check("echo hi > src/a.rs", &["src/a.rs"]);
    check("echo hi>>log.txt 2>/dev/null", &["log.txt"]);
    check("cargo test 2>&1 | tee out.log", &["out.log"]);
    check("make &> build.log", &["build.log"]);
    check("touch a b; rm -rf c", &["a", "b", "c"]);
    check("cp -r src/x.rs 'dest dir/y.rs'", &["dest dir/y.rs"]);
    check("sudo mv a.rs b.rs", &["a.rs", "b.rs"]);
    check("sed -i 's/a/b/' f1.rs f2.rs", &["f1.rs", "f2.rs"]);
    check("sed -i -e 's/a/b/' f1.rs", &["f1.rs"]);
    check("sed 's/a/b/' f1.rs", &[]);
    check("dd if=/dev/zero of=disk.img", &["disk.img"]);
    check("FOO=1 tee -a x.md < in", &["x.md"]);
    check("echo '> not a redirect' # > neither", &[]);
    check("cat > spec.rs <<'EOF'\nrm -rf /\nEOF\necho done > z", &["spec.rs", "z"]);
    check("grep x a.rs | sort", &[]);
}

#[test]
fn the_issues_shell_forms() {
    check(
        "echo '{\"disableAllHooks\": true}' >&.claude/settings.local.json && git add -f x",
        &[".claude/settings.local.json"],
    );
    check("echo x 1<>.claude/settings.json", &[".claude/settings.json"]);
    check("echo $((1<<2)) ; echo x > .claude/a", &[".claude/a"]);
    check("cat <<'X' > /dev/null\nhi\nX\necho x > .claude/b", &[".claude/b"]);
    check("echo 'multi\nline' && echo x >| .claude/c", &[".claude/c"]);
    check("nice -n 5 rm .claude/d", &[".claude/d"]);
    check("timeout -s KILL 5 tee .claude/e", &[".claude/e"]);
    check("find . -name '*.json' -exec rm {} \\;", &["*"]);
    check("ls | xargs -I{} cp {} .claude/", &[".claude/*"]);
    check("sed -Ei 's/a/b/' .claude/f", &[".claude/f"]);
    check("perl -lpi -e 's/a/b/' .claude/g", &[".claude/g"]);
    check("perl -pi.bak -e 's/a/b/' x.rs", &["x.rs"]);
    check("mv -t .claude a.json b.json", &["a.json", "b.json", ".claude/a.json", ".claude/b.json"]);
    check("cp -t .claude settings.json", &[".claude/settings.json"]);
    check("ln -sft .claude /tmp/evil.json", &[".claude/evil.json"]);
    check("cd .claude && echo '{}' > settings.local.json", &[".claude/settings.local.json"]);
    check("mv .claude x", &[".claude", "x"]);
    check("rm -rf .claude", &[".claude"]);
    check("chmod 777 .claude/settings.json", &[".claude/settings.json"]);
    check("chmod -w .claude", &[".claude"]);
    check("git rm -q .claude/settings.json", &[".claude/settings.json"]);
    check("git checkout HEAD -- .claude/settings.json", &[".claude/settings.json"]);
    check("sh -c 'echo x > .claude/h'", &[".claude/h"]);
    check("bash -lc \"cd .claude; touch i\"", &[".claude/i"]);
    check("eval 'echo x > .claude/j'", &[".claude/j"]);
    check("env -C .claude touch k", &[".claude/k"]);
    check("(cd .claude && touch l); touch m", &[".claude/l", "m"]);
    check("echo $(touch .claude/n)", &[".claude/n"]);
    check("F=.claude/o; echo x > $F", &[".claude/o"]);
    check("for f in a b; do echo > .claude/$f; done", &[".claude/a", ".claude/b"]);
    check("echo x > $HOME/.claude/p", &["*/.claude/p"]);
    check("cd $D && touch q", &["*/q"]);
    check("git -C .claude rm r", &[".claude/r"]);
    check("echo x > nope/../.claude/s", &[".claude/s"]);
    check("bash <<'EOF'\ntouch .claude/t\nEOF", &[".claude/t"]);
    check("cat x | tee -a {a,b}.md", &["*.md"]);
}

#[test]
fn reads_are_not_writes() {
    for command in [
        "cargo test",
        "cargo test -p troupe-gate --lib shell",
        "uv run pytest -q",
        "git status",
        "git diff HEAD~1 -- src/",
        "git log --oneline | head -5",
        "git checkout main",
        "ls > /dev/null",
        "ls -la 2>&1",
        "cargo build 2>&1 | tail -20",
        "npm test",
        "grep -rn 'fn main' src/ | head",
        "echo $((1<<2))",
        "cat <<EOF\nrm -rf .claude\nEOF",
        "find . -name '*.rs' | wc -l",
        "python -m pytest tests/ -x",
        "make -j4 test",
        // `[` is the test command, not a bracket pattern.
        "[ -e /tmp/x/go ] && echo yes",
        "if [ -f Cargo.toml ]; then cargo test; fi",
        "until [ -e done.flag ]; do sleep 0.05; done",
    ] {
        let r = read(command);
        assert_eq!(r.writes, Vec::<String>::new(), "{command}");
        assert!(r.complete, "{command}");
    }
}

#[test]
fn what_cannot_be_read_counts_every_path_like_word() {
    let r = read("echo x > .claude/settings.json (");
    assert!(!r.complete);
    assert!(r.writes.contains(&".claude/settings.json".to_string()), "{:?}", r.writes);
    let deep = format!("{}echo > .claude/x{}", "(".repeat(200), ")".repeat(200));
    let r = read(&deep);
    assert!(!r.complete);
    assert!(r.writes.iter().any(|w| w.contains(".claude/x")), "{:?}", r.writes);
    let r = read("$CMD .claude/settings.json");
    assert!(!r.complete);
    assert!(r.writes.contains(&".claude/settings.json".to_string()), "{:?}", r.writes);
}

#[test]
fn loops_bind_their_variable_and_find_exec_runs_its_command() {
    check("for f in src/auth.rs src/auth/x.rs; do sed -i s/a/b/ $f; done", &["src/auth.rs", "src/auth/x.rs"]);
    check("find . -name '*.rs' -exec sed -i s/a/b/ {} +", &["*"]);
}

/// Hook time is linear: the work counted for `k` copies of a command grows
/// with `k` by at most a constant per copy (never a fallback for size).
mod linear {
    use proptest::prelude::*;

    use super::*;

    const PIECES: &[&str] = &[
        "cd a/b && echo x > c/d.rs",
        "sed -i s/a/b/ x.rs y.rs",
        "F=z.md; tee $F < /dev/null",
        "(cd ../q; mv -t dir a b c)",
        "find . -exec rm {} \\;",
        "echo $((1<<2)) | xargs -I{} touch {}",
        "bash -c 'touch a/../b'",
        "for f in a b c; do chmod 600 $f/x; done",
    ];

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        #[test]
        fn work_grows_linearly(picks in proptest::collection::vec(0..PIECES.len(), 1..6), k in 1usize..60) {
            let one: Vec<&str> = picks.iter().map(|&i| PIECES[i]).collect();
            let one = one.join("; ");
            let many = vec![one.as_str(); k].join("; ");
            let (r1, rk) = (read(&one), read(&many));
            prop_assert!(r1.complete && rk.complete);
            // Per copy: its own work, plus at most a working folder of MAX_BASE per write it names.
            let per_copy = r1.work + 8 + (r1.writes.len() + 1) * walk::MAX_BASE;
            prop_assert!(rk.work <= k * per_copy, "k={} work(1)={} work(k)={}", k, r1.work, rk.work);
            prop_assert!(rk.work <= WORK_BASE + WORK_PER_BYTE * many.len());
        }
    }

    #[test]
    fn deep_paths_cost_their_length() {
        for n in [10usize, 100, 1000] {
            let path = vec!["a"; n].join("/");
            let r = read(&format!("cd {path} && touch {path}/x"));
            assert!(r.complete);
            assert!(r.work <= 8 * (2 * n * 2 + 64), "n={n} work={}", r.work);
        }
    }
}

#[test]
fn deep_compound_commands_never_reach_the_parser() {
    // Nested `if`s have no brackets; 5,000 levels would overflow the parser's stack.
    let deep = format!("{}touch .claude/x{}", "if true; then ".repeat(5000), "; fi".repeat(5000));
    let r = read(&deep);
    assert!(!r.complete);
    assert!(r.writes.contains(&".claude/x".to_string()), "{:?}", &r.writes[..3]);
    let r = read(&format!("{}touch a{}", "while true; do ".repeat(40), "; done".repeat(40)));
    assert!(r.complete, "moderate nesting is parsed");
    assert_eq!(r.writes, ["a"]);
}

proptest::proptest! {
    /// Any text, however broken, gets a reading (never a panic, which would end the hook without an answer).
    #[test]
    fn any_text_is_read(text in "[a-z .$(){}\\[\\]'\"`<>|&;=*?~/\n-]{0,200}") {
        let r = read(&text);
        proptest::prop_assert!(r.work <= WORK_BASE + WORK_PER_BYTE * text.len() || !r.complete);
    }
}

#[test]
fn big_inputs_are_read() {
    let chain = vec!["echo a > b.txt"; 5000].join(" && ");
    let r = read(&chain);
    assert_eq!(r.writes, ["b.txt"]);
    let long = format!("echo {} > .claude/x", "a".repeat(200_000));
    assert!(read(&long).writes.contains(&".claude/x".to_string()));
}
