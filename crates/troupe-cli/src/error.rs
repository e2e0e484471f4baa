//! The one error type of the binary. Library errors are converted here, in one
//! place, into a kind (which picks the exit code), a message, the chain of
//! causes, and an optional hint that says what to do next.

use std::fmt;
use std::process::ExitCode;

/// What went wrong, in the terms that choose an exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Bad input or a refused operation (a phase gate, a missing feature): exit 1.
    User,
    /// The command line itself was wrong: exit 2.
    Usage,
    /// A configuration or state file could not be used: exit 3.
    Config,
    /// A bug or an environment failure troupe did not expect: exit 70.
    Internal,
}

impl ErrorKind {
    fn exit_code(self) -> u8 {
        match self {
            ErrorKind::User => 1,
            ErrorKind::Usage => 2,
            ErrorKind::Config => 3,
            ErrorKind::Internal => 70,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            ErrorKind::User => "user",
            ErrorKind::Usage => "usage",
            ErrorKind::Config => "config",
            ErrorKind::Internal => "internal",
        }
    }
}

/// An error ready to be shown to the user.
#[derive(Debug)]
pub struct CliError {
    pub kind: ErrorKind,
    pub message: String,
    pub causes: Vec<String>,
    pub hint: Option<String>,
}

pub type CliResult<T> = Result<T, CliError>;

impl CliError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        CliError { kind, message: message.into(), causes: Vec::new(), hint: None }
    }

    pub fn user(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::User, message)
    }

    pub fn config(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Config, message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal, message)
    }

    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Usage, message)
    }

    /// Attach the chain of an underlying error as `Caused by:` lines.
    pub fn with_source(mut self, err: &(dyn std::error::Error + 'static)) -> Self {
        let mut next = Some(err);
        while let Some(e) = next {
            let text = e.to_string();
            if !text.is_empty() && text != self.message {
                self.causes.push(text);
            }
            next = e.source();
        }
        self
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// Print the error (text on stderr; with `--json` also an object on stdout) and
    /// return the exit code.
    pub fn report(&self) -> ExitCode {
        if crate::output::json_mode() {
            self.report_json_only();
        }
        eprintln!("{self}");
        ExitCode::from(self.kind.exit_code())
    }

    /// Print only the JSON document of the error on stdout.
    pub fn report_json_only(&self) {
        let value = serde_json::json!({
            "error": {
                "kind": self.kind.as_str(),
                "message": self.message,
                "causes": self.causes,
                "hint": self.hint,
            }
        });
        crate::output::print_json(&value);
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "error: {}", self.message)?;
        for cause in &self.causes {
            write!(f, "\nCaused by: {cause}")?;
        }
        if let Some(hint) = &self.hint {
            write!(f, "\n\nhint: {hint}")?;
        }
        Ok(())
    }
}

impl From<std::io::Error> for CliError {
    fn from(err: std::io::Error) -> Self {
        CliError::internal("an I/O operation failed").with_source(&err)
    }
}
