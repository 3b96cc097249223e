//! Reading script descriptions: the `{name}.tool.json` cache when it is current, else the
//! Python worker's `describe` mode (one interpreter for many scripts, a time limit per script)
//! or the native PowerShell reader; the cache is rewritten.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use tokio::io::AsyncWriteExt;

use super::cache::{self, Cached};
use super::interpreter::{self, Language};
use super::powershell;
use super::protocol::{self, read_frame};
use super::worker::{spawn_python, Worker};
use crate::error::{Error, Result};

/// How long an interpreter may take to start a describer.
const STARTUP_LIMIT: Duration = Duration::from_secs(60);

#[derive(Debug, Clone)]
pub struct LoadOpts {
    pub worker: String,
    pub python: Option<String>,
    /// Time limit for reading one script.
    pub describe_timeout: Duration,
    /// `false`: ignore and do not write `{name}.tool.json`.
    pub cache: bool,
    /// The user's key for cache tags (see `stamp`): empty, no cache is read or written.
    pub key: Vec<u8>,
    pub path_env: Option<String>,
}

/// One script's description: `Ok(status, json_text)` with status `cached | parsed | stale |
/// rebuilt`, or why it could not be read.
#[derive(Debug)]
pub enum Loaded {
    Ok(&'static str, String),
    Err(Error),
}

/// What the cache gives a script: its current description, or the reading to do.
enum Pass {
    Fresh(String),
    Read(Reading),
}

/// A script to read: the cache status to report, the script's content hash taken before
/// reading it (what the new cache records), and an untrusted cache that may only tighten the
/// result.
struct Reading {
    status: &'static str,
    stamp: String,
    untrusted: Option<Value>,
}

fn cache_pass(path: &Path, use_cache: bool, key: &[u8]) -> Result<Pass> {
    let stamp = cache::script_stamp(path)?;
    let read = |status, untrusted| {
        Ok(Pass::Read(Reading {
            status,
            stamp: stamp.clone(),
            untrusted,
        }))
    };
    if !use_cache || key.is_empty() {
        return read("parsed", None);
    }
    match cache::read_cache(path, &stamp, key)? {
        Cached::Fresh(text) => Ok(Pass::Fresh(text)),
        Cached::Missing => read("parsed", None),
        Cached::Stale => read("stale", None),
        Cached::Untrusted(doc, _) => read("rebuilt", Some(doc)),
        Cached::Corrupt(_) => read("rebuilt", None),
    }
}

/// A description with its permissions normalized (every spelling, fail-safe: see
/// `crate::permissions`): the one place every loaded description passes, fresh or cached,
/// ours or sy-f-misc's. An untrusted cache (normalized the same way) may then only make it
/// stricter, and its tools the script does not define are left out, with a warning.
fn normalized(path: &Path, description: &[u8], untrusted: Option<Value>) -> Vec<u8> {
    match serde_json::from_slice::<Value>(description) {
        Ok(mut doc) => {
            let file = super::worker::file_name(path);
            crate::permissions::normalize_document(&mut doc, &file);
            if let Some(mut old) = untrusted {
                crate::permissions::normalize_document(&mut old, &file);
                let warnings = cache::tighten(&mut doc, &old, &file);
                add_warnings(&mut doc, warnings);
            }
            serde_json::to_vec(&doc).unwrap_or_else(|_| description.to_vec())
        }
        Err(_) => description.to_vec(),
    }
}

fn add_warnings(doc: &mut Value, warnings: Vec<String>) {
    if warnings.is_empty() {
        return;
    }
    if let Some(obj) = doc.as_object_mut() {
        let list = obj
            .entry("warnings")
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(list) = list {
            list.extend(warnings.into_iter().map(Value::String));
        }
    }
}

/// Writes the cache (when enabled) and answers the description. The caller knows the script's
/// absolute path, so `scriptPath` is left as written (relative in the cache).
fn store(path: &Path, description: &[u8], reading: Reading, opts: (bool, &[u8])) -> Loaded {
    let (use_cache, key) = opts;
    let status = reading.status;
    let description = &normalized(path, description, reading.untrusted)[..];
    if use_cache && !key.is_empty() {
        if let Ok(text) = cache::write_cache(path, &reading.stamp, description, key) {
            return Loaded::Ok(status, text);
        }
    }
    match std::str::from_utf8(description) {
        Ok(text) => Loaded::Ok(status, text.to_owned()),
        Err(_) => Loaded::Err(Error::Json(format!(
            "the description of {} is not UTF-8",
            path.display()
        ))),
    }
}

/// Starts a describer and waits for it to be ready (interpreter start-up is not a script's time).
async fn start_describer(interp: &Path, dir: &Path, opts: &LoadOpts) -> Result<Worker> {
    let describe = [OsStr::new("describe")];
    let mut w = spawn_python(
        interp,
        &opts.worker,
        &describe,
        dir,
        opts.path_env.as_deref(),
        // A describer reads scripts with `ast` and never runs them: nothing to mark.
        &[],
    )
    .await?;
    match tokio::time::timeout(STARTUP_LIMIT, read_frame(&mut w.stdout)).await {
        Ok(Ok(Some((protocol::READY, _)))) => Ok(w),
        _ => {
            let status = w.exit_status().await;
            let tail = w.final_tail().await;
            Err(Error::Process(format!(
                "the Python describer did not start ({status}): {tail}"
            )))
        }
    }
}

/// Reads Python scripts with one describer per interpreter; a script that takes longer than the
/// limit kills the describer, which restarts for the rest.
async fn describe_python(todo: Pending, opts: &LoadOpts, results: &mut [Option<Loaded>]) {
    let mut groups: HashMap<PathBuf, Pending> = HashMap::new();
    for (i, path, reading) in todo {
        let dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
        match interpreter::python_for(&dir, opts.python.as_deref(), opts.path_env.as_deref()).await
        {
            Ok(interp) => groups.entry(interp).or_default().push((i, path, reading)),
            Err(e) => results[i] = Some(Loaded::Err(e)),
        }
    }
    let limit = opts.describe_timeout.max(Duration::from_millis(1));
    for (interp, items) in groups {
        let mut describer: Option<Worker> = None;
        for (i, path, reading) in items {
            let w = match describer.as_mut() {
                Some(w) => w,
                None => {
                    let dir = path.parent().unwrap_or(Path::new("."));
                    match start_describer(&interp, dir, opts).await {
                        Ok(w) => describer.insert(w),
                        Err(e) => {
                            results[i] = Some(Loaded::Err(e));
                            continue;
                        }
                    }
                }
            };
            let frame =
                protocol::encode_frame(protocol::DESCRIBE, path.to_string_lossy().as_bytes());
            let exchange = async {
                let sent = async {
                    w.stdin.write_all(&frame).await?;
                    w.stdin.flush().await
                };
                sent.await
                    .map_err(|e| Error::Process(format!("the frame channel broke: {e}")))?;
                read_frame(&mut w.stdout).await
            };
            let answer = tokio::time::timeout(limit, exchange).await;
            results[i] = Some(match answer {
                Ok(Ok(Some((protocol::DESCRIBED, payload)))) => {
                    let use_cache = opts.cache;
                    let key = opts.key.clone();
                    let p = path.clone();
                    tokio::task::spawn_blocking(move || {
                        store(&p, &payload, reading, (use_cache, &key))
                    })
                    .await
                    .unwrap_or_else(|_| {
                        Loaded::Err(Error::Process("writing the cache failed".into()))
                    })
                }
                // The script's source is what failed (a syntax error): its message.
                Ok(Ok(Some((protocol::ERROR, payload)))) => Loaded::Err(Error::Invalid(
                    protocol::error_from_payload(&payload).to_string(),
                )),
                Ok(Ok(_)) | Ok(Err(_)) => {
                    let status = w.exit_status().await;
                    let tail = w.final_tail().await;
                    describer = None;
                    Loaded::Err(Error::Process(format!(
                        "the Python describer exited while reading the script ({status}): {tail}"
                    )))
                }
                Err(_) => {
                    describer = None; // dropping it kills it
                    Loaded::Err(Error::Process(format!(
                        "reading the script took longer than {} ms",
                        limit.as_millis()
                    )))
                }
            });
        }
    }
}

/// Python scripts still to describe: `(index, path, reading)`.
type Pending = Vec<(usize, PathBuf, Reading)>;

/// The cache pass and the PowerShell reading, for every path: file work (run it off the async
/// threads). Returns the results so far and the Python scripts still to describe.
fn scan(paths: &[String], use_cache: bool, key: &[u8]) -> (Vec<Option<Loaded>>, Pending) {
    let mut results: Vec<Option<Loaded>> = (0..paths.len()).map(|_| None).collect();
    let mut python = Vec::new();
    for (i, p) in paths.iter().enumerate() {
        let path = PathBuf::from(p);
        let kind = match Language::of(&path) {
            Ok(k) => k,
            Err(e) => {
                results[i] = Some(Loaded::Err(e));
                continue;
            }
        };
        let reading = match cache_pass(&path, use_cache, key) {
            Ok(Pass::Fresh(text)) => {
                let text =
                    String::from_utf8(normalized(&path, text.as_bytes(), None)).unwrap_or(text);
                results[i] = Some(Loaded::Ok("cached", text));
                continue;
            }
            Ok(Pass::Read(reading)) => reading,
            Err(e) => {
                results[i] = Some(Loaded::Err(e));
                continue;
            }
        };
        match kind {
            Language::Python => python.push((i, path, reading)),
            Language::PowerShell => {
                results[i] = Some(match std::fs::read(&path) {
                    Ok(bytes) => {
                        let source = String::from_utf8_lossy(&bytes);
                        let source = source.trim_start_matches('\u{feff}');
                        let doc = powershell::describe(source, &path.to_string_lossy());
                        let text = serde_json::to_vec(&doc).unwrap_or_default();
                        store(&path, &text, reading, (use_cache, key))
                    }
                    Err(e) => Loaded::Err(cache::unreadable(&path, &e)),
                });
            }
        }
    }
    (results, python)
}

/// Reads every script in `paths`; one broken script never affects the others.
pub async fn load(paths: Vec<String>, opts: LoadOpts) -> Vec<(String, Loaded)> {
    let use_cache = opts.cache;
    let key = opts.key.clone();
    let scan_paths = paths.clone();
    let scanned = tokio::task::spawn_blocking(move || scan(&scan_paths, use_cache, &key)).await;
    let (mut results, python) = match scanned {
        Ok(x) => x,
        Err(_) => {
            return paths
                .into_iter()
                .map(|p| {
                    (
                        p,
                        Loaded::Err(Error::Process("the cache scan failed".into())),
                    )
                })
                .collect()
        }
    };
    if !python.is_empty() {
        describe_python(python, &opts, &mut results).await;
    }
    paths
        .into_iter()
        .zip(results)
        .map(|(p, r)| {
            let unread = || Loaded::Err(Error::Process("the script was not read".into()));
            (p, r.unwrap_or_else(unread))
        })
        .collect()
}
