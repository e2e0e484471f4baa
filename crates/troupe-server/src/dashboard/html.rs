//! The few pieces every page is built from: escaping, the page frame with
//! its navigation, and Markdown rendered without raw HTML. Pages are plain
//! strings assembled on the server, so they show everything without
//! JavaScript; `dashboard.js` only keeps them live.

use std::fmt::Write;

/// `text` safe inside HTML text and double-quoted attributes.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `text` as one path segment of a URL (a task id's `/` included).
pub fn seg(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// The pages of the navigation: (path, label, test id).
const NAV: [(&str, &str, &str); 7] = [
    ("/", "Board", "nav-board"),
    ("/ui/agents", "Agents", "nav-agents"),
    ("/ui/features", "Features", "nav-features"),
    ("/ui/approvals", "Approvals", "nav-approvals"),
    ("/ui/engines", "Engines", "nav-engines"),
    ("/ui/audit", "Audit", "nav-audit"),
    ("/ui/runs", "Runs", "nav-runs"),
];

/// A whole page: `title`, the navigation with `active` marked, and `body`.
/// `last_event` is the newest event id when the page was read: the live
/// script follows the event stream from there, so nothing that happened
/// after the page was rendered is missed and nothing before it is applied twice.
pub fn page(title: &str, active: &str, last_event: i64, body: &str) -> String {
    let mut nav = String::new();
    for (href, label, id) in NAV {
        let current = if href == active { r#" aria-current="page""# } else { "" };
        let _ = write!(nav, r#"<a href="{href}" data-testid="{id}"{current}>{label}</a>"#);
    }
    format!(
        r##"<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} · troupe</title>
<link rel="stylesheet" href="/ui/assets/dashboard.css">
<script src="/ui/assets/dashboard.js" defer></script>
</head><body data-last-event="{last_event}">
<a class="skip" href="#main" data-testid="skip-to-content">Skip to content</a>
<header><span class="brand">troupe</span><nav aria-label="Dashboard">{nav}</nav>
<span class="live" data-testid="live-status" role="status" aria-live="polite">static</span></header>
<main id="main" tabindex="-1"><h1>{title}</h1>
{body}
</main></body></html>"##,
        title = esc(title)
    )
}

/// Markdown as HTML. Raw HTML in the document is shown as text, never
/// interpreted: spec documents are written by agents. Headings go two levels
/// down (`#` becomes `<h3>`), under the page's `<h1>` and its section's
/// `<h2>`, so the page keeps one outline for screen readers.
pub fn markdown(text: &str) -> String {
    use pulldown_cmark::{Event, HeadingLevel, Options, Parser, Tag, TagEnd, html};
    let lower = |l: HeadingLevel| HeadingLevel::try_from((l as usize + 2).min(6)).unwrap_or(HeadingLevel::H6);
    let events = Parser::new_ext(text, Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH).map(|e| match e {
        Event::Html(raw) | Event::InlineHtml(raw) => Event::Text(raw),
        Event::Start(Tag::Heading { level, id, classes, attrs }) => {
            Event::Start(Tag::Heading { level: lower(level), id, classes, attrs })
        }
        Event::End(TagEnd::Heading(level)) => Event::End(TagEnd::Heading(lower(level))),
        other => other,
    });
    let mut out = String::new();
    html::push_html(&mut out, events);
    out
}

/// A `<select>` named `name` with a label, offering `options` as (value,
/// text, disabled), `selected` chosen.
pub fn select(name: &str, label: &str, test_id: &str, options: &[(String, String, bool)], selected: &str) -> String {
    let mut out = format!(
        r#"<label for="{name}">{}</label><select id="{name}" name="{name}" data-testid="{test_id}">"#,
        esc(label)
    );
    for (value, text, disabled) in options {
        let sel = if value == selected { " selected" } else { "" };
        let dis = if *disabled { " disabled" } else { "" };
        let _ = write!(out, r#"<option value="{}"{sel}{dis}>{}</option>"#, esc(value), esc(text));
    }
    out.push_str("</select>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_and_markdown_never_pass_markup_through() {
        assert_eq!(esc(r#"<a href="x">'&'</a>"#), "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
        assert_eq!(seg("login/1.1"), "login%2F1.1");
        let md = markdown("# Title\n\n<script>alert(1)</script>\n\ntext <b>bold</b>\n");
        assert!(md.contains("<h3>Title</h3>"), "{md}");
        assert!(!md.contains("<script>") && !md.contains("<b>"), "{md}");
        assert!(md.contains("&lt;script&gt;"), "{md}");
    }
}
