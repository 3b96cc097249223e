//! The core's one error type. Every fallible function of this crate returns
//! `Result<_, Error>`; the variant says which kind of input or operation failed, and `Display`
//! is the message a person or a model reads (the NIF crate passes it on unchanged).

use std::fmt;
use std::path::PathBuf;

/// What went wrong, by kind. Each variant carries the full, actionable message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// A JSON Schema that does not compile, an unknown draft, a `$ref` that cannot resolve.
    Schema(String),
    /// A tool name or description that breaks the rules every provider applies.
    Tool(String),
    /// Text that should be JSON (a manifest, a trust list, a script's description) and is not,
    /// or JSON of the wrong shape.
    Json(String),
    /// Reading or writing a file failed.
    Io { path: PathBuf, message: String },
    /// Starting, talking to or stopping a process failed (exec, script workers).
    Process(String),
    /// Any other input the caller can correct (a bad option, an unsupported file kind).
    Invalid(String),
    /// A script tool's call that failed: `kind` says how (`exception`, `timeout`, `cancelled`,
    /// `crashed`, `interpreter`, ...), `log` is what the script printed meanwhile.
    Script {
        kind: String,
        message: String,
        log: String,
    },
}

/// The core's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// `Error::Io` for `path` from an `std::io::Error`.
    pub fn io(path: impl Into<PathBuf>, e: &std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            message: e.to_string(),
        }
    }

    /// `Error::Script` of `kind` with `message` and the script's `log`.
    pub fn script(kind: &str, message: impl Into<String>, log: impl Into<String>) -> Self {
        Error::Script {
            kind: kind.to_owned(),
            message: message.into(),
            log: log.into(),
        }
    }

    /// The message without the kind: what `Display` prints.
    pub fn message(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Schema(m)
            | Error::Tool(m)
            | Error::Json(m)
            | Error::Process(m)
            | Error::Invalid(m)
            | Error::Script { message: m, .. } => f.write_str(m),
            Error::Io { path, message } => write!(f, "{}: {message}", path.display()),
        }
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_the_message_as_written() {
        assert_eq!(
            Error::Schema("invalid schema: x".into()).to_string(),
            "invalid schema: x"
        );
        let e = std::io::Error::new(std::io::ErrorKind::NotFound, "gone");
        assert_eq!(Error::io("/a/b", &e).to_string(), "/a/b: gone");
    }
}
