//! The non-strict root for Anthropic and MCP: an object schema.

use serde_json::{json, Value};

use super::warn::Cx;

/// Anthropic and MCP want an object schema at the root: `{}`/`true` become an empty object
/// schema and a missing `type` is added when the root describes an object.
pub(super) fn object_root(cx: &mut Cx, schema: &Value) -> Value {
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
