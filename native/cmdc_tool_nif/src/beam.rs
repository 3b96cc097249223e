//! The walker that reads a BEAM term into the in-place representation (`cmdc_tool_core::tape`,
//! the `jsonschema` crate's `Json` trait for terms), checking the JSON rules on the way: proper
//! lists, UTF-8 binaries, string or atom keys, no key given twice, depth and size budget.
//! Strings are borrowed from the caller's binaries; common shapes are read straight from memory
//! when `layout.rs` verified the emulator's layout, otherwise through `enif_*`.
//!
//! Why one walk into an index and not term accessors called by the validator: every `enif_*`
//! call costs a few ns and the validator asks each node several questions; the JSON check has to
//! read every node anyway. Why no error path during the walk: a walk that fails is rare; it is
//! repeated by `term::to_value`, which names the path and the reason, so the hot walk carries
//! no path and fails with a one-byte reason.
#![allow(unsafe_code)]

use std::mem::MaybeUninit;

use cmdc_tool_core::tape::{is_ascii, Item, Tape};
use rustler::sys::{
    enif_get_double, enif_get_int64, enif_get_list_cell, enif_get_map_size, enif_get_uint64,
    enif_is_empty_list, enif_map_iterator_create, enif_map_iterator_destroy,
    enif_map_iterator_get_pair, enif_map_iterator_next, ErlNifEnv, ErlNifMapIterator,
    ErlNifMapIteratorEntry, ErlNifTerm,
};
use rustler::{Env, Term};

use crate::atoms;
use crate::layout::{self, Layout, Shape};
use crate::term::raw::{
    inspect_bytes, term_type, TYPE_ATOM, TYPE_FLOAT, TYPE_INTEGER, TYPE_LIST, TYPE_MAP,
};
use crate::term::{self, Budget, TermError, MAX_DEPTH};

/// Reads a term under the JSON rules (see `term.rs`), within `budget`.
#[inline]
pub fn build<'a>(term: Term<'a>, budget: &mut Budget) -> Result<Tape<'a>, TermError> {
    build_with(term, budget, layout::get())
}

/// `build` through the `enif_*` API only (no direct reads): the tests compare both.
pub fn build_api<'a>(term: Term<'a>, budget: &mut Budget) -> Result<Tape<'a>, TermError> {
    build_with(term, budget, None)
}

fn build_with<'a>(
    term: Term<'a>,
    budget: &mut Budget,
    layout: Option<Layout>,
) -> Result<Tape<'a>, TermError> {
    let mut walker = Walker {
        env: term.get_env().as_c_arg(),
        term_env: term.get_env(),
        tape: Tape::begin(),
        remaining: budget.remaining,
        dirty: budget.is_dirty(),
        layout,
    };
    let walked = walker.value(term.as_c_arg(), 0, 0);
    budget.remaining = walker.remaining;
    match walked {
        Ok(()) => Ok(walker.tape),
        Err(Halt::Yield) => Err(TermError::Yield),
        Err(Halt::TooBig) => Err(TermError::TooBig),
        Err(Halt::Bad) => Err(explain(term, budget)),
    }
}

/// Why a walk stopped. `Bad` (not JSON, too deep) is explained by a second, slower walk.
#[derive(Debug)]
enum Halt {
    Bad,
    Yield,
    TooBig,
}

/// The error for a term the walk refused: `term::to_value` finds the same first problem and
/// names its path.
#[cold]
#[inline(never)]
fn explain(term: Term, budget: &Budget) -> TermError {
    let mut again = if budget.is_dirty() {
        Budget::dirty()
    } else {
        Budget::normal()
    };
    match term::to_value(term, &mut again) {
        Err(e) => e,
        // Both walks apply the same rules; this is only reached if they disagree.
        Ok(_) => TermError::NotJson {
            path: String::new(),
            reason: "the value is not JSON".into(),
        },
    }
}

struct Walker<'a> {
    env: *mut ErlNifEnv,
    term_env: Env<'a>,
    tape: Tape<'a>,
    /// Work units left (a copy of the budget's, written back when the walk ends).
    remaining: i64,
    dirty: bool,
    /// Direct reads of common shapes, when this emulator's layout checked out (`layout.rs`).
    layout: Option<Layout>,
}

impl<'a> Walker<'a> {
    /// `Budget::spend` with a one-byte error: the hot walk never builds a `TermError`.
    #[inline]
    fn spend(&mut self, units: i64) -> Result<(), Halt> {
        self.remaining -= units;
        if self.remaining >= 0 {
            Ok(())
        } else if self.dirty {
            Err(Halt::TooBig)
        } else {
            Err(Halt::Yield)
        }
    }

    /// A binary's bytes if `term` is one (not checked for UTF-8), through the API.
    #[inline]
    fn bytes(&self, term: ErlNifTerm) -> Option<&'static [u8]> {
        inspect_bytes(self.env, term)
    }

    /// Reads `term` into `slot`.
    fn value(&mut self, term: ErlNifTerm, slot: usize, depth: usize) -> Result<(), Halt> {
        self.spend(1)?;
        let env = self.env;
        if let Some(layout) = self.layout {
            match layout.shape(term) {
                Shape::Bytes(bytes) => return self.string(bytes, slot),
                Shape::Small(i) => {
                    self.tape.set(slot, Item::int(i));
                    return Ok(());
                }
                Shape::Map(keys, values) => return self.flatmap(keys, values, slot, depth),
                Shape::Cons(..) | Shape::Nil => return self.cells(layout, term, slot, depth),
                Shape::Other => {}
            }
        }
        // Most values are strings: try that first, classify only when it is not one.
        if let Some(bytes) = self.bytes(term) {
            return self.string(bytes, slot);
        }
        let item = match term_type(env, term) {
            TYPE_INTEGER => {
                let mut i = 0i64;
                if unsafe { enif_get_int64(env, term, &mut i) } != 0 {
                    Item::int(i)
                } else {
                    let mut u = 0u64;
                    if unsafe { enif_get_uint64(env, term, &mut u) } != 0 {
                        Item::uint(u)
                    } else {
                        self.big(term)?
                    }
                }
            }
            TYPE_FLOAT => {
                let mut f = 0f64;
                unsafe { enif_get_double(env, term, &mut f) };
                Item::float(f)
            }
            TYPE_ATOM => {
                if term == atoms::true_atom().as_c_arg() {
                    Item::boolean(true)
                } else if term == atoms::false_atom().as_c_arg() {
                    Item::boolean(false)
                } else if term == atoms::nil().as_c_arg() {
                    Item::NULL
                } else {
                    {
                        let name = self.atom_name(term)?;
                        self.tape.name(name)
                    }
                }
            }
            TYPE_LIST => return self.list(term, slot, depth),
            TYPE_MAP => return self.map(term, slot, depth),
            _ => return Err(Halt::Bad),
        };
        self.tape.set(slot, item);
        Ok(())
    }

    #[inline]
    fn string(&mut self, bytes: &'a [u8], slot: usize) -> Result<(), Halt> {
        let (string, ascii) = self.text(bytes)?;
        self.tape.set_str(slot, string, ascii);
        Ok(())
    }

    /// The stop for work over the budget.
    #[inline]
    fn over(&self) -> Halt {
        if self.dirty {
            Halt::TooBig
        } else {
            Halt::Yield
        }
    }

    /// A container with `depth` ancestors and `size` children: refused as the 129th level, and
    /// over the budget before any slot is reserved for its children.
    #[inline]
    fn enter(&mut self, depth: usize, size: usize) -> Result<(), Halt> {
        if depth >= MAX_DEPTH {
            return Err(Halt::Bad);
        }
        if size as i64 > self.remaining {
            return Err(self.over());
        }
        Ok(())
    }

    /// Checked text of a binary, and whether it is all ASCII.
    #[inline(always)]
    fn text(&mut self, bytes: &'a [u8]) -> Result<(&'a str, bool), Halt> {
        self.spend((bytes.len() >> 7) as i64)?;
        if is_ascii(bytes) {
            // SAFETY: ASCII is UTF-8.
            return Ok((unsafe { std::str::from_utf8_unchecked(bytes) }, true));
        }
        std::str::from_utf8(bytes)
            .map(|s| (s, false))
            .map_err(|_| Halt::Bad)
    }

    /// A list read cell by cell from memory (see `layout.rs`).
    fn cells(
        &mut self,
        layout: Layout,
        term: ErlNifTerm,
        slot: usize,
        depth: usize,
    ) -> Result<(), Halt> {
        // Counted only as far as the budget reaches: a long list yields after its first cells.
        let mut len = 0usize;
        let mut cell = term;
        loop {
            match layout.shape(cell) {
                Shape::Cons(_, tail) => {
                    len += 1;
                    if len as i64 > self.remaining {
                        return Err(self.over());
                    }
                    cell = layout::term(tail);
                }
                Shape::Nil => break,
                // An improper list.
                _ => return Err(Halt::Bad),
            }
        }
        self.enter(depth, len)?;
        let start = self.tape.reserve(len);
        let mut cell = term;
        for i in start..start + len {
            let Shape::Cons(head, tail) = layout.shape(cell) else {
                return Err(Halt::Bad);
            };
            self.value(layout::term(head), i, depth + 1)?;
            cell = layout::term(tail);
        }
        self.tape.set(slot, Item::array(start, len));
        Ok(())
    }

    /// A small map read from memory (see `layout.rs`).
    fn flatmap(
        &mut self,
        keys: &[usize],
        values: &[usize],
        slot: usize,
        depth: usize,
    ) -> Result<(), Halt> {
        let size = keys.len();
        self.enter(depth, size)?;
        let start = self.tape.reserve(size);
        let (mut atom_keys, mut binary_keys) = (false, false);
        for (i, (&key, &value)) in (start..).zip(keys.iter().zip(values)) {
            let atom = self.key(layout::term(key), i)?;
            atom_keys |= atom;
            binary_keys |= !atom;
            self.value(layout::term(value), i, depth + 1)?;
        }
        self.finish_map(slot, start, size, atom_keys && binary_keys)
    }

    /// Names member `slot` after `key` (a binary's text or an atom's name): whether it was an
    /// atom. Inlined, with the name written here: returned through memory, a name measured as a
    /// store-forwarding stall.
    #[inline(always)]
    fn key(&mut self, key: ErlNifTerm, slot: usize) -> Result<bool, Halt> {
        let bytes = match self.layout.map(|layout| layout.shape(key)) {
            Some(Shape::Bytes(bytes)) => bytes,
            _ => return self.other_key(key, slot),
        };
        let (name, _) = self.text(bytes)?;
        self.tape.set_key(slot, name);
        Ok(false)
    }

    /// A key not read directly: another binary, or an atom.
    #[inline(never)]
    fn other_key(&mut self, key: ErlNifTerm, slot: usize) -> Result<bool, Halt> {
        if let Some(bytes) = self.bytes(key) {
            let (name, _) = self.text(bytes)?;
            self.tape.set_key(slot, name);
            return Ok(false);
        }
        if term_type(self.env, key) != TYPE_ATOM {
            return Err(Halt::Bad);
        }
        let name = self.atom_name(key)?;
        self.tape.set_owned_key(slot, name);
        Ok(true)
    }

    #[inline]
    fn finish_map(
        &mut self,
        slot: usize,
        start: usize,
        size: usize,
        mixed: bool,
    ) -> Result<(), Halt> {
        if self.tape.finish_object(slot, start, size, mixed) {
            Ok(())
        } else {
            Err(Halt::Bad)
        }
    }

    /// Integers beyond 64 bits (rare: kept out of `value`'s frame), their decimal conversion
    /// charged first (`term::read_big`).
    #[cold]
    #[inline(never)]
    fn big(&mut self, term: ErlNifTerm) -> Result<Item, Halt> {
        let term = unsafe { Term::new(self.term_env, term) };
        let mut budget = Budget::with(self.remaining, self.dirty);
        let big = term::read_big(term, &mut budget);
        self.remaining = budget.remaining;
        match big {
            Ok(big) => Ok(self.tape.big(big.to_string())),
            Err(TermError::Yield) => Err(Halt::Yield),
            Err(_) => Err(Halt::TooBig),
        }
    }

    #[inline(never)]
    fn atom_name(&mut self, term: ErlNifTerm) -> Result<String, Halt> {
        term::atom_name(unsafe { Term::new(self.term_env, term) }).ok_or(Halt::Bad)
    }

    #[inline(never)]
    fn list(&mut self, term: ErlNifTerm, slot: usize, depth: usize) -> Result<(), Halt> {
        let env = self.env;
        // Counted cell by cell only as far as the budget reaches (`enif_get_list_length`
        // would count a 2M-element list whole).
        let mut len = 0usize;
        let mut cell = term;
        let mut head = MaybeUninit::<ErlNifTerm>::uninit();
        let mut tail = MaybeUninit::<ErlNifTerm>::uninit();
        while unsafe { enif_get_list_cell(env, cell, head.as_mut_ptr(), tail.as_mut_ptr()) } != 0 {
            len += 1;
            if len as i64 > self.remaining {
                return Err(self.over());
            }
            cell = unsafe { tail.assume_init() };
        }
        if unsafe { enif_is_empty_list(env, cell) } == 0 {
            return Err(Halt::Bad);
        }
        self.enter(depth, len)?;
        let start = self.tape.reserve(len);
        let mut cell = term;
        for i in start..start + len {
            unsafe { enif_get_list_cell(env, cell, head.as_mut_ptr(), tail.as_mut_ptr()) };
            self.value(unsafe { head.assume_init() }, i, depth + 1)?;
            cell = unsafe { tail.assume_init() };
        }
        self.tape.set(slot, Item::array(start, len));
        Ok(())
    }

    #[inline(never)]
    fn map(&mut self, term: ErlNifTerm, slot: usize, depth: usize) -> Result<(), Halt> {
        let env = self.env;
        let mut size = 0usize;
        if unsafe { enif_get_map_size(env, term, &mut size) } == 0 {
            return Err(Halt::Bad);
        }
        self.enter(depth, size)?;
        let start = self.tape.reserve(size);
        let mut iter = MaybeUninit::<ErlNifMapIterator>::uninit();
        // The iterator is used where the C side wrote it (moving it measured as a stall).
        let iter = iter.as_mut_ptr();
        let created = unsafe {
            enif_map_iterator_create(
                env,
                term,
                iter,
                ErlNifMapIteratorEntry::ERL_NIF_MAP_ITERATOR_HEAD,
            )
        };
        if created == 0 {
            return Err(Halt::Bad);
        }
        let members = self.members(iter, start, size, depth);
        unsafe { enif_map_iterator_destroy(env, iter) };
        let mixed = members?;
        self.finish_map(slot, start, size, mixed)
    }

    /// Reads a map's members into `start..start + size`: whether keys were mixed atoms and
    /// binaries (only then can one name be given twice in a small map).
    #[inline]
    fn members(
        &mut self,
        iter: *mut ErlNifMapIterator,
        start: usize,
        size: usize,
        depth: usize,
    ) -> Result<bool, Halt> {
        let env = self.env;
        let (mut atom_keys, mut binary_keys) = (false, false);
        let mut k = MaybeUninit::<ErlNifTerm>::uninit();
        let mut v = MaybeUninit::<ErlNifTerm>::uninit();
        for i in start..start + size {
            if unsafe { enif_map_iterator_get_pair(env, iter, k.as_mut_ptr(), v.as_mut_ptr()) } == 0
            {
                return Err(Halt::Bad);
            }
            let (key, value) = unsafe { (k.assume_init(), v.assume_init()) };
            let atom = self.key(key, i)?;
            atom_keys |= atom;
            binary_keys |= !atom;
            self.value(value, i, depth + 1)?;
            unsafe { enif_map_iterator_next(env, iter) };
        }
        Ok(atom_keys && binary_keys)
    }
}
