//! Where output goes: data on stdout (text or `--json`), diagnostics on stderr.
//! A closed stdout (`troupe ... | head`) ends the program quietly.

use std::io::{self, IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};

static JSON_MODE: AtomicBool = AtomicBool::new(false);

/// Record whether `--json` was given; error reporting reads it.
pub fn set_json_mode(on: bool) {
    JSON_MODE.store(on, Ordering::Relaxed);
}

pub fn json_mode() -> bool {
    JSON_MODE.load(Ordering::Relaxed)
}

/// Print one JSON document on stdout.
pub fn print_json<T: serde::Serialize + ?Sized>(value: &T) {
    let text = serde_json::to_string_pretty(value).expect("JSON values always serialize");
    print_line(&text);
}

/// `1 teammate`, `2 teammates`: the plural only when it is one.
pub fn count(n: u64, noun: &str) -> String {
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
}

/// `12s ago`, `2m ago`, `3h ago`, `5d ago` for tables; `--json` keeps RFC 3339.
pub fn ago(then: jiff::Timestamp, now: jiff::Timestamp) -> String {
    let secs = now.as_second().saturating_sub(then.as_second());
    match secs {
        s if s < 0 => "just now".to_string(),
        s if s < 60 => format!("{s}s ago"),
        s if s < 3600 => format!("{}m ago", s / 60),
        s if s < 86_400 => format!("{}h ago", s / 3600),
        s => format!("{}d ago", s / 86_400),
    }
}

/// Text an agent chose (its name, a task subject, a message, a tool name, a
/// reason), made safe for a terminal: every control character (C0, DEL, C1,
/// so escape sequences and forged line breaks) and every bidirectional
/// override is written as a visible Rust-style escape (`\u{1b}`, `\n`).
/// Every human output of agent-controlled text goes through this one
/// function; `--json` output is escaped by JSON itself.
pub fn escape(text: &str) -> std::borrow::Cow<'_, str> {
    fn unsafe_char(c: char) -> bool {
        c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}')
    }
    if !text.contains(unsafe_char) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if unsafe_char(c) { out.extend(c.escape_default()) } else { out.push(c) }
    }
    std::borrow::Cow::Owned(out)
}

/// Print a line on stdout, exiting quietly if the reader went away.
pub fn print_line(text: &str) {
    let mut out = io::stdout().lock();
    if let Err(err) = writeln!(out, "{text}")
        && err.kind() == io::ErrorKind::BrokenPipe
    {
        std::process::exit(0);
    }
}

/// Print a line of data on stdout, reporting a closed stdout to the caller
/// (a streaming command has an agent to stop before it exits).
pub fn try_print_line(text: &str) -> io::Result<()> {
    let mut out = io::stdout().lock();
    writeln!(out, "{text}").and_then(|()| out.flush())
}

/// Print a progress or status note on stderr (never mixed into data on stdout).
pub fn note(text: &str) {
    let _ = writeln!(io::stderr().lock(), "{text}");
}

/// True when colour may be used on stdout: a terminal, and NO_COLOR unset.
pub fn use_color() -> bool {
    std::env::var_os("NO_COLOR").is_none() && io::stdout().is_terminal()
}

/// Wrap `text` in an ANSI style when colour is allowed.
pub fn paint(text: &str, ansi: &str) -> String {
    if use_color() { format!("\x1b[{ansi}m{text}\x1b[0m") } else { text.to_string() }
}

/// Wrap `text` in an ANSI style when colour may be used on stderr.
pub fn paint_err(text: &str, ansi: &str) -> String {
    if std::env::var_os("NO_COLOR").is_none() && io::stderr().is_terminal() {
        format!("\x1b[{ansi}m{text}\x1b[0m")
    } else {
        text.to_string()
    }
}

/// `COLUMNS` when it is a number (the user's or a test's say), else the width
/// of the terminal `fd` is, else `None`.
fn columns(terminal: Option<terminal_size::Width>) -> Option<usize> {
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|c| *c > 0)
        .or(terminal.map(|w| w.0 as usize))
}

/// The width of the terminal stderr shows (80 when it is unknown), for the live display.
pub fn term_width() -> usize {
    columns(terminal_size::terminal_size_of(io::stderr()).map(|(w, _)| w)).unwrap_or(80)
}

/// The width tables on stdout must fit: the terminal's, or `None` when stdout
/// is not a terminal (a pipe gets whole values).
pub fn table_width() -> Option<usize> {
    columns(terminal_size::terminal_size_of(io::stdout()).map(|(w, _)| w))
}

/// Print rows as a table: columns padded to their widest cell (the last one
/// unpadded), and when the table is wider than the terminal, the widest
/// column cut with `…` until it fits (`--json` keeps every value whole).
/// `right` lists the columns aligned right (numbers).
pub fn print_table(header: &[&str], rows: &[Vec<String>], right: &[usize]) {
    print_table_styled(header, rows, right, &|_, _| None);
}

/// [`print_table`] with an ANSI style for some cells: `style(row, column)`,
/// applied after the cell is cut and padded, so colour never counts as width.
pub fn print_table_styled(
    header: &[&str],
    rows: &[Vec<String>],
    right: &[usize],
    style: &dyn Fn(usize, usize) -> Option<&'static str>,
) {
    for line in table_styled(header, rows, right, table_width(), style) {
        print_line(&line);
    }
}

/// The lines [`print_table`] prints, for a terminal `width` wide.
#[cfg(test)]
pub fn table(header: &[&str], rows: &[Vec<String>], right: &[usize], width: Option<usize>) -> Vec<String> {
    table_styled(header, rows, right, width, &|_, _| None)
}

fn table_styled(
    header: &[&str],
    rows: &[Vec<String>],
    right: &[usize],
    width: Option<usize>,
    style: &dyn Fn(usize, usize) -> Option<&'static str>,
) -> Vec<String> {
    // Cells often hold agent-chosen text (ids, subjects, reasons): escaped
    // here, once, before widths are measured, so no table can carry a
    // terminal escape or a forged line.
    let rows: Vec<Vec<String>> = rows.iter().map(|r| r.iter().map(|c| escape(c).into_owned()).collect()).collect();
    let rows = rows.as_slice();
    let n = header.len();
    let cells = |r: &[String]| (0..n).map(|i| r.get(i).map(|c| c.chars().count()).unwrap_or(0)).collect::<Vec<_>>();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, c) in widths.iter_mut().zip(cells(row)) {
            *w = (*w).max(c);
        }
    }
    if let Some(max) = width {
        // Cut the widest column a character at a time until the table fits;
        // no column goes below its header or 8 characters.
        let total = |w: &[usize]| w.iter().sum::<usize>() + 2 * n.saturating_sub(1);
        while total(&widths) > max {
            let (i, w) = widths.iter().enumerate().max_by_key(|(_, w)| **w).map(|(i, w)| (i, *w)).unwrap_or((0, 0));
            if w <= header[i].chars().count().max(8) {
                break;
            }
            widths[i] -= 1;
        }
    }
    let render = |row: &[String], r: Option<usize>| {
        let last = n.saturating_sub(1);
        let parts: Vec<String> = (0..n)
            .map(|i| {
                let c = crate::live::fit(row.get(i).map(String::as_str).unwrap_or(""), widths[i]);
                let pad = " ".repeat(widths[i].saturating_sub(c.chars().count()));
                let c = match r.and_then(|r| style(r, i)) {
                    Some(ansi) => paint(&c, ansi),
                    None => c,
                };
                if right.contains(&i) {
                    format!("{pad}{c}")
                } else if i == last {
                    c
                } else {
                    format!("{c}{pad}")
                }
            })
            .collect();
        parts.join("  ").trim_end().to_string()
    };
    let head: Vec<String> = header.iter().map(|h| h.to_string()).collect();
    std::iter::once(render(&head, None)).chain(rows.iter().enumerate().map(|(i, r)| render(r, Some(i)))).collect()
}

/// Logs to stderr; `-v` for debug, `-vv` for trace, `RUST_LOG` overrides.
pub fn init_logging(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("TROUPE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(io::stderr)
        .with_target(false)
        .without_time()
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_cut_their_widest_column_to_fit() {
        let rows = vec![
            vec!["builder-1".to_string(), "a very long description of what the task is about".to_string(), "3".into()],
            vec!["x".to_string(), "short".to_string(), "12".into()],
        ];
        let whole = table(&["ID", "SUMMARY", "N"], &rows, &[2], None);
        assert_eq!(whole[0], "ID         SUMMARY                                             N");
        assert_eq!(whole[2], "x          short                                              12");
        let cut = table(&["ID", "SUMMARY", "N"], &rows, &[2], Some(40));
        assert!(cut.iter().all(|l| l.chars().count() <= 40), "{cut:#?}");
        assert_eq!(cut[1], "builder-1  a very long description …   3");
        let narrow = table(&["ID", "SUMMARY"], &rows, &[], Some(5));
        assert_eq!(narrow[1], "builder…  a very …", "never below 8 characters");
    }

    #[test]
    fn agent_text_cannot_drive_the_terminal() {
        assert_eq!(escape("builder-1"), "builder-1");
        assert_eq!(table(&["A"], &[vec!["x\ny\x1b[2J".into()]], &[], None)[1], "x\\ny\\u{1b}[2J");
        assert_eq!(escape("x\x1b[2Jy"), "x\\u{1b}[2Jy");
        assert_eq!(escape("a\nforged line\r\t"), "a\\nforged line\\r\\t");
        assert_eq!(escape("\u{9b}31m \u{7f}"), "\\u{9b}31m \\u{7f}");
        assert_eq!(escape("abc\u{202e}fed"), "abc\\u{202e}fed");
        assert_eq!(escape("ünïcödé 名前"), "ünïcödé 名前");
    }

    #[test]
    fn ago_and_count_read_like_speech() {
        let now: jiff::Timestamp = "2026-01-02T03:04:05Z".parse().unwrap();
        let at = |s: i64| jiff::Timestamp::from_second(now.as_second() - s).unwrap();
        assert_eq!(ago(at(5), now), "5s ago");
        assert_eq!(ago(at(125), now), "2m ago");
        assert_eq!(ago(at(3 * 3600 + 10), now), "3h ago");
        assert_eq!(ago(at(2 * 86_400), now), "2d ago");
        assert_eq!(ago(at(-30), now), "just now");
        assert_eq!(count(1, "teammate"), "1 teammate");
        assert_eq!(count(0, "turn"), "0 turns");
    }
}
