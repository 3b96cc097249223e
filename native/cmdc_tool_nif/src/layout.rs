//! Direct reads of the few term shapes a tool-args map is made of, for the in-place validator
//! (`beam.rs`, `compiled.rs`) and the JSON encoder: small integers, lists, small maps
//! ("flatmaps") and byte-aligned binaries (on the process heap, reference-counted, and
//! sub-binaries of either: what `Jason`, `:binary.part/3` and code evaluated by `erl_eval` make).
//!
//! Why: reading a typical 8-property map through the `enif_*` API takes ~60 calls (type, map
//! iterator, binary inspection...), which measured as more than the validation itself. These
//! shapes have kept one memory layout for many OTP releases, but it is not a public API. So the
//! layout is never assumed: on first use, [`get`] builds sample terms with the public API in a
//! private environment and checks that reading them directly gives exactly what the API says.
//! If anything differs (another OTP, a 32-bit or debug emulator), direct reads stay off and
//! every term goes through `enif_*`. Shapes outside this list (large maps, floats, bignums,
//! reference-counted and sub-binaries...) always do.
#![allow(unsafe_code)]

use std::mem::MaybeUninit;
use std::sync::OnceLock;

use rustler::sys::{
    enif_alloc_binary, enif_inspect_binary, enif_make_atom, enif_make_binary, enif_make_int64,
    enif_make_list_cell, enif_make_map_from_arrays, enif_make_new_binary, enif_make_sub_binary,
    enif_map_iterator_create, enif_map_iterator_destroy, enif_map_iterator_get_pair,
    enif_map_iterator_next, ErlNifBinary, ErlNifEnv, ErlNifMapIterator, ErlNifMapIteratorEntry,
    ErlNifTerm,
};
use rustler::{Env, OwnedEnv};

/// What the probe learned about this emulator's terms.
#[derive(Debug, Clone, Copy)]
pub struct Layout {
    /// The header word of every small map.
    flatmap_header: usize,
    /// The low 6 bits of a heap binary's header (the rest is its size in words).
    heap_binary_tag: usize,
    /// The header word of a reference-counted binary (`ProcBin`: header, size, next, val,
    /// bytes, flags).
    refc_header: usize,
    /// The header word of a sub-binary (`ErlSubBin`: header, size, offset, bit size and bit
    /// offset bytes, original binary).
    sub_header: usize,
    /// `[]`.
    nil: usize,
    /// The low 6 bits of a positive and of a negative big integer's header (the rest is its
    /// size in words): the cost of converting one is known before converting it.
    big_tags: [usize; 2],
    /// The header word of a float (header, then the `f64`'s bits): read by the encoder, where
    /// `enif_*` took four calls per float.
    float_header: usize,
}

/// The size in 64-bit words of a big integer (`None` when `term` is not one or the layout is
/// unknown): what converting it will cost, read without converting it.
#[inline]
pub fn big_words(term: ErlNifTerm) -> Option<usize> {
    get()?.big_words(term)
}

/// One term as the walker sees it.
pub enum Shape<'t> {
    /// An integer that fits an immediate.
    Small(i64),
    /// A proper or improper list cell: head and tail.
    Cons(usize, usize),
    /// `[]`.
    Nil,
    /// A small map: its keys and values, in the same order.
    Map(&'t [usize], &'t [usize]),
    /// The bytes of a byte-aligned binary.
    Bytes(&'t [u8]),
    /// Anything else: ask the `enif_*` API.
    Other,
}

const TAG_MASK: usize = 0b11;
const TAG_LIST: usize = 0b01;
const TAG_BOXED: usize = 0b10;
const SMALL_MASK: usize = 0b1111;
const SMALL_TAG: usize = 0b1111;
const HEADER_TAG_MASK: usize = 0b11_1111;

static LAYOUT: OnceLock<Option<Layout>> = OnceLock::new();

/// A term's word (`ErlNifTerm` is a transparent wrapper of one).
#[inline]
pub fn word(term: ErlNifTerm) -> usize {
    // SAFETY: `ErlNifTerm` is `#[repr(transparent)]` over `size_t`.
    unsafe { std::mem::transmute::<ErlNifTerm, usize>(term) }
}

/// The term of a word read from a term's memory.
#[inline]
pub fn term(word: usize) -> ErlNifTerm {
    // SAFETY: as in `word`.
    unsafe { std::mem::transmute::<usize, ErlNifTerm>(word) }
}

/// The verified layout, or `None` when direct reads are off for this emulator.
#[inline]
pub fn get() -> Option<Layout> {
    *LAYOUT.get_or_init(|| {
        if cfg!(target_pointer_width = "64") {
            OwnedEnv::new().run(probe)
        } else {
            None
        }
    })
}

impl Layout {
    /// See [`big_words`].
    #[inline]
    pub fn big_words(self, term: ErlNifTerm) -> Option<usize> {
        let t = word(term);
        if t & TAG_MASK != TAG_BOXED {
            return None;
        }
        // SAFETY: a boxed term points at its header word.
        let header = unsafe { *((t - TAG_BOXED) as *const usize) };
        self.big_tags
            .contains(&(header & HEADER_TAG_MASK))
            .then_some(header >> 6)
    }

    /// The value of `term` if it is a float.
    #[inline]
    pub fn float(self, term: ErlNifTerm) -> Option<f64> {
        let t = word(term);
        if t & TAG_MASK != TAG_BOXED {
            return None;
        }
        let boxed = (t - TAG_BOXED) as *const usize;
        // SAFETY: a boxed term points at its header word; a float's value follows it (checked
        // by `probe`).
        unsafe { (*boxed == self.float_header).then(|| f64::from_bits(*boxed.add(1) as u64)) }
    }

    /// Classifies `term`, a valid term alive for `'t` (the NIF call).
    #[inline]
    pub fn shape<'t>(self, term: ErlNifTerm) -> Shape<'t> {
        let t = word(term);
        match t & TAG_MASK {
            TAG_LIST => {
                // SAFETY: a list term points at two words, head and tail (checked by `probe`).
                let cell = (t - TAG_LIST) as *const usize;
                unsafe { Shape::Cons(*cell, *cell.add(1)) }
            }
            TAG_BOXED => {
                let boxed = (t - TAG_BOXED) as *const usize;
                // SAFETY: a boxed term points at its header word.
                let header = unsafe { *boxed };
                if header == self.flatmap_header {
                    // SAFETY: layout checked by `probe`: header, size, keys tuple, values.
                    unsafe {
                        let size = *boxed.add(1);
                        let keys = (*boxed.add(2) - TAG_BOXED) as *const usize;
                        Shape::Map(
                            std::slice::from_raw_parts(keys.add(1), size),
                            std::slice::from_raw_parts(boxed.add(3), size),
                        )
                    }
                } else {
                    // SAFETY: a boxed term's header, checked by `probe` for each binary kind.
                    unsafe { self.binary(boxed, header) }
                }
            }
            _ if t & SMALL_MASK == SMALL_TAG => Shape::Small((t as i64) >> 4),
            _ if t == self.nil => Shape::Nil,
            _ => Shape::Other,
        }
    }

    /// The bytes of the binary at `boxed` (header `header`), if it is a byte-aligned one.
    ///
    /// SAFETY: `boxed` points at a live term's header. The bytes stay where they are for the
    /// NIF call: a writable binary grows only when its owner appends, and the owner is in this
    /// call.
    #[inline(always)]
    unsafe fn binary<'t>(self, boxed: *const usize, header: usize) -> Shape<'t> {
        let size = *boxed.add(1);
        let (data, offset) = if header & HEADER_TAG_MASK == self.heap_binary_tag {
            (boxed.add(2) as *const u8, 0)
        } else if header == self.refc_header {
            (*boxed.add(4) as *const u8, 0)
        } else if header == self.sub_header {
            // Bit size and bit offset: the two low bytes of the fourth word.
            if *boxed.add(3) & 0xFFFF != 0 {
                return Shape::Other;
            }
            let orig = (*boxed.add(4) - TAG_BOXED) as *const usize;
            let orig_header = *orig;
            let data = if orig_header & HEADER_TAG_MASK == self.heap_binary_tag {
                orig.add(2) as *const u8
            } else if orig_header == self.refc_header {
                *orig.add(4) as *const u8
            } else {
                return Shape::Other;
            };
            (data, *boxed.add(2))
        } else {
            return Shape::Other;
        };
        Shape::Bytes(std::slice::from_raw_parts(data.add(offset), size))
    }
}

/// Builds sample terms with the public API and keeps the layout only if reading them directly
/// agrees with the API on every point.
// Long on purpose: one list of sample terms and the checks comparing them, read side by side;
// split, a dozen raw terms would travel between functions.
fn probe(env: Env) -> Option<Layout> {
    let raw = env.as_c_arg();
    unsafe {
        let nil = word(rustler::sys::enif_make_list_from_array(
            raw,
            std::ptr::null(),
            0,
        ));
        let one = sample_binary(raw, b"k")?;
        let long = sample_binary(raw, b"a longer key, still small")?;
        let heap_binary_tag = boxed_header(one)? & HEADER_TAG_MASK;
        // A reference-counted binary (over 64 bytes), sub-binaries of it and of a heap binary,
        // and a bit string (which direct reads leave to the API).
        let refc = sample_refc(raw, 200)?;
        let refc_header = boxed_header(refc)?;
        let sub_refc = word(enif_make_sub_binary(raw, term(refc), 7, 100));
        let sub_heap = word(enif_make_sub_binary(raw, term(long), 2, 9));
        let sub_header = boxed_header(sub_refc)?;
        let bits = sample_etf(raw, &[131, 77, 0, 0, 0, 2, 3, 0xAB, 0xE0])?;
        let small = word(enif_make_int64(raw, -7));
        let big_small = word(enif_make_int64(raw, 1 << 40));
        let atom = word(enif_make_atom(raw, c"probe".as_ptr()));
        let list = word(enif_make_list_cell(raw, term(small), term(nil)));
        let keys = [one, long, word(enif_make_atom(raw, c"k2".as_ptr()))];
        let values = [small, list, atom];
        let map = sample_map(raw, &keys, &values)?;
        let map1 = sample_map(raw, &keys[..1], &values[..1])?;
        let flatmap_header = boxed_header(map)?;
        // Big integers of one and two words, both signs: 2^64 - 1, -2^63, 2^64 + 1 (external
        // format, SMALL_BIG_EXT with nine bytes).
        let pos1 = word(rustler::sys::enif_make_uint64(raw, u64::MAX));
        let neg1 = word(enif_make_int64(raw, i64::MIN));
        let pos2 = sample_etf(raw, &[131, 110, 9, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1])?;
        let big_tags = [
            boxed_header(pos1)? & HEADER_TAG_MASK,
            boxed_header(neg1)? & HEADER_TAG_MASK,
        ];
        let floats = [1.5f64, -0.0, 1e300, -2.2250738585072014e-308];
        let float_terms = floats.map(|f| word(rustler::sys::enif_make_double(raw, f)));
        let float_header = boxed_header(float_terms[0])?;
        let layout = Layout {
            flatmap_header,
            heap_binary_tag,
            refc_header,
            sub_header,
            nil,
            big_tags,
            float_header,
        };
        let checks = [
            boxed_header(map1) == Some(flatmap_header),
            boxed_header(long).map(|h| h & HEADER_TAG_MASK) == Some(heap_binary_tag),
            matches!(layout.shape(term(small)), Shape::Small(-7)),
            matches!(layout.shape(term(big_small)), Shape::Small(n) if n == 1 << 40),
            matches!(layout.shape(term(nil)), Shape::Nil),
            matches!(layout.shape(term(atom)), Shape::Other),
            matches!(layout.shape(term(list)), Shape::Cons(h, t) if h == small && t == nil),
            bytes_agree(raw, &layout, one),
            bytes_agree(raw, &layout, long),
            bytes_agree(raw, &layout, refc),
            bytes_agree(raw, &layout, sub_refc),
            bytes_agree(raw, &layout, sub_heap),
            boxed_header(sub_heap) == Some(sub_header),
            refc_header & HEADER_TAG_MASK != heap_binary_tag,
            matches!(layout.shape(term(bits)), Shape::Other),
            map_agrees(raw, &layout, map),
            map_agrees(raw, &layout, map1),
            big_tags[0] != big_tags[1],
            layout.big_words(term(pos1)) == Some(1),
            layout.big_words(term(neg1)) == Some(1),
            layout.big_words(term(pos2)) == Some(2),
            layout.big_words(term(small)).is_none(),
            layout.big_words(term(one)).is_none(),
            layout.big_words(term(map)).is_none(),
            floats
                .iter()
                .zip(float_terms)
                .all(|(f, t)| layout.float(term(t)).map(f64::to_bits) == Some(f.to_bits())),
            float_terms
                .iter()
                .all(|&t| matches!(layout.shape(term(t)), Shape::Other)),
            [
                small, one, long, refc, sub_refc, map, pos1, neg1, atom, list, nil,
            ]
            .iter()
            .all(|&t| layout.float(term(t)).is_none()),
        ];
        checks.iter().all(|ok| *ok).then_some(layout)
    }
}

unsafe fn sample_binary(env: *mut ErlNifEnv, bytes: &[u8]) -> Option<usize> {
    let mut term = MaybeUninit::<ErlNifTerm>::uninit();
    let data = enif_make_new_binary(env, bytes.len(), term.as_mut_ptr());
    if data.is_null() {
        return None;
    }
    std::ptr::copy_nonoverlapping(bytes.as_ptr(), data, bytes.len());
    Some(word(term.assume_init()))
}

/// A reference-counted binary of `len` distinct-ish bytes.
unsafe fn sample_refc(env: *mut ErlNifEnv, len: usize) -> Option<usize> {
    let mut bin = MaybeUninit::<ErlNifBinary>::uninit();
    if enif_alloc_binary(len, bin.as_mut_ptr()) == 0 {
        return None;
    }
    let mut bin = bin.assume_init();
    for i in 0..len {
        *bin.data.add(i) = (i * 7 + 3) as u8;
    }
    Some(word(enif_make_binary(env, &mut bin)))
}

unsafe fn sample_etf(env: *mut ErlNifEnv, etf: &[u8]) -> Option<usize> {
    let mut term = MaybeUninit::<ErlNifTerm>::uninit();
    let read =
        rustler::sys::enif_binary_to_term(env, etf.as_ptr(), etf.len(), term.as_mut_ptr(), 0);
    (read == etf.len()).then(|| word(term.assume_init()))
}

unsafe fn sample_map(env: *mut ErlNifEnv, keys: &[usize], values: &[usize]) -> Option<usize> {
    let mut map = MaybeUninit::<ErlNifTerm>::uninit();
    let ok = enif_make_map_from_arrays(
        env,
        keys.as_ptr() as *const ErlNifTerm,
        values.as_ptr() as *const ErlNifTerm,
        keys.len(),
        map.as_mut_ptr(),
    );
    (ok != 0).then(|| word(map.assume_init()))
}

unsafe fn boxed_header(t: usize) -> Option<usize> {
    (t & TAG_MASK == TAG_BOXED).then(|| *((t - TAG_BOXED) as *const usize))
}

unsafe fn bytes_agree(env: *mut ErlNifEnv, layout: &Layout, t: usize) -> bool {
    let mut bin = MaybeUninit::<ErlNifBinary>::uninit();
    if enif_inspect_binary(env, term(t), bin.as_mut_ptr()) == 0 {
        return false;
    }
    let bin = bin.assume_init();
    let api = std::slice::from_raw_parts(bin.data, bin.size);
    matches!(layout.shape(term(t)), Shape::Bytes(direct) if direct == api)
}

/// The map's members, read with the iterator, equal the direct read's (same order).
unsafe fn map_agrees(env: *mut ErlNifEnv, layout: &Layout, map: usize) -> bool {
    let Shape::Map(keys, values) = layout.shape(term(map)) else {
        return false;
    };
    let mut iter = MaybeUninit::<ErlNifMapIterator>::uninit();
    let iter = iter.as_mut_ptr();
    if enif_map_iterator_create(
        env,
        term(map),
        iter,
        ErlNifMapIteratorEntry::ERL_NIF_MAP_ITERATOR_HEAD,
    ) == 0
    {
        return false;
    }
    let mut api = Vec::new();
    let (mut k, mut v) = (term(0), term(0));
    while enif_map_iterator_get_pair(env, iter, &mut k, &mut v) != 0 {
        api.push((word(k), word(v)));
        enif_map_iterator_next(env, iter);
    }
    enif_map_iterator_destroy(env, iter);
    api.len() == keys.len()
        && api
            .iter()
            .zip(keys.iter().zip(values))
            .all(|(&(ak, av), (&dk, &dv))| ak == dk && av == dv)
}
