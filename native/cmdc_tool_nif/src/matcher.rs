//! NIFs for hook matchers (`cmdc_tool_core::matcher`): compiled once when the settings are read,
//! kept as a resource, matched in linear time. `CMDC.Tool.Hooks.Matcher` is the only caller.

use cmdc_tool_core::matcher::{Matcher, NORMAL_TEXT_BYTES};
use rustler::{Binary, ResourceArc};

use crate::error::{Error, Result};
use crate::twins::twin_nifs;

/// A compiled matcher, shared by every hook of its group.
pub struct Compiled(Matcher);

#[rustler::resource_impl]
impl rustler::Resource for Compiled {}

/// `{:ok, matcher}` or `{:error, message}` naming what cannot be run. On a dirty scheduler: a
/// pattern with large Unicode classes can take milliseconds to compile.
#[rustler::nif(schedule = "DirtyCpu")]
fn matcher_compile(pattern: &str) -> Result<ResourceArc<Compiled>> {
    Ok(ResourceArc::new(Compiled(Matcher::compile(pattern)?)))
}

twin_nifs! {
    /// Whether the matcher matches any of `texts` (binaries): `{:ok, boolean}`; `{:error, :yield}`
    /// for more text than a normal scheduler matches.
    fn matcher_match / matcher_match_dirty<'a>(
        matcher: ResourceArc<Compiled>,
        texts: Vec<Binary<'a>>,
    ) -> (Result<bool>),
    |dirty| {
        let bytes: usize = texts.iter().map(|t| t.len()).sum();
        if !dirty && bytes > NORMAL_TEXT_BYTES {
            return Err(Error::Yield);
        }
        // Names that are not UTF-8 text cannot be what a matcher was written for.
        let texts = texts.iter().filter_map(|t| std::str::from_utf8(t.as_slice()).ok());
        Ok(matcher.0.matches_any(texts))
    }
}
