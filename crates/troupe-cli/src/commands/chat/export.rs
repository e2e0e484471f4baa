//! `/export`: a saved session as Markdown, JSON (the stored session) or a
//! standalone HTML page. Pure rendering; the REPL writes the file.

use troupe_store::{ChatMessage, ChatSession};

use troupe_server::dashboard::html::esc;

use super::slash::Format;

/// The session's title: its name, else its number.
fn title(s: &ChatSession) -> String {
    match &s.session.name {
        Some(name) => format!("Session {}: {name}", s.id),
        None => format!("Session {}", s.id),
    }
}

/// Who said a message, as a reader sees it.
fn speaker<'a>(m: &ChatMessage, role: &'a str) -> &'a str {
    match m.role.as_str() {
        "user" => "You",
        "summary" => "Summary",
        _ => role,
    }
}

fn about(s: &ChatSession) -> String {
    let x = &s.session;
    let mut out = format!("role {}, engine {}", x.role, x.engine);
    if let Some(m) = &x.model {
        out.push_str(&format!(", model {m}"));
    }
    if let Some(p) = x.parent {
        out.push_str(&format!(", {} session {p}", if x.summary { "a summary of" } else { "forked from" }));
    }
    out.push_str(&format!(", saved {}", s.updated_at.strftime("%Y-%m-%d %H:%M UTC")));
    out
}

/// The session in `format`.
pub(crate) fn render(s: &ChatSession, format: Format) -> String {
    match format {
        Format::Json => serde_json::to_string_pretty(s).expect("a session serialises") + "\n",
        Format::Md => markdown(s),
        Format::Html => html(s),
    }
}

fn markdown(s: &ChatSession) -> String {
    let mut out = format!("# {}\n\n_{}_\n", title(s), about(s));
    for m in &s.session.messages {
        out.push_str(&format!("\n**{}:**\n\n{}\n", speaker(m, &s.session.role), m.text.trim_end()));
        if !m.tools.is_empty() {
            out.push_str(&format!("\n_tools: {}_\n", m.tools.join(", ")));
        }
    }
    out
}

fn html(s: &ChatSession) -> String {
    let mut body = String::new();
    for m in &s.session.messages {
        let tools = if m.tools.is_empty() {
            String::new()
        } else {
            format!("<p class=\"tools\">tools: {}</p>", esc(&m.tools.join(", ")))
        };
        body.push_str(&format!(
            "<article class=\"message {}\"><h2>{}</h2><pre>{}</pre>{tools}</article>\n",
            esc(&m.role),
            esc(speaker(m, &s.session.role)),
            esc(m.text.trim_end())
        ));
    }
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\
         <title>{t}</title><style>body{{font-family:sans-serif;max-width:50em;margin:2em auto}}\
         pre{{white-space:pre-wrap}}.user h2{{color:#246}}.summary{{background:#eee}}</style></head>\n\
         <body><h1>{t}</h1><p class=\"about\">{a}</p>\n{body}</body></html>\n",
        t = esc(&title(s)),
        a = esc(&about(s)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use troupe_store::NewSession;

    fn session() -> ChatSession {
        let mut answer = ChatMessage::new("assistant", "Use <b>argon2</b> & salt");
        answer.tools = vec!["Read".into()];
        ChatSession {
            id: 7,
            created_at: jiff::Timestamp::UNIX_EPOCH,
            updated_at: jiff::Timestamp::UNIX_EPOCH,
            session: NewSession {
                name: Some("auth".into()),
                role: "mentor".into(),
                engine: "claude".into(),
                messages: vec![ChatMessage::new("user", "How to hash?"), answer],
                ..NewSession::default()
            },
        }
    }

    #[test]
    fn each_format_holds_the_whole_conversation() {
        let md = render(&session(), Format::Md);
        assert!(md.starts_with("# Session 7: auth\n"), "{md}");
        assert!(md.contains("**You:**\n\nHow to hash?") && md.contains("**mentor:**\n\nUse <b>argon2</b> & salt"));
        assert!(md.contains("_tools: Read_"));
        let json: serde_json::Value = serde_json::from_str(&render(&session(), Format::Json)).unwrap();
        assert_eq!((json["id"].as_i64(), json["messages"][1]["tools"][0].as_str()), (Some(7), Some("Read")));
        let html = render(&session(), Format::Html);
        assert!(html.contains("<title>Session 7: auth</title>"));
        assert!(html.contains("Use &lt;b&gt;argon2&lt;/b&gt; &amp; salt"), "the model's text is escaped: {html}");
        assert!(!html.contains("<b>argon2"));
    }
}
