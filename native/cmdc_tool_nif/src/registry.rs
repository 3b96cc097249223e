//! NIFs for the tool registry: a resource holding `cmdc_tool_core::registry::Registry` behind a
//! `RwLock`, read and written by many processes at once, plus the registry's one cache of
//! provider output (`cmdc_tool_core::providers::cache`). Lookups run on normal schedulers (a hash
//! lookup); work that grows with the registry (suggestions over thousands of names, builds)
//! answers `:yield` or runs on a dirty scheduler.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use cmdc_tool_core::providers::cache::{self, OutputCache};
use cmdc_tool_core::providers::{self, Listed, Output};
use cmdc_tool_core::registry::{self as core, Entry};
use once_cell::sync::OnceCell;
use rustler::{Atom, Binary, Encoder, Env, ResourceArc, Term};
use serde_json::Value;

use crate::atoms;
use crate::error::{Error, Result};
use crate::schema::{self, Args, Schema};
use crate::search;
use crate::term::{self, Budget};
use crate::twins::twin_nifs;

/// Registries larger than this compute "did you mean" on a dirty scheduler.
const NORMAL_SUGGEST_NAMES: usize = 1_000;

type Core = core::Registry<Atom, ResourceArc<Schema>>;

/// One built tools list (JSON text and `{tools, warnings}` as external term format), handed
/// out as resource binaries: a cached call copies nothing.
pub struct Built(Output);

#[rustler::resource_impl]
impl rustler::Resource for Built {}

impl Built {
    /// `{json, term_etf}`, both binaries over this resource's bytes.
    fn encode<'a>(this: &ResourceArc<Built>, env: Env<'a>) -> Term<'a> {
        let json = this.make_binary(env, |b| &b.0.json);
        let term = this.make_binary(env, |b| &b.0.term);
        (json, term).encode(env)
    }
}

pub struct Registry {
    id: u64,
    state: RwLock<Core>,
    /// The one cache of provider output, cleared whenever the set of tools changes.
    output: RwLock<OutputCache<ResourceArc<Built>>>,
    /// The tool search index, updated with every change to the set of tools (`search.rs`).
    pub(crate) search: search::Live,
}

#[rustler::resource_impl]
impl rustler::Resource for Registry {}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);
static DEFAULT: OnceCell<ResourceArc<Registry>> = OnceCell::new();

impl Registry {
    fn new(reserved: Vec<String>) -> Self {
        Registry {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            state: RwLock::new(Core::new(reserved)),
            output: RwLock::new(OutputCache::default()),
            search: search::Live::default(),
        }
    }

    fn read(&self) -> RwLockReadGuard<'_, Core> {
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Core> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }

    /// After a write: the one rule of the output cache (a new generation drops every list).
    /// Called with the state's write lock held, so no list of the old state is stored after.
    fn changed(&self, state: &Core) {
        self.output
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .changed(state.generation());
    }
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

#[rustler::nif]
fn registry_info(reg: ResourceArc<Registry>) -> (u64, usize, Vec<String>) {
    let state = reg.read();
    let mut reserved: Vec<String> = state.reserved().iter().cloned().collect();
    reserved.sort();
    (state.generation(), state.len(), reserved)
}

// ---------------------------------------------------------------------------------------------
// Writes

type Incoming = (
    Atom,
    String,
    String,
    bool,
    ResourceArc<Schema>,
    search::Meta,
);

fn entries(batch: Vec<Incoming>) -> Vec<Entry<Atom, ResourceArc<Schema>>> {
    batch
        .into_iter()
        .map(|(module, name, description, contextual, schema, _)| Entry {
            name,
            module,
            description,
            contextual,
            schema,
        })
        .collect()
}

/// Registers (`replace = false`) or swaps in (`replace = true`) a batch, all or none. Entries
/// are `{module, name, description, contextual, schema, search_meta}` prepared by
/// `CMDC.Tool.Registry`; the search index follows in the same write (`search.rs`).
#[rustler::nif(schedule = "DirtyCpu")]
fn registry_register(
    reg: ResourceArc<Registry>,
    batch: Vec<Incoming>,
    replace: bool,
) -> Result<u64> {
    let prepared: Vec<_> = batch
        .iter()
        .map(|(_, name, description, _, schema, meta)| {
            search::prepare(name, description, schema, meta)
        })
        .collect();
    let batch = entries(batch);
    // Everything that does not depend on the registered names is done under a read lock, so
    // readers on normal schedulers never wait for more than the final insert or swap.
    if replace {
        let set = reg.read().prepare_set(batch)?;
        let mut index = search::build(prepared);
        let mut state = reg.write();
        let old = state.apply_set(set);
        reg.changed(&state);
        let generation = state.generation();
        index.generation = generation;
        std::mem::swap(&mut *search::lock_for(&reg.search, generation), &mut index);
        drop(state);
        drop((old, index));
        Ok(generation)
    } else {
        reg.read().check_batch(&batch)?;
        let mut state = reg.write();
        state.register_checked(batch)?;
        reg.changed(&state);
        let generation = state.generation();
        let index = search::lock_for(&reg.search, generation);
        drop(state);
        search::insert(index, prepared);
        Ok(generation)
    }
}

#[rustler::nif]
fn registry_unregister(reg: ResourceArc<Registry>, name: Binary) -> Result<u64> {
    let name = as_str(&name);
    let mut state = reg.write();
    if !state.unregister(name) {
        return Err(not_found(name));
    }
    reg.changed(&state);
    search::lock_for(&reg.search, state.generation()).remove(name);
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
        Some(bytes) => crate::term::binary(env, bytes),
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

twin_nifs! {
    fn registry_fetch / registry_fetch_dirty(reg: ResourceArc<Registry>, name: Binary) -> (Result<Atom>),
    |dirty| { fetch(&reg, as_str(&name), dirty) }
}

twin_nifs! {
    /// `{:ok, {generation, [{name, score}]}}`, best first (`search.rs`); `{:error, :yield}`
    /// over the budget or while a registration writes the index.
    fn registry_search / registry_search_dirty<'a>(
        reg: ResourceArc<Registry>,
        text: Binary<'a>,
        opts: Term<'a>,
    ) -> (Result<(u64, Vec<(String, f64)>)>),
    |dirty| { search::search(&reg.search, text.as_slice(), opts, dirty) }
}

twin_nifs! {
    /// `{:ok, tools_with_a_vector}` after setting `[{name, f32_bytes}]` (`clear`: every vector
    /// forgotten first); `{:error, :yield}` for a long list or while a registration writes.
    fn registry_set_vectors / registry_set_vectors_dirty<'a>(
        reg: ResourceArc<Registry>,
        vectors: Vec<(Binary<'a>, Binary<'a>)>,
        clear: bool,
    ) -> (Result<usize>),
    |dirty| { search::set_vectors(&reg.search, vectors, clear, dirty) }
}

twin_nifs! {
    /// `{:ok, [{name, passage}]}`: at most `max` tools without a vector, with the text to embed.
    fn registry_missing_vectors / registry_missing_vectors_dirty(
        reg: ResourceArc<Registry>,
        max: usize,
    ) -> (Result<Vec<(String, String)>>),
    |dirty| { search::missing(&reg.search, max, dirty) }
}

/// `{tools, tools_with_a_vector, dimension, vector_bytes}` of the search index.
#[rustler::nif]
fn registry_vector_info(reg: ResourceArc<Registry>) -> (usize, usize, usize, usize) {
    search::vector_info(&reg.search)
}

/// Lists of more tools than this are built on a dirty scheduler: a normal scheduler then spends
/// at most some tens of µs on one (the switch costs a few µs, small beside a longer list).
const LIST_ON_NORMAL: usize = 2_000;

twin_nifs! {
    /// Modules in registration order, or `{:error, :yield}` for a list too long for a normal
    /// scheduler.
    fn registry_list / registry_list_dirty<'a>(env: Env, reg: ResourceArc<Registry>) -> (Term<'a>),
    |dirty| { list(env, &reg, dirty) }
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
/// Dirty: it reads every entry, and it runs only before a (dirty) build of a tools list.
#[rustler::nif(schedule = "DirtyCpu")]
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

twin_nifs! {
    fn registry_validate / registry_validate_dirty<'a>(
        env: Env,
        reg: ResourceArc<Registry>,
        name: Binary<'a>,
        args: Term<'a>,
    ) -> (Result<(Atom, Term<'a>, Term<'a>)>),
    |dirty| { call(env, &reg, as_str(&name), Args::Term(args), dirty) }
}

twin_nifs! {
    fn registry_validate_json / registry_validate_json_dirty<'a>(
        env: Env,
        reg: ResourceArc<Registry>,
        name: Binary<'a>,
        text: Binary<'a>,
    ) -> (Result<(Atom, Term<'a>, Term<'a>)>),
    |dirty| { call(env, &reg, as_str(&name), Args::Text(text.as_slice()), dirty) }
}

// ---------------------------------------------------------------------------------------------
// Provider output: the registry's one cache

/// A cached tools list: `{:ok, {json, term_etf}}` (binaries over the cached bytes, no copy;
/// `term_etf` is `{tools, warnings}` for `:erlang.binary_to_term/1`) or `{:ok, nil}`.
#[rustler::nif]
fn registry_cached<'a>(
    env: Env<'a>,
    reg: ResourceArc<Registry>,
    format: Term<'a>,
    strict: bool,
    context_key: Binary<'a>,
) -> Result<Option<Term<'a>>> {
    let key = cache::key(
        crate::options::format(format)?,
        strict,
        context_key.as_slice(),
    );
    let built = reg
        .output
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .get(&key);
    Ok(built.map(|b| Built::encode(&b, env)))
}

/// Builds a tools list from the registry at `generation` (descriptions of context-dependent
/// tools given in `overrides`, `%{name => description}`), stores it in the registry's cache and
/// answers it as `registry_cached/4` does, or `{:error, :stale}` when the registry changed since
/// the caller read `generation` (its overrides may name other tools).
#[rustler::nif(schedule = "DirtyCpu")]
fn registry_build<'a>(
    env: Env<'a>,
    reg: ResourceArc<Registry>,
    format: Term<'a>,
    strict: bool,
    context_key: Binary<'a>,
    generation: u64,
    overrides: HashMap<String, String>,
) -> Result<Term<'a>> {
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
    // Each schema's conversion is memoized on the schema (`Schema::converted`): a new context
    // or a change to the registry converts only the tools not converted before.
    let converted: Vec<_> = entries
        .iter()
        .map(|e| e.schema.converted(&e.name, fmt, strict))
        .collect();
    let listed: Vec<Listed> = entries
        .iter()
        .zip(&converted)
        .map(|(e, c)| Listed {
            name: &e.name,
            description: overrides
                .get(&e.name)
                .map(String::as_str)
                .unwrap_or(&e.description),
            converted: c,
        })
        .collect();
    let output = providers::assemble(&listed, fmt, strict);
    let size = output.size();
    let built = ResourceArc::new(Built(output));
    let key = cache::key(fmt, strict, context_key.as_slice());
    // Not stored when the registry changed meanwhile: the cache never serves an old state.
    reg.output
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .insert(generation, key, built.clone(), size);
    Ok(Built::encode(&built, env))
}

/// One row of `cmdc_tool_core::providers::FORMATS` as Elixir reads it
/// (`CMDC.Tool.Providers.format_row/1`): every Elixir pass asks the row, never a format name.
#[derive(rustler::NifMap)]
struct FormatRow {
    format: rustler::Atom,
    strict: bool,
    envelope: rustler::Atom,
    examples_field: Option<String>,
    defer_loading: bool,
    namespaces: bool,
}

/// The provider formats, in the table's order.
#[rustler::nif]
fn providers_formats(env: Env<'_>) -> Vec<FormatRow> {
    use cmdc_tool_core::providers::Envelope;
    providers::FORMATS
        .iter()
        .filter_map(|s| {
            let envelope = match s.envelope {
                Envelope::ChatFunction => atoms::chat_function(),
                Envelope::TypedFlat => atoms::typed_flat(),
                Envelope::Flat => atoms::flat(),
                Envelope::Declarations => atoms::declarations(),
            };
            Some(FormatRow {
                format: rustler::Atom::from_str(env, s.label).ok()?,
                strict: s.strict.is_some(),
                envelope,
                examples_field: s.examples_field.map(str::to_owned),
                defer_loading: s.defer_loading,
                namespaces: s.namespaces,
            })
        })
        .collect()
}

/// Stateless conversion for a list of `{name, description, parameters}` (no cache: the modules
/// are the caller's): `{:ok, term_etf}`, `{tools, warnings}` as `registry_cached/4` gives it.
#[rustler::nif(schedule = "DirtyCpu")]
fn providers_convert<'a>(
    env: Env<'a>,
    tools: Vec<(String, String, Term<'a>)>,
    format: Term<'a>,
    strict: bool,
) -> Result<Term<'a>> {
    let fmt = crate::options::format(format)?;
    providers::check_names(tools.iter().map(|t| t.0.as_str()), fmt)?;
    let mut converted = Vec::with_capacity(tools.len());
    for (name, _, p) in &tools {
        let what = format!("tool {name:?}: parameters are not JSON");
        let params: Value =
            term::to_value(*p, &mut Budget::dirty()).map_err(|e| Error::bad_term(&what, &e))?;
        converted.push(providers::convert_parameters(name, &params, fmt, strict));
    }
    let listed: Vec<Listed> = tools
        .iter()
        .zip(&converted)
        .map(|((name, description, _), c)| Listed {
            name,
            description,
            converted: c,
        })
        .collect();
    let output = providers::assemble(&listed, fmt, strict);
    Ok(crate::term::binary(env, &output.term))
}

/// Entries and bytes in a registry's output cache (for the tests of its bound).
#[cfg(feature = "testing")]
pub fn cache_info(reg: &Registry) -> (usize, usize) {
    let cache = reg.output.read().unwrap_or_else(|e| e.into_inner());
    (cache.len(), cache.bytes())
}
