//! Numbers compared as `jsonschema` compares them: mathematically (`1 == 1.0`), exactly across
//! integers and floats, against a limit in the type the schema wrote it in.

use num_cmp::NumCmp;
use serde_json::Number;

use super::program::Limit;

pub(super) fn cmp_int(i: i64, l: Limit) -> Option<std::cmp::Ordering> {
    match l {
        Limit::U(u) => i.num_cmp(u),
        Limit::I(j) => Some(i.cmp(&j)),
        Limit::F(f) => i.num_cmp(f),
    }
}

pub(super) fn cmp_float(x: f64, l: Limit) -> Option<std::cmp::Ordering> {
    match l {
        Limit::U(u) => x.num_cmp(u),
        Limit::I(j) => x.num_cmp(j),
        Limit::F(f) => x.num_cmp(f),
    }
}

pub(super) fn ge_int(i: i64, l: Limit) -> bool {
    cmp_int(i, l).is_some_and(|o| o.is_ge())
}

pub(super) fn le_int(i: i64, l: Limit) -> bool {
    cmp_int(i, l).is_some_and(|o| o.is_le())
}

pub(super) fn gt_int(i: i64, l: Limit) -> bool {
    cmp_int(i, l).is_some_and(|o| o.is_gt())
}

pub(super) fn lt_int(i: i64, l: Limit) -> bool {
    cmp_int(i, l).is_some_and(|o| o.is_lt())
}

#[derive(Clone, Copy)]
pub(super) enum Num {
    I(i64),
    F(f64),
}

/// `jsonschema_value::cmp::equal_numbers`: both sides as u64, i64 or f64, compared exactly.
pub(super) fn number_eq(a: Num, b: &Number) -> bool {
    fn with<T>(a: T, b: &Number) -> bool
    where
        T: NumCmp<u64> + NumCmp<i64> + NumCmp<f64>,
    {
        if let Some(u) = b.as_u64() {
            a.num_eq(u)
        } else if let Some(i) = b.as_i64() {
            a.num_eq(i)
        } else {
            b.as_f64().is_some_and(|f| a.num_eq(f))
        }
    }
    match a {
        Num::I(i) if i >= 0 => with(i as u64, b),
        Num::I(i) => with(i, b),
        Num::F(f) => with(f, b),
    }
}
