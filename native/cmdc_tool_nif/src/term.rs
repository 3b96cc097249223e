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
//! it stops at hard size limits instead of exhausting memory.

use rustler::types::{BigInt, ListIterator, MapIterator};
use rustler::{Encoder, Env, Term, TermType};
use serde_json::{Map, Number, Value};

/// Deepest nesting accepted anywhere (serde_json uses the same limit for JSON text).
pub const MAX_DEPTH: usize = 128;
/// Work units a normal-scheduler call may spend (~1 unit per node, 1 per 256 string bytes):
/// about 0.3 ms of conversion, so no call holds a normal scheduler near 1 ms.
pub const NORMAL_BUDGET: i64 = 3_000;
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
            TermError::TooBig => "value too large (over 64M nodes)".into(),
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

    pub fn dirty() -> Self {
        Budget {
            remaining: DIRTY_BUDGET,
            dirty: true,
        }
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

    #[inline]
    pub fn spend_bytes(&mut self, len: usize) -> Result<(), TermError> {
        self.spend(1 + (len >> 8) as i64)
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
                let name = key_name(*term).unwrap_or_else(|| format!("{term:?}"));
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
        TermType::Atom => term.atom_to_string().ok(),
        _ => None,
    }
}

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
    let mut shown = format!("{term:?}");
    if shown.len() > 60 {
        let mut cut = 57;
        while !shown.is_char_boundary(cut) {
            cut -= 1;
        }
        shown.truncate(cut);
        shown.push_str("...");
    }
    format!("{kind} ({shown}) is not a JSON value")
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
        TermType::Atom => Ok(Key::Atom(key.atom_to_string().unwrap_or_default())),
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

pub fn read_scalar<'a>(term: Term<'a>, path: &[Seg<'a>]) -> Result<Scalar<'a>, TermError> {
    match term.get_type() {
        TermType::Atom => {
            let name = term.atom_to_string().unwrap_or_default();
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
                term.decode::<BigInt>()
                    .map(Scalar::Big)
                    .map_err(|_| not_json(term, path))
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
    if path.len() > MAX_DEPTH {
        return Err(TermError::TooDeep {
            path: pointer(path),
        });
    }
    match term.get_type() {
        TermType::Map => {
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
            // ListIterator panics on an improper tail: check the shape first.
            let len = term.list_length().map_err(|_| not_json(term, path))?;
            let iter: ListIterator = term.decode().map_err(|_| not_json(term, path))?;
            let mut items = Vec::with_capacity(len);
            for (i, item) in iter.enumerate() {
                path.push(Seg::Index(i));
                items.push(convert(item, budget, path)?);
                path.pop();
            }
            Ok(Value::Array(items))
        }
        _ => Ok(match read_scalar(term, path)? {
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

pub fn duplicate_key(name: &str, path: &[Seg]) -> TermError {
    TermError::NotJson {
        path: pointer(path),
        reason: format!("key \"{name}\" is given twice (as an atom and as a string)"),
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

/// A map with atom keys and string values (error and warning reports).
pub fn string_map<'a>(env: Env<'a>, pairs: &[(rustler::Atom, &str)]) -> Term<'a> {
    let keys: Vec<Term<'a>> = pairs.iter().map(|(k, _)| k.encode(env)).collect();
    let values: Vec<Term<'a>> = pairs.iter().map(|(_, v)| v.encode(env)).collect();
    Term::map_from_term_arrays(env, &keys, &values).expect("distinct atom keys")
}
