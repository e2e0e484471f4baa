//! The list commands' one rule for empty states: nothing on stdout (a script
//! reads no rows), a hint on stderr naming the command that fills the list.

use crate::support::TestProject;

#[test]
fn every_empty_list_prints_nothing_on_stdout_and_a_hint_on_stderr() {
    let p = TestProject::new();
    std::fs::remove_dir_all(p.path(".troupe/skills")).unwrap();
    std::fs::create_dir_all(p.path(".troupe/skills")).unwrap();
    for args in [
        &["board", "list"][..],
        &["agent", "list"],
        &["agent", "list", "--stale"],
        &["msg", "inbox", "--agent", "bob"],
        &["audit", "denials"],
        &["skill", "list"],
        &["mcp", "status"],
        &["spec", "list"],
        &["status"],
    ] {
        let out = p.troupe().args(args).output().unwrap();
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "{args:?}: {stderr}");
        assert_eq!(stdout, "", "{args:?} prints no rows");
        assert!(stderr.contains('`') && stderr.lines().count() == 1, "{args:?} says what fills it: {stderr}");
    }
}
