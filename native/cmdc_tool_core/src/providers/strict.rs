//! Strict mode (OpenAI, Anthropic): closed objects, every property required (optional ones
//! nullable), only the keywords the target supports.

use std::collections::BTreeSet;

use serde_json::{json, Map, Value};

use super::all_of::merge_all_of;
use super::format::Format;
use super::limits::check_openai_limits;
use super::pointer::child;
use super::warn::Cx;

const STRICT_FORMATS_OPENAI: &[&str] = &[
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
];
const STRICT_FORMATS_ANTHROPIC: &[&str] = &[
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "uri",
    "ipv4",
    "ipv6",
    "uuid",
];

/// Keywords strict mode keeps as they are (besides those rewritten below).
fn strict_keeps(format: Format, keyword: &str) -> bool {
    const COMMON: &[&str] = &["type", "enum", "description", "title", "pattern"];
    const OPENAI: &[&str] = &[
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minItems",
        "maxItems",
    ];
    COMMON.contains(&keyword)
        || (matches!(format, Format::OpenAI | Format::OpenAIResponses) && OPENAI.contains(&keyword))
}

pub(super) fn strict_root(cx: &mut Cx, schema: &Value) -> Value {
    let root = match schema {
        Value::Bool(true) => json!({"type": "object", "properties": {}}),
        Value::Object(m) if m.is_empty() => json!({"type": "object", "properties": {}}),
        other => other.clone(),
    };
    let mut out = strict_node(cx, &root, "", 0);
    if let Value::Object(m) = &mut out {
        if !m.contains_key("type") && !m.contains_key("anyOf") && !m.contains_key("$ref") {
            m.insert("type".into(), json!("object"));
            close_object(m);
        }
    }
    let is_object = out.get("type") == Some(&json!("object"));
    if !is_object {
        cx.warn(
            "",
            "type",
            format!(
                "{} requires the root of the parameters to be an object schema (not anyOf, \
                 $ref or another type); this tool will be refused",
                cx.target()
            ),
        );
    }
    if matches!(cx.format, Format::OpenAI | Format::OpenAIResponses) {
        check_openai_limits(cx, &out);
    }
    out
}

/// `additionalProperties: false`, every property required, `properties` present.
fn close_object(m: &mut Map<String, Value>) {
    let names: Vec<Value> = match m.get("properties") {
        Some(Value::Object(p)) => p.keys().map(|k| Value::String(k.clone())).collect(),
        _ => {
            m.insert("properties".into(), Value::Object(Map::new()));
            Vec::new()
        }
    };
    m.insert("required".into(), Value::Array(names));
    m.insert("additionalProperties".into(), Value::Bool(false));
}

fn is_object_schema(m: &Map<String, Value>) -> bool {
    match m.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "object"),
        None => m.contains_key("properties"),
        _ => false,
    }
}

fn strict_node(cx: &mut Cx, schema: &Value, path: &str, depth: usize) -> Value {
    let m = match schema {
        Value::Object(m) => m,
        Value::Bool(true) => return json!({}),
        Value::Bool(false) => return json!({"not": {}}),
        other => return other.clone(),
    };
    if depth > 64 {
        cx.warn(
            path,
            "depth",
            "schema nested deeper than 64 levels: cut here",
        );
        return json!({});
    }
    let m = &merge_all_of(cx, m, path);
    let mut out = Map::new();
    let mut required: BTreeSet<String> = BTreeSet::new();
    if let Some(Value::Array(req)) = m.get("required") {
        required.extend(req.iter().filter_map(|r| r.as_str().map(str::to_owned)));
    }
    for (key, value) in m {
        let here = child(path, key);
        match key.as_str() {
            "properties" | "required" | "additionalProperties" | "allOf" => {}
            "const" => {
                if !m.contains_key("enum") {
                    out.insert("enum".into(), Value::Array(vec![value.clone()]));
                }
            }
            "nullable" => {
                if value == &Value::Bool(true) {
                    out.insert("nullable".into(), Value::Bool(true));
                }
            }
            "items" => match value {
                Value::Object(_) | Value::Bool(_) => {
                    let item = strict_node(cx, value, &here, depth + 1);
                    out.insert("items".into(), item);
                }
                _ => cx.dropped(
                    path,
                    "items",
                    "a list of item schemas (tuple validation) is not supported",
                ),
            },
            "anyOf" | "oneOf" => {
                let Value::Array(branches) = value else {
                    continue;
                };
                if key == "oneOf" {
                    cx.one_of_as_any_of(path);
                }
                let branches: Vec<Value> = branches
                    .iter()
                    .enumerate()
                    .map(|(i, b)| strict_node(cx, b, &child(&here, &i.to_string()), depth + 1))
                    .collect();
                cx.append_any_of(&mut out, path, branches);
            }
            "$ref" => {
                out.insert(key.clone(), value.clone());
            }
            "$defs" | "definitions" => {
                let Value::Object(defs) = value else { continue };
                let defs: Map<String, Value> = defs
                    .iter()
                    .map(|(k, d)| (k.clone(), strict_node(cx, d, &child(&here, k), depth + 1)))
                    .collect();
                out.insert(key.clone(), Value::Object(defs));
            }
            "format" => {
                let allowed = if cx.format == Format::Anthropic {
                    STRICT_FORMATS_ANTHROPIC
                } else {
                    STRICT_FORMATS_OPENAI
                };
                match value.as_str() {
                    Some(f) if allowed.contains(&f) => {
                        out.insert(key.clone(), value.clone());
                    }
                    _ => cx.dropped(path, "format", &format!("format {value} is not supported")),
                }
            }
            "$schema" | "$id" | "$comment" => {}
            k if strict_keeps(cx.format, k) => {
                out.insert(key.clone(), value.clone());
            }
            k => cx.dropped(path, k, "keyword not supported"),
        }
    }
    // `nullable: true` (OpenAPI) becomes a type union with null.
    if out.remove("nullable").is_some() {
        out = match make_nullable(Value::Object(out)) {
            Value::Object(o) => o,
            _ => unreachable!("make_nullable keeps objects"),
        };
    }
    if is_object_schema(m) {
        if !out.contains_key("type") {
            out.insert("type".into(), json!("object"));
        }
        let mut props = Map::new();
        if let Some(Value::Object(p)) = m.get("properties") {
            for (name, sub) in p {
                let here = child(&child(path, "properties"), name);
                let converted = strict_node(cx, sub, &here, depth + 1);
                let converted = if required.contains(name) {
                    converted
                } else {
                    make_nullable(converted)
                };
                props.insert(name.clone(), converted);
            }
        }
        // A required name without a schema of its own: any value, still required.
        for name in &required {
            if !props.contains_key(name) {
                props.insert(name.clone(), json!({}));
            }
        }
        match m.get("additionalProperties") {
            None | Some(Value::Bool(false)) => {}
            Some(Value::Object(a)) if a.is_empty() => cx.dropped(
                path,
                "additionalProperties",
                "extra properties are never allowed",
            ),
            Some(_) => cx.dropped(
                path,
                "additionalProperties",
                "extra properties are never allowed, only the declared ones",
            ),
        }
        out.insert("properties".into(), Value::Object(props));
        close_object(&mut out);
    }
    Value::Object(out)
}

/// Lets a schema also accept `null`, as strict mode's stand-in for "optional".
pub fn make_nullable(schema: Value) -> Value {
    let Value::Object(mut m) = schema else {
        return schema; // `true` accepts null already; `false` stays false
    };
    if m.is_empty() {
        return Value::Object(m);
    }
    let accepts_null_type = match m.get("type") {
        Some(Value::String(t)) => t == "null",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "null"),
        _ => false,
    };
    if let Some(Value::Array(values)) = m.get_mut("enum") {
        if !values.contains(&Value::Null) {
            values.push(Value::Null);
        }
    }
    let has_enum = m.contains_key("enum");
    match m.get_mut("type") {
        Some(Value::String(t)) if !accepts_null_type => {
            let t = std::mem::take(t);
            m.insert("type".into(), json!([t, "null"]));
        }
        Some(Value::Array(ts)) if !accepts_null_type => ts.push(json!("null")),
        Some(_) => {}
        None if has_enum => {}
        None => {
            if let Some(Value::Array(branches)) = m.get_mut("anyOf") {
                if !branches
                    .iter()
                    .any(|b| b.get("type") == Some(&json!("null")))
                {
                    branches.push(json!({"type": "null"}));
                }
            } else {
                // `$ref` and anything else: a union with null around it.
                let mut wrapper = Map::new();
                if let Some(d) = m.remove("description") {
                    wrapper.insert("description".into(), d);
                }
                wrapper.insert(
                    "anyOf".into(),
                    Value::Array(vec![Value::Object(m), json!({"type": "null"})]),
                );
                return Value::Object(wrapper);
            }
        }
    }
    Value::Object(m)
}
