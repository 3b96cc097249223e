//! The best `k` candidates of a search, gathered while candidates stream by: a heap of the k
//! best *scores* (plain integers, no names) gives the floor below which nothing can enter, so
//! most candidates are turned away by one comparison; those at or above the floor when they
//! came are kept aside, and only at the end are names read to order them (score, then name,
//! so ties are stable).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::index::{Hit, Index};

/// A key that orders like `f32::total_cmp`.
fn key(score: f32) -> u32 {
    let bits = score.to_bits();
    if bits >> 31 == 1 {
        !bits
    } else {
        bits | 1 << 31
    }
}

/// The best `k` so far.
pub(super) struct Top<'i> {
    index: &'i Index,
    k: usize,
    /// The k best keys seen, lowest on top.
    best: BinaryHeap<Reverse<u32>>,
    /// Every candidate that was at or above the floor when offered.
    kept: Vec<(f32, u32)>,
    /// The k-th best score once `k` were offered (below it nothing enters), else −∞.
    floor: f32,
}

impl<'i> Top<'i> {
    pub(super) fn new(index: &'i Index, k: usize) -> Self {
        let k = k.max(1);
        Top {
            index,
            k,
            best: BinaryHeap::with_capacity(k + 1),
            kept: Vec::with_capacity(2 * k),
            floor: f32::NEG_INFINITY,
        }
    }

    /// How many are kept.
    pub(super) fn k(&self) -> usize {
        self.k
    }

    /// Raises the floor to `floor`, known to be at most the k-th best score to come.
    pub(super) fn raise_floor(&mut self, floor: f32) {
        if floor > self.floor {
            self.floor = floor;
        }
    }

    /// The current floor (−∞ until `k` were offered or a floor was raised).
    pub(super) fn floor(&self) -> f32 {
        self.floor
    }

    /// Whether a candidate of this score could enter (ties may, by name).
    #[inline]
    pub(super) fn could_take(&self, score: f32) -> bool {
        score >= self.floor
    }

    /// Offers `slot` with `score` (the caller has applied the query's filters).
    pub(super) fn offer(&mut self, slot: u32, score: f32) {
        if !self.could_take(score) {
            return;
        }
        self.kept.push((score, slot));
        if score == self.floor && self.best.len() == self.k {
            // A tie with the k-th: the floor stays; names decide at the end.
            return;
        }
        self.best.push(Reverse(key(score)));
        if self.best.len() > self.k {
            self.best.pop();
        }
        if self.best.len() == self.k {
            self.floor = self
                .best
                .peek()
                .map_or(f32::NEG_INFINITY, |Reverse(k)| f32_of(*k));
        }
    }

    /// The best `k` as hits, best first, ties by name.
    pub(super) fn into_hits(self) -> Vec<Hit> {
        let floor = self.floor;
        let mut hits: Vec<(f32, &str)> = self
            .kept
            .into_iter()
            .filter(|(score, _)| *score >= floor)
            .filter_map(|(score, slot)| {
                let s = self.index.slots[slot as usize].as_ref()?;
                Some((score, s.name.as_str()))
            })
            .collect();
        let order = |a: &(f32, &str), b: &(f32, &str)| b.0.total_cmp(&a.0).then(a.1.cmp(b.1));
        if hits.len() > self.k {
            // Many ties at the floor (copies of one tool): pick the k first, sort only those.
            hits.select_nth_unstable_by(self.k - 1, order);
            hits.truncate(self.k);
        }
        hits.sort_unstable_by(order);
        hits.into_iter()
            .map(|(score, name)| Hit {
                name: name.to_owned(),
                score: f64::from(score),
            })
            .collect()
    }
}

/// The inverse of [`key`].
fn f32_of(key: u32) -> f32 {
    f32::from_bits(if key >> 31 == 1 {
        key & !(1 << 31)
    } else {
        !key
    })
}
