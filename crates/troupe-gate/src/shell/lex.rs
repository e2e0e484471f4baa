//! A shallow, linear lexer of command lines: words of simple commands with
//! quotes removed. It is not a shell grammar; it serves the checks that only
//! look at command words (seed 000 Spec 13's conventions, `troupe skill use`)
//! and the fallback of [`super::read`] when the real parser cannot read a
//! command (then every path-like word it finds counts as written).

/// The words of each simple command in `command`, with quotes removed.
/// Here-document bodies are skipped, so their text is never read as commands.
pub fn simple_commands(command: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut heredoc: Option<String> = None;
    for line in command.lines() {
        if let Some(delim) = &heredoc {
            if line.trim() == delim {
                heredoc = None;
            }
            continue;
        }
        heredoc = heredoc_delimiter(line);
        split_line(line, &mut out);
    }
    out.retain(|c| !c.is_empty());
    out
}

fn heredoc_delimiter(line: &str) -> Option<String> {
    let at = line.find("<<")?;
    let rest = line[at + 2..].trim_start_matches(['-', '~']).trim_start();
    if rest.starts_with('<') {
        return None; // `<<<` is a here-string
    }
    let word: String = rest.chars().take_while(|c| !c.is_whitespace() && !matches!(c, ';' | '&' | '|' | ')')).collect();
    let word = word.trim_matches(['\'', '"']).to_string();
    (!word.is_empty()).then_some(word)
}

/// Split one line into simple commands at `;`, `&&`, `||`, `|`, `&`, keeping
/// redirection operators as their own words.
fn split_line(line: &str, out: &mut Vec<Vec<String>>) {
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars().peekable();
    let flush = |word: &mut String, in_word: &mut bool, words: &mut Vec<String>| {
        if *in_word {
            words.push(std::mem::take(word));
            *in_word = false;
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                for d in chars.by_ref() {
                    if d == '\'' {
                        break;
                    }
                    word.push(d);
                }
            }
            '"' => {
                in_word = true;
                while let Some(d) = chars.next() {
                    match d {
                        '"' => break,
                        '\\' => {
                            if let Some(e) = chars.next() {
                                word.push(e);
                            }
                        }
                        _ => word.push(d),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(e) = chars.next() {
                    word.push(e);
                }
            }
            '#' if !in_word => break,
            ';' | '|' | '&' | '(' | ')' => {
                flush(&mut word, &mut in_word, &mut words);
                if c == '&' && chars.peek() == Some(&'>') {
                    // `&>file` redirects both streams.
                    chars.next();
                    words.push(">".into());
                    continue;
                }
                if c == '|' && chars.peek() == Some(&'|') || c == '&' && chars.peek() == Some(&'&') {
                    chars.next();
                }
                out.push(std::mem::take(&mut words));
            }
            '>' | '<' => {
                // A file descriptor number right before `>` belongs to the operator.
                if in_word && word.chars().all(|d| d.is_ascii_digit()) {
                    word.clear();
                    in_word = false;
                }
                flush(&mut word, &mut in_word, &mut words);
                let mut op = c.to_string();
                while let Some(&n) = chars.peek() {
                    if matches!(n, '>' | '<' | '|' | '&') {
                        op.push(n);
                        chars.next();
                    } else {
                        break;
                    }
                }
                words.push(op);
            }
            c if c.is_whitespace() => flush(&mut word, &mut in_word, &mut words),
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    flush(&mut word, &mut in_word, &mut words);
    out.push(words);
}

/// Skip `sudo`, `env`, `VAR=x`, `command`, `nohup`, `time` in front of a command.
fn strip_prefixes<'a>(mut argv: &'a [&'a str]) -> &'a [&'a str] {
    loop {
        match argv.first() {
            Some(w) if matches!(*w, "sudo" | "env" | "command" | "nohup" | "time" | "exec" | "xargs") => {
                argv = &argv[1..]
            }
            Some(w) if w.contains('=') && !w.starts_with('-') && !w.starts_with('=') => argv = &argv[1..],
            _ => return argv,
        }
    }
}

/// The skills `command` invokes through `troupe skill use <name>`.
pub fn skill_uses(command: &str) -> Vec<String> {
    let mut out = Vec::new();
    for words in simple_commands(command) {
        let argv: Vec<&str> = words.iter().map(String::as_str).collect();
        let argv = strip_prefixes(&argv);
        let Some((name, args)) = argv.split_first() else { continue };
        if name.rsplit('/').next() != Some("troupe") {
            continue;
        }
        if let Some(pos) = args.windows(2).position(|w| w == ["skill", "use"])
            && let Some(skill) = args[pos + 2..].iter().find(|a| !a.starts_with('-'))
        {
            out.push(crate::tools::skill_name(skill));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skill_use_is_recognised() {
        assert_eq!(skill_uses("troupe skill use code-quality-rules"), ["code-quality-rules"]);
        assert_eq!(
            skill_uses("/usr/local/bin/troupe skill use verification-before-completion && cargo test"),
            ["verification-before-completion"]
        );
        assert_eq!(skill_uses("troupe -C /p skill use --json x"), ["x"]);
        assert!(skill_uses("echo troupe skill use x").is_empty());
        assert!(skill_uses("troupe skill list").is_empty());
    }
}
