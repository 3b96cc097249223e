//! A long top-level array checked a slice at a time. When the root schema checks an array only
//! element by element (and by its length), each element's verdict stands alone, so a caller can
//! stop between two elements and resume at the next one in a later call. The NIF does that on a
//! normal scheduler, where the VM runs other processes between slices: the same work on a dirty
//! scheduler competes with the normal schedulers for the cores (`bench/stall.exs`).

use super::eval::check_json;
use super::program::*;
use crate::budget::Budget;

impl Program {
    /// Whether an array is checked element by element: the root accepts arrays, and checks
    /// nothing on the whole array but its length (no `enum`/`const`, no applicators).
    pub fn slices_arrays(&self) -> bool {
        let root = &self.nodes[0];
        !root.never && root.types & T_ARRAY != 0 && root.plain
    }

    /// Element `index` of a top-level array checked as [`Program::validate`] checks it, when
    /// [`Program::slices_arrays`]. The array itself (one unit) is not charged here.
    pub fn element<'a, I: Instance<'a>>(
        &self,
        index: usize,
        value: I,
        budget: &mut Budget,
    ) -> Checked {
        match self.nodes[0].array.as_deref() {
            Some(checks) => self.item(checks, index, value, 0, 0, budget),
            None => check_json(value, 1, budget),
        }
    }

    /// Whether the root accepts an array of `len` elements (`minItems`, `maxItems`).
    pub fn array_len_ok(&self, len: u64) -> bool {
        self.nodes[0]
            .array
            .as_deref()
            .is_none_or(|checks| checks.len_ok(len))
    }
}
