//! Strict mode's round trip: OpenAI strict mode makes every optional property required and
//! nullable, so the model sends `null` for each one it leaves out. The rewrite records where it
//! did that (a [`Plan`] that mirrors the rewritten schema); [`NullPlan::apply`] removes those
//! nulls from a call's arguments, so they mean what the original schema means: the key absent.
//! The plan is made by the rewrite (`strict::null_plan`); this file only holds and applies it.
//! A `null` the original schema accepts there is not recorded, so it is kept.

use std::collections::HashMap;

use serde_json::Value;

use super::pointer::resolve;

/// Where the rewrite made nulls stand for absent keys, for one (sub)schema.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    /// `(property, drop a null here, plan of the property's value)`.
    pub props: Vec<(String, bool, Plan)>,
    pub items: Option<Box<Plan>>,
    /// `anyOf` branches (a value may match any: each branch's plan applies).
    pub branches: Vec<Plan>,
    /// `$ref`s whose target's plan applies too (see [`NullPlan::defs`]).
    pub refs: Vec<String>,
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.props.is_empty()
            && self.items.is_none()
            && self.branches.is_empty()
            && self.refs.is_empty()
    }
}

/// A schema's whole plan: the root's and each referenced definition's (by `$ref` text).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NullPlan {
    pub root: Plan,
    pub defs: HashMap<String, Plan>,
}

/// Reference hops and levels followed at most (the instance is bounded anyway).
pub const MAX_DEPTH: usize = 256;

impl NullPlan {
    /// Whether no null will ever be dropped (every property was required, or accepts null).
    pub fn is_empty(&self) -> bool {
        !has_drop(&self.root, self, &mut Vec::new())
    }

    /// Removes the nulls the rewrite introduced from `args`; true when something was removed.
    pub fn apply(&self, args: &mut Value) -> bool {
        self.apply_plan(&self.root, args, 0)
    }

    fn apply_plan(&self, plan: &Plan, v: &mut Value, depth: usize) -> bool {
        if depth > MAX_DEPTH {
            return false;
        }
        let mut changed = false;
        match v {
            Value::Object(map) => {
                for (name, drop, sub) in &plan.props {
                    match map.get_mut(name) {
                        Some(Value::Null) if *drop => {
                            map.remove(name);
                            changed = true;
                        }
                        Some(value) if !sub.is_empty() => {
                            changed |= self.apply_plan(sub, value, depth + 1);
                        }
                        _ => {}
                    }
                }
            }
            Value::Array(items) => {
                if let Some(plan) = &plan.items {
                    for item in items {
                        changed |= self.apply_plan(plan, item, depth + 1);
                    }
                }
            }
            _ => {}
        }
        for b in &plan.branches {
            changed |= self.apply_plan(b, v, depth + 1);
        }
        for r in &plan.refs {
            if let Some(p) = self.defs.get(r) {
                changed |= self.apply_plan(p, v, depth + 1);
            }
        }
        changed
    }
}

fn has_drop<'p>(plan: &'p Plan, all: &'p NullPlan, seen: &mut Vec<&'p str>) -> bool {
    plan.props
        .iter()
        .any(|(_, drop, sub)| *drop || has_drop(sub, all, seen))
        || plan
            .items
            .as_deref()
            .is_some_and(|p| has_drop(p, all, seen))
        || plan.branches.iter().any(|b| has_drop(b, all, seen))
        || plan.refs.iter().any(|r| {
            if seen.contains(&r.as_str()) {
                return false;
            }
            seen.push(r);
            all.defs.get(r).is_some_and(|p| has_drop(p, all, seen))
        })
}

/// Whether `schema` (a subschema of `root`) accepts `null`, read from its keywords; when that
/// cannot be told for sure, true (so the null is kept, never wrongly dropped).
pub fn accepts_null(root: &Value, schema: &Value, depth: usize) -> bool {
    let m = match schema {
        Value::Bool(b) => return *b,
        Value::Object(m) => m,
        _ => return true,
    };
    if depth > 32 {
        return true;
    }
    let by_type = match m.get("type") {
        Some(Value::String(t)) => t == "null",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "null"),
        _ => true,
    };
    let by_enum = match m.get("enum") {
        Some(Value::Array(vs)) => vs.contains(&Value::Null),
        _ => true,
    };
    let by_const = m.get("const").is_none_or(Value::is_null);
    let by_ref = match m.get("$ref") {
        Some(Value::String(r)) => resolve(root, r).is_none_or(|t| accepts_null(root, t, depth + 1)),
        _ => true,
    };
    let branches = |key: &str, all: bool| match m.get(key) {
        Some(Value::Array(bs)) if all => bs.iter().all(|b| accepts_null(root, b, depth + 1)),
        Some(Value::Array(bs)) => bs.iter().any(|b| accepts_null(root, b, depth + 1)),
        _ => true,
    };
    by_type
        && by_enum
        && by_const
        && by_ref
        && branches("anyOf", false)
        && branches("oneOf", false)
        && branches("allOf", true)
}
