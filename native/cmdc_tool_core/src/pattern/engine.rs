//! The regex engine every validator of this crate uses for `pattern` (one place for its
//! limits), and which patterns can backtrack in it.

use std::sync::Arc;

use jsonschema::json::Json;
use jsonschema::{Draft, FancyRegex, PatternOptions, Retrieve, ValidationOptions};

/// Backtracking steps one match of a `pattern` (or `patternProperties` key) may take. Only
/// patterns with back-references, look-around or atomic groups backtrack (others run in time
/// linear in the string); past this a match ends in an error naming the pattern, so a pattern
/// like `^(a*)*\1b$` costs ~0.3 ms per string (measured) instead of 100 ms.
pub const BACKTRACK_LIMIT: usize = 10_000;

/// The options every validator of this crate is built with (one place for the regex limits).
pub fn options_for<F: Json>(
    draft: Option<Draft>,
) -> ValidationOptions<'static, Arc<dyn Retrieve>, F> {
    let options = jsonschema::options_for::<F>().with_pattern_options(pattern_options());
    match draft {
        Some(draft) => options.with_draft(draft),
        None => options,
    }
}

fn pattern_options() -> PatternOptions<FancyRegex> {
    PatternOptions::fancy_regex().backtrack_limit(BACKTRACK_LIMIT)
}

/// Whether `pattern` may run in `fancy-regex`'s backtracking engine: it has a back-reference,
/// look-around, an atomic group or a possessive quantifier. Conservative (an escaped `\\1`
/// counts too): it only moves work to a dirty scheduler.
pub fn can_backtrack(pattern: &str) -> bool {
    let b = pattern.as_bytes();
    b.windows(2).any(|w| {
        (w[0] == b'\\' && (w[1].is_ascii_digit() && w[1] != b'0' || w[1] == b'k'))
            || (matches!(w[0], b'*' | b'+' | b'?' | b'}') && w[1] == b'+')
    }) || ["(?=", "(?!", "(?<=", "(?<!", "(?>"]
        .iter()
        .any(|open| pattern.contains(open))
}
