//! Hybrid retrieval: the BM25 ranking and the dense ranking, each to a depth, fused by
//! reciprocal rank (RRF, Cormack et al. 2009): a tool's score is `Σ 1 / (K + rank)` over the
//! rankings that hold it. Ranks rather than scores, so BM25's unbounded scores and cosines
//! need no common scale; a tool found by both outranks one found by either alone. `K = 60` is
//! the paper's constant, not tuned on any evaluation set here.

use super::index::{Index, Mode, Query, MAX_LIMIT};
use super::top::Top;
use super::{bm25, dense};

/// RRF's constant: larger flattens the difference between ranks.
const K: f32 = 60.0;
/// Each ranking is read to this depth at least (deeper when more hits are asked).
const DEPTH: usize = 50;

/// Fills `top` with the fused ranking. Without a query vector or stored vectors, it is the
/// BM25 ranking.
pub(super) fn search<'i>(index: &'i Index, query: &Query, top: &mut Top<'i>) {
    let depth = (4 * query.limit).clamp(DEPTH, MAX_LIMIT);
    let mut lexical = Top::new(index, depth);
    bm25::search(index, query, &mut lexical);
    if query.vector.is_none() || index.vector_count() == 0 {
        for (score, slot) in lexical.into_ranked() {
            top.offer(slot, score);
        }
        return;
    }
    let mut semantic = Top::new(index, depth);
    dense::search(
        index,
        &Query {
            mode: Mode::Dense,
            ..query.clone()
        },
        &mut semantic,
    );
    let (lexical, semantic) = (lexical.into_ranked(), semantic.into_ranked());
    let mut shares: Vec<(u32, f32)> = [&lexical, &semantic]
        .iter()
        .flat_map(|ranking| {
            ranking
                .iter()
                .enumerate()
                .map(|(rank, &(_, slot))| (slot, 1.0 / (K + rank as f32 + 1.0)))
        })
        .collect();
    // A tool in both rankings: its two shares side by side, summed.
    shares.sort_unstable_by_key(|&(slot, _)| slot);
    let mut fused: Vec<(u32, f32)> = Vec::with_capacity(shares.len());
    for (slot, share) in shares {
        match fused.last_mut() {
            Some((last, score)) if *last == slot => *score += share,
            _ => fused.push((slot, share)),
        }
    }
    for (slot, score) in fused {
        top.offer(slot, score);
    }
}
