//! The one work allowance of a call, used by every walker of both crates (term reading, JSON
//! text, validation). On a normal scheduler a call stops early ([`Over::Yield`]) so the caller can
//! re-run the work on a dirty scheduler; on a dirty one it stops at a hard limit
//! ([`Over::TooBig`]) instead of exhausting memory. Work is charged *before* it is done and in
//! units of its real cost (~100 ns): a node, a run of string bytes, a big integer by the square
//! of its size (decimal conversion is quadratic), a list cell while it is counted. Each walker
//! turns [`Over`] into its own error with `From`.

/// Work units a normal-scheduler call may spend (~100 ns each): about 0.3 ms, so no call holds
/// a normal scheduler near 1 ms.
pub const NORMAL_BUDGET: i64 = 3_000;
/// Hard cap on work units for one call on a dirty scheduler (hostile inputs end here).
pub const DIRTY_BUDGET: i64 = 64 * 1024 * 1024;

/// Why a budget refused more work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Over {
    /// Over a normal scheduler's budget: retry on a dirty one.
    Yield,
    /// Over a dirty scheduler's hard limit.
    TooBig,
}

/// Work allowance for one call.
#[derive(Debug)]
pub struct Budget {
    /// Units left (negative once over). Walkers that count in a local copy write it back.
    pub remaining: i64,
    dirty: bool,
}

impl Budget {
    /// A normal scheduler's allowance ([`NORMAL_BUDGET`]).
    #[inline]
    pub fn normal() -> Self {
        Budget::with(NORMAL_BUDGET, false)
    }

    /// A dirty scheduler's allowance ([`DIRTY_BUDGET`]).
    #[inline]
    pub fn dirty() -> Self {
        Budget::with(DIRTY_BUDGET, true)
    }

    /// A budget with `remaining` units left (a walker's own copy, or a scaled allowance).
    #[inline]
    pub fn with(remaining: i64, dirty: bool) -> Self {
        Budget { remaining, dirty }
    }

    #[inline]
    pub fn is_dirty(&self) -> bool {
        self.dirty
    }

    /// What running out means here: `Yield` on a normal scheduler, `TooBig` on a dirty one.
    #[inline]
    pub fn over(&self) -> Over {
        if self.dirty {
            Over::TooBig
        } else {
            Over::Yield
        }
    }

    /// Units spent so far, of a budget that started at [`Budget::normal`] or [`Budget::dirty`].
    #[inline]
    pub fn spent(&self) -> i64 {
        let start = if self.dirty {
            DIRTY_BUDGET
        } else {
            NORMAL_BUDGET
        };
        start - self.remaining
    }

    #[inline(always)]
    pub fn spend(&mut self, units: i64) -> Result<(), Over> {
        self.remaining -= units;
        if self.remaining >= 0 {
            Ok(())
        } else {
            Err(self.over())
        }
    }

    /// Bytes copied or escaped (~3 ns a byte).
    #[inline(always)]
    pub fn spend_bytes(&mut self, len: usize) -> Result<(), Over> {
        self.spend(1 + (len >> 5) as i64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_normal_budget_yields_and_a_dirty_one_stops() {
        let mut normal = Budget::normal();
        assert_eq!(normal.spend(NORMAL_BUDGET), Ok(()));
        assert_eq!(normal.spent(), NORMAL_BUDGET);
        assert_eq!(normal.spend(1), Err(Over::Yield));
        let mut dirty = Budget::dirty();
        assert_eq!(dirty.spend_bytes(64), Ok(()));
        assert_eq!(dirty.spent(), 3);
        assert_eq!(dirty.spend(DIRTY_BUDGET), Err(Over::TooBig));
    }
}
