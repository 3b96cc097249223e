//! The NIF crate's one error type and the one place errors become terms.
//!
//! Every fallible NIF returns `Result<T, Error>`: rustler encodes `Ok(v)` as `{:ok, v}` and
//! `Err(e)` as `{:error, reason}`, with `reason` made here by [`Encoder for Error`]. The
//! Elixir side documents these reasons per function family (see `docs/DEVELOPING.md`).

use cmdc_tool_core::registry::{Holder, RegistryError};
use cmdc_tool_core::schema::{Failure, Failures, MAX_ERRORS};
use rustler::{Atom, Encoder, Env, Term};

use crate::atoms;
use crate::term::TermError;

/// Why a NIF did not do what it was asked, by kind.
#[derive(Debug)]
pub enum Error {
    /// The input is over a normal scheduler's ~1 ms budget: the Elixir side calls the `_dirty`
    /// twin with the same arguments (`CMDC.Tool.Native.with_dirty/1`). Reason `:yield`.
    Yield,
    /// A failure of the core: reason is its message (a binary), except a failed script call:
    /// `%{kind: _, message: _, log: _}` (binaries).
    Core(cmdc_tool_core::error::Error),
    /// Input refused at the boundary (a term that is not JSON, an unknown option value):
    /// reason is the message (a binary).
    Message(String),
    /// Arguments that break the schema, one entry per failure: reason is
    /// `[%{path: _, keyword: _, message: _, schema_path: _}]` (binaries).
    Invalid(Failures),
    /// No tool of that name: `{:not_found, name, suggestions}`.
    NotFound {
        name: String,
        suggestions: Vec<String>,
    },
    /// A tool the registry refuses: `{:invalid_tool, module, message}`.
    InvalidTool { module: Atom, message: String },
    /// A name already taken: `{:conflict, name, module | :reserved}`.
    Conflict { name: String, holder: Holder<Atom> },
    /// A term that is not JSON where JSON text is made: `{path, message}` (path a JSON Pointer).
    NotJson { path: String, message: String },
    /// The registry changed since the caller read its generation: reason `:stale`.
    Stale,
    /// Nothing cached for that key (`crate::modules`): reason `:miss`, the caller compiles and
    /// stores it.
    Miss,
}

/// The result of a fallible NIF.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A process or OS failure of the NIF itself (its runtime, a descriptor).
    pub fn process(message: impl Into<String>) -> Self {
        Error::Core(cmdc_tool_core::error::Error::Process(message.into()))
    }

    /// `{:error, reason}`, for errors sent as messages rather than returned.
    pub fn to_tuple<'a>(&self, env: Env<'a>) -> Term<'a> {
        (atoms::error(), self).encode(env)
    }

    /// Arguments that are not JSON, as the one validation failure they cause.
    pub fn not_json(e: &TermError) -> Self {
        match e {
            TermError::Yield => Error::Yield,
            e => Error::Invalid(Failures::json(e.path(), &e.message())),
        }
    }

    /// A term that should be JSON and is not, as a message: "`what` at /path: reason".
    pub fn bad_term(what: &str, e: &TermError) -> Self {
        match e {
            TermError::Yield => Error::Yield,
            e if e.path().is_empty() => Error::Message(format!("{what}: {}", e.message())),
            e => Error::Message(format!("{what} at {}: {}", e.path(), e.message())),
        }
    }
}

impl From<cmdc_tool_core::error::Error> for Error {
    fn from(e: cmdc_tool_core::error::Error) -> Self {
        Error::Core(e)
    }
}

impl From<RegistryError<Atom>> for Error {
    fn from(e: RegistryError<Atom>) -> Self {
        match e {
            RegistryError::Invalid { module, message } => Error::InvalidTool { module, message },
            RegistryError::Conflict { name, holder } => Error::Conflict { name, holder },
        }
    }
}

fn failure_term<'a>(env: Env<'a>, f: Failure) -> Term<'a> {
    crate::term::string_map(
        env,
        [
            (atoms::path(), f.path),
            (atoms::keyword(), f.keyword),
            (atoms::message(), f.message),
            (atoms::schema_path(), f.schema_path),
        ],
    )
}

/// The failures as a list of maps, made from an array on the stack (`MAX_ERRORS` of them at
/// most, from a validation).
fn failures_term<'a>(env: Env<'a>, failures: &Failures) -> Term<'a> {
    if failures.len() > MAX_ERRORS {
        let list: Vec<Term<'a>> = failures.iter().map(|f| failure_term(env, f)).collect();
        return list.encode(env);
    }
    let mut items = [atoms::ok().as_c_arg(); MAX_ERRORS];
    for (item, f) in items.iter_mut().zip(failures.iter()) {
        *item = failure_term(env, f).as_c_arg();
    }
    // SAFETY: the first `len` items are terms of this env.
    unsafe {
        let list = rustler::sys::enif_make_list_from_array(
            env.as_c_arg(),
            items.as_ptr(),
            failures.len() as u32,
        );
        Term::new(env, list)
    }
}

impl Encoder for Error {
    fn encode<'a>(&self, env: Env<'a>) -> Term<'a> {
        match self {
            Error::Yield => atoms::r#yield().encode(env),
            Error::Stale => atoms::stale().encode(env),
            Error::Miss => atoms::miss().encode(env),
            Error::NotJson { path, message } => (path, message).encode(env),
            Error::Core(cmdc_tool_core::error::Error::Script { kind, message, log }) => {
                crate::term::string_map(
                    env,
                    [
                        (atoms::kind(), kind.as_str()),
                        (atoms::message(), message.as_str()),
                        (atoms::log(), log.as_str()),
                    ],
                )
            }
            Error::Core(e) => e.to_string().encode(env),
            Error::Message(m) => m.encode(env),
            Error::Invalid(failures) => failures_term(env, failures),
            Error::NotFound { name, suggestions } => {
                (atoms::not_found(), name, suggestions).encode(env)
            }
            Error::InvalidTool { module, message } => {
                (atoms::invalid_tool(), *module, message).encode(env)
            }
            Error::Conflict { name, holder } => {
                let holder = match holder {
                    Holder::Module(m) => m.encode(env),
                    Holder::Reserved => atoms::reserved().encode(env),
                };
                (atoms::conflict(), name, holder).encode(env)
            }
        }
    }
}
