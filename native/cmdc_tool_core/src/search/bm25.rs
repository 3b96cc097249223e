//! Okapi BM25 over the weighted fields of `doc.rs`, term at a time. Per posting the exact
//! formula runs over the posting's own arrays (frequency and length side by side, so a block of
//! postings is scored in SIMD lanes), then adds into a per-thread score array indexed by slot
//! (the first term stores: every score is still zero). Sparse queries list the slots touched
//! as they are first reached and read back only those; dense ones read every score back in
//! slot order in one pass, a block at a time, each block's best against the top-k's floor
//! first. Either way the scores are the exact sums in term order ([`exhaustive`] in the tests
//! sorts every tool's). Nothing is allocated per query once a thread has scored one.

use std::cell::RefCell;

use super::index::{Index, Posting, Query};
use super::tokenize;
use super::top::Top;

const K1: f32 = 1.2;
const B: f32 = 0.75;
/// Postings scored per block (the block's scores sit on the stack, in cache).
const BLOCK: usize = 256;
/// With at least one posting per `DENSE` slots, every score is read back in slot order rather
/// than through a list of the slots touched.
const DENSE: usize = 8;
/// Slots read back per block in that case.
const DENSE_BLOCK: usize = 64; // a `u64` mask per block

/// Per-thread scratch: a score per slot (all zero between queries) and the slots touched.
#[derive(Default)]
struct Scratch {
    scores: Vec<f32>,
    touched: Vec<u32>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// The query's distinct known words as `(term id, idf)` (a word typed twice counts once),
/// the longest postings first: the first term's postings are only written, not read back.
fn terms(index: &Index, query: &Query, n: f32) -> Vec<(u32, f32)> {
    let mut ids: Vec<(u32, f32)> = Vec::new();
    tokenize::each_word(query.text, |w| {
        if let Some(id) = index.term(w) {
            if !ids.iter().any(|(i, _)| *i == id) {
                let df = index.postings[id as usize].len() as f32;
                ids.push((id, (1.0 + (n - df + 0.5) / (df + 0.5)).ln()));
            }
        }
    });
    // Rarest last (ties: query order), so the sums are the same for every equal document.
    ids.sort_by_key(|(id, _)| std::cmp::Reverse(index.postings[*id as usize].len()));
    ids
}

/// The per-query constants of BM25: `K1 * (1 - B + B * len / avg)` is `base + per_len * len`.
#[derive(Clone, Copy)]
struct Norm {
    base: f32,
    per_len: f32,
}

/// Scores `count` postings of `p` from `start` into `out` (SIMD lanes: no branch, no gather).
#[inline]
fn block(p: &Posting, start: usize, out: &mut [f32], scale: f32, norm: Norm) {
    let end = start + out.len();
    for ((o, tf), len) in out
        .iter_mut()
        .zip(&p.tf()[start..end])
        .zip(&p.lens()[start..end])
    {
        *o = scale * tf / (tf + norm.base + norm.per_len * len);
    }
}

/// Fills `top` with the best tools matching a word of the query and the filters.
pub(super) fn search<'i>(index: &'i Index, query: &Query, top: &mut Top<'i>) {
    let n = index.len() as f32;
    if n == 0.0 {
        return;
    }
    let avg = (index.total_len / f64::from(n)).max(1e-6) as f32;
    let norm = Norm {
        base: K1 * (1.0 - B),
        per_len: K1 * B / avg,
    };
    let ids = terms(index, query, n);
    if ids.is_empty() {
        return;
    }
    let filtered = !query.namespaces.is_empty() || !query.annotations.is_empty();
    let keep = |slot: u32| {
        !filtered
            || index.slots[slot as usize]
                .as_ref()
                .is_some_and(|s| Index::keeps(s, query))
    };
    let postings = |ids: &[(u32, f32)]| -> usize {
        ids.iter()
            .map(|(id, _)| index.postings[*id as usize].len())
            .sum()
    };
    SCRATCH.with(|cell| {
        let mut cell = cell.borrow_mut();
        let Scratch { scores, touched } = &mut *cell;
        if scores.len() < index.slots.len() {
            scores.resize(index.slots.len(), 0.0);
        }
        // Plain slices: the compiler keeps their bounds in registers through the loops.
        let scores = &mut scores[..index.slots.len()];
        if postings(&ids) * DENSE >= scores.len() {
            // Many postings for few slots: read every score back in order, without a list.
            accumulate(index, &ids, norm, scores, None);
            collect_dense(scores, top, keep);
            return;
        }
        let most = postings(&ids[1..]);
        if touched.len() < most {
            touched.resize(most, 0);
        }
        let count = accumulate(index, &ids, norm, scores, Some(&mut touched[..most]));
        // The first term's slots, then those the others reached first.
        collect(index.postings[ids[0].0 as usize].slots(), scores, top, keep);
        collect(&touched[..count], scores, top, keep);
    });
}

/// Offers each of `slots` with its score to `top` (when `keep` says it passes the filters),
/// and sets the score back to zero for the next query.
#[inline]
fn collect(slots: &[u32], scores: &mut [f32], top: &mut Top, keep: impl Fn(u32) -> bool) {
    for &slot in slots {
        let score = std::mem::take(&mut scores[slot as usize]);
        if top.could_take(score) && keep(slot) {
            top.offer(slot, score);
        }
    }
}

/// [`collect`] over every slot in one pass, a block at a time: the slots at or above the
/// current floor as a bit mask (compared in SIMD lanes), only those offered, then the block
/// cleared while it is in cache. Once the top holds `k`, the floor turns most blocks away
/// whole; copies of one tool put a tie in many blocks, and only those ties are visited.
fn collect_dense(scores: &mut [f32], top: &mut Top, keep: impl Fn(u32) -> bool) {
    for (b, block) in scores.chunks_mut(DENSE_BLOCK).enumerate() {
        // Any score at or above the floor? (Lanes compared at once, no reduction.) Most
        // blocks stop there; an all-zero one is cleared all the same (rare in a dense query).
        if any_at_least(block, top.floor().max(f32::MIN_POSITIVE)) {
            let mut mask = above(block, top.floor());
            while mask != 0 {
                let i = mask.trailing_zeros() as usize;
                mask &= mask - 1;
                let slot = (b * DENSE_BLOCK + i) as u32;
                if top.could_take(block[i]) && keep(slot) {
                    top.offer(slot, block[i]);
                }
            }
        }
        clear(block);
    }
}

/// Zeroes a block in place, inline: a `fill` of a block's 256 bytes is a call to `memset`
/// per block, ~1,600 calls a query at 100,000 tools.
#[inline]
fn clear(block: &mut [f32]) {
    match <&mut [f32; DENSE_BLOCK]>::try_from(&mut *block) {
        Ok(full) => {
            for quad in full.chunks_exact_mut(4) {
                zero4(quad);
            }
        }
        Err(_) => block.fill(0.0),
    }
}

/// Four zeros in one SSE store (x86-64 always has SSE2).
#[cfg(target_arch = "x86_64")]
#[inline]
fn zero4(quad: &mut [f32]) {
    use std::arch::x86_64::{_mm_setzero_ps, _mm_storeu_ps};
    assert!(quad.len() == 4);
    // SAFETY: SSE is part of the x86-64 baseline; the store writes the four floats of `quad`.
    unsafe { _mm_storeu_ps(quad.as_mut_ptr(), _mm_setzero_ps()) }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn zero4(quad: &mut [f32]) {
    quad.fill(0.0);
}

/// Whether any score of `block` is at or above `floor`: the block's lanes maxed in SSE
/// registers, compared with the floor at once.
#[cfg(target_arch = "x86_64")]
#[inline]
fn any_at_least(block: &[f32], floor: f32) -> bool {
    use std::arch::x86_64::{
        _mm_cmpge_ps, _mm_loadu_ps, _mm_max_ps, _mm_movemask_ps, _mm_set1_ps, _mm_setzero_ps,
    };
    let quads = block.chunks_exact(16);
    let rest = quads.remainder();
    // SAFETY: SSE is part of the x86-64 baseline; each load reads four floats of a chunk of
    // sixteen.
    let vector = unsafe {
        let (mut a, mut b, mut c, mut d) = (
            _mm_setzero_ps(),
            _mm_setzero_ps(),
            _mm_setzero_ps(),
            _mm_setzero_ps(),
        );
        for q in quads {
            let p = q.as_ptr();
            a = _mm_max_ps(a, _mm_loadu_ps(p));
            b = _mm_max_ps(b, _mm_loadu_ps(p.add(4)));
            c = _mm_max_ps(c, _mm_loadu_ps(p.add(8)));
            d = _mm_max_ps(d, _mm_loadu_ps(p.add(12)));
        }
        let m = _mm_max_ps(_mm_max_ps(a, b), _mm_max_ps(c, d));
        _mm_movemask_ps(_mm_cmpge_ps(m, _mm_set1_ps(floor))) != 0
    };
    vector || rest.iter().any(|&x| x >= floor)
}

#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn any_at_least(block: &[f32], floor: f32) -> bool {
    block.iter().any(|&x| x >= floor)
}

/// Bit `i` set when `block[i]` is a score (> 0) at or above `floor`.
#[inline]
fn above(block: &[f32], floor: f32) -> u64 {
    // Scores are > 0: a floor of at least the smallest positive float also drops the zeros.
    let floor = floor.max(f32::MIN_POSITIVE);
    let quads = block.chunks_exact(4);
    let done = block.len() - quads.remainder().len();
    let mut mask = 0u64;
    for (j, &x) in quads.remainder().iter().enumerate() {
        mask |= u64::from(x >= floor) << (done + j);
    }
    for (c, q) in quads.enumerate() {
        mask |= u64::from(above4([q[0], q[1], q[2], q[3]], floor)) << (4 * c);
    }
    mask
}

/// Four comparisons in one SSE instruction (x86-64 always has SSE2).
#[cfg(target_arch = "x86_64")]
#[inline]
fn above4(q: [f32; 4], floor: f32) -> u8 {
    use std::arch::x86_64::{_mm_cmpge_ps, _mm_movemask_ps, _mm_set1_ps, _mm_set_ps};
    // SAFETY: SSE is part of the x86-64 baseline, so these instructions always exist; they
    // read only their arguments.
    unsafe {
        let v = _mm_set_ps(q[3], q[2], q[1], q[0]);
        _mm_movemask_ps(_mm_cmpge_ps(v, _mm_set1_ps(floor))) as u8
    }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn above4(q: [f32; 4], floor: f32) -> u8 {
    q.iter()
        .enumerate()
        .fold(0, |m, (j, &x)| m | u8::from(x >= floor) << j)
}

/// Adds every query term's BM25 weight into `scores` (all zero on entry). With `touched`,
/// lists there the slots that only terms after the first reached, and returns how many.
fn accumulate(
    index: &Index,
    ids: &[(u32, f32)],
    norm: Norm,
    scores: &mut [f32],
    mut touched: Option<&mut [u32]>,
) -> usize {
    let mut out = [0f32; BLOCK];
    let mut count = 0;
    for (i, &(id, idf)) in ids.iter().enumerate() {
        let p = &index.postings[id as usize];
        let scale = idf * (K1 + 1.0);
        for start in (0..p.len()).step_by(BLOCK) {
            let out = &mut out[..BLOCK.min(p.len() - start)];
            block(p, start, out, scale, norm);
            let slots = &p.slots()[start..start + out.len()];
            match touched.as_deref_mut() {
                // Every score is still zero (0 + w is w, bit for bit): a store, no read.
                _ if i == 0 => set(slots, out, scores),
                None => add(slots, out, scores),
                Some(touched) => count = add_listing(slots, out, scores, touched, count),
            }
        }
    }
    count
}

/// `scores[slot] = w` for a block (each slot once: a posting list names a slot once).
#[inline]
fn set(slots: &[u32], weights: &[f32], scores: &mut [f32]) {
    for (slot, w) in slots.iter().zip(weights) {
        let slot = *slot as usize;
        debug_assert!(slot < scores.len());
        // SAFETY: as in `add`.
        unsafe { *scores.get_unchecked_mut(slot) = *w };
    }
}

/// `scores[slot] += w` for a block.
#[inline]
fn add(slots: &[u32], weights: &[f32], scores: &mut [f32]) {
    for (slot, w) in slots.iter().zip(weights) {
        let slot = *slot as usize;
        debug_assert!(slot < scores.len());
        // SAFETY: a posting names a slot of the index (`Index::insert`; `slots` never
        // shrinks) and `scores` has a score per slot (`search`).
        unsafe { *scores.get_unchecked_mut(slot) += w };
    }
}

/// [`add`], listing in `touched` (from `count`) each slot reached for the first time.
#[inline]
fn add_listing(
    slots: &[u32],
    weights: &[f32],
    scores: &mut [f32],
    touched: &mut [u32],
    mut count: usize,
) -> usize {
    debug_assert!(count + slots.len() <= touched.len());
    for (slot, w) in slots.iter().zip(weights) {
        let slot = *slot as usize;
        debug_assert!(slot < scores.len());
        // SAFETY: a posting names a slot of the index (`Index::insert`; `slots` never
        // shrinks) and `scores` has a score per slot (`search`); `count` grows at most once
        // per posting after the first term's, and `touched` holds that many.
        unsafe {
            let score = scores.get_unchecked_mut(slot);
            // Listed when first reached (weights are > 0), without a branch.
            *touched.get_unchecked_mut(count) = slot as u32;
            count += usize::from(*score == 0.0);
            *score += w;
        }
    }
    count
}

/// Every live tool scored one by one (its postings found through its own terms), sorted
/// whole: what [`search`] must return, for the tests.
#[cfg(test)]
pub(super) fn exhaustive(index: &Index, query: &Query) -> Vec<super::index::Hit> {
    let n = index.len() as f32;
    if n == 0.0 {
        return Vec::new();
    }
    let avg = (index.total_len / f64::from(n)).max(1e-6) as f32;
    let norm = Norm {
        base: K1 * (1.0 - B),
        per_len: K1 * B / avg,
    };
    let ids = terms(index, query, n);
    let mut hits: Vec<(f32, &str)> = Vec::new();
    for s in index.slots.iter().flatten() {
        if !Index::keeps(s, query) {
            continue;
        }
        let mut score = 0f32;
        for &(id, idf) in &ids {
            if let Some(&(_, at)) = s.terms.iter().find(|(t, _)| *t == id) {
                let p = &index.postings[id as usize];
                let at = at as usize;
                let (tf, len) = (p.tf()[at], p.lens()[at]);
                score += idf * (K1 + 1.0) * tf / (tf + norm.base + norm.per_len * len);
            }
        }
        if score > 0.0 {
            hits.push((score, s.name.as_str()));
        }
    }
    hits.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
    hits.truncate(query.limit.min(super::index::MAX_LIMIT));
    hits.into_iter()
        .map(|(score, name)| super::index::Hit {
            name: name.to_owned(),
            score: f64::from(score),
        })
        .collect()
}
