//! One compiled schema per tool module version, for every path that validates a tool module's
//! arguments or output: `CMDC.Tool.validate/2` on a module, `CMDC.Tool.Registry` (which
//! registers the very same resource), the runner, the MCP server and structured output.
//! Keyed by module and kind (`:parameters` or `:output`); an entry is valid for one module MD5,
//! so a reloaded module is compiled again (the one invalidation rule). Compilation is the
//! Elixir side's (`CMDC.Tool.Schema.for_module/1`): it calls the module, then stores here.

use std::collections::HashMap;
use std::sync::{OnceLock, RwLock};

use cmdc_tool_core::schema::Failure;
use rustler::{Atom, Binary, ResourceArc, Term};

use crate::atoms;
use crate::error::{Error, Result};
use crate::schema::{self, Schema};

/// A compiled schema, or the message of why the module's schema does not compile.
type Compiled = std::result::Result<ResourceArc<Schema>, String>;

/// `(module, kind)` as atom terms (atoms are never freed, so their terms are stable keys).
type Key = (rustler::sys::ErlNifTerm, rustler::sys::ErlNifTerm);

fn cache() -> &'static RwLock<HashMap<Key, (Vec<u8>, Compiled)>> {
    static CACHE: OnceLock<RwLock<HashMap<Key, (Vec<u8>, Compiled)>>> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

fn key(module: Atom, kind: Atom) -> Key {
    (module.as_c_arg(), kind.as_c_arg())
}

fn cached(module: Atom, kind: Atom, md5: &[u8]) -> Option<Compiled> {
    let cache = cache().read().unwrap_or_else(|e| e.into_inner());
    match cache.get(&key(module, kind)) {
        Some((stored, compiled)) if stored == md5 => Some(compiled.clone()),
        _ => None,
    }
}

/// `{:ok, schema}`, `{:error, message}` (it does not compile), or `nil` when this version of
/// the module has nothing stored.
#[rustler::nif]
fn module_schema(module: Atom, kind: Atom, md5: Binary) -> Option<Compiled> {
    cached(module, kind, md5.as_slice())
}

/// Stores what `{:ok, schema} | {:error, message}` compiling this version of the module gave,
/// and answers what is stored: the first one stored for a version wins, so processes that
/// compiled it at once all use one schema.
#[rustler::nif]
fn module_schema_put(module: Atom, kind: Atom, md5: Binary, compiled: Term) -> Result<Compiled> {
    let bad = || Error::Message("expected {:ok, schema} or {:error, message}".into());
    let (tag, value): (Atom, Term) = compiled.decode().map_err(|_| bad())?;
    let compiled = if tag == atoms::ok() {
        Ok(value.decode::<ResourceArc<Schema>>().map_err(|_| bad())?)
    } else {
        Err(value.decode::<String>().map_err(|_| bad())?)
    };
    let mut cache = cache().write().unwrap_or_else(|e| e.into_inner());
    let slot = cache
        .entry(key(module, kind))
        .or_insert_with(|| (md5.as_slice().to_vec(), compiled.clone()));
    if slot.0 != md5.as_slice() {
        *slot = (md5.as_slice().to_vec(), compiled);
    }
    Ok(slot.1.clone())
}

/// A call's arguments validated against the module's stored `:parameters` schema in one call
/// (`schema::validate_call`: strict mode's nulls dropped): `{:ok, args}`, the failures (one
/// with keyword `"schema"` when it does not compile), or `:miss` (nothing stored for this
/// version: the caller compiles and stores it).
fn validate<'a>(
    env: rustler::Env<'a>,
    module: Atom,
    md5: &[u8],
    args: Term<'a>,
    dirty: bool,
) -> Result<Term<'a>> {
    match cached(module, atoms::parameters(), md5) {
        None => Err(Error::Miss),
        Some(Err(message)) => Err(Error::Invalid(vec![Failure {
            path: String::new(),
            keyword: "schema".into(),
            message,
            schema_path: String::new(),
        }])),
        Some(Ok(schema)) => schema::validate_call(env, &schema, args, dirty),
    }
}

#[rustler::nif]
fn module_validate<'a>(
    env: rustler::Env<'a>,
    module: Atom,
    md5: Binary<'a>,
    args: Term<'a>,
) -> Result<Term<'a>> {
    validate(env, module, md5.as_slice(), args, false)
}

#[rustler::nif(schedule = "DirtyCpu")]
fn module_validate_dirty<'a>(
    env: rustler::Env<'a>,
    module: Atom,
    md5: Binary<'a>,
    args: Term<'a>,
) -> Result<Term<'a>> {
    validate(env, module, md5.as_slice(), args, true)
}
