//! The BEAM external term format (what `:erlang.binary_to_term/1` reads), written straight from
//! `serde_json::Value`s under the library's term rules: objects become maps with binary keys,
//! arrays lists, strings binaries, numbers integers or floats, `null`/`true`/`false` the atoms
//! `nil`/`true`/`false`. Pieces written without the version byte can be concatenated, so a list
//! of cached pieces costs a copy, and `binary_to_term/1` builds the whole term in one allocation.

use serde_json::{Number, Value};

pub const VERSION: u8 = 131;
const SMALL_INTEGER_EXT: u8 = 97;
const INTEGER_EXT: u8 = 98;
const NEW_FLOAT_EXT: u8 = 70;
const SMALL_BIG_EXT: u8 = 110;
const MAP_EXT: u8 = 116;
const LIST_EXT: u8 = 108;
const NIL_EXT: u8 = 106;
const BINARY_EXT: u8 = 109;
const SMALL_ATOM_UTF8_EXT: u8 = 119;
const SMALL_TUPLE_EXT: u8 = 104;

pub fn binary(out: &mut Vec<u8>, bytes: &[u8]) {
    out.push(BINARY_EXT);
    out.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
    out.extend_from_slice(bytes);
}

/// An atom of at most 255 bytes of UTF-8.
pub fn atom(out: &mut Vec<u8>, name: &str) {
    out.push(SMALL_ATOM_UTF8_EXT);
    out.push(name.len() as u8);
    out.extend_from_slice(name.as_bytes());
}

/// A tuple of `arity` (at most 255) elements: write them after it.
pub fn tuple_header(out: &mut Vec<u8>, arity: u8) {
    out.push(SMALL_TUPLE_EXT);
    out.push(arity);
}

/// A map of `arity` pairs: write that many key, value pairs after it.
pub fn map_header(out: &mut Vec<u8>, arity: usize) {
    out.push(MAP_EXT);
    out.extend_from_slice(&(arity as u32).to_be_bytes());
}

/// A proper list of `len` elements: write them, then [`list_end`] (nothing else when empty).
pub fn list_header(out: &mut Vec<u8>, len: usize) {
    if len > 0 {
        out.push(LIST_EXT);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    }
}

/// Ends a list started by [`list_header`] (its tail, or the empty list itself).
pub fn list_end(out: &mut Vec<u8>) {
    out.push(NIL_EXT);
}

pub fn integer(out: &mut Vec<u8>, i: i128) {
    if (0..=255).contains(&i) {
        out.push(SMALL_INTEGER_EXT);
        out.push(i as u8);
    } else if let Ok(small) = i32::try_from(i) {
        out.push(INTEGER_EXT);
        out.extend_from_slice(&small.to_be_bytes());
    } else {
        let mut magnitude = i.unsigned_abs();
        let mut digits = Vec::with_capacity(16);
        while magnitude > 0 {
            digits.push((magnitude & 0xff) as u8);
            magnitude >>= 8;
        }
        out.push(SMALL_BIG_EXT);
        out.push(digits.len() as u8);
        out.push(u8::from(i < 0));
        out.extend_from_slice(&digits);
    }
}

pub fn float(out: &mut Vec<u8>, f: f64) {
    out.push(NEW_FLOAT_EXT);
    out.extend_from_slice(&f.to_bits().to_be_bytes());
}

fn number(out: &mut Vec<u8>, n: &Number) {
    if let Some(i) = n.as_i64() {
        integer(out, i as i128)
    } else if let Some(u) = n.as_u64() {
        integer(out, u as i128)
    } else {
        float(out, n.as_f64().unwrap_or(0.0))
    }
}

/// Writes a value (without the version byte).
pub fn value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Null => atom(out, "nil"),
        Value::Bool(true) => atom(out, "true"),
        Value::Bool(false) => atom(out, "false"),
        Value::Number(n) => number(out, n),
        Value::String(s) => binary(out, s.as_bytes()),
        Value::Array(items) => {
            list_header(out, items.len());
            for item in items {
                value(out, item);
            }
            list_end(out);
        }
        Value::Object(map) => {
            map_header(out, map.len());
            for (k, item) in map {
                binary(out, k.as_bytes());
                value(out, item);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn etf(v: &Value) -> Vec<u8> {
        let mut out = vec![VERSION];
        value(&mut out, v);
        out
    }

    // Numbers and binaries: the bytes :erlang.term_to_binary/1 gives (OTP 25). Atoms, lists and
    // maps use encodings binary_to_term/1 reads that term_to_binary/1 does not always pick
    // (SMALL_ATOM_UTF8_EXT, LIST_EXT for small integers); ExUnit decodes whole lists.
    #[test]
    fn scalars() {
        assert_eq!(etf(&json!(7)), [131, 97, 7]);
        assert_eq!(etf(&json!(-1)), [131, 98, 255, 255, 255, 255]);
        assert_eq!(etf(&json!(256)), [131, 98, 0, 0, 1, 0]);
        // 2^40
        assert_eq!(
            etf(&json!(1_099_511_627_776_i64)),
            [131, 110, 6, 0, 0, 0, 0, 0, 0, 1]
        );
        assert_eq!(
            etf(&json!(-1_099_511_627_776_i64)),
            [131, 110, 6, 1, 0, 0, 0, 0, 0, 1]
        );
        assert_eq!(etf(&json!(1.5)), [131, 70, 63, 248, 0, 0, 0, 0, 0, 0]);
        assert_eq!(etf(&json!(null)), [131, 119, 3, b'n', b'i', b'l']);
        assert_eq!(etf(&json!("ab")), [131, 109, 0, 0, 0, 2, b'a', b'b']);
    }

    #[test]
    fn containers() {
        assert_eq!(etf(&json!([])), [131, 106]);
        assert_eq!(etf(&json!([1])), [131, 108, 0, 0, 0, 1, 97, 1, 106]);
        assert_eq!(
            etf(&json!({"a": true})),
            [131, 116, 0, 0, 0, 1, 109, 0, 0, 0, 1, b'a', 119, 4, b't', b'r', b'u', b'e']
        );
    }
}
