//! Tool search: a BM25 index over the registry's tools (name split into words, title,
//! description, parameter names and descriptions, namespace), a bounded regex search over the
//! same text, and filters by namespace and annotation. Incremental: [`Index::put`] and
//! [`Index::remove`] touch only the tool's own words, so the registry keeps the index current
//! on every registration. Every search states its cost up front ([`Index::cost`]): the NIF runs
//! a search on a normal scheduler only when that cost fits its budget.

mod bm25;
mod doc;
mod regex;
#[cfg(test)]
mod tests;
pub mod tokenize;

use std::collections::HashMap;

pub use doc::{annotation_key, Doc, Prepared};

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
}

/// A found tool.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub name: String,
    pub score: f64,
}

/// One indexed tool.
#[derive(Debug)]
struct Slot {
    name: String,
    namespace: Option<String>,
    /// Annotation keys whose value is `true`, normalized by [`annotation_key`].
    annotations: Vec<String>,
    /// Weighted length (sum of field weights of its words).
    len: f32,
    /// Distinct term ids, and where this slot sits in each term's postings: removal is
    /// O(terms), whatever the size of the postings.
    terms: Vec<u32>,
    pos: Vec<u32>,
    /// What the regex mode reads: name, title, description, parameters, one per line.
    text: String,
}

/// Term → documents, with each document's weighted frequency.
#[derive(Debug, Default)]
struct Posting {
    slots: Vec<u32>,
    tf: Vec<f32>,
}

/// The index. Slots of removed tools are reused; a term's postings are unordered.
#[derive(Debug, Default)]
pub struct Index {
    slots: Vec<Option<Slot>>,
    free: Vec<u32>,
    by_name: HashMap<String, u32>,
    terms: HashMap<String, u32>,
    postings: Vec<Posting>,
    /// Weighted length per slot (dense: read once per posting by BM25; 0 for free slots).
    lens: Vec<f32>,
    total_len: f64,
    /// Bytes of `Slot::text` over live tools (the regex mode's cost).
    text_bytes: usize,
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
        let Prepared {
            name,
            namespace,
            annotations,
            weights,
            len,
            text,
        } = doc;
        self.remove(&name);
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.slots.push(None);
                self.lens.push(0.0);
                (self.slots.len() - 1) as u32
            }
        };
        self.lens[slot as usize] = len;
        let mut terms = Vec::with_capacity(weights.len());
        let mut pos = Vec::with_capacity(weights.len());
        for (word, tf) in weights {
            let next = self.postings.len() as u32;
            let id = *self.terms.entry(word).or_insert(next);
            if id == next {
                self.postings.push(Posting::default());
            }
            let p = &mut self.postings[id as usize];
            pos.push(p.slots.len() as u32);
            p.slots.push(slot);
            p.tf.push(tf);
            terms.push(id);
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
            pos,
            text,
        });
    }

    /// Removes a tool: `true` when it was indexed. Touches only its own terms' postings.
    pub fn remove(&mut self, name: &str) -> bool {
        let Some(slot) = self.by_name.remove(name) else {
            return false;
        };
        let Some(s) = self.slots[slot as usize].take() else {
            return false;
        };
        for (id, at) in s.terms.iter().zip(&s.pos) {
            let p = &mut self.postings[*id as usize];
            let at = *at as usize;
            p.slots.swap_remove(at);
            p.tf.swap_remove(at);
            // The last entry moved into `at`: tell its slot.
            if let Some(moved) = p.slots.get(at) {
                if let Some(m) = self.slots[*moved as usize].as_mut() {
                    if let Some(j) = m.terms.iter().position(|t| t == id) {
                        m.pos[j] = at as u32;
                    }
                }
            }
        }
        self.total_len -= f64::from(s.len);
        self.lens[slot as usize] = 0.0;
        self.text_bytes -= s.text.len();
        self.free.push(slot);
        true
    }

    /// The work a query costs, in units of about a nanosecond or two each: postings read for
    /// BM25, bytes scanned for a regex. The caller compares it with its scheduler's budget.
    pub fn cost(&self, query: &Query) -> usize {
        match query.mode {
            Mode::Bm25 => {
                let mut units = query.text.len();
                tokenize::each_word(query.text, |w| {
                    if let Some(id) = self.terms.get(w) {
                        units += 4 * self.postings[*id as usize].slots.len();
                    }
                });
                units
            }
            Mode::Regex => self.text_bytes + 64 * self.len(),
        }
    }

    /// Runs a query: hits best first (ties by name), at most `limit`.
    pub fn search(&self, query: &Query) -> Result<Vec<Hit>> {
        check(query)?;
        let candidates = match query.mode {
            Mode::Bm25 => bm25::search(self, query),
            Mode::Regex => regex::search(self, query)?,
        };
        Ok(self.rank(candidates, query.limit.min(MAX_LIMIT)))
    }

    /// The best `limit` of `(slot, score)` candidates as hits. Only those are named: a query
    /// touching thousands of tools allocates `limit` names, not thousands.
    fn rank(&self, mut candidates: Vec<(u32, f32)>, limit: usize) -> Vec<Hit> {
        let by_score = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1);
        if candidates.len() > limit {
            candidates.select_nth_unstable_by(limit - 1, by_score);
            // Keep every tie of the last score: the name decides among them below.
            let last = candidates[limit - 1].1;
            let mut keep = limit;
            let mut i = limit;
            while i < candidates.len() {
                if candidates[i].1 == last {
                    candidates.swap(i, keep);
                    keep += 1;
                }
                i += 1;
            }
            candidates.truncate(keep);
        }
        let mut hits: Vec<Hit> = candidates
            .into_iter()
            .filter_map(|(slot, score)| {
                self.slots[slot as usize].as_ref().map(|s| Hit {
                    name: s.name.clone(),
                    score: f64::from(score),
                })
            })
            .collect();
        hits.sort_unstable_by(|a, b| b.score.total_cmp(&a.score).then(a.name.cmp(&b.name)));
        hits.truncate(limit);
        hits
    }

    /// The filters of `query` on one slot.
    fn keeps(slot: &Slot, query: &Query) -> bool {
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

/// The rules every query follows; each message says what to send instead.
fn check(query: &Query) -> Result<()> {
    let invalid = |m: String| Err(Error::Invalid(m));
    if query.limit == 0 {
        return invalid("limit: must be at least 1".into());
    }
    match query.mode {
        Mode::Bm25 if query.text.trim().is_empty() => invalid(
            "the search query is empty: describe the tool you need in a few words, e.g. \
             \"read a file\""
                .into(),
        ),
        Mode::Bm25 if query.text.len() > MAX_QUERY => invalid(format!(
            "the search query is {} bytes; at most {MAX_QUERY} are accepted: describe the \
             tool you need in a few words",
            query.text.len()
        )),
        Mode::Regex if query.text.is_empty() => {
            invalid("the regex is empty: give a pattern such as \"file|dir\"".into())
        }
        Mode::Regex if query.text.chars().count() > MAX_PATTERN => invalid(format!(
            "the regex is {} characters; at most {MAX_PATTERN} are accepted",
            query.text.chars().count()
        )),
        _ => Ok(()),
    }
}
