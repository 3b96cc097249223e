//! The index's data: tools in slots, postings per term, and the incremental `put`/`remove`
//! that touch only a tool's own words. Searching it is `find.rs` (over `bm25.rs` and
//! `regex.rs`, which read these fields).

use std::hash::BuildHasher;

use hashbrown::HashTable;

use super::doc::{annotation_key, passage, Doc, Prepared};
use super::hash::{Keyed, Map};
use super::tokenize;
use super::vectors::{Probe, Vectors};
use crate::error::{Error, Result};

/// Longest query accepted: longer text is a document, not a query.
pub const MAX_QUERY: usize = 4_096;
/// Longest regex accepted (Anthropic's rule for its regex tool search).
pub const MAX_PATTERN: usize = 200;
/// Most hits one search returns.
pub const MAX_LIMIT: usize = 1_000;

/// How a query is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Natural language, ranked by BM25.
    Bm25,
    /// A regular expression (case-insensitive, linear time) over name, title, description and
    /// parameters; tools whose name matches rank first.
    Regex,
    /// The query's vector ([`Query::vector`]) against the tools' ([`Index::set_vector`]), by
    /// cosine; tools without a vector are not found.
    Dense,
    /// BM25 and dense rankings fused by reciprocal rank (`fuse.rs`); without a query vector,
    /// BM25 alone.
    Hybrid,
}

/// One search.
#[derive(Debug, Clone)]
pub struct Query<'q> {
    pub text: &'q str,
    pub mode: Mode,
    pub limit: usize,
    /// Keep only tools of one of these namespaces (servers); empty: all.
    pub namespaces: &'q [String],
    /// Keep only tools with every one of these annotations true (`read_only`, `readOnlyHint`).
    pub annotations: &'q [String],
    /// The query's embedding, for [`Mode::Dense`] and [`Mode::Hybrid`].
    pub vector: Option<&'q Probe>,
}

/// A found tool.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub name: String,
    pub score: f64,
}

/// One indexed tool.
#[derive(Debug)]
pub(super) struct Slot {
    pub(super) name: String,
    pub(super) namespace: Option<String>,
    /// Annotation keys whose value is `true`, normalized by [`annotation_key`].
    pub(super) annotations: Vec<String>,
    /// Weighted length (sum of field weights of its words).
    pub(super) len: f32,
    /// Distinct term ids, each with where this slot sits in that term's postings: removal is
    /// O(terms), whatever the size of the postings.
    pub(super) terms: Vec<(u32, u32)>,
    /// What the regex mode reads: name, title, description, parameters, one per line.
    pub(super) text: String,
}

/// Term → documents, with each document's weighted frequency and weighted length (a slot's
/// length is fixed while it holds a tool, so BM25 reads it here, in order, rather than from a
/// per-slot array in random order). Three arrays, so the scoring loop runs in SIMD lanes, kept
/// in one buffer (`cap` slots, then `cap` frequencies, then `cap` lengths): adding a tool
/// touches one allocation per word rather than three, and for the short postings of most words
/// the three ends share a page or a cache line.
#[derive(Debug, Default)]
pub(super) struct Posting {
    /// `3 * cap` words; the floats as their bits.
    buf: Vec<u32>,
    /// Postings held.
    n: usize,
}

impl Posting {
    fn cap(&self) -> usize {
        self.buf.len() / 3
    }

    /// Postings held (the term's document frequency).
    pub(super) fn len(&self) -> usize {
        self.n
    }

    pub(super) fn slots(&self) -> &[u32] {
        &self.buf[..self.n]
    }

    pub(super) fn tf(&self) -> &[f32] {
        let cap = self.cap();
        floats(&self.buf[cap..cap + self.n])
    }

    pub(super) fn lens(&self) -> &[f32] {
        let cap = self.cap();
        floats(&self.buf[2 * cap..2 * cap + self.n])
    }

    /// Room for `more` postings without regrowing, and the slack that growing one at a time
    /// leaves (a power of two): an exact fit would make the next tool with this word copy the
    /// whole posting.
    fn reserve(&mut self, more: usize) {
        if self.n + more > self.cap() {
            self.grow((self.n + more).next_power_of_two());
        }
    }

    fn grow(&mut self, need: usize) {
        let (old, cap) = (self.cap(), need.max(2 * self.cap()).max(4));
        let mut buf = vec![0u32; 3 * cap];
        for k in 0..3 {
            buf[k * cap..k * cap + self.n].copy_from_slice(&self.buf[k * old..k * old + self.n]);
        }
        self.buf = buf;
    }

    fn push(&mut self, slot: u32, tf: f32, len: f32) {
        self.reserve(1);
        let (cap, n) = (self.cap(), self.n);
        self.buf[n] = slot;
        self.buf[cap + n] = tf.to_bits();
        self.buf[2 * cap + n] = len.to_bits();
        self.n += 1;
    }

    /// Removes posting `at`, the last one taking its place.
    fn swap_remove(&mut self, at: usize) {
        let (cap, last) = (self.cap(), self.n - 1);
        for k in 0..3 {
            self.buf[k * cap + at] = self.buf[k * cap + last];
        }
        self.n = last;
    }

    /// Where the next posting goes in each of the three arrays.
    fn ends(&self) -> [*const u32; 3] {
        let cap = self.cap();
        [0, cap, 2 * cap].map(|k| self.buf.as_ptr().wrapping_add(k + self.n))
    }
}

/// `u32`s holding float bits, read as the floats.
fn floats(bits: &[u32]) -> &[f32] {
    // SAFETY: `f32` has the size and alignment of `u32`, and every bit pattern is a float.
    unsafe { std::slice::from_raw_parts(bits.as_ptr().cast::<f32>(), bits.len()) }
}

/// The index. Slots of removed tools are reused; a term's postings are unordered.
#[derive(Debug, Default)]
pub struct Index {
    pub(super) slots: Vec<Option<Slot>>,
    pub(super) free: Vec<u32>,
    pub(super) by_name: Map<String, u32>,
    /// Term → id (its index in `postings`), by the term's [`Keyed`] hash.
    terms: HashTable<(Box<str>, u32)>,
    hasher: Keyed,
    pub(super) postings: Vec<Posting>,
    pub(super) total_len: f64,
    /// Bytes of `Slot::text` over live tools (the regex mode's cost).
    pub(super) text_bytes: usize,
    /// Dense vectors by slot (`vectors.rs`).
    pub(super) vectors: Vectors,
    /// The registry generation this index reflects (set by the owner).
    pub generation: u64,
}

impl Index {
    pub fn new() -> Self {
        Index::default()
    }

    /// Tools indexed.
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    pub fn contains(&self, name: &str) -> bool {
        self.by_name.contains_key(name)
    }

    /// Adds a tool, or replaces the one of the same name.
    pub fn put(&mut self, doc: &Doc) {
        self.insert(doc.prepare());
    }

    /// [`Index::put`] of a tool read beforehand ([`Doc::prepare`], no lock needed): what is
    /// left is a hash lookup and a push per distinct word.
    pub fn insert(&mut self, doc: Prepared) {
        let terms = self.term_ids(&doc);
        self.place(doc, terms);
    }

    /// [`Index::insert`] of many tools. Each term's postings grow once per batch, term after
    /// term, before any tool goes in (to a power of two, the slack one-at-a-time growth
    /// leaves): one by one, a big batch would regrow every common term's arrays a dozen times,
    /// and the regrown arrays would land in the holes the batch's freed words leave all over
    /// the heap, where later adds pay for the spread in cache and TLB misses.
    pub fn insert_all(&mut self, prepared: Vec<Prepared>) {
        let ids: Vec<Vec<(u32, u32)>> = prepared.iter().map(|d| self.term_ids(d)).collect();
        let mut counts = vec![0u32; self.postings.len()];
        for (id, _) in ids.iter().flatten() {
            counts[*id as usize] += 1;
        }
        for (p, count) in self.postings.iter_mut().zip(counts) {
            if count > 0 {
                p.reserve(count as usize);
            }
        }
        let spare = self.free.len();
        self.slots.reserve(prepared.len().saturating_sub(spare));
        for (doc, terms) in prepared.into_iter().zip(ids) {
            self.place(doc, terms);
        }
    }

    /// The term ids of a tool's words (new terms made), each with a position to fill; each
    /// term's postings header fetched ahead.
    fn term_ids(&mut self, doc: &Prepared) -> Vec<(u32, u32)> {
        let mut terms = Vec::with_capacity(doc.words.len());
        for (word, _, hash) in doc.words.iter() {
            let id = self.term_id(word, hash);
            prefetch(&self.postings[id as usize]);
            terms.push((id, 0));
        }
        terms
    }

    /// Puts a tool whose term ids are `terms` ([`Index::term_ids`]) in a slot and its postings.
    fn place(&mut self, doc: Prepared, mut terms: Vec<(u32, u32)>) {
        let Prepared {
            name,
            namespace,
            annotations,
            words,
            len,
            text,
        } = doc;
        self.remove(&name);
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.slots.push(None);
                (self.slots.len() - 1) as u32
            }
        };
        // The ids were found first, then the arrays' ends are fetched, then pushed to, so that
        // the cache misses of a big index are waited for together rather than one by one.
        for (id, _) in &terms {
            for end in self.postings[*id as usize].ends() {
                prefetch(end);
            }
        }
        for ((id, at), (_, tf, _)) in terms.iter_mut().zip(words.iter()) {
            let p = &mut self.postings[*id as usize];
            *at = p.len() as u32;
            p.push(slot, tf, len);
        }
        self.total_len += f64::from(len);
        self.text_bytes += text.len();
        self.by_name.insert(name.clone(), slot);
        self.slots[slot as usize] = Some(Slot {
            name,
            namespace,
            annotations,
            len,
            terms,
            text,
        });
        words.recycle();
    }

    /// Removes a tool: `true` when it was indexed. Touches only its own terms' postings.
    pub fn remove(&mut self, name: &str) -> bool {
        let Some(slot) = self.by_name.remove(name) else {
            return false;
        };
        let Some(s) = self.slots[slot as usize].take() else {
            return false;
        };
        for &(id, at) in &s.terms {
            let p = &mut self.postings[id as usize];
            p.swap_remove(at as usize);
            // The last entry moved into `at`: tell its slot.
            if let Some(moved) = p.slots().get(at as usize) {
                if let Some(m) = self.slots[*moved as usize].as_mut() {
                    if let Some(entry) = m.terms.iter_mut().find(|(t, _)| *t == id) {
                        entry.1 = at;
                    }
                }
            }
        }
        self.total_len -= f64::from(s.len);
        self.text_bytes -= s.text.len();
        self.vectors.clear(slot);
        self.free.push(slot);
        true
    }

    /// Sets the vector of the tool `name` (its embedding, any length; stored unit length).
    /// Every vector of an index has one dimension, fixed by the first.
    pub fn set_vector(&mut self, name: &str, vector: &[f32]) -> Result<()> {
        let Some(&slot) = self.by_name.get(name) else {
            return Err(Error::Invalid(format!(
                "no tool named {name:?} is indexed: register it before giving its vector"
            )));
        };
        self.vectors.set(slot, vector)
    }

    /// Forgets every tool's vector (before another model's are set).
    pub fn clear_vectors(&mut self) {
        self.vectors.clear_all();
    }

    /// Tools holding a vector.
    pub fn vector_count(&self) -> usize {
        self.vectors.count()
    }

    /// The dimension of the vectors held (0: none).
    pub fn vector_dim(&self) -> usize {
        self.vectors.dim()
    }

    /// Bytes the vectors hold (the postings' bytes are not counted).
    pub fn vector_bytes(&self) -> usize {
        self.vectors.bytes()
    }

    /// The tools without a vector, at most `max`, each with the passage to embed for it
    /// ([`passage`]: its name's words, title, description and parameter names).
    pub fn missing_vectors(&self, max: usize) -> Vec<(String, String)> {
        if self.vectors.count() == self.len() {
            return Vec::new();
        }
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.as_ref().filter(|_| !self.vectors.has(i as u32)))
            .take(max)
            .map(|s| (s.name.clone(), passage(&s.text)))
            .collect()
    }

    /// The passage embedded for the tool `name` (see [`Index::missing_vectors`]).
    pub fn passage(&self, name: &str) -> Option<String> {
        let slot = *self.by_name.get(name)?;
        self.slots[slot as usize].as_ref().map(|s| passage(&s.text))
    }

    /// `word`'s term id, a new one (with empty postings) when the word is new; `hash` is its
    /// [`Keyed`] hash.
    fn term_id(&mut self, word: &str, hash: u64) -> u32 {
        if let Some((_, id)) = self.terms.find(hash, |(k, _)| **k == *word) {
            return *id;
        }
        let id = self.postings.len() as u32;
        let hasher = &self.hasher;
        self.terms
            .insert_unique(hash, (word.into(), id), |(k, _)| hasher.hash_one(&**k));
        self.postings.push(Posting::default());
        id
    }

    /// `word`'s term id, when some tool has the word.
    pub(super) fn term(&self, word: &str) -> Option<u32> {
        let hash = self.hasher.hash_one(word);
        self.terms
            .find(hash, |(k, _)| **k == *word)
            .map(|(_, id)| *id)
    }

    /// The work a query costs, in units of about a nanosecond or two each: postings read for
    /// BM25 (4 units each: a posting costs well under that, and reading scores back slot by
    /// slot happens only with a posting per 8 slots, at a fraction of a unit per slot), bytes
    /// scanned for a regex. The caller compares it with its scheduler's budget.
    pub fn cost(&self, query: &Query) -> usize {
        match query.mode {
            Mode::Bm25 => {
                let mut units = query.text.len();
                tokenize::each_word(query.text, |w| {
                    if let Some(id) = self.term(w) {
                        units += 4 * self.postings[id as usize].len();
                    }
                });
                units
            }
            Mode::Regex => self.text_bytes + 64 * self.len(),
            Mode::Dense => self.dense_cost(query),
            Mode::Hybrid => {
                self.dense_cost(query)
                    + self.cost(&Query {
                        mode: Mode::Bm25,
                        ..query.clone()
                    })
            }
        }
    }

    /// A dense scan reads every stored vector: a unit per 16 components (an `i8` multiply-add
    /// runs 16 lanes wide), plus the top-k's per-tool work.
    fn dense_cost(&self, query: &Query) -> usize {
        match query.vector {
            Some(_) => self.vectors.count() * (self.vectors.dim() / 16 + 4),
            None => 0,
        }
    }

    /// The filters of `query` on one slot.
    pub(super) fn keeps(slot: &Slot, query: &Query) -> bool {
        (query.namespaces.is_empty()
            || slot
                .namespace
                .as_ref()
                .is_some_and(|n| query.namespaces.iter().any(|q| q == n)))
            && query
                .annotations
                .iter()
                .all(|a| slot.annotations.contains(&annotation_key(a)))
    }
}

/// Asks for the cache line of `at` ahead of its use (a hint: no effect on what runs).
#[cfg(target_arch = "x86_64")]
#[inline]
fn prefetch<T>(at: *const T) {
    use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
    // SAFETY: a prefetch never faults, whatever the address (one past an array's end too);
    // SSE is part of the x86-64 baseline.
    unsafe { _mm_prefetch::<_MM_HINT_T0>(at.cast::<i8>()) }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn prefetch<T>(_at: *const T) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postings_keep_three_arrays_in_step_and_room_to_grow() {
        let mut p = Posting::default();
        // A batch of five leaves the slack of one-at-a-time growth, not an exact fit.
        p.reserve(5);
        assert_eq!(p.cap(), 8);
        for i in 0..5 {
            p.push(i, i as f32, 10.0 + i as f32);
        }
        p.push(9, 1.5, 2.5);
        assert_eq!(p.cap(), 8);
        assert_eq!(p.slots(), [0, 1, 2, 3, 4, 9]);
        assert_eq!(p.tf(), [0.0, 1.0, 2.0, 3.0, 4.0, 1.5]);
        assert_eq!(p.lens(), [10.0, 11.0, 12.0, 13.0, 14.0, 2.5]);
        p.swap_remove(1);
        assert_eq!(p.slots(), [0, 9, 2, 3, 4]);
        assert_eq!(p.tf(), [0.0, 1.5, 2.0, 3.0, 4.0]);
        assert_eq!(p.lens(), [10.0, 2.5, 12.0, 13.0, 14.0]);
        for i in 0..20 {
            p.push(100 + i, 0.5, 1.0);
        }
        assert_eq!((p.len(), p.cap()), (25, 32));
        assert_eq!(p.slots()[..5], [0, 9, 2, 3, 4]);
        assert_eq!(p.lens()[24], 1.0);
    }
}
