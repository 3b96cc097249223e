//! The evaluator: runs a [`Program`] over an [`Instance`], reading each value once, allocating
//! nothing, under a [`Budget`].

use serde_json::{Map, Number, Value};

use super::number::*;
use super::program::*;
use crate::budget::Budget;
use crate::tape::is_ascii;

impl Program {
    /// Validates `instance`: `Ok(())` only when it is valid and JSON all through.
    pub fn validate<'a, I: Instance<'a>>(&self, instance: I, budget: &mut Budget) -> Checked {
        self.eval(0, instance, 0, 0, budget)
    }

    // Over 80 lines on purpose: the hot loop of validation. Each node's checks run in this one
    // frame (type, leaves, numbers, then containers and applicators) so a valid tool call costs
    // one call per value; `bench/validate.exs` guards the figure a split would move.
    fn eval<'a, I: Instance<'a>>(
        &self,
        id: u32,
        inst: I,
        depth: u32,
        frames: u32,
        budget: &mut Budget,
    ) -> Checked {
        if frames > MAX_FRAMES {
            return Err(Stop::Fallback);
        }
        let node = &self.nodes[id as usize];
        let kind = read(inst, depth, budget)?;
        if node.never {
            return Err(Stop::Invalid);
        }
        let mut covered = false;
        match kind {
            ValueKind::Null => require(node.types & T_NULL != 0)?,
            ValueKind::Bool(_) => require(node.types & T_BOOL != 0)?,
            ValueKind::Int(i) => {
                require(node.types & (T_NUMBER | T_INTEGER) != 0)?;
                if let Some(n) = &node.number {
                    number_int(n, i)?;
                }
            }
            ValueKind::Float(f) => {
                require(
                    node.types & T_NUMBER != 0 || (node.types & T_INTEGER != 0 && f.fract() == 0.0),
                )?;
                if let Some(n) = &node.number {
                    number_float(n, f)?;
                }
            }
            ValueKind::Str(bytes) => {
                require(node.types & T_STRING != 0)?;
                if let Some(checks) = &node.string {
                    string(checks, checked(bytes), budget)?;
                }
            }
            ValueKind::Name => {
                require(node.types & T_STRING != 0)?;
                if let Some(checks) = &node.string {
                    let mut buf = [0u8; 256];
                    let s = inst.name(&mut buf).ok_or(Stop::Fallback)?;
                    string(checks, s, budget)?;
                }
            }
            ValueKind::Object => {
                require(node.types & T_OBJECT != 0)?;
                if let Some(checks) = &node.object {
                    self.object(checks, inst, depth, frames, budget)?;
                    covered = true;
                }
            }
            ValueKind::Array => {
                require(node.types & T_ARRAY != 0)?;
                if let Some(checks) = &node.array {
                    self.array(checks, inst, depth, frames, budget)?;
                    covered = true;
                }
            }
            ValueKind::Other => return Err(Stop::Fallback),
        }
        if node.plain {
            return match kind {
                ValueKind::Object | ValueKind::Array if !covered => check_json(inst, depth, budget),
                _ => Ok(()),
            };
        }
        for values in &node.equal {
            let mut found = false;
            for v in values {
                if equals_kind(inst, kind, v, depth, budget)? {
                    found = true;
                    break;
                }
            }
            require(found)?;
        }
        let frames = frames + 1;
        for &sub in &node.all_of {
            self.eval(sub, inst, depth, frames, budget)?;
            covered = true;
        }
        if !node.any_of.is_empty() {
            let mut found = false;
            for &sub in &node.any_of {
                if caught(self.eval(sub, inst, depth, frames, budget))? {
                    found = true;
                    break;
                }
            }
            require(found)?;
            covered = true;
        }
        if !node.one_of.is_empty() {
            let mut valid = 0;
            for &sub in &node.one_of {
                if caught(self.eval(sub, inst, depth, frames, budget))? {
                    valid += 1;
                    require(valid == 1)?;
                }
            }
            require(valid == 1)?;
            covered = true;
        }
        if let Some(sub) = node.not {
            require(!caught(self.eval(sub, inst, depth, frames, budget))?)?;
        }
        if let Some((cond, then, otherwise)) = node.if_ {
            let branch = if caught(self.eval(cond, inst, depth, frames, budget))? {
                covered = true;
                then
            } else {
                otherwise
            };
            if let Some(sub) = branch {
                self.eval(sub, inst, depth, frames, budget)?;
                covered = true;
            }
        }
        if !covered && matches!(kind, ValueKind::Object | ValueKind::Array) {
            check_json(inst, depth, budget)?;
        }
        Ok(())
    }

    #[inline]
    fn object<'a, I: Instance<'a>>(
        &self,
        checks: &ObjectChecks,
        inst: I,
        depth: u32,
        frames: u32,
        budget: &mut Budget,
    ) -> Checked {
        if checks.min.is_some() || checks.max.is_some() {
            let len = inst.object_len() as u64;
            require(checks.min.is_none_or(|m| len >= m) && checks.max.is_none_or(|m| len <= m))?;
        }
        let mut seen = 0u64;
        inst.members(|name, value| {
            let found = checks.lookup(name);
            let schema = match found {
                Some(prop) => {
                    if let Some(bit) = prop.bit {
                        seen |= 1 << bit;
                    }
                    prop.schema
                }
                None => None,
            };
            let rest = match schema {
                Some(sub) => return self.eval(sub, value, depth + 1, frames + 1, budget),
                None => checks.additional,
            };
            match rest {
                Rest::Any => check_json(value, depth + 1, budget),
                Rest::Forbid => Err(Stop::Invalid),
                Rest::Schema(sub) => self.eval(sub, value, depth + 1, frames + 1, budget),
            }
        })?;
        require(seen & checks.required == checks.required)
    }

    #[inline]
    fn array<'a, I: Instance<'a>>(
        &self,
        checks: &ArrayChecks,
        inst: I,
        depth: u32,
        frames: u32,
        budget: &mut Budget,
    ) -> Checked {
        let len = inst.elements(|i, value| self.item(checks, i, value, depth, frames, budget))?;
        require(checks.len_ok(len as u64))
    }

    /// Element `index` of an array at `depth` (`slice.rs` checks a top-level array's one by one).
    #[inline(always)]
    pub(super) fn item<'a, I: Instance<'a>>(
        &self,
        checks: &ArrayChecks,
        index: usize,
        value: I,
        depth: u32,
        frames: u32,
        budget: &mut Budget,
    ) -> Checked {
        match checks.rest_at(index) {
            Rest::Any => check_json(value, depth + 1, budget),
            Rest::Forbid => Err(Stop::Invalid),
            Rest::Schema(sub) => self.eval(sub, value, depth + 1, frames + 1, budget),
        }
    }
}

#[inline(always)]
pub(super) fn require(ok: bool) -> Checked {
    if ok {
        Ok(())
    } else {
        Err(Stop::Invalid)
    }
}

/// A subschema's answer where invalid is an answer (`anyOf`, `oneOf`, `not`, `if`).
#[inline(always)]
pub(super) fn caught(result: Checked) -> Result<bool, Stop> {
    match result {
        Ok(()) => Ok(true),
        Err(Stop::Invalid) => Ok(false),
        Err(other) => Err(other),
    }
}

/// Walks a value no subschema looks into: it must still be JSON all through.
pub fn check_json<'a, I: Instance<'a>>(inst: I, depth: u32, budget: &mut Budget) -> Checked {
    match read(inst, depth, budget)? {
        ValueKind::Object => inst.members(|_, value| check_json(value, depth + 1, budget)),
        ValueKind::Array => inst
            .elements(|_, value| check_json(value, depth + 1, budget))
            .map(|_| ()),
        ValueKind::Name => {
            let mut buf = [0u8; 256];
            inst.name(&mut buf).map(|_| ()).ok_or(Stop::Fallback)
        }
        ValueKind::Other => Err(Stop::Fallback),
        _ => Ok(()),
    }
}

/// Reads one value under the JSON rules every path shares: 1 budget unit, 1 more per 256
/// string bytes and 1 per map member charged before they are read, UTF-8 text, at most [`MAX_DEPTH`] nested
/// containers (the 129th level falls back, where the other path names the error).
#[inline(always)]
pub(super) fn read<'a, I: Instance<'a>>(
    inst: I,
    depth: u32,
    budget: &mut Budget,
) -> Result<ValueKind<'a>, Stop> {
    budget.spend(1)?;
    let kind = inst.kind();
    match kind {
        ValueKind::Str(bytes) => {
            budget.spend((bytes.len() >> 8) as i64)?;
            if !is_ascii(bytes) && std::str::from_utf8(bytes).is_err() {
                return Err(Stop::Fallback);
            }
        }
        ValueKind::Object | ValueKind::Array if depth >= MAX_DEPTH => return Err(Stop::Fallback),
        // A map's size is known at once: a huge one is over the budget before any member is
        // read (iterating a large map's members costs more per member than a list's cells).
        ValueKind::Object => budget.spend(inst.object_len() as i64)?,
        _ => {}
    }
    Ok(kind)
}

/// The text of a `ValueKind::Str` that [`read`] returned.
#[inline(always)]
pub(super) fn checked(bytes: &[u8]) -> &str {
    // SAFETY: `read` checked these bytes are UTF-8 (every `ValueKind` used comes from `read`).
    unsafe { std::str::from_utf8_unchecked(bytes) }
}

pub(super) fn string(checks: &StringChecks, s: &str, budget: &mut Budget) -> Checked {
    if checks.min.is_some() || checks.max.is_some() {
        budget.spend((s.len() >> 8) as i64)?;
        let len = char_count(s);
        require(checks.min.is_none_or(|m| len >= m) && checks.max.is_none_or(|m| len <= m))?;
    }
    let mut deferred = false;
    for (leaf, cost) in &checks.leaves {
        if cost.backtracks() {
            return Err(Stop::Deferred);
        }
        // Regular expressions and formats cost more per byte than reading the value.
        budget.spend(cost.units(s.len()))?;
        require(leaf.is_valid(s))?;
        // Passing a superset decides nothing; the other leaves may still refuse the string.
        deferred |= matches!(leaf, Leaf::Superset(_));
    }
    if deferred {
        return Err(Stop::Deferred);
    }
    Ok(())
}

#[inline]
pub(super) fn char_count(s: &str) -> u64 {
    if s.is_ascii() {
        s.len() as u64
    } else {
        s.bytes().filter(|b| (b & 0xC0) != 0x80).count() as u64
    }
}

pub(super) fn number_int(n: &NumberChecks, i: i64) -> Checked {
    let ok = n.min.is_none_or(|l| ge_int(i, l))
        && n.max.is_none_or(|l| le_int(i, l))
        && n.exclusive_min.is_none_or(|l| gt_int(i, l))
        && n.exclusive_max.is_none_or(|l| lt_int(i, l));
    require(ok)?;
    match &n.multiple_of {
        Some(v) => require(v.is_valid(&Value::Number(Number::from(i)))),
        None => Ok(()),
    }
}

pub(super) fn number_float(n: &NumberChecks, f: f64) -> Checked {
    let ok = n
        .min
        .is_none_or(|l| cmp_float(f, l).is_some_and(|o| o.is_ge()))
        && n.max
            .is_none_or(|l| cmp_float(f, l).is_some_and(|o| o.is_le()))
        && n.exclusive_min
            .is_none_or(|l| cmp_float(f, l).is_some_and(|o| o.is_gt()))
        && n.exclusive_max
            .is_none_or(|l| cmp_float(f, l).is_some_and(|o| o.is_lt()));
    require(ok)?;
    match (&n.multiple_of, Number::from_f64(f)) {
        (Some(v), Some(num)) => require(v.is_valid(&Value::Number(num))),
        (Some(_), None) => Err(Stop::Fallback),
        (None, _) => Ok(()),
    }
}

/// JSON equality of an instance and a schema value (numbers mathematically, as `jsonschema`'s
/// `cmp::equal`). `Ok(true)` means the instance was read all through.
pub(super) fn equals<'a, I: Instance<'a>>(
    inst: I,
    expected: &Value,
    depth: u32,
    budget: &mut Budget,
) -> Result<bool, Stop> {
    equals_kind(inst, read(inst, depth, budget)?, expected, depth, budget)
}

/// `equals` for an instance whose kind is read already.
#[inline]
pub(super) fn equals_kind<'a, I: Instance<'a>>(
    inst: I,
    kind: ValueKind<'a>,
    expected: &Value,
    depth: u32,
    budget: &mut Budget,
) -> Result<bool, Stop> {
    Ok(match (kind, expected) {
        (ValueKind::Null, Value::Null) => true,
        (ValueKind::Bool(a), Value::Bool(b)) => a == *b,
        (ValueKind::Str(a), Value::String(b)) => a == b.as_bytes(),
        (ValueKind::Name, Value::String(b)) => {
            let mut buf = [0u8; 256];
            inst.name(&mut buf).ok_or(Stop::Fallback)? == b
        }
        (ValueKind::Int(a), Value::Number(b)) => number_eq(Num::I(a), b),
        (ValueKind::Float(a), Value::Number(b)) => number_eq(Num::F(a), b),
        (ValueKind::Array, Value::Array(items)) => {
            let mut i = 0;
            let mut same = true;
            let len = inst.elements(|at, value| {
                if !same {
                    return Ok(());
                }
                i = at + 1;
                same = match items.get(at) {
                    Some(item) => equals(value, item, depth + 1, budget)?,
                    None => false,
                };
                Ok(())
            })?;
            same && len == items.len() && i == len
        }
        (ValueKind::Object, Value::Object(map)) => {
            inst.object_len() == map.len() && object_equals(inst, map, depth, budget)?
        }
        (ValueKind::Other, _) => return Err(Stop::Fallback),
        _ => false,
    })
}

pub(super) fn object_equals<'a, I: Instance<'a>>(
    inst: I,
    map: &Map<String, Value>,
    depth: u32,
    budget: &mut Budget,
) -> Result<bool, Stop> {
    let mut same = true;
    inst.members(|name, value| {
        if same {
            same = match map.get(name) {
                Some(v) => equals(value, v, depth + 1, budget)?,
                None => false,
            };
        }
        Ok(())
    })?;
    Ok(same)
}
