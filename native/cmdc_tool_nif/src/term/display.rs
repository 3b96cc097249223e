//! A term in words, for error messages: what it is and its first characters.

use std::fmt::Write as _;

use rustler::types::MapIterator;
use rustler::{Term, TermType};

use super::raw::atom_name;

pub(super) fn key_name(term: Term) -> Option<String> {
    match term.get_type() {
        TermType::Binary => term
            .decode_as_binary()
            .ok()
            .map(|b| String::from_utf8_lossy(b.as_slice()).into_owned()),
        TermType::Atom => atom_name(term),
        _ => None,
    }
}

/// Characters of a term shown in an error message.
const SHOWN: usize = 60;

/// What a term is, in words a person reads in an error.
pub fn describe(term: Term) -> String {
    let kind = match term.get_type() {
        TermType::Tuple => "a tuple",
        TermType::Pid => "a pid",
        TermType::Port => "a port",
        TermType::Ref => "a reference",
        TermType::Fun => "a function",
        TermType::Binary => "a binary that is not valid UTF-8",
        TermType::List => "an improper list",
        _ => "a term",
    };
    format!("{kind} ({}) is not a JSON value", shown(term))
}

/// The start of a term in Erlang syntax, at most [`SHOWN`] characters: only that prefix is
/// formatted (a 300k-element tuple costs as much as a small one).
pub fn shown(term: Term) -> String {
    let mut out = String::new();
    show(term, &mut out, 0);
    if out.len() > SHOWN {
        let mut cut = SHOWN - 3;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out.truncate(cut);
        out.push_str("...");
    }
    out
}

/// Appends `term` to `out` until `out` is longer than [`SHOWN`].
fn show(term: Term, out: &mut String, depth: usize) {
    if out.len() > SHOWN || depth > 8 {
        out.push_str("...");
        return;
    }
    match term.get_type() {
        TermType::Tuple => {
            let mut arity = 0;
            let mut items = std::ptr::null();
            unsafe {
                rustler::sys::enif_get_tuple(
                    term.get_env().as_c_arg(),
                    term.as_c_arg(),
                    &mut arity,
                    &mut items,
                )
            };
            out.push('{');
            for i in 0..arity as usize {
                if out.len() > SHOWN {
                    out.push_str("...");
                    break;
                }
                if i > 0 {
                    out.push(',');
                }
                let item = unsafe { Term::new(term.get_env(), *items.add(i)) };
                show(item, out, depth + 1);
            }
            out.push('}');
        }
        TermType::List => {
            out.push('[');
            let mut rest = term;
            let mut first = true;
            while !rest.is_empty_list() {
                if out.len() > SHOWN {
                    out.push_str("...");
                    break;
                }
                if !first {
                    out.push(',');
                }
                first = false;
                match rest.list_get_cell() {
                    Ok((head, tail)) => {
                        show(head, out, depth + 1);
                        rest = tail;
                    }
                    Err(_) => {
                        out.push('|');
                        show(rest, out, depth + 1);
                        break;
                    }
                }
            }
            out.push(']');
        }
        TermType::Map => {
            out.push_str("#{");
            for (i, (k, v)) in MapIterator::new(term).into_iter().flatten().enumerate() {
                if out.len() > SHOWN {
                    out.push_str("...");
                    break;
                }
                if i > 0 {
                    out.push(',');
                }
                show(k, out, depth + 1);
                out.push_str(" => ");
                show(v, out, depth + 1);
            }
            out.push('}');
        }
        TermType::Binary => match term.decode_as_binary() {
            Ok(bin) => {
                let bytes = bin.as_slice();
                out.push_str("<<");
                for (i, b) in bytes.iter().take(SHOWN / 2).enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    let _ = write!(out, "{b}");
                }
                if bytes.len() > SHOWN / 2 {
                    out.push_str(",...");
                }
                out.push_str(">>");
            }
            // A bitstring.
            Err(_) => out.push_str("<<...>>"),
        },
        TermType::Atom => out.push_str(&atom_name(term).unwrap_or_default()),
        TermType::Integer => match term.decode::<i64>() {
            Ok(i) => {
                let _ = write!(out, "{i}");
            }
            Err(_) => out.push_str("<big integer>"),
        },
        // Floats, pids, ports, references and functions print in a few dozen characters.
        _ => {
            let _ = write!(out, "{term:?}");
        }
    }
}
