//! Term helpers over `enif_*`: a binary's bytes, a new binary, a term's type, list cells, atom
//! names, big integers, maps of strings. Nothing here knows JSON.
#![allow(unsafe_code)]

use std::mem::MaybeUninit;
use std::os::raw::c_int;

use rustler::sys::{
    enif_get_list_cell, enif_inspect_binary, enif_make_new_binary, ErlNifBinary, ErlNifEnv,
    ErlNifTerm,
};
use rustler::types::BigInt;
use rustler::{Encoder, Env, Term, TermType};

use super::budget::{bignum_units, Budget, TermError, NORMAL_BIG_WORDS};

/// A new binary holding `bytes` (one `enif_make_new_binary`: rustler's `NewBinary` measured at
/// three times its cost, which an error list of nine failures pays 36 times).
pub fn binary<'a>(env: Env<'a>, bytes: &[u8]) -> Term<'a> {
    let mut term = MaybeUninit::<ErlNifTerm>::uninit();
    // SAFETY: the new binary has room for `bytes`; the term belongs to `env`.
    unsafe {
        let data = enif_make_new_binary(env.as_c_arg(), bytes.len(), term.as_mut_ptr());
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), data, bytes.len());
        Term::new(env, term.assume_init())
    }
}

/// A binary's bytes if `term` is one (bit strings are not), through the API. The binary belongs
/// to the caller's term, alive for the whole NIF call: callers keep the slice no longer.
#[inline]
pub(crate) fn inspect_bytes(env: *mut ErlNifEnv, term: ErlNifTerm) -> Option<&'static [u8]> {
    let mut bin = MaybeUninit::<ErlNifBinary>::uninit();
    if unsafe { enif_inspect_binary(env, term, bin.as_mut_ptr()) } == 0 {
        return None;
    }
    Some(unsafe {
        let bin = bin.assume_init();
        std::slice::from_raw_parts(bin.data, bin.size)
    })
}

/// `enif_term_type`, read as a plain `int`: a future term type must not become an invalid enum.
#[inline]
pub(crate) fn term_type(env: *mut ErlNifEnv, term: ErlNifTerm) -> c_int {
    type TermTypeFn = unsafe extern "C" fn(*mut ErlNifEnv, ErlNifTerm) -> c_int;
    // SAFETY: the C function returns an `int`; only the Rust-side return type differs.
    let f: TermTypeFn = unsafe {
        std::mem::transmute::<*const (), TermTypeFn>(rustler::sys::enif_term_type as *const ())
    };
    unsafe { f(env, term) }
}

// `ErlNifTermType` values (erl_nif.h).
pub(crate) const TYPE_ATOM: c_int = 1;
pub(crate) const TYPE_FLOAT: c_int = 3;
pub(crate) const TYPE_INTEGER: c_int = 5;
pub(crate) const TYPE_LIST: c_int = 6;
pub(crate) const TYPE_MAP: c_int = 7;

/// Reads an integer beyond 64 bits, charging its conversion to `budget` first: a normal
/// scheduler takes only small ones (its size known without copying it), a dirty one up to the
/// budget.
pub fn read_big(term: Term, budget: &mut Budget) -> Result<BigInt, TermError> {
    if !budget.is_dirty() {
        match crate::layout::big_words(term.as_c_arg()) {
            Some(words) if words <= NORMAL_BIG_WORDS => budget.spend(bignum_units(words))?,
            _ => return Err(TermError::Yield),
        }
        return term.decode::<BigInt>().map_err(|_| TermError::Yield);
    }
    let big: BigInt = term.decode().map_err(|_| TermError::from(budget.over()))?;
    budget.spend(bignum_units(big.bits() as usize / 64 + 1))?;
    Ok(big)
}

/// An atom's name as UTF-8 text, for every atom: the NIF API of OTP 25 reads names only as
/// Latin-1, so other names are read from the atom's external format (`ATOM_UTF8_EXT`).
pub fn atom_name(term: Term) -> Option<String> {
    if let Ok(name) = term.atom_to_string() {
        return Some(name);
    }
    if term.get_type() != TermType::Atom {
        return None;
    }
    let etf = term.to_binary();
    let bytes = etf.as_slice();
    // 131, then ATOM_UTF8_EXT (118, 2-byte length) or SMALL_ATOM_UTF8_EXT (119, 1-byte).
    let (len, at) = match bytes.get(1)? {
        118 | 100 => (
            u16::from_be_bytes([*bytes.get(2)?, *bytes.get(3)?]) as usize,
            4,
        ),
        119 | 115 => (*bytes.get(2)? as usize, 3),
        _ => return None,
    };
    let name = bytes.get(at..at + len)?;
    match bytes[1] {
        118 | 119 => std::str::from_utf8(name).ok().map(str::to_owned),
        _ => Some(name.iter().map(|&b| b as char).collect()),
    }
}

/// The cells of a proper list, read without counting it first (counting a long list is itself
/// long work): `None` marks an improper tail.
pub struct Cells<'a> {
    term: Term<'a>,
}

impl<'a> Cells<'a> {
    pub fn new(term: Term<'a>) -> Self {
        Cells { term }
    }
}

impl<'a> Iterator for Cells<'a> {
    type Item = Option<Term<'a>>;

    fn next(&mut self) -> Option<Option<Term<'a>>> {
        if self.term.is_empty_list() {
            return None;
        }
        let env = self.term.get_env();
        let mut head = MaybeUninit::<ErlNifTerm>::uninit();
        let mut tail = MaybeUninit::<ErlNifTerm>::uninit();
        let ok = unsafe {
            enif_get_list_cell(
                env.as_c_arg(),
                self.term.as_c_arg(),
                head.as_mut_ptr(),
                tail.as_mut_ptr(),
            )
        };
        if ok == 0 {
            // Not a cell and not `[]`: an improper tail. End the iteration after saying so.
            self.term = Vec::<Term>::new().encode(env);
            return Some(None);
        }
        unsafe {
            self.term = Term::new(env, tail.assume_init());
            Some(Some(Term::new(env, head.assume_init())))
        }
    }
}

/// A map with atom keys and string values (error and warning reports), `N` of them (distinct):
/// made from arrays on the stack, with no allocation besides the terms (a validation error list
/// is nine of these).
pub fn string_map<'a, const N: usize>(env: Env<'a>, pairs: [(rustler::Atom, &str); N]) -> Term<'a> {
    let keys = pairs.map(|(k, _)| k.as_c_arg());
    let values = pairs.map(|(_, v)| binary(env, v.as_bytes()).as_c_arg());
    let mut map = MaybeUninit::<ErlNifTerm>::uninit();
    // SAFETY: both arrays hold N terms of this env.
    let made = unsafe {
        rustler::sys::enif_make_map_from_arrays(
            env.as_c_arg(),
            keys.as_ptr(),
            values.as_ptr(),
            N,
            map.as_mut_ptr(),
        )
    };
    if made == 0 {
        // Not reached: every caller names distinct atoms.
        return rustler::types::map::map_new(env);
    }
    unsafe { Term::new(env, map.assume_init()) }
}
