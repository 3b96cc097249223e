//! Terms -> JSON text, written straight into one growing binary that becomes the result (no
//! intermediate buffer, no copy at the end).
//!
//! Why this shape: the common terms (small integers, byte-aligned binaries, small maps, lists)
//! are read from memory when `layout.rs` verified this emulator's layout; strings are escaped
//! with a table and copied in runs, plain ASCII checked eight bytes at a time; numbers are
//! written by `itoa` and `zmij` (serde_json's own float writer, so the text is the same). The
//! JSON Pointer of an error is built only when there is one, while the error unwinds.
#![allow(unsafe_code)]

use std::collections::HashSet;
use std::mem::MaybeUninit;
use std::os::raw::{c_char, c_uint};

use rustler::sys::{
    enif_get_atom, enif_get_double, enif_get_int64, enif_get_uint64, enif_map_iterator_create,
    enif_map_iterator_destroy, enif_map_iterator_get_pair, enif_map_iterator_next,
    ErlNifCharEncoding, ErlNifEnv, ErlNifMapIterator, ErlNifMapIteratorEntry, ErlNifTerm,
};
use rustler::{Binary, Env, NewBinary, Term};

use crate::atoms;
use crate::layout::{self, Layout, Shape};
use crate::term::raw::{
    inspect_bytes, term_type, TYPE_ATOM, TYPE_FLOAT, TYPE_INTEGER, TYPE_LIST, TYPE_MAP,
};
use crate::term::{self, Budget, Cells, Seg, TermError, MAX_DEPTH};

/// Output first written on the stack on a normal scheduler (a tool call's arguments fit; the
/// binary made at the end is a heap binary up to 64 bytes), and the first size of the output
/// on a dirty one (the input was too big for a normal one).
const STACK: usize = 2048;
const FIRST_DIRTY: usize = 64 * 1024;

/// Encodes `term` as JSON text (`pretty`: two-space indents) into a new binary.
pub fn encode<'a>(
    term: Term<'a>,
    pretty: bool,
    budget: &mut Budget,
) -> Result<Binary<'a>, TermError> {
    let env = term.get_env();
    let mut stack = [MaybeUninit::<u8>::uninit(); STACK];
    let out = if budget.is_dirty() {
        Out::heap(FIRST_DIRTY)
    } else {
        Out::stack(&mut stack)
    };
    let layout = layout::get();
    if !budget.is_dirty() && over_budget(layout, term, budget.remaining) {
        return Err(TermError::Yield);
    }
    let mut w = Writer::new(env, layout, out, pretty, budget);
    match w.value(term.as_c_arg(), 0) {
        Ok(()) => Ok(w.out.finish(env)),
        Err(fail) => Err((*fail).into_error()),
    }
}

/// Encodes elements of the proper list `list` from its head, comma-separated without brackets,
/// until a normal-scheduler call's budget is spent: `(text, rest)`, `rest` the tail not yet
/// written (`[]` at the end). At least one element is written, else `Yield` (it alone is over
/// the budget). An error's path is relative to `list`; callers needing the whole list's path
/// encode it again. `CMDC.Tool.JSON.encode/2` writes a long top-level list this way, a slice per
/// call on the caller's scheduler, where the VM can run others between slices.
pub fn encode_slice<'a>(
    list: Term<'a>,
    budget: &mut Budget,
) -> Result<(Binary<'a>, Term<'a>), TermError> {
    let env = list.get_env();
    let Some(layout) = layout::get() else {
        return Err(TermError::Yield);
    };
    let mut stack = [MaybeUninit::<u8>::uninit(); STACK];
    let mut w = Writer::new(env, Some(layout), Out::stack(&mut stack), false, budget);
    let (mut cell, mut i) = (list.as_c_arg(), 0);
    loop {
        match layout.shape(cell) {
            Shape::Cons(head, tail) => {
                let mark = w.out.len;
                match w.element(i, layout::term(head), 0) {
                    Ok(()) => {}
                    Err(fail) if i > 0 && matches!(fail.why, Why::Budget(TermError::Yield)) => {
                        w.out.len = mark;
                        break;
                    }
                    Err(fail) => return Err((*fail).into_error()),
                }
                cell = layout::term(tail);
                i += 1;
            }
            Shape::Nil => break,
            _ => return Err((*w.not_json(list.as_c_arg())).into_error()),
        }
    }
    // SAFETY: `cell` is part of `list`, alive for the NIF call.
    let rest = unsafe { Term::new(env, cell) };
    Ok((w.out.finish(env), rest))
}

/// Whether `term` is a list with more elements than `units` (each costs at least one), found by
/// counting at most that many cells (a few instructions each): a large document goes to the
/// dirty scheduler before a normal one has encoded the first part of it for nothing.
fn over_budget(layout: Option<Layout>, term: Term, units: i64) -> bool {
    let Some(layout) = layout else {
        return false;
    };
    let mut cell = term.as_c_arg();
    let mut n = 0i64;
    while let Shape::Cons(_, tail) = layout.shape(cell) {
        n += 1;
        if n > units {
            return true;
        }
        cell = layout::term(tail);
    }
    false
}

/// The words of `true`, `false` and `nil`, read once per call (not per value).
#[derive(Clone, Copy)]
struct Words {
    true_: ErlNifTerm,
    false_: ErlNifTerm,
    nil: ErlNifTerm,
}

impl Words {
    fn new() -> Words {
        Words {
            true_: atoms::true_atom().as_c_arg(),
            false_: atoms::false_atom().as_c_arg(),
            nil: atoms::nil().as_c_arg(),
        }
    }
}

/// The output: the caller's stack buffer until it is full, then a vector that grows; the
/// binary is made once, at the end, at its final size.
///
/// Why a vector and not a binary that grows: past a few hundred KiB the VM's binary allocator
/// gives each size its own fresh mapping (every page faulted in again, the text copied at each
/// doubling and once more to shrink), where the C allocator grows in place and reuses freed
/// memory from call to call. Measured on the 2 MB document (`bench/json.exs`): the same
/// instructions, 1.16-1.19x serde_json's time with a growing binary, 0.79-0.81x with this.
struct Out<'s> {
    ptr: *mut u8,
    cap: usize,
    len: usize,
    /// `None` while writing into the stack buffer.
    heap: Option<Vec<u8>>,
    _stack: std::marker::PhantomData<&'s mut [MaybeUninit<u8>]>,
}

impl<'s> Out<'s> {
    fn stack(buf: &'s mut [MaybeUninit<u8>]) -> Out<'s> {
        Out {
            ptr: buf.as_mut_ptr() as *mut u8,
            cap: buf.len(),
            len: 0,
            heap: None,
            _stack: std::marker::PhantomData,
        }
    }

    fn heap(capacity: usize) -> Out<'s> {
        let mut heap = Vec::with_capacity(capacity);
        Out {
            ptr: heap.as_mut_ptr(),
            cap: heap.capacity(),
            len: 0,
            heap: Some(heap),
            _stack: std::marker::PhantomData,
        }
    }

    /// Room for `n` more bytes.
    #[inline(always)]
    fn reserve(&mut self, n: usize) {
        if self.cap - self.len < n {
            self.grow(n);
        }
    }

    #[cold]
    #[inline(never)]
    fn grow(&mut self, n: usize) {
        let heap = match self.heap.as_mut() {
            Some(heap) => {
                // SAFETY: the first `len` bytes are written.
                unsafe { heap.set_len(self.len) };
                heap.reserve((self.len + n).max(self.cap * 2) - self.len);
                heap
            }
            None => {
                let mut heap = Vec::with_capacity((self.len + n).max(self.cap * 2));
                // SAFETY: `len` bytes of the stack buffer are written.
                heap.extend_from_slice(unsafe { std::slice::from_raw_parts(self.ptr, self.len) });
                self.heap.insert(heap)
            }
        };
        self.ptr = heap.as_mut_ptr();
        self.cap = heap.capacity();
    }

    /// Where the next byte goes (room reserved by the caller).
    #[inline(always)]
    fn at(&mut self) -> *mut u8 {
        // SAFETY: `len <= cap`, inside the buffer.
        unsafe { self.ptr.add(self.len) }
    }

    /// Writes `bytes`, room reserved by the caller.
    #[inline(always)]
    fn put_unchecked(&mut self, bytes: &[u8]) {
        debug_assert!(self.cap - self.len >= bytes.len());
        // SAFETY: the caller reserved room; `bytes` is not part of the output.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.at(), bytes.len()) };
        self.len += bytes.len();
    }

    /// Writes at most 16 `bytes` without a call to `memcpy` (numbers), room for 16 reserved.
    #[inline(always)]
    fn put_short_unchecked(&mut self, bytes: &[u8]) {
        debug_assert!(bytes.len() <= 16 && self.cap - self.len >= 16);
        // SAFETY: as `put_unchecked`; `copy_short` writes within `bytes.len()`.
        unsafe { copy_short(bytes, self.at()) };
        self.len += bytes.len();
    }

    #[inline(always)]
    fn put(&mut self, bytes: &[u8]) {
        self.reserve(bytes.len());
        self.put_unchecked(bytes);
    }

    #[inline(always)]
    fn byte(&mut self, b: u8) {
        self.reserve(1);
        // SAFETY: room reserved.
        unsafe { *self.at() = b };
        self.len += 1;
    }

    fn finish(self, env: Env) -> Binary {
        let mut made = NewBinary::new(env, self.len);
        // SAFETY: `len` bytes of the buffer are written.
        made.as_mut_slice()
            .copy_from_slice(unsafe { std::slice::from_raw_parts(self.ptr, self.len) });
        made.into()
    }
}

/// Copies `src` (at most 16 bytes) to `dst` with two overlapping moves of the widest size that
/// fits, no loop and no call.
///
/// SAFETY: `dst` is valid for `src.len()` bytes and does not overlap `src`.
#[inline(always)]
unsafe fn copy_short(src: &[u8], dst: *mut u8) {
    let n = src.len();
    let s = src.as_ptr();
    if n >= 8 {
        let (a, b) = (
            (s as *const u64).read_unaligned(),
            (s.add(n - 8) as *const u64).read_unaligned(),
        );
        (dst as *mut u64).write_unaligned(a);
        (dst.add(n - 8) as *mut u64).write_unaligned(b);
    } else if n >= 4 {
        let (a, b) = (
            (s as *const u32).read_unaligned(),
            (s.add(n - 4) as *const u32).read_unaligned(),
        );
        (dst as *mut u32).write_unaligned(a);
        (dst.add(n - 4) as *mut u32).write_unaligned(b);
    } else if n > 0 {
        let (a, b, c) = (*s, *s.add(n / 2), *s.add(n - 1));
        *dst = a;
        *dst.add(n / 2) = b;
        *dst.add(n - 1) = c;
    }
}

/// Whether a string of at most 16 bytes is plain ASCII needing no escape, checked in at most
/// two words (overlapping when shorter) read without a loop or a call.
#[inline(always)]
fn short_plain(b: &[u8]) -> bool {
    const SPACES: u64 = 0x2020_2020_2020_2020;
    let n = b.len();
    debug_assert!(n <= 16);
    let word = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or([0; 8]));
    let half = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap_or([0; 4])) as u64;
    let care = if n >= 8 {
        care_bits(word(0), false) | care_bits(word(n - 8), false)
    } else if n >= 4 {
        care_bits(half(0) | half(n - 4) << 32, false)
    } else if n > 0 {
        let bytes = b[0] as u64 | (b[n / 2] as u64) << 8 | (b[n - 1] as u64) << 16;
        care_bits(bytes | SPACES << 24, false)
    } else {
        0
    };
    care == 0
}

/// Why encoding stopped, and where: `path` is filled innermost first as the error unwinds.
struct Fail<'a> {
    why: Why,
    path: Vec<Seg<'a>>,
}

enum Why {
    Budget(TermError),
    Deep,
    /// Not JSON: what was found.
    NotJson(String),
}

type Res<'a> = Result<(), Box<Fail<'a>>>;

impl<'a> Fail<'a> {
    fn new(why: Why) -> Box<Fail<'a>> {
        Box::new(Fail {
            why,
            path: Vec::new(),
        })
    }

    fn into_error(self) -> TermError {
        let mut steps = self.path;
        steps.reverse();
        let path = term::pointer(&steps);
        match self.why {
            Why::Budget(e) => e,
            Why::Deep => TermError::TooDeep { path },
            Why::NotJson(reason) => TermError::NotJson { path, reason },
        }
    }
}

/// Adds the step `seg` to an error coming out of a member or an element.
#[inline(always)]
fn at<'a>(result: Res<'a>, seg: Seg<'a>) -> Res<'a> {
    result.map_err(|mut fail| {
        fail.path.push(seg);
        fail
    })
}

struct Writer<'b, 'a, 's> {
    env: Env<'a>,
    raw: *mut ErlNifEnv,
    layout: Option<Layout>,
    words: Words,
    out: Out<'s>,
    pretty: bool,
    indent: usize,
    budget: &'b mut Budget,
}

/// A map key's name as read: a binary's bytes (checked for UTF-8 as they are written), or an
/// atom's name owned.
enum Name<'t> {
    Bytes(&'t [u8]),
    Atom(String),
}

impl Name<'_> {
    fn as_bytes(&self) -> &[u8] {
        match self {
            Name::Bytes(b) => b,
            Name::Atom(s) => s.as_bytes(),
        }
    }
}

fn bad_key<'a>() -> Box<Fail<'a>> {
    Fail::new(Why::NotJson(
        "a map key is a binary that is not valid UTF-8".into(),
    ))
}

impl<'b, 'a, 's> Writer<'b, 'a, 's> {
    fn new(
        env: Env<'a>,
        layout: Option<Layout>,
        out: Out<'s>,
        pretty: bool,
        budget: &'b mut Budget,
    ) -> Self {
        Writer {
            env,
            raw: env.as_c_arg(),
            layout,
            words: Words::new(),
            out,
            pretty,
            indent: 0,
            budget,
        }
    }
}

impl<'a> Writer<'_, 'a, '_> {
    #[inline(always)]
    fn spend(&mut self, units: i64) -> Res<'a> {
        self.budget
            .spend(units)
            .map_err(|e| Fail::new(Why::Budget(e.into())))
    }

    #[inline(always)]
    fn term(&self, t: ErlNifTerm) -> Term<'a> {
        // SAFETY: `t` is part of the caller's term, alive for the NIF call.
        unsafe { Term::new(self.env, t) }
    }

    fn not_json(&self, t: ErlNifTerm) -> Box<Fail<'a>> {
        Fail::new(Why::NotJson(term::describe(self.term(t))))
    }

    fn newline(&mut self) {
        if self.pretty {
            self.out.reserve(1 + self.indent * 2);
            self.out.put_unchecked(b"\n");
            for _ in 0..self.indent {
                self.out.put_unchecked(b"  ");
            }
        }
    }

    /// A member's or an element's value: numbers and strings written here, without a call.
    #[inline(always)]
    fn child(&mut self, t: ErlNifTerm, depth: usize) -> Res<'a> {
        if let Some(layout) = self.layout {
            match layout.shape(t) {
                Shape::Small(i) => {
                    self.spend(1)?;
                    self.int(i);
                    return Ok(());
                }
                Shape::Bytes(bytes) => {
                    self.spend(1)?;
                    return self.string_value(bytes, t);
                }
                Shape::Other if t == self.words.true_ || t == self.words.false_ => {
                    self.spend(1)?;
                    self.out.put(if t == self.words.true_ {
                        b"true"
                    } else {
                        b"false"
                    });
                    return Ok(());
                }
                _ => {}
            }
        }
        self.value(t, depth)
    }

    fn value(&mut self, t: ErlNifTerm, depth: usize) -> Res<'a> {
        self.spend(1)?;
        if let Some(layout) = self.layout {
            match layout.shape(t) {
                Shape::Small(i) => {
                    self.int(i);
                    return Ok(());
                }
                Shape::Bytes(bytes) => return self.string_value(bytes, t),
                Shape::Map(keys, values) => return self.flatmap(keys, values, depth),
                Shape::Cons(..) | Shape::Nil => return self.list(layout, t, depth),
                Shape::Other => {}
            }
            if let Some(f) = layout.float(t) {
                self.float(f);
                return Ok(());
            }
            if t == self.words.true_ {
                self.out.put(b"true");
                return Ok(());
            }
            if t == self.words.false_ {
                self.out.put(b"false");
                return Ok(());
            }
            if t == self.words.nil {
                self.out.put(b"null");
                return Ok(());
            }
        }
        self.other(t, depth)
    }

    /// Everything not read from memory, through the `enif_*` API.
    #[inline(never)]
    fn other(&mut self, t: ErlNifTerm, depth: usize) -> Res<'a> {
        if let Some(bytes) = self.inspect(t) {
            return self.string_value(bytes, t);
        }
        match term_type(self.raw, t) {
            TYPE_ATOM => {
                if t == atoms::true_atom().as_c_arg() {
                    self.out.put(b"true");
                } else if t == atoms::false_atom().as_c_arg() {
                    self.out.put(b"false");
                } else if t == atoms::nil().as_c_arg() {
                    self.out.put(b"null");
                } else {
                    let name = self.atom_name(t)?;
                    self.string(name.as_bytes(), true);
                }
                Ok(())
            }
            TYPE_INTEGER => self.integer(t),
            TYPE_FLOAT => {
                let mut f = 0f64;
                if unsafe { enif_get_double(self.raw, t, &mut f) } == 0 {
                    return Err(self.not_json(t));
                }
                self.float(f);
                Ok(())
            }
            TYPE_MAP => self.api_map(t, depth),
            TYPE_LIST => self.api_list(t, depth),
            _ => Err(self.not_json(t)),
        }
    }

    /// A float as serde_json writes it (the VM has no infinities or NaN).
    fn float(&mut self, f: f64) {
        let mut buf = zmij::Buffer::new();
        let text = buf.format_finite(f).as_bytes();
        self.out.reserve(32);
        if text.len() <= 16 {
            self.out.put_short_unchecked(text);
        } else {
            self.out.put(text);
        }
    }

    #[inline(always)]
    fn int(&mut self, i: i64) {
        self.out.reserve(20);
        if (0..10_000).contains(&i) {
            // Counts, limits, ids: up to four digits written directly, two at a time.
            let i = i as usize;
            let at = self.out.at();
            let pair = |n: usize| [DIGITS[2 * n], DIGITS[2 * n + 1]];
            let (hi, lo) = (pair(i / 100), pair(i % 100));
            let (digits, n) = match i {
                0..=9 => ([lo[1], 0, 0, 0], 1),
                10..=99 => ([lo[0], lo[1], 0, 0], 2),
                100..=999 => ([hi[1], lo[0], lo[1], 0], 3),
                _ => ([hi[0], hi[1], lo[0], lo[1]], 4),
            };
            // SAFETY: room for 20 bytes reserved.
            unsafe { (at as *mut [u8; 4]).write_unaligned(digits) };
            self.out.len += n;
            return;
        }
        let mut buf = itoa::Buffer::new();
        let digits = buf.format(i).as_bytes();
        if digits.len() <= 16 {
            self.out.put_short_unchecked(digits);
        } else {
            self.out.put_unchecked(digits);
        }
    }

    fn integer(&mut self, t: ErlNifTerm) -> Res<'a> {
        let mut i = 0i64;
        if unsafe { enif_get_int64(self.raw, t, &mut i) } != 0 {
            self.int(i);
            return Ok(());
        }
        let mut u = 0u64;
        if unsafe { enif_get_uint64(self.raw, t, &mut u) } != 0 {
            let mut buf = itoa::Buffer::new();
            self.out.put(buf.format(u).as_bytes());
            return Ok(());
        }
        let big =
            term::read_big(self.term(t), self.budget).map_err(|e| Fail::new(Why::Budget(e)))?;
        self.out.put(big.to_string().as_bytes());
        Ok(())
    }

    /// A binary's bytes through the API (`None` for anything else, bit strings included).
    #[inline]
    fn inspect(&self, t: ErlNifTerm) -> Option<&'a [u8]> {
        inspect_bytes(self.raw, t)
    }

    /// An atom's name: ASCII names through a buffer, others through their external format.
    fn atom_name(&self, t: ErlNifTerm) -> Result<String, Box<Fail<'a>>> {
        let mut buf = [0u8; 256];
        let n = unsafe {
            enif_get_atom(
                self.raw,
                t,
                buf.as_mut_ptr() as *mut c_char,
                buf.len() as c_uint,
                ErlNifCharEncoding::ERL_NIF_LATIN1,
            )
        } as usize;
        match buf.get(..n.saturating_sub(1)) {
            Some(name) if n > 0 && name.is_ascii() => {
                // SAFETY: ASCII is UTF-8.
                Ok(unsafe { std::str::from_utf8_unchecked(name) }.to_owned())
            }
            _ => term::atom_name(self.term(t)).ok_or_else(|| self.not_json(t)),
        }
    }

    #[inline(always)]
    fn string_value(&mut self, bytes: &[u8], t: ErlNifTerm) -> Res<'a> {
        self.spend(1 + (bytes.len() >> 5) as i64)?;
        if self.string(bytes, false) {
            Ok(())
        } else {
            Err(self.not_json(t))
        }
    }

    /// Writes `bytes` as a JSON string, escaped as serde_json escapes; `false` (nothing
    /// meaningful written) when they are not UTF-8. `utf8`: already known to be UTF-8.
    #[inline(always)]
    fn string(&mut self, bytes: &[u8], utf8: bool) -> bool {
        let n = bytes.len();
        if n <= 16 && short_plain(bytes) {
            // Most keys and many values: checked in two words, copied in two moves, inline.
            self.out.reserve(18);
            let at = self.out.at();
            // SAFETY: room for 18 bytes reserved.
            unsafe {
                *at = b'"';
                copy_short(bytes, at.add(1));
                *at.add(n + 1) = b'"';
            }
            self.out.len += n + 2;
            return true;
        }
        self.string_long(bytes, utf8)
    }

    /// `string` for longer strings and strings to escape.
    #[inline(never)]
    fn string_long(&mut self, bytes: &[u8], mut utf8: bool) -> bool {
        self.out.reserve(bytes.len() + 2);
        self.out.put_unchecked(b"\"");
        let n = bytes.len();
        if plain(bytes, utf8) {
            // Most keys and values: checked a word at a time, copied at once.
            self.out.put_unchecked(bytes);
            self.out.put_unchecked(b"\"");
            return true;
        }
        let (mut start, mut i) = (0, 0);
        while i < n {
            // Eight plain bytes at a time: no quote, backslash, control or (until the text is
            // known to be UTF-8) non-ASCII byte.
            if i + 8 <= n {
                let word = u64::from_le_bytes(bytes[i..i + 8].try_into().unwrap_or([0; 8]));
                if !needs_care(word, utf8) {
                    i += 8;
                    continue;
                }
            }
            let b = bytes[i];
            match ESCAPE[b as usize] {
                0 => i += 1,
                HI => {
                    if !utf8 {
                        // Bytes before `i` are ASCII: `i` starts a character.
                        if std::str::from_utf8(&bytes[i..]).is_err() {
                            return false;
                        }
                        utf8 = true;
                    }
                    i += 1;
                }
                esc => {
                    self.out.put(&bytes[start..i]);
                    self.escape(b, esc);
                    i += 1;
                    start = i;
                }
            }
        }
        self.out.reserve(n - start + 1);
        self.out.put_unchecked(&bytes[start..]);
        self.out.put_unchecked(b"\"");
        true
    }

    #[cold]
    fn escape(&mut self, b: u8, esc: u8) {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        if esc == UU {
            self.out.put(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[(b >> 4) as usize],
                HEX[(b & 0xF) as usize],
            ]);
        } else {
            self.out.put(&[b'\\', esc]);
        }
    }

    fn enter(&mut self, depth: usize) -> Res<'a> {
        if depth >= MAX_DEPTH {
            Err(Fail::new(Why::Deep))
        } else {
            Ok(())
        }
    }

    fn flatmap(&mut self, keys: &[usize], values: &[usize], depth: usize) -> Res<'a> {
        self.enter(depth)?;
        self.open(b'{');
        let mut members = Members::default();
        let mut first = 0;
        if let (Some(layout), false) = (self.layout, self.pretty) {
            // The common map: binary keys read directly, compact output. A small map's keys
            // are in term order, atoms before binaries: once a key is a binary, no atom
            // follows, so no name can come twice and `Members` has nothing to track.
            for (&k, &v) in keys.iter().zip(values) {
                let key = layout::term(k);
                let Shape::Bytes(text) = layout.shape(key) else {
                    break;
                };
                self.spend(1 + (text.len() >> 5) as i64)?;
                if first > 0 {
                    self.out.byte(b',');
                }
                first += 1;
                if !self.string(text, false) {
                    return Err(bad_key());
                }
                self.out.byte(b':');
                at(
                    self.child(layout::term(v), depth + 1),
                    Seg::Key(self.term(key)),
                )?;
            }
            members.count = first;
            members.binary = first > 0;
        }
        for (&k, &v) in keys[first..].iter().zip(&values[first..]) {
            self.member(
                &mut members,
                layout::term(k),
                layout::term(v),
                depth,
                || keys.iter().map(|&k| layout::term(k)).collect(),
            )?;
        }
        self.close(b'}', members.count > 0);
        Ok(())
    }

    /// A map too large to be a small map (or any map without direct reads): the iterator.
    fn api_map(&mut self, t: ErlNifTerm, depth: usize) -> Res<'a> {
        self.enter(depth)?;
        let mut iter = MaybeUninit::<ErlNifMapIterator>::uninit();
        let iter = iter.as_mut_ptr();
        let created = unsafe {
            enif_map_iterator_create(
                self.raw,
                t,
                iter,
                ErlNifMapIteratorEntry::ERL_NIF_MAP_ITERATOR_HEAD,
            )
        };
        if created == 0 {
            return Err(self.not_json(t));
        }
        let raw = self.raw;
        let result = (|| {
            let mut members = Members::default();
            self.open(b'{');
            let (mut k, mut v) = (MaybeUninit::uninit(), MaybeUninit::uninit());
            while unsafe { enif_map_iterator_get_pair(raw, iter, k.as_mut_ptr(), v.as_mut_ptr()) }
                != 0
            {
                let (key, value) = unsafe { (k.assume_init(), v.assume_init()) };
                self.member(&mut members, key, value, depth, || map_keys(raw, t))?;
                unsafe { enif_map_iterator_next(raw, iter) };
            }
            self.close(b'}', members.count > 0);
            Ok(())
        })();
        unsafe { enif_map_iterator_destroy(raw, iter) };
        result
    }

    /// One member. `all_keys` lists the map's keys in order, for the rare map mixing atom and
    /// binary keys (the only kind that can name one key twice).
    #[inline(always)]
    fn member(
        &mut self,
        members: &mut Members,
        key: ErlNifTerm,
        value: ErlNifTerm,
        depth: usize,
        all_keys: impl FnOnce() -> Vec<ErlNifTerm>,
    ) -> Res<'a> {
        let name = self.key(key)?;
        match name {
            Name::Bytes(_) => members.binary = true,
            Name::Atom(_) => members.atom = true,
        }
        if members.atom && members.binary {
            members.unique(self, key, &name, all_keys)?;
        }
        let text = name.as_bytes();
        self.spend(1 + (text.len() >> 5) as i64)?;
        if members.count > 0 {
            self.out.byte(b',');
        }
        members.count += 1;
        self.newline();
        if !self.string(text, matches!(name, Name::Atom(_))) {
            return Err(bad_key());
        }
        if self.pretty {
            self.out.put(b": ");
        } else {
            self.out.byte(b':');
        }
        at(self.child(value, depth + 1), Seg::Key(self.term(key)))
    }

    /// A key's name; errors as `term::read_key` words them.
    #[inline(always)]
    fn key(&self, key: ErlNifTerm) -> Result<Name<'a>, Box<Fail<'a>>> {
        let bytes = match self.layout.map(|layout| layout.shape(key)) {
            Some(Shape::Bytes(bytes)) => Some(bytes),
            _ => self.inspect(key),
        };
        if let Some(bytes) = bytes {
            return Ok(Name::Bytes(bytes));
        }
        if term_type(self.raw, key) == TYPE_ATOM {
            return self.atom_name(key).map(Name::Atom);
        }
        let what = term::describe(self.term(key));
        Err(Fail::new(Why::NotJson(format!(
            "map key {} is not a string or an atom",
            what.trim_end_matches(" is not a JSON value")
        ))))
    }

    /// A list read cell by cell from memory, never counted first.
    fn list(&mut self, layout: Layout, t: ErlNifTerm, depth: usize) -> Res<'a> {
        self.enter(depth)?;
        self.open(b'[');
        let (mut cell, mut i) = (t, 0);
        loop {
            match layout.shape(cell) {
                Shape::Cons(head, tail) => {
                    self.element(i, layout::term(head), depth)?;
                    cell = layout::term(tail);
                    i += 1;
                }
                Shape::Nil => break,
                _ => return Err(self.not_json(t)),
            }
        }
        self.close(b']', i > 0);
        Ok(())
    }

    fn api_list(&mut self, t: ErlNifTerm, depth: usize) -> Res<'a> {
        self.enter(depth)?;
        self.open(b'[');
        let mut n = 0;
        for (i, cell) in Cells::new(self.term(t)).enumerate() {
            let item = cell.ok_or_else(|| self.not_json(t))?;
            self.element(i, item.as_c_arg(), depth)?;
            n += 1;
        }
        self.close(b']', n > 0);
        Ok(())
    }

    #[inline(always)]
    fn element(&mut self, i: usize, item: ErlNifTerm, depth: usize) -> Res<'a> {
        if i > 0 {
            self.out.byte(b',');
        }
        self.newline();
        at(self.child(item, depth + 1), Seg::Index(i))
    }

    #[inline(always)]
    fn open(&mut self, b: u8) {
        self.out.byte(b);
        self.indent += 1;
    }

    #[inline(always)]
    fn close(&mut self, b: u8, any: bool) {
        self.indent -= 1;
        if any {
            self.newline();
        }
        self.out.byte(b);
    }
}

/// What a map's members so far were.
#[derive(Default)]
struct Members {
    count: usize,
    atom: bool,
    binary: bool,
    /// Names seen, once keys are mixed.
    names: Option<HashSet<String>>,
}

impl Members {
    /// Refuses a name given twice (as an atom and as a string), as `term::duplicate_key` says.
    #[cold]
    #[inline(never)]
    fn unique<'a>(
        &mut self,
        w: &Writer<'_, 'a, '_>,
        key: ErlNifTerm,
        name: &Name,
        all_keys: impl FnOnce() -> Vec<ErlNifTerm>,
    ) -> Res<'a> {
        let text = |n: &Name| std::str::from_utf8(n.as_bytes()).map(str::to_owned);
        if self.names.is_none() {
            let mut names = HashSet::new();
            for k in all_keys().into_iter().take_while(|&k| k != key) {
                if let Some(n) = w.key(k).ok().and_then(|n| text(&n).ok()) {
                    names.insert(n);
                }
            }
            self.names = Some(names);
        }
        let name = text(name).map_err(|_| bad_key())?;
        let names = self.names.get_or_insert_with(HashSet::new);
        if names.insert(name.clone()) {
            return Ok(());
        }
        match term::duplicate_key(&name, &[]) {
            TermError::NotJson { reason, .. } => Err(Fail::new(Why::NotJson(reason))),
            other => Err(Fail::new(Why::Budget(other))),
        }
    }
}

/// A map's keys in iteration order (the rare mixed-keys check).
fn map_keys(env: *mut ErlNifEnv, map: ErlNifTerm) -> Vec<ErlNifTerm> {
    let mut keys = Vec::new();
    let mut iter = MaybeUninit::<ErlNifMapIterator>::uninit();
    let iter = iter.as_mut_ptr();
    let head = ErlNifMapIteratorEntry::ERL_NIF_MAP_ITERATOR_HEAD;
    if unsafe { enif_map_iterator_create(env, map, iter, head) } == 0 {
        return keys;
    }
    let (mut k, mut v) = (MaybeUninit::uninit(), MaybeUninit::uninit());
    while unsafe { enif_map_iterator_get_pair(env, iter, k.as_mut_ptr(), v.as_mut_ptr()) } != 0 {
        keys.push(unsafe { k.assume_init() });
        unsafe { enif_map_iterator_next(env, iter) };
    }
    unsafe { enif_map_iterator_destroy(env, iter) };
    keys
}

/// Whether `bytes` need no escaping and (unless `utf8`) are ASCII, eight bytes at a time: a
/// short string padded with spaces, the last word of a long one overlapping the one before.
#[inline(always)]
fn plain(bytes: &[u8], utf8: bool) -> bool {
    let n = bytes.len();
    let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap_or([0; 8]));
    if n < 8 {
        let mut padded = [b' '; 8];
        padded[..n].copy_from_slice(bytes);
        return !needs_care(u64::from_le_bytes(padded), utf8);
    }
    let mut i = 0;
    while i + 8 <= n {
        if needs_care(word(i), utf8) {
            return false;
        }
        i += 8;
    }
    i == n || !needs_care(word(n - 8), utf8)
}

const LO: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// Whether any of the eight bytes of `word` is a quote, a backslash, a control character, or
/// (unless the text is known to be UTF-8) non-ASCII.
#[inline(always)]
fn needs_care(word: u64, utf8: bool) -> bool {
    care_bits(word, utf8) != 0
}

/// `needs_care` as bits (the high bit of each byte that needs care), to combine words.
#[inline(always)]
fn care_bits(word: u64, utf8: bool) -> u64 {
    let zero = |v: u64| v.wrapping_sub(LO) & !v & HIGH;
    let control = word.wrapping_sub(LO * 0x20) & !word & HIGH;
    let high = if utf8 { 0 } else { word & HIGH };
    zero(word ^ (LO * b'"' as u64)) | zero(word ^ (LO * b'\\' as u64)) | control | high
}

/// "00" to "99": two digits of a number at a time.
static DIGITS: [u8; 200] = {
    let mut table = [0u8; 200];
    let mut n = 0;
    while n < 100 {
        table[2 * n] = b'0' + (n / 10) as u8;
        table[2 * n + 1] = b'0' + (n % 10) as u8;
        n += 1;
    }
    table
};

/// serde_json's escapes: 0 plain, `HI` a non-ASCII byte (plain once the text is checked),
/// `UU` written as `\u00XX`, else the character after the backslash.
const HI: u8 = 1;
const UU: u8 = b'u';
static ESCAPE: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 0x20 {
        table[b] = UU;
        b += 1;
    }
    table[0x08] = b'b';
    table[0x09] = b't';
    table[0x0A] = b'n';
    table[0x0C] = b'f';
    table[0x0D] = b'r';
    table[b'"' as usize] = b'"';
    table[b'\\' as usize] = b'\\';
    let mut b = 0x80;
    while b < 0x100 {
        table[b] = HI;
        b += 1;
    }
    table
};
