//! What one simple command writes, from its arguments: the commands that write
//! the files they are given, the wrappers whose arguments are a command, the
//! shells whose argument is a program, and `cd`.

use super::opts::{options, options_until_operand, skip_options};
use super::pattern::{WILD, is_pattern};
use super::walk::{Arg, Scope, Walker};

/// Read the command `args` (each word's possible values) in `scope`.
/// `stdin` holds the here-documents and here-strings it reads.
pub(super) fn run(w: &mut Walker, scope: &mut Scope, args: &[Arg], stdin: &[String]) {
    let Some((name, rest)) = args.split_first() else { return };
    let name = match name.as_slice() {
        [one] if !is_pattern(one) => one.rsplit('/').next().unwrap_or(one),
        // A command whose name is only known at run time could be anything.
        _ => {
            for a in args {
                w.write(scope, &path_like(a));
            }
            w.complete = false;
            return;
        }
    };
    match name {
        "cd" | "pushd" => cd(scope, rest),
        "popd" => scope.base = Some(WILD.to_string()),
        // Wrappers: what follows the options is the command.
        "sudo" | "doas" => run(w, scope, skip_options(rest, "ugCDhpUrtT", &["user", "group", "chdir"]), stdin),
        "command" | "builtin" | "exec" | "nohup" | "setsid" | "time" | "unbuffer" | "then" | "do" => {
            run(w, scope, skip_options(rest, "a", &[]), stdin)
        }
        "nice" => run(w, scope, skip_options(rest, "n", &["adjustment"]), stdin),
        "ionice" => run(w, scope, skip_options(rest, "cnp", &["class", "classdata", "pid"]), stdin),
        "stdbuf" => run(w, scope, skip_options(rest, "ioe", &["input", "output", "error"]), stdin),
        "timeout" => {
            let after = skip_options(rest, "sk", &["signal", "kill-after"]);
            run(w, scope, after.get(1..).unwrap_or(&[]), stdin)
        }
        "chrt" | "taskset" => {
            let after = skip_options(rest, "", &[]);
            run(w, scope, after.get(1..).unwrap_or(&[]), stdin)
        }
        "env" => env(w, scope, rest, stdin),
        "xargs" => xargs(w, scope, rest),
        "find" => find(w, scope, rest),
        "sh" | "bash" | "dash" | "zsh" | "ksh" | "ash" | "mksh" => shell(w, scope, rest, stdin),
        "eval" => {
            let text: Vec<&str> = rest.iter().map(|a| a[0].as_str()).collect();
            nested(w, scope, &[text.join(" ")]);
        }
        "watch" => {
            let after = skip_options(rest, "ndq", &["interval", "differences", "equexit"]);
            let text: Vec<&str> = after.iter().map(|a| a[0].as_str()).collect();
            nested(w, scope, &[text.join(" ")]);
        }
        // Commands that write their operands.
        "tee" | "rm" | "rmdir" | "unlink" | "mkfifo" | "mkdir" | "shred" | "truncate" | "touch" => {
            let parsed = options(rest, "mnsrdt", &["mode", "size", "reference", "iterations", "date", "random-source"]);
            for op in &parsed.operands {
                w.write(scope, op);
            }
        }
        "chmod" | "chown" | "chgrp" => chmod(w, scope, rest),
        "cp" | "mv" | "install" | "ln" => copy(w, scope, name, rest),
        "rsync" | "scp" => {
            let parsed = options(rest, "eT", &["rsh", "temp-dir", "exclude", "include", "filter"]);
            if let Some(dest) = parsed.operands.last() {
                w.write(scope, dest);
            }
        }
        "dd" => {
            for a in rest {
                let of: Arg = a.iter().filter_map(|v| v.strip_prefix("of=")).map(str::to_string).collect();
                w.write(scope, &of);
            }
        }
        "sed" => sed(w, scope, rest),
        "perl" => perl(w, scope, rest),
        "git" => git(w, scope, rest),
        "tar" => {
            let extracts = rest.first().is_some_and(|a| a[0].trim_start_matches('-').contains('x'))
                || rest.iter().any(|a| matches!(a[0].as_str(), "-x" | "--extract" | "--get"))
                || rest.iter().any(|a| a[0].starts_with('-') && !a[0].starts_with("--") && a[0].contains('x'));
            if extracts {
                let parsed = options(rest, "CfbT", &["directory", "file"]);
                let dir = parsed.value("C").or(parsed.value("directory"));
                w.write(scope, &under(dir.as_ref()));
            }
        }
        "unzip" => {
            let parsed = options(rest, "dx", &[]);
            w.write(scope, &under(parsed.value("d").as_ref()));
        }
        "patch" if !rest.iter().any(|a| a[0] == "--dry-run") => {
            let parsed = options(rest, "dpiorBDFzVY", &["directory", "input", "output", "strip"]);
            w.write(scope, &under(parsed.value("d").or(parsed.value("directory")).as_ref()));
            if let Some(out) = parsed.value("o").or(parsed.value("output")) {
                w.write(scope, &out);
            }
        }
        _ => {}
    }
}

/// Everything under `dir` (or the working folder).
fn under(dir: Option<&Arg>) -> Arg {
    match dir {
        Some(d) => d.iter().map(|d| format!("{d}/{WILD}")).collect(),
        None => vec![WILD.to_string()],
    }
}

fn cd(scope: &mut Scope, rest: &[Arg]) {
    let operands: Vec<&Arg> = rest.iter().filter(|a| !a[0].starts_with('-') || a[0] == "-").collect();
    scope.base = match operands.first().map(|a| a.as_slice()) {
        Some([dir]) if dir != "-" => {
            Some(scope.join(dir)).filter(|b| b.len() <= super::walk::MAX_BASE).or(Some(WILD.to_string()))
        }
        // `cd`, `cd -`, `cd ~` or a folder with several possible values.
        _ => Some(WILD.to_string()),
    };
}

/// The words of `a` that could name a file.
fn path_like(a: &Arg) -> Arg {
    a.iter().filter(|v| !v.starts_with('-') && v.contains(['/', '.', WILD])).cloned().collect()
}

/// Read each of `texts` as a program; a program only known at run time could write anything.
fn nested(w: &mut Walker, scope: &mut Scope, texts: &[String]) {
    for text in texts {
        if is_pattern(text) {
            w.write(scope, &[WILD.to_string()]);
            w.complete = false;
        } else {
            w.program(text, &mut scope.clone());
        }
    }
}

fn shell(w: &mut Walker, scope: &mut Scope, rest: &[Arg], stdin: &[String]) {
    let mut i = 0;
    let mut command = false;
    while let Some(a) = rest.get(i) {
        let v = &a[0];
        if v == "--" {
            i += 1;
            break;
        }
        if v.starts_with('-') || v.starts_with('+') {
            if matches!(v.as_str(), "-o" | "+o" | "-O" | "+O" | "--rcfile" | "--init-file") {
                i += 1;
            } else if !v.starts_with("--") && v.contains('c') {
                command = true;
            }
            i += 1;
            continue;
        }
        break;
    }
    match (command, rest.get(i)) {
        (true, Some(text)) => nested(w, scope, text),
        // `bash script.sh` runs a file the hook does not read (the sandbox and the post-run check see it).
        (false, Some(_)) => {}
        // No script operand: the shell runs what it reads on stdin.
        (_, None) => nested(w, scope, stdin),
    }
}

fn env(w: &mut Walker, scope: &mut Scope, rest: &[Arg], stdin: &[String]) {
    let mut inner = scope.clone();
    let mut i = 0;
    while let Some(a) = rest.get(i) {
        let v = &a[0];
        if v == "--" {
            i += 1;
            break;
        }
        if matches!(v.as_str(), "-u" | "--unset") {
            i += 2;
        } else if matches!(v.as_str(), "-C" | "--chdir") {
            if let Some(dir) = rest.get(i + 1) {
                cd(&mut inner, std::slice::from_ref(dir));
            }
            i += 2;
        } else if let Some(dir) = v.strip_prefix("--chdir=") {
            cd(&mut inner, &[vec![dir.to_string()]]);
            i += 1;
        } else if matches!(v.as_str(), "-S" | "--split-string") {
            if let Some(text) = rest.get(i + 1) {
                nested(w, &mut inner, text);
            }
            i += 2;
        } else if v.starts_with('-') || (v.contains('=') && !v.starts_with('=')) {
            i += 1;
        } else {
            break;
        }
    }
    run(w, &mut inner, rest.get(i..).unwrap_or(&[]), stdin);
}

fn xargs(w: &mut Walker, scope: &mut Scope, rest: &[Arg]) {
    let parsed = options_until_operand(
        rest,
        "aEeIiLlnPsd",
        &["arg-file", "eof", "replace", "max-lines", "max-args", "max-procs", "max-chars", "delimiter"],
    );
    let replace = parsed.value("I").or(parsed.value("replace")).or(parsed.value("i")).map(|r| r[0].clone());
    let mut command: Vec<Arg> = parsed.operands.clone();
    if command.is_empty() {
        return; // `echo` writes nothing
    }
    match replace {
        Some(r) if !r.is_empty() => {
            for a in &mut command[1..] {
                for v in a.iter_mut() {
                    *v = v.replace(&r, &WILD.to_string());
                }
            }
        }
        // The items read from stdin are appended.
        _ => command.push(vec![WILD.to_string()]),
    }
    run(w, scope, &command, &[]);
}

fn find(w: &mut Walker, scope: &mut Scope, rest: &[Arg]) {
    let starts: Vec<&Arg> = rest.iter().take_while(|a| !a[0].starts_with('-') && a[0] != "(" && a[0] != "!").collect();
    let mut i = starts.len();
    while let Some(a) = rest.get(i) {
        match a[0].as_str() {
            "-exec" | "-execdir" | "-ok" | "-okdir" => {
                let end =
                    rest[i + 1..].iter().position(|a| a[0] == ";" || a[0] == "+").map_or(rest.len(), |p| i + 1 + p);
                let command: Vec<Arg> = rest[i + 1..end]
                    .iter()
                    .map(|a| a.iter().map(|v| v.replace("{}", &WILD.to_string())).collect())
                    .collect();
                run(w, scope, &command, &[]);
                i = end + 1;
            }
            "-delete" => {
                let dirs: Vec<Arg> = if starts.is_empty() {
                    vec![vec![".".into()]]
                } else {
                    starts.iter().map(|a| (*a).clone()).collect()
                };
                for d in dirs {
                    w.write(scope, &under(Some(&d)));
                    w.write(scope, &d);
                }
                i += 1;
            }
            "-fprint" | "-fprint0" | "-fls" | "-fprintf" => {
                if let Some(f) = rest.get(i + 1) {
                    w.write(scope, f);
                }
                i += 2;
            }
            _ => i += 1,
        }
    }
}

fn chmod(w: &mut Walker, scope: &mut Scope, rest: &[Arg]) {
    let mut mode_taken = rest.iter().any(|a| a[0].starts_with("--reference") || a[0].starts_with("--from"));
    let mut only_operands = false;
    for a in rest {
        let v = &a[0];
        if !only_operands && v == "--" {
            only_operands = true;
            continue;
        }
        let flag = !only_operands
            && (v.starts_with("--")
                || (v.starts_with('-') && v.len() > 1 && v[1..].chars().all(|c| "RfvchHLP".contains(c))));
        if flag {
            continue;
        }
        if !mode_taken {
            mode_taken = true;
            continue;
        }
        w.write(scope, a);
    }
}

fn copy(w: &mut Walker, scope: &mut Scope, name: &str, rest: &[Arg]) {
    let parsed = options(
        rest,
        "tSmogb",
        &[
            "target-directory",
            "suffix",
            "mode",
            "owner",
            "group",
            "backup",
            "sparse",
            "reflink",
            "preserve",
            "no-preserve",
            "context",
        ],
    );
    let ops = &parsed.operands;
    if name == "install" && parsed.has("d") {
        for op in ops {
            w.write(scope, op);
        }
        return;
    }
    if name == "mv" {
        // Moving a file away changes it as much as writing it.
        let sources = if parsed.target().is_some() { &ops[..] } else { &ops[..ops.len().saturating_sub(1)] };
        for s in sources {
            w.write(scope, s);
        }
    }
    let (dir, sources): (Arg, &[Arg]) = match parsed.target() {
        Some(dir) => (dir, &ops[..]),
        None => match ops.split_last() {
            Some((dest, sources)) if !sources.is_empty() => {
                let into_dir = sources.len() > 1
                    || dest
                        .iter()
                        .any(|d| d.ends_with('/') || d == "." || d == ".." || d.ends_with("/.") || d.ends_with("/.."));
                if !into_dir || parsed.has("T") {
                    w.write(scope, dest);
                    return;
                }
                (dest.clone(), sources)
            }
            // `ln -s target` makes a link named like the target in the working folder.
            Some((only, _)) if name == "ln" => {
                let names: Arg = only.iter().map(|o| basename(o).to_string()).collect();
                w.write(scope, &names);
                return;
            }
            _ => return,
        },
    };
    for s in sources {
        let into: Arg = dir.iter().flat_map(|d| s.iter().map(move |s| format!("{d}/{}", basename(s)))).collect();
        w.write(scope, &into);
    }
}

fn basename(path: &str) -> &str {
    let trimmed = path.trim_end_matches('/');
    trimmed.rsplit('/').next().filter(|b| !b.is_empty()).unwrap_or(".")
}

fn sed(w: &mut Walker, scope: &mut Scope, rest: &[Arg]) {
    let mut in_place = false;
    let mut script_given = false;
    let mut files: Vec<&Arg> = Vec::new();
    let mut i = 0;
    while let Some(a) = rest.get(i) {
        let v = a[0].as_str();
        i += 1;
        if v == "--" {
            files.extend(&rest[i..]);
            break;
        }
        if let Some(long) = v.strip_prefix("--") {
            in_place |= long.starts_with("in-place");
            if matches!(long, "expression" | "file" | "line-length") {
                script_given |= long != "line-length";
                i += 1;
            }
            script_given |= long.starts_with("expression=") || long.starts_with("file=");
            continue;
        }
        if let Some(cluster) = v.strip_prefix('-').filter(|c| !c.is_empty()) {
            for (at, c) in cluster.char_indices() {
                match c {
                    'i' => {
                        in_place = true;
                        break; // the rest is the backup suffix
                    }
                    'e' | 'f' | 'l' => {
                        script_given |= c != 'l';
                        if at + 1 == cluster.len() {
                            i += 1;
                        }
                        break;
                    }
                    _ => {}
                }
            }
            continue;
        }
        files.push(a);
    }
    if !in_place {
        return;
    }
    let files = if script_given { &files[..] } else { files.get(1..).unwrap_or(&[]) };
    for f in files {
        w.write(scope, f);
    }
}

fn perl(w: &mut Walker, scope: &mut Scope, rest: &[Arg]) {
    let mut in_place = false;
    let mut script_given = false;
    let mut operands: Vec<&Arg> = Vec::new();
    let mut i = 0;
    while let Some(a) = rest.get(i) {
        let v = a[0].as_str();
        i += 1;
        if v == "--" {
            operands.extend(&rest[i..]);
            break;
        }
        let Some(cluster) = v.strip_prefix('-').filter(|c| !c.is_empty() && !c.starts_with('-')) else {
            if v.starts_with("--") {
                continue;
            }
            operands.push(a);
            continue;
        };
        let chars: Vec<char> = cluster.chars().collect();
        let mut k = 0;
        while let Some(&c) = chars.get(k) {
            k += 1;
            match c {
                'i' => {
                    in_place = true;
                    break;
                }
                'e' | 'E' => {
                    script_given = true;
                    if k == chars.len() {
                        i += 1;
                    }
                    break;
                }
                'l' | '0' => {
                    while chars.get(k).is_some_and(|d| d.is_ascii_digit() || d.is_ascii_hexdigit() && c == '0') {
                        k += 1;
                    }
                }
                'I' | 'M' | 'm' | 'x' | 'C' | 'F' | 'd' | 'D' => break,
                _ => {}
            }
        }
    }
    if !in_place {
        return;
    }
    let files = if script_given { &operands[..] } else { operands.get(1..).unwrap_or(&[]) };
    for f in files {
        w.write(scope, f);
    }
}

fn git(w: &mut Walker, scope: &mut Scope, rest: &[Arg]) {
    let mut inner = scope.clone();
    let mut i = 0;
    while let Some(a) = rest.get(i) {
        let v = a[0].as_str();
        match v {
            "-C" => {
                if let Some(dir) = rest.get(i + 1) {
                    cd(&mut inner, std::slice::from_ref(dir));
                }
                i += 2;
            }
            "-c" | "--git-dir" | "--work-tree" | "--namespace" | "--exec-path" => i += 2,
            _ if v.starts_with('-') => i += 1,
            _ => break,
        }
    }
    let Some(sub) = rest.get(i) else { return };
    let args = &rest[i + 1..];
    let after_dashdash: Vec<&Arg> = args.iter().skip_while(|a| a[0] != "--").skip(1).collect();
    let operands: Vec<&Arg> = args.iter().filter(|a| !a[0].starts_with('-')).collect();
    match sub[0].as_str() {
        "rm" | "mv" => {
            let parsed = options(args, "", &[]);
            for op in &parsed.operands {
                w.write(&inner, op);
            }
        }
        "restore" => {
            let parsed = options(args, "s", &["source", "pathspec-from-file"]);
            for op in &parsed.operands {
                w.write(&inner, op);
            }
        }
        "checkout" => {
            if !after_dashdash.is_empty() {
                for op in after_dashdash {
                    w.write(&inner, op);
                }
            } else if !args.iter().any(|a| matches!(a[0].as_str(), "-b" | "-B" | "--orphan")) {
                // `git checkout <rev> <paths>` or `git checkout <path>`; a lone branch name writes no named file.
                let paths: Vec<&&Arg> = match operands.as_slice() {
                    [one] if one.iter().any(|v| v.contains(['/', '.', WILD])) => operands.iter().collect(),
                    [_, rest @ ..] => rest.iter().collect(),
                    [] => Vec::new(),
                };
                for op in paths {
                    w.write(&inner, op);
                }
            }
        }
        "clean" if !args.iter().any(|a| a[0] == "-n" || a[0] == "--dry-run") => {
            w.write(&inner, &[WILD.to_string()]);
        }
        "config" if !args.iter().any(|a| a[0].starts_with("--get") || matches!(a[0].as_str(), "-l" | "--list")) => {
            w.write(&inner, &[".git/config".to_string()]);
        }
        _ => {}
    }
}
