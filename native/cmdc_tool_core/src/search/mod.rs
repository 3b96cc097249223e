//! Tool search: a BM25 index over the registry's tools (name split into words, title,
//! description, parameter names and descriptions, namespace), a bounded regex search over the
//! same text, and filters by namespace and annotation. Incremental: [`Index::put`] and
//! [`Index::remove`] touch only the tool's own words, so the registry keeps the index current
//! on every registration. Every search states its cost up front ([`Index::cost`]): the NIF runs
//! a search on a normal scheduler only when that cost fits its budget.
//!
//! Dense retrieval beside it: each tool may hold a vector (its embedding, from any model the
//! caller runs, e.g. `embed.rs`'s), stored quantized beside the postings and as incremental;
//! [`Mode::Hybrid`] fuses the BM25 and the dense rankings by reciprocal rank.
//!
//! Files, each using only those after it: `find` (queries) → `fuse` (hybrid) → `dense`,
//! `bm25`, `regex` → `top` (the best k) → `index` (the data) → `vectors` (dense vectors),
//! `doc` (a tool read into words) → `bag` (its distinct words) → `tokenize`, `hash`.
//! `embed` → `bert` (the `embedder` feature: a sentence-embedding model in Rust) stand apart.

mod bag;
#[cfg(feature = "embedder")]
mod bert;
mod bm25;
mod dense;
#[cfg(test)]
mod dense_tests;
mod doc;
#[cfg(feature = "embedder")]
pub mod embed;
#[cfg(test)]
mod eval_tests;
#[cfg(test)]
mod exact_tests;
mod find;
mod fuse;
mod hash;
mod index;
mod regex;
#[cfg(test)]
mod tests;
pub mod tokenize;
mod top;
mod vectors;

pub use doc::{annotation_key, passage, Doc, Prepared};
pub use index::{Hit, Index, Mode, Query, MAX_LIMIT, MAX_PATTERN, MAX_QUERY};
pub use vectors::{Probe, MAX_DIM};
