//! `allOf` merged into its schema where that keeps the meaning.

use serde_json::{Map, Value};

use super::format::Format;
use super::warn::{Cx, Effect};

/// `allOf` whose parts use disjoint keywords (and disjoint property names) is merged into the
/// schema: the same meaning. Otherwise it is dropped with a warning saying what that changes.
pub(super) fn merge_all_of(cx: &mut Cx, m: &Map<String, Value>, path: &str) -> Map<String, Value> {
    let Some(all_of) = m.get("allOf") else {
        return m.clone();
    };
    let mut merged = m.clone();
    merged.remove("allOf");
    let parts = match all_of {
        Value::Array(parts) => parts,
        _ => return merged,
    };
    let mut result = merged.clone();
    for part in parts {
        let Value::Object(p) = part else {
            if part == &Value::Bool(true) {
                continue;
            }
            drop_all_of(
                cx,
                path,
                parts,
                "its parts could not be merged into one schema",
            );
            return merged;
        };
        for (k, v) in p {
            match (k.as_str(), result.get_mut(k)) {
                (_, None) => {
                    result.insert(k.clone(), v.clone());
                }
                ("required", Some(Value::Array(req))) => {
                    for r in v.as_array().into_iter().flatten() {
                        if !req.contains(r) {
                            req.push(r.clone());
                        }
                    }
                }
                ("properties", Some(Value::Object(props))) => {
                    let Value::Object(more) = v else { continue };
                    for (name, s) in more {
                        if props.contains_key(name) {
                            drop_all_of(
                                cx,
                                path,
                                parts,
                                "its parts constrain the same property and cannot be merged",
                            );
                            return merged;
                        }
                        props.insert(name.clone(), s.clone());
                    }
                }
                ("description" | "title", Some(_)) => {}
                (_, Some(existing)) if existing == v => {}
                _ => {
                    drop_all_of(
                        cx,
                        path,
                        parts,
                        &format!("its parts both use `{k}` and cannot be merged"),
                    );
                    return merged;
                }
            }
        }
    }
    if parts
        .iter()
        .any(|p| p.get("additionalProperties").is_some())
        && parts.len() + usize::from(merged.contains_key("properties")) > 1
    {
        drop_all_of(
            cx,
            path,
            parts,
            "a part limits additionalProperties, which changes meaning once merged",
        );
        return merged;
    }
    result
}

/// Dropping `allOf` drops its parts' constraints (accepts more); in strict mode, whose objects
/// are closed, the properties its parts declared are then refused too (accepts less).
fn drop_all_of(cx: &mut Cx, path: &str, parts: &[Value], why: &str) {
    let declares = parts.iter().any(|p| p.get("properties").is_some());
    let effect = if declares && cx.format != Format::Gemini {
        Effect::Other
    } else {
        Effect::More
    };
    cx.changed(path, "allOf", "dropped", why, effect);
}
