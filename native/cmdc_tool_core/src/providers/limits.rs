//! OpenAI strict-mode limits (structured outputs), checked and reported as warnings.

use serde_json::Value;

use super::warn::Cx;

/// OpenAI strict-mode limits (structured outputs).
pub const OPENAI_MAX_PROPERTIES: usize = 5_000;
pub const OPENAI_MAX_DEPTH: usize = 10;
pub const OPENAI_MAX_ENUM_VALUES: usize = 1_000;
pub const OPENAI_MAX_CHARS: usize = 120_000;

pub(super) fn check_openai_limits(cx: &mut Cx, schema: &Value) {
    #[derive(Default)]
    struct Count {
        properties: usize,
        depth: usize,
        enum_values: usize,
        chars: usize,
    }
    fn walk(v: &Value, depth: usize, c: &mut Count) {
        let Value::Object(m) = v else { return };
        if let Some(Value::Object(props)) = m.get("properties") {
            c.properties += props.len();
            c.depth = c.depth.max(depth + 1);
            for (name, sub) in props {
                c.chars += name.chars().count();
                walk(sub, depth + 1, c);
            }
        }
        if let Some(Value::Array(values)) = m.get("enum") {
            c.enum_values += values.iter().filter(|v| !v.is_null()).count();
            for v in values {
                if let Value::String(s) = v {
                    c.chars += s.chars().count();
                }
            }
        }
        for key in ["$defs", "definitions"] {
            if let Some(Value::Object(defs)) = m.get(key) {
                for (name, d) in defs {
                    c.chars += name.chars().count();
                    walk(d, depth, c);
                }
            }
        }
        if let Some(items) = m.get("items") {
            walk(items, depth, c);
        }
        if let Some(Value::Array(bs)) = m.get("anyOf") {
            for b in bs {
                walk(b, depth, c);
            }
        }
    }
    let mut c = Count::default();
    walk(schema, 0, &mut c);
    let checks = [
        (
            c.properties,
            OPENAI_MAX_PROPERTIES,
            "object properties in total",
        ),
        (c.depth, OPENAI_MAX_DEPTH, "levels of object nesting"),
        (
            c.enum_values,
            OPENAI_MAX_ENUM_VALUES,
            "enum values in total",
        ),
        (
            c.chars,
            OPENAI_MAX_CHARS,
            "characters of property names, definition names and enum values",
        ),
    ];
    for (n, max, what) in checks {
        if n > max {
            cx.warn(
                "",
                "limit",
                format!("the schema has {n} {what}; OpenAI strict mode allows at most {max}"),
            );
        }
    }
}
