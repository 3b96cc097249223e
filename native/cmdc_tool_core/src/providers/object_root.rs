//! The non-strict root for Anthropic, Gemini's `parametersJsonSchema` and MCP: an object
//! schema; for MCP, in the draft it is validated by.

use serde_json::{json, Value};

use super::pointer::resolve;
use super::warn::Cx;

/// Anthropic and MCP want an object schema at the root: `{}`/`true` become an empty object
/// schema and a missing `type` is added when the root describes an object.
pub(super) fn object_root(cx: &mut Cx, schema: &Value) -> Value {
    let inlined = inline_root_ref(schema);
    let schema = &inlined;
    match schema {
        Value::Bool(true) => json!({"type": "object", "properties": {}}),
        Value::Object(m) if m.is_empty() => json!({"type": "object", "properties": {}}),
        Value::Object(m) => match m.get("type") {
            None => {
                let mut m = m.clone();
                m.insert("type".into(), json!("object"));
                Value::Object(m)
            }
            Some(Value::String(t)) if t == "object" => schema.clone(),
            Some(other) => {
                cx.warn(
                    "",
                    "type",
                    format!(
                        "tool arguments are an object, but the schema's root has type {other}; \
                         {} requires an object schema",
                        cx.format.label()
                    ),
                );
                schema.clone()
            }
        },
        other => {
            cx.warn(
                "",
                "type",
                format!("the parameters schema {other} accepts no arguments object"),
            );
            other.clone()
        }
    }
}

/// A root that is only a `$ref` to one of its definitions (Pydantic's form for a recursive
/// model) with that definition's keywords in place (its `$defs` kept for the references inside):
/// the same meaning, and a root with `type: object`, which the providers require.
pub(super) fn inline_root_ref(schema: &Value) -> Value {
    let Value::Object(m) = schema else {
        return schema.clone();
    };
    let target = match m.get("$ref") {
        Some(Value::String(r)) if !m.contains_key("type") => resolve(schema, r),
        _ => None,
    };
    let Some(Value::Object(target)) = target else {
        return schema.clone();
    };
    let mut out = m.clone();
    out.remove("$ref");
    for (k, v) in target {
        out.entry(k.clone()).or_insert_with(|| v.clone());
    }
    Value::Object(out)
}

/// MCP (and Gemini's `parametersJsonSchema`) read a schema without `$schema` as JSON Schema
/// 2020-12; this library validates
/// such a schema as Draft 7. Where the two drafts read the schema differently (a `$ref` with siblings,
/// `items` as a list, `additionalItems`, `dependencies`), `$schema` says Draft 7.
pub(super) fn mcp_root(cx: &mut Cx, schema: &Value) -> Value {
    let mut out = object_root(cx, schema);
    if let Value::Object(m) = &mut out {
        if !m.contains_key("$schema") && draft7_reading_differs(schema, 0) {
            m.insert("$schema".into(), json!(DRAFT7));
        }
    }
    out
}

pub const DRAFT7: &str = "http://json-schema.org/draft-07/schema#";

fn draft7_reading_differs(schema: &Value, depth: usize) -> bool {
    if depth > 64 {
        return false;
    }
    match schema {
        Value::Object(m) => {
            (m.contains_key("$ref") && m.len() > 1)
                || matches!(m.get("items"), Some(Value::Array(_)))
                || m.contains_key("additionalItems")
                || m.contains_key("dependencies")
                || m.values().any(|v| draft7_reading_differs(v, depth + 1))
        }
        Value::Array(vs) => vs.iter().any(|v| draft7_reading_differs(v, depth + 1)),
        _ => false,
    }
}
