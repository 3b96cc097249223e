//! Paths into a term (JSON Pointers, built only when an error names one) and the errors that
//! name a path.

use rustler::Term;

use super::budget::{TermError, MAX_DEPTH};
use super::display::{describe, key_name, shown};

/// One step of a path: kept as terms so the happy path allocates nothing for paths.
#[derive(Clone, Copy)]
pub enum Seg<'a> {
    Key(Term<'a>),
    Index(usize),
}

/// Renders a path as a JSON Pointer (RFC 6901), only when an error needs it.
pub fn pointer(path: &[Seg]) -> String {
    let mut out = String::new();
    for seg in path {
        out.push('/');
        match seg {
            Seg::Index(i) => out.push_str(&i.to_string()),
            Seg::Key(term) => {
                let name = key_name(*term).unwrap_or_else(|| shown(*term));
                out.push_str(&name.replace('~', "~0").replace('/', "~1"));
            }
        }
    }
    out
}

pub fn not_json(term: Term, path: &[Seg]) -> TermError {
    TermError::NotJson {
        path: pointer(path),
        reason: describe(term),
    }
}

/// A container at `path` (its ancestors): refused when it would be the 129th level.
#[inline]
pub fn enter(path: &[Seg]) -> Result<(), TermError> {
    if path.len() >= MAX_DEPTH {
        Err(TermError::TooDeep {
            path: pointer(path),
        })
    } else {
        Ok(())
    }
}

pub fn duplicate_key(name: &str, path: &[Seg]) -> TermError {
    TermError::NotJson {
        path: pointer(path),
        reason: format!(
            "key \"{name}\" is given twice (as an atom and as a string): keep one of them"
        ),
    }
}
