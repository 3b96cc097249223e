//! Which dialect a schema is written in, chosen by evidence: its `$schema` when it has one (or
//! the draft the caller asks for, e.g. 2020-12 for MCP input schemas); otherwise Draft 7,
//! unless it uses keywords only a later draft defines (`prefixItems`, `$defs`, ...: read as
//! 2020-12) or OpenAPI 3.0's (`nullable`, a boolean `exclusiveMinimum`: read as OpenAPI 3.0,
//! i.e. rewritten into the JSON Schema that says the same). Every path that reads a tool's
//! schema (compiling it, converting it for a provider, the strict round trip) reads it
//! through [`read`], so they agree; the choice is said as a note the conversions warn with.

use std::borrow::Cow;

use jsonschema::Draft;
use serde_json::{json, Map, Value};

/// Keywords only Draft 2019-09 / 2020-12 define.
const LATER: &[&str] = &[
    "prefixItems",
    "$defs",
    "dependentRequired",
    "dependentSchemas",
    "unevaluatedProperties",
    "unevaluatedItems",
    "minContains",
    "maxContains",
    "$anchor",
    "$dynamicRef",
    "$dynamicAnchor",
    "$recursiveRef",
];

/// Schema nodes looked at, at most, for evidence (tool schemas are small).
const MAX_NODES: usize = 10_000;

/// A schema as read in its dialect.
#[derive(Debug, Clone)]
pub struct Reading<'a> {
    /// The schema in JSON Schema (OpenAPI 3.0's keywords rewritten), borrowed when unchanged.
    pub schema: Cow<'a, Value>,
    /// The draft it is validated under when it has no `$schema` (`None`: Draft 7, the default).
    pub draft: Option<Draft>,
    /// Why another dialect than the default was chosen, for a warning.
    pub note: Option<String>,
}

#[derive(Default)]
struct Evidence {
    later: Option<String>,
    openapi: Option<String>,
    nodes: usize,
}

/// Reads `schema` in its dialect; `asked`: the draft the caller names for a schema without
/// `$schema` (it wins over evidence, as `$schema` does).
pub fn read(schema: &Value, asked: Option<Draft>) -> Reading<'_> {
    let plain = Reading {
        schema: Cow::Borrowed(schema),
        draft: asked,
        note: None,
    };
    if asked.is_some() || schema.get("$schema").is_some() {
        return plain;
    }
    let mut evidence = Evidence::default();
    scan(schema, &mut evidence, 0);
    let mut notes = Vec::new();
    let mut reading = plain;
    if let Some(keyword) = &evidence.later {
        reading.draft = Some(Draft::Draft202012);
        notes.push(format!(
            "it has no `$schema` and uses `{keyword}`, which only JSON Schema 2019-09/2020-12 \
             define, so it is read as 2020-12"
        ));
    }
    if let Some(keyword) = &evidence.openapi {
        reading.schema = Cow::Owned(from_openapi(schema, 0));
        notes.push(format!(
            "it has no `$schema` and uses OpenAPI 3.0's {keyword}, so it is read as OpenAPI 3.0 \
             (`nullable: true` accepts null, a boolean `exclusiveMinimum`/`exclusiveMaximum` \
             makes `minimum`/`maximum` exclusive)"
        ));
    }
    if !notes.is_empty() {
        reading.note = Some(format!("the schema's dialect: {}", notes.join("; ")));
    }
    reading
}

fn scan(v: &Value, ev: &mut Evidence, depth: usize) {
    ev.nodes += 1;
    if depth > 64 || ev.nodes > MAX_NODES {
        return;
    }
    match v {
        Value::Object(m) => {
            for (k, sub) in m {
                if ev.later.is_none() && LATER.contains(&k.as_str()) {
                    ev.later = Some(k.clone());
                }
                if ev.openapi.is_none() {
                    ev.openapi = match (k.as_str(), sub) {
                        ("nullable", Value::Bool(true)) => Some("`nullable`".into()),
                        ("exclusiveMinimum" | "exclusiveMaximum", Value::Bool(_)) => {
                            Some(format!("boolean `{k}`"))
                        }
                        _ => None,
                    };
                }
                // Values of these are names or data, not schemas.
                if !matches!(
                    k.as_str(),
                    "enum" | "const" | "default" | "examples" | "example"
                ) {
                    scan(sub, ev, depth + 1);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|i| scan(i, ev, depth + 1)),
        _ => {}
    }
}

/// OpenAPI 3.0's keywords in JSON Schema: `nullable: true` adds `null` to `type` (and to
/// `enum`); a boolean exclusive bound becomes the numeric form. `nullable` itself stays (an
/// annotation to JSON Schema), so conversions still see what the author wrote.
fn from_openapi(v: &Value, depth: usize) -> Value {
    let m = match v {
        Value::Object(m) if depth <= 64 => m,
        Value::Array(items) if depth <= 64 => {
            return Value::Array(items.iter().map(|i| from_openapi(i, depth + 1)).collect())
        }
        other => return other.clone(),
    };
    let mut out = Map::with_capacity(m.len());
    for (k, sub) in m {
        let data = matches!(
            k.as_str(),
            "enum" | "const" | "default" | "examples" | "example"
        );
        out.insert(
            k.clone(),
            if data {
                sub.clone()
            } else {
                from_openapi(sub, depth + 1)
            },
        );
    }
    for (key, bound) in [
        ("exclusiveMinimum", "minimum"),
        ("exclusiveMaximum", "maximum"),
    ] {
        match out.get(key) {
            Some(Value::Bool(true)) => {
                out.remove(key);
                if let Some(n) = out.remove(bound) {
                    out.insert(key.into(), n);
                }
            }
            Some(Value::Bool(false)) => {
                out.remove(key);
            }
            _ => {}
        }
    }
    if out.get("nullable") == Some(&Value::Bool(true)) {
        match out.get_mut("type") {
            Some(Value::String(t)) if t != "null" => {
                let t = std::mem::take(t);
                out.insert("type".into(), json!([t, "null"]));
            }
            Some(Value::Array(ts)) if !ts.contains(&json!("null")) => ts.push(json!("null")),
            _ => {}
        }
        if let Some(Value::Array(vs)) = out.get_mut("enum") {
            if !vs.contains(&Value::Null) {
                vs.push(Value::Null);
            }
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{check, compile, Documents};

    fn valid(schema: &Value, v: Value) -> bool {
        let r = read(schema, None);
        let validator = compile(&r.schema, Documents::default(), r.draft).unwrap();
        check(&validator, &v).is_ok()
    }

    #[test]
    fn without_evidence_it_is_draft_7() {
        let s = json!({"type": "object", "properties": {"a": {"type": "string"}}});
        let r = read(&s, None);
        assert!(r.draft.is_none() && r.note.is_none());
        assert!(matches!(r.schema, Cow::Borrowed(_)));
    }

    #[test]
    fn prefix_items_means_2020_12() {
        let s = json!({"type": "object", "properties": {"at": {"type": "array",
            "prefixItems": [{"type": "number"}, {"type": "number"}]}}});
        assert!(!valid(&s, json!({"at": [null, "x"]})));
        assert!(valid(&s, json!({"at": [1, 2.5]})));
        let note = read(&s, None).note.unwrap();
        assert!(
            note.contains("prefixItems") && note.contains("2020-12"),
            "{note}"
        );
    }

    #[test]
    fn openapi_keywords_are_read_as_openapi() {
        let s = json!({"type": "object", "properties": {
            "limit": {"type": "integer", "minimum": 0, "exclusiveMinimum": true},
            "tag": {"type": "string", "nullable": true}}});
        assert!(valid(&s, json!({"limit": 1, "tag": null})));
        assert!(!valid(&s, json!({"limit": 0})));
        let note = read(&s, None).note.unwrap();
        assert!(note.contains("OpenAPI 3.0"), "{note}");
    }

    #[test]
    fn schema_keyword_and_asked_draft_win() {
        let s = json!({"$schema": "http://json-schema.org/draft-07/schema#", "$defs": {}});
        assert!(read(&s, None).note.is_none());
        let s = json!({"nullable": true, "type": "string"});
        let r = read(&s, Some(Draft::Draft202012));
        assert_eq!(r.draft, Some(Draft::Draft202012));
        assert!(r.note.is_none());
    }

    #[test]
    fn data_is_not_evidence() {
        let s = json!({"enum": [{"nullable": true}], "default": {"$defs": 1}});
        assert!(read(&s, None).note.is_none());
    }
}
