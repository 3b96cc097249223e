//! JSON text <-> terms, natively: decoding builds terms straight from the text (no intermediate
//! `Value`), encoding (`encode.rs`) walks the term and writes the text into the result binary.
//!
//! Both directions follow one set of rules, so whatever `encode` writes `decode` reads back to
//! an equal term: integers of any size stay integers (a big one costs its conversion in work
//! units on either side), at most [`term::MAX_DEPTH`] nested containers either way.
#![allow(unsafe_code)]

use std::mem::MaybeUninit;
use std::str::FromStr;

use rustler::sys::{
    enif_make_list_from_array, enif_make_map_from_arrays, enif_make_map_put, enif_make_new_binary,
    enif_make_new_map, ErlNifEnv, ErlNifTerm,
};
use rustler::types::BigInt;
use rustler::{Binary, Encoder, Env, Term};

use crate::error::{Error, Result};
use crate::term::{self, Budget, TermError};
use crate::twins::twin_nifs;

/// Bytes of JSON text a normal scheduler decodes; larger input goes to a dirty scheduler.
pub const NORMAL_DECODE_BYTES: usize = 16 * 1024;

/// Why decoding stopped.
#[derive(Debug)]
pub enum DecodeError {
    /// Over a normal scheduler's budget (a big integer): retry on a dirty one.
    Yield,
    /// Not JSON, or over the dirty budget: the message says what and where.
    Invalid(String),
}

impl From<DecodeError> for Error {
    fn from(e: DecodeError) -> Self {
        match e {
            DecodeError::Yield => Error::Yield,
            DecodeError::Invalid(message) => Error::Message(message),
        }
    }
}

/// Decodes JSON text into a term. Object keys become binaries; a key given twice keeps its
/// last value (as in JavaScript).
pub fn decode<'a>(env: Env<'a>, text: &[u8], budget: &mut Budget) -> Result<Term<'a>, DecodeError> {
    if text.is_empty() {
        return Err(DecodeError::Invalid(
            "invalid JSON: the input is empty".into(),
        ));
    }
    let mut parser = Parser {
        env,
        raw: env.as_c_arg(),
        text,
        pos: 0,
        depth: 0,
        budget,
        values: Vec::new(),
        keys: Vec::new(),
        scratch: Vec::new(),
    };
    if let Err(e) = std::str::from_utf8(text) {
        parser.pos = e.valid_up_to();
        return Err(parser.message(Fail::At("invalid UTF-8")));
    }
    let parsed = parser.value().and_then(|term| {
        parser.skip_ws();
        if parser.pos < text.len() {
            Err(Fail::At("trailing characters"))
        } else {
            Ok(term)
        }
    });
    match parsed {
        Ok(term) => Ok(unsafe { Term::new(env, term) }),
        Err(fail) => Err(parser.message(fail)),
    }
}

/// A parse failure; the position is the parser's.
enum Fail {
    /// At the byte under the cursor.
    At(&'static str),
    /// At the end of the text.
    Eof(&'static str),
    Deep,
    Budget(TermError),
}

struct Parser<'t, 'b, 'a> {
    env: Env<'a>,
    raw: *mut ErlNifEnv,
    text: &'t [u8],
    pos: usize,
    depth: usize,
    budget: &'b mut Budget,
    /// Elements and member values of the containers being read (each container's are on top).
    values: Vec<ErlNifTerm>,
    keys: Vec<ErlNifTerm>,
    /// An escaped string's bytes.
    scratch: Vec<u8>,
}

impl Parser<'_, '_, '_> {
    fn message(&self, fail: Fail) -> DecodeError {
        let what = match fail {
            Fail::Budget(TermError::Yield) => return DecodeError::Yield,
            Fail::Budget(e) => {
                return DecodeError::Invalid(format!("invalid JSON: {}", e.message()))
            }
            Fail::At(what) | Fail::Eof(what) => what.to_owned(),
            Fail::Deep => format!("nested deeper than {} levels", term::MAX_DEPTH),
        };
        let at = self.pos.min(self.text.len());
        let before = &self.text[..at];
        let line = 1 + before.iter().filter(|&&b| b == b'\n').count();
        let line_start = before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        // Like serde_json: the column of the offending byte, or of the last one at the end.
        let column = if at < self.text.len() {
            at - line_start + 1
        } else {
            at - line_start
        };
        DecodeError::Invalid(format!(
            "invalid JSON: {what} at line {line} column {column}"
        ))
    }

    #[inline]
    fn peek(&self) -> Option<u8> {
        self.text.get(self.pos).copied()
    }

    #[inline]
    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\t' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    fn value(&mut self) -> Result<ErlNifTerm, Fail> {
        self.skip_ws();
        match self.peek() {
            None => Err(Fail::Eof("EOF while parsing a value")),
            Some(b'{') => self.object(),
            Some(b'[') => self.array(),
            Some(b'"') => {
                self.pos += 1;
                self.string()
            }
            Some(b't') => self.literal(b"true", rustler::types::atom::true_().as_c_arg()),
            Some(b'f') => self.literal(b"false", rustler::types::atom::false_().as_c_arg()),
            Some(b'n') => self.literal(b"null", rustler::types::atom::nil().as_c_arg()),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err(Fail::At("expected value")),
        }
    }

    fn literal(&mut self, word: &[u8], term: ErlNifTerm) -> Result<ErlNifTerm, Fail> {
        for &expected in word {
            match self.peek() {
                None => return Err(Fail::Eof("EOF while parsing a value")),
                Some(b) if b == expected => self.pos += 1,
                Some(_) => return Err(Fail::At("expected ident")),
            }
        }
        Ok(term)
    }

    fn enter(&mut self) -> Result<(), Fail> {
        self.depth += 1;
        if self.depth > term::MAX_DEPTH {
            return Err(Fail::Deep);
        }
        self.pos += 1;
        Ok(())
    }

    fn array(&mut self) -> Result<ErlNifTerm, Fail> {
        self.enter()?;
        let base = self.values.len();
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
        } else {
            loop {
                let item = self.value()?;
                self.values.push(item);
                self.skip_ws();
                match self.peek() {
                    Some(b',') => {
                        self.pos += 1;
                        self.skip_ws();
                        if self.peek() == Some(b']') {
                            return Err(Fail::At("trailing comma"));
                        }
                    }
                    Some(b']') => {
                        self.pos += 1;
                        break;
                    }
                    None => return Err(Fail::Eof("EOF while parsing a list")),
                    Some(_) => return Err(Fail::At("expected `,` or `]`")),
                }
            }
        }
        let items = &self.values[base..];
        let list =
            unsafe { enif_make_list_from_array(self.raw, items.as_ptr(), items.len() as u32) };
        self.values.truncate(base);
        self.depth -= 1;
        Ok(list)
    }

    fn object(&mut self) -> Result<ErlNifTerm, Fail> {
        self.enter()?;
        let base = self.values.len();
        let key_base = self.keys.len();
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
        } else {
            loop {
                self.skip_ws();
                match self.peek() {
                    Some(b'"') => self.pos += 1,
                    Some(b'}') => return Err(Fail::At("trailing comma")),
                    None => return Err(Fail::Eof("EOF while parsing an object")),
                    Some(_) => return Err(Fail::At("key must be a string")),
                }
                let key = self.string()?;
                self.keys.push(key);
                self.skip_ws();
                match self.peek() {
                    Some(b':') => self.pos += 1,
                    None => return Err(Fail::Eof("EOF while parsing an object")),
                    Some(_) => return Err(Fail::At("expected `:`")),
                }
                let value = self.value()?;
                self.values.push(value);
                self.skip_ws();
                match self.peek() {
                    Some(b',') => self.pos += 1,
                    Some(b'}') => {
                        self.pos += 1;
                        break;
                    }
                    None => return Err(Fail::Eof("EOF while parsing an object")),
                    Some(_) => return Err(Fail::At("expected `,` or `}`")),
                }
            }
        }
        let map = self.make_map(&self.keys[key_base..], &self.values[base..]);
        self.values.truncate(base);
        self.keys.truncate(key_base);
        self.depth -= 1;
        Ok(map)
    }

    fn make_map(&self, keys: &[ErlNifTerm], values: &[ErlNifTerm]) -> ErlNifTerm {
        let mut map = MaybeUninit::<ErlNifTerm>::uninit();
        let made = unsafe {
            enif_make_map_from_arrays(
                self.raw,
                keys.as_ptr(),
                values.as_ptr(),
                keys.len(),
                map.as_mut_ptr(),
            )
        };
        if made != 0 {
            return unsafe { map.assume_init() };
        }
        // A key given twice: the last one wins.
        let mut acc = unsafe { enif_make_new_map(self.raw) };
        for (&k, &v) in keys.iter().zip(values) {
            let mut next = MaybeUninit::<ErlNifTerm>::uninit();
            if unsafe { enif_make_map_put(self.raw, acc, k, v, next.as_mut_ptr()) } != 0 {
                acc = unsafe { next.assume_init() };
            }
        }
        acc
    }

    fn make_binary(&self, bytes: &[u8]) -> ErlNifTerm {
        let mut term = MaybeUninit::<ErlNifTerm>::uninit();
        unsafe {
            let data = enif_make_new_binary(self.raw, bytes.len(), term.as_mut_ptr());
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), data, bytes.len());
            term.assume_init()
        }
    }

    /// A string after its opening quote (the text is known to be UTF-8).
    fn string(&mut self) -> Result<ErlNifTerm, Fail> {
        let start = self.pos;
        loop {
            match self.peek() {
                None => return Err(Fail::Eof("EOF while parsing a string")),
                Some(b'"') => {
                    let term = self.make_binary(&self.text[start..self.pos]);
                    self.pos += 1;
                    return Ok(term);
                }
                Some(b'\\') => break,
                Some(0..=0x1F) => return Err(Fail::At(CONTROL)),
                Some(_) => self.pos += 1,
            }
        }
        let mut out = std::mem::take(&mut self.scratch);
        out.clear();
        out.extend_from_slice(&self.text[start..self.pos]);
        let ended = self.escaped(&mut out);
        let term = ended.map(|()| self.make_binary(&out));
        self.scratch = out;
        term
    }

    /// The rest of a string holding escapes, into `out`.
    fn escaped(&mut self, out: &mut Vec<u8>) -> Result<(), Fail> {
        loop {
            match self.peek() {
                None => return Err(Fail::Eof("EOF while parsing a string")),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(());
                }
                Some(b'\\') => {
                    self.pos += 1;
                    let Some(kind) = self.peek() else {
                        return Err(Fail::Eof("EOF while parsing a string"));
                    };
                    self.pos += 1;
                    let byte = match kind {
                        b'"' => b'"',
                        b'\\' => b'\\',
                        b'/' => b'/',
                        b'b' => 0x08,
                        b'f' => 0x0C,
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'u' => {
                            let c = self.unicode_escape()?;
                            out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
                            continue;
                        }
                        _ => {
                            self.pos -= 1;
                            return Err(Fail::At("invalid escape"));
                        }
                    };
                    out.push(byte);
                }
                Some(0..=0x1F) => return Err(Fail::At(CONTROL)),
                Some(b) => {
                    out.push(b);
                    self.pos += 1;
                }
            }
        }
    }

    fn hex4(&mut self) -> Result<u32, Fail> {
        let mut n = 0;
        for _ in 0..4 {
            let digit = match self.peek() {
                None => return Err(Fail::Eof("EOF while parsing a string")),
                Some(b) => (b as char).to_digit(16).ok_or(Fail::At("invalid escape"))?,
            };
            n = n * 16 + digit;
            self.pos += 1;
        }
        Ok(n)
    }

    /// `\uXXXX` (after the `u`), with a surrogate pair's second half.
    fn unicode_escape(&mut self) -> Result<char, Fail> {
        let first = self.hex4()?;
        let code = match first {
            0xD800..=0xDBFF => {
                if self.text.get(self.pos..self.pos + 2) != Some(&b"\\u"[..]) {
                    return Err(Fail::At("lone leading surrogate in hex escape"));
                }
                self.pos += 2;
                let second = self.hex4()?;
                if !(0xDC00..=0xDFFF).contains(&second) {
                    return Err(Fail::At("lone leading surrogate in hex escape"));
                }
                0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
            }
            0xDC00..=0xDFFF => return Err(Fail::At("lone trailing surrogate in hex escape")),
            code => code,
        };
        char::from_u32(code).ok_or(Fail::At("invalid unicode code point"))
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
        self.pos - start
    }

    fn number(&mut self) -> Result<ErlNifTerm, Fail> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            None => return Err(Fail::Eof("EOF while parsing a value")),
            Some(_) => return Err(Fail::At("invalid number")),
        }
        let mut float = false;
        if self.peek() == Some(b'.') {
            self.pos += 1;
            float = true;
            if self.digits() == 0 {
                return Err(self.number_end());
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            float = true;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return Err(self.number_end());
            }
        }
        // SAFETY: only ASCII digits, signs, '.', 'e' were consumed.
        let text = unsafe { std::str::from_utf8_unchecked(&self.text[start..self.pos]) };
        let env = self.env;
        if float {
            let f = f64::from_str(text).unwrap_or(f64::INFINITY);
            if !f.is_finite() {
                self.pos = start;
                return Err(Fail::At("number out of range"));
            }
            return Ok(f.encode(env).as_c_arg());
        }
        if let Ok(i) = i64::from_str(text) {
            return Ok(i.encode(env).as_c_arg());
        }
        if let Ok(u) = u64::from_str(text) {
            return Ok(u.encode(env).as_c_arg());
        }
        // An integer beyond 64 bits: ~19.3 digits a word, charged before it is converted.
        let words = text.len() * 10 / 193 + 1;
        if !self.budget.is_dirty() && words > term::NORMAL_BIG_WORDS {
            return Err(Fail::Budget(TermError::Yield));
        }
        self.budget
            .spend(term::bignum_units(words))
            .map_err(|e| Fail::Budget(e.into()))?;
        let big = BigInt::from_str(text).map_err(|_| Fail::At("invalid number"))?;
        Ok(big.encode(env).as_c_arg())
    }

    fn number_end(&self) -> Fail {
        if self.pos >= self.text.len() {
            Fail::Eof("EOF while parsing a value")
        } else {
            Fail::At("invalid number")
        }
    }
}

const CONTROL: &str = "control character (\\u0000-\\u001F) found while parsing a string";

fn encoded<'a>(
    env: Env<'a>,
    result: std::result::Result<Binary<'a>, TermError>,
) -> Result<Term<'a>> {
    match result {
        Ok(binary) => Ok(binary.to_term(env)),
        Err(TermError::Yield) => Err(Error::Yield),
        Err(e) => Err(Error::NotJson {
            path: e.path().to_owned(),
            message: e.message(),
        }),
    }
}

twin_nifs! {
    fn json_decode / json_decode_dirty<'a>(env: Env, text: Binary<'a>) -> (Result<Term<'a>>),
    |dirty| {
        if dirty {
            return Ok(decode(env, text.as_slice(), &mut Budget::dirty())?);
        }
        if text.len() > NORMAL_DECODE_BYTES {
            return Err(Error::Yield);
        }
        // ~10 ns a byte of text, reported as work units of ~100 ns.
        term::report_units(env, (text.len() / 10) as i64);
        Ok(decode(env, text.as_slice(), &mut Budget::normal())?)
    }
}

twin_nifs! {
    fn json_encode / json_encode_dirty<'a>(
        env: Env,
        term: Term<'a>,
        pretty: bool,
    ) -> (Result<Term<'a>>),
    |dirty| {
        if dirty {
            return encoded(env, crate::encode::encode(term, pretty, &mut Budget::dirty()));
        }
        let mut budget = Budget::normal();
        let result = crate::encode::encode(term, pretty, &mut budget);
        term::report_units(env, budget.spent());
        encoded(env, result)
    }
}

/// A slice of a long list's elements (see `encode::encode_slice`): `{:ok, {text, rest}}`.
#[rustler::nif]
fn json_encode_slice<'a>(env: Env<'a>, list: Term<'a>) -> Result<Term<'a>> {
    let mut budget = Budget::normal();
    let result = crate::encode::encode_slice(list, &mut budget);
    term::report_units(env, budget.spent());
    match result {
        Ok((text, rest)) => Ok((text, rest).encode(env)),
        Err(e) => encoded(env, Err(e)),
    }
}
