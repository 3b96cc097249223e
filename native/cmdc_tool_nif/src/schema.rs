//! NIFs for JSON Schema: compile into a resource, validate terms or JSON text against it.
//! The logic lives in `cmdc_tool_core::schema`; this file converts terms and schedules work.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use cmdc_tool_core::compiled::{resolved_draft, Program, Stop};
use cmdc_tool_core::providers::round_trip::{null_plan, NullPlan};
use cmdc_tool_core::providers::{convert_parameters, Converted, Format};
use cmdc_tool_core::schema::{
    check, check_for, compile, compile_for, parse_draft, Documents, Failure,
};
use jsonschema::{Draft, Validator};
use rustler::{Binary, Encoder, Env, NifMap, ResourceArc, Term};
use serde_json::Value;

use crate::atoms;
use crate::beam;
use crate::error::{Error, Result};
use crate::json::DecodeError;
use crate::options::{self, Options};
use crate::term::{self, Budget};
use cmdc_tool_core::tape::Beam;

/// A compiled schema. `Validator` is not `RefUnwindSafe`; no NIF here unwinds across it.
pub struct Schema {
    /// Validates terms in place (`beam.rs`): the path every term takes.
    pub validator: AssertUnwindSafe<Validator<Beam>>,
    /// The same schema over `serde_json::Value`: the converting path, kept for the tests that
    /// check both paths agree and for the pure-Rust benchmark figure.
    pub converting: AssertUnwindSafe<Validator>,
    pub source: Value,
    /// The schema compiled into checks that read terms directly (`compiled.rs`), when it uses
    /// only the keywords that path implements; tried first, `validator` decides the rest.
    pub compiled: AssertUnwindSafe<Option<Program>>,
    /// Provider conversions of `source` (see `crate::registry`), made on first use.
    pub converted: Mutex<ConversionCache>,
    /// Where strict mode's rewrite made nulls stand for absent keys (`crate::round_trip`).
    null_plan: OnceLock<NullPlan>,
}

/// `(format, strict) → (tool name, conversion)`.
pub type ConversionCache = HashMap<(Format, bool), (String, Arc<Converted>)>;

impl Schema {
    pub fn new(
        validator: Validator<Beam>,
        converting: Validator,
        source: Value,
        draft: Option<Draft>,
    ) -> Self {
        Schema {
            validator: AssertUnwindSafe(validator),
            converting: AssertUnwindSafe(converting),
            compiled: AssertUnwindSafe(Program::compile(&source, resolved_draft(&source, draft))),
            source,
            converted: Mutex::new(HashMap::new()),
            null_plan: OnceLock::new(),
        }
    }

    /// The plan of the nulls strict mode's rewrite introduces, made on first use.
    pub fn null_plan(&self) -> &NullPlan {
        self.null_plan.get_or_init(|| null_plan(&self.source))
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
pub(crate) fn validate_term<'a>(
    schema: &Schema,
    args: Term<'a>,
    budget: Budget,
) -> Result<Term<'a>> {
    if let Some(program) = schema.compiled.as_ref() {
        match crate::compiled::run(program, args, budget.is_dirty()) {
            Ok(()) => return Ok(args),
            Err(Stop::Yield) => return Err(Error::Yield),
            // Invalid or undecided: the `jsonschema` path decides and names the errors.
            Err(_) => {}
        }
    }
    let tape = beam::build(args, &mut { budget }).map_err(|e| Error::not_json(&e))?;
    check_for::<Beam>(&schema.validator, tape.root()).map_err(Error::Invalid)?;
    Ok(args)
}

/// Decodes and validates JSON text, under the budget of the scheduler it runs on: `:yield`
/// on a normal scheduler when the text holds more work than it may do (a big integer).
/// `{:ok, decoded}` or the failures.
pub(crate) fn validate_text<'a>(env: Env<'a>, schema: &Schema, text: &[u8]) -> Result<Term<'a>> {
    let args = crate::json::decode(env, text, &mut Budget::here()).map_err(|e| match e {
        DecodeError::Yield => Error::Yield,
        DecodeError::Invalid(message) => Error::Invalid(vec![Failure::json("", message)]),
    })?;
    if let Some(program) = schema.compiled.as_ref() {
        if crate::compiled::run(program, args, true).is_ok() {
            return Ok(args);
        }
    }
    let tape = beam::build(args, &mut Budget::dirty()).map_err(|e| Error::not_json(&e))?;
    check_for::<Beam>(&schema.validator, tape.root()).map_err(Error::Invalid)?;
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
    let validator = compile_for::<Beam>(&source, docs.clone(), draft)?;
    let converting = compile(&source, docs, draft)?;
    Ok(ResourceArc::new(Schema::new(
        validator, converting, source, draft,
    )))
}

#[rustler::nif]
fn schema_validate<'a>(schema: &'a Schema, args: Term<'a>) -> Result<Term<'a>> {
    // A borrowed resource: the caller's term keeps it alive, no reference count to touch.
    validate_term(schema, args, Budget::normal())
}

#[rustler::nif(schedule = "DirtyCpu")]
fn schema_validate_dirty<'a>(schema: ResourceArc<Schema>, args: Term<'a>) -> Result<Term<'a>> {
    validate_term(&schema, args, Budget::dirty())
}

#[rustler::nif]
fn schema_validate_json<'a>(
    env: Env<'a>,
    schema: ResourceArc<Schema>,
    text: Binary<'a>,
) -> Result<Term<'a>> {
    if text.len() > crate::json::NORMAL_DECODE_BYTES {
        return Err(Error::Yield);
    }
    validate_text(env, &schema, text.as_slice())
}

#[rustler::nif(schedule = "DirtyCpu")]
fn schema_validate_json_dirty<'a>(
    env: Env<'a>,
    schema: ResourceArc<Schema>,
    text: Binary<'a>,
) -> Result<Term<'a>> {
    validate_text(env, &schema, text.as_slice())
}

/// Validates through the converting path (for the tests comparing both paths): term ->
/// `serde_json::Value` -> validation, with the in-place path's budget.
#[rustler::nif]
fn schema_validate_converting<'a>(schema: ResourceArc<Schema>, args: Term<'a>) -> Result<Term<'a>> {
    let value = term::to_value(args, &mut Budget::normal()).map_err(|e| Error::not_json(&e))?;
    check(&schema.converting, &value).map_err(Error::Invalid)?;
    Ok(args)
}

/// Validates in place reading the term through the `enif_*` API only (for the tests comparing
/// it with the direct reads of `layout.rs`).
#[rustler::nif(schedule = "DirtyCpu")]
fn schema_validate_api<'a>(schema: &'a Schema, args: Term<'a>) -> Result<Term<'a>> {
    let tape = beam::build_api(args, &mut Budget::dirty()).map_err(|e| Error::not_json(&e))?;
    check_for::<Beam>(&schema.validator, tape.root()).map_err(Error::Invalid)?;
    Ok(args)
}

/// `:direct` when terms are read from memory (the layout checked out on this emulator), else
/// `:api`.
#[rustler::nif]
fn term_layout(env: Env) -> Term {
    match crate::layout::get() {
        Some(_) => atoms::direct().encode(env),
        None => atoms::api().encode(env),
    }
}

/// Runs the `jsonschema` accessor-contract check on a term encoding its conformance document.
#[rustler::nif(schedule = "DirtyCpu")]
fn beam_conformance<'a>(env: Env<'a>, document: Term<'a>) -> Term<'a> {
    match crate::beam::conformance(document) {
        Ok(()) => atoms::ok().encode(env),
        Err(message) => (atoms::error(), message).encode(env),
    }
}

/// The schema as a term (as compiled), for callers that need the source back.
#[rustler::nif]
fn schema_source<'a>(env: Env<'a>, schema: ResourceArc<Schema>) -> Term<'a> {
    term::from_value(env, &schema.source)
}

/// Pure-Rust figure for the benchmark: ns per full validation (`check`) and per `is_valid` of
/// pre-parsed JSON text, measured inside Rust with no term conversion.
#[rustler::nif(schedule = "DirtyCpu")]
fn bench_rust_validate<'a>(
    env: Env<'a>,
    schema: ResourceArc<Schema>,
    text: Binary<'a>,
    iterations: u64,
) -> Term<'a> {
    let value: Value = match serde_json::from_slice(text.as_slice()) {
        Ok(v) => v,
        Err(e) => return (atoms::error(), e.to_string()).encode(env),
    };
    let n = iterations.max(1);
    let full = best_of_five(n, &|| {
        check(&schema.converting, std::hint::black_box(&value)).is_ok()
    });
    let bare = best_of_five(n, &|| {
        schema.converting.is_valid(std::hint::black_box(&value))
    });
    (atoms::ok(), (full, bare)).encode(env)
}

/// Breakdown for the benchmark, looped inside one NIF call (no Elixir call overhead) on the
/// caller's term: ns per walk into the index, per walk + `is_valid`, per `is_valid` alone.
#[rustler::nif(schedule = "DirtyCpu")]
fn bench_term_validate<'a>(
    env: Env<'a>,
    schema: ResourceArc<Schema>,
    input: Term<'a>,
    iterations: u64,
) -> Term<'a> {
    let n = iterations.max(1);
    let walk = best_of_five(n, &|| {
        beam::build(std::hint::black_box(input), &mut Budget::normal()).is_ok()
    });
    let full = best_of_five(n, &|| match beam::build(
        std::hint::black_box(input),
        &mut Budget::normal(),
    ) {
        Ok(tape) => schema.validator.is_valid(tape.root()),
        Err(_) => false,
    });
    let tape = beam::build(input, &mut Budget::dirty());
    let check = match &tape {
        Ok(tape) => best_of_five(n, &|| {
            schema.validator.is_valid(std::hint::black_box(tape.root()))
        }),
        Err(_) => f64::NAN,
    };
    (atoms::ok(), (walk, full, check)).encode(env)
}

/// An empty NIF with the same arguments as `schema_validate`: the call overhead from Elixir.
#[rustler::nif]
fn bench_noop<'a>(env: Env<'a>, _schema: &'a Schema, _input: Term<'a>) -> Term<'a> {
    atoms::ok().encode(env)
}

/// ns per call of `f`, best of five rounds of `n` calls: the round least disturbed by other work
/// on the machine.
pub(crate) fn best_of_five(n: u64, f: &dyn Fn() -> bool) -> f64 {
    (0..5)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..n {
                std::hint::black_box(f());
            }
            start.elapsed().as_nanos() as f64 / n as f64
        })
        .fold(f64::INFINITY, f64::min)
}
