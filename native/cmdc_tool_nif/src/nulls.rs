//! Strict mode's round trip on terms: dropping the nulls a strict rewrite introduced from a
//! call's arguments, as `cmdc_tool_core::providers::round_trip` planned them. Used by schema
//! validation (`schema.rs`), below it: it knows plans, not schemas.

use cmdc_tool_core::providers::round_trip::{NullPlan, Plan, MAX_DEPTH};
use rustler::{Encoder, Env, Term};

use crate::atoms;
use crate::term;

/// `args` without the nulls `plan` (a schema's strict rewrite) introduced (the keys absent
/// instead, or their defaults), or `None` (nothing to
/// drop). May walk the whole term: callers run it on a dirty scheduler.
pub(crate) fn without_nulls<'a>(env: Env<'a>, plan: &NullPlan, args: Term<'a>) -> Option<Term<'a>> {
    if plan.is_empty() {
        return None;
    }
    drop_nulls(env, plan, &plan.root, args, 0)
}

/// `term` with the plan's nulls removed, or `None` when nothing was removed.
fn drop_nulls<'a>(
    env: Env<'a>,
    all: &NullPlan,
    plan: &Plan,
    term: Term<'a>,
    depth: usize,
) -> Option<Term<'a>> {
    if depth > MAX_DEPTH {
        return None;
    }
    let mut current = term;
    let mut changed = false;
    if term.is_map() {
        for prop in &plan.props {
            let key = prop.name.as_str().encode(env);
            let Ok(value) = current.map_get(key) else {
                continue;
            };
            let null = value == atoms::nil().encode(env);
            if let (true, Some(default)) = (null, &prop.default) {
                current = current.map_put(key, term::from_value(env, default)).ok()?;
                changed = true;
            } else if prop.drop && null {
                current = current.map_remove(key).ok()?;
                changed = true;
            } else if !prop.plan.is_empty() {
                let sub = &prop.plan;
                if let Some(v) = drop_nulls(env, all, sub, value, depth + 1) {
                    current = current.map_put(key, v).ok()?;
                    changed = true;
                }
            }
        }
    } else if let (true, Some(items)) = (term.is_list(), plan.items.as_deref()) {
        let list: Vec<Term<'a>> = term.decode().ok()?;
        let mut out = Vec::with_capacity(list.len());
        for item in list {
            match drop_nulls(env, all, items, item, depth + 1) {
                Some(v) => {
                    out.push(v);
                    changed = true;
                }
                None => out.push(item),
            }
        }
        if changed {
            current = out.encode(env);
        }
    }
    // A branch's plan applies to the value as it came (a branch is told by its keys, which
    // dropping nulls does not add).
    let before = current;
    let others = plan
        .branches
        .iter()
        .filter(|b| b.keys.is_none() || branch_takes(b, before))
        .chain(plan.refs.iter().filter_map(|r| all.defs.get(r)));
    for p in others {
        if let Some(v) = drop_nulls(env, all, p, current, depth + 1) {
            current = v;
            changed = true;
        }
    }
    changed.then_some(current)
}

/// Whether an `anyOf` branch's plan applies to `term`: not an object, or an object whose keys
/// the branch lists (see `Plan::keys`).
fn branch_takes(branch: &Plan, term: Term) -> bool {
    let Some(iter) = rustler::types::map::MapIterator::new(term) else {
        return true;
    };
    let mut keys = Vec::new();
    for (k, _) in iter {
        match k.decode::<&str>() {
            Ok(k) => keys.push(k),
            Err(_) => return false,
        }
    }
    branch.takes_keys(keys.into_iter())
}
