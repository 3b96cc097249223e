//! Gemini `functionDeclarations` parameters: the OpenAPI 3.0 subset Gemini accepts.

use serde_json::{json, Map, Value};

use super::all_of::merge_all_of;
use super::pointer::{at, child, resolve};
use super::round_trip::accepts_null;
use super::strict::{nullable_ignored, types_of};
use super::tuples::tuple_as_array;
use super::warn::{Cx, Effect};

/// Annotations Gemini takes: a `$ref`'s own win over its target's.
const ANNOTATIONS: &[&str] = &["description", "title", "default", "example"];

const GEMINI_KEEPS: &[&str] = &[
    "type",
    "description",
    "title",
    "nullable",
    "enum",
    "maxItems",
    "minItems",
    "required",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "example",
    "default",
    "minimum",
    "maximum",
    "propertyOrdering",
];

pub(super) fn gemini_root(cx: &mut Cx, schema: &Value) -> Option<Value> {
    let out = Walk {
        cx: &mut *cx,
        root: schema,
        refs: Vec::new(),
    }
    .node(schema, "");
    if let Value::Object(m) = &out {
        let props_empty = match m.get("properties") {
            None => true,
            Some(Value::Object(p)) => p.is_empty(),
            _ => false,
        };
        let is_object = m.get("type").is_none_or(|t| t == "object");
        if m.is_empty() || (is_object && props_empty && !m.contains_key("anyOf")) {
            // Gemini refuses an object schema without properties: the declaration omits
            // `parameters`, and the model then sends no arguments at all.
            if takes_keys(schema) {
                cx.changed(
                    "",
                    "properties",
                    "omitted with `parameters`",
                    "an object without properties is refused, so the declaration has no \
                     parameters and the model can send no arguments, while the original \
                     takes any keys (a tool that takes none says `additionalProperties: \
                     false`)",
                    Effect::Less,
                );
            }
            return None;
        }
        if !is_object {
            cx.warn(
                "",
                "type",
                "Gemini function parameters must be an object schema; this root is not",
            );
        }
    }
    let mut out = out;
    if let Value::Object(m) = &mut out {
        if !m.contains_key("type") && !m.contains_key("anyOf") {
            m.insert("type".into(), json!("object"));
        }
    }
    Some(out)
}

/// Whether an object schema without properties still takes some key: not closed by
/// `additionalProperties: false`, `maxProperties: 0` or `propertyNames: false`.
fn takes_keys(schema: &Value) -> bool {
    let Value::Object(m) = schema else {
        return schema != &Value::Bool(false);
    };
    let closed = m.get("additionalProperties") == Some(&Value::Bool(false))
        && m.get("patternProperties")
            .is_none_or(|p| p.as_object().is_none_or(|p| p.is_empty()));
    !(closed
        || m.get("maxProperties").and_then(Value::as_u64) == Some(0)
        || m.get("propertyNames") == Some(&Value::Bool(false)))
}

/// Sets `minimum`/`maximum`, keeping the tighter bound when one is already there.
fn set_bound(out: &mut Map<String, Value>, bound: &str, value: Value) {
    let tighter = match (out.get(bound).and_then(Value::as_f64), value.as_f64()) {
        (Some(have), Some(new)) => (bound == "minimum") == (new > have),
        _ => true,
    };
    if tighter {
        out.insert(bound.into(), value);
    }
}

fn valid_gemini_property(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// One conversion: the warnings, the root document (for `$ref`) and the references being
/// inlined (to stop at recursion).
struct Walk<'c, 'w> {
    cx: &'c mut Cx<'w>,
    root: &'c Value,
    refs: Vec<String>,
}

/// One schema being converted: the keywords written so far, and the type and nullability
/// gathered from `type`, `nullable`, `null` enum values and `null` branches.
struct Node {
    out: Map<String, Value>,
    nullable: bool,
    types: Vec<String>,
}

impl Node {
    fn new(m: &Map<String, Value>) -> Node {
        let mut types = types_of(m);
        let null_type = types.iter().any(|t| t == "null");
        types.retain(|t| t != "null");
        Node {
            out: Map::new(),
            // `nullable` is OpenAPI, not JSON Schema: the original refuses null (see keyword()).
            nullable: null_type,
            types,
        }
    }

    fn has_type(&self, t: &str) -> bool {
        self.types.iter().any(|have| have == t)
    }

    /// An enum of strings implies `type: string` when no type is given.
    fn string_enum(&mut self, values: Vec<Value>) {
        self.out.insert("enum".into(), Value::Array(values));
        if self.types.is_empty() {
            self.types.push("string".into());
        }
    }
}

impl Walk<'_, '_> {
    fn node(&mut self, schema: &Value, path: &str) -> Value {
        let m = match schema {
            Value::Object(m) => m,
            Value::Bool(true) => return json!({}),
            Value::Bool(false) => {
                self.cx.changed(
                    path,
                    "false",
                    "written as {}",
                    "no Gemini schema refuses every value",
                    Effect::More,
                );
                return json!({});
            }
            other => return other.clone(),
        };
        if self.refs.len() > 32 {
            self.cx
                .warn(path, "$ref", "references nested deeper than 32: cut here");
            return json!({});
        }
        if let Some(Value::String(r)) = m.get("$ref") {
            return self.inline_ref(m, r, path);
        }
        let m = &merge_all_of(self.cx, m, path);
        let m = &tuple_as_array(self.cx, m, path);
        let mut node = Node::new(m);
        for (key, value) in m {
            self.keyword(&mut node, m, key, value, path);
        }
        finish(self.cx, node, path)
    }

    /// `$ref`: its target inlined (Gemini has no references); sibling annotations win.
    fn inline_ref(&mut self, m: &Map<String, Value>, r: &str, path: &str) -> Value {
        if self.refs.iter().any(|seen| seen == r) {
            self.cx.warn(
                path,
                "$ref",
                format!(
                    "recursive `$ref` {r:?} at {} cannot be inlined for Gemini: replaced by an \
                     unconstrained object",
                    at(path)
                ),
            );
            let mut o = Map::new();
            o.insert("type".into(), json!("object"));
            if let Some(d) = m.get("description") {
                o.insert("description".into(), d.clone());
            }
            return Value::Object(o);
        }
        let root = self.root;
        let Some(target) = resolve(root, r) else {
            self.cx.dropped(
                path,
                "$ref",
                &format!("reference {r:?} does not resolve inside the schema"),
            );
            let mut rest = m.clone();
            rest.remove("$ref");
            return self.node(&Value::Object(rest), path);
        };
        // Siblings of `$ref` constrain too (2019-09 on): the target and them, as one `allOf`,
        // which `merge_all_of` merges where that keeps the meaning; annotations win.
        let mut siblings = m.clone();
        siblings.remove("$ref");
        let constraints: Map<String, Value> = siblings
            .iter()
            .filter(|(k, _)| !ANNOTATIONS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let target = if constraints.is_empty() {
            target.clone()
        } else {
            json!({ "allOf": [target, constraints] })
        };
        self.refs.push(r.to_owned());
        let mut inlined = self.node(&target, path);
        self.refs.pop();
        if let Value::Object(o) = &mut inlined {
            for key in ANNOTATIONS {
                if let Some(v) = m.get(*key) {
                    o.insert((*key).into(), v.clone());
                }
            }
        }
        inlined
    }

    fn keyword(
        &mut self,
        node: &mut Node,
        m: &Map<String, Value>,
        key: &str,
        value: &Value,
        path: &str,
    ) {
        let here = child(path, key);
        match key {
            "type" | "allOf" => {}
            "nullable" => {
                if value == &Value::Bool(true)
                    && !accepts_null(self.root, &Value::Object(m.clone()), 0)
                {
                    nullable_ignored(self.cx, path);
                }
            }
            "const" => const_keyword(self.cx, node, m, value, path),
            "enum" => enum_keyword(self.cx, node, value, path),
            "properties" => self.properties(node, value, &here),
            "items" => self.items(node, value, path, &here),
            "anyOf" | "oneOf" => self.branches(node, key, value, path, &here),
            "exclusiveMinimum" | "exclusiveMaximum" => {
                exclusive_bound(self.cx, node, m, key, value, path)
            }
            "minimum" | "maximum" => set_bound(&mut node.out, key, value.clone()),
            "format" => format_keyword(self.cx, node, value, path),
            // A map (`dict[str, X]`, `z.record`): Gemini's Schema has `additionalProperties`
            // for its values. Beside listed properties (or `false`) it is dropped as before.
            "additionalProperties" if value.is_object() && !m.contains_key("properties") => {
                let values = self.node(value, &here);
                node.out.insert(key.into(), values);
            }
            "$schema" | "$id" | "$comment" | "$defs" | "definitions" => {}
            k if GEMINI_KEEPS.contains(&k) => {
                node.out.insert(key.to_owned(), value.clone());
            }
            k => self.cx.dropped(path, k, "keyword not supported"),
        }
    }

    fn properties(&mut self, node: &mut Node, value: &Value, here: &str) {
        let Value::Object(props) = value else {
            return;
        };
        let mut converted = Map::new();
        for (name, sub) in props {
            let sub_path = child(here, name);
            if !valid_gemini_property(name) {
                self.cx.warn(
                    &sub_path,
                    "propertyName",
                    format!(
                        "property name {name:?} is refused by Gemini: a letter or _ first, then \
                         letters, digits or _, at most 64 characters"
                    ),
                );
            }
            converted.insert(name.clone(), self.node(sub, &sub_path));
        }
        node.out
            .insert("properties".into(), Value::Object(converted));
    }

    fn items(&mut self, node: &mut Node, value: &Value, path: &str, here: &str) {
        match value {
            Value::Object(_) | Value::Bool(_) => {
                let item = self.node(value, here);
                node.out.insert("items".into(), item);
            }
            _ => self
                .cx
                .dropped(path, "items", "tuple validation is not supported"),
        }
    }

    /// `anyOf`/`oneOf` as one `anyOf`; a bare `{"type": "null"}` branch becomes `nullable`.
    fn branches(&mut self, node: &mut Node, key: &str, value: &Value, path: &str, here: &str) {
        let Value::Array(branches) = value else {
            return;
        };
        if key == "oneOf" {
            self.cx.one_of_as_any_of(path);
        }
        let mut kept = Vec::new();
        for (i, b) in branches.iter().enumerate() {
            if is_null_branch(b) {
                node.nullable = true;
                continue;
            }
            kept.push(self.node(b, &child(here, &i.to_string())));
        }
        self.cx.append_any_of(&mut node.out, path, kept);
    }
}

fn is_null_branch(b: &Value) -> bool {
    matches!(b, Value::Object(o) if o.len() == 1 && o.get("type") == Some(&json!("null")))
}

fn const_keyword(cx: &mut Cx, node: &mut Node, m: &Map<String, Value>, value: &Value, path: &str) {
    match value {
        Value::String(_) if !m.contains_key("enum") => node.string_enum(vec![value.clone()]),
        Value::Null => node.nullable = true,
        _ => cx.dropped(path, "const", "only string values can be enumerated"),
    }
}

/// Gemini enums hold strings; a `null` value becomes `nullable`.
fn enum_keyword(cx: &mut Cx, node: &mut Node, value: &Value, path: &str) {
    let Value::Array(values) = value else {
        return;
    };
    let strings: Vec<Value> = values.iter().filter(|v| !v.is_null()).cloned().collect();
    if strings.iter().all(Value::is_string) {
        if values.contains(&Value::Null) {
            node.nullable = true;
        }
        node.string_enum(strings);
    } else {
        // Dropped whole: its null must not become `nullable` alone, which `finish` reads as
        // "only null" and would refuse the numbers the enum takes.
        cx.dropped(path, "enum", "Gemini enums hold strings only");
    }
}

/// Gemini has no exclusive bounds: an integer bound moves by one, others become inclusive
/// (with a warning). Draft 4's boolean form modifies `minimum`/`maximum`.
fn exclusive_bound(
    cx: &mut Cx,
    node: &mut Node,
    m: &Map<String, Value>,
    key: &str,
    value: &Value,
    path: &str,
) {
    let min = key == "exclusiveMinimum";
    let bound = if min { "minimum" } else { "maximum" };
    let n = match value {
        Value::Number(n) => n.as_f64(),
        Value::Bool(true) => m.get(bound).and_then(Value::as_f64),
        _ => None,
    };
    let Some(n) = n else { return };
    if node.has_type("integer") && n.fract() == 0.0 {
        let v = if min { n + 1.0 } else { n - 1.0 };
        set_bound(&mut node.out, bound, json!(v as i64));
    } else {
        set_bound(&mut node.out, bound, json!(n));
        cx.warn(
            path,
            key,
            format!(
                "`{key}` at {} rewritten as `{bound}`: Gemini has no exclusive bounds, so the \
                 bound itself is no longer refused",
                at(path)
            ),
        );
    }
}

fn format_keyword(cx: &mut Cx, node: &mut Node, value: &Value, path: &str) {
    let ok = match value.as_str() {
        Some("date-time" | "enum") => true,
        Some("int32" | "int64") => node.has_type("integer"),
        Some("float" | "double") => node.has_type("number"),
        _ => false,
    };
    if ok {
        node.out.insert("format".into(), value.clone());
    } else {
        cx.dropped(path, "format", &format!("format {value} is not supported"));
    }
}

/// The gathered type and nullability written out, `anyOf` simplified, `required` pruned.
fn finish(cx: &mut Cx, mut node: Node, path: &str) -> Value {
    write_types(&mut node);
    collapse_any_of(&mut node.out);
    let constrained = ["type", "anyOf", "enum", "properties", "items"]
        .iter()
        .any(|k| node.out.contains_key(*k));
    if node.nullable && !constrained {
        // Only null (`{"type": "null"}`, `{"const": null}`): `nullable` alone would take any
        // value.
        node.out.insert("type".into(), json!("null"));
    } else if node.nullable {
        node.out.insert("nullable".into(), Value::Bool(true));
    }
    prune_required(cx, &mut node.out, path);
    Value::Object(node.out)
}

/// One type as `type`; several as one `anyOf` branch per type (Gemini takes no type arrays).
fn write_types(node: &mut Node) {
    match node.types.len() {
        0 => {
            if node.out.contains_key("properties") {
                node.out.insert("type".into(), json!("object"));
            }
        }
        1 => {
            node.out
                .insert("type".into(), Value::String(node.types.remove(0)));
        }
        _ => {
            let branches: Vec<Value> = node.types.iter().map(|t| json!({ "type": t })).collect();
            node.out.insert("anyOf".into(), Value::Array(branches));
        }
    }
}

/// `anyOf` reduced to one branch (e.g. `T | null`) is that branch; an empty one goes.
fn collapse_any_of(out: &mut Map<String, Value>) {
    let Some(Value::Array(bs)) = out.get("anyOf") else {
        return;
    };
    if bs.is_empty() {
        out.remove("anyOf");
    } else if bs.len() == 1 {
        if let Some(Value::Array(mut bs)) = out.remove("anyOf") {
            if let Some(Value::Object(b)) = bs.pop() {
                for (k, v) in b {
                    out.entry(k).or_insert(v);
                }
            }
        }
    }
}

/// Names in `required` without a schema under `properties` are refused by Gemini.
fn prune_required(cx: &mut Cx, out: &mut Map<String, Value>, path: &str) {
    let (Some(Value::Array(req)), Some(Value::Object(props))) =
        (out.get("required"), out.get("properties"))
    else {
        return;
    };
    if req
        .iter()
        .all(|r| r.as_str().is_some_and(|r| props.contains_key(r)))
    {
        return;
    }
    let kept: Vec<Value> = req
        .iter()
        .filter(|r| r.as_str().is_some_and(|r| props.contains_key(r)))
        .cloned()
        .collect();
    cx.dropped(
        path,
        "required",
        "names without a schema under properties cannot be required",
    );
    out.insert("required".into(), Value::Array(kept));
}
