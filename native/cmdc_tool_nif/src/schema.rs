//! NIFs for JSON Schema: compile into a resource, validate terms or JSON text against it.
//! The logic lives in `cmdc_tool_core::schema`; this file converts terms and schedules work.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use cmdc_tool_core::compiled::{resolved_draft, Program, Stop};
use cmdc_tool_core::dialect;
use cmdc_tool_core::pattern::keyword::without_backtracking;
use cmdc_tool_core::providers::null_plan;
use cmdc_tool_core::providers::round_trip::NullPlan;
use cmdc_tool_core::providers::{convert_parameters, Converted, Format};
use cmdc_tool_core::schema::{
    check_for, compile_for, failures_for, parse_draft, pattern_factor, Documents, Failures,
};
use jsonschema::{Draft, Validator};
use rustler::{Binary, Encoder, Env, NifMap, ResourceArc, Term};
use serde_json::Value;

use crate::atoms;
use crate::beam;
use crate::compiled::Slice;
use crate::error::{Error, Result};
use crate::json::DecodeError;
use crate::options::{self, Options};
use crate::term::{self, Budget, NORMAL_BUDGET};
use crate::twins::twin_nifs;
use cmdc_tool_core::tape::{Beam, Tape};

/// A compiled schema. `Validator` is not `RefUnwindSafe`; no NIF here unwinds across it.
pub struct Schema {
    /// Validates terms in place (`beam.rs`): the path every term takes.
    pub validator: AssertUnwindSafe<Validator<Beam>>,
    pub source: Value,
    /// `source` read in its dialect (OpenAPI 3.0's keywords rewritten): what is validated.
    pub read: Value,
    /// The draft asked for at compile time (`None`: the schema's `$schema`, else Draft 7).
    pub draft: Option<Draft>,
    /// The schema compiled into checks that read terms directly (`compiled.rs`), when it uses
    /// only the keywords that path implements; tried first, `validator` decides the rest.
    pub compiled: AssertUnwindSafe<Option<Program>>,
    /// Provider conversions of `source`, made on first use. Not a second cache of provider
    /// output (that is the registry's, `crate::registry`): one tool's converted parameters
    /// depend on neither the context nor the other tools, so the registry's cache misses (a new
    /// context, a registry change) reuse them and convert only new schemas; 1,000 tools for a
    /// new context take ~0.7 ms instead of ~15 ms (strict OpenAI, `bench/registry.exs`). A pure
    /// function of this immutable schema: never invalidated, at most one entry per format and
    /// strictness, freed with the schema.
    pub converted: Mutex<ConversionCache>,
    /// Where strict mode's rewrite made nulls stand for absent keys (`crate::nulls`).
    null_plan: OnceLock<NullPlan>,
    /// The cost of `validator`'s regexes per unit of reading an instance (0 without patterns).
    pattern_factor: i64,
}

/// `(format, strict) → (tool name, conversion)`.
pub type ConversionCache = HashMap<(Format, bool), (String, Arc<Converted>)>;

impl Schema {
    /// `read`: `source` as read in its dialect (`cmdc_tool_core::dialect`), what `validator`
    /// was compiled from; `draft` the draft chosen for it.
    pub fn new(
        validator: Validator<Beam>,
        source: Value,
        read: Value,
        draft: Option<Draft>,
    ) -> Self {
        Schema {
            pattern_factor: pattern_factor(&read),
            validator: AssertUnwindSafe(validator),
            compiled: AssertUnwindSafe(Program::compile(&read, resolved_draft(&read, draft))),
            read,
            source,
            draft,
            converted: Mutex::new(HashMap::new()),
            null_plan: OnceLock::new(),
        }
    }

    /// The plan of the nulls strict mode's rewrite introduces, made on first use.
    pub fn null_plan(&self) -> &NullPlan {
        self.null_plan.get_or_init(|| null_plan(&self.read))
    }

    /// This schema converted for a provider format, for the tool `name`; cached.
    pub fn converted(&self, name: &str, format: Format, strict: bool) -> Arc<Converted> {
        let key = (format, strict && format.has_strict());
        let mut cache = self.converted.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((cached_name, c)) = cache.get(&key) {
            if cached_name == name {
                return c.clone();
            }
        }
        let c = Arc::new(convert_parameters(name, &self.source, format, strict));
        cache.insert(key, (name.to_owned(), c.clone()));
        c
    }
}

#[rustler::resource_impl]
impl rustler::Resource for Schema {}

/// Validates the caller's term in place: `{:ok, args}` (the same term, no copy) or the failures.
/// On a normal scheduler the time used is reported to the VM, and all work is charged before
/// it runs (`{:error, :yield}` when it would not fit).
pub(crate) fn validate_term<'a>(
    schema: &Schema,
    args: Term<'a>,
    mut budget: Budget,
) -> Result<Term<'a>> {
    let dirty = budget.is_dirty();
    let mut invalid = false;
    if let Some(program) = schema.compiled.as_ref() {
        let checked = if dirty {
            crate::compiled::run(program, args, true)
        } else {
            crate::compiled::run_reported(program, args)
        };
        match checked {
            Ok(()) => return Ok(args),
            Err(Stop::Yield) => return Err(Error::Yield),
            // A backtracking match is needed (its superset, if any, accepted the string):
            // a dirty scheduler's work, before anything else is built.
            Err(Stop::Deferred) if !dirty => return Err(Error::Yield),
            // Invalid or undecided: the `jsonschema` path decides and names the errors; a
            // deferred pattern is decided by its error pass alone (one match, not two).
            Err(stop) => invalid = matches!(stop, Stop::Invalid | Stop::Deferred),
        }
    }
    let built = beam::build(args, &mut budget).and_then(|tape| {
        // The validator's regexes run per value read: charged here, before they run.
        if !dirty && schema.pattern_factor > 0 {
            budget.spend(budget.spent().saturating_mul(schema.pattern_factor))?;
        }
        Ok(tape)
    });
    let result = built
        .map_err(|e| Error::not_json(&e))
        .and_then(|tape| decide_here(schema, &tape, invalid, dirty).map(|()| args));
    if !dirty {
        // The error list is work too (a failure's texts and maps, ~1.6 µs measured).
        let failures = match &result {
            Err(Error::Invalid(failures)) => failures.len() as i64,
            _ => 0,
        };
        let units = budget.spent().min(NORMAL_BUDGET) + failures * FAILURE_UNITS;
        crate::term::report_units(args.get_env(), units);
    }
    result
}

/// Work units reported for one failure in an error list.
const FAILURE_UNITS: i64 = 16;

/// `decide` on the scheduler the call runs on: on a normal one no `pattern` match that can
/// backtrack runs (their supersets decide what they can, `cmdc_tool_core::pattern`); one
/// that is needed makes the call `:yield`, so no string is matched twice.
fn decide_here(schema: &Schema, tape: &Tape, invalid: bool, dirty: bool) -> Result<()> {
    if dirty {
        return decide(schema, tape, invalid);
    }
    without_backtracking(|| decide(schema, tape, invalid)).unwrap_or(Err(Error::Yield))
}

/// The validator's verdict on a built index; `invalid`: the compiled program found it invalid.
fn decide(schema: &Schema, tape: &Tape, invalid: bool) -> Result<()> {
    if invalid {
        // Known invalid: straight to the errors, without `check_for`'s boolean pass.
        let failures = failures_for::<Beam>(&schema.validator, tape.root());
        return if failures.is_empty() {
            Ok(())
        } else {
            Err(Error::Invalid(failures))
        };
    }
    check_for::<Beam>(&schema.validator, tape.root()).map_err(Error::Invalid)
}

/// A tool call's arguments validated: as `validate_term`, and when they fail, once more
/// without the nulls strict mode put for absent optional fields (`crate::nulls`), so a
/// call shaped by a strict schema reaches the tool as its original schema means it.
/// `Ok(args)` (maybe without those nulls) or the first failures. The one rule of every path
/// that validates a call: registry, tool module, runner, MCP server, cluster.
pub(crate) fn validate_call<'a>(
    env: Env<'a>,
    schema: &Schema,
    args: Term<'a>,
    dirty: bool,
) -> Result<Term<'a>> {
    let budget = if dirty {
        Budget::dirty()
    } else {
        Budget::normal()
    };
    let failures = match validate_term(schema, args, budget) {
        Err(Error::Invalid(failures)) => failures,
        Ok(args) => return with_defaults(env, schema, args, dirty),
        other => return other,
    };
    let no_plan = schema.null_plan.get().is_some_and(NullPlan::is_empty);
    if no_plan || failures.iter().any(|f| f.keyword == "json") {
        return Err(Error::Invalid(failures));
    }
    // Making the plan and walking the whole term is a dirty scheduler's work.
    if !dirty {
        return Err(Error::Yield);
    }
    // Still failing without strict mode's nulls: those failures are reported, so none blames
    // a null strict mode asked for (it stood for an optional field left out).
    match crate::nulls::without_nulls(env, schema.null_plan(), args) {
        Some(dropped) => match validate_term(schema, dropped, Budget::dirty()) {
            Ok(dropped) => Ok(dropped),
            Err(Error::Invalid(fewer)) => Err(Error::Invalid(fewer)),
            Err(_) => Err(Error::Invalid(failures)),
        },
        None => Err(Error::Invalid(failures)),
    }
}

/// A valid call with strict mode's nulls for optional fields with a `default` replaced by
/// those defaults (`Prop::default`). Only schemas with such fields pay: on a normal scheduler
/// they (and a schema whose plan is not made yet) answer `:yield`, as the walk is unbounded.
fn with_defaults<'a>(
    env: Env<'a>,
    schema: &Schema,
    args: Term<'a>,
    dirty: bool,
) -> Result<Term<'a>> {
    match schema.null_plan.get() {
        Some(plan) if !plan.has_defaults() => return Ok(args),
        _ if !dirty => return Err(Error::Yield),
        _ => {}
    }
    if !schema.null_plan().has_defaults() {
        return Ok(args);
    }
    match crate::nulls::without_nulls(env, schema.null_plan(), args) {
        Some(filled) if validate_term(schema, filled, Budget::dirty()).is_ok() => Ok(filled),
        _ => Ok(args),
    }
}

/// A call's arguments: a term, or the JSON text a model sent.
pub(crate) enum Args<'a> {
    Term(Term<'a>),
    Text(&'a [u8]),
}

/// `validate_call` of a call's arguments, JSON text decoded first (`:yield` on a normal
/// scheduler for text over what it may decode there).
pub(crate) fn validate_args<'a>(
    env: Env<'a>,
    schema: &Schema,
    args: Args<'a>,
    dirty: bool,
) -> Result<Term<'a>> {
    let args = match args {
        Args::Term(term) => term,
        Args::Text(text) if !dirty && text.len() > crate::json::NORMAL_DECODE_BYTES => {
            return Err(Error::Yield)
        }
        Args::Text(text) => decode_args(env, text)?,
    };
    validate_call(env, schema, args, dirty)
}

/// Decodes a call's JSON text under the budget of the scheduler it runs on (`:yield` on a
/// normal scheduler when the text holds more work than it may do, a big integer); text that
/// is not JSON is the one failure with keyword `"json"`.
pub(crate) fn decode_args<'a>(env: Env<'a>, text: &[u8]) -> Result<Term<'a>> {
    crate::json::decode(env, text, &mut term::budget::here()).map_err(|e| match e {
        DecodeError::Yield => Error::Yield,
        DecodeError::Invalid(message) => Error::Invalid(Failures::json("", &message)),
    })
}

/// Decodes and validates JSON text: `{:ok, decoded}` or the failures.
pub(crate) fn validate_text<'a>(env: Env<'a>, schema: &Schema, text: &[u8]) -> Result<Term<'a>> {
    let args = decode_args(env, text)?;
    let mut invalid = false;
    if let Some(program) = schema.compiled.as_ref() {
        match crate::compiled::run(program, args, true) {
            Ok(()) => return Ok(args),
            Err(stop) => invalid = matches!(stop, Stop::Invalid | Stop::Deferred),
        }
    }
    let tape = beam::build(args, &mut Budget::dirty()).map_err(|e| Error::not_json(&e))?;
    decide(schema, &tape, invalid)?;
    Ok(args)
}

/// `CMDC.Tool.Schema.compile/2`'s options.
#[derive(NifMap)]
struct CompileOpts<'a> {
    /// `"7"`, `"2020-12"`, ... or `nil` (the schema's `$schema`, else Draft 7).
    draft: Option<String>,
    /// `%{uri => schema}`: the documents `$ref`s resolve against.
    documents: Term<'a>,
    /// `[{url_prefix, folder}]`: a `$ref` under the prefix reads the file inside the folder.
    dirs: Vec<(String, String)>,
}

impl<'a> Options<'a> for CompileOpts<'a> {
    const NIF: &'static str = "schema_compile";
    const EXPECTED: &'static str = "draft (string or nil), documents (a map of URI => schema) \
        and dirs (a list of {url_prefix, folder} strings)";
}

/// The core's documents. Fallible (the documents must be JSON), so `TryFrom`.
impl<'a> TryFrom<CompileOpts<'a>> for Documents {
    type Error = Error;

    fn try_from(opts: CompileOpts<'a>) -> Result<Self> {
        let documents = match term::to_value(opts.documents, &mut Budget::dirty()) {
            Ok(Value::Object(map)) => map.into_iter().collect(),
            Ok(_) => {
                return Err(Error::Message(
                    "documents must be a map of URI => schema".into(),
                ))
            }
            Err(e) => return Err(Error::bad_term("invalid schema document", &e)),
        };
        let dirs = opts
            .dirs
            .into_iter()
            .map(|(prefix, dir)| (prefix, PathBuf::from(dir)))
            .collect();
        Ok(Documents { documents, dirs })
    }
}

#[rustler::nif(schedule = "DirtyCpu")]
fn schema_compile<'a>(schema: Term<'a>, opts: Term<'a>) -> Result<ResourceArc<Schema>> {
    let source = term::to_value(schema, &mut Budget::dirty())
        .map_err(|e| Error::bad_term("invalid schema", &e))?;
    let opts = options::decode::<CompileOpts>(opts)?;
    let draft = match opts.draft.as_deref() {
        None => None,
        Some(name) => Some(parse_draft(name).ok_or_else(|| {
            Error::Message(format!(
                "unknown draft {name:?}: use one of \"4\", \"6\", \"7\", \"2019-09\", \"2020-12\""
            ))
        })?),
    };
    let docs = Documents::try_from(opts)?;
    let reading = dialect::read(&source, draft);
    let (read, draft) = (reading.schema.into_owned(), reading.draft);
    let validator = compile_for::<Beam>(&read, docs, draft)?;
    Ok(ResourceArc::new(Schema::new(
        validator, source, read, draft,
    )))
}

twin_nifs! {
    // A borrowed resource: the caller's term keeps it alive, no reference count to touch.
    fn schema_validate / schema_validate_dirty<'a>(
        schema: &'a Schema,
        args: Term<'a>,
    ) -> (Result<Term<'a>>),
    |dirty| {
        let budget = if dirty { Budget::dirty() } else { Budget::normal() };
        validate_term(schema, args, budget)
    }
}

/// Elements of a top-level list from `index` on, one slice per call on the caller's normal
/// scheduler (`Schema.validate/2` loops over the rest): `:done` (the whole list is valid),
/// `{:more, rest, index}`, or `:undecided` (the usual validation decides and names the errors;
/// see `compiled::Slice`).
#[rustler::nif]
fn schema_validate_slice<'a>(
    env: Env<'a>,
    schema: &'a Schema,
    list: Term<'a>,
    index: usize,
) -> Term<'a> {
    let slice = match schema.compiled.as_ref() {
        Some(program) => crate::compiled::run_slice(program, list, index),
        None => Slice::Undecided,
    };
    match slice {
        Slice::Done => atoms::done().encode(env),
        Slice::More(rest, next) => (atoms::more(), rest, next).encode(env),
        Slice::Undecided => atoms::undecided().encode(env),
    }
}

twin_nifs! {
    fn schema_validate_json / schema_validate_json_dirty<'a>(
        env: Env,
        schema: ResourceArc<Schema>,
        text: Binary<'a>,
    ) -> (Result<Term<'a>>),
    |dirty| {
        if !dirty && text.len() > crate::json::NORMAL_DECODE_BYTES {
            return Err(Error::Yield);
        }
        validate_text(env, &schema, text.as_slice())
    }
}

/// `args` without the nulls the OpenAI strict rewrite of the schema introduced (the keys
/// absent instead), or `nil` when it has none of them. Only called after a validation failed,
/// so it runs on a dirty scheduler and may walk the whole term.
#[rustler::nif(schedule = "DirtyCpu")]
fn schema_drop_nulls<'a>(
    env: Env<'a>,
    schema: ResourceArc<Schema>,
    args: Term<'a>,
) -> Option<Term<'a>> {
    crate::nulls::without_nulls(env, schema.null_plan(), args)
}
