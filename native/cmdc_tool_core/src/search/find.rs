//! Running a query over the index: the rules a query follows, then the mode (`bm25.rs`,
//! `regex.rs`) offering its candidates to the bounded top-k (`top.rs`).

use super::index::{Hit, Index, Mode, Query, MAX_LIMIT, MAX_PATTERN, MAX_QUERY};
use super::top::Top;
use super::{bm25, dense, fuse, regex};
use crate::error::{Error, Result};

impl Index {
    /// Runs a query: hits best first (ties by name), at most `limit`. Only the best `limit`
    /// are named: a query touching thousands of tools allocates `limit` names, not thousands.
    pub fn search(&self, query: &Query) -> Result<Vec<Hit>> {
        check(query)?;
        let mut top = Top::new(self, query.limit.min(MAX_LIMIT));
        match query.mode {
            Mode::Bm25 => bm25::search(self, query, &mut top),
            Mode::Regex => regex::search(self, query, &mut top)?,
            Mode::Dense => dense::search(self, query, &mut top),
            Mode::Hybrid => fuse::search(self, query, &mut top),
        }
        Ok(top.into_hits())
    }
}

/// The rules every query follows; each message says what to send instead.
fn check(query: &Query) -> Result<()> {
    let invalid = |m: String| Err(Error::Invalid(m));
    if query.limit == 0 {
        return invalid("limit: must be at least 1".into());
    }
    match query.mode {
        Mode::Bm25 | Mode::Hybrid if query.text.trim().is_empty() => invalid(
            "the search query is empty: describe the tool you need in a few words, e.g. \
             \"read a file\""
                .into(),
        ),
        Mode::Bm25 | Mode::Hybrid | Mode::Dense if query.text.len() > MAX_QUERY => {
            invalid(format!(
                "the search query is {} bytes; at most {MAX_QUERY} are accepted: describe the \
             tool you need in a few words",
                query.text.len()
            ))
        }
        Mode::Dense if query.vector.is_none() => invalid(
            "a dense search needs the query's vector: give an embedder, or search by words".into(),
        ),
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
