//! Tool search: a BM25 index over the registry's tools (name split into words, title,
//! description, parameter names and descriptions, namespace), a bounded regex search over the
//! same text, and filters by namespace and annotation. Incremental: [`Index::put`] and
//! [`Index::remove`] touch only the tool's own words, so the registry keeps the index current
//! on every registration. Every search states its cost up front ([`Index::cost`]): the NIF runs
//! a search on a normal scheduler only when that cost fits its budget.
//!
//! Files, each using only those after it: `find` (queries) → `bm25`, `regex` → `top` (the
//! best k) → `index` (the data) → `doc` (a tool read into words) → `bag` (its distinct words)
//! → `tokenize`, `hash`.

mod bag;
mod bm25;
mod doc;
#[cfg(test)]
mod eval_tests;
#[cfg(test)]
mod exact_tests;
mod find;
mod hash;
mod index;
mod regex;
#[cfg(test)]
mod tests;
pub mod tokenize;
mod top;

pub use doc::{annotation_key, Doc, Prepared};
pub use index::{Hit, Index, Mode, Query, MAX_LIMIT, MAX_PATTERN, MAX_QUERY};
