//! JSON text <-> terms, natively: decoding builds terms straight from the parser (no intermediate
//! `Value`), encoding walks the term and writes bytes.

use std::fmt;

use rustler::types::{ListIterator, MapIterator};
use rustler::{Binary, Encoder, Env, NewBinary, Term, TermType};
use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};

use crate::error::{Error, Result};
use crate::term::{self, Budget, Key, Scalar, Seg, TermError};

/// Bytes of JSON text a normal scheduler decodes; larger input goes to a dirty scheduler.
pub const NORMAL_DECODE_BYTES: usize = 16 * 1024;

struct TermSeed<'a> {
    env: Env<'a>,
}

impl<'de, 'a> DeserializeSeed<'de> for TermSeed<'a> {
    type Value = Term<'a>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Term<'a>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, 'a> Visitor<'de> for TermSeed<'a> {
    type Value = Term<'a>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Term<'a>, E> {
        Ok(v.encode(self.env))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Term<'a>, E> {
        Ok(v.encode(self.env))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Term<'a>, E> {
        Ok(v.encode(self.env))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Term<'a>, E> {
        Ok(v.encode(self.env))
    }

    fn visit_str<E>(self, v: &str) -> Result<Term<'a>, E> {
        Ok(binary(self.env, v.as_bytes()))
    }

    fn visit_unit<E>(self) -> Result<Term<'a>, E> {
        Ok(rustler::types::atom::nil().encode(self.env))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Term<'a>, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(item) = seq.next_element_seed(TermSeed { env: self.env })? {
            items.push(item);
        }
        Ok(items.encode(self.env))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Term<'a>, A::Error> {
        let mut keys = Vec::new();
        let mut values = Vec::new();
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            keys.push(binary(self.env, key.as_bytes()));
            values.push(map.next_value_seed(TermSeed { env: self.env })?);
        }
        match Term::map_from_term_arrays(self.env, &keys, &values) {
            Ok(term) => Ok(term),
            // Duplicate keys: the last one wins, as in JavaScript and serde_json.
            Err(_) => {
                let mut acc = rustler::types::map::map_new(self.env);
                for (k, v) in keys.into_iter().zip(values) {
                    acc = acc.map_put(k, v).map_err(|_| {
                        serde::de::Error::custom("could not build a map from this object")
                    })?;
                }
                Ok(acc)
            }
        }
    }
}

pub fn binary<'a>(env: Env<'a>, bytes: &[u8]) -> Term<'a> {
    let mut out = NewBinary::new(env, bytes.len());
    out.as_mut_slice().copy_from_slice(bytes);
    Binary::from(out).to_term(env)
}

/// Decodes JSON text into a term: `{:ok, term}` or `{:error, message}`.
pub fn decode<'a>(env: Env<'a>, text: &[u8]) -> Result<Term<'a>, String> {
    let mut de = serde_json::Deserializer::from_slice(text);
    let term = TermSeed { env }
        .deserialize(&mut de)
        .map_err(|e| decode_error(&e, text))?;
    de.end().map_err(|e| decode_error(&e, text))?;
    Ok(term)
}

pub fn decode_error(e: &serde_json::Error, text: &[u8]) -> String {
    if text.is_empty() {
        return "invalid JSON: the input is empty".into();
    }
    let mut msg = format!("invalid JSON: {e}");
    if msg.contains("recursion limit") {
        msg = format!(
            "invalid JSON: nested deeper than {} levels ({e})",
            term::MAX_DEPTH
        );
    }
    msg
}

/// Encodes a term as JSON text; `pretty` indents by two spaces.
pub fn encode(term: Term, pretty: bool, budget: &mut Budget) -> Result<Vec<u8>, TermError> {
    let mut w = Writer {
        out: Vec::with_capacity(128),
        pretty,
        indent: 0,
        budget,
    };
    let mut path = Vec::new();
    w.value(term, &mut path)?;
    Ok(w.out)
}

struct Writer<'b> {
    out: Vec<u8>,
    pretty: bool,
    indent: usize,
    budget: &'b mut Budget,
}

impl Writer<'_> {
    fn newline(&mut self) {
        if self.pretty {
            self.out.push(b'\n');
            self.out.extend(std::iter::repeat_n(b' ', self.indent * 2));
        }
    }

    fn string(&mut self, s: &str) {
        // serde_json's own escaping: correct for control characters and quotes.
        serde_json::to_writer(&mut self.out, s).expect("writing to a Vec cannot fail");
    }

    fn value<'a>(&mut self, term: Term<'a>, path: &mut Vec<Seg<'a>>) -> Result<(), TermError> {
        self.budget.spend(1)?;
        if path.len() > term::MAX_DEPTH {
            return Err(TermError::TooDeep {
                path: term::pointer(path),
            });
        }
        match term.get_type() {
            TermType::Map => self.map(term, path),
            TermType::List => self.list(term, path),
            _ => {
                match term::read_scalar(term, path)? {
                    Scalar::Null => self.out.extend_from_slice(b"null"),
                    Scalar::Bool(true) => self.out.extend_from_slice(b"true"),
                    Scalar::Bool(false) => self.out.extend_from_slice(b"false"),
                    Scalar::Str(s) => {
                        self.budget.spend_bytes(s.len())?;
                        self.string(s)
                    }
                    Scalar::AtomStr(s) => self.string(&s),
                    Scalar::Int(i) => self.out.extend_from_slice(i.to_string().as_bytes()),
                    Scalar::UInt(u) => self.out.extend_from_slice(u.to_string().as_bytes()),
                    Scalar::Big(b) => self.out.extend_from_slice(b.to_string().as_bytes()),
                    Scalar::Float(f) => {
                        serde_json::to_writer(&mut self.out, &f).expect("finite float")
                    }
                }
                Ok(())
            }
        }
    }

    fn map<'a>(&mut self, term: Term<'a>, path: &mut Vec<Seg<'a>>) -> Result<(), TermError> {
        let iter = MapIterator::new(term).ok_or_else(|| term::not_json(term, path))?;
        let mut seen_atom = false;
        let mut seen_binary = false;
        let mut names: Option<std::collections::HashSet<String>> = None;
        self.out.push(b'{');
        self.indent += 1;
        let mut first = true;
        for (key, value) in iter {
            let name = term::read_key(key, path)?;
            match name {
                Key::Str(_) => seen_binary = true,
                Key::Atom(_) => seen_atom = true,
            }
            // Only a map mixing atom and binary keys can name one key twice.
            if seen_atom && seen_binary {
                let set = names.get_or_insert_with(|| {
                    MapIterator::new(term)
                        .into_iter()
                        .flatten()
                        .take_while(|(k, _)| *k != key)
                        .filter_map(|(k, _)| term::read_key(k, &[]).ok())
                        .map(|k| k.as_str().to_owned())
                        .collect()
                });
                if !set.insert(name.as_str().to_owned()) {
                    return Err(term::duplicate_key(name.as_str(), path));
                }
            }
            if !first {
                self.out.push(b',');
            }
            first = false;
            self.newline();
            self.string(name.as_str());
            self.out.push(b':');
            if self.pretty {
                self.out.push(b' ');
            }
            path.push(Seg::Key(key));
            self.value(value, path)?;
            path.pop();
        }
        self.indent -= 1;
        if !first {
            self.newline();
        }
        self.out.push(b'}');
        Ok(())
    }

    fn list<'a>(&mut self, term: Term<'a>, path: &mut Vec<Seg<'a>>) -> Result<(), TermError> {
        if term.list_length().is_err() {
            return Err(term::not_json(term, path));
        }
        let iter: ListIterator = term.decode().map_err(|_| term::not_json(term, path))?;
        self.out.push(b'[');
        self.indent += 1;
        let mut first = true;
        for (i, item) in iter.enumerate() {
            if !first {
                self.out.push(b',');
            }
            first = false;
            self.newline();
            path.push(Seg::Index(i));
            self.value(item, path)?;
            path.pop();
        }
        self.indent -= 1;
        if !first {
            self.newline();
        }
        self.out.push(b']');
        Ok(())
    }
}

fn encoded<'a>(env: Env<'a>, result: std::result::Result<Vec<u8>, TermError>) -> Result<Term<'a>> {
    match result {
        Ok(bytes) => Ok(binary(env, &bytes)),
        Err(TermError::Yield) => Err(Error::Yield),
        Err(e) => Err(Error::NotJson {
            path: e.path().to_owned(),
            message: e.message(),
        }),
    }
}

#[rustler::nif]
fn json_decode<'a>(env: Env<'a>, text: Binary<'a>) -> Result<Term<'a>> {
    if text.len() > NORMAL_DECODE_BYTES {
        return Err(Error::Yield);
    }
    decode(env, text.as_slice()).map_err(Error::Message)
}

#[rustler::nif(schedule = "DirtyCpu")]
fn json_decode_dirty<'a>(env: Env<'a>, text: Binary<'a>) -> Result<Term<'a>> {
    decode(env, text.as_slice()).map_err(Error::Message)
}

#[rustler::nif]
fn json_encode<'a>(env: Env<'a>, term: Term<'a>, pretty: bool) -> Result<Term<'a>> {
    encoded(env, encode(term, pretty, &mut Budget::normal()))
}

#[rustler::nif(schedule = "DirtyCpu")]
fn json_encode_dirty<'a>(env: Env<'a>, term: Term<'a>, pretty: bool) -> Result<Term<'a>> {
    encoded(env, encode(term, pretty, &mut Budget::dirty()))
}
