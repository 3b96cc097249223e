//! JSON Schema: compile once (Draft 7 unless `$schema` says otherwise), validate, and describe
//! failures in the shape the Elixir side returns.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use jsonschema::error::ValidationErrorKind;
use jsonschema::json::{Json, SerdeJson};
use jsonschema::{Draft, Retrieve, Uri, ValidationError, Validator};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::pattern::keyword;

/// Errors reported per call at most: enough for a model to fix its call, cheap to build.
pub const MAX_ERRORS: usize = 32;

/// Work units a match that can backtrack is charged before it runs: its whole limit, ~0.3 ms,
/// a normal scheduler's whole allowance in either unit the NIF uses, so such a match always
/// runs on a dirty scheduler.
pub const BACKTRACK_UNITS: i64 = 12_000;

pub use crate::pattern::engine::{can_backtrack, options_for, BACKTRACK_LIMIT};

/// What one match of a regex against a string costs, in work units charged before it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MatchCost {
    fixed: i64,
}

impl MatchCost {
    /// `format` checks and other one-string checks: a few units plus the string's length.
    pub const LEAF: MatchCost = MatchCost { fixed: 4 };

    /// A `pattern` that is a literal alternation of `words` words, matched by a binary search
    /// (`compiled`'s `Leaf::OneOf`): a few units per halving, ~0.2 µs for 2,000 words (measured).
    pub fn one_of(words: usize) -> MatchCost {
        MatchCost {
            fixed: 4 + (words.max(1).ilog2() / 2) as i64,
        }
    }

    /// A pattern that can backtrack may use its whole limit; any other runs in linear time,
    /// with a start-up cost that grows with the pattern's size (a 2,000-word alternation).
    pub fn of(pattern: &str) -> MatchCost {
        MatchCost {
            fixed: if can_backtrack(pattern) {
                BACKTRACK_UNITS
            } else {
                4 + (pattern.len() >> 6) as i64
            },
        }
    }

    /// A backtracking pattern's superset (`crate::pattern::superset`), `source_len` bytes of
    /// source: a linear match, charged as any other.
    pub fn superset(source_len: usize) -> MatchCost {
        MatchCost {
            fixed: 4 + (source_len >> 6) as i64,
        }
    }

    /// Whether the match can backtrack (its fixed cost is the whole limit).
    pub fn backtracks(self) -> bool {
        self.fixed == BACKTRACK_UNITS
    }

    /// Units for a string of `len` bytes.
    pub fn units(self, len: usize) -> i64 {
        self.fixed + (len >> 4) as i64
    }
}

/// The cost factor of a schema's regexes for the generic validator: the sum of the fixed
/// costs of every `pattern` and `patternProperties` key in it, 0 without any. The caller
/// multiplies the units of reading an instance by it before validating, so a schema whose
/// patterns backtrack or are large moves to a dirty scheduler before the work, not after.
/// A schema that takes this crate's `pattern` keyword (`keyword::overrides`) never runs a
/// backtracking `pattern` inside `keyword::without_backtracking`, where a normal scheduler
/// runs it: such a pattern costs its linear part there (`patternProperties` keys still do not).
pub fn pattern_factor(schema: &Value) -> i64 {
    let guarded = keyword::overrides(schema);
    let pattern = move |p: &str| match MatchCost::of(p) {
        cost if guarded && cost.backtracks() => MatchCost::superset(p.len() * 4).fixed,
        cost => cost.fixed,
    };
    fn walk(v: &Value, sum: &mut i64, pattern: &dyn Fn(&str) -> i64) {
        match v {
            Value::Object(map) => {
                for (key, value) in map {
                    match (key.as_str(), value) {
                        ("pattern", Value::String(p)) => *sum += pattern(p),
                        ("patternProperties", Value::Object(props)) => {
                            *sum += props.keys().map(|p| MatchCost::of(p).fixed).sum::<i64>()
                        }
                        _ => {}
                    }
                    walk(value, sum, pattern);
                }
            }
            Value::Array(items) => items.iter().for_each(|item| walk(item, sum, pattern)),
            _ => {}
        }
    }
    let mut sum = 0;
    walk(schema, &mut sum, &pattern);
    sum
}

/// Where `$ref`s to other documents resolve: given documents, or URL prefixes mapped onto folders.
/// Nothing is fetched from the network.
#[derive(Default, Clone)]
pub struct Documents {
    pub documents: HashMap<String, Value>,
    pub dirs: Vec<(String, PathBuf)>,
}

impl Retrieve for Documents {
    fn retrieve(
        &self,
        uri: &Uri<String>,
    ) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        let uri = uri.as_str();
        let bare = uri.split('#').next().unwrap_or(uri);
        if let Some(doc) = self.documents.get(bare) {
            return Ok(doc.clone());
        }
        for (prefix, dir) in &self.dirs {
            if let Some(rest) = bare.strip_prefix(prefix.as_str()) {
                if rest.split('/').any(|part| part == "..") {
                    break;
                }
                let file = dir.join(rest);
                let text = std::fs::read(&file)
                    .map_err(|e| format!("cannot read {} for {uri}: {e}", file.display()))?;
                return Ok(serde_json::from_slice(&text)?);
            }
        }
        Err(format!(
            "remote $ref \"{uri}\" is not available: documents are never fetched over the \
             network; pass it in the :documents option"
        )
        .into())
    }
}

/// The draft a schema names in `$schema`, Draft 7 without one; `Draft::Unknown` for a custom
/// meta-schema.
pub fn draft_for(schema: &Value) -> Draft {
    Draft::Draft7.detect(schema)
}

/// Reads a draft name as users write it: "7", "draft7", "2020-12", "draft2020-12", ...
pub fn parse_draft(name: &str) -> Option<Draft> {
    match name.trim_start_matches("draft").trim_start_matches('-') {
        "4" | "04" => Some(Draft::Draft4),
        "6" | "06" => Some(Draft::Draft6),
        "7" | "07" => Some(Draft::Draft7),
        "2019-09" => Some(Draft::Draft201909),
        "2020-12" => Some(Draft::Draft202012),
        _ => None,
    }
}

/// Compiles a schema for `serde_json::Value` instances. `default_draft` applies when the schema
/// has no `$schema` (Draft 7 if None).
pub fn compile(schema: &Value, docs: Documents, default_draft: Option<Draft>) -> Result<Validator> {
    compile_for::<SerdeJson>(schema, docs, default_draft)
}

/// Compiles a schema for instances in the representation `F` (e.g. BEAM terms read in place).
/// A schema with a `pattern` that can backtrack takes this crate's `pattern` keyword
/// (`crate::pattern::keyword`): a linear superset first, the bounded match only when needed.
pub fn compile_for<F: Json + 'static>(
    schema: &Value,
    docs: Documents,
    default_draft: Option<Draft>,
) -> Result<Validator<F>> {
    if !matches!(schema, Value::Object(_) | Value::Bool(_)) {
        return Err(Error::Schema(format!(
            "invalid schema: a JSON Schema is an object or a boolean, got {}",
            type_name(schema)
        )));
    }
    let mut options = options_for::<F>(None).with_retriever(docs);
    if keyword::overrides(schema) {
        options = options.with_keyword("pattern", keyword::factory::<F>);
    }
    let custom_meta_schema = schema.get("$schema").is_some() && draft_for(schema) == Draft::Unknown;
    // A `$schema` naming a custom meta-schema is resolved by the validator (through `docs`), so
    // its vocabularies apply; otherwise the draft is fixed here, Draft 7 by default.
    if !custom_meta_schema {
        options = options.with_draft(match (default_draft, schema.get("$schema")) {
            (Some(draft), None) => draft,
            _ => draft_for(schema),
        });
    }
    options.build(schema).map_err(|e| {
        let at = e.instance_path().as_str();
        Error::Schema(if at.is_empty() {
            format!("invalid schema: {e}")
        } else {
            format!("invalid schema at {at}: {e}")
        })
    })
}

pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// One validation failure, in the shape `CMDC.Tool.validate/2` returns: texts borrowed from
/// the [`Failures`] holding it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failure<'f> {
    pub path: &'f str,
    pub keyword: &'f str,
    pub message: &'f str,
    pub schema_path: &'f str,
}

/// A call's validation failures, in order. Every text of every failure is written into one
/// buffer: an invalid call reports up to [`MAX_ERRORS`] failures of four texts each, and one
/// allocation per text measured as a quarter of the error path's cost.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Failures {
    text: String,
    /// Per failure, where its path, keyword, message and schema path end in `text` (each
    /// starts where the one before ends).
    ends: Vec<[usize; 4]>,
}

impl Failures {
    /// Room for a typical error list (nine failures of ~100 bytes) up front.
    fn with_room() -> Self {
        Failures {
            text: String::with_capacity(1024),
            ends: Vec::with_capacity(16),
        }
    }

    /// One failure.
    pub fn one(path: &str, keyword: &str, message: &str, schema_path: &str) -> Self {
        let mut failures = Failures::default();
        failures.push(path, keyword, message, schema_path);
        failures
    }

    /// A failure that is not about the schema: broken JSON text or a term that is not JSON.
    pub fn json(path: &str, message: &str) -> Self {
        Failures::one(path, "json", message, "")
    }

    pub fn push(&mut self, path: &str, keyword: &str, message: &str, schema_path: &str) {
        let mut ends = [0; 4];
        for (end, part) in ends.iter_mut().zip([path, keyword, message, schema_path]) {
            self.text.push_str(part);
            *end = self.text.len();
        }
        self.ends.push(ends);
    }

    /// A `jsonschema` error, its message written in place. An `anyOf`/`oneOf` failure is
    /// reported as the error of the branch that got furthest ([`best_branch`]).
    pub fn push_error(&mut self, e: &ValidationError) {
        let e = best_branch(e);
        let mut ends = [0; 4];
        self.text.push_str(e.instance_path().as_str());
        ends[0] = self.text.len();
        let schema_path = e.schema_path().as_str();
        match e.kind() {
            ValidationErrorKind::BacktrackLimitExceeded { .. } => {
                self.text.push_str("pattern");
                ends[1] = self.text.len();
                let _ = write!(
                    self.text,
                    "the pattern at {schema_path} needs more than {BACKTRACK_LIMIT} backtracking \
                     steps on this string (nested quantifiers or back-references); the match is \
                     stopped there: simplify the pattern or send a shorter string"
                );
            }
            kind => {
                self.text.push_str(kind.keyword());
                ends[1] = self.text.len();
                let _ = write!(self.text, "{e}");
            }
        }
        ends[2] = self.text.len();
        self.text.push_str(schema_path);
        ends[3] = self.text.len();
        self.ends.push(ends);
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The `i`th failure.
    pub fn get(&self, i: usize) -> Option<Failure<'_>> {
        let ends = self.ends.get(i)?;
        let start = if i == 0 { 0 } else { self.ends[i - 1][3] };
        Some(self.at(start, ends))
    }

    pub fn iter(&self) -> impl ExactSizeIterator<Item = Failure<'_>> + '_ {
        let mut start = 0;
        self.ends.iter().map(move |ends| {
            let failure = self.at(start, ends);
            start = ends[3];
            failure
        })
    }

    fn at(&self, start: usize, ends: &[usize; 4]) -> Failure<'_> {
        let t = &self.text;
        Failure {
            path: &t[start..ends[0]],
            keyword: &t[ends[0]..ends[1]],
            message: &t[ends[1]..ends[2]],
            schema_path: &t[ends[2]..ends[3]],
        }
    }
}

/// The error a model can act on for an `anyOf`/`oneOf` failure, as Python's
/// `jsonschema.best_match` picks it: branches refused for being another type of value right
/// where the union is (e.g. Optional's `null` branch) are left out; of the rest, the deepest
/// error, followed into nested unions. When branches tie at the deepest point, or none is
/// left, the union's own error stays (no branch is more likely than another).
pub fn best_branch<'e>(e: &'e ValidationError<'e>) -> &'e ValidationError<'e> {
    let context = match e.kind() {
        ValidationErrorKind::AnyOf { context } | ValidationErrorKind::OneOfNotValid { context } => {
            context
        }
        _ => return e,
    };
    let here = e.instance_path().as_str();
    let depth = |x: &ValidationError| x.instance_path().as_str().matches('/').count();
    let wrong_type = |branch: &Vec<ValidationError<'static>>| {
        branch.iter().any(|x| {
            x.instance_path().as_str() == here
                && matches!(x.kind(), ValidationErrorKind::Type { .. })
        })
    };
    let mut best: Option<(usize, usize, &ValidationError)> = None;
    let mut tie = false;
    for (i, branch) in context.iter().enumerate() {
        if wrong_type(branch) {
            continue;
        }
        for x in branch {
            let d = depth(x);
            match best {
                Some((bd, bi, _)) if d == bd && bi != i => tie = true,
                Some((bd, _, _)) if d <= bd => {}
                _ => {
                    best = Some((d, i, x));
                    tie = false;
                }
            }
        }
    }
    match best {
        Some((_, _, x)) if !tie => best_branch(x),
        _ => e,
    }
}

/// Validates a value: the cheap boolean check first, errors only when it fails.
pub fn check(validator: &Validator, value: &Value) -> Result<(), Failures> {
    check_for::<SerdeJson>(validator, value)
}

/// `check` for any representation.
pub fn check_for<'i, F: Json>(
    validator: &'i Validator<F>,
    node: F::Node<'i>,
) -> Result<(), Failures> {
    if validator.is_valid(node.clone()) {
        return Ok(());
    }
    match failures_for(validator, node) {
        failures if failures.is_empty() => Ok(()),
        failures => Err(failures),
    }
}

/// The failures of an instance already found invalid (by the compiled program): no boolean
/// check first. Empty when `validator` finds it valid after all.
pub fn failures_for<'i, F: Json>(validator: &'i Validator<F>, node: F::Node<'i>) -> Failures {
    let mut failures = Failures::with_room();
    for e in validator.iter_errors(node).take(MAX_ERRORS) {
        failures.push_error(&e);
    }
    failures
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool_schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 100},
                "mode": {"enum": ["fast", "full"]}
            },
            "required": ["path"],
            "additionalProperties": false
        })
    }

    #[test]
    fn compiles_and_validates() {
        let v = compile(&tool_schema(), Documents::default(), None).unwrap();
        assert!(check(&v, &json!({"path": "a", "limit": 5})).is_ok());
        let errs = check(&v, &json!({"limit": 0, "x": 1})).unwrap_err();
        let keywords: Vec<&str> = errs.iter().map(|f| f.keyword).collect();
        assert!(keywords.contains(&"required"));
        assert!(keywords.contains(&"minimum"));
        assert!(keywords.contains(&"additionalProperties"));
        let min = errs.iter().find(|f| f.keyword == "minimum").unwrap();
        assert_eq!(min.path, "/limit");
        assert_eq!(min.schema_path, "/properties/limit/minimum");
    }

    #[test]
    fn draft7_is_the_default_and_schema_keyword_wins() {
        assert_eq!(draft_for(&json!({})), Draft::Draft7);
        let s = json!({"$schema": "https://json-schema.org/draft/2020-12/schema"});
        assert_eq!(draft_for(&s), Draft::Draft202012);
        // `prefixItems` means nothing in Draft 7 and constrains in 2020-12.
        let d7 = compile(
            &json!({"prefixItems": [{"type": "string"}]}),
            Documents::default(),
            None,
        );
        assert!(check(&d7.unwrap(), &json!([1])).is_ok());
        let d2020 = json!({"$schema": "https://json-schema.org/draft/2020-12/schema",
                           "prefixItems": [{"type": "string"}]});
        let d2020 = compile(&d2020, Documents::default(), None).unwrap();
        assert!(check(&d2020, &json!([1])).is_err());
    }

    #[test]
    fn a_default_draft_applies_only_without_schema_keyword() {
        let s = json!({"prefixItems": [{"type": "string"}]});
        let v = compile(&s, Documents::default(), parse_draft("2020-12")).unwrap();
        assert!(check(&v, &json!([1])).is_err());
        assert_eq!(parse_draft("draft7"), Some(Draft::Draft7));
        assert_eq!(parse_draft("nine"), None);
    }

    #[test]
    fn invalid_schemas_are_refused_with_a_reason() {
        let err = compile(&json!({"type": "strnig"}), Documents::default(), None)
            .unwrap_err()
            .to_string();
        assert!(matches!(
            compile(&json!([1]), Documents::default(), None),
            Err(Error::Schema(_))
        ));
        assert!(err.starts_with("invalid schema"), "{err}");
        let err = compile(&json!([1]), Documents::default(), None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("object or a boolean"), "{err}");
    }

    #[test]
    fn remote_refs_never_touch_the_network() {
        let s = json!({"$ref": "http://example.com/schema.json"});
        let err = compile(&s, Documents::default(), None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("not available"), "{err}");
        let mut docs = Documents::default();
        docs.documents.insert(
            "http://example.com/schema.json".into(),
            json!({"type": "integer"}),
        );
        let v = compile(&s, docs, None).unwrap();
        assert!(check(&v, &json!(1)).is_ok());
        assert!(check(&v, &json!("1")).is_err());
    }

    #[test]
    fn a_backtracking_pattern_ends_in_a_clear_error() {
        // A string the pattern's superset accepts (`crate::pattern`): the bounded match runs.
        let s = json!({"type": "string", "pattern": "^(a*)*b\\1$"});
        let v = compile(&s, Documents::default(), None).unwrap();
        let over = format!("{}b{}", "a".repeat(28), "a".repeat(29));
        let errs = check(&v, &json!(over)).unwrap_err();
        assert_eq!(errs.len(), 1, "{errs:?}");
        let first = errs.get(0).unwrap();
        assert_eq!(first.keyword, "pattern");
        assert_eq!(first.schema_path, "/pattern");
        assert!(first.message.contains("backtracking steps"), "{errs:?}");
        // Short strings still match or fail as the pattern says.
        assert!(check(&v, &json!("aabaa")).is_ok());
        assert_eq!(
            check(&v, &json!("ac")).unwrap_err().get(0).unwrap().keyword,
            "pattern"
        );
    }

    #[test]
    fn patterns_are_costed_by_what_they_can_do() {
        for p in [
            "^(a*)*\\1b$",
            "(?<=a)b",
            "x(?!y)",
            "\\k<n>",
            "(?>a+)b",
            "a*+",
        ] {
            assert!(can_backtrack(p), "{p}");
            assert_eq!(MatchCost::of(p).units(0), BACKTRACK_UNITS);
        }
        for p in ["^[a-z]+$", "(a|b)*c", "\\d{3}", "\\\\0"] {
            assert!(!can_backtrack(p), "{p}");
            assert!(MatchCost::of(p).units(0) < 10);
        }
        let words: Vec<String> = (0..2000).map(|i| format!("word{i}")).collect();
        let big = format!("^({})$", words.join("|"));
        assert!(MatchCost::of(&big).units(0) > 200);
        let s = json!({"properties": {"pattern": {"pattern": "^a$"}},
                       "patternProperties": {"(?=x)": {}, "^y": {}}});
        assert_eq!(pattern_factor(&s), 4 + BACKTRACK_UNITS + 4);
        assert_eq!(pattern_factor(&json!({"type": "string"})), 0);
    }

    #[test]
    fn failures_keep_each_text_apart() {
        let mut failures = Failures::json("/a/0", "not JSON");
        failures.push("", "required", "\"x\" is a required property", "/required");
        failures.push("/é", "", "", "");
        assert_eq!(failures.len(), 3);
        let got: Vec<Failure> = failures.iter().collect();
        assert_eq!(
            got[0],
            Failure {
                path: "/a/0",
                keyword: "json",
                message: "not JSON",
                schema_path: ""
            }
        );
        assert_eq!(got[1].message, "\"x\" is a required property");
        assert_eq!(got[1].schema_path, "/required");
        assert_eq!(
            (got[2].path, got[2].keyword, got[2].message),
            ("/é", "", "")
        );
        assert!(failures.get(3).is_none());
    }

    #[test]
    fn union_failures_name_the_branch_that_got_furthest() {
        // Pydantic's Optional[Person], recursive: the fault is two levels down.
        let s = json!({
            "$defs": {"Person": {"type": "object", "properties": {
                "age": {"type": "integer", "minimum": 0},
                "manager": {"anyOf": [{"$ref": "#/$defs/Person"}, {"type": "null"}]}}}},
            "type": "object",
            "properties": {"person": {"$ref": "#/$defs/Person"}}
        });
        let v = compile(&s, Documents::default(), Some(Draft::Draft202012)).unwrap();
        let bad = json!({"person": {"manager": {"manager": {"age": -1}}}});
        let errs = check(&v, &bad).unwrap_err();
        let first = errs.get(0).unwrap();
        assert_eq!(first.path, "/person/manager/manager/age", "{errs:?}");
        assert_eq!(first.keyword, "minimum");
        // Neither branch is closer: the union's own error stays.
        let v = compile(
            &json!({"anyOf": [{"type": "integer"}, {"type": "string"}]}),
            Documents::default(),
            None,
        )
        .unwrap();
        assert_eq!(
            check(&v, &json!(true)).unwrap_err().get(0).unwrap().keyword,
            "anyOf"
        );
    }

    #[test]
    fn error_count_is_capped() {
        let v = compile(
            &json!({"items": {"type": "string"}}),
            Documents::default(),
            None,
        )
        .unwrap();
        let many: Vec<i32> = (0..100).collect();
        assert_eq!(check(&v, &json!(many)).unwrap_err().len(), MAX_ERRORS);
    }
}
