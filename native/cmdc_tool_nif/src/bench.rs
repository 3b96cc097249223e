//! Pure-Rust reference figures for `bench/json.exs` and `bench/validate.exs`: what serde_json and
//! `jsonschema` take on the same bytes with no BEAM in the loop (each looped inside one NIF call,
//! best of five rounds).

use rustler::{Binary, Encoder, Env, ResourceArc, Term};
use serde_json::Value;

use crate::atoms;
use crate::schema::{best_of_five, Schema};

/// ns per `serde_json::from_slice::<Value>` and per `serde_json::to_vec` of that value.
#[rustler::nif(schedule = "DirtyCpu")]
fn bench_rust_json<'a>(env: Env<'a>, text: Binary<'a>, iterations: u64) -> Term<'a> {
    let value: Value = match serde_json::from_slice(text.as_slice()) {
        Ok(v) => v,
        Err(e) => return (atoms::error(), e.to_string()).encode(env),
    };
    let n = iterations.max(1);
    let decode = best_of_five(n, &|| {
        serde_json::from_slice::<Value>(std::hint::black_box(text.as_slice())).is_ok()
    });
    let encode = best_of_five(n, &|| {
        serde_json::to_vec(std::hint::black_box(&value)).is_ok()
    });
    (atoms::ok(), (decode, encode)).encode(env)
}

/// ns per parse + `is_valid` of JSON text (the reference for `Schema.validate_json/2`), and per
/// `iter_errors` with paths and messages made strings (the reference for the error list).
#[rustler::nif(schedule = "DirtyCpu")]
fn bench_rust_text_validate<'a>(
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
    let parse_validate = best_of_five(n, &|| match serde_json::from_slice::<Value>(
        std::hint::black_box(text.as_slice()),
    ) {
        Ok(v) => schema.converting.is_valid(&v),
        Err(_) => false,
    });
    let errors = best_of_five(n, &|| {
        let list: Vec<(String, String, String)> = schema
            .converting
            .iter_errors(std::hint::black_box(&value))
            .map(|e| {
                (
                    e.instance_path().as_str().to_owned(),
                    e.kind().keyword().to_owned(),
                    e.to_string(),
                )
            })
            .collect();
        !list.is_empty()
    });
    (atoms::ok(), (parse_validate, errors)).encode(env)
}
