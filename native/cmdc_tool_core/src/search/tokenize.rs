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

/// [`STOPWORDS`] packed and sorted, for a binary search of integers.
const STOP_KEYS: [u64; 46] = {
    let mut keys = [0u64; 46];
    let mut i = 0;
    while i < keys.len() {
        keys[i] = pack(STOPWORDS[i].as_bytes());
        i += 1;
    }
    // Insertion sort (a `const` block has no `sort`).
    let mut i = 1;
    while i < keys.len() {
        let mut j = i;
        while j > 0 && keys[j - 1] > keys[j] {
            let t = keys[j];
            keys[j] = keys[j - 1];
            keys[j - 1] = t;
            j -= 1;
        }
        i += 1;
    }
    keys
};

fn is_stopword(word: &str) -> bool {
    word.len() <= STOP_LEN && STOP_KEYS.binary_search(&pack(word.as_bytes())).is_ok()
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
    }

    #[inline]
    fn emit(&mut self, f: &mut impl FnMut(&str)) {
        if self.len > 0 && self.len <= MAX_WORD {
            let bytes = &self.buf[..self.len];
            // SAFETY: only whole UTF-8 encodings are pushed (ASCII bytes, `encode_utf8`), and
            // one that did not fit made `len` exceed the buffer, so this word is not read.
            let w = unsafe { std::str::from_utf8_unchecked(bytes) };
            debug_assert!(std::str::from_utf8(bytes).is_ok());
            if !is_stopword(w) {
                f(stem(w));
            }
        }
        self.len = 0;
    }
}

/// Calls `f` with each word of `text`, in order (repeats included). ASCII is read byte by
/// byte through a class table; other characters through `char`'s Unicode tables, with the
/// same rules.
pub fn each_word(text: &str, mut f: impl FnMut(&str)) {
    let mut word = Word {
        buf: [0; MAX_WORD],
        len: 0,
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
                // Most of a text: take the whole run of lower-case letters at once.
                Class::Lower => {
                    let run = bytes[i..]
                        .iter()
                        .position(|c| !c.is_ascii_lowercase())
                        .map_or(bytes.len(), |n| i + n);
                    word.push(&bytes[i - 1..run]);
                    i = run;
                }
                Class::Digit => word.push_byte(b),
                // A case change starts a word: `readFile` → `read`, `file`; `HTTPServer` →
                // `httpserver` stays whole (upper after upper), as models write it.
                Class::Upper => {
                    if prev_lower {
                        word.emit(&mut f);
                    }
                    word.push_byte(b.to_ascii_lowercase());
                }
                Class::Other => word.emit(&mut f),
            }
            prev_lower = class == Class::Lower;
            continue;
        }
        let Some(c) = text[i..].chars().next() else {
            break;
        };
        i += c.len_utf8();
        if c.is_alphanumeric() {
            if prev_lower && c.is_uppercase() {
                word.emit(&mut f);
            }
            for l in c.to_lowercase() {
                word.push(l.encode_utf8(&mut [0; 4]).as_bytes());
            }
            prev_lower = c.is_lowercase();
        } else {
            word.emit(&mut f);
            prev_lower = false;
        }
    }
    word.emit(&mut f);
}

/// Strips a plural, `-ing`, `-ed` and a final `e`, in that order, when enough of the word stays.
pub fn stem(word: &str) -> &str {
    let mut w = word;
    if !w.is_ascii() || w.len() <= 3 {
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
