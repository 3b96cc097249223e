//! A JSON Schema compiled into a tree of checks that read instances directly: no index, no
//! intermediate value, nothing allocated while validating.
//!
//! Why: the in-place path (`tape.rs`) reads a term into an index and then runs the `jsonschema`
//! validator over it, visiting every node twice. Tool schemas use a small set of keywords; for
//! those, [`Program`] checks the instance as it reads it, through the [`Instance`] trait (BEAM
//! terms in the NIF crate, `serde_json::Value` here for `cargo test`).
//!
//! The program only answers "valid" (and then the instance is known to be JSON all through) or
//! "not decided here" ([`Stop`]): anything invalid, unusual (big integers, atoms with non-ASCII
//! names, keys given twice) or not JSON goes to the `jsonschema` path, which names the errors.
//! A schema using a keyword outside the supported set does not compile ([`Program::compile`]
//! gives `None`) and every instance takes the `jsonschema` path.
//!
//! Semantics follow the `jsonschema` crate exactly: numbers compare mathematically (`1 == 1.0`,
//! exact across integer and float), `pattern` and `format` are checked by that crate's own
//! validators for a one-string node, `multipleOf` by its validator for a one-number value.
#![allow(unsafe_code)]

use std::cell::RefCell;
use std::collections::HashMap;
use std::mem::ManuallyDrop;

use jsonschema::json::Json;
use jsonschema::{Draft, Validator};
use jsonschema_regex::{analyze_pattern, PatternAnalysis};
use num_cmp::NumCmp;
use serde_json::{Map, Number, Value};

use crate::schema::{draft_for, options_for, MatchCost};
use crate::tape::{is_ascii, Beam, Tape};

/// Deepest instance nesting accepted (the same limit as every other path).
pub const MAX_DEPTH: u32 = 128;
/// Nested evaluations (instance levels plus schema applicators on one instance) before the
/// program hands over: bounds the native stack whatever the schema's `$ref`s do.
const MAX_FRAMES: u32 = 300;
/// `required` names one object check tracks (one bit each).
const MAX_REQUIRED: usize = 64;

/// Why the program did not answer "valid".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The instance fails the schema.
    Invalid,
    /// Not decided here: not JSON, a value this path does not read, too deep.
    Fallback,
    /// Over the work budget on a normal scheduler: retry on a dirty one.
    Yield,
    /// A check left to the other path: a `pattern` that can backtrack. Running its bounded
    /// match here and again there to name a failure cost two matches (~0.3 ms each); the
    /// other path's error pass decides alone, one match per string, valid or not.
    Deferred,
}

type Checked = Result<(), Stop>;

/// What one value is, as the program reads it.
#[derive(Clone, Copy)]
pub enum Kind<'a> {
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
    fn kind(self) -> Kind<'a>;

    /// The name of a [`Kind::Name`] value, written into `buf`; `None` falls back.
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

/// Work allowance for one validation (1 unit per value visited, more for long strings).
pub struct Budget {
    pub remaining: i64,
    /// Over the budget: `Fallback` on a dirty scheduler (the other path reports the size),
    /// `Yield` on a normal one.
    pub dirty: bool,
}

impl Budget {
    #[inline(always)]
    fn spend(&mut self, units: i64) -> Checked {
        self.remaining -= units;
        if self.remaining >= 0 {
            Ok(())
        } else if self.dirty {
            Err(Stop::Fallback)
        } else {
            Err(Stop::Yield)
        }
    }
}

// Type bits.
const T_NULL: u8 = 1;
const T_BOOL: u8 = 2;
const T_OBJECT: u8 = 4;
const T_ARRAY: u8 = 8;
const T_NUMBER: u8 = 16;
const T_INTEGER: u8 = 32;
const T_STRING: u8 = 64;
const T_ANY: u8 = 127;

/// A numeric limit in the type the schema wrote it in (compared exactly, as `jsonschema` does).
#[derive(Debug, Clone, Copy)]
enum Limit {
    U(u64),
    I(i64),
    F(f64),
}

/// What a member or element without its own subschema may be.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Rest {
    Any,
    Forbid,
    Schema(u32),
}

#[derive(Default)]
struct StringChecks {
    min: Option<u64>,
    max: Option<u64>,
    /// `pattern` and `format`, and what one match costs.
    leaves: Vec<(Leaf, MatchCost)>,
}

/// One `pattern` or `format` check.
enum Leaf {
    /// The crate's validator for a one-keyword schema.
    Crate(Validator<Beam>),
    /// A `pattern` of the form `^(a|b|c)$` with literal alternatives: the string is one of these
    /// (sorted). The crate decides such a pattern the same way but scans the alternatives one by
    /// one: 1.6 µs a string for 2,000 of them (measured), against ~50 ns for a binary search.
    OneOf(Box<[String]>),
}

impl Leaf {
    fn is_valid(&self, s: &str) -> bool {
        match self {
            Leaf::Crate(leaf) => leaf_is_valid(leaf, s),
            Leaf::OneOf(words) => words.binary_search_by(|w| w.as_str().cmp(s)).is_ok(),
        }
    }
}

#[derive(Default)]
struct NumberChecks {
    min: Option<Limit>,
    max: Option<Limit>,
    exclusive_min: Option<Limit>,
    exclusive_max: Option<Limit>,
    multiple_of: Option<Validator>,
}

/// One name the object check looks for.
struct Prop {
    name: Box<str>,
    /// The `properties` subschema; `None` when the name is only `required`.
    schema: Option<u32>,
    /// Bit in the required mask, if required.
    bit: Option<u8>,
}

struct ObjectChecks {
    /// Ordered by hash bucket; `buckets[b]..buckets[b + 1]` are bucket `b`'s.
    props: Vec<Prop>,
    buckets: Vec<u32>,
    additional: Rest,
    required: u64,
    min: Option<u64>,
    max: Option<u64>,
}

struct ArrayChecks {
    prefix: Vec<u32>,
    rest: Rest,
    min: Option<u64>,
    max: Option<u64>,
}

#[derive(Default)]
struct Node {
    /// `false` schema.
    never: bool,
    /// No `enum`/`const` and no applicators: the common leaf skips those checks.
    plain: bool,
    types: u8,
    string: Option<Box<StringChecks>>,
    number: Option<Box<NumberChecks>>,
    object: Option<Box<ObjectChecks>>,
    array: Option<Box<ArrayChecks>>,
    /// `enum` values and `const` (each a list one value must equal).
    equal: Vec<Vec<Value>>,
    all_of: Vec<u32>,
    any_of: Vec<u32>,
    one_of: Vec<u32>,
    not: Option<u32>,
    if_: Option<(u32, Option<u32>, Option<u32>)>,
}

impl Node {
    fn any() -> Node {
        Node {
            types: T_ANY,
            ..Node::default()
        }
    }
}

/// A compiled schema.
pub struct Program {
    nodes: Vec<Node>,
}

/// Keywords of some draft that this compiler does not implement: a schema using one (where it
/// applies) is left to the `jsonschema` path.
const UNSUPPORTED: &[&str] = &[
    "patternProperties",
    "propertyNames",
    "dependencies",
    "dependentRequired",
    "dependentSchemas",
    "contains",
    "minContains",
    "maxContains",
    "uniqueItems",
    "unevaluatedItems",
    "unevaluatedProperties",
    "$recursiveRef",
    "$recursiveAnchor",
    "$dynamicRef",
    "$dynamicAnchor",
    "$anchor",
    "$vocabulary",
    "contentMediaType",
    "contentEncoding",
    "contentSchema",
    "discriminator",
    "id",
];

/// The draft a schema is validated under, as `schema::compile_for` picks it.
pub fn resolved_draft(schema: &Value, default_draft: Option<Draft>) -> Draft {
    match (default_draft, schema.get("$schema")) {
        (Some(draft), None) => draft,
        _ => draft_for(schema),
    }
}

struct Compiler<'s> {
    root: &'s Value,
    draft: Draft,
    nodes: Vec<Node>,
    refs: HashMap<String, u32>,
}

impl Program {
    /// Compiles `schema` (already accepted by the `jsonschema` compiler) under `draft`; `None`
    /// when it uses anything outside the supported set.
    pub fn compile(schema: &Value, draft: Draft) -> Option<Program> {
        if !matches!(
            draft,
            Draft::Draft6 | Draft::Draft7 | Draft::Draft201909 | Draft::Draft202012
        ) {
            return None;
        }
        let mut c = Compiler {
            root: schema,
            draft,
            nodes: Vec::new(),
            refs: HashMap::new(),
        };
        c.refs.insert("#".into(), 0);
        c.nodes.push(Node::any());
        let root = c.node(schema, true)?;
        c.nodes[0] = root;
        for node in &mut c.nodes {
            node.plain = node.equal.is_empty()
                && node.all_of.is_empty()
                && node.any_of.is_empty()
                && node.one_of.is_empty()
                && node.not.is_none()
                && node.if_.is_none();
        }
        Some(Program { nodes: c.nodes })
    }

    /// Validates `instance`: `Ok(())` only when it is valid and JSON all through.
    pub fn validate<'a, I: Instance<'a>>(&self, instance: I, budget: &mut Budget) -> Checked {
        self.eval(0, instance, 0, 0, budget)
    }

    fn eval<'a, I: Instance<'a>>(
        &self,
        id: u32,
        inst: I,
        depth: u32,
        frames: u32,
        budget: &mut Budget,
    ) -> Checked {
        if frames > MAX_FRAMES {
            return Err(Stop::Fallback);
        }
        let node = &self.nodes[id as usize];
        let kind = read(inst, depth, budget)?;
        if node.never {
            return Err(Stop::Invalid);
        }
        let mut covered = false;
        match kind {
            Kind::Null => require(node.types & T_NULL != 0)?,
            Kind::Bool(_) => require(node.types & T_BOOL != 0)?,
            Kind::Int(i) => {
                require(node.types & (T_NUMBER | T_INTEGER) != 0)?;
                if let Some(n) = &node.number {
                    number_int(n, i)?;
                }
            }
            Kind::Float(f) => {
                require(
                    node.types & T_NUMBER != 0 || (node.types & T_INTEGER != 0 && f.fract() == 0.0),
                )?;
                if let Some(n) = &node.number {
                    number_float(n, f)?;
                }
            }
            Kind::Str(bytes) => {
                require(node.types & T_STRING != 0)?;
                if let Some(checks) = &node.string {
                    string(checks, checked(bytes), budget)?;
                }
            }
            Kind::Name => {
                require(node.types & T_STRING != 0)?;
                if let Some(checks) = &node.string {
                    let mut buf = [0u8; 256];
                    let s = inst.name(&mut buf).ok_or(Stop::Fallback)?;
                    string(checks, s, budget)?;
                }
            }
            Kind::Object => {
                require(node.types & T_OBJECT != 0)?;
                if let Some(checks) = &node.object {
                    self.object(checks, inst, depth, frames, budget)?;
                    covered = true;
                }
            }
            Kind::Array => {
                require(node.types & T_ARRAY != 0)?;
                if let Some(checks) = &node.array {
                    self.array(checks, inst, depth, frames, budget)?;
                    covered = true;
                }
            }
            Kind::Other => return Err(Stop::Fallback),
        }
        if node.plain {
            return match kind {
                Kind::Object | Kind::Array if !covered => check_json(inst, depth, budget),
                _ => Ok(()),
            };
        }
        for values in &node.equal {
            let mut found = false;
            for v in values {
                if equals_kind(inst, kind, v, depth, budget)? {
                    found = true;
                    break;
                }
            }
            require(found)?;
        }
        let frames = frames + 1;
        for &sub in &node.all_of {
            self.eval(sub, inst, depth, frames, budget)?;
            covered = true;
        }
        if !node.any_of.is_empty() {
            let mut found = false;
            for &sub in &node.any_of {
                if caught(self.eval(sub, inst, depth, frames, budget))? {
                    found = true;
                    break;
                }
            }
            require(found)?;
            covered = true;
        }
        if !node.one_of.is_empty() {
            let mut valid = 0;
            for &sub in &node.one_of {
                if caught(self.eval(sub, inst, depth, frames, budget))? {
                    valid += 1;
                    require(valid == 1)?;
                }
            }
            require(valid == 1)?;
            covered = true;
        }
        if let Some(sub) = node.not {
            require(!caught(self.eval(sub, inst, depth, frames, budget))?)?;
        }
        if let Some((cond, then, otherwise)) = node.if_ {
            let branch = if caught(self.eval(cond, inst, depth, frames, budget))? {
                covered = true;
                then
            } else {
                otherwise
            };
            if let Some(sub) = branch {
                self.eval(sub, inst, depth, frames, budget)?;
                covered = true;
            }
        }
        if !covered && matches!(kind, Kind::Object | Kind::Array) {
            check_json(inst, depth, budget)?;
        }
        Ok(())
    }

    #[inline]
    fn object<'a, I: Instance<'a>>(
        &self,
        checks: &ObjectChecks,
        inst: I,
        depth: u32,
        frames: u32,
        budget: &mut Budget,
    ) -> Checked {
        if checks.min.is_some() || checks.max.is_some() {
            let len = inst.object_len() as u64;
            require(checks.min.is_none_or(|m| len >= m) && checks.max.is_none_or(|m| len <= m))?;
        }
        let mut seen = 0u64;
        inst.members(|name, value| {
            let found = checks.lookup(name);
            let schema = match found {
                Some(prop) => {
                    if let Some(bit) = prop.bit {
                        seen |= 1 << bit;
                    }
                    prop.schema
                }
                None => None,
            };
            let rest = match schema {
                Some(sub) => return self.eval(sub, value, depth + 1, frames + 1, budget),
                None => checks.additional,
            };
            match rest {
                Rest::Any => check_json(value, depth + 1, budget),
                Rest::Forbid => Err(Stop::Invalid),
                Rest::Schema(sub) => self.eval(sub, value, depth + 1, frames + 1, budget),
            }
        })?;
        require(seen & checks.required == checks.required)
    }

    #[inline]
    fn array<'a, I: Instance<'a>>(
        &self,
        checks: &ArrayChecks,
        inst: I,
        depth: u32,
        frames: u32,
        budget: &mut Budget,
    ) -> Checked {
        let len = inst.elements(|i, value| {
            let rest = match checks.prefix.get(i) {
                Some(&sub) => Rest::Schema(sub),
                None => checks.rest,
            };
            match rest {
                Rest::Any => check_json(value, depth + 1, budget),
                Rest::Forbid => Err(Stop::Invalid),
                Rest::Schema(sub) => self.eval(sub, value, depth + 1, frames + 1, budget),
            }
        })? as u64;
        require(checks.min.is_none_or(|m| len >= m) && checks.max.is_none_or(|m| len <= m))
    }
}

#[inline(always)]
fn require(ok: bool) -> Checked {
    if ok {
        Ok(())
    } else {
        Err(Stop::Invalid)
    }
}

/// A subschema's answer where invalid is an answer (`anyOf`, `oneOf`, `not`, `if`).
#[inline(always)]
fn caught(result: Checked) -> Result<bool, Stop> {
    match result {
        Ok(()) => Ok(true),
        Err(Stop::Invalid) => Ok(false),
        Err(other) => Err(other),
    }
}

/// Walks a value no subschema looks into: it must still be JSON all through.
pub fn check_json<'a, I: Instance<'a>>(inst: I, depth: u32, budget: &mut Budget) -> Checked {
    match read(inst, depth, budget)? {
        Kind::Object => inst.members(|_, value| check_json(value, depth + 1, budget)),
        Kind::Array => inst
            .elements(|_, value| check_json(value, depth + 1, budget))
            .map(|_| ()),
        Kind::Name => {
            let mut buf = [0u8; 256];
            inst.name(&mut buf).map(|_| ()).ok_or(Stop::Fallback)
        }
        Kind::Other => Err(Stop::Fallback),
        _ => Ok(()),
    }
}

/// Reads one value under the JSON rules every path shares: 1 budget unit, 1 more per 256
/// string bytes and 1 per map member charged before they are read, UTF-8 text, at most [`MAX_DEPTH`] nested
/// containers (the 129th level falls back, where the other path names the error).
#[inline(always)]
fn read<'a, I: Instance<'a>>(inst: I, depth: u32, budget: &mut Budget) -> Result<Kind<'a>, Stop> {
    budget.spend(1)?;
    let kind = inst.kind();
    match kind {
        Kind::Str(bytes) => {
            budget.spend((bytes.len() >> 8) as i64)?;
            if !is_ascii(bytes) && std::str::from_utf8(bytes).is_err() {
                return Err(Stop::Fallback);
            }
        }
        Kind::Object | Kind::Array if depth >= MAX_DEPTH => return Err(Stop::Fallback),
        // A map's size is known at once: a huge one is over the budget before any member is
        // read (iterating a large map's members costs more per member than a list's cells).
        Kind::Object => budget.spend(inst.object_len() as i64)?,
        _ => {}
    }
    Ok(kind)
}

/// The text of a `Kind::Str` that [`read`] returned.
#[inline(always)]
fn checked(bytes: &[u8]) -> &str {
    // SAFETY: `read` checked these bytes are UTF-8 (every `Kind` used comes from `read`).
    unsafe { std::str::from_utf8_unchecked(bytes) }
}

fn string(checks: &StringChecks, s: &str, budget: &mut Budget) -> Checked {
    if checks.min.is_some() || checks.max.is_some() {
        budget.spend((s.len() >> 8) as i64)?;
        let len = char_count(s);
        require(checks.min.is_none_or(|m| len >= m) && checks.max.is_none_or(|m| len <= m))?;
    }
    for (leaf, cost) in &checks.leaves {
        if cost.backtracks() {
            return Err(Stop::Deferred);
        }
        // Regular expressions and formats cost more per byte than reading the value.
        budget.spend(cost.units(s.len()))?;
        require(leaf.is_valid(s))?;
    }
    Ok(())
}

#[inline]
fn char_count(s: &str) -> u64 {
    if s.is_ascii() {
        s.len() as u64
    } else {
        s.bytes().filter(|b| (b & 0xC0) != 0x80).count() as u64
    }
}

thread_local! {
    /// The one-string node buffer of `Beam::with_string_node`, kept between calls (it keeps its
    /// capacity, so checking a string allocates nothing after the first call on a thread).
    /// Never dropped: a `Tape`'s drop hands its vectors to another thread-local, which may be
    /// gone already when this thread exits.
    static STRING_NODE: RefCell<ManuallyDrop<Tape<'static>>> =
        RefCell::new(ManuallyDrop::new(Tape::default()));
}

fn leaf_is_valid(leaf: &Validator<Beam>, s: &str) -> bool {
    STRING_NODE.with(|buffer| match buffer.try_borrow_mut() {
        Ok(mut buffer) => Beam::with_string_node(&mut buffer, s, |node| leaf.is_valid(node)),
        // Not reentered in practice; a fresh buffer keeps it correct if it ever is.
        Err(_) => Beam::with_string_node(&mut Tape::default(), s, |node| leaf.is_valid(node)),
    })
}

fn number_int(n: &NumberChecks, i: i64) -> Checked {
    let ok = n.min.is_none_or(|l| ge_int(i, l))
        && n.max.is_none_or(|l| le_int(i, l))
        && n.exclusive_min.is_none_or(|l| gt_int(i, l))
        && n.exclusive_max.is_none_or(|l| lt_int(i, l));
    require(ok)?;
    match &n.multiple_of {
        Some(v) => require(v.is_valid(&Value::Number(Number::from(i)))),
        None => Ok(()),
    }
}

fn number_float(n: &NumberChecks, f: f64) -> Checked {
    let ok = n
        .min
        .is_none_or(|l| cmp_float(f, l).is_some_and(|o| o.is_ge()))
        && n.max
            .is_none_or(|l| cmp_float(f, l).is_some_and(|o| o.is_le()))
        && n.exclusive_min
            .is_none_or(|l| cmp_float(f, l).is_some_and(|o| o.is_gt()))
        && n.exclusive_max
            .is_none_or(|l| cmp_float(f, l).is_some_and(|o| o.is_lt()));
    require(ok)?;
    match (&n.multiple_of, Number::from_f64(f)) {
        (Some(v), Some(num)) => require(v.is_valid(&Value::Number(num))),
        (Some(_), None) => Err(Stop::Fallback),
        (None, _) => Ok(()),
    }
}

fn cmp_int(i: i64, l: Limit) -> Option<std::cmp::Ordering> {
    match l {
        Limit::U(u) => i.num_cmp(u),
        Limit::I(j) => Some(i.cmp(&j)),
        Limit::F(f) => i.num_cmp(f),
    }
}

fn cmp_float(x: f64, l: Limit) -> Option<std::cmp::Ordering> {
    match l {
        Limit::U(u) => x.num_cmp(u),
        Limit::I(j) => x.num_cmp(j),
        Limit::F(f) => x.num_cmp(f),
    }
}

fn ge_int(i: i64, l: Limit) -> bool {
    cmp_int(i, l).is_some_and(|o| o.is_ge())
}
fn le_int(i: i64, l: Limit) -> bool {
    cmp_int(i, l).is_some_and(|o| o.is_le())
}
fn gt_int(i: i64, l: Limit) -> bool {
    cmp_int(i, l).is_some_and(|o| o.is_gt())
}
fn lt_int(i: i64, l: Limit) -> bool {
    cmp_int(i, l).is_some_and(|o| o.is_lt())
}

/// JSON equality of an instance and a schema value (numbers mathematically, as `jsonschema`'s
/// `cmp::equal`). `Ok(true)` means the instance was read all through.
fn equals<'a, I: Instance<'a>>(
    inst: I,
    expected: &Value,
    depth: u32,
    budget: &mut Budget,
) -> Result<bool, Stop> {
    equals_kind(inst, read(inst, depth, budget)?, expected, depth, budget)
}

/// `equals` for an instance whose kind is read already.
#[inline]
fn equals_kind<'a, I: Instance<'a>>(
    inst: I,
    kind: Kind<'a>,
    expected: &Value,
    depth: u32,
    budget: &mut Budget,
) -> Result<bool, Stop> {
    Ok(match (kind, expected) {
        (Kind::Null, Value::Null) => true,
        (Kind::Bool(a), Value::Bool(b)) => a == *b,
        (Kind::Str(a), Value::String(b)) => a == b.as_bytes(),
        (Kind::Name, Value::String(b)) => {
            let mut buf = [0u8; 256];
            inst.name(&mut buf).ok_or(Stop::Fallback)? == b
        }
        (Kind::Int(a), Value::Number(b)) => number_eq(Num::I(a), b),
        (Kind::Float(a), Value::Number(b)) => number_eq(Num::F(a), b),
        (Kind::Array, Value::Array(items)) => {
            let mut i = 0;
            let mut same = true;
            let len = inst.elements(|at, value| {
                if !same {
                    return Ok(());
                }
                i = at + 1;
                same = match items.get(at) {
                    Some(item) => equals(value, item, depth + 1, budget)?,
                    None => false,
                };
                Ok(())
            })?;
            same && len == items.len() && i == len
        }
        (Kind::Object, Value::Object(map)) => {
            inst.object_len() == map.len() && object_equals(inst, map, depth, budget)?
        }
        (Kind::Other, _) => return Err(Stop::Fallback),
        _ => false,
    })
}

fn object_equals<'a, I: Instance<'a>>(
    inst: I,
    map: &Map<String, Value>,
    depth: u32,
    budget: &mut Budget,
) -> Result<bool, Stop> {
    let mut same = true;
    inst.members(|name, value| {
        if same {
            same = match map.get(name) {
                Some(v) => equals(value, v, depth + 1, budget)?,
                None => false,
            };
        }
        Ok(())
    })?;
    Ok(same)
}

#[derive(Clone, Copy)]
enum Num {
    I(i64),
    F(f64),
}

/// `jsonschema_value::cmp::equal_numbers`: both sides as u64, i64 or f64, compared exactly.
fn number_eq(a: Num, b: &Number) -> bool {
    fn with<T>(a: T, b: &Number) -> bool
    where
        T: NumCmp<u64> + NumCmp<i64> + NumCmp<f64>,
    {
        if let Some(u) = b.as_u64() {
            a.num_eq(u)
        } else if let Some(i) = b.as_i64() {
            a.num_eq(i)
        } else {
            b.as_f64().is_some_and(|f| a.num_eq(f))
        }
    }
    match a {
        Num::I(i) if i >= 0 => with(i as u64, b),
        Num::I(i) => with(i, b),
        Num::F(f) => with(f, b),
    }
}

fn limit(v: &Value) -> Option<Limit> {
    let n = match v {
        Value::Number(n) => n,
        _ => return None,
    };
    if let Some(u) = n.as_u64() {
        Some(Limit::U(u))
    } else if let Some(i) = n.as_i64() {
        Some(Limit::I(i))
    } else {
        n.as_f64().map(Limit::F)
    }
}

fn count(v: &Value) -> Option<u64> {
    match v {
        Value::Number(n) => n.as_u64().or_else(|| {
            n.as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 0.0)
                .map(|f| f as u64)
        }),
        _ => None,
    }
}

/// Bucket of a member name: length and a few bytes, enough to tell tool parameter names apart.
#[inline(always)]
fn bucket_hash(name: &[u8]) -> usize {
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
    fn new(mut props: Vec<Prop>, additional: Rest, min: Option<u64>, max: Option<u64>) -> Self {
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
    fn lookup(&self, name: &str) -> Option<&Prop> {
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
fn same_name(a: &[u8], b: &[u8]) -> bool {
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

impl Compiler<'_> {
    fn push(&mut self, node: Node) -> u32 {
        self.nodes.push(node);
        (self.nodes.len() - 1) as u32
    }

    fn sub(&mut self, schema: &Value) -> Option<u32> {
        let node = self.node(schema, false)?;
        Some(self.push(node))
    }

    /// `Some(None)` when absent, `None` when present and unsupported.
    fn optional(&mut self, schema: Option<&Value>) -> Option<Option<u32>> {
        match schema {
            None => Some(None),
            Some(s) => self.sub(s).map(Some),
        }
    }

    fn subs(&mut self, list: &Value) -> Option<Vec<u32>> {
        list.as_array()?.iter().map(|s| self.sub(s)).collect()
    }

    fn rest(&mut self, schema: &Value) -> Option<Rest> {
        Some(match schema {
            Value::Bool(true) => Rest::Any,
            Value::Bool(false) => Rest::Forbid,
            _ => Rest::Schema(self.sub(schema)?),
        })
    }

    fn leaf(&self, keyword: &str, value: &Value) -> Option<(Leaf, MatchCost)> {
        if let ("pattern", Value::String(pattern)) = (keyword, value) {
            // The crate's own analysis, so the verdict is the crate's.
            if let Some(PatternAnalysis::Alternation(mut words)) = analyze_pattern(pattern) {
                words.sort_unstable();
                return Some((Leaf::OneOf(words.into()), MatchCost::LEAF));
            }
        }
        let mut one = Map::new();
        one.insert(keyword.into(), value.clone());
        let cost = match (keyword, value) {
            ("pattern", Value::String(pattern)) => MatchCost::of(pattern),
            _ => MatchCost::LEAF,
        };
        let validator = options_for::<Beam>(Some(self.draft))
            .build(&Value::Object(one))
            .ok()?;
        Some((Leaf::Crate(validator), cost))
    }

    fn node(&mut self, schema: &Value, root: bool) -> Option<Node> {
        let map = match schema {
            Value::Bool(true) => return Some(Node::any()),
            Value::Bool(false) => {
                return Some(Node {
                    never: true,
                    ..Node::any()
                })
            }
            Value::Object(map) => map,
            _ => return None,
        };
        if !root && map.contains_key("$id") {
            return None;
        }
        let modern = matches!(self.draft, Draft::Draft201909 | Draft::Draft202012);
        if let Some(target) = map.get("$ref") {
            let target = self.reference(target.as_str()?)?;
            if !modern {
                // Before 2019-09 a `$ref` replaces its siblings.
                if map.contains_key("$id") {
                    return None;
                }
                return Some(Node {
                    all_of: vec![target],
                    ..Node::any()
                });
            }
        }
        let mut node = Node::any();
        if let Some(target) = map.get("$ref") {
            node.all_of.push(self.reference(target.as_str()?)?);
        }
        let mut string = StringChecks::default();
        let mut number = NumberChecks::default();
        let (mut props, mut required): (Option<&Map<String, Value>>, Vec<&str>) = (None, vec![]);
        let (mut additional, mut min_props, mut max_props) = (None, None, None);
        let (mut items, mut additional_items, mut prefix_items) = (None, None, None);
        let (mut min_items, mut max_items) = (None, None);
        for (key, value) in map {
            match key.as_str() {
                "type" => node.types = types(value)?,
                "enum" => node.equal.push(value.as_array()?.clone()),
                "const" => node.equal.push(vec![value.clone()]),
                "minLength" => string.min = Some(count(value)?),
                "maxLength" => string.max = Some(count(value)?),
                "pattern" | "format" => string.leaves.push(self.leaf(key, value)?),
                "minimum" => number.min = Some(limit(value)?),
                "maximum" => number.max = Some(limit(value)?),
                "exclusiveMinimum" => number.exclusive_min = Some(limit(value)?),
                "exclusiveMaximum" => number.exclusive_max = Some(limit(value)?),
                "multipleOf" => {
                    let mut one = Map::new();
                    one.insert("multipleOf".into(), value.clone());
                    number.multiple_of = Some(
                        jsonschema::options()
                            .with_draft(self.draft)
                            .build(&Value::Object(one))
                            .ok()?,
                    );
                }
                "properties" => props = Some(value.as_object()?),
                "required" => {
                    required = value
                        .as_array()?
                        .iter()
                        .map(Value::as_str)
                        .collect::<Option<_>>()?
                }
                "additionalProperties" => additional = Some(value),
                "minProperties" => min_props = Some(count(value)?),
                "maxProperties" => max_props = Some(count(value)?),
                "items" => items = Some(value),
                "additionalItems" if !matches!(self.draft, Draft::Draft202012) => {
                    additional_items = Some(value)
                }
                "prefixItems" if self.draft == Draft::Draft202012 => prefix_items = Some(value),
                "minItems" => min_items = Some(count(value)?),
                "maxItems" => max_items = Some(count(value)?),
                "allOf" => {
                    let subs = self.subs(value)?;
                    node.all_of.extend(subs)
                }
                "anyOf" => node.any_of = self.subs(value)?,
                "oneOf" => node.one_of = self.subs(value)?,
                "not" => node.not = Some(self.sub(value)?),
                "if" if self.draft != Draft::Draft6 => {
                    let cond = self.sub(value)?;
                    let then = self.optional(map.get("then"))?;
                    let otherwise = self.optional(map.get("else"))?;
                    node.if_ = Some((cond, then, otherwise));
                }
                k if UNSUPPORTED.contains(&k)
                    || matches!(k, "additionalItems" | "prefixItems" | "if") =>
                {
                    return None
                }
                _ => {} // annotations and unknown keywords
            }
        }
        if string.min.is_some() || string.max.is_some() || !string.leaves.is_empty() {
            node.string = Some(Box::new(string));
        }
        if number.min.is_some()
            || number.max.is_some()
            || number.exclusive_min.is_some()
            || number.exclusive_max.is_some()
            || number.multiple_of.is_some()
        {
            node.number = Some(Box::new(number));
        }
        if props.is_some()
            || !required.is_empty()
            || additional.is_some()
            || min_props.is_some()
            || max_props.is_some()
        {
            node.object = Some(Box::new(
                self.object(props, &required, additional, min_props, max_props)?,
            ));
        }
        if items.is_some() || prefix_items.is_some() || min_items.is_some() || max_items.is_some() {
            let (prefix, rest) = match (items, prefix_items) {
                (Some(Value::Array(list)), None) if self.draft != Draft::Draft202012 => {
                    let prefix = list.iter().map(|s| self.sub(s)).collect::<Option<_>>()?;
                    let rest = match additional_items {
                        Some(s) => self.rest(s)?,
                        None => Rest::Any,
                    };
                    (prefix, rest)
                }
                (Some(Value::Array(_)), _) => return None,
                (items, prefix) => {
                    let prefix = match prefix {
                        Some(list) => self.subs(list)?,
                        None => vec![],
                    };
                    let rest = match items {
                        Some(s) => self.rest(s)?,
                        None => Rest::Any,
                    };
                    (prefix, rest)
                }
            };
            node.array = Some(Box::new(ArrayChecks {
                prefix,
                rest,
                min: min_items,
                max: max_items,
            }));
        }
        Some(node)
    }

    fn object(
        &mut self,
        props: Option<&Map<String, Value>>,
        required: &[&str],
        additional: Option<&Value>,
        min: Option<u64>,
        max: Option<u64>,
    ) -> Option<ObjectChecks> {
        let mut list: Vec<Prop> = Vec::new();
        for (name, schema) in props.into_iter().flatten() {
            let schema = self.sub(schema)?;
            list.push(Prop {
                name: name.as_str().into(),
                schema: Some(schema),
                bit: None,
            });
        }
        let mut bits = 0usize;
        for name in required {
            let at = match list.iter().position(|p| &*p.name == *name) {
                Some(at) => at,
                None => {
                    list.push(Prop {
                        name: (*name).into(),
                        schema: None,
                        bit: None,
                    });
                    list.len() - 1
                }
            };
            if list[at].bit.is_none() {
                if bits == MAX_REQUIRED {
                    return None;
                }
                list[at].bit = Some(bits as u8);
                bits += 1;
            }
        }
        let additional = match additional {
            None => Rest::Any,
            Some(schema) => self.rest(schema)?,
        };
        Some(ObjectChecks::new(list, additional, min, max))
    }

    /// A local `$ref` ("#" or "#/json/pointer"), compiled once.
    fn reference(&mut self, uri: &str) -> Option<u32> {
        let pointer = uri.strip_prefix('#')?;
        if !pointer.is_empty() && !pointer.starts_with('/') {
            return None;
        }
        let key = format!("#{pointer}");
        if let Some(&id) = self.refs.get(&key) {
            return Some(id);
        }
        let mut target = self.root;
        for token in pointer.split('/').skip(1) {
            // A resource boundary on the way changes what the target's own refs mean.
            if target.get("$id").is_some() && !std::ptr::eq(target, self.root) {
                return None;
            }
            let token = percent_decode(token)?.replace("~1", "/").replace("~0", "~");
            target = match target {
                Value::Object(map) => map.get(&token)?,
                Value::Array(list) => list.get(token.parse::<usize>().ok()?)?,
                _ => return None,
            };
        }
        let id = self.push(Node::any());
        self.refs.insert(key, id);
        let node = self.node(target, std::ptr::eq(target, self.root))?;
        self.nodes[id as usize] = node;
        Some(id)
    }
}

fn types(value: &Value) -> Option<u8> {
    let one = |v: &Value| -> Option<u8> {
        Some(match v.as_str()? {
            "null" => T_NULL,
            "boolean" => T_BOOL,
            "object" => T_OBJECT,
            "array" => T_ARRAY,
            "number" => T_NUMBER,
            "integer" => T_INTEGER,
            "string" => T_STRING,
            _ => return None,
        })
    };
    match value {
        Value::Array(list) => list.iter().try_fold(0u8, |m, v| Some(m | one(v)?)),
        v => one(v),
    }
}

fn percent_decode(s: &str) -> Option<String> {
    if !s.contains('%') {
        return Some(s.to_owned());
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// `serde_json::Value` as an instance: the same program runs in `cargo test` without a VM.
impl<'a> Instance<'a> for &'a Value {
    fn kind(self) -> Kind<'a> {
        match self {
            Value::Null => Kind::Null,
            Value::Bool(b) => Kind::Bool(*b),
            Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
                (Some(i), _, _) => Kind::Int(i),
                // Integers past i64 fall back, as big integers do from terms.
                (None, Some(_), _) => Kind::Other,
                (None, None, Some(f)) => Kind::Float(f),
                _ => Kind::Other,
            },
            Value::String(s) => Kind::Str(s.as_bytes()),
            Value::Array(_) => Kind::Array,
            Value::Object(_) => Kind::Object,
        }
    }

    fn name(self, _buf: &mut [u8; 256]) -> Option<&str> {
        None
    }

    fn object_len(self) -> usize {
        self.as_object().map_or(0, Map::len)
    }

    fn members<F: FnMut(&str, Self) -> Checked>(self, mut f: F) -> Checked {
        for (k, v) in self.as_object().into_iter().flatten() {
            f(k, v)?;
        }
        Ok(())
    }

    fn elements<F: FnMut(usize, Self) -> Checked>(self, mut f: F) -> Result<usize, Stop> {
        let list = self.as_array().map_or(&[][..], Vec::as_slice);
        for (i, v) in list.iter().enumerate() {
            f(i, v)?;
        }
        Ok(list.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{compile, Documents};
    use serde_json::json;
    use std::path::PathBuf;

    fn run(program: &Program, v: &Value) -> Checked {
        program.validate(
            v,
            &mut Budget {
                remaining: 1 << 40,
                dirty: true,
            },
        )
    }

    fn tool_schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1},
                "repo": {"type": "string", "pattern": "^[\\w.-]+/[\\w.-]+$"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 100},
                "state": {"enum": ["open", "closed", "all"]},
                "labels": {"type": "array", "items": {"type": "string"}},
                "sort": {"type": "object", "properties": {"field": {"type": "string"}},
                         "required": ["field"]}
            },
            "required": ["query", "repo"],
            "additionalProperties": false
        })
    }

    #[test]
    fn a_tool_schema_compiles_and_decides() {
        let p = Program::compile(&tool_schema(), Draft::Draft7).expect("supported");
        let ok = json!({"query": "x", "repo": "a/b", "limit": 20.0, "state": "open",
                        "labels": ["a"], "sort": {"field": "f", "other": [1, {"x": null}]}});
        assert_eq!(run(&p, &ok), Ok(()));
        for bad in [
            json!({"query": "x"}),
            json!({"query": "", "repo": "a/b"}),
            json!({"query": "x", "repo": "no slash"}),
            json!({"query": "x", "repo": "a/b", "limit": 0}),
            json!({"query": "x", "repo": "a/b", "limit": 1.5}),
            json!({"query": "x", "repo": "a/b", "state": "stale"}),
            json!({"query": "x", "repo": "a/b", "extra": 1}),
            json!({"query": "x", "repo": "a/b", "labels": [1]}),
            json!({"query": "x", "repo": "a/b", "sort": {}}),
            json!([]),
        ] {
            assert_eq!(run(&p, &bad), Err(Stop::Invalid), "{bad}");
        }
    }

    #[test]
    fn numbers_compare_mathematically() {
        let p = Program::compile(&json!({"enum": [1, 2.5]}), Draft::Draft7).unwrap();
        assert_eq!(run(&p, &json!(1.0)), Ok(()));
        assert_eq!(run(&p, &json!(2.5)), Ok(()));
        assert_eq!(run(&p, &json!(2)), Err(Stop::Invalid));
        let p = Program::compile(&json!({"maximum": 9007199254740992_i64}), Draft::Draft7);
        let p = p.unwrap();
        assert_eq!(run(&p, &json!(9007199254740993_i64)), Err(Stop::Invalid));
        assert_eq!(run(&p, &json!(9007199254740992.0)), Ok(()));
    }

    #[test]
    fn unsupported_keywords_leave_the_schema_to_jsonschema() {
        for s in [
            json!({"uniqueItems": true}),
            json!({"properties": {"a": {"patternProperties": {"x": true}}}}),
            json!({"$ref": "other.json"}),
            json!({"$defs": {"a": {"$id": "x"}}, "$ref": "#/$defs/a"}),
        ] {
            assert!(Program::compile(&s, Draft::Draft202012).is_none(), "{s}");
        }
        assert!(Program::compile(&json!({}), Draft::Draft4).is_none());
    }

    #[test]
    fn recursive_refs_compile_once() {
        let s = json!({"properties": {"child": {"$ref": "#"}, "n": {"type": "integer"}}});
        let p = Program::compile(&s, Draft::Draft7).unwrap();
        assert_eq!(run(&p, &json!({"child": {"child": {"n": 1}}})), Ok(()));
        assert_eq!(
            run(&p, &json!({"child": {"child": {"n": "1"}}})),
            Err(Stop::Invalid)
        );
        // A ref loop that never descends ends in a fallback, not a stack overflow.
        let s = json!({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
                       "$ref": "#/$defs/a"});
        if let Some(p) = Program::compile(&s, Draft::Draft202012) {
            assert_eq!(run(&p, &json!(1)), Err(Stop::Fallback));
        }
    }

    #[test]
    fn a_normal_budget_yields() {
        let p = Program::compile(&json!({"type": "array"}), Draft::Draft7).unwrap();
        let big = Value::Array(vec![json!(1); 100]);
        let mut budget = Budget {
            remaining: 10,
            dirty: false,
        };
        assert_eq!(p.validate(&big, &mut budget), Err(Stop::Yield));
    }

    #[test]
    fn a_pattern_that_can_backtrack_is_left_to_the_other_path() {
        let s = json!({"type": "string", "pattern": "^(a*)*\\1b$"});
        let p = Program::compile(&s, Draft::Draft7).unwrap();
        let mut budget = Budget {
            remaining: crate::schema::BACKTRACK_UNITS,
            dirty: false,
        };
        // Never run here: the other path's one match decides (and names a failure).
        assert_eq!(p.validate(&json!("aab"), &mut budget), Err(Stop::Deferred));
        assert_eq!(run(&p, &json!("a".repeat(30))), Err(Stop::Deferred));
        // What is not a string is still decided here.
        assert_eq!(run(&p, &json!(1)), Err(Stop::Invalid));
        // Another linear pattern costs by its size: a 2,000-word one ~40 strings of 12,000 units.
        let words: Vec<String> = (0..2000).map(|i| format!("w{i}")).collect();
        let s = json!({"items": {"pattern": format!("^(?:{})$", words.join("|"))}});
        let p = Program::compile(&s, Draft::Draft7).unwrap();
        let strings = Value::Array(vec![json!("w1999"); 2000]);
        let mut budget = Budget {
            remaining: 12_000,
            dirty: false,
        };
        assert_eq!(p.validate(&strings, &mut budget), Err(Stop::Yield));
        assert_eq!(run(&p, &strings), Ok(()));
    }

    #[test]
    fn a_literal_alternation_is_a_binary_search_with_the_crates_verdict() {
        let words: Vec<String> = (0..2000).map(|i| format!("w{i}")).collect();
        let pattern = format!("^({})$", words.join("|"));
        let s = json!({"items": {"pattern": pattern}});
        let p = Program::compile(&s, Draft::Draft7).unwrap();
        let crate_validator = jsonschema::validator_for(&s).unwrap();
        for word in [
            "w0", "w1999", "w999", "w2000", "w", "", "W1", "w1999 ", "nope",
        ] {
            let v = json!([word]);
            let verdict = run(&p, &v);
            assert_eq!(verdict.is_ok(), crate_validator.is_valid(&v), "{word}");
            assert!(matches!(verdict, Ok(()) | Err(Stop::Invalid)), "{word}");
        }
        // Charged as one leaf a string: 2,000 strings fit in 12,000 units, not in 3,000.
        let strings = Value::Array(vec![json!("w1999"); 2000]);
        let mut budget = Budget {
            remaining: 12_000,
            dirty: false,
        };
        assert_eq!(p.validate(&strings, &mut budget), Ok(()));
        let mut budget = Budget {
            remaining: 3_000,
            dirty: false,
        };
        assert_eq!(p.validate(&strings, &mut budget), Err(Stop::Yield));
    }

    fn suite_dir() -> Option<PathBuf> {
        let dir = match std::env::var_os("JSON_SCHEMA_TEST_SUITE") {
            Some(dir) => PathBuf::from(dir),
            None => PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../../shared/json-schema-test-suite"),
        };
        dir.join("tests").is_dir().then_some(dir)
    }

    /// Every required case of the official suite: where the program decides, it decides as the
    /// suite (and `jsonschema`) says.
    fn suite(dir: &str, draft: Draft) {
        let Some(root) = suite_dir() else {
            println!(
                "SKIPPED: the JSON Schema Test Suite is not there (set JSON_SCHEMA_TEST_SUITE)"
            );
            return;
        };
        let (mut decided, mut total, mut compiled_groups, mut groups) = (0, 0, 0, 0);
        let mut files: Vec<_> = std::fs::read_dir(root.join("tests").join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .collect();
        files.sort();
        let mut failures = vec![];
        for file in files {
            let groups_json: Value =
                serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
            for group in groups_json.as_array().unwrap() {
                groups += 1;
                let schema = &group["schema"];
                let mut docs = Documents::default();
                docs.dirs
                    .push(("http://localhost:1234/".into(), root.join("remotes")));
                if compile(schema, docs, Some(draft)).is_err() {
                    continue;
                }
                let draft = resolved_draft(schema, Some(draft));
                let Some(program) = Program::compile(schema, draft) else {
                    continue;
                };
                compiled_groups += 1;
                for case in group["tests"].as_array().unwrap() {
                    total += 1;
                    let expected = case["valid"].as_bool().unwrap();
                    match run(&program, &case["data"]) {
                        Ok(()) if expected => decided += 1,
                        Err(Stop::Invalid) if !expected => decided += 1,
                        Err(Stop::Fallback | Stop::Deferred) => {}
                        got => failures.push(format!(
                            "{}: {}: {}: got {got:?}",
                            file.display(),
                            group["description"],
                            case["description"]
                        )),
                    }
                }
            }
        }
        println!(
            "{dir}: {compiled_groups}/{groups} groups compiled, {decided}/{total} of their cases decided"
        );
        assert!(failures.is_empty(), "{}", failures.join("\n"));
        assert!(compiled_groups * 2 > groups, "too few groups compiled");
    }

    #[test]
    fn the_test_suite_draft7() {
        suite("draft7", Draft::Draft7);
    }

    #[test]
    fn the_test_suite_draft2020_12() {
        suite("draft2020-12", Draft::Draft202012);
    }
}
