//! The REPL's commands (`/roles`, `/save`, ...), parsed from a line with no
//! IO, so every form and every mistake is a unit test.

/// An export format of `/export`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    /// Markdown.
    Md,
    /// The stored session as JSON.
    Json,
    /// A standalone HTML page.
    Html,
}

impl Format {
    /// The file extension.
    pub(crate) fn ext(self) -> &'static str {
        match self {
            Format::Md => "md",
            Format::Json => "json",
            Format::Html => "html",
        }
    }
}

/// What a line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Line {
    /// A message to the agent.
    Say(String),
    /// Nothing (blank line).
    Empty,
    /// `/help`.
    Help,
    /// `/quit` or `/exit`.
    Quit,
    /// `/roles [name]`: pick or switch.
    Roles(Option<String>),
    /// `/skills`.
    Skills,
    /// `/tools`.
    Tools,
    /// `/model [name]`.
    Model(Option<String>),
    /// `/status`.
    Status,
    /// `/save [name]`.
    Save(Option<String>),
    /// `/sessions`.
    Sessions,
    /// `/resume <id>`.
    Resume(i64),
    /// `/compress <id>`.
    Compress(i64),
    /// `/fork <id> [--at N]`.
    Fork(i64, Option<usize>),
    /// `/export <id> md|json|html`.
    Export(i64, Format),
}

/// The help `/help` prints, one command a line.
pub(crate) const HELP: &str = "\
/roles [name]            pick a role (arrow keys) or switch to one; says which tools changed
/skills                  the skills of the current role
/tools                   the tools the next turn offers the model
/model [name]            show or change the model
/status                  role, engine, model, tool count, session, cost so far
/save [name]             save this conversation as a session (again: update it)
/sessions                the saved sessions
/resume <id>             continue a saved session
/compress <id>           summarise a session through the engine into a new one (the original stays)
/fork <id> [--at N]      a new session from a saved one's first N messages, continued here
/export <id> md|json|html   write a session to .troupe/exports/
/help                    this list
/quit                    leave (also Ctrl-D); Ctrl-C stops a turn, not the REPL";

/// Parse one line of input.
pub(crate) fn parse(line: &str) -> Result<Line, String> {
    let line = line.trim();
    if line.is_empty() {
        return Ok(Line::Empty);
    }
    let Some(rest) = line.strip_prefix('/') else { return Ok(Line::Say(line.to_string())) };
    let mut words = rest.split_whitespace();
    let cmd = words.next().unwrap_or_default();
    let args: Vec<&str> = words.collect();
    let opt = |args: &[&str]| -> Result<Option<String>, String> {
        match args {
            [] => Ok(None),
            [one] => Ok(Some((*one).to_string())),
            _ => Err(format!("/{cmd} takes at most one argument")),
        }
    };
    let none = |args: &[&str], l: Line| if args.is_empty() { Ok(l) } else { Err(format!("/{cmd} takes no argument")) };
    let id = |args: &[&str]| -> Result<i64, String> {
        let first = args.first().ok_or_else(|| format!("/{cmd} needs a session id (see /sessions)"))?;
        first.parse().map_err(|_| format!("'{first}' is not a session id (a number, see /sessions)"))
    };
    match cmd {
        "help" | "?" => none(&args, Line::Help),
        "quit" | "exit" | "q" => none(&args, Line::Quit),
        "roles" | "role" => opt(&args).map(Line::Roles),
        "skills" => none(&args, Line::Skills),
        "tools" => none(&args, Line::Tools),
        "model" => opt(&args).map(Line::Model),
        "status" => none(&args, Line::Status),
        "save" => Ok(Line::Save(if args.is_empty() { None } else { Some(args.join(" ")) })),
        "sessions" => none(&args, Line::Sessions),
        "resume" | "compress" if args.len() > 1 => Err(format!("/{cmd} takes one session id")),
        "resume" => id(&args).map(Line::Resume),
        "compress" => id(&args).map(Line::Compress),
        "fork" => {
            let at = match &args[args.len().min(1)..] {
                [] => None,
                ["--at", n] => Some(n.parse().map_err(|_| format!("--at takes a number of messages, not '{n}'"))?),
                _ => return Err("usage: /fork <id> [--at N]".into()),
            };
            Ok(Line::Fork(id(&args)?, at))
        }
        "export" => {
            let format = match args.get(1).copied() {
                Some("md") | Some("markdown") => Format::Md,
                Some("json") => Format::Json,
                Some("html") => Format::Html,
                _ => return Err("usage: /export <id> md|json|html".into()),
            };
            if args.len() > 2 {
                return Err("usage: /export <id> md|json|html".into());
            }
            Ok(Line::Export(id(&args)?, format))
        }
        other => Err(format!("unknown command /{other}; /help lists them")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_into_what_they_ask() {
        let ok = |s: &str| parse(s).unwrap();
        assert_eq!(ok("  hello there "), Line::Say("hello there".into()));
        assert_eq!(ok(""), Line::Empty);
        assert_eq!(ok("/roles"), Line::Roles(None));
        assert_eq!(ok("/roles reviewer"), Line::Roles(Some("reviewer".into())));
        assert_eq!(ok("/model opus"), Line::Model(Some("opus".into())));
        assert_eq!(ok("/save my auth talk"), Line::Save(Some("my auth talk".into())));
        assert_eq!(ok("/resume 3"), Line::Resume(3));
        assert_eq!(ok("/compress 3"), Line::Compress(3));
        assert_eq!(ok("/fork 3"), Line::Fork(3, None));
        assert_eq!(ok("/fork 3 --at 2"), Line::Fork(3, Some(2)));
        assert_eq!(ok("/export 4 html"), Line::Export(4, Format::Html));
        assert_eq!(ok("/quit"), Line::Quit);
    }

    #[test]
    fn mistakes_say_what_is_wrong() {
        let err = |s: &str| parse(s).unwrap_err();
        assert!(err("/resume").contains("needs a session id"));
        assert!(err("/resume x").contains("'x' is not a session id"));
        assert!(err("/resume 1 2").contains("one session id"));
        assert!(err("/fork 1 --at x").contains("--at takes a number"));
        assert!(err("/fork 1 2").contains("usage: /fork"));
        assert!(err("/export 1 pdf").contains("md|json|html"));
        assert!(err("/status now").contains("takes no argument"));
        assert!(err("/frobnicate").contains("unknown command /frobnicate"));
    }
}
