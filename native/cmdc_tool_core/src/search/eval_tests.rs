//! The index against a straightforward reference on the evaluation corpus
//! (`bench/search_eval/`): the old tokenizer (one `String` per word, a stop-word list),
//! and BM25 scored document by document from each tool's words, with no postings, blocks or
//! top-k heap. Scores must agree to float rounding and rankings exactly, after removals and
//! re-additions too.

use std::collections::HashMap;

use serde_json::Value;

use super::*;

const STOPWORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "for", "from", "given", "has",
    "have", "how", "i", "if", "in", "into", "is", "it", "its", "me", "my", "of", "on", "or",
    "that", "the", "their", "then", "this", "to", "tool", "use", "using", "want", "was", "what",
    "when", "which", "will", "with", "you", "your",
];

/// The tokenizer as first written: chars, `to_lowercase`, a `String` per word.
fn reference_words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut prev: Option<char> = None;
    let emit = |word: &mut String, out: &mut Vec<String>| {
        if !word.is_empty() && word.len() <= 64 && !STOPWORDS.contains(&word.as_str()) {
            out.push(tokenize::stem(word).to_owned());
        }
        word.clear();
    };
    for c in text.chars() {
        if c.is_alphanumeric() {
            if matches!(prev, Some(p) if p.is_lowercase() && c.is_uppercase()) {
                emit(&mut word, &mut out);
            }
            word.extend(c.to_lowercase());
            prev = Some(c);
        } else {
            emit(&mut word, &mut out);
            prev = None;
        }
    }
    emit(&mut word, &mut out);
    out
}

/// `(name, description, parameters)` of each tool of the evaluation set.
type Tools = Vec<(String, String, Value)>;

/// `None` (with the reason printed) when the evaluation set is not in this checkout.
fn corpus() -> Option<(Tools, Vec<String>)> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../bench/search_eval");
    let (Ok(tools), Ok(queries)) = (
        std::fs::read_to_string(format!("{dir}/tools.json")),
        std::fs::read_to_string(format!("{dir}/queries.tsv")),
    ) else {
        eprintln!("skipped: {dir} is not readable");
        return None;
    };
    let tools: Vec<Value> = serde_json::from_str(&tools).expect("tools.json");
    let tools = tools
        .iter()
        .map(|t| {
            let s = |k: &str| t[k].as_str().unwrap_or("").to_owned();
            (
                format!("{}__{}", s("server"), s("name")),
                s("description"),
                t["parameters"].clone(),
            )
        })
        .collect();
    let queries = queries
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| l.split('\t').next().unwrap_or("").to_owned())
        .collect();
    Some((tools, queries))
}

fn doc<'a>(name: &'a str, description: &'a str, parameters: &'a Value) -> Doc<'a> {
    Doc {
        name,
        title: None,
        description,
        parameters,
        namespace: name.split_once("__").map(|(ns, _)| ns),
        annotations: &[],
    }
}

/// BM25 document by document, in f64: `(name, score)` best first, ties by name; only tools of
/// `namespace` when given (scores stay those of the whole catalog).
fn reference_search(
    docs: &[Prepared],
    query: &str,
    limit: usize,
    namespace: Option<&str>,
) -> Vec<(String, f64)> {
    let (k1, b) = (1.2f64, 0.75f64);
    let n = docs.len() as f64;
    let avg = docs.iter().map(|d| f64::from(d.len)).sum::<f64>() / n;
    let tf: Vec<HashMap<&str, f64>> = docs
        .iter()
        .map(|d| d.words.iter().map(|(w, x, _)| (w, f64::from(x))).collect())
        .collect();
    let mut words = reference_words(query);
    let mut seen = Vec::new();
    words.retain(|w| {
        !seen.contains(w) && {
            seen.push(w.clone());
            true
        }
    });
    let idf: HashMap<&str, f64> = words
        .iter()
        .map(|w| {
            let df = tf.iter().filter(|t| t.contains_key(w.as_str())).count() as f64;
            (w.as_str(), (1.0 + (n - df + 0.5) / (df + 0.5)).ln())
        })
        .collect();
    let mut hits: Vec<(String, f64)> = docs
        .iter()
        .zip(&tf)
        .map(|(d, tfs)| {
            let score = words
                .iter()
                .filter_map(|w| tfs.get(w.as_str()).map(|x| (idf[w.as_str()], *x)))
                .map(|(idf, x)| {
                    let len = f64::from(d.len);
                    idf * x * (k1 + 1.0) / (x + k1 * (1.0 - b + b * len / avg))
                })
                .sum::<f64>();
            (d.name.clone(), score)
        })
        .filter(|(name, s)| {
            *s > 0.0 && namespace.is_none_or(|ns| name.split_once("__").is_some_and(|n| n.0 == ns))
        })
        .collect();
    hits.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    hits.truncate(limit);
    hits
}

/// Same names in the same order, except among scores closer than rounding can tell apart.
fn assert_same(query: &str, got: &[Hit], want: &[(String, f64)]) {
    assert_eq!(got.len(), want.len(), "{query}: {got:?} vs {want:?}");
    for (i, (g, (name, score))) in got.iter().zip(want).enumerate() {
        let tolerance = 1e-5 * score.abs().max(1.0);
        assert!(
            (g.score - score).abs() <= tolerance,
            "{query} #{i}: {g:?} vs {score}"
        );
        if g.name != *name {
            let theirs = want.iter().find(|(n, _)| *n == g.name).map(|w| w.1);
            assert!(
                theirs.is_some_and(|s| (s - score).abs() <= tolerance),
                "{query} #{i}: {} (ours) vs {name} (reference)",
                g.name
            );
        }
    }
}

/// Random texts over the characters that steer the tokenizer (case changes, digits,
/// separators, stop words, suffixes, non-ASCII letters and symbols), long enough to cross the
/// 64-byte blocks of the ASCII path in every position, read as the reference reads them.
#[test]
fn the_tokenizer_reads_random_texts_as_the_reference_does() {
    const PIECES: [&str; 24] = [
        "a", "Z", "q", "9", " ", "_", "-", ".", "the", "Files", "ing", "ies", "ed", "readFile",
        "HTTP", "x2Y", "é", "İ", "ß", "→", "🙂", "\n", "ss", "abcdefgh",
    ];
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n as u64) as usize
    };
    let long = "w".repeat(70);
    for _ in 0..20_000 {
        let mut text = String::new();
        for _ in 0..next(120) {
            match next(40) {
                0 => text.push_str(&long),
                i if i < PIECES.len() => text.push_str(PIECES[i]),
                _ => text.push_str(PIECES[next(8)]),
            }
        }
        assert_eq!(tokenize::words(&text), reference_words(&text), "{text:?}");
    }
}

#[test]
fn the_tokenizer_reads_every_text_as_the_reference_does() {
    let Some((tools, queries)) = corpus() else {
        return;
    };
    let mut texts: Vec<String> = queries;
    for (name, description, params) in &tools {
        texts.push(name.clone());
        texts.push(description.clone());
        texts.push(params.to_string());
    }
    texts.extend(
        [
            "getHTTPStatus readFile XMLHttpRequest",
            "Größe ändern ÀÉÎ İstanbul ǅemal ΣΊΣΥΦΟΣ",
            "日本語のテキスト 한국어 émoji🙂mixed ﬁle",
            &"x".repeat(70),
            &format!("{}é tail", "a".repeat(63)),
        ]
        .map(str::to_owned),
    );
    for text in &texts {
        assert_eq!(tokenize::words(text), reference_words(text), "{text}");
    }
}

/// Three copies of each tool (ties broken by name), a third of them removed and re-added,
/// plus `fillers` tools whose words no query uses; every query compared with the reference.
fn compare_with_reference(fillers: usize) {
    let Some((tools, queries)) = corpus() else {
        return;
    };
    let empty = Value::Null;
    let filler = "Lorem ipsum dolor sit amet".to_owned();
    let mut named: Vec<(String, &String, &Value)> = (0..3 * tools.len())
        .map(|i| {
            let (name, description, params) = &tools[i % tools.len()];
            (format!("{name}_{}", i / tools.len()), description, params)
        })
        .collect();
    named.extend((0..fillers).map(|i| (format!("zz__lorem_{i}"), &filler, &empty)));
    let mut index = Index::new();
    for (name, description, params) in &named {
        index.put(&doc(name, description, params));
    }
    for (name, _, _) in named.iter().step_by(3) {
        assert!(index.remove(name));
    }
    for (name, description, params) in named.iter().step_by(3) {
        index.put(&doc(name, description, params));
    }
    let prepared: Vec<Prepared> = named
        .iter()
        .map(|(n, d, p)| doc(n, d, p).prepare())
        .collect();
    let search = |text, limit, namespaces: &[String]| {
        index
            .search(&Query {
                text,
                mode: Mode::Bm25,
                limit,
                namespaces,
                annotations: &[],
                vector: None,
            })
            .unwrap()
    };
    for query in &queries {
        let want = reference_search(&prepared, query, 50, None);
        for limit in [1, 10, 50] {
            let got = search(query, limit, &[]);
            assert_same(query, &got, &want[..limit.min(want.len())]);
        }
        // Filtered to the namespace of the best hit: the floor is then not seeded.
        let Some(ns) = want.first().and_then(|w| w.0.split_once("__")).map(|n| n.0) else {
            continue;
        };
        let got = search(query, 10, &[ns.to_owned()]);
        assert_same(
            query,
            &got,
            &reference_search(&prepared, query, 10, Some(ns)),
        );
    }
}

/// Queries reach many of the tools: scores are read back slot by slot.
#[test]
fn bm25_ranks_the_evaluation_set_as_the_reference_does() {
    compare_with_reference(0);
}

/// Queries reach few of the tools: scores are read back through the list of slots touched.
#[test]
fn bm25_ranks_a_sparse_catalog_as_the_reference_does() {
    compare_with_reference(4_000);
}
