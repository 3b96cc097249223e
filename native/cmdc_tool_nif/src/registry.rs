//! NIFs for the tool registry: a resource holding `cmdc_tool_core::registry::Registry` behind a
//! `RwLock`, read and written by many processes at once, plus the per-registry cache of provider
//! output (`cmdc_tool_core::providers`). Lookups run on normal schedulers (a hash lookup); work
//! that grows with the registry (suggestions over thousands of names, builds) answers `:yield`
//! or runs on a dirty scheduler.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

use cmdc_tool_core::etf;
use cmdc_tool_core::providers::{self, Format, Tool, Warning};
use cmdc_tool_core::registry::{self as core, Entry};
use once_cell::sync::{Lazy, OnceCell};
use rustler::{Atom, Binary, Encoder, Env, ResourceArc, Term};
use serde_json::Value;

use crate::atoms;
use crate::error::{Error, Result};
use crate::schema::{self, Args, Schema};
use crate::term::{self, Budget};

/// Registries larger than this compute "did you mean" on a dirty scheduler.
const NORMAL_SUGGEST_NAMES: usize = 1_000;

/// Built tools lists kept per registry (per format, strictness and context).
const MAX_CACHED: usize = 64;

type Core = core::Registry<Atom, ResourceArc<Schema>>;
type CacheKey = (Format, bool, Vec<u8>);

/// One built tools list, kept as JSON text; handed out as a resource binary (no copy).
pub struct Built {
    json: Vec<u8>,
}

#[rustler::resource_impl]
impl rustler::Resource for Built {}

#[derive(Default)]
struct Cache {
    generation: u64,
    entries: HashMap<CacheKey, ResourceArc<Built>>,
}

pub struct Registry {
    id: u64,
    /// Mirrors the core registry's generation, readable without the lock.
    generation: AtomicU64,
    state: RwLock<Core>,
    cache: Mutex<Cache>,
}

#[rustler::resource_impl]
impl rustler::Resource for Registry {}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);
/// Ids of live registries: the Elixir side drops cached terms of registries no longer here.
static LIVE: Lazy<Mutex<HashSet<u64>>> = Lazy::new(|| Mutex::new(HashSet::new()));
static DEFAULT: OnceCell<ResourceArc<Registry>> = OnceCell::new();

impl Registry {
    fn new(reserved: Vec<String>) -> Self {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        lock(&LIVE).insert(id);
        Registry {
            id,
            generation: AtomicU64::new(0),
            state: RwLock::new(Core::new(reserved)),
            cache: Mutex::new(Cache::default()),
        }
    }

    fn read(&self) -> RwLockReadGuard<'_, Core> {
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Core> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }

    /// After a write: publish the generation and drop cached output built from older state.
    fn changed(&self, state: &Core) {
        self.generation.store(state.generation(), Ordering::Release);
        let mut cache = lock(&self.cache);
        cache.generation = state.generation();
        cache.entries.clear();
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        lock(&LIVE).remove(&self.id);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Not found, without suggestions (for writes: the caller asked to change, not to call).
fn not_found(name: &str) -> Error {
    Error::NotFound {
        name: name.to_owned(),
        suggestions: Vec::new(),
    }
}

/// Not found with the nearest names ("did you mean"), or `Yield` when suggesting would take too
/// long for a normal scheduler.
fn missing(state: &Core, name: &str, dirty: bool) -> Error {
    if !dirty && state.len() > NORMAL_SUGGEST_NAMES {
        return Error::Yield;
    }
    Error::NotFound {
        name: name.to_owned(),
        suggestions: state.suggest(name),
    }
}

fn as_str<'a>(bin: &'a Binary) -> &'a str {
    // Names that are not UTF-8 are simply not found.
    std::str::from_utf8(bin.as_slice()).unwrap_or("\u{FFFD}")
}

// ---------------------------------------------------------------------------------------------
// Life cycle

#[rustler::nif]
fn registry_new(reserved: Vec<String>) -> (u64, ResourceArc<Registry>) {
    let reg = ResourceArc::new(Registry::new(reserved));
    (reg.id, reg)
}

/// The process-independent default registry: one per loaded library, created on first use.
#[rustler::nif]
fn registry_default() -> (u64, ResourceArc<Registry>) {
    let reg = DEFAULT
        .get_or_init(|| ResourceArc::new(Registry::new(Vec::new())))
        .clone();
    (reg.id, reg)
}

/// Ids of the registries still alive.
#[rustler::nif]
fn registry_live_ids() -> Vec<u64> {
    lock(&LIVE).iter().copied().collect()
}

#[rustler::nif]
fn registry_generation(reg: ResourceArc<Registry>) -> u64 {
    reg.generation.load(Ordering::Acquire)
}

#[rustler::nif]
fn registry_info(reg: ResourceArc<Registry>) -> (u64, usize, Vec<String>) {
    let state = reg.read();
    let mut reserved: Vec<String> = state.reserved().iter().cloned().collect();
    reserved.sort();
    (state.generation(), state.len(), reserved)
}

// ---------------------------------------------------------------------------------------------
// Writes

type Incoming = (Atom, String, String, bool, ResourceArc<Schema>);

fn entries(batch: Vec<Incoming>) -> Vec<Entry<Atom, ResourceArc<Schema>>> {
    batch
        .into_iter()
        .map(|(module, name, description, contextual, schema)| Entry {
            name,
            module,
            description,
            contextual,
            schema,
        })
        .collect()
}

/// Registers (`replace = false`) or swaps in (`replace = true`) a batch, all or none. Entries
/// are `{module, name, description, contextual, schema}` prepared by `CMDC.Tool.Registry`.
#[rustler::nif(schedule = "DirtyCpu")]
fn registry_register(
    reg: ResourceArc<Registry>,
    batch: Vec<Incoming>,
    replace: bool,
) -> Result<u64> {
    let batch = entries(batch);
    // Everything that does not depend on the registered names is done under a read lock, so
    // readers on normal schedulers never wait for more than the final insert or swap.
    let result = if replace {
        let prepared = reg.read().prepare_set(batch);
        prepared.map(|set| {
            let mut state = reg.write();
            let old = state.apply_set(set);
            reg.changed(&state);
            drop(state);
            drop(old);
        })
    } else {
        let checked = reg.read().check_batch(&batch);
        checked.and_then(|()| {
            let mut state = reg.write();
            let result = state.register_checked(batch);
            if result.is_ok() {
                reg.changed(&state);
            }
            result
        })
    };
    result?;
    Ok(reg.generation.load(Ordering::Acquire))
}

#[rustler::nif]
fn registry_unregister(reg: ResourceArc<Registry>, name: Binary) -> Result<u64> {
    let name = as_str(&name);
    let mut state = reg.write();
    if !state.unregister(name) {
        return Err(not_found(name));
    }
    reg.changed(&state);
    Ok(state.generation())
}

#[rustler::nif]
fn registry_put_settings(
    reg: ResourceArc<Registry>,
    name: Binary,
    settings: Binary,
) -> Result<u64> {
    let name = as_str(&name);
    let mut state = reg.write();
    if !state.put_settings(name, settings.as_slice().to_vec()) {
        return Err(not_found(name));
    }
    Ok(state.generation())
}

/// `{:ok, bytes}` (term_to_binary of the settings), `{:ok, :none}`, or not found.
#[rustler::nif]
fn registry_settings<'a>(
    env: Env<'a>,
    reg: ResourceArc<Registry>,
    name: Binary<'a>,
) -> Result<Term<'a>> {
    let name = as_str(&name);
    let state = reg.read();
    if state.get(name).is_none() {
        return Err(not_found(name));
    }
    Ok(settings_term(env, state.settings(name)))
}

/// Settings as stored (term_to_binary bytes), or `:none`.
fn settings_term<'a>(env: Env<'a>, settings: Option<&[u8]>) -> Term<'a> {
    match settings {
        Some(bytes) => crate::json::binary(env, bytes),
        None => atoms::none().encode(env),
    }
}

// ---------------------------------------------------------------------------------------------
// Reads

/// The module registered as `name`, or `nil`: a hash lookup, for `CMDC.Tool.find/2`.
#[rustler::nif]
fn registry_find(reg: ResourceArc<Registry>, name: Binary) -> Option<Atom> {
    reg.read().get(as_str(&name)).map(|e| e.module)
}

fn fetch(reg: &Registry, name: &str, dirty: bool) -> Result<Atom> {
    let state = reg.read();
    match state.get(name) {
        Some(e) => Ok(e.module),
        None => Err(missing(&state, name, dirty)),
    }
}

#[rustler::nif]
fn registry_fetch(reg: ResourceArc<Registry>, name: Binary) -> Result<Atom> {
    fetch(&reg, as_str(&name), false)
}

#[rustler::nif(schedule = "DirtyCpu")]
fn registry_fetch_dirty(reg: ResourceArc<Registry>, name: Binary) -> Result<Atom> {
    fetch(&reg, as_str(&name), true)
}

/// Lists of more tools than this are built on a dirty scheduler: a normal scheduler then spends
/// at most some tens of µs on one (the switch costs a few µs, small beside a longer list).
const LIST_ON_NORMAL: usize = 2_000;

/// Modules in registration order, or `{:error, :yield}` for a list too long for a normal
/// scheduler.
#[rustler::nif]
fn registry_list<'a>(env: Env<'a>, reg: ResourceArc<Registry>) -> Term<'a> {
    list(env, &reg, false)
}

#[rustler::nif(schedule = "DirtyCpu")]
fn registry_list_dirty<'a>(env: Env<'a>, reg: ResourceArc<Registry>) -> Term<'a> {
    list(env, &reg, true)
}

fn list<'a>(env: Env<'a>, reg: &Registry, dirty: bool) -> Term<'a> {
    let state = reg.read();
    if !dirty && state.len() > LIST_ON_NORMAL {
        return Error::Yield.to_tuple(env);
    }
    let modules: Vec<Term<'a>> = state.entries().map(|e| e.module.encode(env)).collect();
    modules.encode(env)
}

/// `{generation, [{name, module}]}` of the tools whose description depends on the context.
#[rustler::nif]
fn registry_contextual<'a>(env: Env<'a>, reg: ResourceArc<Registry>) -> Term<'a> {
    let state = reg.read();
    let list: Vec<Term<'a>> = state
        .entries()
        .filter(|e| e.contextual)
        .map(|e| (e.name.as_str(), e.module).encode(env))
        .collect();
    (state.generation(), list).encode(env)
}

/// The registered names nearest to `name` (dirty: it reads every name).
#[rustler::nif(schedule = "DirtyCpu")]
fn registry_suggest(reg: ResourceArc<Registry>, name: String) -> Vec<String> {
    reg.read().suggest(&name)
}

/// Suggestions among a list of names (for `CMDC.Tool.suggest/2` on a list of modules).
#[rustler::nif(schedule = "DirtyCpu")]
fn tool_suggest(names: Vec<String>, name: String) -> Vec<String> {
    core::suggest(names.iter().map(String::as_str), &name)
}

// ---------------------------------------------------------------------------------------------
// Resolve and validate in one call

/// What a call needs of the tool `name`: its module, compiled schema and stored settings.
type CallEntry = (Atom, ResourceArc<Schema>, Option<Vec<u8>>);

fn entry(reg: &Registry, name: &str, dirty: bool) -> Result<CallEntry> {
    let state = reg.read();
    match state.get(name) {
        Some(e) => Ok((
            e.module,
            e.schema.clone(),
            state.settings(name).map(<[u8]>::to_vec),
        )),
        None => Err(missing(&state, name, dirty)),
    }
}

/// A call resolved, validated and given its settings, in one native call (`schema::validate_call`,
/// strict mode's nulls dropped): `{:ok, {module, args, settings}}` (settings as stored, or
/// `:none`), the failures, or not found. `args` is a term, or JSON text decoded first.
fn call<'a>(
    env: Env<'a>,
    reg: &Registry,
    name: &str,
    args: Args<'a>,
    dirty: bool,
) -> Result<(Atom, Term<'a>, Term<'a>)> {
    let (module, schema, settings) = entry(reg, name, dirty)?;
    let args = schema::validate_args(env, &schema, args, dirty)?;
    Ok((module, args, settings_term(env, settings.as_deref())))
}

#[rustler::nif]
fn registry_validate<'a>(
    env: Env<'a>,
    reg: ResourceArc<Registry>,
    name: Binary<'a>,
    args: Term<'a>,
) -> Result<(Atom, Term<'a>, Term<'a>)> {
    call(env, &reg, as_str(&name), Args::Term(args), false)
}

#[rustler::nif(schedule = "DirtyCpu")]
fn registry_validate_dirty<'a>(
    env: Env<'a>,
    reg: ResourceArc<Registry>,
    name: Binary<'a>,
    args: Term<'a>,
) -> Result<(Atom, Term<'a>, Term<'a>)> {
    call(env, &reg, as_str(&name), Args::Term(args), true)
}

#[rustler::nif]
fn registry_validate_json<'a>(
    env: Env<'a>,
    reg: ResourceArc<Registry>,
    name: Binary<'a>,
    text: Binary<'a>,
) -> Result<(Atom, Term<'a>, Term<'a>)> {
    call(env, &reg, as_str(&name), Args::Text(text.as_slice()), false)
}

#[rustler::nif(schedule = "DirtyCpu")]
fn registry_validate_json_dirty<'a>(
    env: Env<'a>,
    reg: ResourceArc<Registry>,
    name: Binary<'a>,
    text: Binary<'a>,
) -> Result<(Atom, Term<'a>, Term<'a>)> {
    call(env, &reg, as_str(&name), Args::Text(text.as_slice()), true)
}

// ---------------------------------------------------------------------------------------------
// Provider output, cached

pub fn warnings_term<'a>(env: Env<'a>, warnings: &[Warning]) -> Term<'a> {
    let list: Vec<Term<'a>> = warnings
        .iter()
        .map(|w| {
            crate::term::string_map(
                env,
                [
                    (atoms::tool(), w.tool.as_str()),
                    (atoms::path(), w.path.as_str()),
                    (atoms::keyword(), w.keyword.as_str()),
                    (atoms::message(), w.message.as_str()),
                ],
            )
        })
        .collect();
    list.encode(env)
}

/// The cached JSON text of a tools list: `{:ok, binary}` (a resource binary, not a copy) or
/// `{:ok, nil}`.
#[rustler::nif]
fn registry_cached_json<'a>(
    env: Env<'a>,
    reg: ResourceArc<Registry>,
    format: Term<'a>,
    strict: bool,
    context_key: Binary<'a>,
) -> Result<Option<Term<'a>>> {
    let format = crate::options::format(format)?;
    let key = (format, strict, context_key.as_slice().to_vec());
    let built = {
        let cache = lock(&reg.cache);
        if cache.generation != reg.generation.load(Ordering::Acquire) {
            None
        } else {
            cache.entries.get(&key).cloned()
        }
    };
    Ok(built.map(|b| b.make_binary(env, |b| &b.json).to_term(env)))
}

/// Builds a tools list from the registry at `generation` (descriptions of context-dependent
/// tools given in `overrides`, `%{name => description}`), caches its JSON text, and answers
/// `{:ok, {generation, tools_etf, warnings, json}}` (`tools_etf` for `:erlang.binary_to_term/1`),
/// or `{:error, :stale}` when the registry changed since the caller read `generation`.
#[rustler::nif(schedule = "DirtyCpu")]
fn registry_build<'a>(
    env: Env<'a>,
    reg: ResourceArc<Registry>,
    format: Term<'a>,
    strict: bool,
    context_key: Binary<'a>,
    generation: u64,
    overrides: HashMap<String, String>,
) -> Result<(u64, Term<'a>, Term<'a>, Term<'a>)> {
    let fmt = crate::options::format(format)?;
    // A snapshot: the lock is held only to clone the entry handles.
    let (current, entries) = {
        let state = reg.read();
        (
            state.generation(),
            state.entries().cloned().collect::<Vec<_>>(),
        )
    };
    if current != generation {
        return Err(Error::Stale);
    }
    providers::check_names(entries.iter().map(|e| e.name.as_str()), fmt)?;
    let (start, end) = providers::list_json_delimiters(fmt, entries.len());
    let mut json = Vec::with_capacity(256 * entries.len() + 32);
    json.extend_from_slice(start);
    // The term goes back as external term format: `binary_to_term/1` builds it in one
    // allocation, where building it here node by node costs several times more.
    let mut etf = Vec::with_capacity(256 * entries.len() + 32);
    providers::start_list_etf(&mut etf, fmt, entries.len());
    let mut warnings: Vec<Warning> = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let description = overrides
            .get(&e.name)
            .map(String::as_str)
            .unwrap_or(&e.description);
        // Converted parameters are cached per compiled schema: after a change to the registry
        // only the tools that changed are converted again.
        let c = e.schema.converted(&e.name, fmt, strict);
        warnings.extend(c.warnings.iter().cloned());
        if i > 0 {
            json.push(b',');
        }
        let params_json = c.parameters.as_ref().map(|_| c.json.as_slice());
        providers::write_tool_json(&mut json, fmt, strict, &e.name, description, params_json);
        let params_etf = c.parameters.as_ref().map(|_| c.etf.as_slice());
        providers::write_tool_etf(&mut etf, fmt, strict, &e.name, description, params_etf);
    }
    json.extend_from_slice(end);
    providers::end_list_etf(&mut etf, fmt, entries.len());
    let built = ResourceArc::new(Built { json });
    {
        let mut cache = lock(&reg.cache);
        if cache.generation == generation {
            // Contexts are caller data: keep the cache bounded whatever they hold.
            if cache.entries.len() >= MAX_CACHED {
                cache.entries.clear();
            }
            cache.entries.insert(
                (fmt, strict, context_key.as_slice().to_vec()),
                built.clone(),
            );
        }
    }
    Ok((
        generation,
        crate::json::binary(env, &etf),
        warnings_term(env, &warnings),
        built.make_binary(env, |b| &b.json).to_term(env),
    ))
}

/// Stateless conversion for a list of `{name, description, parameters}`:
/// `{:ok, {tools_etf, warnings}}` or `{:error, message}`.
#[rustler::nif(schedule = "DirtyCpu")]
fn providers_convert<'a>(
    env: Env<'a>,
    tools: Vec<(String, String, Term<'a>)>,
    format: Term<'a>,
    strict: bool,
) -> Result<(Term<'a>, Term<'a>)> {
    let fmt = crate::options::format(format)?;
    providers::check_names(tools.iter().map(|t| t.0.as_str()), fmt)?;
    let mut params: Vec<Value> = Vec::with_capacity(tools.len());
    for (name, _, p) in &tools {
        let what = format!("tool {name:?}: parameters are not JSON");
        params.push(
            term::to_value(*p, &mut Budget::dirty()).map_err(|e| Error::bad_term(&what, &e))?,
        );
    }
    let specs: Vec<Tool> = tools
        .iter()
        .zip(&params)
        .map(|((name, description, _), parameters)| Tool {
            name,
            description,
            parameters,
        })
        .collect();
    let (value, warnings) = providers::convert(&specs, fmt, strict);
    // As external term format, like `registry_build`: decoded in one allocation.
    let mut tools_etf = vec![etf::VERSION];
    etf::value(&mut tools_etf, &value);
    Ok((
        crate::json::binary(env, &tools_etf),
        warnings_term(env, &warnings),
    ))
}
