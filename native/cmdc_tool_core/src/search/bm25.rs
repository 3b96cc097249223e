//! Okapi BM25 over the weighted fields of `doc.rs`. Scores accumulate in a per-thread scratch
//! array indexed by slot (reset only where touched); lengths are read from a dense array, so
//! a posting costs a few arithmetic operations and no pointer chase.

use std::cell::RefCell;

use super::index::{Index, Query};
use super::tokenize;

const K1: f32 = 1.2;
const B: f32 = 0.75;

thread_local! {
    static SCRATCH: RefCell<(Vec<f32>, Vec<u32>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

/// `(slot, score)` of every tool matching a word of the query and the filters.
pub(super) fn search(index: &Index, query: &Query) -> Vec<(u32, f32)> {
    let n = index.len() as f32;
    if n == 0.0 {
        return Vec::new();
    }
    let avg = (index.total_len / f64::from(n)).max(1e-6) as f32;
    // Distinct query words: a word typed twice does not count twice.
    let mut ids: Vec<u32> = Vec::new();
    tokenize::each_word(query.text, |w| {
        if let Some(id) = index.terms.get(w) {
            if !ids.contains(id) {
                ids.push(*id);
            }
        }
    });
    let filtered = !query.namespaces.is_empty() || !query.annotations.is_empty();
    SCRATCH.with(|cell| {
        let mut cell = cell.borrow_mut();
        let (scores, touched) = &mut *cell;
        if scores.len() < index.lens.len() {
            scores.resize(index.lens.len(), 0.0);
        }
        for id in ids {
            let p = &index.postings[id as usize];
            let df = p.slots.len() as f32;
            let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
            for (slot, tf) in p.slots.iter().zip(&p.tf) {
                let len = index.lens[*slot as usize];
                let score = &mut scores[*slot as usize];
                if *score == 0.0 {
                    touched.push(*slot);
                }
                *score += idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * len / avg));
            }
        }
        let mut out = Vec::with_capacity(touched.len());
        for slot in touched.drain(..) {
            let score = std::mem::take(&mut scores[slot as usize]);
            let keep = !filtered
                || index.slots[slot as usize]
                    .as_ref()
                    .is_some_and(|s| Index::keeps(s, query));
            if score > 0.0 && keep {
                out.push((slot, score));
            }
        }
        out
    })
}
