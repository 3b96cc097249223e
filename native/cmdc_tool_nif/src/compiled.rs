//! BEAM terms as instances of a compiled schema program (`cmdc_tool_core::compiled`): the
//! program reads the caller's term as it checks it, with no index in between.
//!
//! Common shapes (small integers, lists, small maps, byte-aligned binaries) are read straight from
//! memory when `layout.rs` verified this emulator's layout, everything else through `enif_*`.
//! Anything the program does not decide (invalid, not JSON, big integers, atoms with non-ASCII
//! names, a map naming one key as atom and string) goes to the `jsonschema` path in `schema.rs`,
//! which reports errors: this file has no error path of its own.
#![allow(unsafe_code)]

use std::mem::MaybeUninit;
use std::os::raw::{c_char, c_uint};

use cmdc_tool_core::compiled::{Budget, Instance, Program, Stop, ValueKind};
use cmdc_tool_core::tape::is_ascii;
use rustler::sys::{
    enif_get_atom, enif_get_double, enif_get_int64, enif_get_list_cell, enif_get_map_size,
    enif_is_empty_list, enif_map_iterator_create, enif_map_iterator_destroy,
    enif_map_iterator_get_pair, enif_map_iterator_next, ErlNifCharEncoding, ErlNifEnv,
    ErlNifMapIterator, ErlNifMapIteratorEntry, ErlNifTerm,
};
use rustler::Term;

use crate::atoms;
use crate::layout::{self, Layout, Shape};
use crate::term::raw::{
    inspect_bytes, term_type, TYPE_ATOM, TYPE_FLOAT, TYPE_INTEGER, TYPE_LIST, TYPE_MAP,
};
use crate::term::{DIRTY_BUDGET, NORMAL_BUDGET};

/// Work units of the program on a normal scheduler. A unit here (one value checked in place)
/// costs a few ns where the index walk's costs tens, so the same ~0.3 ms allows more of them.
pub const NORMAL_UNITS: i64 = NORMAL_BUDGET * 4;

/// Longest key read here (longer keys are rare: the other path reads them).
const MAX_KEY_BYTES: usize = 4096;
/// Members of a map mixing atom and binary keys checked here for a name given twice.
const MAX_MIXED_KEYS: usize = 64;

/// The program's answer for a term: `Ok(())` valid, else why it did not decide.
pub fn run(program: &Program, term: Term, dirty: bool) -> Result<(), Stop> {
    run_with(program, term, dirty, layout::get())
}

/// [`run`] on a normal scheduler, telling the VM the time it used (its units converted to the
/// ~100 ns units of `term::report_units`).
pub fn run_reported(program: &Program, term: Term) -> Result<(), Stop> {
    let mut spent = 0;
    let result = run_spending(program, term, false, layout::get(), &mut spent);
    crate::term::report_units(term.get_env(), spent * NORMAL_BUDGET / NORMAL_UNITS);
    result
}

/// Where [`run_slice`] stopped.
pub enum Slice<'a> {
    /// Every element from the start on is valid, and so is the list's length.
    Done,
    /// Valid so far: the rest of the list (a tail of the caller's) and its first index.
    More(Term<'a>, usize),
    /// Not decided a slice at a time: the program does not check arrays element by element,
    /// an element is not valid (or not read here), the list is improper, or one element alone
    /// is over a normal call's budget. The whole list goes to [`run`] and the error path.
    Undecided,
}

/// Checks elements of `list` (the top-level array's elements from index `start` on) on a
/// normal scheduler until its budget is spent, telling the VM the time used: at least one
/// element per call, so a caller looping over the rest always advances (`Schema.validate/2`).
pub fn run_slice<'a>(program: &Program, list: Term<'a>, start: usize) -> Slice<'a> {
    if !program.slices_arrays() {
        return Slice::Undecided;
    }
    let reader = Reader {
        env: list.get_env().as_c_arg(),
        layout: layout::get(),
    };
    let mut budget = Budget::with(NORMAL_UNITS, false);
    let (mut cell, mut index) = (list.as_c_arg(), start);
    let slice = loop {
        let Some(next) = reader.cell(cell) else {
            break Slice::Undecided;
        };
        let Some((head, tail)) = next else {
            let len_ok = program.array_len_ok(index as u64);
            break if len_ok {
                Slice::Done
            } else {
                Slice::Undecided
            };
        };
        let element = Raw {
            term: head,
            reader: &reader,
        };
        match program.element(index, element, &mut budget) {
            Ok(()) => (cell, index) = (tail, index + 1),
            // Over the budget: this element starts the next slice.
            Err(Stop::Yield) if index > start => {
                // SAFETY: `cell` is a tail of `list`, alive for the NIF call.
                break Slice::More(unsafe { Term::new(list.get_env(), cell) }, index);
            }
            Err(_) => break Slice::Undecided,
        }
    };
    let spent = NORMAL_UNITS - budget.remaining.max(0);
    crate::term::report_units(list.get_env(), spent * NORMAL_BUDGET / NORMAL_UNITS);
    slice
}

/// `run` through the `enif_*` API only (the tests compare both).
pub fn run_api(program: &Program, term: Term, dirty: bool) -> Result<(), Stop> {
    run_with(program, term, dirty, None)
}

fn run_with(
    program: &Program,
    term: Term,
    dirty: bool,
    layout: Option<Layout>,
) -> Result<(), Stop> {
    run_spending(program, term, dirty, layout, &mut 0)
}

fn run_spending(
    program: &Program,
    term: Term,
    dirty: bool,
    layout: Option<Layout>,
    spent: &mut i64,
) -> Result<(), Stop> {
    let reader = Reader {
        env: term.get_env().as_c_arg(),
        layout,
    };
    let start = if dirty { DIRTY_BUDGET } else { NORMAL_UNITS };
    let mut budget = Budget::with(start, dirty);
    let result = program.validate(
        Raw {
            term: term.as_c_arg(),
            reader: &reader,
        },
        &mut budget,
    );
    *spent = start - budget.remaining;
    result
}

struct Reader {
    env: *mut ErlNifEnv,
    layout: Option<Layout>,
}

impl Reader {
    /// A list cell's head and tail, `Some(None)` for `[]`, `None` for anything else.
    fn cell(&self, term: ErlNifTerm) -> Option<Option<(ErlNifTerm, ErlNifTerm)>> {
        if let Some(layout) = self.layout {
            return match layout.shape(term) {
                Shape::Cons(head, tail) => Some(Some((layout::term(head), layout::term(tail)))),
                Shape::Nil => Some(None),
                _ => None,
            };
        }
        let (mut head, mut tail) = (MaybeUninit::uninit(), MaybeUninit::uninit());
        // SAFETY: `term` is alive for the NIF call; the cell is read only when the call says so.
        unsafe {
            if enif_get_list_cell(self.env, term, head.as_mut_ptr(), tail.as_mut_ptr()) != 0 {
                Some(Some((head.assume_init(), tail.assume_init())))
            } else if enif_is_empty_list(self.env, term) != 0 {
                Some(None)
            } else {
                None
            }
        }
    }
}

/// One term of the caller's, alive for the NIF call.
#[derive(Clone, Copy)]
struct Raw<'r> {
    term: ErlNifTerm,
    reader: &'r Reader,
}

#[inline(always)]
fn text(bytes: &[u8]) -> Option<&str> {
    if is_ascii(bytes) {
        // SAFETY: ASCII is UTF-8.
        Some(unsafe { std::str::from_utf8_unchecked(bytes) })
    } else {
        std::str::from_utf8(bytes).ok()
    }
}

impl<'r> Raw<'r> {
    #[inline(always)]
    fn at(self, term: ErlNifTerm) -> Raw<'r> {
        Raw {
            term,
            reader: self.reader,
        }
    }

    /// A binary's bytes through the API.
    #[inline]
    fn bytes(self) -> Option<&'static [u8]> {
        inspect_bytes(self.reader.env, self.term)
    }

    #[cold]
    #[inline(never)]
    fn api_kind(self) -> ValueKind<'static> {
        if let Some(bytes) = self.bytes() {
            return ValueKind::Str(bytes);
        }
        let env = self.reader.env;
        match term_type(env, self.term) {
            TYPE_INTEGER => {
                let mut i = 0i64;
                if unsafe { enif_get_int64(env, self.term, &mut i) } != 0 {
                    ValueKind::Int(i)
                } else {
                    // Past i64: the `jsonschema` path reads these.
                    ValueKind::Other
                }
            }
            TYPE_FLOAT => {
                let mut f = 0f64;
                if unsafe { enif_get_double(env, self.term, &mut f) } != 0 {
                    ValueKind::Float(f)
                } else {
                    ValueKind::Other
                }
            }
            TYPE_ATOM => {
                if self.term == atoms::true_atom().as_c_arg() {
                    ValueKind::Bool(true)
                } else if self.term == atoms::false_atom().as_c_arg() {
                    ValueKind::Bool(false)
                } else if self.term == atoms::nil().as_c_arg() {
                    ValueKind::Null
                } else {
                    ValueKind::Name
                }
            }
            TYPE_LIST => ValueKind::Array,
            TYPE_MAP => ValueKind::Object,
            _ => ValueKind::Other,
        }
    }

    /// A member name not read directly: a binary's checked text, or an atom's name
    /// written into `buf`; `None` for anything else (the other path names the problem).
    #[inline(never)]
    fn other_key(self, buf: &mut [u8; 256]) -> Option<(&str, bool)> {
        if let Some(bytes) = self.bytes() {
            // Keys are short; a long one goes to the other path, which charges its bytes.
            if bytes.len() > MAX_KEY_BYTES {
                return None;
            }
            return text(bytes).map(|s| (s, false));
        }
        if term_type(self.reader.env, self.term) != TYPE_ATOM {
            return None;
        }
        self.name(buf).map(|s| (s, true))
    }

    fn api_members<F: FnMut(&str, Self) -> Result<(), Stop>>(self, f: F) -> Result<(), Stop> {
        let kinds = self.api_members_unchecked(f)?;
        self.unique_names(kinds)
    }

    /// The members through the map iterator; which kinds of keys it met.
    fn api_members_unchecked<F: FnMut(&str, Self) -> Result<(), Stop>>(
        self,
        mut f: F,
    ) -> Result<KeyKinds, Stop> {
        let env = self.reader.env;
        let mut iter = MaybeUninit::<ErlNifMapIterator>::uninit();
        // The iterator is used where the C side wrote it.
        let iter = iter.as_mut_ptr();
        let created = unsafe {
            enif_map_iterator_create(
                env,
                self.term,
                iter,
                ErlNifMapIteratorEntry::ERL_NIF_MAP_ITERATOR_HEAD,
            )
        };
        if created == 0 {
            return Err(Stop::Fallback);
        }
        let mut kinds = KeyKinds::default();
        let result = (|| {
            let (mut k, mut v) = (MaybeUninit::uninit(), MaybeUninit::uninit());
            while unsafe { enif_map_iterator_get_pair(env, iter, k.as_mut_ptr(), v.as_mut_ptr()) }
                != 0
            {
                let (key, value) = unsafe { (k.assume_init(), v.assume_init()) };
                self.member(key, value, &mut kinds, &mut f)?;
                unsafe { enif_map_iterator_next(env, iter) };
            }
            Ok(())
        })();
        unsafe { enif_map_iterator_destroy(env, iter) };
        result.map(|()| kinds)
    }

    /// Only a map mixing atom and binary keys can name one key twice (rare: checked after the
    /// members, allocating); such a map is not JSON and goes to the other path.
    #[inline]
    fn unique_names(self, kinds: KeyKinds) -> Result<(), Stop> {
        if !(kinds.atom && kinds.binary) {
            return Ok(());
        }
        self.names_differ()
    }

    #[cold]
    #[inline(never)]
    fn names_differ(self) -> Result<(), Stop> {
        if self.object_len() > MAX_MIXED_KEYS {
            return Err(Stop::Fallback);
        }
        let mut names: Vec<String> = Vec::with_capacity(self.object_len());
        self.api_members_unchecked(|name, _| {
            names.push(name.to_owned());
            Ok(())
        })?;
        names.sort_unstable();
        if names.windows(2).any(|w| w[0] == w[1]) {
            Err(Stop::Fallback)
        } else {
            Ok(())
        }
    }

    #[inline(always)]
    fn member<F: FnMut(&str, Self) -> Result<(), Stop>>(
        self,
        key: ErlNifTerm,
        value: ErlNifTerm,
        kinds: &mut KeyKinds,
        f: &mut F,
    ) -> Result<(), Stop> {
        if let Some(layout) = self.reader.layout {
            if let Shape::Bytes(bytes) = layout.shape(key) {
                // Keys are short; a long one goes to the other path, which charges its bytes.
                if bytes.len() > MAX_KEY_BYTES {
                    return Err(Stop::Fallback);
                }
                kinds.binary = true;
                return f(text(bytes).ok_or(Stop::Fallback)?, self.at(value));
            }
        }
        self.other_member(key, value, kinds, f)
    }

    /// A member whose key is not read directly: another binary, or an atom.
    #[inline(never)]
    fn other_member<F: FnMut(&str, Self) -> Result<(), Stop>>(
        self,
        key: ErlNifTerm,
        value: ErlNifTerm,
        kinds: &mut KeyKinds,
        f: &mut F,
    ) -> Result<(), Stop> {
        let mut buf = [0u8; 256];
        let (name, atom) = self.at(key).other_key(&mut buf).ok_or(Stop::Fallback)?;
        kinds.atom |= atom;
        kinds.binary |= !atom;
        f(name, self.at(value))
    }

    fn api_elements<F: FnMut(usize, Self) -> Result<(), Stop>>(
        self,
        mut f: F,
    ) -> Result<usize, Stop> {
        let env = self.reader.env;
        let mut cell = self.term;
        let (mut head, mut tail) = (MaybeUninit::uninit(), MaybeUninit::uninit());
        let mut i = 0;
        while unsafe { enif_get_list_cell(env, cell, head.as_mut_ptr(), tail.as_mut_ptr()) } != 0 {
            let (h, t) = unsafe { (head.assume_init(), tail.assume_init()) };
            f(i, self.at(h))?;
            cell = t;
            i += 1;
        }
        if unsafe { enif_is_empty_list(env, cell) } == 0 {
            return Err(Stop::Fallback);
        }
        Ok(i)
    }
}

#[derive(Default)]
struct KeyKinds {
    atom: bool,
    binary: bool,
}

impl<'r> Instance<'r> for Raw<'r> {
    #[inline(always)]
    fn kind(self) -> ValueKind<'r> {
        if let Some(layout) = self.reader.layout {
            match layout.shape(self.term) {
                Shape::Bytes(bytes) => return ValueKind::Str(bytes),
                Shape::Small(i) => return ValueKind::Int(i),
                Shape::Map(..) => return ValueKind::Object,
                Shape::Cons(..) | Shape::Nil => return ValueKind::Array,
                // Atoms are immediates: true, false and nil are told apart without a call.
                Shape::Other if self.term == atoms::true_atom().as_c_arg() => {
                    return ValueKind::Bool(true)
                }
                Shape::Other if self.term == atoms::false_atom().as_c_arg() => {
                    return ValueKind::Bool(false)
                }
                Shape::Other if self.term == atoms::nil().as_c_arg() => return ValueKind::Null,
                Shape::Other => {}
            }
        }
        self.api_kind()
    }

    fn name(self, buf: &mut [u8; 256]) -> Option<&str> {
        let n = unsafe {
            enif_get_atom(
                self.reader.env,
                self.term,
                buf.as_mut_ptr() as *mut c_char,
                buf.len() as c_uint,
                ErlNifCharEncoding::ERL_NIF_LATIN1,
            )
        };
        // `n` counts the terminating NUL. Names beyond ASCII are left to the other path.
        let bytes = buf.get(..(n as usize).checked_sub(1)?)?;
        bytes.is_ascii().then(|| {
            // SAFETY: ASCII is UTF-8.
            unsafe { std::str::from_utf8_unchecked(bytes) }
        })
    }

    fn object_len(self) -> usize {
        if let Some(layout) = self.reader.layout {
            if let Shape::Map(keys, _) = layout.shape(self.term) {
                return keys.len();
            }
        }
        let mut size = 0usize;
        unsafe { enif_get_map_size(self.reader.env, self.term, &mut size) };
        size
    }

    #[inline]
    fn members<F: FnMut(&str, Self) -> Result<(), Stop>>(self, mut f: F) -> Result<(), Stop> {
        if let Some(layout) = self.reader.layout {
            if let Shape::Map(keys, values) = layout.shape(self.term) {
                let mut kinds = KeyKinds::default();
                for (&k, &v) in keys.iter().zip(values) {
                    self.member(layout::term(k), layout::term(v), &mut kinds, &mut f)?;
                }
                return self.unique_names(kinds);
            }
        }
        self.api_members(f)
    }

    #[inline]
    fn elements<F: FnMut(usize, Self) -> Result<(), Stop>>(self, mut f: F) -> Result<usize, Stop> {
        let Some(layout) = self.reader.layout else {
            return self.api_elements(f);
        };
        let mut cell = self.term;
        let mut i = 0;
        loop {
            match layout.shape(cell) {
                Shape::Cons(head, tail) => {
                    f(i, self.at(layout::term(head)))?;
                    cell = layout::term(tail);
                    i += 1;
                }
                Shape::Nil => return Ok(i),
                // An improper list.
                _ => return Err(Stop::Fallback),
            }
        }
    }
}
