//! Regex search with Anthropic's limits: a pattern of at most 200 characters, compiled by the
//! `regex` crate (finite automata: matching time is linear in the text, no backtracking blow-up)
//! under size limits, so a pathological pattern is refused or runs in bounded time.

use regex::RegexBuilder;

use super::index::{Index, Query};
use super::top::Top;
use crate::error::{Error, Result};

/// Compiled program size allowed (the crate's default is 10 MiB).
const SIZE_LIMIT: usize = 1 << 20;

/// Fills `top` with the tools whose text matches and that pass the filters.
pub(super) fn search<'i>(index: &'i Index, query: &Query, top: &mut Top<'i>) -> Result<()> {
    let re = RegexBuilder::new(query.text)
        .case_insensitive(true)
        .size_limit(SIZE_LIMIT)
        .dfa_size_limit(SIZE_LIMIT)
        .nest_limit(32)
        .build()
        .map_err(|e| Error::Invalid(format!("the regex {:?} is not accepted: {e}", query.text)))?;
    for (slot, s) in index.slots.iter().enumerate() {
        let Some(s) = s else { continue };
        if !Index::keeps(s, query) || !re.is_match(&s.text) {
            continue;
        }
        // A name match says more than a match somewhere in a description.
        let score = if re.is_match(&s.name) { 2.0 } else { 1.0 };
        top.offer(slot as u32, score);
    }
    Ok(())
}
