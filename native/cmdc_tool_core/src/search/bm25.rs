//! Okapi BM25 over the weighted fields of `doc.rs`. Scores accumulate in a per-thread scratch
//! array indexed by slot (reset only where touched), so a query allocates only its hits.

use std::cell::RefCell;

use super::{tokenize, Hit, Index, Query};

const K1: f32 = 1.2;
const B: f32 = 0.75;

thread_local! {
    static SCRATCH: RefCell<(Vec<f32>, Vec<u32>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

pub(super) fn search(index: &Index, query: &Query) -> Vec<Hit> {
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
    SCRATCH.with(|cell| {
        let mut cell = cell.borrow_mut();
        let (scores, touched) = &mut *cell;
        if scores.len() < index.slots.len() {
            scores.resize(index.slots.len(), 0.0);
        }
        for id in ids {
            let p = &index.postings[id as usize];
            let df = p.slots.len() as f32;
            if df == 0.0 {
                continue;
            }
            let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
            for (slot, tf) in p.slots.iter().zip(&p.tf) {
                let Some(s) = &index.slots[*slot as usize] else {
                    continue;
                };
                let norm = K1 * (1.0 - B + B * s.len / avg);
                let score = &mut scores[*slot as usize];
                if *score == 0.0 {
                    touched.push(*slot);
                }
                *score += idf * tf * (K1 + 1.0) / (tf + norm);
            }
        }
        let mut hits = Vec::with_capacity(touched.len().min(query.limit.saturating_mul(4)));
        for slot in touched.drain(..) {
            let score = std::mem::take(&mut scores[slot as usize]);
            if let Some(s) = &index.slots[slot as usize] {
                if score > 0.0 && Index::keeps(s, query) {
                    hits.push(Hit {
                        name: s.name.clone(),
                        score: f64::from(score),
                    });
                }
            }
        }
        hits
    })
}
