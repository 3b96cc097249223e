//! The in-place representation of BEAM terms for the `jsonschema` crate (its `Json` trait, which
//! that crate implements for Python and Ruby objects): a flat index of two-word items.
//!
//! The NIF's walker (`native/cmdc_tool_nif/src/beam.rs`) reads a term once, checking the JSON
//! rules, and fills a [`Tape`] through [`Tape::begin`], [`Tape::reserve`], [`Tape::set`] and
//! friends: scalars by value, strings as pointers into the caller's binaries (no copy),
//! containers as ranges of the index. The validator then reads the tape with plain memory
//! accesses; no `serde_json::Value` is built on the valid path, only for errors (cold path).
//! This file has no BEAM types, so `cargo test` checks the representation without a VM.
//!
//! Why two plain words per item: an earlier version built Rust enums per node and spent more
//! time moving them around (store-forwarding stalls) than reading the term.
#![allow(unsafe_code)]

use std::borrow::Cow;
use std::marker::PhantomData;

use jsonschema::json::{cmp, Array, Json, JsonNumber, Node, NodeIdentity, Object};
use jsonschema::JsonType;
use serde_json::{Map, Number, Value};

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
    pub const NULL: Item = Item::new(tag::NULL, 0, 0);

    pub fn boolean(b: bool) -> Item {
        Item::new(if b { tag::TRUE } else { tag::FALSE }, 0, 0)
    }

    pub fn int(i: i64) -> Item {
        Item::new(tag::INT, 0, i as u64)
    }

    /// An integer above `i64::MAX`.
    pub fn uint(u: u64) -> Item {
        Item::new(tag::UINT, 0, u)
    }

    pub fn float(f: f64) -> Item {
        Item::new(tag::FLOAT, 0, f.to_bits())
    }

    /// An array whose `len` elements are at `start..`.
    pub fn array(start: usize, len: usize) -> Item {
        Item::new(tag::ARRAY, len as u64, start as u64)
    }

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

    fn bytes(&self) -> &[u8] {
        // SAFETY: made from a `&str` that lives as long as the tape holding this.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
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
    static BUFFERS: std::cell::Cell<Buffers> = const {
        std::cell::Cell::new(Buffers {
            items: Vec::new(),
            keys: Vec::new(),
        })
    };
}

/// Buffers larger than this are not kept (a huge input should not pin its memory).
pub const KEEP_CAPACITY: usize = 4096;

/// The capacities (items, keys) of the buffers this thread keeps for its next tape.
pub fn kept_capacity() -> (usize, usize) {
    let buffers = BUFFERS.take();
    let capacity = (buffers.items.capacity(), buffers.keys.capacity());
    BUFFERS.set(buffers);
    capacity
}

impl<'a> Tape<'a> {
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

    /// A tape holding only its root slot, in this thread's reused buffers.
    pub fn begin() -> Tape<'a> {
        let mut buffers = BUFFERS.take();
        buffers.items.clear();
        buffers.keys.clear();
        buffers.items.push(Item::NULL);
        buffers.keys.push(RawStr::EMPTY);
        Tape {
            items: buffers.items,
            keys: buffers.keys,
            names: Vec::new(),
            bigs: Vec::new(),
            _term: PhantomData,
        }
    }

    /// Reserves `len` contiguous slots for a container's children: the first one.
    #[inline]
    pub fn reserve(&mut self, len: usize) -> usize {
        let start = self.items.len();
        self.items.resize(start + len, Item::NULL);
        self.keys.resize(start + len, RawStr::EMPTY);
        start
    }

    /// Puts a scalar or a container (whose children are already in place) in `slot`.
    #[inline]
    pub fn set(&mut self, slot: usize, item: Item) {
        self.items[slot] = item;
    }

    /// Puts a string in `slot`; `ascii` says every byte is ASCII (length in code points).
    #[inline]
    pub fn set_str(&mut self, slot: usize, string: &'a str, ascii: bool) {
        self.items[slot] = Item::string(string.as_bytes(), ascii);
    }

    /// Names the object member in `slot`.
    #[inline]
    pub fn set_key(&mut self, slot: usize, name: &'a str) {
        self.keys[slot] = RawStr::new(name);
    }

    /// Names the object member in `slot` with an owned name (an atom's).
    pub fn set_owned_key(&mut self, slot: usize, name: String) {
        self.names.push(name);
        self.keys[slot] = RawStr::new(&self.names[self.names.len() - 1]);
    }

    /// A string item owned by the tape (an atom's name).
    pub fn name(&mut self, name: String) -> Item {
        self.names.push(name);
        Item::new(tag::NAME, 0, self.names.len() as u64 - 1)
    }

    /// An integer beyond 64 bits, from its decimal digits.
    pub fn big(&mut self, digits: String) -> Item {
        let float = digits.parse().unwrap_or(f64::INFINITY);
        self.bigs.push((float, digits));
        Item::new(tag::BIG, 0, self.bigs.len() as u64 - 1)
    }

    /// Records the object whose `size` members are at `start..` in `slot`: a large one is
    /// sorted for binary search. `false` when a name is given twice (only possible when keys
    /// came in two forms, `mixed`, or in a large map, where sorting finds it for free).
    pub fn finish_object(&mut self, slot: usize, start: usize, size: usize, mixed: bool) -> bool {
        let range = start..start + size;
        let tag = if size > LINEAR_MEMBERS {
            if !self.sort_members(range) {
                return false;
            }
            tag::SORTED
        } else {
            if mixed && self.has_duplicate(range) {
                return false;
            }
            tag::OBJECT
        };
        self.items[slot] = Item::new(tag, size as u64, start as u64);
        true
    }

    fn has_duplicate(&self, range: std::ops::Range<usize>) -> bool {
        range
            .clone()
            .any(|i| (i + 1..range.end).any(|j| self.key(i) == self.key(j)))
    }

    /// Sorts members by name; `false` on a name given twice.
    fn sort_members(&mut self, range: std::ops::Range<usize>) -> bool {
        let sorted = range
            .clone()
            .zip(range.clone().skip(1))
            .all(|(a, b)| self.key(a) < self.key(b));
        if sorted {
            return true;
        }
        let mut members: Vec<(RawStr, Item)> = self.keys[range.clone()]
            .iter()
            .copied()
            .zip(self.items[range.clone()].iter().copied())
            .collect();
        members.sort_unstable_by(|a, b| a.0.bytes().cmp(b.0.bytes()));
        if members.windows(2).any(|w| w[0].0.bytes() == w[1].0.bytes()) {
            return false;
        }
        for (i, (key, item)) in range.zip(members) {
            self.keys[i] = key;
            self.items[i] = item;
        }
        true
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

/// Whether `bytes` are ASCII, and so valid UTF-8 with one code point per byte. Short strings
/// (most keys and values) are checked a word at a time with overlapping loads.
#[inline]
pub fn is_ascii(bytes: &[u8]) -> bool {
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

/// The representation without a BEAM: tapes built from parsed values the way the walker builds
/// them from terms (the walk itself needs `enif_*` and is tested from ExUnit, `beam_test.exs`).
#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::compile_for;
    use serde_json::json;

    /// Builds a tape from a parsed value through the builder API the NIF's walker uses, with
    /// strings borrowed from the value.
    fn from_value(value: &Value) -> Tape<'_> {
        let mut tape = Tape::begin();
        fill(&mut tape, value, 0);
        tape
    }

    fn fill<'a>(tape: &mut Tape<'a>, value: &'a Value, slot: usize) {
        let item = match value {
            Value::Null => Item::NULL,
            Value::Bool(b) => Item::boolean(*b),
            Value::Number(n) => match (n.as_i64(), n.as_u64()) {
                (Some(i), _) => Item::int(i),
                (None, Some(u)) => Item::uint(u),
                _ => Item::float(n.as_f64().unwrap_or(0.0)),
            },
            Value::String(s) => return tape.set_str(slot, s, s.is_ascii()),
            Value::Array(items) => {
                let start = tape.reserve(items.len());
                for (i, item) in items.iter().enumerate() {
                    fill(tape, item, start + i);
                }
                Item::array(start, items.len())
            }
            Value::Object(map) => {
                let start = tape.reserve(map.len());
                for (i, (key, item)) in map.iter().enumerate() {
                    tape.set_key(start + i, key);
                    fill(tape, item, start + i);
                }
                assert!(tape.finish_object(slot, start, map.len(), false));
                return;
            }
        };
        tape.set(slot, item);
    }

    fn node<'t>(tape: &'t Tape<'t>, pointer: &str) -> BeamNode<'t> {
        let mut node = tape.root();
        for step in pointer.split('/').skip(1) {
            node = match (node.as_object(), node.as_array()) {
                (Some(object), _) => object.get(&Beam::prepare_key(step)).unwrap(),
                (_, Some(array)) => array.elements().nth(step.parse().unwrap()).unwrap(),
                _ => panic!("no {step} under a scalar"),
            };
        }
        node
    }

    #[test]
    fn a_thread_keeps_small_buffers_and_drops_big_ones() {
        std::thread::spawn(|| {
            drop(from_value(&json!({"a": [1, 2, 3]})));
            let (items, keys) = kept_capacity();
            assert!(items >= 5 && keys >= 5 && items <= KEEP_CAPACITY);
            let big = Value::Array(vec![json!(1); 100_000]);
            drop(from_value(&big));
            assert_eq!(kept_capacity(), (0, 0));
        })
        .join()
        .unwrap();
    }

    #[test]
    fn meets_the_accessor_contract() {
        let document = jsonschema::json::conformance::document();
        let tape = from_value(&document);
        jsonschema::json::conformance::assert_conformance::<Beam>(&tape.root());
    }

    #[test]
    fn every_node_kind() {
        let value = json!({"n": null, "t": true, "f": false, "s": "snow ☃", "a": [1], "o": {}});
        let tape = from_value(&value);
        let kinds = [
            ("/n", JsonType::Null),
            ("/t", JsonType::Boolean),
            ("/f", JsonType::Boolean),
            ("/s", JsonType::String),
            ("/a", JsonType::Array),
            ("/a/0", JsonType::Number),
            ("/o", JsonType::Object),
        ];
        for (pointer, kind) in kinds {
            assert_eq!(node(&tape, pointer).json_type(), kind, "{pointer}");
        }
        assert!(node(&tape, "/n").is_null());
        assert_eq!(node(&tape, "/t").as_boolean(), Some(true));
        assert_eq!(node(&tape, "/f").as_boolean(), Some(false));
        assert_eq!(node(&tape, "/s").as_string().as_deref(), Some("snow ☃"));
        assert_eq!(node(&tape, "/s").string_length(), Some(6));
        assert!(node(&tape, "/o").as_object().unwrap().is_empty());
        assert_eq!(tape.root().to_value().into_owned(), value);
    }

    #[test]
    fn atom_names_are_strings() {
        let value = json!(["placeholder"]);
        let mut tape = from_value(&value);
        let name = tape.name("fast".to_owned());
        tape.set(1, name);
        let name = node(&tape, "/0");
        assert_eq!(name.json_type(), JsonType::String);
        assert_eq!(name.as_string().as_deref(), Some("fast"));
        assert!(name.equals_value(&json!("fast")));
        assert_eq!(tape.root().to_value().into_owned(), json!(["fast"]));
    }

    #[test]
    fn every_number_form() {
        let value = json!([i64::MIN, -1, 0, i64::MAX, u64::MAX, 1.5, 2.0, "big"]);
        let mut tape = from_value(&value);
        let big = tape.big("1267650600228229401496703205376".to_owned()); // 2^100
        tape.set(8, big); // slot 0 is the root: element 7 lives in slot 8
        let n = |i: usize| node(&tape, &format!("/{i}")).as_number().unwrap();
        assert_eq!(n(0).as_i64(), Some(i64::MIN));
        assert_eq!(n(0).as_u64(), None);
        assert_eq!(n(1).as_i64(), Some(-1));
        assert_eq!(n(3).as_u64(), Some(i64::MAX as u64));
        assert_eq!(n(4).as_u64(), Some(u64::MAX));
        assert_eq!(n(4).as_i64(), None);
        assert_eq!(n(5).as_f64(), Some(1.5));
        assert!(!n(5).is_integer());
        assert!(n(6).is_integer() && !n(6).is_written_as_integer());
        assert!(n(7).is_integer() && n(7).is_written_as_integer());
        assert_eq!(n(7).as_str(), "1267650600228229401496703205376");
        assert_eq!(n(7).as_f64(), Some(2f64.powi(100)));
        // Numbers compare mathematically (enum, const): 2 == 2.0.
        assert!(node(&tape, "/6").equals_value(&json!(2)));
        assert!(node(&tape, "/2").equals_value(&json!(0.0)));
        assert!(!node(&tape, "/5").equals_value(&json!(1)));
    }

    #[test]
    fn small_objects_scan_and_large_ones_binary_search() {
        let small = json!({"b": 1, "a": 2});
        let large: Value = (0..40).map(|i| (format!("k{i:02}"), json!(i))).collect();
        for (value, sorted) in [(&small, false), (&large, true)] {
            let tape = from_value(value);
            let object = tape.root().as_object().unwrap();
            assert_eq!(object.sorted, sorted);
            for (key, expected) in value.as_object().unwrap() {
                let got = object.get(&Beam::prepare_key(key)).unwrap();
                assert_eq!(&got.to_value().into_owned(), expected);
            }
            assert!(object.get(&Beam::prepare_key("missing")).is_none());
            let names: Vec<String> = object.members().map(|(k, _)| k.into_owned()).collect();
            assert_eq!(names.len(), value.as_object().unwrap().len());
        }
    }

    #[test]
    fn a_name_given_twice_is_refused_in_small_and_large_objects() {
        for size in [2, 20] {
            let names: Vec<String> = (0..size).map(|i| format!("k{}", i % (size - 1))).collect();
            let mut tape = Tape::begin();
            let start = tape.reserve(size);
            for (i, name) in names.iter().enumerate() {
                tape.set_key(start + i, name);
            }
            assert!(!tape.finish_object(0, start, size, true), "{size}");
        }
        let mut tape = Tape::begin();
        let start = tape.reserve(2);
        tape.set_key(start, "mode");
        tape.set_owned_key(start + 1, "mode".to_owned());
        assert!(!tape.finish_object(0, start, 2, true));
    }

    #[test]
    fn large_objects_arrive_in_any_order() {
        let names: Vec<String> = (0..30).rev().map(|i| format!("k{i:02}")).collect();
        let mut tape = Tape::begin();
        let start = tape.reserve(names.len());
        for (i, name) in names.iter().enumerate() {
            tape.set_key(start + i, name);
            tape.set(start + i, Item::int(i as i64));
        }
        assert!(tape.finish_object(0, start, names.len(), false));
        let object = tape.root().as_object().unwrap();
        let k29 = object.get(&Beam::prepare_key("k29")).unwrap();
        assert_eq!(k29.as_number().unwrap().as_i64(), Some(0));
        let k00 = object.get(&Beam::prepare_key("k00")).unwrap();
        assert_eq!(k00.as_number().unwrap().as_i64(), Some(29));
    }

    #[test]
    fn every_node_has_its_own_identity() {
        let value = json!([[], [], {}, {}, "x", "x"]);
        let tape = from_value(&value);
        let mut seen: Vec<_> = (0..6)
            .map(|i| node(&tape, &format!("/{i}")).identity().unwrap())
            .collect();
        seen.push(tape.root().identity().unwrap());
        let count = seen.len();
        seen.sort_by_key(|id| format!("{id:?}"));
        seen.dedup();
        assert_eq!(seen.len(), count);
    }

    #[test]
    fn ascii_check_agrees_with_std_at_every_length() {
        for len in 0..40 {
            let ascii = "a".repeat(len);
            assert!(is_ascii(ascii.as_bytes()), "{len}");
            for at in 0..len {
                let mut bytes = ascii.clone().into_bytes();
                bytes[at] = 0xC3;
                assert!(!is_ascii(&bytes), "{len} {at}");
            }
        }
    }

    #[test]
    fn validates_like_the_serde_representation() {
        let schema = json!({
            "type": "object",
            "properties": {
                "q": {"type": "string", "minLength": 2},
                "n": {"type": "integer", "maximum": 10},
                "tags": {"type": "array", "items": {"enum": ["a", "b", 1]}, "uniqueItems": true}
            },
            "required": ["q"],
            "additionalProperties": false
        });
        let beam = compile_for::<Beam>(&schema, Default::default(), None).unwrap();
        let serde = crate::schema::compile(&schema, Default::default(), None).unwrap();
        let documents = [
            json!({"q": "ok"}),
            json!({"q": "é"}),
            json!({"q": "ok", "n": 10.0}),
            json!({"q": "ok", "n": 11}),
            json!({"q": "ok", "tags": ["a", 1, 1.0]}),
            json!({"q": "ok", "tags": ["a", "b", 1]}),
            json!({"q": "ok", "extra": true}),
            json!({"n": 1}),
            json!([1, 2]),
        ];
        for document in &documents {
            let tape = from_value(document);
            assert_eq!(
                beam.is_valid(tape.root()),
                serde.is_valid(document),
                "{document}"
            );
        }
    }
}
