//! The program's data: what a compiled schema is (a list of [`Node`]s, each a set of checks),
//! what the evaluator reads an instance through ([`Instance`], [`ValueKind`]) and how it answers
//! ([`Stop`]). The compiler (`compile.rs`) writes these, the evaluator (`eval.rs`) reads them.

use std::cell::RefCell;
use std::mem::ManuallyDrop;

use jsonschema::json::Json;
use jsonschema::Validator;
use serde_json::Value;

use crate::budget::Over;
use crate::schema::MatchCost;
use crate::tape::{Beam, Tape};

/// Deepest instance nesting accepted (the same limit as every other path).
pub const MAX_DEPTH: u32 = 128;
/// Nested evaluations (instance levels plus schema applicators on one instance) before the
/// program hands over: bounds the native stack whatever the schema's `$ref`s do.
pub(super) const MAX_FRAMES: u32 = 300;
/// `required` names one object check tracks (one bit each).
pub(super) const MAX_REQUIRED: usize = 64;

/// Why the program did not answer "valid".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The instance fails the schema.
    Invalid,
    /// Not decided here: not JSON, a value this path does not read, too deep.
    Fallback,
    /// Over the work budget on a normal scheduler: retry on a dirty one.
    Yield,
    /// A check left to the other path: a `pattern` that can backtrack, on a string its
    /// superset accepts (or without a superset). Running its bounded match here and again
    /// there to name a failure cost two matches (~0.3 ms each); the other path's error pass
    /// decides alone, one match per string, valid or not.
    Deferred,
}

pub(super) type Checked = Result<(), Stop>;

/// What one value is, as the program reads it.
#[derive(Clone, Copy)]
pub enum ValueKind<'a> {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    /// A string's bytes, not yet checked: [`Program`] charges their length to the budget, then
    /// checks they are UTF-8 (invalid text falls back).
    Str(&'a [u8]),
    /// A value read as its name (e.g. an atom): [`Instance::name`].
    Name,
    Array,
    Object,
    /// Not JSON, or a value this path does not read (it falls back).
    Other,
}

/// A value the program can read. Copies are cheap handles.
pub trait Instance<'a>: Copy {
    fn kind(self) -> ValueKind<'a>;

    /// The name of a [`ValueKind::Name`] value, written into `buf`; `None` falls back.
    fn name(self, buf: &mut [u8; 256]) -> Option<&str>;

    /// Number of members of an object.
    fn object_len(self) -> usize;

    /// Calls `f` with each member's name and value, in any order; stops at the first error.
    /// Member names must be checked UTF-8; a name given twice or a key that is not a string
    /// gives `Err(Stop::Fallback)`.
    fn members<F: FnMut(&str, Self) -> Checked>(self, f: F) -> Checked;

    /// Calls `f` with each element in order; the number of elements. An improper list gives
    /// `Err(Stop::Fallback)`.
    fn elements<F: FnMut(usize, Self) -> Checked>(self, f: F) -> Result<usize, Stop>;
}

/// Over the budget: `Fallback` on a dirty scheduler (the other path reports the size), `Yield`
/// on a normal one.
impl From<Over> for Stop {
    #[inline(always)]
    fn from(over: Over) -> Self {
        match over {
            Over::Yield => Stop::Yield,
            Over::TooBig => Stop::Fallback,
        }
    }
}

// Type bits.
pub(super) const T_NULL: u8 = 1;

pub(super) const T_BOOL: u8 = 2;

pub(super) const T_OBJECT: u8 = 4;

pub(super) const T_ARRAY: u8 = 8;

pub(super) const T_NUMBER: u8 = 16;

pub(super) const T_INTEGER: u8 = 32;

pub(super) const T_STRING: u8 = 64;

pub(super) const T_ANY: u8 = 127;

/// A numeric limit in the type the schema wrote it in (compared exactly, as `jsonschema` does).
#[derive(Debug, Clone, Copy)]
pub(super) enum Limit {
    U(u64),
    I(i64),
    F(f64),
}

/// What a member or element without its own subschema may be.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Rest {
    Any,
    Forbid,
    Schema(u32),
}

#[derive(Default)]
pub(super) struct StringChecks {
    pub(super) min: Option<u64>,
    pub(super) max: Option<u64>,
    /// `pattern` and `format`, and what one match costs.
    pub(super) leaves: Vec<(Leaf, MatchCost)>,
}

/// One `pattern` or `format` check.
pub(super) enum Leaf {
    /// The crate's validator for a one-keyword schema.
    Crate(Validator<Beam>),
    /// A `pattern` of the form `^(a|b|c)$` with literal alternatives: the string is one of these
    /// (sorted). The crate decides such a pattern the same way but scans the alternatives one by
    /// one: 1.6 µs a string for 2,000 of them (measured), against ~50 ns for a binary search.
    OneOf(Box<[String]>),
    /// A `pattern` that can backtrack, by its linear superset (`crate::pattern::superset`):
    /// a string it refuses is invalid; one it accepts is left to the validator (deferred).
    Superset(regex::Regex),
}

impl Leaf {
    /// Whether `s` passes; for a [`Leaf::Superset`], whether it may.
    pub(super) fn is_valid(&self, s: &str) -> bool {
        match self {
            Leaf::Superset(superset) => superset.is_match(s),
            Leaf::Crate(leaf) => leaf_is_valid(leaf, s),
            Leaf::OneOf(words) => words.binary_search_by(|w| w.as_str().cmp(s)).is_ok(),
        }
    }
}

#[derive(Default)]
pub(super) struct NumberChecks {
    pub(super) min: Option<Limit>,
    pub(super) max: Option<Limit>,
    pub(super) exclusive_min: Option<Limit>,
    pub(super) exclusive_max: Option<Limit>,
    pub(super) multiple_of: Option<Validator>,
}

/// One name the object check looks for.
pub(super) struct Prop {
    pub(super) name: Box<str>,
    /// The `properties` subschema; `None` when the name is only `required`.
    pub(super) schema: Option<u32>,
    /// Bit in the required mask, if required.
    pub(super) bit: Option<u8>,
}

pub(super) struct ObjectChecks {
    /// Ordered by hash bucket; `buckets[b]..buckets[b + 1]` are bucket `b`'s.
    pub(super) props: Vec<Prop>,
    pub(super) buckets: Vec<u32>,
    pub(super) additional: Rest,
    pub(super) required: u64,
    pub(super) min: Option<u64>,
    pub(super) max: Option<u64>,
}

pub(super) struct ArrayChecks {
    pub(super) prefix: Vec<u32>,
    pub(super) rest: Rest,
    pub(super) min: Option<u64>,
    pub(super) max: Option<u64>,
}

impl ArrayChecks {
    /// The schema of element `index`.
    #[inline(always)]
    pub(super) fn rest_at(&self, index: usize) -> Rest {
        match self.prefix.get(index) {
            Some(&sub) => Rest::Schema(sub),
            None => self.rest,
        }
    }

    /// Whether `minItems`/`maxItems` accept `len` elements.
    #[inline(always)]
    pub(super) fn len_ok(&self, len: u64) -> bool {
        self.min.is_none_or(|m| len >= m) && self.max.is_none_or(|m| len <= m)
    }
}

#[derive(Default)]
pub(super) struct Node {
    /// `false` schema.
    pub(super) never: bool,
    /// No `enum`/`const` and no applicators: the common leaf skips those checks.
    pub(super) plain: bool,
    pub(super) types: u8,
    pub(super) string: Option<Box<StringChecks>>,
    pub(super) number: Option<Box<NumberChecks>>,
    pub(super) object: Option<Box<ObjectChecks>>,
    pub(super) array: Option<Box<ArrayChecks>>,
    /// `enum` values and `const` (each a list one value must equal).
    pub(super) equal: Vec<Vec<Value>>,
    pub(super) all_of: Vec<u32>,
    pub(super) any_of: Vec<u32>,
    pub(super) one_of: Vec<u32>,
    pub(super) not: Option<u32>,
    pub(super) if_: Option<(u32, Option<u32>, Option<u32>)>,
}

impl Node {
    pub(super) fn any() -> Node {
        Node {
            types: T_ANY,
            ..Node::default()
        }
    }
}

/// A compiled schema.
pub struct Program {
    pub(super) nodes: Vec<Node>,
}

/// Bucket of a member name: length and a few bytes, enough to tell tool parameter names apart.
#[inline(always)]
pub(super) fn bucket_hash(name: &[u8]) -> usize {
    let n = name.len();
    if n == 0 {
        return 0;
    }
    let (first, mid, last) = (name[0] as usize, name[n / 2] as usize, name[n - 1] as usize);
    (n.wrapping_mul(0x9E37) ^ first.wrapping_mul(31) ^ mid.wrapping_mul(131) ^ (last * 7))
        .wrapping_mul(0x2545_F491)
        >> 7
}

impl ObjectChecks {
    pub(super) fn new(
        mut props: Vec<Prop>,
        additional: Rest,
        min: Option<u64>,
        max: Option<u64>,
    ) -> Self {
        let nb = (props.len() * 2).next_power_of_two().max(1);
        props.sort_by_key(|p| bucket_hash(p.name.as_bytes()) & (nb - 1));
        let mut buckets = vec![0u32; nb + 1];
        for p in &props {
            buckets[(bucket_hash(p.name.as_bytes()) & (nb - 1)) + 1] += 1;
        }
        for b in 1..=nb {
            buckets[b] += buckets[b - 1];
        }
        let required = props
            .iter()
            .filter_map(|p| p.bit)
            .fold(0u64, |m, b| m | 1 << b);
        ObjectChecks {
            props,
            buckets,
            additional,
            required,
            min,
            max,
        }
    }

    #[inline(always)]
    pub(super) fn lookup(&self, name: &str) -> Option<&Prop> {
        let nb = self.buckets.len() - 1;
        let b = bucket_hash(name.as_bytes()) & (nb - 1);
        let (start, end) = (self.buckets[b] as usize, self.buckets[b + 1] as usize);
        self.props[start..end]
            .iter()
            .find(|p| same_name(p.name.as_bytes(), name.as_bytes()))
    }
}

/// Byte equality of two short names, inline: `==` on slices calls `memcmp`, which measured as a
/// seventh of a typical validation.
#[inline(always)]
pub(super) fn same_name(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let (mut ca, mut cb) = (a.chunks_exact(8), b.chunks_exact(8));
    for (x, y) in (&mut ca).zip(&mut cb) {
        if u64::from_ne_bytes(x.try_into().unwrap_or([0; 8]))
            != u64::from_ne_bytes(y.try_into().unwrap_or([0; 8]))
        {
            return false;
        }
    }
    ca.remainder()
        .iter()
        .zip(cb.remainder())
        .all(|(x, y)| x == y)
}

pub(super) fn leaf_is_valid(leaf: &Validator<Beam>, s: &str) -> bool {
    STRING_NODE.with(|buffer| match buffer.try_borrow_mut() {
        Ok(mut buffer) => Beam::with_string_node(&mut buffer, s, |node| leaf.is_valid(node)),
        // Not reentered in practice; a fresh buffer keeps it correct if it ever is.
        Err(_) => Beam::with_string_node(&mut Tape::default(), s, |node| leaf.is_valid(node)),
    })
}

thread_local! {
    /// The one-string node buffer of `Beam::with_string_node`, kept between calls (it keeps its
    /// capacity, so checking a string allocates nothing after the first call on a thread).
    /// Never dropped: a `Tape`'s drop hands its vectors to another thread-local, which may be
    /// gone already when this thread exits.
    static STRING_NODE: RefCell<ManuallyDrop<Tape<'static>>> =
        RefCell::new(ManuallyDrop::new(Tape::default()));
}
