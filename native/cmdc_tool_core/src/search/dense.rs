//! Dense retrieval: the query's vector against every stored one (`vectors.rs`), in slot order,
//! each cosine offered to the top-k. The scan is exhaustive (no approximate index): at 10,000
//! tools it reads under 4 MB, which an `i8` dot product per tool covers well under a
//! millisecond, and it is exact whatever was added or removed.

use super::index::{Index, Query};
use super::top::Top;

/// Fills `top` with the tools holding a vector that pass the filters, by cosine.
pub(super) fn search<'i>(index: &'i Index, query: &Query, top: &mut Top<'i>) {
    let Some(probe) = query.vector else { return };
    let filtered = !query.namespaces.is_empty() || !query.annotations.is_empty();
    index.vectors.each(probe, |slot, cosine| {
        if top.could_take(cosine)
            && (!filtered
                || index.slots[slot as usize]
                    .as_ref()
                    .is_some_and(|s| Index::keeps(s, query)))
        {
            top.offer(slot, cosine);
        }
    });
}
