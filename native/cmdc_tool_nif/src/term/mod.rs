//! Reading BEAM terms: the bottom layer of the NIF crate (it uses nothing of the crate but
//! `layout.rs`). Every other layer reads and builds terms through these files.
//!
//! Rules: maps with binary or atom keys become objects; lists become arrays; UTF-8 binaries become
//! strings; integers (any size) and floats become numbers; `true`/`false`/`nil` become booleans and
//! null; any other atom becomes its name as a string (as Jason does). Everything else (tuples, pids,
//! ports, refs, funs, improper lists, non-UTF-8 binaries, keys of other types, and the same key given
//! twice as atom and string) is an error that names its JSON Pointer path.
//!
//! - `budget`: the work allowance of one call ([`Budget`], [`TermError`]) and what the VM is told.
//! - `raw`: term helpers over `enif_*` (binaries, list cells, atom names, term types, maps of
//!   strings).
//! - `display`: a term in words for an error message.
//! - `path`: JSON Pointer paths and the errors that name them.
//! - `convert`: terms to and from `serde_json::Value`.

pub mod budget;
pub mod convert;
pub mod display;
pub mod path;
pub mod raw;

pub use budget::{
    bignum_units, on_normal_scheduler, report_units, Budget, TermError, DIRTY_BUDGET, MAX_DEPTH,
    NORMAL_BIG_WORDS, NORMAL_BUDGET,
};
pub use convert::{
    big_to_f64, from_value, number_term, read_key, read_scalar, to_value, Key, Scalar,
};
pub use display::{describe, shown};
pub use path::{duplicate_key, enter, not_json, pointer, Seg};
pub use raw::{atom_name, binary, read_big, string_map, Cells};
