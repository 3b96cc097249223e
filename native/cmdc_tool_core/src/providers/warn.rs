//! Warnings: what a conversion dropped, rewrote with another meaning, or found over a limit.

use serde_json::{Map, Value};

use super::format::Format;

/// Something the conversion dropped, could not express, or found over a target's limit.
#[derive(Debug, Clone, PartialEq)]
pub struct Warning {
    pub tool: String,
    /// JSON Pointer into the tool's parameters schema (`""` is the root).
    pub path: String,
    pub keyword: String,
    pub message: String,
}

/// What a change does to the set of values a schema accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// The result accepts values the original refuses.
    More,
    /// The result refuses values the original accepts.
    Less,
    /// Both.
    Other,
}

impl Effect {
    pub fn says(self) -> &'static str {
        match self {
            Effect::More => {
                "the result accepts more than the original (calls are still validated against \
                 the original)"
            }
            Effect::Less => "the result accepts less than the original",
            Effect::Other => {
                "the result accepts some values the original refuses and refuses some it accepts"
            }
        }
    }
}

pub(super) struct Cx<'w> {
    pub tool: &'w str,
    pub format: Format,
    pub warnings: &'w mut Vec<Warning>,
}

impl Cx<'_> {
    pub fn warn(&mut self, path: &str, keyword: &str, message: impl Into<String>) {
        self.warnings.push(Warning {
            tool: self.tool.to_owned(),
            path: path.to_owned(),
            keyword: keyword.to_owned(),
            message: message.into(),
        });
    }

    /// A keyword dropped: the result accepts more than the original there.
    pub fn dropped(&mut self, path: &str, keyword: &str, why: &str) {
        self.changed(path, keyword, "dropped", why, Effect::More);
    }

    /// A keyword the target cannot take as it is: `what` happened to it (dropped, moved into
    /// the description, rewritten) and `why`; the message says what that does to the meaning.
    pub fn changed(&mut self, path: &str, keyword: &str, what: &str, why: &str, effect: Effect) {
        let target = self.target();
        let at = if path.is_empty() { "the root" } else { path };
        self.warn(
            path,
            keyword,
            format!(
                "`{keyword}` at {at} {what}: {why} ({target}); {}",
                effect.says()
            ),
        );
    }

    /// `oneOf` becomes `anyOf` where the target has no `oneOf`: said once per place.
    pub fn one_of_as_any_of(&mut self, path: &str) {
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
    pub fn append_any_of(
        &mut self,
        out: &mut Map<String, Value>,
        path: &str,
        branches: Vec<Value>,
    ) {
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

    pub fn target(&self) -> &'static str {
        self.format.spec().target
    }
}
