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
use rustler::{Binary, Encoder, Env, ResourceArc, Term};
use serde_json::Value;

use crate::atoms;
use crate::beam;
use crate::json::DecodeError;
use crate::term::{self, Budget, TermError};
use cmdc_tool_core::tape::{Beam, Tape};

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
    pub compiled: Option<Program>,
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
            compiled: Program::compile(&source, resolved_draft(&source, draft)),
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

fn failure_term<'a>(env: Env<'a>, f: &Failure) -> Term<'a> {
    term::string_map(
        env,
        &[
            (atoms::path(), f.path.as_str()),
            (atoms::keyword(), f.keyword.as_str()),
            (atoms::message(), f.message.as_str()),
            (atoms::schema_path(), f.schema_path.as_str()),
        ],
    )
}

fn not_json(e: &TermError) -> Failure {
    Failure::json(e.path(), e.message())
}

fn failures_term<'a>(env: Env<'a>, failures: &[Failure]) -> Term<'a> {
    let list: Vec<Term<'a>> = failures.iter().map(|f| failure_term(env, f)).collect();
    (atoms::error(), list).encode(env)
}

pub(crate) fn validate_term<'a>(
    env: Env<'a>,
    schema: &Schema,
    args: Term<'a>,
    budget: Budget,
) -> Term<'a> {
    if let Some(program) = &schema.compiled {
        match crate::compiled::run(program, args, budget.is_dirty()) {
            Ok(()) => return atoms::ok().encode(env),
            Err(Stop::Yield) => return atoms::r#yield().encode(env),
            // Invalid or undecided: the `jsonschema` path decides and names the errors.
            Err(_) => {}
        }
    }
    validate_tape(env, schema, beam::build(args, &mut { budget }))
}

fn validate_tape<'a>(env: Env<'a>, schema: &Schema, tape: Result<Tape<'_>, TermError>) -> Term<'a> {
    match tape {
        Err(TermError::Yield) => atoms::r#yield().encode(env),
        Err(e) => failures_term(env, &[not_json(&e)]),
        Ok(tape) => match check_for::<Beam>(&schema.validator, tape.root()) {
            Ok(()) => atoms::ok().encode(env),
            Err(failures) => failures_term(env, &failures),
        },
    }
}

/// The converting path: term -> `serde_json::Value` -> validation (normal scheduler, with the
/// same budget as the in-place path; `:yield` when over it).
fn validate_converted<'a>(env: Env<'a>, schema: &Schema, args: Term<'a>) -> Term<'a> {
    match term::to_value(args, &mut Budget::normal()) {
        Err(TermError::Yield) => atoms::r#yield().encode(env),
        Err(e) => failures_term(env, &[not_json(&e)]),
        Ok(value) => match check(&schema.converting, &value) {
            Ok(()) => atoms::ok().encode(env),
            Err(failures) => failures_term(env, &failures),
        },
    }
}

/// Decodes and validates JSON text, under the budget of the scheduler it runs on: `:yield`
/// on a normal scheduler when the text holds more work than it may do (a big integer).
pub(crate) fn validate_text<'a>(env: Env<'a>, schema: &Schema, text: &[u8]) -> Term<'a> {
    let mut budget = Budget::here();
    let args = match crate::json::decode(env, text, &mut budget) {
        Ok(term) => term,
        Err(DecodeError::Yield) => return atoms::r#yield().encode(env),
        Err(DecodeError::Invalid(message)) => {
            return failures_term(env, &[Failure::json("", message)])
        }
    };
    if let Some(program) = &schema.compiled {
        if crate::compiled::run(program, args, true).is_ok() {
            return (atoms::ok(), args).encode(env);
        }
    }
    match beam::build(args, &mut Budget::dirty()) {
        Err(e) => failures_term(env, &[not_json(&e)]),
        Ok(tape) => match check_for::<Beam>(&schema.validator, tape.root()) {
            Ok(()) => (atoms::ok(), args).encode(env),
            Err(failures) => failures_term(env, &failures),
        },
    }
}

/// Options: `%{"documents" => %{uri => schema}, "dirs" => %{url_prefix => folder}}`.
fn documents(opts: &Value) -> Documents {
    let mut docs = Documents::default();
    if let Some(Value::Object(map)) = opts.get("documents") {
        docs.documents = map.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    }
    if let Some(Value::Object(map)) = opts.get("dirs") {
        docs.dirs = map
            .iter()
            .filter_map(|(k, v)| v.as_str().map(|d| (k.clone(), PathBuf::from(d))))
            .collect();
    }
    docs
}

#[rustler::nif(schedule = "DirtyCpu")]
fn schema_compile<'a>(env: Env<'a>, schema: Term<'a>, opts: Term<'a>) -> Term<'a> {
    let converted = term::to_value(schema, &mut Budget::dirty())
        .and_then(|s| Ok((s, term::to_value(opts, &mut Budget::dirty())?)));
    let (source, opts) = match converted {
        Ok(pair) => pair,
        Err(e) => {
            let at = if e.path().is_empty() { "" } else { " at " };
            let msg = format!("invalid schema{at}{}: {}", e.path(), e.message());
            return (atoms::error(), msg).encode(env);
        }
    };
    let draft = match opts.get("draft").and_then(Value::as_str) {
        None => None,
        Some(name) => match parse_draft(name) {
            Some(draft) => Some(draft),
            None => {
                let msg = format!(
                    "unknown draft {name:?}: use one of \"4\", \"6\", \"7\", \"2019-09\", \"2020-12\""
                );
                return (atoms::error(), msg).encode(env);
            }
        },
    };
    let docs = documents(&opts);
    let compiled = compile_for::<Beam>(&source, docs.clone(), draft)
        .and_then(|beam| Ok((beam, compile(&source, docs, draft)?)));
    match compiled {
        Ok((validator, converting)) => (
            atoms::ok(),
            ResourceArc::new(Schema::new(validator, converting, source, draft)),
        )
            .encode(env),
        Err(msg) => (atoms::error(), msg).encode(env),
    }
}

#[rustler::nif]
fn schema_validate<'a>(env: Env<'a>, schema: &'a Schema, args: Term<'a>) -> Term<'a> {
    // A borrowed resource: the caller's term keeps it alive, no reference count to touch.
    validate_term(env, schema, args, Budget::normal())
}

#[rustler::nif(schedule = "DirtyCpu")]
fn schema_validate_dirty<'a>(
    env: Env<'a>,
    schema: ResourceArc<Schema>,
    args: Term<'a>,
) -> Term<'a> {
    validate_term(env, &schema, args, Budget::dirty())
}

#[rustler::nif]
fn schema_validate_json<'a>(
    env: Env<'a>,
    schema: ResourceArc<Schema>,
    text: Binary<'a>,
) -> Term<'a> {
    if text.len() > crate::json::NORMAL_DECODE_BYTES {
        return atoms::r#yield().encode(env);
    }
    validate_text(env, &schema, text.as_slice())
}

#[rustler::nif(schedule = "DirtyCpu")]
fn schema_validate_json_dirty<'a>(
    env: Env<'a>,
    schema: ResourceArc<Schema>,
    text: Binary<'a>,
) -> Term<'a> {
    validate_text(env, &schema, text.as_slice())
}

/// Validates through the converting path (for the tests comparing both paths).
#[rustler::nif]
fn schema_validate_converting<'a>(
    env: Env<'a>,
    schema: ResourceArc<Schema>,
    args: Term<'a>,
) -> Term<'a> {
    validate_converted(env, &schema, args)
}

/// Validates in place reading the term through the `enif_*` API only (for the tests comparing
/// it with the direct reads of `layout.rs`).
#[rustler::nif(schedule = "DirtyCpu")]
fn schema_validate_api<'a>(env: Env<'a>, schema: &'a Schema, args: Term<'a>) -> Term<'a> {
    validate_tape(env, schema, beam::build_api(args, &mut Budget::dirty()))
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
