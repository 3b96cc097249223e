//! Running a query over the index: the rules a query follows, the mode's candidates
//! (`bm25.rs`, `regex.rs`), and the best `limit` of them named.

use super::index::{Hit, Index, Mode, Query, MAX_LIMIT, MAX_PATTERN, MAX_QUERY};
use super::{bm25, regex};
use crate::error::{Error, Result};

impl Index {
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
