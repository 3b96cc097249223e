//! Test and benchmark NIFs, built only with the `testing` feature (`MIX_ENV=test`, `MIX_ENV=bench`
//! or `CMDC_NIF_TESTING=1`, see `mix.exs`); their stubs are `CMDC.Tool.Native.Testing`. They
//! compare the validation paths with one another (in-place reads, `enif_*` reads, the compiled
//! program, `serde_json::Value`) and give the pure-Rust reference figures of `bench/*.exs`
//! (each looped inside one NIF call, best of five rounds). Nothing in `lib/` calls them.

use std::time::Instant;

use cmdc_tool_core::compiled::Stop;
use cmdc_tool_core::schema::{check, check_for, compile, Documents};
use jsonschema::Validator;
use rustler::{Atom, Binary, Encoder, Env, ResourceArc, Term};
use serde_json::Value;

use crate::atoms;
use crate::beam;
use crate::compiled::{run, run_api};
use crate::error::{Error, Result};
use crate::schema::Schema;
use crate::term::{self, Budget};
use cmdc_tool_core::tape::Beam;

/// The schema compiled again over `serde_json::Value` (the converting path), on demand: a
/// production schema holds only the validator over terms.
fn converting(schema: &Schema) -> Result<Validator> {
    Ok(compile(&schema.read, Documents::default(), schema.draft)?)
}

fn parse(text: &[u8]) -> Result<Value> {
    serde_json::from_slice(text).map_err(|e| Error::Message(e.to_string()))
}

/// ns per call of `f`, best of five rounds of `n` calls: the round least disturbed by other work
/// on the machine.
fn best_of_five(n: u64, f: &dyn Fn() -> bool) -> f64 {
    let n = n.max(1);
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

// ---------------------------------------------------------------------------------------------
// The paths compared (tests)

/// Validates through the converting path: term -> `serde_json::Value` -> validation.
#[rustler::nif(schedule = "DirtyCpu")]
fn schema_validate_converting<'a>(schema: ResourceArc<Schema>, args: Term<'a>) -> Result<Term<'a>> {
    let value = term::to_value(args, &mut Budget::dirty()).map_err(|e| Error::not_json(&e))?;
    check(&converting(&schema)?, &value).map_err(Error::Invalid)?;
    Ok(args)
}

/// Validates in place reading the term through the `enif_*` API only (against the direct reads
/// of `layout.rs`), with the `jsonschema` validator alone (no compiled program).
#[rustler::nif(schedule = "DirtyCpu")]
fn schema_validate_api<'a>(schema: &'a Schema, args: Term<'a>) -> Result<Term<'a>> {
    let tape = beam::build_api(args, &mut Budget::dirty()).map_err(|e| Error::not_json(&e))?;
    check_for::<Beam>(&schema.validator, tape.root()).map_err(Error::Invalid)?;
    Ok(args)
}

/// The compiled program's own answer: `:valid`, `:invalid`, `:fallback` (not decided there), or
/// `:unsupported` (the schema did not compile into a program). `api` reads through `enif_*`.
#[rustler::nif(schedule = "DirtyCpu")]
fn schema_validate_compiled<'a>(
    env: Env<'a>,
    schema: ResourceArc<Schema>,
    input: Term<'a>,
    api: bool,
) -> Term<'a> {
    let Some(program) = schema.compiled.as_ref() else {
        return atoms::unsupported().encode(env);
    };
    let result = if api {
        run_api(program, input, true)
    } else {
        run(program, input, true)
    };
    match result {
        Ok(()) => atoms::valid(),
        Err(Stop::Invalid) => atoms::invalid(),
        Err(_) => atoms::fallback(),
    }
    .encode(env)
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

/// Runs the `jsonschema` accessor-contract check on a term encoding its conformance document:
/// `{:ok, :ok}` or `{:error, message}`.
#[rustler::nif(schedule = "DirtyCpu")]
fn beam_conformance(document: Term) -> Result<Atom> {
    conformance(document)?;
    Ok(atoms::ok())
}

/// `{entries, bytes}` held by a registry's output cache: its bound, observed by the tests.
#[rustler::nif]
fn registry_cache_info(reg: ResourceArc<crate::registry::Registry>) -> (usize, usize) {
    crate::registry::cache_info(&reg)
}

// ---------------------------------------------------------------------------------------------
// Reference figures (benchmarks)

/// An empty NIF with the same arguments as `schema_validate`: the call overhead from Elixir.
#[rustler::nif]
fn bench_noop<'a>(env: Env<'a>, _schema: &'a Schema, _input: Term<'a>) -> Term<'a> {
    atoms::ok().encode(env)
}

/// ns per full validation (`check`) and per `is_valid` of pre-parsed JSON text on the
/// converting validator: the pure-Rust figure, no term conversion.
#[rustler::nif(schedule = "DirtyCpu")]
fn bench_rust_validate(
    schema: ResourceArc<Schema>,
    text: Binary,
    iterations: u64,
) -> Result<(f64, f64)> {
    let (value, validator) = (parse(text.as_slice())?, converting(&schema)?);
    let full = best_of_five(iterations, &|| {
        check(&validator, std::hint::black_box(&value)).is_ok()
    });
    let bare = best_of_five(iterations, &|| {
        validator.is_valid(std::hint::black_box(&value))
    });
    Ok((full, bare))
}

/// Looped on the caller's term: ns per walk into the index, per walk + `is_valid`, per
/// `is_valid` alone.
#[rustler::nif(schedule = "DirtyCpu")]
fn bench_term_validate<'a>(
    schema: ResourceArc<Schema>,
    input: Term<'a>,
    iterations: u64,
) -> Result<(f64, f64, f64)> {
    let walk = best_of_five(iterations, &|| {
        beam::build(std::hint::black_box(input), &mut Budget::normal()).is_ok()
    });
    let full = best_of_five(iterations, &|| match beam::build(
        std::hint::black_box(input),
        &mut Budget::normal(),
    ) {
        Ok(tape) => schema.validator.is_valid(tape.root()),
        Err(_) => false,
    });
    let tape = beam::build(input, &mut Budget::dirty()).map_err(|e| Error::not_json(&e))?;
    let check = best_of_five(iterations, &|| {
        schema.validator.is_valid(std::hint::black_box(tape.root()))
    });
    Ok((walk, full, check))
}

/// ns per run of the compiled program on the caller's term.
#[rustler::nif(schedule = "DirtyCpu")]
fn bench_compiled_validate<'a>(
    schema: ResourceArc<Schema>,
    input: Term<'a>,
    iterations: u64,
) -> Result<f64> {
    let program = schema
        .compiled
        .as_ref()
        .ok_or_else(|| Error::Message("the schema has no compiled program".into()))?;
    Ok(best_of_five(iterations, &|| {
        run(program, std::hint::black_box(input), false).is_ok()
    }))
}

/// ns per `serde_json::from_slice::<Value>` and per `serde_json::to_vec` of that value.
#[rustler::nif(schedule = "DirtyCpu")]
fn bench_rust_json(text: Binary, iterations: u64) -> Result<(f64, f64)> {
    let value = parse(text.as_slice())?;
    let decode = best_of_five(iterations, &|| {
        serde_json::from_slice::<Value>(std::hint::black_box(text.as_slice())).is_ok()
    });
    let encode = best_of_five(iterations, &|| {
        serde_json::to_vec(std::hint::black_box(&value)).is_ok()
    });
    Ok((decode, encode))
}

/// ns per parse + `is_valid` of JSON text (the reference for `Schema.validate_json/2`), and per
/// `iter_errors` with paths and messages made strings (the reference for the error list).
#[rustler::nif(schedule = "DirtyCpu")]
fn bench_rust_text_validate(
    schema: ResourceArc<Schema>,
    text: Binary,
    iterations: u64,
) -> Result<(f64, f64)> {
    let (value, validator) = (parse(text.as_slice())?, converting(&schema)?);
    let parse_validate = best_of_five(iterations, &|| match serde_json::from_slice::<Value>(
        std::hint::black_box(text.as_slice()),
    ) {
        Ok(v) => validator.is_valid(&v),
        Err(_) => false,
    });
    let errors = best_of_five(iterations, &|| rust_errors(&validator, &value));
    Ok((parse_validate, errors))
}

/// The reference error list: `iter_errors` with paths, keywords and messages made strings;
/// whether there was any.
fn rust_errors(validator: &Validator, value: &Value) -> bool {
    !validator
        .iter_errors(std::hint::black_box(value))
        .map(|e| {
            (
                e.instance_path().as_str().to_owned(),
                e.kind().keyword().to_owned(),
                e.to_string(),
            )
        })
        .collect::<Vec<_>>()
        .is_empty()
}

/// One reference work alone, `iterations` times in a plain loop (no rounds, no timing): for
/// counting its instructions (`valgrind --tool=callgrind`), where the other reference NIFs run
/// two works each. `what` is `:errors` (as `bench_rust_text_validate`'s second figure),
/// `:encode`, `:decode` (as `bench_rust_json`'s) or `:is_valid` (as `bench_rust_validate`'s
/// second). Returns how many of the runs succeeded.
#[rustler::nif(schedule = "DirtyCpu")]
fn bench_rust_one(
    what: Atom,
    schema: ResourceArc<Schema>,
    text: Binary,
    iterations: u64,
) -> Result<u64> {
    let (value, validator) = (parse(text.as_slice())?, converting(&schema)?);
    let work: &dyn Fn() -> bool = if what == atoms::errors() {
        &|| rust_errors(&validator, &value)
    } else if what == atoms::encode() {
        &|| serde_json::to_vec(std::hint::black_box(&value)).is_ok()
    } else if what == atoms::decode() {
        &|| serde_json::from_slice::<Value>(std::hint::black_box(text.as_slice())).is_ok()
    } else if what == atoms::is_valid() {
        &|| validator.is_valid(std::hint::black_box(&value))
    } else {
        return Err(Error::Message(
            "what: :errors, :encode, :decode or :is_valid".into(),
        ));
    };
    Ok((0..iterations).filter(|_| work()).count() as u64)
}

/// Checks the accessor contract of the validator on a term encoding
/// `jsonschema::json::conformance::document()`.
fn conformance(term: Term) -> Result<()> {
    let tape = beam::build(term, &mut Budget::dirty()).map_err(|e| Error::Message(e.message()))?;
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        jsonschema::json::conformance::assert_conformance::<Beam>(&tape.root())
    }))
    .map_err(|panic| {
        panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_else(|| "conformance check failed".into())
    })
    .map_err(Error::Message)
}

// ---------------------------------------------------------------------------------------------
// Memory (issue 16): what a big input leaves behind

/// Builds the index of `input` on this (dirty) thread, drops it, and returns the capacities
/// (items, keys) of the buffers the thread keeps for its next index.
#[rustler::nif(schedule = "DirtyCpu")]
fn memory_kept_after<'a>(input: Term<'a>) -> Result<(usize, usize)> {
    drop(beam::build(input, &mut Budget::dirty()).map_err(|e| Error::not_json(&e))?);
    Ok(cmdc_tool_core::tape::kept_capacity())
}

/// The native heap (glibc's malloc, which the Rust code uses): bytes of its arenas and of its
/// `mmap`ed blocks, and the free bytes it holds in them. `bench/stall.exs` prints it next to the
/// RSS and the VM's own figures.
#[rustler::nif]
fn memory_malloc() -> (u64, u64, u64) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[allow(unsafe_code)]
    // SAFETY: `mallinfo2` only reads glibc's counters.
    let (arena, mapped, free) = {
        let info = unsafe { libc::mallinfo2() };
        (info.arena as u64, info.hblkhd as u64, info.fordblks as u64)
    };
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let (arena, mapped, free) = (0, 0, 0);
    (arena, mapped, free)
}
