//! Words for the search index: tool names split on `_ . -` and case changes (`readFile`,
//! `read_file` and `read-file` give the same words), lower-cased, common English words dropped,
//! and a light suffix stripping so that `files`, `listing` and `created` meet `file`, `list`
//! and `create`. The same function reads tools and queries, so both sides always agree.

/// Words that say nothing about what a tool does.
const STOPWORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "for", "from", "given", "has",
    "have", "how", "i", "if", "in", "into", "is", "it", "its", "me", "my", "of", "on", "or",
    "that", "the", "their", "then", "this", "to", "tool", "use", "using", "want", "was", "what",
    "when", "which", "will", "with", "you", "your",
];

/// At most this many bytes of one word are kept (a 10 kB "word" is not a word).
const MAX_WORD: usize = 64;

/// Calls `f` with each word of `text`, in order (repeats included).
pub fn each_word(text: &str, mut f: impl FnMut(&str)) {
    let mut word = String::with_capacity(16);
    let mut prev: Option<char> = None;
    for c in text.chars() {
        if c.is_alphanumeric() {
            // A case change starts a word: `readFile` → `read`, `file`; `HTTPServer` → `httpserver`
            // stays whole (upper after upper), as models write it.
            let boundary = matches!(prev, Some(p) if p.is_lowercase() && c.is_uppercase());
            if boundary {
                emit(&mut word, &mut f);
            }
            word.extend(c.to_lowercase());
            prev = Some(c);
        } else {
            emit(&mut word, &mut f);
            prev = None;
        }
    }
    emit(&mut word, &mut f);
}

fn emit(word: &mut String, f: &mut impl FnMut(&str)) {
    if !word.is_empty() && word.len() <= MAX_WORD && !STOPWORDS.contains(&word.as_str()) {
        f(stem(word));
    }
    word.clear();
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
