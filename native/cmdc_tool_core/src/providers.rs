//! Tool lists in each model provider's format: OpenAI chat (cmdc's shape), OpenAI Responses,
//! Anthropic, Gemini `functionDeclarations` and MCP `tools/list`, with OpenAI/Anthropic strict
//! mode. Keywords a target does not support are rewritten when nothing is lost (`const` →
//! one-value `enum`, `$ref` inlined, type unions → `nullable`, `allOf` of disjoint parts merged)
//! and otherwise dropped with a [`Warning`] naming tool, path and keyword; limits a target
//! enforces are checked and reported the same way.

use std::collections::BTreeSet;

use serde_json::{json, Map, Value};

use crate::etf;

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    OpenAI,
    OpenAIResponses,
    Anthropic,
    Gemini,
    Mcp,
}

impl Format {
    pub fn parse(name: &str) -> Option<Format> {
        Some(match name {
            "openai" => Format::OpenAI,
            "openai_responses" => Format::OpenAIResponses,
            "anthropic" => Format::Anthropic,
            "gemini" => Format::Gemini,
            "mcp" => Format::Mcp,
            _ => return None,
        })
    }

    pub fn label(self) -> &'static str {
        match self {
            Format::OpenAI => "openai",
            Format::OpenAIResponses => "openai_responses",
            Format::Anthropic => "anthropic",
            Format::Gemini => "gemini",
            Format::Mcp => "mcp",
        }
    }

    /// Whether `strict: true` rewrites schemas for this format (the others ignore it).
    pub fn has_strict(self) -> bool {
        matches!(
            self,
            Format::OpenAI | Format::OpenAIResponses | Format::Anthropic
        )
    }
}

/// OpenAI strict-mode limits (structured outputs).
pub const OPENAI_MAX_PROPERTIES: usize = 5_000;
pub const OPENAI_MAX_DEPTH: usize = 10;
pub const OPENAI_MAX_ENUM_VALUES: usize = 1_000;
pub const OPENAI_MAX_CHARS: usize = 120_000;

/// One tool to convert.
#[derive(Debug, Clone, Copy)]
pub struct Tool<'a> {
    pub name: &'a str,
    pub description: &'a str,
    pub parameters: &'a Value,
}

/// Something the conversion dropped, could not express, or found over a target's limit.
#[derive(Debug, Clone, PartialEq)]
pub struct Warning {
    pub tool: String,
    /// JSON Pointer into the tool's parameters schema (`""` is the root).
    pub path: String,
    pub keyword: String,
    pub message: String,
}

/// Converts tools to `format`: the value of the request's `tools` field, and the warnings.
pub fn convert(tools: &[Tool], format: Format, strict: bool) -> (Value, Vec<Warning>) {
    let mut warnings = Vec::new();
    let mut out = Vec::with_capacity(tools.len());
    for tool in tools {
        let converted = convert_parameters(tool.name, tool.parameters, format, strict);
        warnings.extend(converted.warnings);
        out.push(wrap(
            format,
            strict,
            tool.name,
            tool.description,
            converted.parameters,
        ));
    }
    (wrap_list(format, out), warnings)
}

/// One tool's parameters converted for a format: what [`wrap`] puts in the tool, as a value and
/// as JSON text, with the warnings (tool name included). Depends only on the name, the schema,
/// the format and strictness, so callers cache it per compiled schema.
#[derive(Debug, Clone)]
pub struct Converted {
    /// `None`: the tool has no parameters in this format (Gemini's form for "no arguments").
    pub parameters: Option<Value>,
    pub json: Vec<u8>,
    /// The parameters in the external term format, without the version byte (see [`etf`]).
    pub etf: Vec<u8>,
    pub warnings: Vec<Warning>,
}

pub fn convert_parameters(
    name: &str,
    parameters: &Value,
    format: Format,
    strict: bool,
) -> Converted {
    let strict = strict && format.has_strict();
    let mut warnings = Vec::new();
    let mut cx = Cx {
        tool: name,
        format,
        warnings: &mut warnings,
    };
    check_tool_name(&mut cx, name);
    let converted = match format {
        _ if strict => Some(strict_root(&mut cx, parameters)),
        Format::OpenAI | Format::OpenAIResponses => Some(parameters.clone()),
        Format::Anthropic | Format::Mcp => Some(object_root(&mut cx, parameters)),
        Format::Gemini => gemini_root(&mut cx, parameters),
    };
    let json = converted
        .as_ref()
        .map(|v| serde_json::to_vec(v).unwrap_or_default())
        .unwrap_or_default();
    let mut etf = Vec::new();
    if let Some(v) = &converted {
        etf::value(&mut etf, v);
    }
    Converted {
        parameters: converted,
        json,
        etf,
        warnings,
    }
}

/// Where a format puts the parameters, and whether it states strictness.
pub fn parameters_key(format: Format) -> &'static str {
    match format {
        Format::OpenAI | Format::OpenAIResponses | Format::Gemini => "parameters",
        Format::Anthropic => "input_schema",
        Format::Mcp => "inputSchema",
    }
}

/// `Some(flag)` when the tool carries a `strict` field: always for the Responses API (which
/// assumes strict when it is absent), only when strict for OpenAI chat and Anthropic.
pub fn strict_field(format: Format, strict: bool) -> Option<bool> {
    let strict = strict && format.has_strict();
    match format {
        Format::OpenAIResponses => Some(strict),
        Format::OpenAI | Format::Anthropic if strict => Some(true),
        _ => None,
    }
}

/// One tool in `format`'s shape around converted parameters.
pub fn wrap(
    format: Format,
    strict: bool,
    name: &str,
    description: &str,
    parameters: Option<Value>,
) -> Value {
    let mut t = Map::new();
    t.insert("name".into(), Value::String(name.to_owned()));
    t.insert("description".into(), Value::String(description.to_owned()));
    if let Some(p) = parameters {
        t.insert(parameters_key(format).into(), p);
    }
    if let Some(flag) = strict_field(format, strict) {
        t.insert("strict".into(), Value::Bool(flag));
    }
    match format {
        Format::OpenAI => json!({"type": "function", "function": t}),
        Format::OpenAIResponses => {
            t.insert("type".into(), json!("function"));
            Value::Object(t)
        }
        _ => Value::Object(t),
    }
}

/// The `tools` value from wrapped tools (Gemini nests them in one `functionDeclarations`).
pub fn wrap_list(format: Format, tools: Vec<Value>) -> Value {
    match format {
        Format::Gemini if tools.is_empty() => Value::Array(vec![]),
        Format::Gemini => json!([{ "functionDeclarations": tools }]),
        _ => Value::Array(tools),
    }
}

/// Writes one tool as JSON, as [`wrap`] shapes it, around parameters already as JSON text.
pub fn write_tool_json(
    out: &mut Vec<u8>,
    format: Format,
    strict: bool,
    name: &str,
    description: &str,
    parameters_json: Option<&[u8]>,
) {
    let string = |out: &mut Vec<u8>, s: &str| {
        serde_json::to_writer(&mut *out, s).expect("writing to a Vec cannot fail")
    };
    if format == Format::OpenAI {
        out.extend_from_slice(br#"{"type":"function","function":"#);
    }
    out.extend_from_slice(br#"{"name":"#);
    string(out, name);
    out.extend_from_slice(br#","description":"#);
    string(out, description);
    if let Some(p) = parameters_json {
        out.extend_from_slice(b",\"");
        out.extend_from_slice(parameters_key(format).as_bytes());
        out.extend_from_slice(b"\":");
        out.extend_from_slice(p);
    }
    match strict_field(format, strict) {
        Some(true) => out.extend_from_slice(br#","strict":true"#),
        Some(false) => out.extend_from_slice(br#","strict":false"#),
        None => {}
    }
    match format {
        Format::OpenAI => out.extend_from_slice(b"}}"),
        Format::OpenAIResponses => out.extend_from_slice(br#","type":"function"}"#),
        _ => out.push(b'}'),
    }
}

/// Writes one tool in the external term format (no version byte), as [`wrap`] shapes it,
/// around parameters already in that format.
pub fn write_tool_etf(
    out: &mut Vec<u8>,
    format: Format,
    strict: bool,
    name: &str,
    description: &str,
    parameters_etf: Option<&[u8]>,
) {
    let strict_flag = strict_field(format, strict);
    let own = 2
        + usize::from(parameters_etf.is_some())
        + usize::from(strict_flag.is_some())
        + usize::from(format == Format::OpenAIResponses);
    if format == Format::OpenAI {
        etf::map_header(out, 2);
        etf::binary(out, b"type");
        etf::binary(out, b"function");
        etf::binary(out, b"function");
    }
    etf::map_header(out, own);
    etf::binary(out, b"name");
    etf::binary(out, name.as_bytes());
    etf::binary(out, b"description");
    etf::binary(out, description.as_bytes());
    if let Some(p) = parameters_etf {
        etf::binary(out, parameters_key(format).as_bytes());
        out.extend_from_slice(p);
    }
    if let Some(flag) = strict_flag {
        etf::binary(out, b"strict");
        etf::atom(out, if flag { "true" } else { "false" });
    }
    if format == Format::OpenAIResponses {
        etf::binary(out, b"type");
        etf::binary(out, b"function");
    }
}

/// Starts the `tools` list of `n` tools in the external term format (with the version byte);
/// write the tools, then [`end_list_etf`].
pub fn start_list_etf(out: &mut Vec<u8>, format: Format, n: usize) {
    out.push(etf::VERSION);
    if format == Format::Gemini && n > 0 {
        etf::list_header(out, 1);
        etf::map_header(out, 1);
        etf::binary(out, b"functionDeclarations");
    }
    etf::list_header(out, n);
}

pub fn end_list_etf(out: &mut Vec<u8>, format: Format, n: usize) {
    etf::list_end(out);
    if format == Format::Gemini && n > 0 {
        etf::list_end(out);
    }
}

/// The start and end of the `tools` JSON array for `format` (with `n` tools).
pub fn list_json_delimiters(format: Format, n: usize) -> (&'static [u8], &'static [u8]) {
    match format {
        Format::Gemini if n == 0 => (b"[", b"]"),
        Format::Gemini => (br#"[{"functionDeclarations":["#, b"]}]"),
        _ => (b"[", b"]"),
    }
}

/// Rewrites one parameters schema for strict mode (OpenAI, or Anthropic when `format` says so).
pub fn strict_schema(tool: &str, schema: &Value, format: Format) -> (Value, Vec<Warning>) {
    let mut warnings = Vec::new();
    let mut cx = Cx {
        tool,
        format,
        warnings: &mut warnings,
    };
    let out = strict_root(&mut cx, schema);
    (out, warnings)
}

/// Rewrites one parameters schema into Gemini's OpenAPI subset (`None`: no parameters).
pub fn gemini_schema(tool: &str, schema: &Value) -> (Option<Value>, Vec<Warning>) {
    let mut warnings = Vec::new();
    let mut cx = Cx {
        tool,
        format: Format::Gemini,
        warnings: &mut warnings,
    };
    let out = gemini_root(&mut cx, schema);
    (out, warnings)
}

struct Cx<'w> {
    tool: &'w str,
    format: Format,
    warnings: &'w mut Vec<Warning>,
}

impl Cx<'_> {
    fn warn(&mut self, path: &str, keyword: &str, message: impl Into<String>) {
        self.warnings.push(Warning {
            tool: self.tool.to_owned(),
            path: path.to_owned(),
            keyword: keyword.to_owned(),
            message: message.into(),
        });
    }

    fn dropped(&mut self, path: &str, keyword: &str, why: &str) {
        let target = self.target();
        let at = if path.is_empty() { "the root" } else { path };
        self.warn(
            path,
            keyword,
            format!("`{keyword}` at {at} dropped: {why} ({target})"),
        );
    }

    /// `oneOf` becomes `anyOf` where the target has no `oneOf`: said once per place.
    fn one_of_as_any_of(&mut self, path: &str) {
        let at = if path.is_empty() { "the root" } else { path };
        let message = format!(
            "`oneOf` at {at} rewritten as `anyOf` (no `oneOf` in {}): a value matching several \
             branches is no longer refused by the schema",
            self.target()
        );
        self.warn(path, "oneOf", message);
    }

    /// Adds `branches` to `out`'s `anyOf`. A schema with both `anyOf` and `oneOf` (rewritten
    /// as `anyOf`) gets one list, which accepts more than both did: said as a warning.
    fn append_any_of(&mut self, out: &mut Map<String, Value>, path: &str, branches: Vec<Value>) {
        match out.get_mut("anyOf") {
            Some(Value::Array(existing)) => {
                existing.extend(branches);
                let at = if path.is_empty() { "the root" } else { path };
                self.warn(
                    path,
                    "anyOf",
                    format!(
                        "`anyOf` and `oneOf` at {at} merged into one `anyOf` ({} takes one): a \
                         value matching a branch of either is now accepted",
                        self.target()
                    ),
                );
            }
            _ => {
                out.insert("anyOf".into(), Value::Array(branches));
            }
        }
    }

    fn target(&self) -> &'static str {
        match self.format {
            Format::OpenAI | Format::OpenAIResponses => "OpenAI strict mode",
            Format::Anthropic => "Anthropic strict tool use",
            Format::Gemini => "Gemini function declarations",
            Format::Mcp => "MCP",
        }
    }
}

fn child(path: &str, seg: &str) -> String {
    let mut p = String::with_capacity(path.len() + seg.len() + 1);
    p.push_str(path);
    p.push('/');
    p.push_str(&seg.replace('~', "~0").replace('/', "~1"));
    p
}

fn check_tool_name(cx: &mut Cx, name: &str) {
    let ok = match cx.format {
        Format::OpenAI | Format::OpenAIResponses | Format::Anthropic => {
            (1..=64).contains(&name.len())
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        }
        Format::Gemini => {
            (1..=64).contains(&name.len())
                && name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_.:-".contains(c))
        }
        Format::Mcp => {
            (1..=128).contains(&name.len())
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
        }
    };
    if !ok {
        let rule = match cx.format {
            Format::Gemini => "a letter or _ first, then letters, digits, _ . : or -, at most 64",
            Format::Mcp => "1 to 128 letters, digits, _ . or -",
            _ => "1 to 64 letters, digits, _ or -",
        };
        let target = cx.format.label();
        cx.warn(
            "",
            "name",
            format!("tool name {name:?} is refused by {target}: names there are {rule}"),
        );
    }
}

/// Anthropic and MCP want an object schema at the root: `{}`/`true` become an empty object
/// schema and a missing `type` is added when the root describes an object.
fn object_root(cx: &mut Cx, schema: &Value) -> Value {
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

// ---------------------------------------------------------------------------------------------
// Strict mode (OpenAI, Anthropic)

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

fn strict_root(cx: &mut Cx, schema: &Value) -> Value {
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

/// `allOf` whose parts use disjoint keywords (and disjoint property names) is merged into the
/// schema: that loses nothing. Otherwise it is dropped with a warning.
fn merge_all_of(cx: &mut Cx, m: &Map<String, Value>, path: &str) -> Map<String, Value> {
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
            cx.dropped(
                path,
                "allOf",
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
                            cx.dropped(
                                path,
                                "allOf",
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
                    cx.dropped(
                        path,
                        "allOf",
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
        cx.dropped(
            path,
            "allOf",
            "a part limits additionalProperties, which changes meaning once merged",
        );
        return merged;
    }
    result
}

fn check_openai_limits(cx: &mut Cx, schema: &Value) {
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

// ---------------------------------------------------------------------------------------------
// Gemini (OpenAPI 3.0 subset)

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

fn gemini_root(cx: &mut Cx, schema: &Value) -> Option<Value> {
    let out = gemini_node(cx, schema, schema, "", &mut Vec::new());
    match &out {
        Value::Object(m) if m.is_empty() => return None,
        Value::Object(m) => {
            let props_empty = match m.get("properties") {
                None => true,
                Some(Value::Object(p)) => p.is_empty(),
                _ => false,
            };
            let is_object = m.get("type").is_none_or(|t| t == "object");
            if is_object && props_empty && !m.contains_key("anyOf") {
                // Gemini refuses an empty object schema: a tool without parameters omits them.
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
        _ => {}
    }
    let mut out = out;
    if let Value::Object(m) = &mut out {
        if !m.contains_key("type") && !m.contains_key("anyOf") {
            m.insert("type".into(), json!("object"));
        }
    }
    Some(out)
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

/// Resolves a local `$ref` (`#`, `#/$defs/X`, any JSON Pointer into the root document).
fn resolve<'v>(root: &'v Value, reference: &str) -> Option<&'v Value> {
    let pointer = reference.strip_prefix('#')?;
    if pointer.is_empty() {
        return Some(root);
    }
    root.pointer(pointer)
}

fn gemini_node(
    cx: &mut Cx,
    root: &Value,
    schema: &Value,
    path: &str,
    refs: &mut Vec<String>,
) -> Value {
    let m = match schema {
        Value::Object(m) => m,
        Value::Bool(_) => return json!({}),
        other => return other.clone(),
    };
    if refs.len() > 32 {
        cx.warn(path, "$ref", "references nested deeper than 32: cut here");
        return json!({});
    }
    // `$ref`: inline its target (Gemini has no references); sibling annotations win.
    if let Some(Value::String(r)) = m.get("$ref") {
        if refs.contains(r) {
            cx.warn(
                path,
                "$ref",
                format!(
                    "recursive `$ref` {r:?} at {} cannot be inlined for Gemini: replaced by an \
                     unconstrained object",
                    if path.is_empty() { "the root" } else { path }
                ),
            );
            let mut o = Map::new();
            o.insert("type".into(), json!("object"));
            if let Some(d) = m.get("description") {
                o.insert("description".into(), d.clone());
            }
            return Value::Object(o);
        }
        let Some(target) = resolve(root, r) else {
            cx.dropped(
                path,
                "$ref",
                &format!("reference {r:?} does not resolve inside the schema"),
            );
            let mut rest = m.clone();
            rest.remove("$ref");
            return gemini_node(cx, root, &Value::Object(rest), path, refs);
        };
        refs.push(r.clone());
        let mut inlined = gemini_node(cx, root, target, path, refs);
        refs.pop();
        if let Value::Object(o) = &mut inlined {
            for key in ["description", "title", "default", "example"] {
                if let Some(v) = m.get(key) {
                    o.insert(key.into(), v.clone());
                }
            }
        }
        return inlined;
    }
    let m = &merge_all_of(cx, m, path);
    let mut out = Map::new();
    let mut nullable = m.get("nullable") == Some(&Value::Bool(true));
    let mut types: Vec<String> = match m.get("type") {
        Some(Value::String(t)) => vec![t.clone()],
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(|t| t.as_str().map(String::from))
            .collect(),
        _ => Vec::new(),
    };
    if types.iter().any(|t| t == "null") {
        nullable = true;
        types.retain(|t| t != "null");
    }
    for (key, value) in m {
        let here = child(path, key);
        match key.as_str() {
            "type" | "nullable" | "allOf" => {}
            "const" => match value {
                Value::String(_) if !m.contains_key("enum") => {
                    out.insert("enum".into(), Value::Array(vec![value.clone()]));
                    if types.is_empty() {
                        types.push("string".into());
                    }
                }
                Value::Null => nullable = true,
                _ => cx.dropped(path, "const", "only string values can be enumerated"),
            },
            "enum" => {
                let Value::Array(values) = value else {
                    continue;
                };
                if values.contains(&Value::Null) {
                    nullable = true;
                }
                let strings: Vec<Value> = values.iter().filter(|v| !v.is_null()).cloned().collect();
                if strings.iter().all(Value::is_string) {
                    out.insert("enum".into(), Value::Array(strings));
                    if types.is_empty() {
                        types.push("string".into());
                    }
                } else {
                    cx.dropped(path, "enum", "Gemini enums hold strings only");
                }
            }
            "properties" => {
                let Value::Object(props) = value else {
                    continue;
                };
                let mut converted = Map::new();
                for (name, sub) in props {
                    let sub_path = child(&here, name);
                    if !valid_gemini_property(name) {
                        cx.warn(
                            &sub_path,
                            "propertyName",
                            format!(
                                "property name {name:?} is refused by Gemini: a letter or _ \
                                 first, then letters, digits or _, at most 64 characters"
                            ),
                        );
                    }
                    converted.insert(name.clone(), gemini_node(cx, root, sub, &sub_path, refs));
                }
                out.insert("properties".into(), Value::Object(converted));
            }
            "items" => match value {
                Value::Object(_) | Value::Bool(_) => {
                    let item = gemini_node(cx, root, value, &here, refs);
                    out.insert("items".into(), item);
                }
                _ => cx.dropped(path, "items", "tuple validation is not supported"),
            },
            "anyOf" | "oneOf" => {
                let Value::Array(branches) = value else {
                    continue;
                };
                if key == "oneOf" {
                    cx.one_of_as_any_of(path);
                }
                let mut kept = Vec::new();
                for (i, b) in branches.iter().enumerate() {
                    if b.get("type") == Some(&json!("null")) && b.as_object().unwrap().len() == 1 {
                        nullable = true;
                        continue;
                    }
                    kept.push(gemini_node(
                        cx,
                        root,
                        b,
                        &child(&here, &i.to_string()),
                        refs,
                    ));
                }
                cx.append_any_of(&mut out, path, kept);
            }
            "exclusiveMinimum" | "exclusiveMaximum" => {
                let min = key == "exclusiveMinimum";
                let bound = if min { "minimum" } else { "maximum" };
                let n = match value {
                    Value::Number(n) => n.as_f64(),
                    // Draft 4: a boolean modifying minimum/maximum.
                    Value::Bool(true) => m.get(bound).and_then(Value::as_f64),
                    _ => None,
                };
                let Some(n) = n else { continue };
                let integer = types.iter().any(|t| t == "integer");
                if integer && n.fract() == 0.0 {
                    let v = if min { n + 1.0 } else { n - 1.0 };
                    set_bound(&mut out, bound, json!(v as i64));
                } else {
                    set_bound(&mut out, bound, json!(n));
                    cx.warn(
                        path,
                        key,
                        format!(
                            "`{key}` at {} rewritten as `{bound}`: Gemini has no exclusive \
                             bounds, so the bound itself is no longer refused",
                            if path.is_empty() { "the root" } else { path }
                        ),
                    );
                }
            }
            "minimum" | "maximum" => set_bound(&mut out, key, value.clone()),
            "format" => {
                let ok = match value.as_str() {
                    Some("date-time" | "enum") => true,
                    Some("int32" | "int64") => types.iter().any(|t| t == "integer"),
                    Some("float" | "double") => types.iter().any(|t| t == "number"),
                    _ => false,
                };
                if ok {
                    out.insert(key.clone(), value.clone());
                } else {
                    cx.dropped(path, "format", &format!("format {value} is not supported"));
                }
            }
            "$schema" | "$id" | "$comment" | "$defs" | "definitions" => {}
            k if GEMINI_KEEPS.contains(&k) => {
                out.insert(key.clone(), value.clone());
            }
            k => cx.dropped(path, k, "keyword not supported"),
        }
    }
    match types.len() {
        0 => {
            if out.contains_key("properties") {
                out.insert("type".into(), json!("object"));
            }
        }
        1 => {
            out.insert("type".into(), Value::String(types.remove(0)));
        }
        _ => {
            // Several types: one branch per type (Gemini takes no type arrays).
            let branches: Vec<Value> = types.iter().map(|t| json!({ "type": t })).collect();
            out.insert("anyOf".into(), Value::Array(branches));
        }
    }
    // anyOf reduced to one branch (e.g. `T | null`): that branch is the schema.
    if let Some(Value::Array(bs)) = out.get("anyOf") {
        if bs.len() == 1 {
            if let Some(Value::Object(b)) = out.remove("anyOf").and_then(|v| match v {
                Value::Array(mut bs) => bs.pop(),
                _ => None,
            }) {
                for (k, v) in b {
                    out.entry(k).or_insert(v);
                }
            }
        } else if bs.is_empty() {
            out.remove("anyOf");
        }
    }
    if nullable {
        out.insert("nullable".into(), Value::Bool(true));
    }
    if let (Some(Value::Array(req)), Some(Value::Object(props))) =
        (out.get("required"), out.get("properties"))
    {
        if req
            .iter()
            .any(|r| r.as_str().is_none_or(|r| !props.contains_key(r)))
        {
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
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests;
