//! PowerShell scripts read natively, without `pwsh`: comment-based help (`<# .SYNOPSIS
//! .DESCRIPTION .PARAMETER Name #>`, inside a function or right above it) and the `param()` block
//! (types, `[Parameter(Mandatory)]`, defaults, `[ValidateSet()]`, `[ValidateRange()]`).
//!
//! The output is the same description document the Python worker produces: `type`
//! (`PowerShellModule`), `name`, `scriptPath`, `tools` (OpenAI function specs plus `permissions`
//! and `format`), `rulePrompt` (the file-level help) and `defaultPermissions`. A function named
//! `Format-<Name>` is the formatter of tool `<Name>`, not a tool; a function whose name starts
//! with `_` is private. A comment line `# TOOL_CONFIG: {"executionPolicy": ...}` inside a function
//! or right above it sets that tool's permissions; in the file-level help it sets the defaults.

use std::ffi::OsString;
use std::path::Path;

use serde_json::{json, Map, Value};

use super::interpreter::{self, PWSH_MISSING};
use super::language::{BoxFuture, Calls, Describer, Language, Mode, Program, Settings};
use crate::error::{Error, Result};

#[derive(Debug, Default, Clone, PartialEq)]
pub struct Help {
    pub synopsis: String,
    pub description: String,
    pub parameters: Vec<(String, String)>,
    pub outputs: String,
    /// The `.EXAMPLE` sections, each as written (see [`examples`]).
    pub examples: Vec<String>,
}

impl Help {
    fn is_empty(&self) -> bool {
        self.synopsis.is_empty() && self.description.is_empty() && self.parameters.is_empty()
    }

    /// Synopsis, then the description as details.
    pub fn text(&self) -> String {
        match (self.synopsis.is_empty(), self.description.is_empty()) {
            (false, false) => format!("{}\n\n{}", self.synopsis, self.description),
            (false, true) => self.synopsis.clone(),
            (true, false) => self.description.clone(),
            (true, true) => String::new(),
        }
    }

    fn parameter(&self, name: &str) -> Option<&str> {
        self.parameters
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, d)| d.as_str())
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    pub name: String,
    pub schema: Value,
    pub mandatory: bool,
    pub default: Option<Value>,
    /// A `[switch]`: given by its name alone.
    pub switch: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Function {
    pub name: String,
    pub help: Help,
    pub params: Vec<Param>,
    pub config: Option<Value>,
}

// ------------------------------------------------------------------------------------------------
// lexing helpers: skip strings and comments so braces inside them do not count

fn starts_with_ci(s: &[u8], i: usize, word: &str) -> bool {
    s.len() >= i + word.len() && s[i..i + word.len()].eq_ignore_ascii_case(word.as_bytes())
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// If a string or comment starts at `i`, the index just after it.
fn skip_opaque(s: &[u8], i: usize) -> Option<usize> {
    let rest = &s[i..];
    if rest.starts_with(b"<#") {
        return Some(find(s, i + 2, b"#>").map_or(s.len(), |j| j + 2));
    }
    if rest.starts_with(b"#") {
        return Some(find(s, i, b"\n").map_or(s.len(), |j| j + 1));
    }
    if rest.starts_with(b"@'") || rest.starts_with(b"@\"") {
        let close: &[u8] = if rest[1] == b'\'' { b"\n'@" } else { b"\n\"@" };
        return Some(find(s, i + 2, close).map_or(s.len(), |j| j + 3));
    }
    match rest.first() {
        Some(b'\'') => {
            let mut j = i + 1;
            while j < s.len() {
                if s[j] == b'\'' {
                    if s.get(j + 1) == Some(&b'\'') {
                        j += 2;
                        continue;
                    }
                    return Some(j + 1);
                }
                j += 1;
            }
            Some(s.len())
        }
        Some(b'"') => {
            let mut j = i + 1;
            while j < s.len() {
                match s[j] {
                    b'`' => j += 2,
                    b'"' if s.get(j + 1) == Some(&b'"') => j += 2,
                    b'"' => return Some(j + 1),
                    _ => j += 1,
                }
            }
            Some(s.len())
        }
        _ => None,
    }
}

fn find(s: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    if from > s.len() {
        return None;
    }
    s[from..]
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| p + from)
}

/// Index of the bracket closing the one opened at `open` (`(`, `[` or `{`), skipping strings and
/// comments; `None` when unbalanced.
fn matching(s: &[u8], open: usize) -> Option<usize> {
    let mut depth = 0i32;
    let mut i = open;
    while i < s.len() {
        if let Some(j) = skip_opaque(s, i) {
            i = j;
            continue;
        }
        match s[i] {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            b'`' => i += 1,
            _ => {}
        }
        i += 1;
    }
    None
}

fn skip_ws(s: &[u8], mut i: usize) -> usize {
    while i < s.len() && s[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

/// Skips whitespace and comments.
fn skip_trivia(s: &[u8], mut i: usize) -> usize {
    loop {
        i = skip_ws(s, i);
        if i < s.len() && (s[i] == b'#' || s[i..].starts_with(b"<#")) {
            i = skip_opaque(s, i).unwrap_or(s.len());
        } else {
            return i;
        }
    }
}

fn text(s: &[u8], a: usize, b: usize) -> String {
    let b = b.min(s.len());
    if a >= b {
        return String::new();
    }
    String::from_utf8_lossy(&s[a..b]).into_owned()
}

// ------------------------------------------------------------------------------------------------
// help

/// Parses the inside of a `<# ... #>` comment as comment-based help.
pub fn parse_help(comment: &str) -> Help {
    let mut help = Help::default();
    let mut section: Option<(String, Option<String>)> = None;
    let mut lines: Vec<String> = Vec::new();
    let flush = |help: &mut Help, section: &Option<(String, Option<String>)>, lines: &[String]| {
        let body = dedent(lines);
        if let Some((key, arg)) = section {
            match key.as_str() {
                "SYNOPSIS" => help.synopsis = body,
                "DESCRIPTION" => help.description = body,
                "OUTPUTS" => help.outputs = body,
                "EXAMPLE" => help.examples.push(body),
                "PARAMETER" => {
                    if let Some(name) = arg {
                        help.parameters.push((name.clone(), collapse(&body)));
                    }
                }
                _ => {}
            }
        }
    };
    for line in comment.lines() {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix('.') {
            let mut parts = rest.split_whitespace();
            let key = parts.next().unwrap_or("").to_ascii_uppercase();
            if [
                "SYNOPSIS",
                "DESCRIPTION",
                "PARAMETER",
                "EXAMPLE",
                "INPUTS",
                "OUTPUTS",
                "NOTES",
                "LINK",
                "COMPONENT",
                "ROLE",
                "FUNCTIONALITY",
                "FORWARDHELPTARGETNAME",
                "FORWARDHELPCATEGORY",
                "REMOTEHELPRUNSPACE",
                "EXTERNALHELP",
            ]
            .contains(&key.as_str())
            {
                flush(&mut help, &section, &lines);
                lines.clear();
                section = Some((key, parts.next().map(str::to_owned)));
                continue;
            }
        }
        if t.starts_with("TOOL_CONFIG") || t.starts_with("# TOOL_CONFIG") {
            continue;
        }
        lines.push(line.to_owned());
    }
    flush(&mut help, &section, &lines);
    help
}

fn dedent(lines: &[String]) -> String {
    let indent = lines
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    let body: Vec<&str> = lines
        .iter()
        .map(|l| {
            if l.len() >= indent {
                &l[indent..]
            } else {
                l.trim_start()
            }
        })
        .map(str::trim_end)
        .collect();
    body.join("\n").trim().to_owned()
}

fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn tool_config(s: &str) -> Option<Value> {
    let mut found = None;
    for line in s.lines() {
        let t = line.trim().trim_start_matches('#').trim();
        if let Some(rest) = t.strip_prefix("TOOL_CONFIG") {
            let rest = rest.trim_start().trim_start_matches(':').trim();
            // Kept raw for the normalizer; one that is not a JSON object is kept as written,
            // which the normalizer reads as the strictest setting (with a warning).
            found = Some(match serde_json::from_str::<Value>(rest) {
                Ok(v @ Value::Object(_)) => v,
                _ => json!({ "TOOL_CONFIG": rest }),
            });
        }
    }
    found
}

// ------------------------------------------------------------------------------------------------
// param()

/// Parses the inside of a `param( ... )` block.
pub fn parse_params(block: &str) -> Vec<Param> {
    let s = block.as_bytes();
    // A piece without a `$variable` continues the previous default (`$X = 'a', 'b'`).
    let mut merged: Vec<(usize, usize)> = Vec::new();
    for (a, b) in split_top(s, b',') {
        let piece = text(s, a, b);
        match merged.last_mut() {
            Some(last) if !piece.contains('$') && !piece.trim().is_empty() => last.1 = b,
            _ => merged.push((a, b)),
        }
    }
    merged
        .into_iter()
        .filter_map(|(a, b)| parse_param(s, a, b))
        .collect()
}

/// Ranges of `s` separated by top-level `sep`.
fn split_top(s: &[u8], sep: u8) -> Vec<(usize, usize)> {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < s.len() {
        if let Some(j) = skip_opaque(s, i) {
            i = j;
            continue;
        }
        match s[i] {
            b'(' | b'[' | b'{' => {
                i = matching(s, i).map_or(s.len(), |j| j + 1);
                continue;
            }
            c if c == sep => {
                parts.push((start, i));
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    if start < s.len() {
        parts.push((start, s.len()));
    }
    parts
}

/// What a parameter's attributes (`[type]`, `[Parameter(...)]`, `[Validate...(...)]`) say.
#[derive(Default)]
struct Attrs {
    schema: Map<String, Value>,
    mandatory: bool,
    nullable: bool,
    enum_values: Option<Vec<Value>>,
    range: Option<(Value, Value)>,
}

impl Attrs {
    /// One attribute: the text between its brackets.
    fn read(&mut self, inner: &str) {
        let Some(paren) = inner.find('(') else {
            let (t, n) = type_schema(inner);
            self.nullable |= n;
            if let Value::Object(m) = t {
                self.schema.extend(m);
            }
            return;
        };
        let attr = inner[..paren].trim().to_ascii_lowercase();
        let args = inner[paren + 1..].trim_end().trim_end_matches(')');
        match attr.as_str() {
            "parameter" => self.mandatory |= is_mandatory(args),
            "validateset" => self.enum_values = Some(literal_list(args)),
            "validaterange" => {
                if let [lo, hi] = &literal_list(args)[..] {
                    self.range = Some((lo.clone(), hi.clone()));
                }
            }
            _ => {}
        }
    }

    /// The parameter, its schema completed from the attributes and the default.
    fn into_param(self, name: String, mut default: Option<Value>) -> Param {
        let mut schema = self.schema;
        let switch =
            schema.get("type") == Some(&json!("boolean")) && schema.contains_key("x-switch");
        if switch {
            schema.remove("x-switch");
            if default.is_none() {
                default = Some(Value::Bool(false));
            }
        }
        if let Some(values) = self.enum_values {
            if !schema.contains_key("type") {
                if values.iter().all(Value::is_string) {
                    schema.insert("type".into(), json!("string"));
                } else if values.iter().all(Value::is_i64) {
                    schema.insert("type".into(), json!("integer"));
                }
            }
            schema.insert("enum".into(), Value::Array(values));
        }
        if let Some((lo, hi)) = self.range {
            schema.insert("minimum".into(), lo);
            schema.insert("maximum".into(), hi);
        }
        if self.nullable {
            if let Some(Value::String(t)) = schema.get("type").cloned() {
                schema.insert("type".into(), json!([t, "null"]));
            }
        }
        if let Some(d) = &default {
            schema.insert("default".into(), d.clone());
        }
        Param {
            name,
            schema: Value::Object(schema),
            mandatory: self.mandatory,
            default,
            switch,
        }
    }
}

fn parse_param(s: &[u8], a: usize, b: usize) -> Option<Param> {
    let mut i = a;
    let mut attrs = Attrs::default();
    let mut name = None;
    while i < b {
        i = skip_trivia(s, i);
        if i >= b {
            break;
        }
        match s[i] {
            b'[' => {
                let close = matching(s, i).filter(|&c| c < b)?;
                attrs.read(text(s, i + 1, close).trim());
                i = close + 1;
            }
            b'$' => {
                let start = i + 1;
                let mut j = start;
                while j < b && (s[j].is_ascii_alphanumeric() || s[j] == b'_') {
                    j += 1;
                }
                name = Some(text(s, start, j));
                i = j;
                break;
            }
            _ => i += 1,
        }
    }
    let name = name.filter(|n| !n.is_empty())?;
    let rest = skip_trivia(s, i);
    let default = if rest < b && s[rest] == b'=' {
        literal(text(s, rest + 1, b).trim())
    } else {
        None
    };
    Some(attrs.into_param(name, default))
}

fn is_mandatory(args: &str) -> bool {
    for part in args.split(',') {
        let mut kv = part.splitn(2, '=');
        let key = kv.next().unwrap_or("").trim();
        if key.eq_ignore_ascii_case("mandatory") {
            return match kv.next().map(|v| v.trim().to_ascii_lowercase()) {
                None => true,
                Some(v) => v == "$true" || v == "1",
            };
        }
    }
    false
}

/// The schema of a PowerShell type literal; the flag says `[Nullable[T]]`.
fn type_schema(t: &str) -> (Value, bool) {
    let lower = t.trim().to_ascii_lowercase();
    let lower = lower.strip_prefix("system.").unwrap_or(&lower);
    if let Some(inner) = lower
        .strip_prefix("nullable[")
        .and_then(|r| r.strip_suffix(']'))
    {
        return (type_schema(inner).0, true);
    }
    if let Some(inner) = lower.strip_suffix("[]") {
        let (item, _) = type_schema(inner);
        let mut m = Map::new();
        m.insert("type".into(), json!("array"));
        if item.as_object().is_some_and(|o| !o.is_empty()) {
            m.insert("items".into(), item);
        }
        return (Value::Object(m), false);
    }
    let schema = match lower {
        "string" | "char" | "datetime" | "guid" | "uri" | "io.fileinfo" => {
            json!({"type": "string"})
        }
        "int" | "int32" | "int64" | "long" | "int16" | "byte" | "uint32" | "uint64" => {
            json!({"type": "integer"})
        }
        "double" | "float" | "single" | "decimal" => json!({"type": "number"}),
        "bool" | "boolean" => json!({"type": "boolean"}),
        "switch" | "management.automation.switchparameter" => {
            json!({"type": "boolean", "x-switch": true})
        }
        "hashtable" | "pscustomobject" | "collections.hashtable" | "psobject" => {
            json!({"type": "object"})
        }
        "array" | "object[]" | "collections.arraylist" => json!({"type": "array"}),
        _ => json!({}),
    };
    (schema, false)
}

/// A PowerShell literal as JSON: quoted strings, numbers, `$true`/`$false`/`$null`, `@(...)` or
/// comma lists of literals, `@{}`. Anything else (expressions, variables) is `None`.
pub fn literal(expr: &str) -> Option<Value> {
    let e = expr.trim();
    if e.is_empty() {
        return None;
    }
    let lower = e.to_ascii_lowercase();
    match lower.as_str() {
        "$true" => return Some(Value::Bool(true)),
        "$false" => return Some(Value::Bool(false)),
        "$null" => return Some(Value::Null),
        "@{}" => return Some(json!({})),
        "@()" => return Some(json!([])),
        _ => {}
    }
    if let Some(inner) = e.strip_prefix("@(").and_then(|r| r.strip_suffix(')')) {
        return Some(Value::Array(literal_list(inner)));
    }
    let b = e.as_bytes();
    if (b[0] == b'\'' || b[0] == b'"') && skip_opaque(b, 0) == Some(b.len()) {
        let body = &e[1..e.len() - 1];
        if b[0] == b'\'' {
            return Some(Value::String(body.replace("''", "'")));
        }
        if body.contains('$') {
            return None; // an expandable string: its value is only known at run time
        }
        return Some(Value::String(
            body.replace("`\"", "\"").replace("\"\"", "\""),
        ));
    }
    if let Ok(i) = e.parse::<i64>() {
        return Some(json!(i));
    }
    if let Ok(f) = e.parse::<f64>() {
        if f.is_finite() {
            return Some(json!(f));
        }
    }
    if split_top(b, b',').len() > 1 {
        let items = literal_list(e);
        if !items.is_empty() {
            return Some(Value::Array(items));
        }
    }
    None
}

fn literal_list(s: &str) -> Vec<Value> {
    let b = s.as_bytes();
    split_top(b, b',')
        .into_iter()
        .filter_map(|(x, y)| literal(&text(b, x, y)))
        .collect()
}

// ------------------------------------------------------------------------------------------------
// .EXAMPLE sections

/// The example arguments of a function's `.EXAMPLE` sections. A section with a line that calls
/// the function itself (the first such line, after an optional `PS C:\>` prompt; a line ending in a backtick
/// goes on) gives one object, its arguments bound as PowerShell binds them: `-Name value`,
/// `-Name:value`, a switch alone, a unique prefix of a name, positional arguments in
/// declaration order; what follows a top-level `|` or `;` is not the call's. Sections of prose,
/// pipelines into the function and calls with variables or expressions (`$path`,
/// `(Get-Date)`, `@{...}`) give none: they document, they are not calls a model can copy. A
/// parameter the function does not have is kept as written, so the host's check of the example
/// names the tool.
pub fn examples(help: &Help, function: &str, params: &[Param]) -> Vec<Value> {
    help.examples
        .iter()
        .filter_map(|section| {
            let line = call_line(section, function)?;
            let s = line.as_bytes();
            let piped = split_top(s, b'|').first().copied().unwrap_or((0, 0));
            let call = text(s, piped.0, piped.1);
            let c = call.as_bytes();
            let (a, b) = split_top(c, b';').first().copied().unwrap_or((0, 0));
            bind(&arg_tokens(&text(c, a, b)), params)
        })
        .collect()
}

/// The arguments of the section's first line that calls `function`, continuation lines joined.
fn call_line(section: &str, function: &str) -> Option<String> {
    let mut joined: Vec<String> = Vec::new();
    let mut open = false;
    for line in section.lines() {
        let t = line.trim_end();
        let (body, more) = match t.strip_suffix('`') {
            Some(body) => (body, true),
            None => (t, false),
        };
        match (open, joined.last_mut()) {
            (true, Some(last)) => last.push_str(&format!(" {}", body.trim())),
            _ => joined.push(body.to_owned()),
        }
        open = more;
    }
    joined.into_iter().find_map(|line| {
        let code = strip_prompt(line.trim_start());
        let b = code.as_bytes();
        let n = function.len();
        let calls = starts_with_ci(b, 0, function) && b.get(n).is_none_or(u8::is_ascii_whitespace);
        calls.then(|| code[n..].to_owned())
    })
}

/// A line without its `PS>` / `PS C:\>` prompt.
fn strip_prompt(line: &str) -> &str {
    let b = line.as_bytes();
    if starts_with_ci(b, 0, "PS") && matches!(b.get(2), Some(b'>' | b' ')) {
        if let Some(gt) = line.find('>') {
            return line[gt + 1..].trim_start();
        }
    }
    line
}

/// Command-mode tokens: split on whitespace outside quotes and brackets.
fn arg_tokens(args: &str) -> Vec<String> {
    let s = args.as_bytes();
    let mut tokens = Vec::new();
    let mut i = skip_ws(s, 0);
    while i < s.len() {
        let start = i;
        while i < s.len() && !s[i].is_ascii_whitespace() {
            i = match s[i] {
                b'\'' | b'"' => skip_opaque(s, i).unwrap_or(s.len()),
                b'(' | b'[' | b'{' => matching(s, i).map_or(s.len(), |j| j + 1),
                b'`' => i + 2,
                _ => i + 1,
            };
        }
        tokens.push(text(s, start, i));
        i = skip_ws(s, i);
    }
    tokens
}

fn is_param_token(t: &str) -> bool {
    let b = t.as_bytes();
    b.len() > 1 && b[0] == b'-' && b[1].is_ascii_alphabetic()
}

fn is_switch(p: &Param) -> bool {
    p.switch
}

/// The parameter `-name` means: its exact name (any case), else the one it begins.
fn param_named<'a>(params: &'a [Param], name: &str) -> Option<&'a Param> {
    let lower = name.to_ascii_lowercase();
    params
        .iter()
        .find(|p| p.name.eq_ignore_ascii_case(name))
        .or_else(|| {
            let mut prefixed = params
                .iter()
                .filter(|p| p.name.to_ascii_lowercase().starts_with(&lower));
            match (prefixed.next(), prefixed.next()) {
                (Some(p), None) => Some(p),
                _ => None,
            }
        })
}

/// Binds a call's tokens to the parameters; `None` when a value is not a literal.
fn bind(tokens: &[String], params: &[Param]) -> Option<Value> {
    let mut out = Map::new();
    let mut positional = Vec::new();
    let mut k = 0;
    while k < tokens.len() {
        let token = &tokens[k];
        if !is_param_token(token) {
            positional.push(token);
            k += 1;
            continue;
        }
        let (name, attached) = match token[1..].split_once(':') {
            Some((n, v)) => (n, Some(v)),
            None => (&token[1..], None),
        };
        let param = param_named(params, name);
        let schema = param.map(|p| &p.schema);
        let takes_value =
            !param.is_some_and(is_switch) && tokens.get(k + 1).is_some_and(|t| !is_param_token(t));
        let value = match attached {
            Some(v) => arg_value(v, schema)?,
            None if takes_value => {
                k += 1;
                arg_value(&tokens[k], schema)?
            }
            None => Value::Bool(true),
        };
        out.insert(
            param.map_or_else(|| name.to_owned(), |p| p.name.clone()),
            value,
        );
        k += 1;
    }
    let mut free = params
        .iter()
        .filter(|p| !is_switch(p) && !out.contains_key(&p.name))
        .collect::<Vec<_>>()
        .into_iter();
    for token in positional {
        let p = free.next()?;
        out.insert(p.name.clone(), arg_value(token, Some(&p.schema))?);
    }
    Some(Value::Object(out))
}

/// One argument as JSON, read for the parameter's schema: literals, bare words (strings),
/// comma lists; `None` for variables and expressions.
fn arg_value(token: &str, schema: Option<&Value>) -> Option<Value> {
    let t = token.trim();
    let kind = schema.and_then(|s| s.get("type")).and_then(Value::as_str);
    let bare = !t.is_empty() && !t.starts_with(['$', '(', '@', '{', '[', '\'', '"']);
    let value = match literal(t) {
        Some(v) => v,
        None if split_top(t.as_bytes(), b',').len() > 1 => {
            let item = schema.and_then(|s| s.get("items"));
            let parts = split_top(t.as_bytes(), b',');
            let items: Option<Vec<Value>> = parts
                .into_iter()
                .map(|(a, b)| arg_value(&text(t.as_bytes(), a, b), item))
                .collect();
            return items.map(Value::Array);
        }
        None if bare => Value::String(t.to_owned()),
        None => return None,
    };
    Some(match (kind, value) {
        // Command mode: `-City 42` passes the text 42 to a [string] parameter.
        (Some("string"), Value::Number(_)) => Value::String(t.to_owned()),
        (Some("array"), v @ Value::Array(_)) => v,
        (Some("array"), v) => Value::Array(vec![v]),
        (_, v) => v,
    })
}

// ------------------------------------------------------------------------------------------------
// functions and the file

struct Span {
    start: usize,
    end: usize,
}

/// Finds the top-level functions of a script and the first help comment of the file.
/// A `function Name [(params)] {…}`: its name, inline parameters and the body's braces.
struct Header {
    name: String,
    inline_params: Option<String>,
    open: usize,
    close: usize,
}

/// The definition whose `function` keyword is at `i`, or `Err(j)`: not one, scan on from `j`.
fn header(s: &[u8], i: usize) -> Result<Header, usize> {
    let name_start = skip_ws(s, i + 8);
    let mut j = name_start;
    while j < s.len() && !s[j].is_ascii_whitespace() && s[j] != b'{' && s[j] != b'(' {
        j += 1;
    }
    let name = text(s, name_start, j);
    let name = name.rsplit(':').next().unwrap_or(&name).to_owned(); // function global:Name
    let mut k = skip_trivia(s, j);
    let mut inline_params = None;
    if k < s.len() && s[k] == b'(' {
        let close = matching(s, k).unwrap_or(s.len());
        inline_params = Some(text(s, k + 1, close));
        k = skip_trivia(s, close + 1);
    }
    if k >= s.len() || s[k] != b'{' {
        return Err(j);
    }
    Ok(Header {
        name,
        inline_params,
        open: k,
        close: matching(s, k).unwrap_or(s.len()),
    })
}

/// The help comment a function body starts with (empty when none).
fn body_help(body: &[u8]) -> Help {
    let b0 = skip_ws(body, 0);
    if !body[b0..].starts_with(b"<#") {
        return Help::default();
    }
    let end = skip_opaque(body, b0).unwrap_or(body.len());
    parse_help(&text(body, b0 + 2, end.saturating_sub(2)))
}

/// The file's help with its tool config, when it has one: `(start, help, config)`.
type FileHelp = Option<(usize, Help, Option<Value>)>;

/// Where the text that belongs to the function at `i` starts (its TOOL_CONFIG lines are read
/// from there): its comment above, else after the file's help, else after the last function.
fn own_start(
    s: &[u8],
    i: usize,
    prev_end: usize,
    comments: &[Span],
    above: Option<&Span>,
    file_help: &mut FileHelp,
) -> usize {
    match (file_help, above) {
        (_, Some(c)) => c.start,
        (Some((start, _, config)), None) if *start >= prev_end => {
            let help_end = comments
                .iter()
                .find(|c| c.start == *start)
                .map_or(i, |c| c.end);
            // A TOOL_CONFIG line under the file's help (as sy-f-misc's docs show) is the
            // file's: it applies to every function, not only the first.
            match tool_config(&text(s, help_end, i)) {
                Some(gap) => {
                    config.get_or_insert(gap);
                    i
                }
                None => help_end,
            }
        }
        _ => prev_end,
    }
}

pub fn parse_functions(source: &str) -> (Vec<Function>, Option<Help>, Option<Value>) {
    let s = source.as_bytes();
    let mut functions = Vec::new();
    let mut comments: Vec<Span> = Vec::new();
    let mut file_help: FileHelp = None;
    let mut prev_end = 0usize;
    let mut i = 0;
    while i < s.len() {
        if s[i..].starts_with(b"<#") {
            let end = skip_opaque(s, i).unwrap_or(s.len());
            comments.push(Span { start: i, end });
            i = end;
            continue;
        }
        if let Some(j) = skip_opaque(s, i) {
            i = j;
            continue;
        }
        if s[i] == b'{' || s[i] == b'(' {
            i = matching(s, i).map_or(s.len(), |j| j + 1);
            continue;
        }
        let boundary = i == 0 || !is_word(s[i - 1]);
        if boundary
            && starts_with_ci(s, i, "function")
            && s.get(i + 8).is_some_and(|c| c.is_ascii_whitespace())
        {
            let Header {
                name,
                inline_params,
                open,
                close,
            } = match header(s, i) {
                Ok(h) => h,
                Err(j) => {
                    i = j;
                    continue;
                }
            };
            let body = &s[(open + 1).min(close)..close];
            // help: first comment in the body, else the comment right above `function`
            let mut help = body_help(body);
            let body_help = !help.is_empty();
            let mut above = comments
                .iter()
                .rev()
                .find(|c| c.end <= i && c.start >= prev_end)
                .filter(|c| blank_lines(&s[c.end..i]) <= 1);
            // The file's first comment is the file's help unless it is this function's help.
            if functions.is_empty() {
                if let Some(first) = comments.first().filter(|c| c.end <= i) {
                    let attached = above.is_some_and(|c| c.start == first.start);
                    if !attached || body_help {
                        let inner = text(s, first.start + 2, first.end - 2);
                        file_help = Some((first.start, parse_help(&inner), tool_config(&inner)));
                        if attached {
                            above = None;
                        }
                    }
                }
            }
            if !body_help {
                if let Some(c) = above {
                    help = parse_help(&text(s, c.start + 2, c.end - 2));
                }
            }
            let params_text = match inline_params {
                Some(p) => Some(p),
                None => find_param_block(body).map(|(a, b)| text(body, a, b)),
            };
            let own_start = own_start(s, i, prev_end, &comments, above, &mut file_help);
            let own_text = text(s, own_start.max(prev_end), close);
            functions.push(Function {
                name,
                help,
                params: params_text.map(|p| parse_params(&p)).unwrap_or_default(),
                config: tool_config(&own_text),
            });
            prev_end = close + 1;
            i = close + 1;
            continue;
        }
        i += 1;
    }
    if file_help.is_none() && functions.is_empty() {
        if let Some(first) = comments.first() {
            let inner = text(s, first.start + 2, first.end - 2);
            file_help = Some((first.start, parse_help(&inner), tool_config(&inner)));
        }
    }
    match file_help {
        Some((_, help, config)) => (functions, Some(help), config),
        None => (functions, None, None),
    }
}

fn blank_lines(between: &[u8]) -> usize {
    let t = String::from_utf8_lossy(between);
    t.lines().skip(1).filter(|l| l.trim().is_empty()).count()
}

/// The range inside the `param( ... )` of a function body.
fn find_param_block(body: &[u8]) -> Option<(usize, usize)> {
    let mut i = 0;
    while i < body.len() {
        if let Some(j) = skip_opaque(body, i) {
            i = j;
            continue;
        }
        if body[i] == b'{' {
            return None; // param() comes before any nested block
        }
        if (i == 0 || !is_word(body[i - 1])) && starts_with_ci(body, i, "param") {
            let k = skip_ws(body, i + 5);
            if body.get(k) == Some(&b'(') {
                let close = matching(body, k)?;
                return Some((k + 1, close));
            }
        }
        if body[i] == b'[' {
            // [CmdletBinding()] and friends
            i = matching(body, i).map_or(body.len(), |j| j + 1);
            continue;
        }
        i += 1;
    }
    None
}

/// `.OUTPUTS` as sy-f-misc records it: `{"type": first word, "note": the rest}`.
fn declared_return(outputs: &str) -> Option<Value> {
    let text = collapse(outputs);
    let (kind, note) = match text.split_once(' ') {
        Some((k, n)) => (k, n.trim()),
        None => (text.as_str(), ""),
    };
    match (kind.is_empty(), note.is_empty()) {
        (true, _) => None,
        (false, true) => Some(json!({ "type": kind })),
        (false, false) => Some(json!({ "type": kind, "note": note })),
    }
}

/// `TOOL_CONFIG` keys that are not permissions: the tool's MCP `title` and `annotations`.
const DISPLAY_KEYS: [&str; 2] = ["title", "annotations"];

/// A function's or the file's `TOOL_CONFIG`, raw (the normalizer in `permissions.rs` reads it).
fn raw(config: Option<&Value>) -> Value {
    config.cloned().unwrap_or_else(|| json!({}))
}

/// Describes a PowerShell script: the document cached as `{name}.tool.json`.
pub fn describe(source: &str, path: &str) -> Value {
    let (functions, file_help, file_config) = parse_functions(source);
    let defaults = raw(file_config.as_ref());
    let formatters: Vec<String> = functions
        .iter()
        .filter_map(|f| {
            f.name
                .get(..7)
                .filter(|p| p.eq_ignore_ascii_case("format-"))
                .map(|_| f.name[7..].to_ascii_lowercase())
        })
        .collect();
    let mut tools = Vec::new();
    for f in &functions {
        // sy-f-misc's reader keeps `_*` and `Internal-*` private and `Format-*` as formatters.
        let lower = f.name.to_ascii_lowercase();
        if lower.starts_with('_') || lower.starts_with("internal-") || lower.starts_with("format-")
        {
            continue;
        }
        let mut props = Map::new();
        let mut required = Vec::new();
        for p in &f.params {
            let mut schema = p.schema.clone();
            if let (Some(desc), Value::Object(m)) = (f.help.parameter(&p.name), &mut schema) {
                if !desc.is_empty() {
                    m.insert("description".into(), json!(desc));
                }
            }
            if p.mandatory {
                required.push(json!(p.name));
            }
            props.insert(p.name.clone(), schema);
        }
        let mut params =
            json!({"type": "object", "properties": props, "additionalProperties": false});
        if !required.is_empty() {
            params["required"] = Value::Array(required);
        }
        let mut permissions = raw(f.config.as_ref());
        let mut tool = json!({
            "type": "function",
            "function": {"name": f.name, "description": f.help.text(), "parameters": params},
            "format": formatters.contains(&f.name.to_ascii_lowercase()),
            "nullDefaults": [],
        });
        // MCP's display fields ride in the same TOOL_CONFIG line; the host checks them.
        if let (Value::Object(config), Value::Object(entry)) = (&mut permissions, &mut tool) {
            for key in DISPLAY_KEYS {
                if let Some(value) = config.remove(key) {
                    entry.insert(key.into(), value);
                }
            }
        }
        tool["permissions"] = permissions;
        if let Some(declared) = declared_return(&f.help.outputs) {
            tool["declaredReturnType"] = declared;
        }
        let examples = examples(&f.help, &f.name, &f.params);
        if !examples.is_empty() {
            tool["examples"] = Value::Array(examples);
        }
        tools.push(tool);
    }
    let stem = std::path::Path::new(path)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut doc = json!({
        "type": "PowerShellModule",
        "name": stem,
        "scriptPath": path,
        "tools": tools,
        "rulePrompt": file_help.map(|h| h.text()).unwrap_or_default(),
        "defaultPermissions": defaults,
    });
    let file = std::path::Path::new(path)
        .file_name()
        .map_or_else(|| path.to_owned(), |f| f.to_string_lossy().into_owned());
    crate::permissions::normalize_document(&mut doc, &file);
    doc
}

/// PowerShell: described natively ([`describe`], no `pwsh` needed), called with one `pwsh` per
/// call running the runner script (`priv/powershell/cmdc_runner.ps1`, setting `runner`).
pub struct PowerShell;

impl Language for PowerShell {
    fn name(&self) -> &'static str {
        "powershell"
    }

    fn label(&self) -> &'static str {
        "PowerShell"
    }

    fn extensions(&self) -> &'static [&'static str] {
        &["ps1"]
    }

    fn module_type(&self) -> &'static str {
        "PowerShellModule"
    }

    fn program(&self) -> &'static str {
        "pwsh"
    }

    fn allow_hint(&self) -> &'static str {
        "add `# TOOL_CONFIG: {\"executionPolicy\": \"auto\"}` to the function's help"
    }

    fn describer(&self) -> Describer {
        Describer::Native(describe)
    }

    fn calls(&self) -> Calls {
        Calls::PerCall
    }

    fn command<'a>(
        &'a self,
        _mode: Mode,
        _script: &'a Path,
        settings: &'a Settings,
        path_env: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Program>> {
        Box::pin(async move {
            let path_var = interpreter::path_var(path_env);
            let Some(pwsh) = interpreter::which("pwsh", path_var.as_deref()) else {
                return Err(Error::script("pwsh_missing", PWSH_MISSING, ""));
            };
            let runner = settings.get(self.name(), "runner").unwrap_or_default();
            let mut args: Vec<OsString> = ["-NoLogo", "-NoProfile", "-NonInteractive", "-File"]
                .iter()
                .map(OsString::from)
                .collect();
            args.push(runner.into());
            Ok(Program {
                program: pwsh,
                args,
                env: Vec::new(),
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCRIPT: &str = r#"<#
.SYNOPSIS
    File tools for Windows hosts.
.DESCRIPTION
    Always use absolute paths.
# TOOL_CONFIG: {"executionPolicy": "auto"}
#>

function Get-Weather {
    <#
    .SYNOPSIS
        Get the weather for a city.
    .DESCRIPTION
        Looks it up online,
        in metric units.
    .PARAMETER City
        The city name
        (English).
    .PARAMETER Days
        How many days.
    .PARAMETER Unit
        c or f.
    .OUTPUTS
        A hashtable.
    #>
    [CmdletBinding()]
    param(
        [Parameter(Mandatory = $true, Position = 0)]
        [string]$City,
        [ValidateRange(1, 10)]
        [int]$Days = 3,
        [ValidateSet('c', 'f')]
        [string]$Unit = 'c',
        [switch]$Verbose2,
        [string[]]$Tags = @('a', "b"),
        [hashtable]$Extra,
        [Nullable[int]]$Limit,
        $Untyped = "it's",
        [double]$Ratio = 0.5,
        [bool]$Flag = $true
    )
    $x = "{ not a brace"
    if ($City) { return @{ city = $City } }
}

# TOOL_CONFIG: { "executionPolicy": "ask-always", "resultApprovalPolicy": "always", "title": "Remove a file", "annotations": {"destructiveHint": true} }
function Remove-Item2 {
    [CmdletBinding()]
    param([Parameter(Mandatory)][string]$Path)
    Remove-Item $Path
}

function Format-Get-Weather($result, $args) { "$result" }

function _Helper { param($a) }

<#
.SYNOPSIS
Help above the function.
.PARAMETER Name
Who to greet.
#>
function Say-Hello {
    param(
        # a line comment, with a comma
        [Parameter(Mandatory=$false)][string] $Name = "world"
    )
    "hello $Name"
}

function NoHelp { "x" }
"#;

    #[test]
    fn reads_help_params_and_config() {
        let doc = describe(SCRIPT, "/tmp/files.ps1");
        assert_eq!(doc["type"], "PowerShellModule");
        assert_eq!(doc["name"], "files");
        assert_eq!(
            doc["rulePrompt"],
            "File tools for Windows hosts.\n\nAlways use absolute paths."
        );
        assert_eq!(doc["defaultPermissions"]["executionPolicy"], "auto");
        let names: Vec<&str> = doc["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            ["Get-Weather", "Remove-Item2", "Say-Hello", "NoHelp"]
        );

        let w = &doc["tools"][0];
        assert_eq!(w["format"], true);
        assert_eq!(w["permissions"]["executionPolicy"], "auto");
        assert_eq!(w["permissions"]["resultApprovalPolicy"], "never");
        let f = &w["function"];
        assert_eq!(
            f["description"],
            "Get the weather for a city.\n\nLooks it up online,\nin metric units."
        );
        let p = &f["parameters"];
        assert_eq!(p["required"], json!(["City"]));
        assert_eq!(p["additionalProperties"], false);
        let props = &p["properties"];
        assert_eq!(
            props["City"],
            json!({"type": "string", "description": "The city name (English)."})
        );
        assert_eq!(
            props["Days"],
            json!({"type": "integer", "minimum": 1, "maximum": 10, "default": 3, "description": "How many days."})
        );
        assert_eq!(
            props["Unit"],
            json!({"type": "string", "enum": ["c", "f"], "default": "c", "description": "c or f."})
        );
        assert_eq!(
            props["Verbose2"],
            json!({"type": "boolean", "default": false})
        );
        assert_eq!(
            props["Tags"],
            json!({"type": "array", "items": {"type": "string"}, "default": ["a", "b"]})
        );
        assert_eq!(props["Extra"], json!({"type": "object"}));
        assert_eq!(props["Limit"], json!({"type": ["integer", "null"]}));
        assert_eq!(props["Untyped"], json!({"default": "it's"}));
        assert_eq!(props["Ratio"], json!({"type": "number", "default": 0.5}));
        assert_eq!(props["Flag"], json!({"type": "boolean", "default": true}));

        let r = &doc["tools"][1];
        assert_eq!(r["permissions"]["executionPolicy"], "ask-always");
        assert_eq!(r["permissions"]["resultApprovalPolicy"], "always");
        assert_eq!(r["format"], false);
        assert_eq!(r["function"]["parameters"]["required"], json!(["Path"]));
        // Title and annotations leave the permissions for the tool entry.
        assert_eq!(r["title"], "Remove a file");
        assert_eq!(r["annotations"], json!({"destructiveHint": true}));
        assert!(r["permissions"].get("title").is_none());
        assert!(w.get("title").is_none());

        let h = &doc["tools"][2]["function"];
        assert_eq!(h["description"], "Help above the function.");
        assert_eq!(
            h["parameters"]["properties"]["Name"],
            json!({"type": "string", "default": "world", "description": "Who to greet."})
        );
        assert!(h["parameters"].get("required").is_none());

        let n = &doc["tools"][3]["function"];
        assert_eq!(n["description"], "");
        assert_eq!(n["parameters"]["properties"], json!({}));
    }

    #[test]
    fn inline_params_and_nested_blocks() {
        let src = r#"
function Add-Numbers([int]$A, [int]$B = 2) { $A + $B }

function Get-Items {
    param(
        [ValidateSet(1, 2, 3)]$Level = 1,
        [string[]]$Names = 'a', 'b'
    )
    foreach ($n in $Names) { if ($n) { "{$n}" } }
    function Inner-Helper { "not a tool" }
}
"#;
        let doc = describe(src, "nums.ps1");
        let tools = doc["tools"].as_array().unwrap();
        assert_eq!(tools.len(), 2, "{doc:#}");
        let add = &tools[0]["function"]["parameters"]["properties"];
        assert_eq!(add["A"], json!({"type": "integer"}));
        assert_eq!(add["B"], json!({"type": "integer", "default": 2}));
        let items = &tools[1]["function"]["parameters"]["properties"];
        assert_eq!(
            items["Level"],
            json!({"type": "integer", "enum": [1, 2, 3], "default": 1})
        );
        assert_eq!(
            items["Names"],
            json!({"type": "array", "items": {"type": "string"}, "default": ["a", "b"]})
        );
        assert_eq!(doc["rulePrompt"], "");
    }

    #[test]
    fn literals() {
        assert_eq!(literal("'a''b'"), Some(json!("a'b")));
        assert_eq!(literal("\"x\""), Some(json!("x")));
        assert_eq!(literal("\"$env:HOME\""), None);
        assert_eq!(literal("-3"), Some(json!(-3)));
        assert_eq!(literal("1.5"), Some(json!(1.5)));
        assert_eq!(literal("$null"), Some(Value::Null));
        assert_eq!(literal("1, 2"), Some(json!([1, 2])));
        assert_eq!(literal("@()"), Some(json!([])));
        assert_eq!(literal("(Get-Date)"), None);
        assert_eq!(literal("$other"), None);
    }

    #[test]
    fn mandatory_spellings() {
        assert!(is_mandatory("Mandatory"));
        assert!(is_mandatory("Mandatory=$true, Position=0"));
        assert!(is_mandatory(" mandatory = $True"));
        assert!(!is_mandatory("Mandatory=$false"));
        assert!(!is_mandatory("Position=0"));
    }

    #[test]
    fn a_tool_config_under_the_file_help_applies_to_every_function() {
        let source = "<#\n.SYNOPSIS\n    File tools.\n#>\n# TOOL_CONFIG: {\"executionPolicy\": \"ask-always\", \"resultApprovalPolicy\": \"always\"}\n\nfunction Get-A {\n  <# .SYNOPSIS\n  A. #>\n  param([string]$X)\n}\n\nfunction Get-B {\n  param([string]$Y)\n}\n\nfunction Get-C {\n  # TOOL_CONFIG: {\"executionPolicy\": \"auto\"}\n  param([string]$Z)\n}\n";
        let doc = describe(source, "files.ps1");
        let perms = |i: usize| {
            let p = &doc["tools"][i]["permissions"];
            (
                p["executionPolicy"].clone(),
                p["resultApprovalPolicy"].clone(),
            )
        };
        assert_eq!(perms(0), (json!("ask-always"), json!("always")));
        assert_eq!(perms(1), (json!("ask-always"), json!("always")));
        // a function's own setting replaces the file's for what it sets
        assert_eq!(perms(2), (json!("auto"), json!("always")));
        assert_eq!(doc["rulePrompt"], "File tools.");
    }

    #[test]
    fn outputs_are_kept_and_internal_functions_are_private() {
        let doc = describe(
            "function Get-Size {\n  <# .SYNOPSIS\n  Size.\n  .OUTPUTS\n  int The size\n  in bytes. #>\n  param([string]$P)\n}\nfunction Internal-Helper {\n  param([string]$X)\n}\nfunction Get-Bare {\n  <# .SYNOPSIS\n  Bare.\n  .OUTPUTS\n  hashtable #>\n}\n",
            "s.ps1",
        );
        let names: Vec<&str> = doc["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["Get-Size", "Get-Bare"]);
        assert_eq!(
            doc["tools"][0]["declaredReturnType"],
            json!({"type": "int", "note": "The size in bytes."})
        );
        assert_eq!(
            doc["tools"][1]["declaredReturnType"],
            json!({"type": "hashtable"})
        );
    }

    #[test]
    fn a_broken_tool_config_is_strictest_with_a_warning() {
        let doc = describe(
            "function Get-A {\n  # TOOL_CONFIG: {executionPolicy: auto}\n  param([string]$X)\n}\n",
            "a.ps1",
        );
        assert_eq!(
            doc["tools"][0]["permissions"]["executionPolicy"],
            "ask-always"
        );
        assert_eq!(
            doc["tools"][0]["permissions"]["resultApprovalPolicy"],
            "always"
        );
        let w = doc["warnings"][0].as_str().unwrap();
        assert!(w.starts_with("a.ps1: Get-A: TOOL_CONFIG"), "{w}");
    }

    #[test]
    fn no_functions_and_unbalanced_input() {
        let (fs, help, _) = parse_functions("<# .SYNOPSIS\n Only help. #>\nWrite-Host hi\n");
        assert!(fs.is_empty());
        assert_eq!(help.unwrap().synopsis, "Only help.");
        // unbalanced braces or strings must not panic
        for src in [
            "function A {",
            "function B ( [string]$x",
            "param(\"",
            "@'\nno end",
            "<# open",
            "function",
        ] {
            let _ = describe(src, "x.ps1");
        }
    }

    const EXAMPLES: &str = r#"
function Get-Forecast {
    <#
    .SYNOPSIS
        The forecast for a city.
    .EXAMPLE
        PS C:\> Get-Forecast -City 'New York' -Days 3
        Three days for New York.
    .EXAMPLE
        get-forecast Paris -Da 2 -Metric
    .EXAMPLE
        PS> Get-Forecast -City Oslo `
              -Tags a,b -Metric:$false | Format-Table
    .EXAMPLE
        Get-Forecast -City 42; Write-Host done
    .EXAMPLE
        Get-Forecast -City $home
    .EXAMPLE
        'Rome', 'Kyiv' | Get-Forecast
    .EXAMPLE
        Shows the forecast of any city, in prose.
    .EXAMPLE
        Get-Forecast -Town Lyon
    #>
    param(
        [Parameter(Mandatory = $true)][string]$City,
        [int]$Days = 1,
        [string[]]$Tags,
        [switch]$Metric
    )
}
"#;

    #[test]
    fn example_sections_become_example_arguments() {
        let doc = describe(EXAMPLES, "f.ps1");
        let tool = &doc["tools"][0];
        assert_eq!(
            tool["examples"],
            json!([
                {"City": "New York", "Days": 3},
                {"City": "Paris", "Days": 2, "Metric": true},
                {"City": "Oslo", "Tags": ["a", "b"], "Metric": false},
                {"City": "42"},
                {"Town": "Lyon"}
            ])
        );
        // Examples are not part of the description.
        assert_eq!(tool["function"]["description"], "The forecast for a city.");
    }

    #[test]
    fn example_binding_rules() {
        let (fs, _, _) = parse_functions(EXAMPLES);
        let f = &fs[0];
        let call = |text: &str| {
            let help = Help {
                examples: vec![text.to_owned()],
                ..Help::default()
            };
            examples(&help, &f.name, &f.params)
        };
        // Positional arguments skip switches and names already bound.
        assert_eq!(
            call("Get-Forecast 5 -City X"),
            vec![json!({"City": "X", "Days": 5})]
        );
        // More positional arguments than parameters, ambiguous input: no example.
        assert!(call("Get-Forecast a 1 x y").is_empty());
        assert!(call("Get-Forecast -City (Get-Location)").is_empty());
        assert!(call("Get-Forecast -City @{a=1}").is_empty());
        // Another command that starts like it is not a call of it.
        assert!(call("Get-ForecastHistory -City X").is_empty());
        // A name the function does not have is kept as written: the host's check names the tool.
        assert_eq!(
            call("Get-Forecast -City X -Unknown"),
            vec![json!({"City": "X", "Unknown": true})]
        );
        // Unbalanced input never panics.
        for text in [
            "Get-Forecast -City 'open",
            "Get-Forecast (",
            "Get-Forecast `",
            "PS>",
        ] {
            let _ = call(text);
        }
    }
}
