//! Written paths as patterns. A shell command does not always say which file
//! it writes: `$F`, `*.rs`, `{a,b}`, `$(cmd)` and the items `xargs` reads are
//! only known when it runs. Such a part becomes [`WILD`], which stands for any
//! text (slashes included), so a check asks "could this be that file?" instead
//! of guessing.

/// Any text, slashes included. NUL never occurs in a real path or shell word.
pub const WILD: char = '\0';

/// True when `pattern` has a part only known at run time.
pub fn is_pattern(pattern: &str) -> bool {
    pattern.contains(WILD)
}

/// `.` and `..` resolved and `//` collapsed, lexically. A `..` after a segment
/// with a wildcard is absorbed by it (the wildcard could be anything); a `..`
/// above the start of a relative pattern stays.
pub fn normalize(pattern: &str) -> String {
    let absolute = pattern.starts_with('/');
    let mut segs: Vec<&str> = Vec::new();
    for seg in pattern.split('/') {
        match seg {
            "" | "." => {}
            ".." => match segs.last_mut() {
                Some(last) if last.contains(WILD) => *last = "\0",
                Some(last) if *last != ".." => {
                    segs.pop();
                }
                _ if !absolute => segs.push(".."),
                _ => {}
            },
            s => segs.push(s),
        }
    }
    let body = segs.join("/");
    match (absolute, body.is_empty()) {
        (true, _) => format!("/{body}"),
        (false, true) => ".".to_string(),
        (false, false) => body,
    }
}

/// Whether `pattern` (with [`WILD`]s) can name exactly `path`. Iterative
/// wildcard matching: linear in practice, `O(len(pattern) · len(path))` at worst.
pub fn matches(pattern: &str, path: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = path.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && p[pi] == WILD {
            star = Some((pi, ti));
            pi += 1;
        } else if pi < p.len() && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == WILD)
}

/// Whether writing `pattern` can change `file`: it names the file, or a folder
/// above it (`rm -rf .claude`, `mv .claude x`, `chmod -R 777 .`).
pub fn can_change(pattern: &str, file: &str) -> bool {
    let trimmed = pattern.trim_end_matches('/');
    let pattern = if trimmed.is_empty() { "/" } else { trimmed };
    std::path::Path::new(file).ancestors().any(|a| a.to_str().is_some_and(|a| !a.is_empty() && matches(pattern, a)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_resolves_dots_and_absorbs_wild_parents() {
        assert_eq!(normalize("/p/nope/../.claude/settings.json"), "/p/.claude/settings.json");
        assert_eq!(normalize("a/./b//c/"), "a/b/c");
        assert_eq!(normalize("../x"), "../x");
        assert_eq!(normalize("a/../.."), "..");
        assert_eq!(normalize("/.."), "/");
        assert_eq!(normalize("\0/../.claude"), "\0/.claude");
        assert_eq!(normalize("."), ".");
    }

    #[test]
    fn wildcards_match_any_text() {
        assert!(matches("/p/\0", "/p/.claude/settings.json"));
        assert!(matches("\0/settings.json", "/p/.claude/settings.json"));
        assert!(!matches("\0.rs", "/p/.claude/settings.json"));
        assert!(matches("/p/.c\0e", "/p/.claude"));
        assert!(!matches("/p/a", "/p/ab"));
    }

    #[test]
    fn folders_above_a_file_change_it() {
        let f = "/p/.claude/settings.json";
        assert!(can_change("/p/.claude", f));
        assert!(can_change("/p/.claude/", f));
        assert!(can_change("/p", f));
        assert!(can_change("/", f));
        assert!(!can_change("/p/.claude/other.json", f));
        assert!(!can_change("/p/src", f));
    }
}
