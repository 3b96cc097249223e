//! One compiled schema per tool module version, for every path that validates a tool module's
//! arguments or output: `CMDC.Tool.validate/2` on a module, `CMDC.Tool.Registry` (which
//! registers the very same resource), the runner, the MCP server and structured output.
//! Keyed by module and kind (`:parameters` or `:output`); an entry is valid for one module MD5,
//! so a reloaded module is compiled again (the one invalidation rule). Compilation is the
//! Elixir side's (`CMDC.Tool.Schema.for_module/1`): it calls the module, then stores here.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{OnceLock, RwLock};

use cmdc_tool_core::schema::Failures;
use rustler::{Atom, Binary, Env, ResourceArc, Term};

use crate::atoms;
use crate::error::{Error, Result};
use crate::schema::{self, Args, Schema};
use crate::twins::twin_nifs;

/// A compiled schema, or the message of why the module's schema does not compile.
type Compiled = std::result::Result<ResourceArc<Schema>, String>;

/// `(module, kind)` as atom terms (atoms are never freed, so their terms are stable keys).
type Key = (rustler::sys::ErlNifTerm, rustler::sys::ErlNifTerm);

/// `(module, kind) → (module MD5, compiled)`.
type Cache = RwLock<HashMap<Key, (Vec<u8>, Compiled), BuildHasherDefault<WordHasher>>>;

/// The keys are atom terms, distinct words already: a multiply-rotate mix of them is hash
/// enough, where SipHash would be a quarter of a lookup's cost on the validation path.
#[derive(Default)]
struct WordHasher(u64);

impl Hasher for WordHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        bytes.iter().for_each(|b| self.write_usize(*b as usize));
    }

    fn write_usize(&mut self, n: usize) {
        self.0 = (self.0.rotate_left(29) ^ n as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

fn cache() -> &'static Cache {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

fn key(module: Atom, kind: Atom) -> Key {
    (module.as_c_arg(), kind.as_c_arg())
}

/// `f` of what is stored for this version of the module, under the read lock (no copy).
fn with_cached<R>(
    module: Atom,
    kind: Atom,
    md5: &[u8],
    f: impl FnOnce(Option<&Compiled>) -> R,
) -> R {
    let cache = cache().read().unwrap_or_else(|e| e.into_inner());
    match cache.get(&key(module, kind)) {
        Some((stored, compiled)) if stored == md5 => f(Some(compiled)),
        _ => f(None),
    }
}

/// `{:ok, schema}`, `{:error, message}` (it does not compile), or `nil` when this version of
/// the module has nothing stored.
#[rustler::nif]
fn module_schema(module: Atom, kind: Atom, md5: Binary) -> Option<Compiled> {
    with_cached(module, kind, md5.as_slice(), |c| c.cloned())
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

/// Forgets what is stored for these modules, every kind, and answers how many entries went:
/// a freed MCP tool slot (`CMDC.Tool.MCP.Slots`) keeps no validator. Dirty: the last reference
/// to a compiled schema frees it here, work that grows with the list.
#[rustler::nif(schedule = "DirtyCpu")]
fn module_schema_drop(modules: Vec<Atom>) -> usize {
    let gone: HashSet<rustler::sys::ErlNifTerm> = modules.iter().map(|m| m.as_c_arg()).collect();
    let mut cache = cache().write().unwrap_or_else(|e| e.into_inner());
    let before = cache.len();
    cache.retain(|(module, _), _| !gone.contains(module));
    before - cache.len()
}

/// A call's arguments validated against the module's stored `:parameters` schema in one call
/// (`schema::validate_call`: strict mode's nulls dropped; JSON text decoded first): `{:ok, args}`,
/// the failures (one with keyword `"schema"` when it does not compile), or `:miss` (nothing
/// stored for this version: the caller compiles and stores it).
fn validate<'a>(
    env: Env<'a>,
    module: Atom,
    md5: &[u8],
    args: Args<'a>,
    dirty: bool,
) -> Result<Term<'a>> {
    with_cached(
        module,
        atoms::parameters(),
        md5,
        |compiled| match compiled {
            None => Err(Error::Miss),
            Some(Err(message)) => Err(Error::Invalid(Failures::one("", "schema", message, ""))),
            Some(Ok(schema)) => schema::validate_args(env, schema, args, dirty),
        },
    )
}

twin_nifs! {
    fn module_validate / module_validate_dirty<'a>(
        env: Env,
        module: Atom,
        md5: Binary<'a>,
        args: Term<'a>,
    ) -> (Result<Term<'a>>),
    |dirty| { validate(env, module, md5.as_slice(), Args::Term(args), dirty) }
}

twin_nifs! {
    fn module_validate_json / module_validate_json_dirty<'a>(
        env: Env,
        module: Atom,
        md5: Binary<'a>,
        text: Binary<'a>,
    ) -> (Result<Term<'a>>),
    |dirty| { validate(env, module, md5.as_slice(), Args::Text(text.as_slice()), dirty) }
}
