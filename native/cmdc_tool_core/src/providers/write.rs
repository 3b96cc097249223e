//! Writers: one tool in a format's shape (as a value, JSON text or external term format) and the
//! `tools` list around them. They only place already-converted parameters.

use serde_json::{json, Map, Value};

use super::format::{parameters_key, strict_field, Envelope, Format};
use super::names::tool_name;
use super::warn::Warning;
use crate::etf;

/// One tool in `format`'s shape around converted parameters.
pub fn wrap(
    format: Format,
    strict: bool,
    name: &str,
    description: &str,
    parameters: Option<Value>,
) -> Value {
    let mut t = Map::new();
    t.insert(
        "name".into(),
        Value::String(tool_name(name, format).into_owned()),
    );
    t.insert("description".into(), Value::String(description.to_owned()));
    if let Some(p) = parameters {
        t.insert(parameters_key(format).into(), p);
    }
    if let Some(flag) = strict_field(format, strict) {
        t.insert("strict".into(), Value::Bool(flag));
    }
    match format.spec().envelope {
        Envelope::ChatFunction => json!({"type": "function", "function": t}),
        Envelope::TypedFlat => {
            t.insert("type".into(), json!("function"));
            Value::Object(t)
        }
        _ => Value::Object(t),
    }
}

/// The `tools` value from wrapped tools (Gemini nests them in one `functionDeclarations`).
pub fn wrap_list(format: Format, tools: Vec<Value>) -> Value {
    match format {
        _ if format.is_gemini() && tools.is_empty() => Value::Array(vec![]),
        _ if format.is_gemini() => json!([{ "functionDeclarations": tools }]),
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
    let envelope = format.spec().envelope;
    if envelope == Envelope::ChatFunction {
        out.extend_from_slice(br#"{"type":"function","function":"#);
    }
    out.extend_from_slice(br#"{"name":"#);
    string(out, &tool_name(name, format));
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
    match envelope {
        Envelope::ChatFunction => out.extend_from_slice(b"}}"),
        Envelope::TypedFlat => out.extend_from_slice(br#","type":"function"}"#),
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
    let envelope = format.spec().envelope;
    let own = 2
        + usize::from(parameters_etf.is_some())
        + usize::from(strict_flag.is_some())
        + usize::from(envelope == Envelope::TypedFlat);
    if envelope == Envelope::ChatFunction {
        etf::map_header(out, 2);
        etf::binary(out, b"type");
        etf::binary(out, b"function");
        etf::binary(out, b"function");
    }
    etf::map_header(out, own);
    etf::binary(out, b"name");
    etf::binary(out, tool_name(name, format).as_bytes());
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
    if envelope == Envelope::TypedFlat {
        etf::binary(out, b"type");
        etf::binary(out, b"function");
    }
}

/// Starts the `tools` list of `n` tools in the external term format (no version byte); write
/// the tools, then [`end_list_etf`].
pub fn start_list_etf(out: &mut Vec<u8>, format: Format, n: usize) {
    if format.is_gemini() && n > 0 {
        etf::list_header(out, 1);
        etf::map_header(out, 1);
        etf::binary(out, b"functionDeclarations");
    }
    etf::list_header(out, n);
}

pub fn end_list_etf(out: &mut Vec<u8>, format: Format, n: usize) {
    etf::list_end(out);
    if format.is_gemini() && n > 0 {
        etf::list_end(out);
    }
}

/// Writes the warnings (no version byte) as `CMDC.Tool.Providers` gives them: a list of maps
/// `%{tool: _, path: _, keyword: _, message: _}`.
pub fn write_warnings_etf(out: &mut Vec<u8>, warnings: &[Warning]) {
    etf::list_header(out, warnings.len());
    for w in warnings {
        etf::map_header(out, 4);
        for (key, text) in [
            ("tool", &w.tool),
            ("path", &w.path),
            ("keyword", &w.keyword),
            ("message", &w.message),
        ] {
            etf::atom(out, key);
            etf::binary(out, text.as_bytes());
        }
    }
    etf::list_end(out);
}

/// The start and end of the `tools` JSON array for `format` (with `n` tools).
pub fn list_json_delimiters(format: Format, n: usize) -> (&'static [u8], &'static [u8]) {
    match format {
        _ if format.is_gemini() && n == 0 => (b"[", b"]"),
        _ if format.is_gemini() => (br#"[{"functionDeclarations":["#, b"]}]"),
        _ => (b"[", b"]"),
    }
}
