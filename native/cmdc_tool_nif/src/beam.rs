//! BEAM terms as a `jsonschema` representation (the `Json` trait of `jsonschema-value`, which
//! that crate implements for Python and Ruby objects).
//!
//! One walk over the caller's term checks the JSON rules (proper lists, UTF-8 binaries, string
//! or atom keys, no key given twice, depth and size budget) and records every node in a flat
//! index: scalars by value, strings as `&str` borrowed from the caller's binaries (no copy),
//! containers as ranges of the index. The validator then reads that index with plain memory
//! accesses. No `serde_json::Value` is built on the valid path; values are built only for
//! errors (cold path).
//!
//! Why an index and not term accessors called by the validator: every `enif_*` call costs
//! ~5 ns, and the validator asks each node several questions (type, string, length...). Reading
//! the term once, which the JSON check has to do anyway, measured ~2.5x faster than answering
//! each question from the term.
#![allow(unsafe_code)]

use std::borrow::Cow;
use std::mem::MaybeUninit;

use jsonschema::json::{cmp, Array, Json, JsonNumber, Node, NodeIdentity, Object};
use jsonschema::JsonType;
use rustler::sys::{
    enif_get_double, enif_get_int64, enif_get_list_cell, enif_get_uint64, enif_inspect_binary,
    enif_is_empty_list, enif_map_iterator_create, enif_map_iterator_destroy,
    enif_map_iterator_get_pair, enif_map_iterator_next, ErlNifBinary, ErlNifMapIterator,
    ErlNifMapIteratorEntry, ErlNifTerm,
};
use rustler::types::BigInt;
use rustler::{Env, Term, TermType};
use serde_json::{Map, Number, Value};

use crate::term::{self, Budget, Seg, TermError, MAX_DEPTH};

/// Objects with more members than this are sorted by key so lookups binary-search.
const LINEAR_MEMBERS: usize = 12;

/// The representation marker.
pub struct Beam;

impl Json for Beam {
    type Node<'a> = BeamNode<'a>;
    type PreparedKey = Box<str>;
    // Terms never contain themselves.
    const ACYCLIC: bool = true;
    type StringBuffer = ();

    fn prepare_key(key: &str) -> Box<str> {
        key.into()
    }

    fn with_string_node<T>((): &mut (), string: &str, f: impl FnOnce(BeamNode<'_>) -> T) -> T {
        let tape = Tape::default();
        f(BeamNode {
            tape: &tape,
            node: Item::Str(string),
        })
    }
}

/// One node of the index.
#[derive(Clone, Copy, Debug)]
pub enum Item<'a> {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    /// An integer beyond 64 bits: index into `Tape::bigs`.
    Big(u32),
    Str(&'a str),
    /// An atom other than true/false/nil, read as its name: index into `Tape::names`.
    Name(u32),
    Array {
        start: u32,
        len: u32,
        id: u32,
    },
    Object {
        start: u32,
        len: u32,
        id: u32,
        sorted: bool,
    },
}

/// A member name: borrowed from a binary key, or an atom key's name.
#[derive(Clone, Copy, Debug)]
enum Key<'a> {
    Str(&'a str),
    Name(u32),
}

/// The index of one term.
#[derive(Default)]
pub struct Tape<'a> {
    /// Children of every container, each container's block contiguous.
    items: Vec<Item<'a>>,
    /// Member names, parallel to `items` (array elements hold a dummy).
    keys: Vec<Key<'a>>,
    names: Vec<String>,
    bigs: Vec<(f64, String)>,
    containers: u32,
    root: Option<Item<'a>>,
}

/// Buffers kept per scheduler thread between calls: validation then allocates nothing for small
/// inputs (allocation and freeing measured as most of the cost of a fresh index).
#[derive(Default)]
struct Buffers {
    items: Vec<Item<'static>>,
    keys: Vec<Key<'static>>,
    scratch: Vec<(Key<'static>, Item<'static>)>,
}

thread_local! {
    static BUFFERS: std::cell::RefCell<Buffers> = std::cell::RefCell::new(Buffers::default());
}

/// Moves an emptied vector's allocation to another lifetime. The in-place `collect` keeps the
/// allocation because the element types have the same layout; no element is ever converted.
fn relabel<T, U>(mut v: Vec<T>) -> Vec<U> {
    v.clear();
    v.into_iter().map(|_| unreachable!()).collect()
}

/// Buffers larger than this are not kept (a huge input should not pin its memory).
const KEEP_CAPACITY: usize = 4096;

impl<'a> Tape<'a> {
    /// Reads a term under the JSON rules (see `term.rs`), within `budget`.
    pub fn build(term: Term<'a>, budget: &mut Budget) -> Result<Tape<'a>, TermError> {
        let buffers = BUFFERS.with(|b| std::mem::take(&mut *b.borrow_mut()));
        let mut builder = Builder {
            tape: Tape {
                items: relabel(buffers.items),
                keys: relabel(buffers.keys),
                names: Vec::new(),
                bigs: Vec::new(),
                containers: 0,
                root: None,
            },
            scratch: relabel(buffers.scratch),
            path: Vec::new(),
            env: term.get_env(),
            budget,
        };
        let root = builder.item(term).map_err(|e| *e);
        let scratch = std::mem::take(&mut builder.scratch);
        if scratch.capacity() <= KEEP_CAPACITY {
            BUFFERS.with(|b| b.borrow_mut().scratch = relabel(scratch));
        }
        builder.tape.root = Some(root?);
        Ok(builder.tape)
    }

    pub fn root(&self) -> BeamNode<'_> {
        BeamNode {
            tape: self,
            node: self.root.unwrap_or(Item::Null),
        }
    }

    fn key(&self, key: Key<'a>) -> &str {
        match key {
            Key::Str(s) => s,
            Key::Name(i) => &self.names[i as usize],
        }
    }

    fn name(&self, i: u32) -> &str {
        &self.names[i as usize]
    }

    fn value(&self, item: Item<'a>) -> Value {
        match item {
            Item::Null => Value::Null,
            Item::Bool(b) => Value::Bool(b),
            Item::Int(i) => Value::Number(i.into()),
            Item::UInt(u) => Value::Number(u.into()),
            Item::Float(f) => Number::from_f64(f).map_or(Value::Null, Value::Number),
            Item::Big(i) => {
                Number::from_f64(self.bigs[i as usize].0).map_or(Value::Null, Value::Number)
            }
            Item::Str(s) => Value::String(s.to_owned()),
            Item::Name(i) => Value::String(self.name(i).to_owned()),
            Item::Array { start, len, .. } => Value::Array(
                self.block(start, len)
                    .iter()
                    .map(|item| self.value(*item))
                    .collect(),
            ),
            Item::Object { start, len, .. } => {
                let range = start as usize..(start + len) as usize;
                let mut map = Map::new();
                for (key, item) in self.keys[range.clone()].iter().zip(&self.items[range]) {
                    map.insert(self.key(*key).to_owned(), self.value(*item));
                }
                Value::Object(map)
            }
        }
    }

    fn block(&self, start: u32, len: u32) -> &[Item<'a>] {
        &self.items[start as usize..(start + len) as usize]
    }
}

impl Drop for Tape<'_> {
    fn drop(&mut self) {
        if self.items.capacity() > KEEP_CAPACITY {
            return;
        }
        let items = std::mem::take(&mut self.items);
        let keys = std::mem::take(&mut self.keys);
        BUFFERS.with(|b| {
            let mut b = b.borrow_mut();
            b.items = relabel(items);
            b.keys = relabel(keys);
        });
    }
}

/// Errors are boxed: the hot `Ok` path then moves a small `Result`.
type Fail = Box<TermError>;

struct Builder<'a, 'b> {
    tape: Tape<'a>,
    /// Children of the containers being read, moved to the tape when their parent is done.
    scratch: Vec<(Key<'a>, Item<'a>)>,
    path: Vec<Seg<'a>>,
    env: Env<'a>,
    budget: &'b mut Budget,
}

mod atoms {
    rustler::atoms! { true_atom = "true", false_atom = "false", nil_atom = "nil" }
}

impl<'a> Builder<'a, '_> {
    #[cold]
    #[inline(never)]
    fn err(&self, term: Term<'a>) -> Fail {
        Box::new(term::not_json(term, &self.path))
    }

    #[cold]
    #[inline(never)]
    fn key_err(&self, key: Term<'a>) -> Fail {
        match term::read_key(key, &self.path) {
            Err(e) => Box::new(e),
            Ok(_) => self.err(key),
        }
    }

    fn raw(&self, raw: ErlNifTerm) -> Term<'a> {
        unsafe { Term::new(self.env, raw) }
    }

    /// A binary's bytes as `str`: `None` when the term is not a binary.
    #[inline]
    fn try_str(&mut self, term: Term<'a>) -> Option<Result<&'a str, Fail>> {
        let mut bin = MaybeUninit::<ErlNifBinary>::uninit();
        let ok =
            unsafe { enif_inspect_binary(self.env.as_c_arg(), term.as_c_arg(), bin.as_mut_ptr()) };
        if ok == 0 {
            return None;
        }
        // The binary belongs to the caller's term, alive for the whole NIF call ('a).
        let bytes: &'a [u8] = unsafe {
            let bin = bin.assume_init();
            std::slice::from_raw_parts(bin.data, bin.size)
        };
        if let Err(e) = self.budget.spend_bytes(bytes.len()) {
            return Some(Err(Box::new(e)));
        }
        Some(std::str::from_utf8(bytes).map_err(|_| self.err(term)))
    }

    #[inline]
    fn str_of(&mut self, term: Term<'a>) -> Result<&'a str, Fail> {
        self.try_str(term).unwrap_or_else(|| Err(self.err(term)))
    }

    fn item(&mut self, term: Term<'a>) -> Result<Item<'a>, Fail> {
        self.budget.spend(1)?;
        if self.path.len() > MAX_DEPTH {
            return Err(Box::new(TermError::TooDeep {
                path: term::pointer(&self.path),
            }));
        }
        let env = self.env.as_c_arg();
        let raw = term.as_c_arg();
        match term.get_type() {
            TermType::Binary => self.str_of(term).map(Item::Str),
            TermType::Integer => {
                let mut i = 0i64;
                if unsafe { enif_get_int64(env, raw, &mut i) } != 0 {
                    return Ok(Item::Int(i));
                }
                let mut u = 0u64;
                if unsafe { enif_get_uint64(env, raw, &mut u) } != 0 {
                    return Ok(Item::UInt(u));
                }
                self.big(term)
            }
            TermType::Float => {
                let mut f = 0f64;
                unsafe { enif_get_double(env, raw, &mut f) };
                Ok(Item::Float(f))
            }
            TermType::Atom => Ok(if raw == atoms::true_atom().as_c_arg() {
                Item::Bool(true)
            } else if raw == atoms::false_atom().as_c_arg() {
                Item::Bool(false)
            } else if raw == atoms::nil_atom().as_c_arg() {
                Item::Null
            } else {
                Item::Name(self.atom_name(term)?)
            }),
            TermType::List => self.list(term),
            TermType::Map => self.map(term),
            _ => Err(self.err(term)),
        }
    }

    /// Integers beyond 64 bits (rare: kept out of `item`'s frame).
    #[inline(never)]
    fn big(&mut self, term: Term<'a>) -> Result<Item<'a>, Fail> {
        let big: BigInt = term.decode().map_err(|_| self.err(term))?;
        let digits = big.to_string();
        self.tape
            .bigs
            .push((digits.parse().unwrap_or(f64::INFINITY), digits));
        Ok(Item::Big(self.tape.bigs.len() as u32 - 1))
    }

    #[inline(never)]
    fn atom_name(&mut self, term: Term<'a>) -> Result<u32, Fail> {
        let name = term.atom_to_string().map_err(|_| self.err(term))?;
        self.tape.names.push(name);
        Ok(self.tape.names.len() as u32 - 1)
    }

    #[inline(never)]
    fn list(&mut self, term: Term<'a>) -> Result<Item<'a>, Fail> {
        let env = self.env.as_c_arg();
        let mark = self.scratch.len();
        let mut cell = term.as_c_arg();
        let mut head = MaybeUninit::<ErlNifTerm>::uninit();
        let mut tail = MaybeUninit::<ErlNifTerm>::uninit();
        let mut index = 0;
        while unsafe { enif_get_list_cell(env, cell, head.as_mut_ptr(), tail.as_mut_ptr()) } != 0 {
            let (h, t) = unsafe { (head.assume_init(), tail.assume_init()) };
            self.path.push(Seg::Index(index));
            let item = self.item(self.raw(h))?;
            self.path.pop();
            self.scratch.push((Key::Str(""), item));
            cell = t;
            index += 1;
        }
        if unsafe { enif_is_empty_list(env, cell) } == 0 {
            return Err(self.err(term));
        }
        let (start, len) = self.flush(mark);
        Ok(Item::Array {
            start,
            len,
            id: self.next_id(),
        })
    }

    #[inline(never)]
    fn map(&mut self, term: Term<'a>) -> Result<Item<'a>, Fail> {
        let env = self.env.as_c_arg();
        let mut iter = MaybeUninit::<ErlNifMapIterator>::uninit();
        let created = unsafe {
            enif_map_iterator_create(
                env,
                term.as_c_arg(),
                iter.as_mut_ptr(),
                ErlNifMapIteratorEntry::ERL_NIF_MAP_ITERATOR_HEAD,
            )
        };
        if created == 0 {
            return Err(self.err(term));
        }
        let mut iter = unsafe { iter.assume_init() };
        let result = self.members(&mut iter);
        unsafe { enif_map_iterator_destroy(env, &mut iter) };
        let (atom_keys, binary_keys, mark) = result?;
        let len = self.scratch.len() - mark;
        let sorted = len > LINEAR_MEMBERS;
        if sorted || (atom_keys && binary_keys) {
            self.check_duplicates(mark, sorted)?;
        }
        let (start, len) = self.flush(mark);
        Ok(Item::Object {
            start,
            len,
            id: self.next_id(),
            sorted,
        })
    }

    fn members(&mut self, iter: &mut ErlNifMapIterator) -> Result<(bool, bool, usize), Fail> {
        let env = self.env.as_c_arg();
        let mark = self.scratch.len();
        let (mut atom_keys, mut binary_keys) = (false, false);
        let mut k = MaybeUninit::<ErlNifTerm>::uninit();
        let mut v = MaybeUninit::<ErlNifTerm>::uninit();
        while unsafe { enif_map_iterator_get_pair(env, iter, k.as_mut_ptr(), v.as_mut_ptr()) } != 0
        {
            let (key, value) = unsafe { (self.raw(k.assume_init()), self.raw(v.assume_init())) };
            // Most keys are binaries: try that first, classify only when it is not one.
            let name = match self.try_str(key) {
                Some(Ok(s)) => {
                    binary_keys = true;
                    Key::Str(s)
                }
                // A budget stop (yield, size) passes through; a bad binary names the key.
                Some(Err(e)) if matches!(*e, TermError::NotJson { .. }) => {
                    return Err(self.key_err(key))
                }
                Some(Err(e)) => return Err(e),
                None if key.get_type() == TermType::Atom => {
                    atom_keys = true;
                    Key::Name(self.atom_name(key)?)
                }
                None => return Err(self.key_err(key)),
            };
            self.path.push(Seg::Key(key));
            let item = self.item(value)?;
            self.path.pop();
            self.scratch.push((name, item));
            unsafe { enif_map_iterator_next(env, iter) };
        }
        Ok((atom_keys, binary_keys, mark))
    }

    /// Sorts a large object's members by name (for binary search) and refuses a name given
    /// twice (`:a` and `"a"`).
    fn check_duplicates(&mut self, mark: usize, sort: bool) -> Result<(), Fail> {
        let tape = &self.tape;
        let block = &mut self.scratch[mark..];
        if sort {
            block.sort_unstable_by(|a, b| tape.key(a.0).cmp(tape.key(b.0)));
            if let Some(w) = block
                .windows(2)
                .find(|w| tape.key(w[0].0) == tape.key(w[1].0))
            {
                return Err(Box::new(term::duplicate_key(tape.key(w[0].0), &self.path)));
            }
        } else {
            for (i, a) in block.iter().enumerate() {
                if block[i + 1..]
                    .iter()
                    .any(|b| tape.key(a.0) == tape.key(b.0))
                {
                    return Err(Box::new(term::duplicate_key(tape.key(a.0), &self.path)));
                }
            }
        }
        Ok(())
    }

    fn flush(&mut self, mark: usize) -> (u32, u32) {
        let start = self.tape.items.len() as u32;
        let len = (self.scratch.len() - mark) as u32;
        for (key, item) in self.scratch.drain(mark..) {
            self.tape.keys.push(key);
            self.tape.items.push(item);
        }
        (start, len)
    }

    fn next_id(&mut self) -> u32 {
        self.tape.containers += 1;
        self.tape.containers
    }
}

/// A node of a tape, as the validator sees it.
#[derive(Clone, Copy)]
pub struct BeamNode<'a> {
    tape: &'a Tape<'a>,
    node: Item<'a>,
}

impl<'a> Node<'a, Beam> for BeamNode<'a> {
    type Object = BeamObject<'a>;
    type Array = BeamArray<'a>;
    type Number = BeamNumber;

    fn as_object(&self) -> Option<BeamObject<'a>> {
        match self.node {
            Item::Object {
                start, len, sorted, ..
            } => Some(BeamObject {
                tape: self.tape,
                start,
                len,
                sorted,
            }),
            _ => None,
        }
    }

    fn as_array(&self) -> Option<BeamArray<'a>> {
        match self.node {
            Item::Array { start, len, .. } => Some(BeamArray {
                tape: self.tape,
                start,
                len,
            }),
            _ => None,
        }
    }

    fn as_string(&self) -> Option<Cow<'a, str>> {
        match self.node {
            Item::Str(s) => Some(Cow::Borrowed(s)),
            Item::Name(i) => Some(Cow::Borrowed(self.tape.name(i))),
            _ => None,
        }
    }

    fn as_number(&self) -> Option<BeamNumber> {
        match self.node {
            Item::Int(i) => Some(BeamNumber::Int(i)),
            Item::UInt(u) => Some(BeamNumber::UInt(u)),
            Item::Float(f) => Some(BeamNumber::Float(f)),
            Item::Big(i) => {
                let (f, digits) = &self.tape.bigs[i as usize];
                Some(BeamNumber::Big(*f, digits.as_str().into()))
            }
            _ => None,
        }
    }

    fn is_number(&self) -> bool {
        matches!(
            self.node,
            Item::Int(_) | Item::UInt(_) | Item::Float(_) | Item::Big(_)
        )
    }

    fn as_boolean(&self) -> Option<bool> {
        match self.node {
            Item::Bool(b) => Some(b),
            _ => None,
        }
    }

    fn is_null(&self) -> bool {
        matches!(self.node, Item::Null)
    }

    fn json_type(&self) -> JsonType {
        match self.node {
            Item::Null => JsonType::Null,
            Item::Bool(_) => JsonType::Boolean,
            Item::Int(_) | Item::UInt(_) | Item::Float(_) | Item::Big(_) => JsonType::Number,
            Item::Str(_) | Item::Name(_) => JsonType::String,
            Item::Array { .. } => JsonType::Array,
            Item::Object { .. } => JsonType::Object,
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
        Cow::Owned(self.tape.value(self.node))
    }

    fn identity(&self) -> Option<NodeIdentity> {
        let tape = self.tape as *const Tape as usize;
        match self.node {
            Item::Array { id, .. } | Item::Object { id, .. } => {
                Some(NodeIdentity::tagged(tape, id))
            }
            // Scalars: never compared for cycles; the address of the string is stable.
            Item::Str(s) => Some(NodeIdentity::tagged(s.as_ptr() as usize, u32::MAX)),
            _ => None,
        }
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

/// An object of the tape.
#[derive(Clone, Copy)]
pub struct BeamObject<'a> {
    tape: &'a Tape<'a>,
    start: u32,
    len: u32,
    sorted: bool,
}

impl<'a> BeamObject<'a> {
    fn range(&self) -> std::ops::Range<usize> {
        self.start as usize..(self.start + self.len) as usize
    }
}

impl<'a> Object<'a, Beam> for BeamObject<'a> {
    type Node = BeamNode<'a>;
    type MemberName = Cow<'a, str>;
    type MembersIter = BeamMembers<'a>;

    fn len(&self) -> usize {
        self.len as usize
    }

    fn get(&self, key: &Box<str>) -> Option<BeamNode<'a>> {
        let tape = self.tape;
        let keys = &tape.keys[self.range()];
        let found = if self.sorted {
            keys.binary_search_by(|k| tape.key(*k).cmp(key)).ok()
        } else {
            keys.iter().position(|k| tape.key(*k) == &**key)
        };
        found.map(|i| BeamNode {
            tape,
            node: tape.items[self.start as usize + i],
        })
    }

    fn members(&self) -> BeamMembers<'a> {
        BeamMembers {
            tape: self.tape,
            range: self.range(),
        }
    }
}

pub struct BeamMembers<'a> {
    tape: &'a Tape<'a>,
    range: std::ops::Range<usize>,
}

impl<'a> Iterator for BeamMembers<'a> {
    type Item = (Cow<'a, str>, BeamNode<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        let i = self.range.next()?;
        let tape = self.tape;
        Some((
            Cow::Borrowed(tape.key(tape.keys[i])),
            BeamNode {
                tape,
                node: tape.items[i],
            },
        ))
    }
}

/// An array of the tape.
#[derive(Clone, Copy)]
pub struct BeamArray<'a> {
    tape: &'a Tape<'a>,
    start: u32,
    len: u32,
}

impl<'a> Array<'a, Beam> for BeamArray<'a> {
    type Node = BeamNode<'a>;
    type ElementsIter = BeamElements<'a>;

    fn len(&self) -> usize {
        self.len as usize
    }

    fn elements(&self) -> BeamElements<'a> {
        BeamElements {
            tape: self.tape,
            items: self.tape.block(self.start, self.len).iter(),
        }
    }
}

pub struct BeamElements<'a> {
    tape: &'a Tape<'a>,
    items: std::slice::Iter<'a, Item<'a>>,
}

impl<'a> Iterator for BeamElements<'a> {
    type Item = BeamNode<'a>;

    fn next(&mut self) -> Option<BeamNode<'a>> {
        self.items.next().map(|item| BeamNode {
            tape: self.tape,
            node: *item,
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
