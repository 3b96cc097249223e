//! The search's shortcuts (the top-k floor, the one-pass read-back in slot order, ties named
//! through a bounded heap) against [`super::bm25::exhaustive`], which scores every tool and
//! sorts them all: over random catalogs with many exact ties (copies of a tool), random
//! queries, limits and filters, after removals and re-additions, the hits must be the same
//! names with the same scores, in the same order.

use serde_json::{json, Value};

use super::*;

use crate::test_rng::Rng;

const WORDS: &[&str] = &[
    "file",
    "read",
    "write",
    "list",
    "directory",
    "commit",
    "branch",
    "issue",
    "search",
    "query",
    "weather",
    "forecast",
    "order",
    "invoice",
    "refund",
    "customer",
    "memory",
    "graph",
    "node",
    "page",
    "browser",
    "click",
    "image",
    "resize",
    "table",
    "row",
    "column",
    "message",
];
const NAMESPACES: &[&str] = &["fs", "git", "crm", "web"];
const HINTS: &[&str] = &["readOnlyHint", "destructiveHint"];

/// One random tool: `(name, description, parameters, namespace, annotations)`.
type Tool = (String, String, Value, String, Vec<String>);

fn words(rng: &mut Rng, most: usize) -> Vec<&'static str> {
    (0..1 + rng.below(most))
        .map(|_| WORDS[rng.below(WORDS.len())])
        .collect()
}

/// A catalog of `distinct` tools, each repeated `copies` times under numbered names (copies
/// tie exactly, as the benchmark's repeated corpus does).
fn catalog(rng: &mut Rng, distinct: usize, copies: usize) -> Vec<Tool> {
    let base: Vec<Tool> = (0..distinct)
        .map(|i| {
            let ns = NAMESPACES[rng.below(NAMESPACES.len())];
            let name = format!("{ns}__{}_{i}", words(rng, 2).join("_"));
            let param = WORDS[rng.below(WORDS.len())];
            let hints = HINTS
                .iter()
                .filter(|_| rng.below(2) == 0)
                .map(|h| h.to_string())
                .collect();
            let params = json!({"properties": {param: {"description": words(rng, 4).join(" ")}}});
            // A word of its own (`zq7`): queries naming it read few postings (the read-back
            // through the list of slots reached rather than in slot order).
            let description = format!("{} zq{i}", words(rng, 8).join(" "));
            (name, description, params, ns.to_owned(), hints)
        })
        .collect();
    (0..copies)
        .flat_map(|c| {
            base.iter().map(move |(n, d, p, ns, h)| {
                (
                    format!("{n}_c{c}"),
                    d.clone(),
                    p.clone(),
                    ns.clone(),
                    h.clone(),
                )
            })
        })
        .collect()
}

fn put(index: &mut Index, t: &Tool) {
    index.put(&Doc {
        name: &t.0,
        title: None,
        description: &t.1,
        parameters: &t.2,
        namespace: Some(&t.3),
        annotations: &t.4,
    });
}

/// Random queries against `index`, each compared with the exhaustive ranking.
fn compare(rng: &mut Rng, index: &Index, queries: usize) {
    for _ in 0..queries {
        let mut text = words(rng, 4).join(" ");
        if rng.below(5) == 0 {
            text.push_str(" unknownword");
        }
        if rng.below(3) == 0 {
            text = format!("zq{} {text}", rng.below(300));
        }
        let namespaces: Vec<String> = match rng.below(4) {
            0 => vec![NAMESPACES[rng.below(NAMESPACES.len())].to_owned()],
            1 => vec!["fs".into(), "crm".into()],
            _ => Vec::new(),
        };
        let annotations: Vec<String> = match rng.below(4) {
            0 => vec!["read_only".into()],
            _ => Vec::new(),
        };
        let query = Query {
            text: &text,
            mode: Mode::Bm25,
            limit: [1, 3, 10, 10, 25, 1_000][rng.below(6)],
            namespaces: &namespaces,
            annotations: &annotations,
            vector: None,
        };
        let got = index.search(&query).expect("a valid query");
        let want = bm25::exhaustive(index, &query);
        assert_eq!(got, want, "query {query:?} over {} tools", index.len());
    }
}

#[test]
fn search_returns_what_scoring_every_tool_returns() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    // Sizes on both sides of the slot-order read-back's density rule, ties from 1 to 40 copies.
    for (distinct, copies) in [
        (1, 1),
        (5, 1),
        (12, 3),
        (40, 10),
        (60, 40),
        (300, 2),
        (25, 1),
    ] {
        let tools = catalog(&mut rng, distinct, copies);
        let mut index = Index::new();
        for t in &tools {
            put(&mut index, t);
        }
        compare(&mut rng, &index, 60);

        // Remove a random third (slots freed, postings swapped), compare, re-add them (slots
        // reused in another order), compare again.
        let removed: Vec<&Tool> = tools.iter().filter(|_| rng.below(3) == 0).collect();
        for t in &removed {
            assert!(index.remove(&t.0));
        }
        compare(&mut rng, &index, 40);
        for t in removed.iter().rev() {
            put(&mut index, t);
        }
        compare(&mut rng, &index, 40);
    }
}
