//! Words for the search index: tool names split on `_ . -` and case changes (`readFile`,
//! `read_file` and `read-file` give the same words), lower-cased, common English words dropped,
//! and a light suffix stripping so that `files`, `listing` and `created` meet `file`, `list`
//! and `create`. The same function reads tools and queries, so both sides always agree.

/// Words that say nothing about what a tool does.
const STOPWORDS: [&str; 46] = [
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "for", "from", "given", "has",
    "have", "how", "i", "if", "in", "into", "is", "it", "its", "me", "my", "of", "on", "or",
    "that", "the", "their", "then", "this", "to", "tool", "use", "using", "want", "was", "what",
    "when", "which", "will", "with", "you", "your",
];

/// The longest stop word.
const STOP_LEN: usize = 5;

/// A word of at most 8 bytes as one integer (0 for longer ones).
const fn pack(word: &[u8]) -> u64 {
    let mut key = 0u64;
    let mut i = 0;
    while i < word.len() && word.len() <= 8 {
        key |= (word[i] as u64) << (8 * i);
        i += 1;
    }
    key
}

/// Stop words by a perfect hash: `(key * STOP_MUL) >> 57` differs for each of them (checked
/// when this compiles), so a check is a multiply, a load and a compare. A binary search took
/// a few mispredicted branches per word, the largest cost of reading a tool.
const STOP_MUL: u64 = 0x3962_e2c3_d6ac_9455;

const fn stop_slot(key: u64) -> usize {
    (key.wrapping_mul(STOP_MUL) >> 57) as usize
}

/// Each stop word's packed bytes at its slot; 0 (no word) elsewhere.
const STOP_TABLE: [u64; 128] = {
    let mut table = [0u64; 128];
    let mut i = 0;
    while i < STOPWORDS.len() {
        let key = pack(STOPWORDS[i].as_bytes());
        let slot = stop_slot(key);
        assert!(
            table[slot] == 0,
            "two stop words share a slot: pick another STOP_MUL"
        );
        assert!(STOPWORDS[i].len() <= STOP_LEN);
        table[slot] = key;
        i += 1;
    }
    table
};

/// The first eight bytes of `b` (at least eight long) as one integer, little-endian.
#[inline]
fn head(b: &[u8]) -> u64 {
    u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
}

/// Whether a word of `len` bytes whose first bytes are `head` (little-endian, bytes past the
/// word ignored) is a stop word.
#[inline]
fn is_stop(head: u64, len: usize) -> bool {
    let key = head & !(u64::MAX << (8 * len.min(7)));
    len <= STOP_LEN && STOP_TABLE[stop_slot(key)] == key
}

/// What an ASCII byte is to the tokenizer.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    Lower,
    Upper,
    Digit,
    Other,
}

const CLASSES: [Class; 128] = {
    let mut t = [Class::Other; 128];
    let mut b = 0;
    while b < 128 {
        let c = b as u8;
        t[b] = if c.is_ascii_lowercase() {
            Class::Lower
        } else if c.is_ascii_uppercase() {
            Class::Upper
        } else if c.is_ascii_digit() {
            Class::Digit
        } else {
            Class::Other
        };
        b += 1;
    }
    t
};

/// At most this many bytes of one word are kept (a 10 kB "word" is not a word).
const MAX_WORD: usize = 64;

/// The word being read: lower-cased bytes in a fixed buffer (no allocation per word); a word
/// longer than [`MAX_WORD`] is only counted, then dropped.
struct Word {
    buf: [u8; MAX_WORD],
    len: usize,
    /// Whether every byte pushed is ASCII (only ASCII words are stemmed).
    ascii: bool,
}

impl Word {
    #[inline]
    fn push_byte(&mut self, b: u8) {
        if let Some(dst) = self.buf.get_mut(self.len) {
            *dst = b;
        }
        self.len += 1;
    }

    fn push(&mut self, bytes: &[u8]) {
        if let Some(dst) = self.buf.get_mut(self.len..self.len + bytes.len()) {
            dst.copy_from_slice(bytes);
        }
        self.len += bytes.len();
        self.ascii &= bytes.is_ascii();
    }

    #[inline]
    fn emit(&mut self, f: &mut impl FnMut(&str)) {
        if self.len > 0 && self.len <= MAX_WORD && !is_stop(head(&self.buf), self.len) {
            let bytes = &self.buf[..self.len];
            // SAFETY: only whole UTF-8 encodings are pushed (ASCII bytes, `encode_utf8`), and
            // one that did not fit made `len` exceed the buffer, so this word is not read.
            let w = unsafe { std::str::from_utf8_unchecked(bytes) };
            debug_assert!(std::str::from_utf8(bytes).is_ok());
            f(if self.ascii { stem_ascii(w) } else { w });
        }
        self.len = 0;
        self.ascii = true;
    }
}

/// Calls `f` with each word of `text`, in order (repeats included). Runs of ASCII are read
/// eight bytes at a time ([`ascii_words`]); a stretch around other characters through
/// `char`'s Unicode tables ([`unicode_words`]), with the same rules. Both start and end a word
/// at an ASCII separator (space, punctuation) and keep nothing across one, so the text is cut
/// there into pieces read by either.
pub fn each_word(text: &str, mut f: impl FnMut(&str)) {
    if text.is_ascii() {
        return ascii_words(text, &mut f);
    }
    let mut rest = text;
    while !rest.is_empty() {
        let bytes = rest.as_bytes();
        let Some(p) = bytes.iter().position(|b| !b.is_ascii()) else {
            return ascii_words(rest, &mut f);
        };
        let separator = |b: &u8| CLASSES.get(*b as usize) == Some(&Class::Other);
        let cut = bytes[..p].iter().rposition(separator).unwrap_or(0);
        let end = bytes[p..]
            .iter()
            .position(separator)
            .map_or(bytes.len(), |e| p + e);
        // `cut` and `end` are ASCII bytes (or the ends): char boundaries.
        ascii_words(&rest[..cut], &mut f);
        unicode_words(&rest[cut..end], &mut f);
        rest = &rest[end..];
    }
}

/// `0x0101…01 * b`: `b` in every byte.
const fn splat(b: u8) -> u64 {
    b as u64 * 0x0101_0101_0101_0101
}

/// Bit `i` set where byte `i` of `x` (ASCII bytes, little-endian) is in `lo..=hi`: the per-byte
/// sums cannot carry (every byte is below 0x80), and the eight high bits are gathered by one
/// multiply (each lands on bit 56 + i, no two products overlap).
#[inline]
fn in_range(x: u64, lo: u8, hi: u8) -> u64 {
    let high = (x.wrapping_add(splat(0x80 - lo)) & !x.wrapping_add(splat(0x7f - hi))) & splat(0x80);
    ((high >> 7).wrapping_mul(0x0102_0408_1020_4080)) >> 56
}

/// Bits `k..64` set.
#[inline]
fn from(k: usize) -> u64 {
    u64::MAX.checked_shl(k as u32).unwrap_or(0)
}

/// [`each_word`] of ASCII text: 64 bytes at a time, each byte's class as one bit of a mask
/// (eight bytes per step), then one step per word boundary (a `trailing_zeros`), not per byte:
/// the branches left are per word, not per character.
fn ascii_words(text: &str, f: &mut impl FnMut(&str)) {
    let bytes = text.as_bytes();
    // A word still being read at a block's end: where it started, and whether it had an
    // upper-case letter so far.
    let (mut open, mut open_upper): (Option<usize>, bool) = (None, false);
    let (mut carry_word, mut carry_lower) = (0u64, 0u64);
    for (block, chunk) in bytes.chunks(64).enumerate() {
        let base = 64 * block;
        let (mut word, mut upper, mut lower) = (0u64, 0u64, 0u64);
        for (k, eight) in chunk.chunks(8).enumerate() {
            // The last bytes padded with zeros (separators).
            let x = match <[u8; 8]>::try_from(eight) {
                Ok(full) => u64::from_le_bytes(full),
                Err(_) => eight
                    .iter()
                    .rev()
                    .fold(0u64, |x, b| (x << 8) | u64::from(*b)),
            };
            let (u, l) = (in_range(x, b'A', b'Z'), in_range(x, b'a', b'z'));
            upper |= u << (8 * k);
            lower |= l << (8 * k);
            word |= (u | l | in_range(x, b'0', b'9')) << (8 * k);
        }
        // A word starts at a word byte after a non-word byte, or at an upper-case letter after
        // a lower-case one (`readFile`); it ends at a non-word byte or at such a case change.
        let case = upper & ((lower << 1) | carry_lower);
        let starts = word & (!((word << 1) | carry_word) | case);
        let ends = !word | case;
        (carry_word, carry_lower) = (word >> 63, lower >> 63);
        // A word left open by an earlier block ends at this block's first end.
        if let Some(s) = open {
            let e = ends.trailing_zeros() as usize;
            if e == 64 {
                open_upper |= upper != 0;
                continue;
            }
            ascii_word(text, s, base + e, open_upper || upper & !from(e) != 0, f);
            (open, open_upper) = (None, false);
        }
        // Then one step per word that starts here (no start comes before the open word's end:
        // a start follows a non-word byte or is a case change, both ends).
        let mut left = starts;
        while left != 0 {
            let s = left.trailing_zeros() as usize;
            left &= left - 1;
            let after = ends & from(s + 1);
            if after == 0 {
                // Read on in the next block (the last start here).
                (open, open_upper) = (Some(base + s), upper & from(s) != 0);
                break;
            }
            let e = after.trailing_zeros() as usize;
            ascii_word(text, base + s, base + e, upper & from(s) & !from(e) != 0, f);
        }
    }
    if let Some(s) = open {
        ascii_word(text, s, text.len(), open_upper, f);
    }
}

/// The word `text[s..e]` of [`ascii_words`]: lower-cased (copied only when it has an
/// upper-case letter), stop words dropped, stemmed.
#[inline]
fn ascii_word(text: &str, s: usize, e: usize, upper: bool, f: &mut impl FnMut(&str)) {
    if e - s > MAX_WORD {
        return;
    }
    // The key is the word's first eight bytes, those past the word included (`is_stop`
    // looks at its own); a lower-cased copy is made only for a word with upper-case letters.
    let mut buf: [u8; MAX_WORD];
    let (w, key) = if upper {
        buf = [0; MAX_WORD];
        for (d, c) in buf.iter_mut().zip(&text.as_bytes()[s..e]) {
            *d = c.to_ascii_lowercase();
        }
        // SAFETY: ASCII bytes (lower-cased ASCII letters and digits).
        let w = unsafe { std::str::from_utf8_unchecked(&buf[..e - s]) };
        (w, head(&buf))
    } else {
        let key = match text.as_bytes().get(s..s + 8) {
            Some(b) => head(b),
            None => pack(&text.as_bytes()[s..e.min(s + 8)]),
        };
        (&text[s..e], key)
    };
    if !is_stop(key, w.len()) {
        f(stem_ascii(w));
    }
}

/// [`each_word`] of text with other characters than ASCII, a character at a time.
fn unicode_words(text: &str, f: &mut impl FnMut(&str)) {
    let mut word = Word {
        buf: [0; MAX_WORD],
        len: 0,
        ascii: true,
    };
    // Whether the previous character was a lower-case letter of the current word.
    let mut prev_lower = false;
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if let Some(&class) = CLASSES.get(b as usize) {
            i += 1;
            match class {
                Class::Lower => {
                    let run = bytes[i..]
                        .iter()
                        .position(|c| !c.is_ascii_lowercase())
                        .map_or(bytes.len(), |n| i + n);
                    word.push(&bytes[i - 1..run]);
                    i = run;
                    prev_lower = true;
                    continue;
                }
                Class::Digit => word.push_byte(b),
                // A case change starts a word: `readFile` → `read`, `file`; `HTTPServer` →
                // `httpserver` stays whole (upper after upper), as models write it.
                Class::Upper => {
                    if prev_lower {
                        word.emit(f);
                    }
                    word.push_byte(b.to_ascii_lowercase());
                }
                Class::Other => word.emit(f),
            }
            prev_lower = false;
            continue;
        }
        let Some(c) = text[i..].chars().next() else {
            break;
        };
        i += c.len_utf8();
        if c.is_alphanumeric() {
            if prev_lower && c.is_uppercase() {
                word.emit(f);
            }
            for l in c.to_lowercase() {
                word.push(l.encode_utf8(&mut [0; 4]).as_bytes());
            }
            prev_lower = c.is_lowercase();
        } else {
            word.emit(f);
            prev_lower = false;
        }
    }
    word.emit(f);
}

/// Strips a plural, `-ing`, `-ed` and a final `e`, in that order, when enough of the word stays.
pub fn stem(word: &str) -> &str {
    if word.is_ascii() {
        stem_ascii(word)
    } else {
        word
    }
}

/// [`stem`] of a word known to be ASCII.
fn stem_ascii(word: &str) -> &str {
    let mut w = word;
    if w.len() <= 3 {
        return w;
    }
    match w.strip_suffix("ies") {
        // `directories` → `director`, like `directory` → `director` below.
        Some(s) if s.len() >= 3 => w = s,
        _ if w.ends_with('s') && !w.ends_with("ss") && !w.ends_with("us") && !w.ends_with("is") => {
            w = &w[..w.len() - 1]
        }
        _ => {}
    }
    if w.len() > 5 && w.ends_with("ing") {
        w = &w[..w.len() - 3];
    } else if w.len() > 4 && w.ends_with("ed") {
        w = &w[..w.len() - 2];
    }
    if w.len() > 3 && (w.ends_with('e') || w.ends_with('y')) {
        w = &w[..w.len() - 1];
    }
    w
}

/// The words of `text` as owned strings (tests and callers that keep them).
pub fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    each_word(text, |w| out.push(w.to_owned()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_split_on_separators_and_case() {
        assert_eq!(words("read_file"), words("readFile"));
        assert_eq!(words("read-file"), words("readFile"));
        assert_eq!(words("read_file"), ["read", "fil"]);
        assert_eq!(words("fs.read"), ["fs", "read"]);
        assert_eq!(words("getHTTPStatus"), ["get", "httpstatus"]);
    }

    #[test]
    fn inflections_meet() {
        for (a, b) in [
            ("files", "file"),
            ("listing", "list"),
            ("created", "create"),
            ("creating", "create"),
            ("directories", "directory"),
            ("issues", "issue"),
            ("queries", "query"),
            ("writes", "writing"),
        ] {
            assert_eq!(words(a), words(b), "{a} vs {b}");
        }
        // Short words and `-ss` stay.
        assert_eq!(words("git process"), ["git", "process"]);
    }

    #[test]
    fn stopwords_and_giant_words_are_dropped() {
        assert_eq!(words("Read the file of a user"), ["read", "fil", "user"]);
        assert!(words(&"x".repeat(10_000)).is_empty());
        assert!(words("").is_empty());
        assert!(words("!!! ... ---").is_empty());
    }

    #[test]
    fn non_ascii_words_are_kept_whole() {
        assert_eq!(words("Größe ändern"), ["größe", "ändern"]);
    }
}
