//! The one way options reach a NIF: the Elixir side passes a map with atom keys; the NIF decodes
//! it into this crate's `#[derive(NifMap)]` struct for that NIF (the wire shape: times in ms,
//! paths as strings) with [`decode`], and that struct's one `From` (`TryFrom` when converting
//! can fail, e.g. schema documents that must be JSON) turns it into the core's options
//! (`Duration`s, `PathBuf`s). A map of the wrong shape is a bug of the Elixir caller;
//! it still answers `{:error, message}` naming the NIF and the expected shape, never `badarg`.

use cmdc_tool_core::providers::Format;
use rustler::{Decoder, Term};

use crate::error::{Error, Result};

/// An options map one NIF takes.
pub trait Options<'a>: Decoder<'a> {
    /// The NIF, for the error message.
    const NIF: &'static str;
    /// The map's keys and their types, for the error message.
    const EXPECTED: &'static str;
}

/// Decodes the options map `term` of `O::NIF`.
pub fn decode<'a, O: Options<'a>>(term: Term<'a>) -> Result<O> {
    term.decode().map_err(|_| {
        Error::Message(format!(
            "{}: expected a map with {}, got: {}",
            O::NIF,
            O::EXPECTED,
            crate::term::shown(term)
        ))
    })
}

/// A provider format given as an atom (`:openai`, `:gemini`, ...).
pub fn format(format: Term) -> Result<Format> {
    format
        .atom_to_string()
        .ok()
        .and_then(|f| Format::parse(&f))
        .ok_or_else(|| {
            let labels: Vec<String> = cmdc_tool_core::providers::FORMATS
                .iter()
                .map(|s| format!(":{}", s.label))
                .collect();
            Error::Message(format!(
                "unknown format {}; expected one of {}",
                crate::term::shown(format),
                labels.join(", ")
            ))
        })
}
