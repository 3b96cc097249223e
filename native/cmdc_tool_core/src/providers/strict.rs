//! Strict mode, each provider's own rules.
//!
//! - OpenAI (Chat Completions and Responses): every object closed (`additionalProperties:
//!   false`) with every property required; an optional one becomes nullable (type union with
//!   null) and the rewrite records it ([`Plan`]) so the call's nulls can be dropped again
//!   ([`super::round_trip`]). A `$ref` with sibling keywords is inlined, as the openai package
//!   does. Unsupported keywords are dropped.
//! - Anthropic (the anthropic package's `transform_schema`): `required` as the author wrote it,
//!   objects closed, one `type` per schema (a type union becomes `anyOf` of one branch per type),
//!   every schema with a `type`, `anyOf`, `allOf`, `const` or `enum`; keywords it does not
//!   support are moved into the description, as the package does.
//!
//! Every change of meaning is a [`super::Warning`] that says whether the result accepts more or
//! less than the original.

use std::collections::{BTreeSet, HashMap};

use serde_json::{json, Map, Value};

use super::all_of::merge_all_of;
use super::format::{Format, Strict as Rules};
use super::limits::check_openai_limits;
use super::pointer::{at, child, resolve};
use super::round_trip::{accepts_null, NullPlan, Plan, Prop};
use super::tuples::tuple_as_array;
use super::warn::{Cx, Effect};

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

/// Keywords OpenAI strict mode keeps as they are (besides those handled one by one).
const OPENAI_KEEPS: &[&str] = &[
    "minimum",
    "maximum",
    "multipleOf",
    "minItems",
    "maxItems",
    "pattern",
];

/// Annotations: they change no meaning, so dropping them needs no warning.
const ANNOTATIONS: &[&str] = &[
    "$schema",
    "$id",
    "$comment",
    "$anchor",
    "default",
    "examples",
    "example",
    "deprecated",
    "readOnly",
    "writeOnly",
    "contentMediaType",
    "contentEncoding",
];

/// Keywords that constrain only objects: dropping one in strict mode, whose objects are closed,
/// refuses what it allowed (patternProperties, ...) as well as what it refused.
const OBJECT_OPENERS: &[&str] = &[
    "patternProperties",
    "unevaluatedProperties",
    "propertyNames",
];

/// Keywords that apply to one JSON type only (for splitting a type union into branches).
fn applies_to(key: &str, t: &str) -> bool {
    const OBJECT: &[&str] = &[
        "properties",
        "required",
        "additionalProperties",
        "patternProperties",
        "minProperties",
        "maxProperties",
        "propertyNames",
        "dependencies",
        "dependentRequired",
        "dependentSchemas",
        "unevaluatedProperties",
    ];
    const ARRAY: &[&str] = &[
        "items",
        "prefixItems",
        "additionalItems",
        "minItems",
        "maxItems",
        "uniqueItems",
        "contains",
        "minContains",
        "maxContains",
        "unevaluatedItems",
    ];
    const STRING: &[&str] = &["minLength", "maxLength", "pattern", "format"];
    const NUMBER: &[&str] = &[
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
    ];
    let only = |list: &[&str], types: &[&str]| !list.contains(&key) || types.contains(&t);
    only(OBJECT, &["object"])
        && only(ARRAY, &["array"])
        && only(STRING, &["string"])
        && only(NUMBER, &["number", "integer"])
}

pub(super) fn strict_root(cx: &mut Cx, schema: &Value) -> Value {
    strict_root_plan(cx, schema).0
}

/// The plan of `schema`'s OpenAI strict rewrite (the only one that introduces nulls: Anthropic
/// keeps `required` as written). `schema` as read in its dialect ([`crate::dialect::read`]).
pub fn null_plan(schema: &Value) -> NullPlan {
    let mut warnings = Vec::new();
    let mut cx = Cx {
        tool: "",
        format: Format::OpenAI,
        warnings: &mut warnings,
    };
    strict_root_plan(&mut cx, schema).1
}

/// The strict rewrite of a parameters schema and the plan of the nulls it introduced.
pub(super) fn strict_root_plan(cx: &mut Cx, schema: &Value) -> (Value, NullPlan) {
    // `{}`/`true` as the closed empty object (said below).
    let root = match schema {
        Value::Bool(true) => {
            json!({"type": "object", "properties": {}, "additionalProperties": false})
        }
        Value::Object(m) if m.is_empty() => {
            json!({"type": "object", "properties": {}, "additionalProperties": false})
        }
        other => other.clone(),
    };
    let open = match schema {
        Value::Bool(true) => true,
        Value::Object(m) => {
            !m.contains_key("properties")
                && m.get("additionalProperties") != Some(&Value::Bool(false))
                && !["$ref", "anyOf", "oneOf", "allOf"]
                    .iter()
                    .any(|k| m.contains_key(*k))
        }
        _ => false,
    };
    if open {
        cx.changed(
            "",
            "properties",
            "closed",
            "an object schema without properties becomes one that takes no property, as \
             strict mode closes every object",
            Effect::Less,
        );
    }
    let mut s = Strict {
        cx: &mut *cx,
        root: &root,
        defs: HashMap::new(),
        inlining: Vec::new(),
    };
    let (mut out, plan) = s.node(&root, "", 0);
    let mut defs = s.defs;
    defs.insert("#".into(), plan.clone());
    if let Value::Object(m) = &mut out {
        if !m.contains_key("type") && !m.contains_key("anyOf") && !m.contains_key("$ref") {
            m.insert("type".into(), json!("object"));
            m.entry("properties").or_insert_with(|| json!({}));
            m.insert("additionalProperties".into(), Value::Bool(false));
            if cx.format.spec().strict != Some(Rules::Anthropic) {
                m.insert("required".into(), json!([]));
            }
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
    if cx.format.spec().strict == Some(Rules::OpenAI) {
        check_openai_limits(cx, &out);
    }
    (out, NullPlan::new(plan, defs))
}

fn is_object_schema(m: &Map<String, Value>) -> bool {
    match m.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "object"),
        None => m.contains_key("properties"),
        _ => false,
    }
}

/// Anthropic's "any value": every schema there needs a type, and objects are closed.
fn anthropic_any() -> Value {
    json!({"anyOf": [
        {"type": "string"}, {"type": "number"}, {"type": "boolean"}, {"type": "null"},
        {"type": "array"},
        {"type": "object", "properties": {}, "additionalProperties": false}
    ]})
}

/// OpenAI strict mode's "any value": objects closed with every property required, array
/// items typed.
fn openai_any() -> Value {
    json!({"anyOf": [
        {"type": "string"}, {"type": "number"}, {"type": "boolean"}, {"type": "null"},
        {"type": "array", "items": {"type": ["string", "number", "boolean", "null"]}},
        {"type": "object", "properties": {}, "additionalProperties": false, "required": []}
    ]})
}

/// Whether a `$ref` points into a `properties` map (not `$defs`/`definitions`).
fn points_into_properties(r: &str) -> bool {
    r.starts_with("#/") && r.split('/').any(|seg| seg == "properties")
}

/// A `const` of an object or array as a schema with the same meaning where the target takes no
/// such `const`: an object of `const` properties, all required, closed; an array of exactly
/// those items (`prefixItems`-free: `items` as an `anyOf` and the length fixed is wider, so
/// arrays are `None`).
fn const_schema(value: &Value) -> Option<Value> {
    match value {
        Value::Object(o) => {
            let mut props = Map::new();
            for (k, v) in o {
                let sub = match v {
                    Value::Object(_) => const_schema(v)?,
                    Value::Array(_) => return None,
                    _ => json!({ "const": v }),
                };
                props.insert(k.clone(), sub);
            }
            let names: Vec<Value> = o.keys().map(|k| json!(k)).collect();
            Some(
                json!({"type": "object", "properties": props, "required": names,
                        "additionalProperties": false}),
            )
        }
        _ => None,
    }
}

fn is_primitive(v: &Value) -> bool {
    !matches!(v, Value::Array(_) | Value::Object(_))
}

struct Strict<'c, 'w> {
    cx: &'c mut Cx<'w>,
    root: &'c Value,
    /// Plans of the definitions rewritten so far, by the `$ref` text that names them.
    defs: HashMap<String, Plan>,
    /// `$ref`s being inlined (recursion stops there).
    inlining: Vec<String>,
}

/// One schema being rewritten.
struct Node {
    out: Map<String, Value>,
    plan: Plan,
    /// Keywords Anthropic does not support, for the description.
    moved: Vec<(String, Value)>,
}

impl Strict<'_, '_> {
    fn openai(&self) -> bool {
        self.cx.format.spec().strict != Some(Rules::Anthropic)
    }

    /// A `$ref` as this format writes it: Anthropic's definitions live under `$defs`.
    fn reference(&self, r: &str) -> String {
        match r.strip_prefix("#/definitions/") {
            Some(rest) if !self.openai() => format!("#/$defs/{rest}"),
            _ => r.to_owned(),
        }
    }

    /// "Any value" in this format: every schema needs a type there, and objects are closed.
    fn any(&mut self, path: &str) -> Value {
        self.cx.changed(
            path,
            "type",
            "written as a union of every type",
            "every schema needs a type, and objects are closed, so an object here can only be {} \
             (and, for OpenAI, an array's items only scalars)",
            Effect::Less,
        );
        if self.openai() {
            openai_any()
        } else {
            anthropic_any()
        }
    }

    fn node(&mut self, schema: &Value, path: &str, depth: usize) -> (Value, Plan) {
        let m = match schema {
            Value::Object(m) if m.is_empty() => return (self.any(path), Plan::default()),
            Value::Object(m) => m,
            Value::Bool(true) => return (self.any(path), Plan::default()),
            Value::Bool(false) => {
                self.cx.changed(
                    path,
                    "false",
                    "written as {\"not\": {}}",
                    "no schema form refuses everything",
                    Effect::Other,
                );
                return (json!({"not": {}}), Plan::default());
            }
            other => return (other.clone(), Plan::default()),
        };
        if depth > 64 {
            self.cx.warn(
                path,
                "depth",
                "schema nested deeper than 64 levels: cut here",
            );
            return (json!({}), Plan::default());
        }
        if let Some(Value::String(r)) = m.get("$ref") {
            // A `$ref` into another property (zod-to-json-schema's reuse of a schema) would
            // pick up the null strict mode adds to that property: inlined (the same meaning).
            if m.len() > 1 || points_into_properties(r) {
                return self.inline_ref(m, r, path, depth);
            }
            let plan = Plan {
                refs: vec![r.clone()],
                ..Plan::default()
            };
            return (json!({ "$ref": self.reference(r) }), plan);
        }
        let merged = merge_all_of(self.cx, m, path);
        let merged = tuple_as_array(self.cx, &merged, path);
        let merged = self.const_as_object(merged);
        let m = &draft4_bounds(self.cx, merged, path);
        let types = types_of(m);
        let literal = m.contains_key("const")
            || matches!(m.get("enum"), Some(Value::Array(vs)) if !vs.is_empty());
        if !self.openai() && types.len() > 1 && !literal {
            return self.split_types(m, &types, path, depth);
        }
        let mut node = Node {
            out: Map::new(),
            plan: Plan::default(),
            moved: Vec::new(),
        };
        for (key, value) in m {
            self.keyword(&mut node, m, key, value, path, depth);
        }
        self.write_type(&mut node, m, &types, literal, path);
        if is_object_schema(m) {
            self.object(&mut node, m, path, depth);
        }
        self.describe_moved(&mut node, path);
        (Value::Object(node.out), node.plan)
    }

    /// Anthropic takes `const` of scalars only: a `const` object becomes the object schema
    /// that says the same (see [`const_schema`]).
    fn const_as_object(&self, mut m: Map<String, Value>) -> Map<String, Value> {
        if self.openai() {
            return m;
        }
        let Some(Value::Object(schema)) = m.get("const").and_then(const_schema) else {
            return m;
        };
        m.remove("const");
        m.remove("type");
        m.extend(schema);
        m
    }

    /// A `$ref` with sibling keywords: the target inlined under them (the siblings win), as the
    /// openai package does, since the API cannot take that form.
    fn inline_ref(
        &mut self,
        m: &Map<String, Value>,
        r: &str,
        path: &str,
        depth: usize,
    ) -> (Value, Plan) {
        let target = resolve(self.root, r).and_then(Value::as_object);
        let recursive = self.inlining.iter().any(|seen| seen == r);
        let Some(target) = target.filter(|_| !recursive) else {
            let meaningful = m.keys().any(|k| {
                k != "$ref"
                    && !ANNOTATIONS.contains(&k.as_str())
                    && k != "description"
                    && k != "title"
            });
            if meaningful {
                self.cx.changed(
                    path,
                    "$ref",
                    "kept without its sibling keywords",
                    if recursive {
                        "a recursive reference cannot be inlined"
                    } else {
                        "the reference does not resolve to a schema inside the parameters"
                    },
                    Effect::More,
                );
            }
            let plan = Plan {
                refs: vec![r.to_owned()],
                ..Plan::default()
            };
            return (json!({ "$ref": self.reference(r) }), plan);
        };
        let mut merged = target.clone();
        for (k, v) in m {
            if k != "$ref" {
                merged.insert(k.clone(), v.clone());
            }
        }
        self.inlining.push(r.to_owned());
        let out = self.node(&Value::Object(merged), path, depth + 1);
        self.inlining.pop();
        out
    }

    /// Anthropic takes one type per schema: a union becomes one branch per type, each with the
    /// keywords that apply to that type (the same meaning).
    fn split_types(
        &mut self,
        m: &Map<String, Value>,
        types: &[String],
        path: &str,
        depth: usize,
    ) -> (Value, Plan) {
        let mut out = Map::new();
        let mut plan = Plan::default();
        let mut branches = Vec::new();
        for t in types {
            let branch: Map<String, Value> = m
                .iter()
                .filter(|(k, _)| {
                    applies_to(k, t)
                        && !matches!(
                            k.as_str(),
                            "type" | "description" | "title" | "$defs" | "definitions"
                        )
                })
                .map(|(k, v)| (k.clone(), v.clone()))
                .chain([("type".to_owned(), json!(t))])
                .collect();
            let (b, p) = self.node(&Value::Object(branch), path, depth + 1);
            branches.push(b);
            if !p.is_empty() {
                plan.branches.push(p);
            }
        }
        out.insert("anyOf".into(), Value::Array(branches));
        for key in ["description", "title"] {
            if let Some(v) = m.get(key) {
                out.insert(key.into(), v.clone());
            }
        }
        for key in ["$defs", "definitions"] {
            if let Some(v) = m.get(key) {
                let defs = self.defs_keyword(v, &child(path, key), depth);
                out.insert(key.into(), defs);
            }
        }
        (Value::Object(out), plan)
    }

    // Long on purpose: one match over the keywords, one arm each.
    fn keyword(
        &mut self,
        node: &mut Node,
        m: &Map<String, Value>,
        key: &str,
        value: &Value,
        path: &str,
        depth: usize,
    ) {
        let here = child(path, key);
        let openai = self.openai();
        match key {
            "type" | "properties" | "required" | "additionalProperties" | "allOf" => {}
            k if ANNOTATIONS.contains(&k) => {}
            "description" | "title" => {
                node.out.insert(key.into(), value.clone());
            }
            "nullable" => {
                if value == &Value::Bool(true)
                    && !accepts_null(self.root, &Value::Object(m.clone()), 0)
                {
                    nullable_ignored(self.cx, path);
                }
            }
            "const" if openai => {
                if !m.contains_key("enum") {
                    node.out
                        .insert("enum".into(), Value::Array(vec![value.clone()]));
                }
            }
            "const" if is_primitive(value) => {
                node.out.insert(key.into(), value.clone());
            }
            "enum" => match value {
                Value::Array(vs) if openai || (!vs.is_empty() && vs.iter().all(is_primitive)) => {
                    node.out.insert(key.into(), value.clone());
                }
                _ => node.moved.push((key.into(), value.clone())),
            },
            "items" => self.items(node, m, value, path, &here, depth),
            "anyOf" | "oneOf" => self.branches(node, key, value, path, &here, depth),
            "$defs" | "definitions" => {
                let defs = self.defs_keyword(value, &here, depth);
                // Anthropic reads `$defs` only (`definitions` would go into the description).
                let key = if openai { key } else { "$defs" };
                match (node.out.get_mut(key), defs) {
                    (Some(Value::Object(have)), Value::Object(more)) => have.extend(more),
                    (_, defs) => {
                        node.out.insert(key.into(), defs);
                    }
                }
            }
            "format" => {
                let (allowed, string) = if openai {
                    (STRICT_FORMATS_OPENAI, true)
                } else {
                    (
                        STRICT_FORMATS_ANTHROPIC,
                        m.get("type") == Some(&json!("string")),
                    )
                };
                match value.as_str() {
                    Some(f) if string && allowed.contains(&f) => {
                        node.out.insert(key.into(), value.clone());
                    }
                    // The validator asserts `format`: without it the result accepts more.
                    _ if openai => self.cx.changed(
                        path,
                        key,
                        "dropped",
                        &format!("format {value} is not supported"),
                        Effect::More,
                    ),
                    _ => node.moved.push((key.into(), value.clone())),
                }
            }
            "exclusiveMinimum" | "exclusiveMaximum" if openai && value.is_number() => {
                node.out.insert(key.into(), value.clone());
            }
            "minItems" if !openai && (value == &json!(0) || value == &json!(1)) => {
                node.out.insert(key.into(), value.clone());
            }
            k if openai && OPENAI_KEEPS.contains(&k) => {
                node.out.insert(key.into(), value.clone());
            }
            k if openai => {
                let effect = if OBJECT_OPENERS.contains(&k) {
                    Effect::Other
                } else {
                    Effect::More
                };
                self.cx
                    .changed(path, k, "dropped", "keyword not supported", effect);
            }
            _ => node.moved.push((key.into(), value.clone())),
        }
    }

    fn defs_keyword(&mut self, value: &Value, here: &str, depth: usize) -> Value {
        let Value::Object(defs) = value else {
            return value.clone();
        };
        let mut out = Map::new();
        for (k, d) in defs {
            let def_path = child(here, k);
            let (v, p) = self.node(d, &def_path, depth + 1);
            if !p.is_empty() {
                self.defs.insert(format!("#{def_path}"), p);
            }
            out.insert(k.clone(), v);
        }
        Value::Object(out)
    }

    fn items(
        &mut self,
        node: &mut Node,
        m: &Map<String, Value>,
        value: &Value,
        path: &str,
        here: &str,
        depth: usize,
    ) {
        match value {
            Value::Bool(true) => {}
            Value::Bool(false) => {
                // No item allowed: the array must be empty.
                if m.get("minItems").and_then(Value::as_u64).unwrap_or(0) > 0 {
                    self.cx.warn(
                        path,
                        "items",
                        format!(
                            "`items: false` with `minItems` at {} accepts no array: the tool \
                             cannot be called with this argument",
                            at(path)
                        ),
                    );
                }
                if self.openai() {
                    node.out.insert("maxItems".into(), json!(0));
                } else {
                    node.moved.push(("maxItems".into(), json!(0)));
                }
            }
            Value::Object(_) => {
                let (item, plan) = self.node(value, here, depth + 1);
                node.out.insert("items".into(), item);
                if !plan.is_empty() {
                    node.plan.items = Some(Box::new(plan));
                }
            }
            _ => self.cx.changed(
                path,
                "items",
                "dropped",
                "a list of item schemas (tuple validation) is not supported",
                Effect::More,
            ),
        }
    }

    /// `anyOf`/`oneOf` as one `anyOf`. A branch left with no constraint (e.g. one that only
    /// listed `required`, which strict mode fulfils for every property) makes the whole union
    /// accept everything: the union is dropped and said so.
    fn branches(
        &mut self,
        node: &mut Node,
        key: &str,
        value: &Value,
        path: &str,
        here: &str,
        depth: usize,
    ) {
        let Value::Array(branches) = value else {
            return;
        };
        if key == "oneOf" {
            self.cx.one_of_as_any_of(path);
        }
        let mut out = Vec::new();
        let mut plans = Vec::new();
        let mut emptied = false;
        for (i, b) in branches.iter().enumerate() {
            if b == &Value::Bool(false) {
                continue;
            }
            let trivial = b == &Value::Bool(true) || b.as_object().is_some_and(Map::is_empty);
            let (v, mut p) = self.node(b, &child(here, &i.to_string()), depth + 1);
            if !trivial && (v == json!({}) || v == anthropic_any()) {
                emptied = true;
            }
            if !p.is_empty() {
                p.keys = closed_object_keys(self.root, b, 0);
                plans.push(p);
            }
            out.push(v);
        }
        if emptied {
            self.cx.changed(
                path,
                key,
                "dropped",
                "a branch has nothing left that strict mode can express (e.g. only `required`), \
                 so the union would accept every value",
                Effect::More,
            );
            return;
        }
        node.plan.branches.extend(plans);
        self.cx.append_any_of(&mut node.out, path, out);
    }

    fn write_type(
        &mut self,
        node: &mut Node,
        m: &Map<String, Value>,
        types: &[String],
        literal: bool,
        path: &str,
    ) {
        if self.openai() {
            if let Some(t) = m.get("type") {
                node.out.insert("type".into(), t.clone());
                return;
            } else if is_object_schema(m) {
                node.out.insert("type".into(), json!("object"));
                return;
            }
        }
        if literal || (self.openai() && node.out.contains_key("enum")) {
            return;
        }
        match types {
            [t] => {
                node.out.insert("type".into(), json!(t));
            }
            _ if is_object_schema(m) => {
                node.out.insert("type".into(), json!("object"));
            }
            _ if ["anyOf", "allOf", "$ref"]
                .iter()
                .any(|k| node.out.contains_key(*k)) => {}
            _ => {
                // No type: any value (the constraints kept apply to whichever type it is).
                let any = self.any(path);
                node.out
                    .extend(any.as_object().cloned().unwrap_or_default());
            }
        }
    }

    // Long on purpose: the steps of one object rewrite (properties, the required names without
    // a schema, closing, `required`), in the order their output is written.
    fn object(&mut self, node: &mut Node, m: &Map<String, Value>, path: &str, depth: usize) {
        let openai = self.openai();
        let required: BTreeSet<String> = match m.get("required") {
            Some(Value::Array(req)) => req
                .iter()
                .filter_map(|r| r.as_str().map(str::to_owned))
                .collect(),
            _ => BTreeSet::new(),
        };
        let props_path = child(path, "properties");
        let mut props = Map::new();
        if let Some(Value::Object(p)) = m.get("properties") {
            for (name, sub) in p {
                let here = child(&props_path, name);
                if sub == &Value::Bool(false) {
                    // Never allowed: left out of the closed object, which refuses it the same.
                    if required.contains(name) {
                        self.cx.warn(
                            &here,
                            "false",
                            format!(
                                "property {name:?} is required but its schema is false: \
                                     the tool cannot be called"
                            ),
                        );
                    }
                    continue;
                }
                let (converted, plan) = self.node(sub, &here, depth + 1);
                let optional = !required.contains(name);
                let (converted, drop) = if openai && optional {
                    let drop = !accepts_null(self.root, sub, 0);
                    (make_nullable(converted), drop)
                } else {
                    (converted, false)
                };
                // The model sends null for an optional field it leaves out: the tool gets the
                // field's default then, as if the key were absent.
                let default = sub
                    .get("default")
                    .filter(|d| openai && optional && !d.is_null())
                    .cloned();
                if drop || default.is_some() || !plan.is_empty() {
                    node.plan.props.push(Prop {
                        name: name.clone(),
                        drop,
                        default,
                        plan,
                    });
                }
                props.insert(name.clone(), converted);
            }
        }
        // A required name without a schema of its own: any value, still required.
        for name in &required {
            if !props.contains_key(name) && m.get("properties").and_then(|p| p.get(name)).is_none()
            {
                let any = self.any(&child(&props_path, name));
                props.insert(name.clone(), any);
            }
        }
        // The root without properties was said by `strict_root_plan` already.
        let said = !m.contains_key("properties") && path.is_empty();
        match m.get("additionalProperties") {
            Some(Value::Bool(false)) => {}
            _ if m.get("unevaluatedProperties") == Some(&Value::Bool(false)) => {}
            None if said => {}
            None if !m.contains_key("properties") => self.cx.changed(
                path,
                "properties",
                "closed",
                "an object schema without properties becomes one that takes no property, as \
                 strict mode closes every object",
                Effect::Less,
            ),
            None => self.cx.changed(
                path,
                "additionalProperties",
                "closed",
                "the object is open (it takes keys it does not list) and strict mode closes \
                 every object, so a call with another key is refused",
                Effect::Less,
            ),
            Some(_) => self.cx.changed(
                path,
                "additionalProperties",
                "dropped",
                "objects are closed: only the declared properties are accepted",
                Effect::Less,
            ),
        }
        let names: Vec<Value> = if openai {
            props.keys().map(|k| json!(k)).collect()
        } else {
            match m.get("required") {
                Some(Value::Array(req)) => req
                    .iter()
                    .filter(|r| r.as_str().is_some_and(|r| props.contains_key(r)))
                    .cloned()
                    .collect(),
                _ => Vec::new(),
            }
        };
        node.out.insert("properties".into(), Value::Object(props));
        if openai || m.contains_key("required") {
            node.out.insert("required".into(), Value::Array(names));
        }
        node.out
            .insert("additionalProperties".into(), Value::Bool(false));
    }

    /// Anthropic: keywords it does not support go into the description, as its package does.
    fn describe_moved(&mut self, node: &mut Node, path: &str) {
        if node.moved.is_empty() {
            return;
        }
        let text = node
            .moved
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect::<Vec<_>>()
            .join(", ");
        for (key, _) in &node.moved {
            let effect = if OBJECT_OPENERS.contains(&key.as_str()) {
                Effect::Other
            } else {
                Effect::More
            };
            self.cx.changed(
                path,
                key,
                "moved into the description",
                "not supported, so not enforced; the model only reads it",
                effect,
            );
        }
        let description = match node.out.get("description").and_then(Value::as_str) {
            Some(d) => format!("{d}\n\n{{{text}}}"),
            None => format!("{{{text}}}"),
        };
        node.out.insert("description".into(), json!(description));
    }
}

/// OpenAPI's `nullable: true` means nothing in JSON Schema: the original refuses null there,
/// and so does the result (said, since its author likely meant otherwise).
/// The properties an object branch lists (following `$ref`s), which strict mode closes: an
/// object with another key is not that branch. `None` when that cannot be told.
fn closed_object_keys(root: &Value, schema: &Value, depth: usize) -> Option<Vec<String>> {
    let m = schema.as_object()?;
    if depth > 32
        || ["allOf", "anyOf", "oneOf", "patternProperties"]
            .iter()
            .any(|k| m.contains_key(*k))
    {
        return None;
    }
    if let Some(Value::String(r)) = m.get("$ref") {
        return closed_object_keys(root, resolve(root, r)?, depth + 1);
    }
    let props = m.get("properties")?.as_object()?;
    Some(props.keys().cloned().collect())
}

pub(super) fn nullable_ignored(cx: &mut Cx, path: &str) {
    cx.warn(
        path,
        "nullable",
        format!(
            "`nullable` at {} dropped: it is OpenAPI, not JSON Schema, so the original refuses \
             null here and so does the result (write \"type\": [\"T\", \"null\"] to accept null)",
            at(path)
        ),
    );
}

/// The types a schema's `type` names (none when it has no `type`).
pub(super) fn types_of(m: &Map<String, Value>) -> Vec<String> {
    match m.get("type") {
        Some(Value::String(t)) => vec![t.clone()],
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(|t| t.as_str().map(String::from))
            .collect(),
        _ => Vec::new(),
    }
}

/// Draft 4's boolean `exclusiveMinimum`/`exclusiveMaximum` (modifying `minimum`/`maximum`) in
/// the numeric form of later drafts: the same meaning, in a form the target reads.
pub(super) fn draft4_bounds(
    cx: &mut Cx,
    mut m: Map<String, Value>,
    path: &str,
) -> Map<String, Value> {
    for (key, bound) in [
        ("exclusiveMinimum", "minimum"),
        ("exclusiveMaximum", "maximum"),
    ] {
        match m.get(key) {
            Some(Value::Bool(true)) => {
                m.remove(key);
                if let Some(n) = m.remove(bound) {
                    m.insert(key.into(), n);
                }
                cx.warn(
                    path,
                    key,
                    format!(
                        "draft-04 `{key}: true` at {} rewritten as `{key}: <{bound}>` (the same \
                         meaning)",
                        at(path)
                    ),
                );
            }
            Some(Value::Bool(false)) => {
                m.remove(key);
            }
            _ => {}
        }
    }
    m
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
