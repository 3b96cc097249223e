//! Terms to and from `serde_json::Value`, under the rules in `term/mod.rs`: the cold path that
//! names an error's path, and the conversions of small documents (settings, discovery reports).

use rustler::types::{BigInt, MapIterator};
use rustler::{Encoder, Env, Term, TermType};
use serde_json::{Map, Number, Value};

use super::budget::{Budget, TermError};
use super::display::describe;
use super::path::{duplicate_key, enter, not_json, pointer, Seg};
use super::raw::{atom_name, read_big, Cells};

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
