//! The one tool-name rule, used by the registry, discovery metadata, the CLI and the provider
//! formats.
//!
//! A tool may be named by MCP's rule, the widest any provider has: 1 to 128 of `A-Za-z0-9_.-`
//! ([`NAME_RULE`]). A provider with a narrower rule gets a name mapped by [`for_provider`]
//! (OpenAI and Anthropic: `.` → `_`; Gemini: `_` put before a first character it refuses; both:
//! a name over 64 characters cut to 55 plus `_` and 8 hex digits of a hash of the whole name).
//! The mapping depends on the name alone, so the runner finds the tool a model named by mapping
//! the registered names again ([`original`]); two tools mapped to the same name are refused when
//! their list is built ([`collision`]).

use std::borrow::Cow;

use crate::error::{Error, Result};

/// The rule every tool name follows (MCP's, the widest any provider has).
pub const NAME_RULE: &str = "^[A-Za-z0-9_.-]{1,128}$";

/// The longest name OpenAI, Anthropic and Gemini take.
pub const PROVIDER_MAX: usize = 64;

/// Whose name rule applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// OpenAI (both APIs) and Anthropic: `^[a-zA-Z0-9_-]{1,64}$`.
    OpenAI,
    /// Gemini: a letter or `_` first, then letters, digits, `_ . : -`, at most 64.
    Gemini,
    /// MCP: [`NAME_RULE`].
    Mcp,
}

impl Rule {
    pub fn describe(self) -> &'static str {
        match self {
            Rule::OpenAI => "1 to 64 letters, digits, _ or -",
            Rule::Gemini => "a letter or _ first, then letters, digits, _ . : or -, at most 64",
            Rule::Mcp => "1 to 128 letters, digits, _ . or -",
        }
    }

    /// Whether `name` is accepted as it is.
    pub fn accepts(self, name: &str) -> bool {
        let chars_ok = |extra: &str| {
            name.bytes()
                .all(|b| b.is_ascii_alphanumeric() || extra.as_bytes().contains(&b))
        };
        match self {
            Rule::OpenAI => (1..=PROVIDER_MAX).contains(&name.len()) && chars_ok("_-"),
            Rule::Gemini => {
                (1..=PROVIDER_MAX).contains(&name.len())
                    && name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                    && chars_ok("_.:-")
            }
            Rule::Mcp => (1..=128).contains(&name.len()) && chars_ok("_.-"),
        }
    }
}

/// Checks a tool name against [`NAME_RULE`]; the error says what is wrong and states the rule.
pub fn check(name: &str) -> Result<()> {
    let rule = format!(
        "tool names must match {NAME_RULE} (1 to 128 letters, digits, _ . or -, MCP's rule; \
         providers with a narrower rule get a mapped name, e.g. fs.read → fs_read)"
    );
    if name.is_empty() {
        return Err(Error::Tool(format!("the name is empty; {rule}")));
    }
    let len = name.chars().count();
    if len > 128 {
        return Err(Error::Tool(format!(
            "name {name:?} has {len} characters; {rule}"
        )));
    }
    match name
        .chars()
        .enumerate()
        .find(|(_, c)| !(c.is_ascii_alphanumeric() || "_.-".contains(*c)))
    {
        Some((i, c)) => Err(Error::Tool(format!(
            "name {name:?} contains {c:?} at position {i}; {rule}"
        ))),
        None => Ok(()),
    }
}

/// Whether `name` follows [`NAME_RULE`].
pub fn valid(name: &str) -> bool {
    Rule::Mcp.accepts(name)
}

/// The name a provider with `rule` is given for the tool `name` (which follows [`NAME_RULE`]):
/// the name itself when the provider accepts it, else the mapping described in the module doc.
pub fn for_provider(name: &str, rule: Rule) -> Cow<'_, str> {
    if rule.accepts(name) {
        return Cow::Borrowed(name);
    }
    let mut out: String = match rule {
        Rule::OpenAI => underscore_outside(name, "_-"),
        Rule::Gemini => {
            let body = underscore_outside(name, "_.:-");
            if body.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
                body
            } else {
                format!("_{body}")
            }
        }
        Rule::Mcp => return Cow::Borrowed(name),
    };
    if out.len() > PROVIDER_MAX || out.is_empty() {
        out.truncate(PROVIDER_MAX - 9);
        out.push_str(&format!("_{:08x}", fnv1a(name.as_bytes())));
    }
    Cow::Owned(out)
}

/// A name that follows [`NAME_RULE`] made from any text (an MCP server's tool name, say): each
/// character outside the rule becomes `_`, and a name over 128 characters is cut to 119 plus `_`
/// and 8 hex digits of a hash of the whole text, so distinct long names stay distinct.
pub fn sanitize(text: &str) -> Cow<'_, str> {
    if valid(text) {
        return Cow::Borrowed(text);
    }
    let mut out = underscore_outside(text, "_.-");
    if out.len() > 128 || out.is_empty() {
        out.truncate(128 - 9);
        out.push_str(&format!("_{:08x}", fnv1a(text.as_bytes())));
    }
    Cow::Owned(out)
}

/// The name of `tool` from the MCP server `server`: `server__tool`, made to follow [`NAME_RULE`]
/// by [`sanitize`].
pub fn namespaced(server: &str, tool: &str) -> String {
    sanitize(&format!("{server}__{tool}")).into_owned()
}

/// Two names of one list that a provider would be given as the same name: `(a, b, mapped)`.
pub fn collision<'a>(
    names: impl IntoIterator<Item = &'a str>,
    rule: Rule,
) -> Option<(String, String, String)> {
    let mut seen = std::collections::HashMap::new();
    for name in names {
        let mapped = for_provider(name, rule).into_owned();
        if let Some(other) = seen.insert(mapped.clone(), name) {
            if other != name {
                return Some((other.to_owned(), name.to_owned(), mapped));
            }
        }
    }
    None
}

/// The registered name a model meant by `called`, a name some provider was given: `called`
/// itself when registered, else the one registered name mapped to it (`None` when there is no
/// such name, or more than one).
pub fn original<'a>(
    registered: impl IntoIterator<Item = &'a str>,
    called: &str,
) -> Option<&'a str> {
    let mut found: Option<&'a str> = None;
    for name in registered {
        if name == called {
            return Some(name);
        }
        let mapped = [Rule::OpenAI, Rule::Gemini]
            .into_iter()
            .any(|r| for_provider(name, r) == called);
        if mapped {
            if found.is_some_and(|f| f != name) {
                return None;
            }
            found = Some(name);
        }
    }
    found
}

/// `text` with each character other than ASCII letters, digits and `allowed` replaced by `_`.
fn underscore_outside(text: &str, allowed: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || allowed.contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// 32-bit FNV-1a: a stable suffix for cut names (the same name gives the same suffix on every
/// machine and version).
fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5u32, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_rule_is_mcps() {
        for ok in [
            "a",
            "_x",
            "fs.read",
            "get-weather",
            "1abc",
            "-x",
            &"a".repeat(128),
        ] {
            assert!(check(ok).is_ok(), "{ok}");
            assert!(valid(ok));
        }
        for (bad, why) in [
            ("", "empty"),
            ("read file", "contains ' ' at position 4"),
            ("héllo", "contains 'é'"),
            ("a:b", "contains ':'"),
            ("a/b", "contains '/'"),
        ] {
            let Error::Tool(err) = check(bad).unwrap_err() else {
                panic!("{bad}: not a tool error")
            };
            assert!(err.contains(why), "{bad}: {err}");
            assert!(err.contains(NAME_RULE), "{err}");
            assert!(!valid(bad));
        }
        assert!(check(&"a".repeat(129))
            .unwrap_err()
            .to_string()
            .contains("129 characters"));
    }

    #[test]
    fn any_text_is_made_a_valid_name() {
        assert_eq!(sanitize("read_file"), "read_file");
        assert_eq!(namespaced("files", "read_file"), "files__read_file");
        assert_eq!(
            namespaced("my server", "get.weather"),
            "my_server__get.weather"
        );
        assert_eq!(namespaced("s", "héllo/wörld"), "s__h_llo_w_rld");
        assert_eq!(sanitize(""), format!("_{:08x}", fnv1a(b"")));
        let long_a = namespaced("srv", &"a".repeat(200));
        let long_b = namespaced("srv", &format!("{}b", "a".repeat(199)));
        for long in [&long_a, &long_b] {
            assert_eq!(long.len(), 128);
            assert!(valid(long), "{long}");
        }
        assert_ne!(long_a, long_b);
        // What a provider then gets follows its own rule.
        assert!(Rule::OpenAI.accepts(&for_provider(&long_a, Rule::OpenAI)));
    }

    #[test]
    fn provider_names_are_mapped_to_their_rules() {
        assert_eq!(for_provider("read_file", Rule::OpenAI), "read_file");
        assert_eq!(for_provider("fs.read", Rule::OpenAI), "fs_read");
        assert_eq!(for_provider("fs.read", Rule::Gemini), "fs.read");
        assert_eq!(for_provider("1up", Rule::Gemini), "_1up");
        assert_eq!(for_provider("1up", Rule::OpenAI), "1up");
        assert_eq!(for_provider("fs.read", Rule::Mcp), "fs.read");
        let long = format!("{}.x", "a".repeat(100));
        for rule in [Rule::OpenAI, Rule::Gemini] {
            let m = for_provider(&long, rule);
            assert_eq!(m.len(), 64, "{m}");
            assert!(rule.accepts(&m), "{m}");
            assert_eq!(for_provider(&long, rule), m, "stable");
        }
        // Every name the registry accepts gets a name each provider accepts.
        for name in ["a", "-", ".", "9", "a.b-c_d", &"9.".repeat(64)] {
            for rule in [Rule::OpenAI, Rule::Gemini, Rule::Mcp] {
                assert!(rule.accepts(&for_provider(name, rule)), "{name} {rule:?}");
            }
        }
    }

    #[test]
    fn collisions_and_the_way_back() {
        assert_eq!(
            collision(["fs.read", "fs_read"], Rule::OpenAI),
            Some(("fs.read".into(), "fs_read".into(), "fs_read".into()))
        );
        assert_eq!(collision(["fs.read", "fs_read"], Rule::Gemini), None);
        let names = ["fs.read", "echo", "1up"];
        assert_eq!(original(names, "fs_read"), Some("fs.read"));
        assert_eq!(original(names, "fs.read"), Some("fs.read"));
        assert_eq!(original(names, "_1up"), Some("1up"));
        assert_eq!(original(names, "nope"), None);
        // Registered under both names: the exact one wins.
        assert_eq!(original(["fs.read", "fs_read"], "fs_read"), Some("fs_read"));
    }
}
