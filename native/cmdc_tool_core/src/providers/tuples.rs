//! Tuples (`prefixItems`, Draft 7's `items` list) for targets without positional items: one
//! `items` that takes any of the positions' schemas, the length kept.

use serde_json::{json, Map, Value};

use super::warn::{Cx, Effect};

/// `m` with a tuple rewritten as an array of the union of its item schemas (the length bounds
/// kept, and fixed when no further item is allowed); the same map when `m` is no tuple.
pub(super) fn tuple_as_array(
    cx: &mut Cx,
    m: &Map<String, Value>,
    path: &str,
) -> Map<String, Value> {
    let (prefix, tail_key) = match (m.get("prefixItems"), m.get("items")) {
        (Some(Value::Array(p)), _) => (p, "items"),
        (None, Some(Value::Array(p))) => (p, "additionalItems"),
        _ => return m.clone(),
    };
    let tail = m
        .get(tail_key)
        .filter(|_| tail_key != "items" || m.contains_key("prefixItems"));
    let mut out = m.clone();
    for key in ["prefixItems", "items", "additionalItems"] {
        out.remove(key);
    }
    let mut schemas: Vec<Value> = Vec::new();
    for s in prefix
        .iter()
        .chain(tail.filter(|t| **t != Value::Bool(false)))
    {
        if !schemas.contains(s) {
            schemas.push(s.clone());
        }
    }
    let n = prefix.len() as u64;
    if tail == Some(&Value::Bool(false)) {
        let max = out
            .get("maxItems")
            .and_then(Value::as_u64)
            .map_or(n, |m| m.min(n));
        out.insert("maxItems".into(), json!(max));
    }
    let items = match schemas.len() {
        0 => None,
        1 => schemas.pop(),
        _ => Some(json!({ "anyOf": schemas })),
    };
    if let Some(items) = items {
        out.insert("items".into(), items);
    }
    let exact = schemas_all_equal(prefix) && tail.is_none_or(|t| Some(t) == prefix.first());
    if !exact {
        cx.changed(
            path,
            "prefixItems",
            "rewritten as `items` taking any of the positions' schemas",
            "the target has no positional items (tuples)",
            Effect::More,
        );
    }
    out
}

fn schemas_all_equal(prefix: &[Value]) -> bool {
    prefix.windows(2).all(|w| w[0] == w[1])
}
