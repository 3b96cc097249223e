//! Metadata files next to a tool: `<stem>.json` (name, description, settings, per-tool
//! entries) and `<stem>.md` (the description, front matter removed).

use serde_json::{Map, Value};

use super::model::{json_string, Meta};
use crate::error::{Error, Result};

/// A `.md` file's front matter (`---` … `---` at the top) and its body.
fn front_matter(text: &str) -> (Option<&str>, &str) {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return (None, text);
    };
    let mut pos = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            return (Some(&rest[..pos]), &rest[pos + line.len()..]);
        }
        pos += line.len();
    }
    (None, text)
}

/// The text of a `.md` metadata file without its front matter (`---` … `---`), trimmed;
/// `None` when nothing is left.
pub fn markdown_body(text: &str) -> Option<String> {
    let body = front_matter(text).1.trim();
    (!body.is_empty()).then(|| body.to_string())
}

/// What a `.md` file's front matter says about the tool, as metadata settings: `title: …`,
/// `namespace: …` (its OpenAI Responses namespace), the
/// annotation hints (`readOnlyHint: true`, `read_only_hint: false`, any key ending in
/// `Hint`/`_hint`, collected under `annotations`) and `examples` (see [`front_examples`]); the
/// Elixir side checks names and values as it does a `.json` file's. Other keys are left alone:
/// front matter often serves other programs (site generators, agent definitions).
pub fn markdown_display(text: &str) -> Map<String, Value> {
    let mut display = Map::new();
    let Some(front) = front_matter(text).0 else {
        return display;
    };
    let mut hints = Map::new();
    let lines: Vec<&str> = front.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        // Only top-level keys: indented lines belong to the key above.
        if line.starts_with([' ', '\t', '-']) {
            continue;
        }
        let Some((key, raw)) = line.split_once(':') else {
            continue;
        };
        let (key, value) = (key.trim(), scalar(raw.trim()));
        if key == "title" || key == "namespace" {
            display.insert(key.to_string(), value);
        } else if key == "examples" {
            display.insert(key.to_string(), front_examples(raw.trim(), &lines[i + 1..]));
        } else if key.ends_with("Hint") || key.ends_with("_hint") {
            hints.insert(key.to_string(), value);
        }
    }
    if !hints.is_empty() {
        display.insert("annotations".to_string(), Value::Object(hints));
    }
    display
}

/// A front matter's `examples`: a JSON array on the key's line (`examples: [{"q": "x"}]`), or a
/// block list below it with one JSON object per item (`  - {"q": "x"}`: YAML's flow form, which
/// JSON objects are). Anything else comes back as the text written, which the Elixir side
/// rejects naming the tool (an example must be an object).
fn front_examples(inline: &str, below: &[&str]) -> Value {
    if !inline.is_empty() {
        return serde_json::from_str(inline).unwrap_or_else(|_| Value::String(inline.to_string()));
    }
    let items = below
        .iter()
        .take_while(|l| l.trim().is_empty() || l.starts_with([' ', '\t', '-']))
        .filter_map(|l| l.trim().strip_prefix('-').map(str::trim));
    Value::Array(
        items
            .map(|item| {
                serde_json::from_str(item).unwrap_or_else(|_| Value::String(item.to_string()))
            })
            .collect(),
    )
}

/// A front-matter value: `true`/`false`, a quoted string, or the text as written.
fn scalar(value: &str) -> Value {
    match value {
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        _ => {
            let unquoted = ['"', '\'']
                .iter()
                .find_map(|q| value.strip_prefix(*q)?.strip_suffix(*q));
            Value::String(unquoted.unwrap_or(value).to_string())
        }
    }
}

/// Parses `<stem>.json` metadata: `name`, `description`, `disabled`, `tools` (per-tool metadata
/// by the tool's own name), `settings`; every other key is a setting too.
pub fn parse_meta(text: &[u8]) -> Result<Meta> {
    let value: Value =
        serde_json::from_slice(text).map_err(|e| Error::Json(format!("invalid JSON: {e}")))?;
    meta_from(&value, true)
}

fn meta_from(value: &Value, top: bool) -> Result<Meta> {
    let map = value
        .as_object()
        .ok_or_else(|| Error::Json("expected a JSON object".into()))?;
    let mut meta = Meta::default();
    for (key, v) in map {
        match key.as_str() {
            "name" => match v {
                Value::String(s) if valid_name(s) => meta.name = Some(s.clone()),
                _ => {
                    return Err(Error::Json(format!(
                        "\"name\" must be a tool name (1 to 128 letters, digits, _ . or -), got {v}"
                    )))
                }
            },
            "description" => match v {
                Value::String(s) => meta.description = Some(s.clone()),
                _ => {
                    return Err(Error::Json(format!(
                        "\"description\" must be a string, got {v}"
                    )))
                }
            },
            "disabled" => match v {
                Value::Bool(b) => meta.disabled = *b,
                _ => {
                    return Err(Error::Json(format!(
                        "\"disabled\" must be true or false, got {v}"
                    )))
                }
            },
            "settings" => match v {
                Value::Object(s) => {
                    for (k, sv) in s {
                        meta.settings.insert(k.clone(), sv.clone());
                    }
                }
                _ => {
                    return Err(Error::Json(format!(
                        "\"settings\" must be an object, got {v}"
                    )))
                }
            },
            "tools" if top => match v {
                Value::Object(tools) => {
                    for (tool, tv) in tools {
                        let sub = meta_from(tv, false).map_err(|e| {
                            Error::Json(format!("in \"tools\".{}: {e}", json_string(tool)))
                        })?;
                        meta.tools.insert(tool.clone(), sub);
                    }
                }
                _ => {
                    return Err(Error::Json(format!(
                        "\"tools\" must be an object of per-tool metadata, got {v}"
                    )))
                }
            },
            _ => {
                meta.settings.insert(key.clone(), v.clone());
            }
        }
    }
    Ok(meta)
}

/// A tool name by the one rule ([`crate::names::NAME_RULE`]), the registry's too.
pub fn valid_name(name: &str) -> bool {
    crate::names::valid(name)
}
