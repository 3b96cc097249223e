//! NIFs for strict mode's round trip: dropping the nulls a strict rewrite introduced from a
//! call's arguments (`cmdc_tool_core::providers::round_trip`), and finding the tool a model
//! named by a provider's mapped name (`cmdc_tool_core::names`).

use cmdc_tool_core::names;
use cmdc_tool_core::providers::round_trip::{NullPlan, Plan, MAX_DEPTH};
use cmdc_tool_core::providers::tool_name;
use rustler::{Encoder, Env, ResourceArc, Term};

use crate::atoms;
use crate::error::Result;
use crate::schema::Schema;
use crate::term;

/// `args` without the nulls the OpenAI strict rewrite of the schema introduced (the keys
/// absent instead, or their defaults), or `nil` when it has none of them. Only called after a validation failed,
/// so it runs on a dirty scheduler and may walk the whole term.
#[rustler::nif(schedule = "DirtyCpu")]
fn schema_drop_nulls<'a>(
    env: Env<'a>,
    schema: ResourceArc<Schema>,
    args: Term<'a>,
) -> Option<Term<'a>> {
    without_nulls(env, &schema, args)
}

/// `args` without the nulls the strict rewrite of `schema` introduced, or `None` (nothing to
/// drop). May walk the whole term: callers run it on a dirty scheduler.
pub(crate) fn without_nulls<'a>(env: Env<'a>, schema: &Schema, args: Term<'a>) -> Option<Term<'a>> {
    let plan = schema.null_plan();
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
    let others = plan
        .branches
        .iter()
        .chain(plan.refs.iter().filter_map(|r| all.defs.get(r)));
    for p in others {
        if let Some(v) = drop_nulls(env, all, p, current, depth + 1) {
            current = v;
            changed = true;
        }
    }
    changed.then_some(current)
}

/// The registered name a model meant by `called` (a name some provider was given), or `nil`.
/// Bounded: each name is at most 128 bytes and mapped twice; lists of tools are small.
#[rustler::nif]
fn tool_name_original(registered: Vec<String>, called: &str) -> Option<String> {
    names::original(registered.iter().map(String::as_str), called).map(str::to_owned)
}

/// The name of an MCP server's tool: `server__tool` made to follow the one tool-name rule.
#[rustler::nif]
fn tool_name_namespaced(server: &str, tool: &str) -> String {
    names::namespaced(server, tool)
}

/// `{:ok, name}` when `name` follows the one tool-name rule, else `{:error, message}`.
#[rustler::nif]
fn tool_name_check(name: &str) -> Result<&str> {
    names::check(name)?;
    Ok(name)
}

/// `{:ok, name_given}`: the name `format` is given for the tool `name`.
#[rustler::nif]
fn tool_name_for(name: &str, format: Term) -> Result<String> {
    Ok(tool_name(name, crate::options::format(format)?).into_owned())
}
