//! The best `k` candidates of a search, gathered while candidates stream by: a heap of the k
//! best *scores* (plain integers, no names) gives the floor below which nothing can enter, so
//! most candidates are turned away by one comparison; those at or above the floor when they
//! came are kept aside, and only at the end are names read to order them (score, then name,
//! so ties are stable). The floor's ties, hundreds when a catalog holds copies of a tool, go
//! through a bounded heap of names (one comparison each, their cache lines fetched together).

use std::cell::RefCell;
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

/// The buffers of the last finished search on this thread, reused by the next (a search then
/// allocates only its hits' names).
#[derive(Default)]
struct Spare {
    best: Vec<Reverse<u32>>,
    kept: Vec<(f32, u32)>,
    tied: Vec<u32>,
}

thread_local! {
    static SPARE: RefCell<Spare> = RefCell::new(Spare::default());
}

impl<'i> Top<'i> {
    pub(super) fn new(index: &'i Index, k: usize) -> Self {
        let k = k.max(1);
        let (mut best, mut kept) = SPARE.with(|s| {
            let mut s = s.borrow_mut();
            (std::mem::take(&mut s.best), std::mem::take(&mut s.kept))
        });
        best.clear();
        best.reserve(k + 1);
        kept.clear();
        kept.reserve(2 * k);
        Top {
            index,
            k,
            best: BinaryHeap::from(best),
            kept,
            floor: f32::NEG_INFINITY,
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
        if self.best.len() < self.k {
            self.best.push(Reverse(key(score)));
        } else if let Some(mut lowest) = self.best.peek_mut() {
            // Above the floor: it replaces the k-th (one sift, not a push and a pop).
            *lowest = Reverse(key(score));
        }
        if self.best.len() == self.k {
            self.floor = self
                .best
                .peek()
                .map_or(f32::NEG_INFINITY, |Reverse(k)| f32_of(*k));
        }
    }

    /// The best `k` as `(score, slot)`, best first, ties by name: a ranking to fuse with
    /// another (`fuse.rs`) before any name is copied.
    pub(super) fn into_ranked(self) -> Vec<(f32, u32)> {
        let index = self.index;
        let name = |slot: u32| index.slots[slot as usize].as_ref().map_or("", |s| &s.name);
        let mut kept = self.kept;
        kept.retain(|&(score, _)| score >= self.floor);
        kept.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then_with(|| name(a.1).cmp(name(b.1))));
        kept.truncate(self.k);
        kept
    }

    /// The best `k` as hits, best first, ties by name. Those above the floor are fewer than
    /// `k`; the floor's ties (copies of one tool: hundreds) fill the rest, by name, through a
    /// bounded heap: one name comparison per tie for most of them.
    pub(super) fn into_hits(self) -> Vec<Hit> {
        let (floor, index, k) = (self.floor, self.index, self.k);
        let slot_of = |slot: u32| index.slots[slot as usize].as_ref();
        let mut hits: Vec<(f32, &str)> = Vec::with_capacity(k);
        let mut tied = SPARE.with(|s| std::mem::take(&mut s.borrow_mut().tied));
        tied.clear();
        for &(score, slot) in &self.kept {
            if score > floor {
                hits.extend(slot_of(slot).map(|s| (score, s.name.as_str())));
            } else if score == floor {
                tied.push(slot);
            }
        }
        if tied.len() > k {
            // Names of scattered tools: ask for all of them before reading one, so the cache
            // misses overlap rather than follow each other.
            tied.iter()
                .for_each(|&s| prefetch(&index.slots[s as usize]));
            tied.iter()
                .filter_map(|&s| slot_of(s))
                .for_each(|s| prefetch(s.name.as_ptr()));
        }
        let mut ties: BinaryHeap<&str> = BinaryHeap::with_capacity(k.min(tied.len()));
        for n in tied
            .iter()
            .filter_map(|&s| slot_of(s).map(|s| s.name.as_str()))
        {
            if ties.len() < k {
                ties.push(n);
            } else if let Some(mut last) = ties.peek_mut() {
                if n < *last {
                    *last = n;
                }
            }
        }
        hits.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
        hits.truncate(k);
        let mut ties = ties.into_sorted_vec();
        ties.truncate(k - hits.len());
        let found = hits
            .into_iter()
            .chain(ties.into_iter().map(|n| (floor, n)))
            .map(|(score, name)| Hit {
                name: name.to_owned(),
                score: f64::from(score),
            })
            .collect();
        let (best, kept) = (self.best.into_vec(), self.kept);
        // A search that kept a great many candidates does not leave them allocated.
        if kept.capacity() <= 1 << 16 && tied.capacity() <= 1 << 16 {
            SPARE.with(|s| *s.borrow_mut() = Spare { best, kept, tied });
        }
        found
    }
}

/// Asks the CPU to bring `p`'s cache line in (a hint: no effect on what the program computes).
#[inline]
fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults and reads nothing the program sees, whatever the address.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// The inverse of [`key`].
fn f32_of(key: u32) -> f32 {
    f32::from_bits(if key >> 31 == 1 {
        key & !(1 << 31)
    } else {
        !key
    })
}
