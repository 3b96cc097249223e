//! Tool names per format: the one rule of [`crate::names`], mapped to each provider's own.

use std::borrow::Cow;

use super::format::Format;
use super::warn::Cx;
use crate::error::{Error, Result};
use crate::names;

/// The name `format` is given for the tool `name` (see [`crate::names::for_provider`]).
pub fn tool_name(name: &str, format: Format) -> Cow<'_, str> {
    names::for_provider(name, format.name_rule())
}

/// Refuses a list whose names break the one rule, or two of whose names `format` would be given
/// as the same name.
pub fn check_names<'a>(
    list: impl IntoIterator<Item = &'a str> + Clone,
    format: Format,
) -> Result<()> {
    for name in list.clone() {
        names::check(name)?;
    }
    match names::collision(list, format.name_rule()) {
        Some((a, b, mapped)) => Err(Error::Tool(format!(
            "tools {a:?} and {b:?} would both be named {mapped:?} for {} (names there are {}): \
             rename one of them",
            format.label(),
            format.name_rule().describe()
        ))),
        None => Ok(()),
    }
}

/// Says when the format is given another name than the tool's own.
pub(super) fn check_tool_name(cx: &mut Cx, name: &str) {
    let mapped = tool_name(name, cx.format);
    if mapped != name {
        let target = cx.format.label();
        let rule = cx.format.name_rule().describe();
        cx.warn(
            "",
            "name",
            format!(
                "tool name {name:?} is given to {target} as {mapped:?} (names there are {rule}); \
                 CMDC.Tool.Runner maps calls to {mapped:?} back to {name:?}"
            ),
        );
    }
}
