//! Tool names: whether a format accepts a tool's name.

use super::format::Format;
use super::warn::Cx;

pub(super) fn check_tool_name(cx: &mut Cx, name: &str) {
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
