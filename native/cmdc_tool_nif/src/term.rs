//! Term conversion: BEAM terms <-> `serde_json::Value`, with the JSON rules the library documents.
//!
//! Rules: maps with binary or atom keys become objects; lists become arrays; UTF-8 binaries become
//! strings; integers (any size) and floats become numbers; `true`/`false`/`nil` become booleans and
//! null; any other atom becomes its name as a string (as Jason does). Everything else (tuples, pids,
//! ports, refs, funs, improper lists, non-UTF-8 binaries, keys of other types, and the same key given
//! twice as atom and string) is an error that names its JSON Pointer path.
//!
//! The walker works under a [`Budget`]: on a normal scheduler it stops early with
//! [`TermError::Yield`] so the caller can re-run the work on a dirty scheduler, and on a dirty one
//! it stops at hard size limits instead of exhausting memory. Work is charged *before* it is done
//! and in units of its real cost (~100 ns): a node, a run of string bytes, a big integer by the
//! square of its size (decimal conversion is quadratic), a list cell while it is counted.
#![allow(unsafe_code)]

use std::fmt::Write as _;
use std::mem::MaybeUninit;

use rustler::sys::{enif_get_list_cell, ErlNifTerm};
use rustler::types::{BigInt, MapIterator};
use rustler::{Encoder, Env, Term, TermType};
use serde_json::{Map, Number, Value};

/// Most containers nested in one another, in every direction: encode, decode and validation
/// accept 128 nested arrays/objects (a scalar may sit inside the 128th) and refuse 129.
pub const MAX_DEPTH: usize = 128;
/// Work units a normal-scheduler call may spend (~100 ns each): about 0.3 ms, so no call holds
/// a normal scheduler near 1 ms.
pub const NORMAL_BUDGET: i64 = 3_000;
/// A normal scheduler converts big integers of at most this many 64-bit words (~300 digits).
pub const NORMAL_BIG_WORDS: usize = 16;
/// Hard cap on work units for one call on a dirty scheduler (hostile inputs end here).
pub const DIRTY_BUDGET: i64 = 64 * 1024 * 1024;

#[derive(Debug, Clone, PartialEq)]
pub enum TermError {
    /// The input is larger than a normal scheduler may handle: retry on a dirty one.
    Yield,
    /// The term is not JSON; `path` is a JSON Pointer, `reason` says what was found.
    NotJson { path: String, reason: String },
    /// Nesting deeper than [`MAX_DEPTH`].
    TooDeep { path: String },
    /// More than [`DIRTY_BUDGET`] work units.
    TooBig,
}

impl TermError {
    pub fn path(&self) -> &str {
        match self {
            TermError::NotJson { path, .. } | TermError::TooDeep { path } => path,
            TermError::Yield | TermError::TooBig => "",
        }
    }

    pub fn message(&self) -> String {
        match self {
            TermError::Yield => "input too large for a normal scheduler".into(),
            TermError::NotJson { reason, .. } => reason.clone(),
            TermError::TooDeep { .. } => format!("value nested deeper than {MAX_DEPTH} levels"),
            TermError::TooBig => {
                "value too large (over the work limit of one call: 64M nodes, or an integer of \
                 about a million digits)"
                    .into()
            }
        }
    }
}

/// Work allowance for one conversion.
pub struct Budget {
    pub(crate) remaining: i64,
    dirty: bool,
}

impl Budget {
    pub fn normal() -> Self {
        Budget {
            remaining: NORMAL_BUDGET,
            dirty: false,
        }
    }

    /// A budget with `remaining` units left (a walker's own copy, written back).
    pub fn with(remaining: i64, dirty: bool) -> Self {
        Budget { remaining, dirty }
    }

    pub fn dirty() -> Self {
        Budget {
            remaining: DIRTY_BUDGET,
            dirty: true,
        }
    }

    /// The budget of the scheduler this thread is: dirty work on a dirty scheduler (or any
    /// thread that is not a normal scheduler), the short one on a normal scheduler.
    pub fn here() -> Self {
        if on_normal_scheduler() {
            Budget::normal()
        } else {
            Budget::dirty()
        }
    }

    /// The error for work over this budget: `Yield` on a normal scheduler, `TooBig` on a dirty one.
    pub fn over(&self) -> TermError {
        if self.dirty {
            TermError::TooBig
        } else {
            TermError::Yield
        }
    }

    /// Units spent so far.
    pub fn spent(&self) -> i64 {
        let start = if self.dirty {
            DIRTY_BUDGET
        } else {
            NORMAL_BUDGET
        };
        start - self.remaining
    }

    pub fn is_dirty(&self) -> bool {
        self.dirty
    }

    #[inline]
    pub fn spend(&mut self, units: i64) -> Result<(), TermError> {
        self.remaining -= units;
        if self.remaining >= 0 {
            Ok(())
        } else if self.dirty {
            Err(TermError::TooBig)
        } else {
            Err(TermError::Yield)
        }
    }

    /// Bytes copied or escaped (~3 ns a byte).
    #[inline]
    pub fn spend_bytes(&mut self, len: usize) -> Result<(), TermError> {
        self.spend(1 + (len >> 5) as i64)
    }
}

/// Whether this thread is a normal scheduler (not dirty, not a thread of ours).
pub fn on_normal_scheduler() -> bool {
    unsafe { rustler::sys::enif_thread_type() == rustler::sys::ERL_NIF_THR_NORMAL_SCHEDULER }
}

thread_local! {
    /// Units used on this thread and not reported yet (under 1% of a slice).
    static UNREPORTED: std::cell::Cell<i64> = const { std::cell::Cell::new(0) };
}

/// Tells the VM how much of a 1 ms time slice a call used, in work units (~100 ns each), so it
/// schedules other processes sooner after a long call. Only on normal schedulers. Calls under
/// 1% each add up per thread, so a process looping over cheap calls (an error of a few µs
/// each) is charged what it uses: without that, 500 calls of 1.6 µs ran as one 0.8 ms slice
/// where the VM's own term_to_binary loop ran 0.25 ms slices.
pub fn report_units(env: Env, units: i64) {
    let total = UNREPORTED.get().saturating_add(units.max(0));
    if total < 100 {
        UNREPORTED.set(total);
        return;
    }
    UNREPORTED.set(total % 100);
    if on_normal_scheduler() {
        let percent = (total / 100).clamp(1, 100) as i32;
        unsafe { rustler::sys::enif_consume_timeslice(env.as_c_arg(), percent) };
    }
}

/// Work units to convert a big integer of `words` 64-bit words to or from decimal digits:
/// schoolbook conversion is quadratic (measured ~3 ns per word squared).
pub fn bignum_units(words: usize) -> i64 {
    (words + words * words / 32) as i64
}

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
    let big: BigInt = term.decode().map_err(|_| budget.over())?;
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

/// One step of a path: kept as terms so the happy path allocates nothing for paths.
#[derive(Clone, Copy)]
pub enum Seg<'a> {
    Key(Term<'a>),
    Index(usize),
}

/// Renders a path as a JSON Pointer (RFC 6901), only when an error needs it.
pub fn pointer(path: &[Seg]) -> String {
    let mut out = String::new();
    for seg in path {
        out.push('/');
        match seg {
            Seg::Index(i) => out.push_str(&i.to_string()),
            Seg::Key(term) => {
                let name = key_name(*term).unwrap_or_else(|| shown(*term));
                out.push_str(&name.replace('~', "~0").replace('/', "~1"));
            }
        }
    }
    out
}

fn key_name(term: Term) -> Option<String> {
    match term.get_type() {
        TermType::Binary => term
            .decode_as_binary()
            .ok()
            .map(|b| String::from_utf8_lossy(b.as_slice()).into_owned()),
        TermType::Atom => atom_name(term),
        _ => None,
    }
}

/// Characters of a term shown in an error message.
const SHOWN: usize = 60;

/// What a term is, in words a person reads in an error.
pub fn describe(term: Term) -> String {
    let kind = match term.get_type() {
        TermType::Tuple => "a tuple",
        TermType::Pid => "a pid",
        TermType::Port => "a port",
        TermType::Ref => "a reference",
        TermType::Fun => "a function",
        TermType::Binary => "a binary that is not valid UTF-8",
        TermType::List => "an improper list",
        _ => "a term",
    };
    format!("{kind} ({}) is not a JSON value", shown(term))
}

/// The start of a term in Erlang syntax, at most [`SHOWN`] characters: only that prefix is
/// formatted (a 300k-element tuple costs as much as a small one).
pub fn shown(term: Term) -> String {
    let mut out = String::new();
    show(term, &mut out, 0);
    if out.len() > SHOWN {
        let mut cut = SHOWN - 3;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out.truncate(cut);
        out.push_str("...");
    }
    out
}

/// Appends `term` to `out` until `out` is longer than [`SHOWN`].
fn show(term: Term, out: &mut String, depth: usize) {
    if out.len() > SHOWN || depth > 8 {
        out.push_str("...");
        return;
    }
    match term.get_type() {
        TermType::Tuple => {
            let mut arity = 0;
            let mut items = std::ptr::null();
            unsafe {
                rustler::sys::enif_get_tuple(
                    term.get_env().as_c_arg(),
                    term.as_c_arg(),
                    &mut arity,
                    &mut items,
                )
            };
            out.push('{');
            for i in 0..arity as usize {
                if out.len() > SHOWN {
                    out.push_str("...");
                    break;
                }
                if i > 0 {
                    out.push(',');
                }
                let item = unsafe { Term::new(term.get_env(), *items.add(i)) };
                show(item, out, depth + 1);
            }
            out.push('}');
        }
        TermType::List => {
            out.push('[');
            let mut rest = term;
            let mut first = true;
            while !rest.is_empty_list() {
                if out.len() > SHOWN {
                    out.push_str("...");
                    break;
                }
                if !first {
                    out.push(',');
                }
                first = false;
                match rest.list_get_cell() {
                    Ok((head, tail)) => {
                        show(head, out, depth + 1);
                        rest = tail;
                    }
                    Err(_) => {
                        out.push('|');
                        show(rest, out, depth + 1);
                        break;
                    }
                }
            }
            out.push(']');
        }
        TermType::Map => {
            out.push_str("#{");
            for (i, (k, v)) in MapIterator::new(term).into_iter().flatten().enumerate() {
                if out.len() > SHOWN {
                    out.push_str("...");
                    break;
                }
                if i > 0 {
                    out.push(',');
                }
                show(k, out, depth + 1);
                out.push_str(" => ");
                show(v, out, depth + 1);
            }
            out.push('}');
        }
        TermType::Binary => match term.decode_as_binary() {
            Ok(bin) => {
                let bytes = bin.as_slice();
                out.push_str("<<");
                for (i, b) in bytes.iter().take(SHOWN / 2).enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    let _ = write!(out, "{b}");
                }
                if bytes.len() > SHOWN / 2 {
                    out.push_str(",...");
                }
                out.push_str(">>");
            }
            // A bitstring.
            Err(_) => out.push_str("<<...>>"),
        },
        TermType::Atom => out.push_str(&atom_name(term).unwrap_or_default()),
        TermType::Integer => match term.decode::<i64>() {
            Ok(i) => {
                let _ = write!(out, "{i}");
            }
            Err(_) => out.push_str("<big integer>"),
        },
        // Floats, pids, ports, references and functions print in a few dozen characters.
        _ => {
            let _ = write!(out, "{term:?}");
        }
    }
}

pub fn not_json(term: Term, path: &[Seg]) -> TermError {
    TermError::NotJson {
        path: pointer(path),
        reason: describe(term),
    }
}

/// Reads a map key as a string slice or an owned atom name.
pub enum Key<'a> {
    Str(&'a str),
    Atom(String),
}

impl Key<'_> {
    pub fn as_str(&self) -> &str {
        match self {
            Key::Str(s) => s,
            Key::Atom(s) => s,
        }
    }
}

pub fn read_key<'a>(key: Term<'a>, path: &[Seg<'a>]) -> Result<Key<'a>, TermError> {
    match key.get_type() {
        TermType::Binary => {
            let bin = key.decode_as_binary().map_err(|_| not_json(key, path))?;
            match std::str::from_utf8(bin.as_slice()) {
                Ok(s) => Ok(Key::Str(s)),
                Err(_) => Err(TermError::NotJson {
                    path: pointer(path),
                    reason: "a map key is a binary that is not valid UTF-8".into(),
                }),
            }
        }
        TermType::Atom => atom_name(key)
            .map(Key::Atom)
            .ok_or_else(|| not_json(key, path)),
        _ => Err(TermError::NotJson {
            path: pointer(path),
            reason: format!(
                "map key {} is not a string or an atom",
                describe(key).trim_end_matches(" is not a JSON value")
            ),
        }),
    }
}

/// Scalars shared by every walker: `Some(value)` for numbers, strings and atoms.
pub enum Scalar<'a> {
    Null,
    Bool(bool),
    Str(&'a str),
    AtomStr(String),
    Int(i64),
    UInt(u64),
    Big(BigInt),
    Float(f64),
}

pub fn read_scalar<'a>(
    term: Term<'a>,
    path: &[Seg<'a>],
    budget: &mut Budget,
) -> Result<Scalar<'a>, TermError> {
    match term.get_type() {
        TermType::Atom => {
            let name = atom_name(term).ok_or_else(|| not_json(term, path))?;
            Ok(match name.as_str() {
                "true" => Scalar::Bool(true),
                "false" => Scalar::Bool(false),
                "nil" => Scalar::Null,
                _ => Scalar::AtomStr(name),
            })
        }
        TermType::Binary => {
            let bin = term.decode_as_binary().map_err(|_| not_json(term, path))?;
            std::str::from_utf8(bin.as_slice())
                .map(Scalar::Str)
                .map_err(|_| not_json(term, path))
        }
        TermType::Integer => {
            if let Ok(i) = term.decode::<i64>() {
                Ok(Scalar::Int(i))
            } else if let Ok(u) = term.decode::<u64>() {
                Ok(Scalar::UInt(u))
            } else {
                read_big(term, budget).map(Scalar::Big)
            }
        }
        TermType::Float => term
            .decode::<f64>()
            .map(Scalar::Float)
            .map_err(|_| not_json(term, path)),
        _ => Err(not_json(term, path)),
    }
}

/// Converts a term into a `serde_json::Value` under the documented rules.
pub fn to_value<'a>(term: Term<'a>, budget: &mut Budget) -> Result<Value, TermError> {
    let mut path = Vec::with_capacity(8);
    convert(term, budget, &mut path)
}

fn convert<'a>(
    term: Term<'a>,
    budget: &mut Budget,
    path: &mut Vec<Seg<'a>>,
) -> Result<Value, TermError> {
    budget.spend(1)?;
    match term.get_type() {
        TermType::Map => {
            enter(path)?;
            let size = term.map_size().map_err(|_| not_json(term, path))?;
            budget.spend(size as i64)?;
            let mut map = Map::new();
            for (key, value) in MapIterator::new(term).ok_or_else(|| not_json(term, path))? {
                let name = read_key(key, path)?;
                budget.spend_bytes(name.as_str().len())?;
                path.push(Seg::Key(key));
                let converted = convert(value, budget, path)?;
                path.pop();
                let name = match name {
                    Key::Str(s) => s.to_owned(),
                    Key::Atom(s) => s,
                };
                if map.contains_key(&name) {
                    return Err(duplicate_key(&name, path));
                }
                map.insert(name, converted);
            }
            Ok(Value::Object(map))
        }
        TermType::List => {
            enter(path)?;
            let mut items = Vec::new();
            for (i, cell) in Cells::new(term).enumerate() {
                let item = cell.ok_or_else(|| not_json(term, path))?;
                path.push(Seg::Index(i));
                items.push(convert(item, budget, path)?);
                path.pop();
            }
            Ok(Value::Array(items))
        }
        _ => Ok(match read_scalar(term, path, budget)? {
            Scalar::Null => Value::Null,
            Scalar::Bool(b) => Value::Bool(b),
            Scalar::Str(s) => {
                budget.spend_bytes(s.len())?;
                Value::String(s.to_owned())
            }
            Scalar::AtomStr(s) => Value::String(s),
            Scalar::Int(i) => Value::Number(i.into()),
            Scalar::UInt(u) => Value::Number(u.into()),
            // Without arbitrary precision a big integer is validated by its nearest float.
            Scalar::Big(b) => Number::from_f64(big_to_f64(&b))
                .map(Value::Number)
                .ok_or_else(|| not_json(term, path))?,
            Scalar::Float(f) => Number::from_f64(f)
                .map(Value::Number)
                .ok_or_else(|| not_json(term, path))?,
        }),
    }
}

/// A container at `path` (its ancestors): refused when it would be the 129th level.
#[inline]
pub fn enter(path: &[Seg]) -> Result<(), TermError> {
    if path.len() >= MAX_DEPTH {
        Err(TermError::TooDeep {
            path: pointer(path),
        })
    } else {
        Ok(())
    }
}

pub fn duplicate_key(name: &str, path: &[Seg]) -> TermError {
    TermError::NotJson {
        path: pointer(path),
        reason: format!(
            "key \"{name}\" is given twice (as an atom and as a string): keep one of them"
        ),
    }
}

pub fn big_to_f64(b: &BigInt) -> f64 {
    b.to_string().parse::<f64>().unwrap_or(f64::INFINITY)
}

/// Builds a term from a `serde_json::Value` (object keys become binaries).
pub fn from_value<'a>(env: Env<'a>, value: &Value) -> Term<'a> {
    match value {
        Value::Null => rustler::types::atom::nil().encode(env),
        Value::Bool(b) => b.encode(env),
        Value::Number(n) => number_term(env, n),
        Value::String(s) => s.as_str().encode(env),
        Value::Array(items) => {
            let terms: Vec<Term<'a>> = items.iter().map(|v| from_value(env, v)).collect();
            terms.encode(env)
        }
        Value::Object(map) => {
            let keys: Vec<Term<'a>> = map.keys().map(|k| k.as_str().encode(env)).collect();
            let values: Vec<Term<'a>> = map.values().map(|v| from_value(env, v)).collect();
            Term::map_from_term_arrays(env, &keys, &values)
                .unwrap_or_else(|_| rustler::types::map::map_new(env))
        }
    }
}

pub fn number_term<'a>(env: Env<'a>, n: &Number) -> Term<'a> {
    if let Some(i) = n.as_i64() {
        i.encode(env)
    } else if let Some(u) = n.as_u64() {
        u.encode(env)
    } else {
        n.as_f64().unwrap_or(0.0).encode(env)
    }
}

/// A map with atom keys and string values (error and warning reports), `N` of them (distinct):
/// made from arrays on the stack, with no allocation besides the terms (a validation error list
/// is nine of these).
pub fn string_map<'a, const N: usize>(env: Env<'a>, pairs: [(rustler::Atom, &str); N]) -> Term<'a> {
    let keys = pairs.map(|(k, _)| k.as_c_arg());
    let values = pairs.map(|(_, v)| crate::json::binary(env, v.as_bytes()).as_c_arg());
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
