//! Hook matchers: the regular expressions of Claude Code's `matcher` (written for JavaScript),
//! compiled by the `regex` crate (finite automata: a match is linear in the text, so no pattern
//! can stall a call the way a backtracking engine's `(a|aa)*b` does). What JavaScript accepts and
//! these automata cannot run (back-references, look-around) is refused by name when the settings
//! are read, so the hook is reported, never silently skipped.

use regex::{Regex, RegexBuilder};
use regex_syntax::ast::{parse::Parser, ErrorKind};

use crate::error::{Error, Result};

/// Compiled program size allowed (the crate's default is 10 MiB); a matcher is a few names.
const SIZE_LIMIT: usize = 1 << 20;
/// Longest pattern accepted (a settings file's matcher is a line, not a document).
pub const MAX_PATTERN: usize = 4_096;
/// Text bytes one normal-scheduler call matches: tool names and a session event's source fit
/// many times over. A fresh matcher builds its automaton's states as it reads (measured up to
/// ~2.5 ms for 8 KB of text on a loaded machine, a few µs once built), so a longer text goes to a
/// dirty scheduler.
pub const NORMAL_TEXT_BYTES: usize = 1024;

/// One compiled matcher.
#[derive(Debug, Clone)]
pub struct Matcher {
    regex: Regex,
}

impl Matcher {
    /// Compiles `pattern` as an unanchored, case-sensitive regular expression (JavaScript's
    /// defaults). An error names what in the pattern cannot be run and why.
    pub fn compile(pattern: &str) -> Result<Self> {
        if pattern.len() > MAX_PATTERN {
            return Err(Error::Invalid(format!(
                "the matcher is {} bytes long; at most {MAX_PATTERN} are accepted",
                pattern.len()
            )));
        }
        let regex = RegexBuilder::new(pattern)
            .size_limit(SIZE_LIMIT)
            .dfa_size_limit(SIZE_LIMIT)
            .nest_limit(64)
            .build()
            .map_err(|e| Error::Invalid(explain(pattern, &e)))?;
        Ok(Matcher { regex })
    }

    /// Whether the pattern matches anywhere in any of `texts`.
    pub fn matches_any<'t>(&self, texts: impl IntoIterator<Item = &'t str>) -> bool {
        texts.into_iter().any(|t| self.regex.is_match(t))
    }
}

/// The message for a pattern the engine refuses: a JavaScript-only construct by name (the
/// hook was written for Claude Code), anything else with the engine's own diagnosis.
fn explain(pattern: &str, e: &regex::Error) -> String {
    let javascript_only = match Parser::new().parse(pattern) {
        Err(ast) => match ast.kind() {
            ErrorKind::UnsupportedLookAround => Some("look-around ((?=…), (?!…), (?<=…), (?<!…))"),
            ErrorKind::UnsupportedBackreference => Some("a back-reference (\\1, \\k<name>)"),
            _ => None,
        },
        Ok(_) => None,
    };
    match (javascript_only, e) {
        (Some(what), _) => format!(
            "the matcher {pattern:?} uses {what}, which JavaScript's regular expressions accept \
             but cmdc_tool's linear-time engine does not run; write it without (a list of names \
             `A|B`, or a plain pattern)"
        ),
        (None, regex::Error::CompiledTooBig(limit)) => {
            format!("the matcher {pattern:?} compiles to more than {limit} bytes; simplify it")
        }
        (None, other) => {
            let detail = other.to_string();
            // The crate's message is a caret diagram; its last line says what is wrong.
            let why = detail
                .lines()
                .rev()
                .find(|l| l.trim_start().starts_with("error:"))
                .map(|l| l.trim_start().trim_start_matches("error:").trim())
                .unwrap_or(detail.trim());
            format!("the matcher {pattern:?} is not a valid regular expression: {why}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catastrophic_pattern_matches_in_linear_time() {
        let m = Matcher::compile("(a|aa)*b|delete").unwrap();
        let hostile = format!("{}_delete", "a".repeat(40));
        let long = format!("{}_delete", "a".repeat(100_000));
        let started = std::time::Instant::now();
        assert!(m.matches_any([hostile.as_str()]));
        assert!(m.matches_any([long.as_str()]));
        assert!(!m.matches_any(["a".repeat(10_000).as_str()]));
        // Not a timing assertion of the machine: a backtracking engine takes hours here.
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
    }

    #[test]
    fn unanchored_and_case_sensitive_as_in_javascript() {
        let m = Matcher::compile("mcp__memory__.*").unwrap();
        assert!(m.matches_any(["x", "mcp__memory__create"]));
        assert!(!m.matches_any(["MCP__MEMORY__create", "memory__create"]));
        assert!(Matcher::compile("Write")
            .unwrap()
            .matches_any(["NotebookWrite"]));
    }

    #[test]
    fn javascript_only_constructs_are_named() {
        for (pattern, what) in [
            ("^(?!Bash).*", "look-around"),
            ("(?<=mcp__)fs", "look-around"),
            ("(a)\\1", "back-reference"),
        ] {
            let e = Matcher::compile(pattern).unwrap_err().to_string();
            assert!(e.contains(what), "{pattern}: {e}");
            assert!(e.contains("JavaScript"), "{e}");
        }
    }

    #[test]
    fn invalid_and_oversized_patterns_are_errors() {
        let e = Matcher::compile("read_(file").unwrap_err().to_string();
        assert!(
            e.contains("not a valid regular expression") && e.contains("unclosed"),
            "{e}"
        );
        let e = Matcher::compile(&"a".repeat(MAX_PATTERN + 1))
            .unwrap_err()
            .to_string();
        assert!(e.contains("at most"), "{e}");
        let e = Matcher::compile("\\w{1000}{1000}").unwrap_err().to_string();
        assert!(e.contains("more than") || e.contains("not a valid"), "{e}");
    }
}
