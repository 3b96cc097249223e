//! BEAM terms as a `jsonschema` representation (the `Json` trait of `jsonschema-value`, which
//! that crate implements for Python and Ruby objects).
//!
//! One walk over the caller's term checks the JSON rules (proper lists, UTF-8 binaries, string
//! or atom keys, no key given twice, depth and size budget) and records every node in a flat
//! index of two-word items: scalars by value, strings as pointers into the caller's binaries (no
//! copy), containers as ranges of the index. The validator then reads that index with plain
//! memory accesses. No `serde_json::Value` is built on the valid path; values are built only for
//! errors (cold path).
//!
//! Why an index and not term accessors called by the validator: every `enif_*` call costs a few
//! ns, and the validator asks each node several questions (type, string, length...). Reading the
//! term once, which the JSON check has to do anyway, measured ~2.5x faster than answering each
//! question from the term.
//!
//! Why two plain words per item and no error path during the walk: the walk is the whole cost
//! of validating from Elixir, and an earlier version that built Rust enums and pushed path
//! segments per node spent more time moving those around than in the `enif_*` calls. A walk
//! that fails is rare; it is repeated by `term::to_value`, which names the path and the reason.
#![allow(unsafe_code)]

use std::borrow::Cow;
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::os::raw::c_int;

use jsonschema::json::{cmp, Array, Json, JsonNumber, Node, NodeIdentity, Object};
use jsonschema::JsonType;
use rustler::sys::{
    enif_get_double, enif_get_int64, enif_get_list_cell, enif_get_list_length, enif_get_map_size,
    enif_get_uint64, enif_inspect_binary, enif_map_iterator_create, enif_map_iterator_destroy,
    enif_map_iterator_get_pair, enif_map_iterator_next, ErlNifBinary, ErlNifEnv, ErlNifMapIterator,
    ErlNifMapIteratorEntry, ErlNifTerm,
};
use rustler::types::BigInt;
use rustler::{Env, Term};
use serde_json::{Map, Number, Value};

use crate::layout::{self, Layout, Shape};
use crate::term::{self, Budget, TermError, MAX_DEPTH};

/// Objects with more members than this are sorted by key so lookups binary-search.
const LINEAR_MEMBERS: usize = 12;

/// The representation marker.
pub struct Beam;

impl Json for Beam {
    type Node<'a> = BeamNode<'a>;
    type PreparedKey = Box<str>;
    // Terms never contain themselves.
    const ACYCLIC: bool = true;
    type StringBuffer = Tape<'static>;

    fn prepare_key(key: &str) -> Box<str> {
        key.into()
    }

    fn with_string_node<T>(
        buffer: &mut Tape<'static>,
        string: &str,
        f: impl FnOnce(BeamNode<'_>) -> T,
    ) -> T {
        buffer.items.clear();
        buffer
            .items
            .push(Item::string(string.as_bytes(), string.is_ascii()));
        let result = f(BeamNode {
            tape: buffer,
            slot: 0,
        });
        // The item points at `string`, which does not outlive this call.
        buffer.items.clear();
        result
    }
}

/// Item tags (the low byte of `Item::head`).
mod tag {
    pub const NULL: u8 = 0;
    pub const FALSE: u8 = 1;
    pub const TRUE: u8 = 2;
    /// `data` is an `i64`.
    pub const INT: u8 = 3;
    /// `data` is a `u64` above `i64::MAX`.
    pub const UINT: u8 = 4;
    /// `data` is an `f64`'s bits.
    pub const FLOAT: u8 = 5;
    /// An integer beyond 64 bits: `data` indexes `Tape::bigs`.
    pub const BIG: u8 = 6;
    /// `data` points at UTF-8 bytes, `head >> 8` is their length.
    pub const STR: u8 = 7;
    /// `STR` known to be ASCII (its length in code points is its length in bytes).
    pub const ASCII: u8 = 8;
    /// An atom other than true/false/nil, read as its name: `data` indexes `Tape::names`.
    pub const NAME: u8 = 9;
    /// `data` is the first child's slot, `head >> 8` the number of children.
    pub const ARRAY: u8 = 10;
    /// Like `ARRAY`; member names are in `Tape::keys` at the same slots.
    pub const OBJECT: u8 = 11;
    /// `OBJECT` whose members are sorted by name (lookups binary-search).
    pub const SORTED: u8 = 12;
}

/// One node of the index: a tag (low byte) with a length, and a payload word.
#[derive(Clone, Copy, Debug)]
pub struct Item {
    head: u64,
    data: u64,
}

impl Item {
    const NULL: Item = Item::new(tag::NULL, 0, 0);

    const fn new(tag: u8, len: u64, data: u64) -> Item {
        Item {
            head: (len << 8) | tag as u64,
            data,
        }
    }

    fn string(bytes: &[u8], ascii: bool) -> Item {
        let tag = if ascii { tag::ASCII } else { tag::STR };
        Item::new(tag, bytes.len() as u64, bytes.as_ptr() as u64)
    }

    #[inline]
    fn tag(self) -> u8 {
        self.head as u8
    }

    #[inline]
    fn len(self) -> usize {
        (self.head >> 8) as usize
    }

    #[inline]
    fn start(self) -> usize {
        self.data as usize
    }
}

/// A member name: a pointer and a length, into a key binary or into `Tape::names`.
#[derive(Clone, Copy, Debug)]
struct RawStr {
    ptr: *const u8,
    len: usize,
}

impl RawStr {
    const EMPTY: RawStr = RawStr {
        ptr: std::ptr::NonNull::<u8>::dangling().as_ptr(),
        len: 0,
    };

    fn new(s: &str) -> RawStr {
        RawStr {
            ptr: s.as_ptr(),
            len: s.len(),
        }
    }
}

/// The index of one term. Slot 0 is the root; each container's children are contiguous.
#[derive(Default)]
pub struct Tape<'a> {
    items: Vec<Item>,
    /// Member names, parallel to `items` (slots that are not object members hold `EMPTY`).
    keys: Vec<RawStr>,
    /// Atom names. A `String`'s bytes do not move when this vector grows.
    names: Vec<String>,
    bigs: Vec<(f64, String)>,
    /// Items and keys point into the term's binaries, alive for `'a` (the NIF call).
    _term: PhantomData<&'a ()>,
}

// SAFETY: the raw pointers are borrows of immutable data (the caller's binaries, `names`) that
// outlive the tape; nothing mutates through them.
unsafe impl Send for Tape<'_> {}
unsafe impl Sync for Tape<'_> {}

/// Buffers kept per scheduler thread between calls: validation then allocates nothing for small
/// inputs (allocation and freeing measured as most of the cost of a fresh index).
#[derive(Default)]
struct Buffers {
    items: Vec<Item>,
    keys: Vec<RawStr>,
}

thread_local! {
    static BUFFERS: std::cell::Cell<Buffers> = std::cell::Cell::new(Buffers::default());
}

/// Buffers larger than this are not kept (a huge input should not pin its memory).
const KEEP_CAPACITY: usize = 4096;

impl<'a> Tape<'a> {
    /// Reads a term under the JSON rules (see `term.rs`), within `budget`.
    #[inline]
    pub fn build(term: Term<'a>, budget: &mut Budget) -> Result<Tape<'a>, TermError> {
        Tape::build_with(term, budget, layout::get())
    }

    /// `build` through the `enif_*` API only (no direct reads): the tests compare both.
    pub fn build_api(term: Term<'a>, budget: &mut Budget) -> Result<Tape<'a>, TermError> {
        Tape::build_with(term, budget, None)
    }

    fn build_with(
        term: Term<'a>,
        budget: &mut Budget,
        layout: Option<Layout>,
    ) -> Result<Tape<'a>, TermError> {
        let mut buffers = BUFFERS.take();
        buffers.items.clear();
        buffers.keys.clear();
        buffers.items.push(Item::NULL);
        buffers.keys.push(RawStr::EMPTY);
        let mut walker = Walker {
            env: term.get_env().as_c_arg(),
            term_env: term.get_env(),
            tape: Tape {
                items: buffers.items,
                keys: buffers.keys,
                names: Vec::new(),
                bigs: Vec::new(),
                _term: PhantomData,
            },
            remaining: budget.remaining,
            dirty: budget.is_dirty(),
            layout,
        };
        let walked = walker.value(term.as_c_arg(), 0, 0);
        budget.remaining = walker.remaining;
        match walked {
            Ok(()) => Ok(walker.tape),
            Err(Stop::Yield) => Err(TermError::Yield),
            Err(Stop::TooBig) => Err(TermError::TooBig),
            Err(Stop::Bad) => Err(explain(term, budget)),
        }
    }

    pub fn root(&self) -> BeamNode<'_> {
        BeamNode {
            tape: self,
            slot: 0,
        }
    }

    #[inline]
    fn key(&self, slot: usize) -> &str {
        let raw = self.keys[slot];
        // SAFETY: built from a `&str` that lives as long as the tape (see `RawStr`).
        unsafe { std::str::from_utf8_unchecked(std::slice::from_raw_parts(raw.ptr, raw.len)) }
    }

    /// The string of a `STR`/`ASCII` item.
    #[inline]
    fn str_of(&self, item: Item) -> &str {
        // SAFETY: the item was made from a checked `&str` living as long as the tape.
        unsafe {
            std::str::from_utf8_unchecked(std::slice::from_raw_parts(
                item.data as *const u8,
                item.len(),
            ))
        }
    }

    fn value(&self, slot: usize) -> Value {
        let item = self.items[slot];
        match item.tag() {
            tag::NULL => Value::Null,
            tag::FALSE => Value::Bool(false),
            tag::TRUE => Value::Bool(true),
            tag::INT => Value::Number((item.data as i64).into()),
            tag::UINT => Value::Number(item.data.into()),
            tag::FLOAT => {
                Number::from_f64(f64::from_bits(item.data)).map_or(Value::Null, Value::Number)
            }
            tag::BIG => {
                Number::from_f64(self.bigs[item.start()].0).map_or(Value::Null, Value::Number)
            }
            tag::STR | tag::ASCII => Value::String(self.str_of(item).to_owned()),
            tag::NAME => Value::String(self.names[item.start()].clone()),
            tag::ARRAY => Value::Array(
                (item.start()..item.start() + item.len())
                    .map(|i| self.value(i))
                    .collect(),
            ),
            _ => {
                let mut map = Map::new();
                for i in item.start()..item.start() + item.len() {
                    map.insert(self.key(i).to_owned(), self.value(i));
                }
                Value::Object(map)
            }
        }
    }
}

impl Drop for Tape<'_> {
    fn drop(&mut self) {
        if self.items.capacity() > KEEP_CAPACITY || self.keys.capacity() > KEEP_CAPACITY {
            return;
        }
        BUFFERS.set(Buffers {
            items: std::mem::take(&mut self.items),
            keys: std::mem::take(&mut self.keys),
        });
    }
}

/// Why a walk stopped. `Bad` (not JSON, too deep) is explained by a second, slower walk.
#[derive(Debug)]
enum Stop {
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

/// `enif_term_type`, read as a plain `int`: a future term type must not become an invalid enum.
#[inline]
fn term_type(env: *mut ErlNifEnv, term: ErlNifTerm) -> c_int {
    type TermTypeFn = unsafe extern "C" fn(*mut ErlNifEnv, ErlNifTerm) -> c_int;
    // SAFETY: the C function returns an `int`; only the Rust-side return type differs.
    let f: TermTypeFn = unsafe {
        std::mem::transmute::<*const (), TermTypeFn>(rustler::sys::enif_term_type as *const ())
    };
    unsafe { f(env, term) }
}

// `ErlNifTermType` values (erl_nif.h).
const TYPE_ATOM: c_int = 1;
const TYPE_FLOAT: c_int = 3;
const TYPE_INTEGER: c_int = 5;
const TYPE_LIST: c_int = 6;
const TYPE_MAP: c_int = 7;

mod atoms {
    rustler::atoms! { true_atom = "true", false_atom = "false", nil_atom = "nil" }
}

/// Whether `bytes` are ASCII, and so valid UTF-8 with one code point per byte. Short strings
/// (most keys and values) are checked a word at a time with overlapping loads.
#[inline]
fn is_ascii(bytes: &[u8]) -> bool {
    const HIGH8: u64 = 0x8080_8080_8080_8080;
    const HIGH4: u32 = 0x8080_8080;
    let n = bytes.len();
    let word8 = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap_or([0; 8]));
    let word4 = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap_or([0; 4]));
    match n {
        0..=3 => bytes.iter().all(|b| b.is_ascii()),
        4..=7 => (word4(0) | word4(n - 4)) & HIGH4 == 0,
        8..=16 => (word8(0) | word8(n - 8)) & HIGH8 == 0,
        _ => bytes.is_ascii(),
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
    fn spend(&mut self, units: i64) -> Result<(), Stop> {
        self.remaining -= units;
        if self.remaining >= 0 {
            Ok(())
        } else if self.dirty {
            Err(Stop::TooBig)
        } else {
            Err(Stop::Yield)
        }
    }

    /// A binary's bytes if `term` is one (not checked for UTF-8), through the API.
    #[inline]
    fn bytes(&self, term: ErlNifTerm) -> Option<&'static [u8]> {
        let mut bin = MaybeUninit::<ErlNifBinary>::uninit();
        if unsafe { enif_inspect_binary(self.env, term, bin.as_mut_ptr()) } == 0 {
            return None;
        }
        // The binary belongs to the caller's term, alive for the whole NIF call; the tape that
        // keeps this slice is bound to that call's lifetime.
        Some(unsafe {
            let bin = bin.assume_init();
            std::slice::from_raw_parts(bin.data, bin.size)
        })
    }

    /// Reads `term` into `slot`.
    fn value(&mut self, term: ErlNifTerm, slot: usize, depth: usize) -> Result<(), Stop> {
        self.spend(1)?;
        if depth > MAX_DEPTH {
            return Err(Stop::Bad);
        }
        let env = self.env;
        if let Some(layout) = self.layout {
            match layout.shape(term) {
                Shape::Bytes(bytes) => return self.string(bytes, slot),
                Shape::Small(i) => {
                    self.set(slot, Item::new(tag::INT, 0, i as u64));
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
                    Item::new(tag::INT, 0, i as u64)
                } else {
                    let mut u = 0u64;
                    if unsafe { enif_get_uint64(env, term, &mut u) } != 0 {
                        Item::new(tag::UINT, 0, u)
                    } else {
                        self.big(term)?
                    }
                }
            }
            TYPE_FLOAT => {
                let mut f = 0f64;
                unsafe { enif_get_double(env, term, &mut f) };
                Item::new(tag::FLOAT, 0, f.to_bits())
            }
            TYPE_ATOM => {
                if term == atoms::true_atom().as_c_arg() {
                    Item::new(tag::TRUE, 0, 0)
                } else if term == atoms::false_atom().as_c_arg() {
                    Item::new(tag::FALSE, 0, 0)
                } else if term == atoms::nil_atom().as_c_arg() {
                    Item::NULL
                } else {
                    Item::new(tag::NAME, 0, self.atom_name(term)? as u64)
                }
            }
            TYPE_LIST => return self.list(term, slot, depth),
            TYPE_MAP => return self.map(term, slot, depth),
            _ => return Err(Stop::Bad),
        };
        self.set(slot, item);
        Ok(())
    }

    #[inline]
    fn string(&mut self, bytes: &[u8], slot: usize) -> Result<(), Stop> {
        self.spend((bytes.len() >> 8) as i64)?;
        let ascii = is_ascii(bytes);
        if !ascii && std::str::from_utf8(bytes).is_err() {
            return Err(Stop::Bad);
        }
        self.set(slot, Item::string(bytes, ascii));
        Ok(())
    }

    /// A list read cell by cell from memory (see `layout.rs`).
    fn cells(
        &mut self,
        layout: Layout,
        term: ErlNifTerm,
        slot: usize,
        depth: usize,
    ) -> Result<(), Stop> {
        let mut len = 0usize;
        let mut cell = term;
        loop {
            match layout.shape(cell) {
                Shape::Cons(_, tail) => {
                    len += 1;
                    cell = layout::term(tail);
                }
                Shape::Nil => break,
                // An improper list.
                _ => return Err(Stop::Bad),
            }
        }
        let start = self.block(len);
        let mut cell = term;
        for i in start..start + len {
            let Shape::Cons(head, tail) = layout.shape(cell) else {
                return Err(Stop::Bad);
            };
            self.value(layout::term(head), i, depth + 1)?;
            cell = layout::term(tail);
        }
        self.set(slot, Item::new(tag::ARRAY, len as u64, start as u64));
        Ok(())
    }

    /// A small map read from memory (see `layout.rs`).
    fn flatmap(
        &mut self,
        keys: &[usize],
        values: &[usize],
        slot: usize,
        depth: usize,
    ) -> Result<(), Stop> {
        let size = keys.len();
        let start = self.block(size);
        let (mut atom_keys, mut binary_keys) = (false, false);
        for (i, (&key, &value)) in (start..).zip(keys.iter().zip(values)) {
            let (name, atom) = self.key(layout::term(key))?;
            atom_keys |= atom;
            binary_keys |= !atom;
            self.set_key(i, name);
            self.value(layout::term(value), i, depth + 1)?;
        }
        self.finish_map(slot, start, size, atom_keys && binary_keys)
    }

    /// A member name: a binary's text or an atom's name, and whether it was an atom.
    // Inlined: returned through memory, the pair measured as a store-forwarding stall.
    #[inline(always)]
    fn key(&mut self, key: ErlNifTerm) -> Result<(RawStr, bool), Stop> {
        let bytes = match self.layout.map(|layout| layout.shape(key)) {
            Some(Shape::Bytes(bytes)) => bytes,
            _ => return self.other_key(key),
        };
        self.spend((bytes.len() >> 8) as i64)?;
        if !is_ascii(bytes) && std::str::from_utf8(bytes).is_err() {
            return Err(Stop::Bad);
        }
        let name = RawStr {
            ptr: bytes.as_ptr(),
            len: bytes.len(),
        };
        Ok((name, false))
    }

    /// A key that is not a heap binary: another binary, or an atom.
    #[inline(never)]
    fn other_key(&mut self, key: ErlNifTerm) -> Result<(RawStr, bool), Stop> {
        if let Some(bytes) = self.bytes(key) {
            self.spend((bytes.len() >> 8) as i64)?;
            if std::str::from_utf8(bytes).is_err() {
                return Err(Stop::Bad);
            }
            let name = RawStr {
                ptr: bytes.as_ptr(),
                len: bytes.len(),
            };
            return Ok((name, false));
        }
        if term_type(self.env, key) != TYPE_ATOM {
            return Err(Stop::Bad);
        }
        let index = self.atom_name(key)?;
        Ok((RawStr::new(&self.tape.names[index]), true))
    }

    #[inline]
    fn set_key(&mut self, slot: usize, name: RawStr) {
        debug_assert!(slot < self.tape.keys.len());
        // SAFETY: `slot` is in a block reserved by `block`.
        unsafe { *self.tape.keys.get_unchecked_mut(slot) = name };
    }

    /// Sorts a large map's members, or checks a small one with mixed keys for a name given
    /// twice, then records the map in `slot`.
    fn finish_map(
        &mut self,
        slot: usize,
        start: usize,
        size: usize,
        mixed: bool,
    ) -> Result<(), Stop> {
        let tag = if size > LINEAR_MEMBERS {
            self.sort(start, size)?;
            tag::SORTED
        } else {
            if mixed {
                self.check_duplicates(start, size)?;
            }
            tag::OBJECT
        };
        self.set(slot, Item::new(tag, size as u64, start as u64));
        Ok(())
    }

    #[inline]
    fn set(&mut self, slot: usize, item: Item) {
        debug_assert!(slot < self.tape.items.len());
        // SAFETY: every slot written was reserved by `block` (or is the root's, slot 0).
        unsafe { *self.tape.items.get_unchecked_mut(slot) = item };
    }

    /// Reserves `len` slots for a container's children: their first slot.
    #[inline]
    fn block(&mut self, len: usize) -> usize {
        let start = self.tape.items.len();
        self.tape.items.resize(start + len, Item::NULL);
        self.tape.keys.resize(start + len, RawStr::EMPTY);
        start
    }

    /// Integers beyond 64 bits (rare: kept out of `value`'s frame).
    #[cold]
    #[inline(never)]
    fn big(&mut self, term: ErlNifTerm) -> Result<Item, Stop> {
        let term = unsafe { Term::new(self.term_env, term) };
        let big: BigInt = term.decode().map_err(|_| Stop::Bad)?;
        let digits = big.to_string();
        self.tape
            .bigs
            .push((digits.parse().unwrap_or(f64::INFINITY), digits));
        Ok(Item::new(tag::BIG, 0, self.tape.bigs.len() as u64 - 1))
    }

    #[inline(never)]
    fn atom_name(&mut self, term: ErlNifTerm) -> Result<usize, Stop> {
        let term = unsafe { Term::new(self.term_env, term) };
        let name = term.atom_to_string().map_err(|_| Stop::Bad)?;
        self.tape.names.push(name);
        Ok(self.tape.names.len() - 1)
    }

    #[inline(never)]
    fn list(&mut self, term: ErlNifTerm, slot: usize, depth: usize) -> Result<(), Stop> {
        let env = self.env;
        let mut len: std::os::raw::c_uint = 0;
        // Fails for an improper list.
        if unsafe { enif_get_list_length(env, term, &mut len) } == 0 {
            return Err(Stop::Bad);
        }
        let len = len as usize;
        let start = self.block(len);
        let mut cell = term;
        let mut head = MaybeUninit::<ErlNifTerm>::uninit();
        let mut tail = MaybeUninit::<ErlNifTerm>::uninit();
        for i in start..start + len {
            unsafe { enif_get_list_cell(env, cell, head.as_mut_ptr(), tail.as_mut_ptr()) };
            self.value(unsafe { head.assume_init() }, i, depth + 1)?;
            cell = unsafe { tail.assume_init() };
        }
        self.set(slot, Item::new(tag::ARRAY, len as u64, start as u64));
        Ok(())
    }

    #[inline(never)]
    fn map(&mut self, term: ErlNifTerm, slot: usize, depth: usize) -> Result<(), Stop> {
        let env = self.env;
        let mut size = 0usize;
        if unsafe { enif_get_map_size(env, term, &mut size) } == 0 {
            return Err(Stop::Bad);
        }
        let start = self.block(size);
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
            return Err(Stop::Bad);
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
    ) -> Result<bool, Stop> {
        let env = self.env;
        let (mut atom_keys, mut binary_keys) = (false, false);
        let mut k = MaybeUninit::<ErlNifTerm>::uninit();
        let mut v = MaybeUninit::<ErlNifTerm>::uninit();
        for i in start..start + size {
            if unsafe { enif_map_iterator_get_pair(env, iter, k.as_mut_ptr(), v.as_mut_ptr()) } == 0
            {
                return Err(Stop::Bad);
            }
            let (key, value) = unsafe { (k.assume_init(), v.assume_init()) };
            let (name, atom) = self.key(key)?;
            atom_keys |= atom;
            binary_keys |= !atom;
            self.set_key(i, name);
            self.value(value, i, depth + 1)?;
            unsafe { enif_map_iterator_next(env, iter) };
        }
        Ok(atom_keys && binary_keys)
    }

    /// Refuses a name given twice (`:a` and `"a"`) in a small map.
    #[cold]
    fn check_duplicates(&self, start: usize, size: usize) -> Result<(), Stop> {
        for i in start..start + size {
            for j in i + 1..start + size {
                if self.tape.key(i) == self.tape.key(j) {
                    return Err(Stop::Bad);
                }
            }
        }
        Ok(())
    }

    /// Sorts a large map's members by name (for binary search) and refuses a name given twice.
    #[cold]
    fn sort(&mut self, start: usize, size: usize) -> Result<(), Stop> {
        let range = start..start + size;
        let sorted = range
            .clone()
            .zip(range.clone().skip(1))
            .all(|(a, b)| self.tape.key(a) < self.tape.key(b));
        if sorted {
            return Ok(());
        }
        let tape = &mut self.tape;
        let mut members: Vec<(RawStr, Item)> = tape.keys[range.clone()]
            .iter()
            .copied()
            .zip(tape.items[range.clone()].iter().copied())
            .collect();
        let name = |raw: &RawStr| unsafe { std::slice::from_raw_parts(raw.ptr, raw.len) };
        members.sort_unstable_by(|a, b| name(&a.0).cmp(name(&b.0)));
        if members.windows(2).any(|w| name(&w[0].0) == name(&w[1].0)) {
            return Err(Stop::Bad);
        }
        for (i, (key, item)) in range.zip(members) {
            tape.keys[i] = key;
            tape.items[i] = item;
        }
        Ok(())
    }
}

/// A node of a tape, as the validator sees it: the tape and a slot.
#[derive(Clone, Copy)]
pub struct BeamNode<'a> {
    tape: &'a Tape<'a>,
    slot: usize,
}

impl BeamNode<'_> {
    #[inline]
    fn item(&self) -> Item {
        self.tape.items[self.slot]
    }
}

impl<'a> Node<'a, Beam> for BeamNode<'a> {
    type Object = BeamObject<'a>;
    type Array = BeamArray<'a>;
    type Number = BeamNumber;

    #[inline]
    fn as_object(&self) -> Option<BeamObject<'a>> {
        let item = self.item();
        matches!(item.tag(), tag::OBJECT | tag::SORTED).then_some(BeamObject {
            tape: self.tape,
            start: item.start(),
            len: item.len(),
            sorted: item.tag() == tag::SORTED,
        })
    }

    #[inline]
    fn as_array(&self) -> Option<BeamArray<'a>> {
        let item = self.item();
        (item.tag() == tag::ARRAY).then_some(BeamArray {
            tape: self.tape,
            start: item.start(),
            len: item.len(),
        })
    }

    #[inline]
    fn as_string(&self) -> Option<Cow<'a, str>> {
        let item = self.item();
        match item.tag() {
            tag::STR | tag::ASCII => Some(Cow::Borrowed(self.tape.str_of(item))),
            tag::NAME => Some(Cow::Borrowed(self.tape.names[item.start()].as_str())),
            _ => None,
        }
    }

    fn string_length(&self) -> Option<u64> {
        let item = self.item();
        match item.tag() {
            tag::ASCII => Some(item.len() as u64),
            _ => self.as_string().map(|s| s.chars().count() as u64),
        }
    }

    fn as_number(&self) -> Option<BeamNumber> {
        let item = self.item();
        match item.tag() {
            tag::INT => Some(BeamNumber::Int(item.data as i64)),
            tag::UINT => Some(BeamNumber::UInt(item.data)),
            tag::FLOAT => Some(BeamNumber::Float(f64::from_bits(item.data))),
            tag::BIG => {
                let (f, digits) = &self.tape.bigs[item.start()];
                Some(BeamNumber::Big(*f, digits.as_str().into()))
            }
            _ => None,
        }
    }

    #[inline]
    fn is_number(&self) -> bool {
        matches!(
            self.item().tag(),
            tag::INT | tag::UINT | tag::FLOAT | tag::BIG
        )
    }

    #[inline]
    fn as_boolean(&self) -> Option<bool> {
        match self.item().tag() {
            tag::TRUE => Some(true),
            tag::FALSE => Some(false),
            _ => None,
        }
    }

    #[inline]
    fn is_null(&self) -> bool {
        self.item().tag() == tag::NULL
    }

    #[inline]
    fn json_type(&self) -> JsonType {
        match self.item().tag() {
            tag::NULL => JsonType::Null,
            tag::FALSE | tag::TRUE => JsonType::Boolean,
            tag::INT | tag::UINT | tag::FLOAT | tag::BIG => JsonType::Number,
            tag::STR | tag::ASCII | tag::NAME => JsonType::String,
            tag::ARRAY => JsonType::Array,
            _ => JsonType::Object,
        }
    }

    fn equals_value(&self, expected: &Value) -> bool {
        match expected {
            Value::Null => self.is_null(),
            Value::Bool(b) => self.as_boolean() == Some(*b),
            Value::Number(n) => self
                .as_number()
                .is_some_and(|got| cmp::equal_numbers(&got, n)),
            Value::String(s) => self.as_string().is_some_and(|got| got == s.as_str()),
            Value::Array(items) => self.as_array().is_some_and(|arr| {
                arr.len() == items.len()
                    && arr
                        .elements()
                        .zip(items)
                        .all(|(element, expected)| element.equals_value(expected))
            }),
            Value::Object(map) => self.as_object().is_some_and(|object| {
                object.len() == map.len()
                    && object.members().all(|(key, value)| {
                        map.get(key.as_ref()).is_some_and(|e| value.equals_value(e))
                    })
            }),
        }
    }

    /// Cold path (errors, annotations, `uniqueItems`): build the value.
    fn to_value(&self) -> Cow<'a, Value> {
        Cow::Owned(self.tape.value(self.slot))
    }

    /// Every node has its own slot in its tape.
    fn identity(&self) -> Option<NodeIdentity> {
        Some(NodeIdentity::tagged(
            self.tape as *const Tape as usize,
            self.slot as u32,
        ))
    }
}

/// A number read from a term. Integers beyond 64 bits keep their digits and a float value.
pub enum BeamNumber {
    Int(i64),
    UInt(u64),
    Float(f64),
    Big(f64, Box<str>),
}

impl JsonNumber for BeamNumber {
    fn as_u64(&self) -> Option<u64> {
        match self {
            BeamNumber::Int(i) => u64::try_from(*i).ok(),
            BeamNumber::UInt(u) => Some(*u),
            _ => None,
        }
    }

    fn as_i64(&self) -> Option<i64> {
        match self {
            BeamNumber::Int(i) => Some(*i),
            BeamNumber::UInt(u) => i64::try_from(*u).ok(),
            _ => None,
        }
    }

    fn as_f64(&self) -> Option<f64> {
        Some(match self {
            BeamNumber::Int(i) => *i as f64,
            BeamNumber::UInt(u) => *u as f64,
            BeamNumber::Float(f) | BeamNumber::Big(f, _) => *f,
        })
    }

    fn as_str(&self) -> Cow<'_, str> {
        match self {
            BeamNumber::Int(i) => Cow::Owned(i.to_string()),
            BeamNumber::UInt(u) => Cow::Owned(u.to_string()),
            BeamNumber::Float(f) => Cow::Owned(serde_json::to_string(f).unwrap_or_default()),
            BeamNumber::Big(_, digits) => Cow::Borrowed(digits),
        }
    }

    fn to_number(&self) -> Cow<'_, Number> {
        Cow::Owned(match self {
            BeamNumber::Int(i) => Number::from(*i),
            BeamNumber::UInt(u) => Number::from(*u),
            BeamNumber::Float(f) | BeamNumber::Big(f, _) => {
                Number::from_f64(*f).unwrap_or_else(|| Number::from(0))
            }
        })
    }

    fn is_integer(&self) -> bool {
        match self {
            BeamNumber::Int(_) | BeamNumber::UInt(_) | BeamNumber::Big(..) => true,
            BeamNumber::Float(f) => f.fract() == 0.0,
        }
    }

    fn is_written_as_integer(&self) -> bool {
        !matches!(self, BeamNumber::Float(_))
    }
}

/// An object of the tape: members at `start..start + len`.
#[derive(Clone, Copy)]
pub struct BeamObject<'a> {
    tape: &'a Tape<'a>,
    start: usize,
    len: usize,
    sorted: bool,
}

impl<'a> Object<'a, Beam> for BeamObject<'a> {
    type Node = BeamNode<'a>;
    type MemberName = Cow<'a, str>;
    type MembersIter = BeamMembers<'a>;

    #[inline]
    fn len(&self) -> usize {
        self.len
    }

    fn get(&self, key: &Box<str>) -> Option<BeamNode<'a>> {
        let tape = self.tape;
        let key: &str = key;
        let range = self.start..self.start + self.len;
        let found = if self.sorted {
            let keys = &tape.keys[range.clone()];
            keys.binary_search_by(|raw| {
                let name = unsafe { std::slice::from_raw_parts(raw.ptr, raw.len) };
                name.cmp(key.as_bytes())
            })
            .ok()
            .map(|i| self.start + i)
        } else {
            range.into_iter().find(|&i| {
                let raw = tape.keys[i];
                raw.len == key.len()
                    && unsafe { std::slice::from_raw_parts(raw.ptr, raw.len) } == key.as_bytes()
            })
        };
        found.map(|slot| BeamNode { tape, slot })
    }

    fn members(&self) -> BeamMembers<'a> {
        BeamMembers {
            tape: self.tape,
            range: self.start..self.start + self.len,
        }
    }
}

pub struct BeamMembers<'a> {
    tape: &'a Tape<'a>,
    range: std::ops::Range<usize>,
}

impl<'a> Iterator for BeamMembers<'a> {
    type Item = (Cow<'a, str>, BeamNode<'a>);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let slot = self.range.next()?;
        let tape = self.tape;
        Some((Cow::Borrowed(tape.key(slot)), BeamNode { tape, slot }))
    }
}

/// An array of the tape: elements at `start..start + len`.
#[derive(Clone, Copy)]
pub struct BeamArray<'a> {
    tape: &'a Tape<'a>,
    start: usize,
    len: usize,
}

impl<'a> Array<'a, Beam> for BeamArray<'a> {
    type Node = BeamNode<'a>;
    type ElementsIter = BeamElements<'a>;

    #[inline]
    fn len(&self) -> usize {
        self.len
    }

    fn elements(&self) -> BeamElements<'a> {
        BeamElements {
            tape: self.tape,
            range: self.start..self.start + self.len,
        }
    }
}

pub struct BeamElements<'a> {
    tape: &'a Tape<'a>,
    range: std::ops::Range<usize>,
}

impl<'a> Iterator for BeamElements<'a> {
    type Item = BeamNode<'a>;

    #[inline]
    fn next(&mut self) -> Option<BeamNode<'a>> {
        let slot = self.range.next()?;
        Some(BeamNode {
            tape: self.tape,
            slot,
        })
    }
}

/// Checks the accessor contract of the validator on a term encoding
/// `jsonschema::json::conformance::document()`; used by the test suite.
pub fn conformance(term: Term) -> Result<(), String> {
    let tape = Tape::build(term, &mut Budget::dirty()).map_err(|e| e.message())?;
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        jsonschema::json::conformance::assert_conformance::<Beam>(&tape.root())
    }))
    .map_err(|panic| {
        panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_else(|| "conformance check failed".into())
    })
}
