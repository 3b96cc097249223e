//! The `pattern` keyword as this crate compiles it for schemas with a pattern that can
//! backtrack (`jsonschema` consults a custom keyword before its own): the superset
//! ([`super::superset`]) first, then the one bounded match, with errors that read as the
//! crate's own. Other patterns of such a schema delegate to the crate's keyword unchanged.
//!
//! A caller on a normal scheduler runs the validator inside [`without_backtracking`]: a
//! match that would backtrack is not run there, and the caller retries on a dirty scheduler.

use std::cell::Cell;

use jsonschema::error::ValidationErrorKind;
use jsonschema::json::{Json, Node, SerdeJson};
use jsonschema::paths::Location;
use jsonschema::{Keyword, ValidationError, Validator};
use regex::Regex;
use serde_json::{json, Map, Value};

use super::engine::{can_backtrack, options_for};
use super::superset::superset;

/// Strings tried, shortest first, for one the pattern refuses at once: its error is the
/// model of a refusal by the superset (the crate makes `pattern` errors only itself).
const WITNESSES: [&str; 5] = ["", "\u{0}", "\u{0}\u{0}", " ", "~"];

thread_local! {
    /// (matches that backtrack are forbidden, one was needed) on this thread.
    static GUARD: Cell<(bool, bool)> = const { Cell::new((false, false)) };
}

/// Runs `f` with matches that backtrack forbidden on this thread: `None` when one was needed
/// (what `f` returned is then meaningless: run it again where such a match may run).
pub fn without_backtracking<R>(f: impl FnOnce() -> R) -> Option<R> {
    let saved = GUARD.replace((true, false));
    let result = f();
    let (_, needed) = GUARD.replace(saved);
    (!needed).then_some(result)
}

/// Whether a match that backtracks may run here; if not, notes that one was needed.
fn may_backtrack() -> bool {
    let (forbidden, _) = GUARD.get();
    if forbidden {
        GUARD.set((true, true));
    }
    !forbidden
}

/// Whether a schema's validator takes this keyword: it has a `pattern` that can backtrack.
pub fn overrides(schema: &Value) -> bool {
    match schema {
        Value::Object(map) => map.iter().any(|(key, value)| {
            matches!((key.as_str(), value), ("pattern", Value::String(p)) if can_backtrack(p))
                || overrides(value)
        }),
        Value::Array(items) => items.iter().any(overrides),
        _ => false,
    }
}

/// The keyword factory `ValidationOptions::with_keyword("pattern", ...)` takes.
pub fn factory<'a, F: Json + 'static>(
    _parent: &'a Map<String, Value>,
    value: &'a Value,
    _at: Location,
) -> Result<Box<dyn for<'i> Keyword<'i, F>>, ValidationError<'a>> {
    let inner = options_for::<F>(None).build(&json!({ "pattern": value }))?;
    let (backtracks, prefilter) = match value {
        Value::String(pattern) if can_backtrack(pattern) => (true, Prefilter::of(pattern)),
        _ => (false, None),
    };
    Ok(Box::new(Pattern {
        inner,
        backtracks,
        prefilter,
    }))
}

struct Pattern<F: Json> {
    /// `{"pattern": P}` under the crate's own keyword: its verdict and its errors.
    inner: Validator<F>,
    /// Whether the match can backtrack (forbidden inside [`without_backtracking`]).
    backtracks: bool,
    prefilter: Option<Prefilter>,
}

/// The superset and how to name a string it refuses.
struct Prefilter {
    superset: Regex,
    /// `{"pattern": P}` on serde values and a string it refuses without backtracking.
    witness: (Validator<SerdeJson>, Value),
}

impl Prefilter {
    fn of(pattern: &str) -> Option<Prefilter> {
        let superset = superset(pattern)?;
        let validator = options_for::<SerdeJson>(None)
            .build(&json!({ "pattern": pattern }))
            .ok()?;
        // A witness the superset refuses is refused by the pattern, decided without it.
        let witness = WITNESSES
            .iter()
            .map(|w| Value::String((*w).into()))
            .find(|w| w.as_str().is_some_and(|s| !superset.is_match(s)))?;
        // The crate's error for it must be the plain refusal (not the backtracking limit).
        match validator.validate(&witness) {
            Err(e) if matches!(e.kind(), ValidationErrorKind::Pattern { .. }) => {}
            _ => return None,
        }
        Some(Prefilter {
            superset,
            witness: (validator, witness),
        })
    }

    /// The crate's `pattern` error; the caller puts this instance and its paths in.
    fn refusal(&self) -> ValidationError<'static> {
        let (validator, witness) = &self.witness;
        match validator.validate(witness) {
            Err(e) => e.to_owned(),
            Ok(()) => ValidationError::custom("does not match the pattern"),
        }
    }
}

impl<'i, F: Json + 'static> Keyword<'i, F> for Pattern<F> {
    fn validate(&self, instance: F::Node<'i>) -> Result<(), ValidationError<'i>> {
        if let (Some(prefilter), Some(s)) = (&self.prefilter, instance.as_string()) {
            if !prefilter.superset.is_match(&s) {
                return Err(prefilter.refusal());
            }
        }
        if self.backtracks && !may_backtrack() {
            return Ok(());
        }
        self.inner.validate(instance)
    }

    fn is_valid(&self, instance: F::Node<'i>) -> bool {
        if let (Some(prefilter), Some(s)) = (&self.prefilter, instance.as_string()) {
            if !prefilter.superset.is_match(&s) {
                return false;
            }
        }
        if self.backtracks && !may_backtrack() {
            return true;
        }
        self.inner.is_valid(instance)
    }
}
