//! Metadata files next to a tool: `<stem>.json` (name, description, settings, per-tool
//! entries) and `<stem>.md` (the description, front matter removed).

use std::fs;
use std::path::Path;

use serde_json::Value;

use super::roots::json_string;
use super::{Meta, MAX_METADATA_BYTES};

/// The text of a `.md` metadata file without its front matter (`---` … `---`), trimmed;
/// `None` when nothing is left.
pub fn markdown_body(text: &str) -> Option<String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let body = match text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    {
        Some(rest) => {
            let mut offset = None;
            let mut pos = 0;
            for line in rest.split_inclusive('\n') {
                if line.trim_end() == "---" {
                    offset = Some(pos + line.len());
                    break;
                }
                pos += line.len();
            }
            match offset {
                Some(end) => &rest[end..],
                None => text,
            }
        }
        None => text,
    };
    let body = body.trim();
    (!body.is_empty()).then(|| body.to_string())
}

/// Parses `<stem>.json` metadata: `name`, `description`, `disabled`, `tools` (per-tool metadata
/// by the tool's own name), `settings`; every other key is a setting too.
pub fn parse_meta(text: &[u8]) -> Result<Meta, String> {
    let value: Value = serde_json::from_slice(text).map_err(|e| format!("invalid JSON: {e}"))?;
    meta_from(&value, true)
}

fn meta_from(value: &Value, top: bool) -> Result<Meta, String> {
    let map = value.as_object().ok_or("expected a JSON object")?;
    let mut meta = Meta::default();
    for (key, v) in map {
        match key.as_str() {
            "name" => match v {
                Value::String(s) if valid_name(s) => meta.name = Some(s.clone()),
                _ => {
                    return Err(format!(
                        "\"name\" must be a tool name (1 to 128 letters, digits, _ . or -), got {v}"
                    ))
                }
            },
            "description" => match v {
                Value::String(s) => meta.description = Some(s.clone()),
                _ => return Err(format!("\"description\" must be a string, got {v}")),
            },
            "disabled" => match v {
                Value::Bool(b) => meta.disabled = *b,
                _ => return Err(format!("\"disabled\" must be true or false, got {v}")),
            },
            "settings" => match v {
                Value::Object(s) => {
                    for (k, sv) in s {
                        meta.settings.insert(k.clone(), sv.clone());
                    }
                }
                _ => return Err(format!("\"settings\" must be an object, got {v}")),
            },
            "tools" if top => match v {
                Value::Object(tools) => {
                    for (tool, tv) in tools {
                        let sub = meta_from(tv, false)
                            .map_err(|e| format!("in \"tools\".{}: {e}", json_string(tool)))?;
                        meta.tools.insert(tool.clone(), sub);
                    }
                }
                _ => {
                    return Err(format!(
                        "\"tools\" must be an object of per-tool metadata, got {v}"
                    ))
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

/// Reads a metadata file, refusing one larger than `MAX_METADATA_BYTES` (they are read on
/// every scan).
pub(super) fn read_small(path: &Path) -> Result<Vec<u8>, String> {
    let md = fs::metadata(path).map_err(|e| e.to_string())?;
    if md.len() > MAX_METADATA_BYTES {
        return Err(format!(
            "{} bytes, more than the {MAX_METADATA_BYTES} allowed",
            md.len()
        ));
    }
    fs::read(path).map_err(|e| e.to_string())
}
