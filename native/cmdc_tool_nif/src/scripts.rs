//! NIFs for script tools: term conversion and scheduling only. The workers, pools, protocol
//! and cache live in `cmdc_tool_core::scripts`; these functions turn options from terms, start
//! the core's futures on the NIF's tokio runtime and send their answers as messages.
//!
//! * `script_load/2` reads script descriptions (`{:cmdc_script, handle, {:loaded, items}}`).
//! * `script_call/4` runs one call (`{:cmdc_script, handle, {:progress, json}}` any number of
//!   times, then `{:cmdc_script, handle, {:ok, json, os_pid}}` or `{..., {:error, %{kind,
//!   message, log}}}`). A time-out, `script_cancel/1` or the death of the calling process drops
//!   the call, and with it the worker's whole process tree.
//!
//! Every NIF here returns at once; results arrive from runtime threads via
//! `OwnedEnv::send_and_clear`, never from a scheduler.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use cmdc_tool_core::scripts::{
    language::Describer,
    languages,
    load::{self, Loaded},
    pool, powershell, Language, Settings,
};
use rustler::{Binary, Encoder, Env, LocalPid, NifMap, OwnedEnv, ResourceArc, Term};
use tokio::sync::oneshot;

use crate::atoms;
use crate::error::{Error, Result};
use crate::options::{self, Options};
use crate::term::binary;

// ------------------------------------------------------------------------------------------------
// call handles

/// One pending call or load: the message tag the caller matches on, and the way to cancel it.
/// The caller is monitored: when it exits, its call is cancelled and the worker killed.
pub struct Handle {
    cancel: Mutex<Option<oneshot::Sender<&'static str>>>,
}

#[rustler::resource_impl]
impl rustler::Resource for Handle {
    const IMPLEMENTS_DOWN: bool = true;

    fn down<'a>(&'a self, _env: Env<'a>, _pid: LocalPid, _monitor: rustler::Monitor) {
        self.fire("the calling process exited");
    }
}

impl Handle {
    fn fire(&self, reason: &'static str) -> bool {
        match self.cancel.lock().ok().and_then(|mut c| c.take()) {
            Some(tx) => tx.send(reason).is_ok(),
            None => false,
        }
    }
}

fn new_handle(env: Env, pid: &LocalPid) -> (ResourceArc<Handle>, oneshot::Receiver<&'static str>) {
    let (tx, rx) = oneshot::channel();
    let handle = ResourceArc::new(Handle {
        cancel: Mutex::new(Some(tx)),
    });
    let _ = handle.monitor(Some(env), pid);
    (handle, rx)
}

/// Sends `{:cmdc_script, handle, event}` to `pid`.
struct Reply {
    env: OwnedEnv,
    pid: LocalPid,
    handle: ResourceArc<Handle>,
}

impl Reply {
    fn send<F>(&mut self, event: F)
    where
        F: for<'a> FnOnce(Env<'a>) -> Term<'a>,
    {
        let handle = self.handle.clone();
        let _ = self.env.send_and_clear(&self.pid, move |env| {
            (atoms::cmdc_script(), handle, event(env)).encode(env)
        });
    }
}

// ------------------------------------------------------------------------------------------------
// options

#[derive(NifMap)]
pub struct CallOpts {
    /// Each language's settings (`%{"python" => %{"worker" => path, ...}}`): the core's
    /// `Settings`, read only by that language.
    pub languages: HashMap<String, HashMap<String, String>>,
    pub timeout_ms: u64,
    /// Workers per script at most (calls beyond wait for one).
    pub max_workers: u64,
    /// The caller's PATH (`System.get_env("PATH")`): where python3 and pwsh are looked for, and
    /// the PATH workers get.
    pub path_env: Option<String>,
    /// `[{name, value}]` set for the call's processes on top of the VM's environment (the
    /// `CMDC_MCP_SERVER` marker: `System.put_env/2` does not reach native spawns).
    pub env: Vec<(String, String)>,
    /// An idle worker older than this is stopped (the next call starts a fresh one).
    pub idle_timeout_ms: u64,
}

impl Options<'_> for CallOpts {
    const NIF: &'static str = "script_call";
    const EXPECTED: &'static str = "languages (a map of string to a map of strings), path_env \
        (string or nil), env (list of {name, value} strings), timeout_ms, max_workers, \
        idle_timeout_ms (non-negative integers)";
}

#[derive(NifMap)]
pub struct LoadOpts {
    /// As in [`CallOpts`].
    pub languages: HashMap<String, HashMap<String, String>>,
    /// Time limit for reading one script.
    pub describe_timeout_ms: u64,
    /// `false`: ignore and do not write `{name}.tool.json`.
    pub cache: bool,
    /// The user's key for cache tags (text); empty: no cache is read or written.
    pub cache_key: String,
    pub path_env: Option<String>,
}

impl Options<'_> for LoadOpts {
    const NIF: &'static str = "script_load";
    const EXPECTED: &'static str = "languages (a map of string to a map of strings), cache_key \
        (string), path_env (string or nil), describe_timeout_ms (non-negative integer) and \
        cache (boolean)";
}

impl From<CallOpts> for pool::CallOpts {
    fn from(o: CallOpts) -> Self {
        pool::CallOpts {
            settings: Settings(o.languages),
            timeout: Duration::from_millis(o.timeout_ms),
            max_workers: o.max_workers as usize,
            path_env: o.path_env,
            env: o.env,
            idle_timeout: Duration::from_millis(o.idle_timeout_ms),
        }
    }
}

impl From<LoadOpts> for load::LoadOpts {
    fn from(o: LoadOpts) -> Self {
        load::LoadOpts {
            settings: Settings(o.languages),
            describe_timeout: Duration::from_millis(o.describe_timeout_ms),
            cache: o.cache,
            key: o.cache_key.into_bytes(),
            path_env: o.path_env,
        }
    }
}

// ------------------------------------------------------------------------------------------------
// NIFs

#[rustler::nif]
fn script_call<'a>(
    env: Env<'a>,
    path: String,
    function: String,
    args_json: Binary<'a>,
    opts: Term<'a>,
) -> Result<ResourceArc<Handle>> {
    let opts = pool::CallOpts::from(options::decode::<CallOpts>(opts)?);
    let rt = crate::runtime::get()?;
    let pid = env.pid();
    let (handle, cancel) = new_handle(env, &pid);
    let args = args_json.as_slice().to_vec();
    let mut reply = Reply {
        env: OwnedEnv::new(),
        pid,
        handle: handle.clone(),
    };
    rt.spawn(async move {
        let cancel = async { cancel.await.unwrap_or("cancelled") };
        let path = PathBuf::from(path);
        let on_progress = |payload: Vec<u8>| {
            reply.send(move |env| (atoms::progress(), binary(env, &payload)).encode(env))
        };
        let answer = pool::call(&path, &function, &args, &opts, cancel, on_progress).await;
        match answer {
            Ok((payload, os_pid)) => {
                reply.send(move |env| (atoms::ok(), binary(env, &payload), os_pid).encode(env))
            }
            Err(e) => reply.send(move |env| Error::from(e).to_tuple(env)),
        }
    });
    Ok(handle)
}

/// One script language as Elixir reads it (`CMDC.Tool.Script.languages/0`): what the CLI,
/// `doctor` and approval messages say about its tools comes from here, not from Elixir.
#[derive(NifMap)]
struct LanguageInfo {
    name: String,
    label: String,
    extensions: Vec<String>,
    program: String,
    allow_hint: String,
    native_describer: bool,
}

/// Every script language, in the order messages name them (`scripts::languages::ALL`).
#[rustler::nif]
fn script_languages() -> Vec<LanguageInfo> {
    languages::ALL
        .iter()
        .map(|l| LanguageInfo {
            name: l.name().to_owned(),
            label: l.label().to_owned(),
            extensions: l.extensions().iter().map(|e| (*e).to_owned()).collect(),
            program: l.program().to_owned(),
            allow_hint: l.allow_hint().to_owned(),
            native_describer: matches!(l.describer(), Describer::Native(_)),
        })
        .collect()
}

#[rustler::nif]
fn script_cancel(handle: ResourceArc<Handle>) -> rustler::Atom {
    if handle.fire("cancelled by the caller") {
        atoms::ok()
    } else {
        atoms::not_running()
    }
}

/// `[{path, idle_worker_os_pids}]`: the warm workers (for tests and introspection).
#[rustler::nif]
fn script_workers() -> Vec<(String, Vec<u32>)> {
    pool::workers()
}

/// Stops the idle workers of one script (`nil`: of every script); busy ones finish their call
/// and are not reused. Returns how many were stopped.
#[rustler::nif]
fn script_stop(path: Option<String>) -> usize {
    pool::stop(path.as_deref())
}

/// Starts reading the scripts' descriptions: `{:ok, handle}`, then the message
/// `{:cmdc_script, handle, {:loaded, [{path, {:ok, {status, json, language}} | {:error, message}}]}}`,
/// `language` (`:python`, `:powershell`) being the one the native side read the script as.
#[rustler::nif(schedule = "DirtyCpu")]
fn script_load<'a>(
    env: Env<'a>,
    paths: Vec<String>,
    opts: Term<'a>,
) -> Result<ResourceArc<Handle>> {
    let opts = load::LoadOpts::from(options::decode::<LoadOpts>(opts)?);
    let rt = crate::runtime::get()?;
    let pid = env.pid();
    let (handle, _cancel) = new_handle(env, &pid);
    let mut reply = Reply {
        env: OwnedEnv::new(),
        pid,
        handle: handle.clone(),
    };
    rt.spawn(async move {
        let results = load::load(paths, opts).await;
        reply.send(move |env| {
            let items: Vec<Term> = results
                .into_iter()
                .map(|(path, r)| {
                    let r = match r {
                        Loaded::Ok(status, text) => languages::of(Path::new(&path))
                            .map_err(Error::from)
                            .and_then(|language| {
                                Ok((
                                    status,
                                    binary(env, text.as_bytes()),
                                    language_atom(env, language)?,
                                ))
                            }),
                        Loaded::Err(e) => Err(Error::from(e)),
                    };
                    (path, r).encode(env)
                })
                .collect();
            (atoms::loaded(), items).encode(env)
        });
    });
    Ok(handle)
}

/// `(status, why, detail)` of `load::cache_status`.
type CacheStatus = (&'static str, &'static str, Option<String>);

/// What loading each script now would make of its cache (`load::cache_status`, the loader's
/// own rule), without describing or writing anything: `[{path, {:ok, {status, why, detail}} |
/// {:error, message}}]`. File reads and hashing: a dirty I/O scheduler.
#[rustler::nif(schedule = "DirtyIo")]
fn script_cache_status(
    paths: Vec<String>,
    cache: bool,
    cache_key: String,
) -> Vec<(String, Result<CacheStatus>)> {
    paths
        .into_iter()
        .map(|path| {
            let status = load::cache_status(Path::new(&path), cache, cache_key.as_bytes());
            (path, status.map_err(Error::from))
        })
        .collect()
}

/// Describes a PowerShell script's source natively (no file, no cache): JSON text.
#[rustler::nif(schedule = "DirtyCpu")]
fn script_describe_powershell(source: String, path: String) -> String {
    serde_json::to_string(&powershell::describe(&source, &path)).unwrap_or_default()
}

/// A script language as the atom Elixir reads (`CMDC.Tool.Script`'s `kind`): its name, so a
/// new language needs no atom here.
fn language_atom(env: Env, language: &dyn Language) -> Result<rustler::Atom> {
    rustler::Atom::from_str(env, language.name())
        .map_err(|_| Error::Message(format!("no atom for language {}", language.name())))
}
