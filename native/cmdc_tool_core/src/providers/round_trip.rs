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
    /// The optional properties the rewrite made nullable, and those with plans below.
    pub props: Vec<Prop>,
    pub items: Option<Box<Plan>>,
    /// `anyOf` branches (a value may match any: each branch's plan applies).
    pub branches: Vec<Plan>,
    /// `$ref`s whose target's plan applies too (see [`NullPlan::defs`]).
    pub refs: Vec<String>,
    /// For an `anyOf` branch that is a closed object: the properties it lists. An object with
    /// another key cannot be that branch, so its plan (its defaults above all) does not apply:
    /// `{"kind": null, "r": 1}` is a `Circle`, not a `Square` whose default `kind` is "square".
    pub keys: Option<Vec<String>>,
}

impl Plan {
    /// Whether a branch with this plan can hold an object with these keys.
    pub fn takes_keys<'k>(&self, mut keys: impl Iterator<Item = &'k str>) -> bool {
        match &self.keys {
            Some(listed) => keys.all(|k| listed.iter().any(|l| l == k)),
            None => true,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.props.is_empty()
            && self.items.is_none()
            && self.branches.is_empty()
            && self.refs.is_empty()
    }
}

/// One property of a [`Plan`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Prop {
    pub name: String,
    /// A `null` here stands for the key left out: removed (the original refuses null there).
    pub drop: bool,
    /// The original's `default` for this optional property: a `null` here stands for the key
    /// left out, so the tool gets the default (whether or not the original accepts null).
    pub default: Option<Value>,
    /// The plan of the property's value.
    pub plan: Plan,
}

/// A schema's whole plan: the root's and each referenced definition's (by `$ref` text).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NullPlan {
    pub root: Plan,
    pub defs: HashMap<String, Plan>,
    /// Whether a null may stand for a property with a default (see [`NullPlan::has_defaults`]).
    pub defaults: bool,
}

/// Reference hops and levels followed at most (the instance is bounded anyway).
pub const MAX_DEPTH: usize = 256;

impl NullPlan {
    /// Whether no null will ever be dropped or replaced (every property was required, or
    /// accepts null and has no default).
    pub fn is_empty(&self) -> bool {
        !has_prop(&self.root, self, &mut Vec::new(), &|p| {
            p.drop || p.default.is_some()
        })
    }

    /// Whether a null may stand for a property with a default: then even a call the schema
    /// accepts as it is goes through [`NullPlan::apply`].
    pub fn has_defaults(&self) -> bool {
        self.defaults
    }

    /// The plan with [`NullPlan::defaults`] worked out (read on every valid call, so kept).
    pub fn new(root: Plan, defs: HashMap<String, Plan>) -> NullPlan {
        let mut plan = NullPlan {
            root,
            defs,
            defaults: false,
        };
        plan.defaults = has_prop(&plan.root, &plan, &mut Vec::new(), &|p| p.default.is_some());
        plan
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
                for prop in &plan.props {
                    match (map.get_mut(&prop.name), &prop.default) {
                        (Some(value @ Value::Null), Some(default)) => {
                            *value = default.clone();
                            changed = true;
                        }
                        (Some(Value::Null), None) if prop.drop => {
                            map.remove(&prop.name);
                            changed = true;
                        }
                        (Some(value), _) if !prop.plan.is_empty() => {
                            changed |= self.apply_plan(&prop.plan, value, depth + 1);
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
            if let Value::Object(map) = &*v {
                if !b.takes_keys(map.keys().map(String::as_str)) {
                    continue;
                }
            }
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

/// Whether a property of `plan` (or below it) satisfies `pred`.
fn has_prop<'p>(
    plan: &'p Plan,
    all: &'p NullPlan,
    seen: &mut Vec<&'p str>,
    pred: &dyn Fn(&Prop) -> bool,
) -> bool {
    plan.props
        .iter()
        .any(|p| pred(p) || has_prop(&p.plan, all, seen, pred))
        || plan
            .items
            .as_deref()
            .is_some_and(|p| has_prop(p, all, seen, pred))
        || plan.branches.iter().any(|b| has_prop(b, all, seen, pred))
        || plan.refs.iter().any(|r| {
            if seen.contains(&r.as_str()) {
                return false;
            }
            seen.push(r);
            all.defs
                .get(r)
                .is_some_and(|p| has_prop(p, all, seen, pred))
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
