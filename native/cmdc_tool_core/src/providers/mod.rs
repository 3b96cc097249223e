//! Tool lists in each model provider's format: OpenAI chat (cmdc's shape), OpenAI Responses,
//! Anthropic, Gemini `functionDeclarations` (OpenAPI subset, or `parametersJsonSchema`) and MCP
//! `tools/list`, with OpenAI's and Anthropic's own strict modes. Keywords a target does not
//! support are rewritten into forms with the same meaning where there is one (`const` →
//! one-value `enum`, `$ref` inlined, `allOf` of disjoint parts merged, a type union as `anyOf`);
//! every other change is a [`Warning`] naming tool, path and keyword and saying whether the
//! result accepts more or less than the original. Limits a target enforces are reported the same
//! way. Tool names follow [`crate::names`]; strict mode's nulls go back through [`round_trip`].

mod all_of;
pub mod cache;
mod format;
mod gemini;
mod limits;
mod names;
mod object_root;
mod pointer;
pub mod round_trip;
mod strict;
mod tuples;
mod warn;
mod write;

use serde_json::Value;

use crate::{dialect, etf};

pub use format::{parameters_key, strict_field, Envelope, Format, Rules, Spec, Strict, FORMATS};
pub use limits::{
    OPENAI_MAX_CHARS, OPENAI_MAX_DEPTH, OPENAI_MAX_ENUM_VALUES, OPENAI_MAX_PROPERTIES,
};
pub use names::{check_names, tool_name};
pub use strict::{make_nullable, null_plan};
pub use warn::Warning;
pub use write::{
    end_list_etf, list_json_delimiters, start_list_etf, wrap, wrap_list, write_tool_etf,
    write_tool_json, write_warnings_etf,
};

use gemini::gemini_root;
use names::check_tool_name;
use object_root::{inline_root_ref, mcp_root, object_root};
use strict::strict_root;
use warn::Cx;

/// One tool to convert.
#[derive(Debug, Clone, Copy)]
pub struct Tool<'a> {
    pub name: &'a str,
    pub description: &'a str,
    pub parameters: &'a Value,
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
    let reading = dialect::read(parameters, None);
    if let Some(note) = &reading.note {
        cx.warn("", "$schema", note.clone());
    }
    let parameters = reading.schema.as_ref();
    let converted = match format.spec().rules {
        _ if strict => Some(strict_root(&mut cx, parameters)),
        // cmdc's own shape keeps the parameters as the module returns them, but for a root
        // that only refers to a definition (the API wants `type: object` there).
        Rules::Keep => Some(inline_root_ref(parameters)),
        Rules::Object => Some(object_root(&mut cx, parameters)),
        Rules::Mcp => Some(mcp_root(&mut cx, parameters)),
        Rules::Gemini => gemini_root(&mut cx, parameters),
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

/// A built tools list as it is handed out: the JSON text (`to_json/3`) and `{tools, warnings}`
/// in the external term format (`convert/3`, one `binary_to_term/1`).
#[derive(Debug, Clone, Default)]
pub struct Output {
    pub json: Vec<u8>,
    pub term: Vec<u8>,
}

impl Output {
    /// Bytes held, for the cache's bound.
    pub fn size(&self) -> usize {
        self.json.len() + self.term.len()
    }
}

/// One tool of a list to assemble: its parameters already converted for the list's format.
#[derive(Debug, Clone, Copy)]
pub struct Listed<'a> {
    pub name: &'a str,
    pub description: &'a str,
    pub converted: &'a Converted,
}

/// Assembles a tools list from converted tools, in both forms of [`Output`], with every tool's
/// warnings in order. Names are checked by the caller ([`check_names`]).
pub fn assemble(tools: &[Listed], format: Format, strict: bool) -> Output {
    let n = tools.len();
    let (start, end) = list_json_delimiters(format, n);
    let mut json = Vec::with_capacity(256 * n + 32);
    json.extend_from_slice(start);
    let mut term = Vec::with_capacity(256 * n + 32);
    term.push(etf::VERSION);
    etf::tuple_header(&mut term, 2);
    start_list_etf(&mut term, format, n);
    for (i, t) in tools.iter().enumerate() {
        let c = t.converted;
        if i > 0 {
            json.push(b',');
        }
        let params_json = c.parameters.as_ref().map(|_| c.json.as_slice());
        write_tool_json(
            &mut json,
            format,
            strict,
            t.name,
            t.description,
            params_json,
        );
        let params_etf = c.parameters.as_ref().map(|_| c.etf.as_slice());
        write_tool_etf(&mut term, format, strict, t.name, t.description, params_etf);
    }
    json.extend_from_slice(end);
    end_list_etf(&mut term, format, n);
    let warnings: Vec<Warning> = tools
        .iter()
        .flat_map(|t| t.converted.warnings.iter().cloned())
        .collect();
    write_warnings_etf(&mut term, &warnings);
    Output { json, term }
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

#[cfg(test)]
mod tests;
