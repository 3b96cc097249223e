//! Reading script descriptions: the `{name}.tool.json` cache when it is current, else the
//! script's language reads it (`Language::describer`): natively (PowerShell), or by a describer
//! process (Python's worker in `describe` mode: one process per interpreter for many scripts,
//! a time limit per script); the cache is rewritten.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use tokio::io::AsyncWriteExt;

use super::cache::{self, Cached};
use super::language::{Describer, Language, Mode, Program, Settings};
use super::languages;
use super::protocol::{self, read_frame};
use super::worker::{spawn, Worker};
use crate::error::{Error, Result};

/// How long an interpreter may take to start a describer.
const STARTUP_LIMIT: Duration = Duration::from_secs(60);

#[derive(Debug, Clone)]
pub struct LoadOpts {
    /// Each language's settings (Python: `worker`, `interpreter`).
    pub settings: Settings,
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
    /// Why the cache was not used (for `cache_status`).
    why: &'static str,
    detail: Option<String>,
}

/// The one rule deciding what the cache gives a script (the loader's, and `cache_status`'s).
fn cache_pass(path: &Path, use_cache: bool, key: &[u8]) -> Result<Pass> {
    let stamp = cache::script_stamp(path)?;
    let read = |status, why, untrusted, detail| {
        Ok(Pass::Read(Reading {
            status,
            stamp: stamp.clone(),
            untrusted,
            why,
            detail,
        }))
    };
    if !use_cache || key.is_empty() {
        return read("parsed", "off", None, None);
    }
    match cache::read_cache(path, &stamp, key)? {
        Cached::Fresh(text) => Ok(Pass::Fresh(text)),
        Cached::Missing => read("parsed", "missing", None, None),
        Cached::Stale => read("stale", "stale", None, None),
        Cached::Untrusted(doc, why) => read("rebuilt", "untrusted", Some(doc), Some(why)),
        Cached::Corrupt(why) => read("rebuilt", "corrupt", None, Some(why)),
    }
}

/// What loading `path` now would make of its cache, without reading the script's functions
/// or writing anything: `(status, why, detail)` where `status` is the one `load` would report
/// (`cached | parsed | stale | rebuilt`), `why` the cache's state (`fresh | off | missing |
/// stale | untrusted | corrupt`) and `detail` the reason an untrusted or corrupt cache is not
/// used. The same rule as the loader's ([`cache_pass`]): `mix cmdc.tools doctor` asks this.
pub fn cache_status(
    path: &Path,
    use_cache: bool,
    key: &[u8],
) -> Result<(&'static str, &'static str, Option<String>)> {
    languages::of(path)?;
    Ok(match cache_pass(path, use_cache, key)? {
        Pass::Fresh(_) => ("cached", "fresh", None),
        Pass::Read(r) => (r.status, r.why, r.detail),
    })
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
async fn start_describer(
    program: &Program,
    label: &str,
    dir: &Path,
    opts: &LoadOpts,
) -> Result<Worker> {
    // A describer reads scripts with `ast` and never runs them: no caller variables to pass.
    let mut w = spawn(program, dir, opts.path_env.as_deref(), &[]).await?;
    match tokio::time::timeout(STARTUP_LIMIT, read_frame(&mut w.stdout)).await {
        Ok(Ok(Some((protocol::READY, _)))) => Ok(w),
        _ => {
            let status = w.exit_status().await;
            let tail = w.final_tail().await;
            Err(Error::Process(format!(
                "the {label} describer did not start ({status}): {tail}"
            )))
        }
    }
}

/// Reads scripts with one describer process per program (a Python interpreter); a script that
/// takes longer than the limit kills the describer, which restarts for the rest.
async fn describe_by_process(todo: Pending, opts: &LoadOpts, results: &mut [Option<Loaded>]) {
    let mut groups: HashMap<Program, Pending> = HashMap::new();
    for (i, path, reading, lang) in todo {
        let command = lang.command(
            Mode::Describe,
            &path,
            &opts.settings,
            opts.path_env.as_deref(),
        );
        match command.await {
            Ok(program) => groups
                .entry(program)
                .or_default()
                .push((i, path, reading, lang)),
            Err(e) => results[i] = Some(Loaded::Err(e)),
        }
    }
    for (program, items) in groups {
        describe_group(&program, items, opts, results).await;
    }
}

/// The scripts of one describer program, in turn.
async fn describe_group(
    program: &Program,
    items: Pending,
    opts: &LoadOpts,
    results: &mut [Option<Loaded>],
) {
    let limit = opts.describe_timeout.max(Duration::from_millis(1));
    let mut describer: Option<Worker> = None;
    for (i, path, reading, lang) in items {
        let w = match describer.as_mut() {
            Some(w) => w,
            None => {
                let dir = path.parent().unwrap_or(Path::new("."));
                match start_describer(program, lang.label(), dir, opts).await {
                    Ok(w) => describer.insert(w),
                    Err(e) => {
                        results[i] = Some(Loaded::Err(e));
                        continue;
                    }
                }
            }
        };
        let frame = protocol::encode_frame(protocol::DESCRIBE, path.to_string_lossy().as_bytes());
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
                tokio::task::spawn_blocking(move || store(&p, &payload, reading, (use_cache, &key)))
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
                    "the {} describer exited while reading the script ({status}): {tail}",
                    lang.label()
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

/// Scripts still to describe by a process: `(index, path, reading, language)`.
type Pending = Vec<(usize, PathBuf, Reading, &'static dyn Language)>;

/// The cache pass and the native readings, for every path: file work (run it off the async
/// threads). Returns the results so far and the scripts still to describe by a process.
fn scan(paths: &[String], use_cache: bool, key: &[u8]) -> (Vec<Option<Loaded>>, Pending) {
    let mut results: Vec<Option<Loaded>> = (0..paths.len()).map(|_| None).collect();
    let mut pending = Vec::new();
    for (i, p) in paths.iter().enumerate() {
        let path = PathBuf::from(p);
        let lang = match languages::of(&path) {
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
        match lang.describer() {
            Describer::Process => pending.push((i, path, reading, lang)),
            Describer::Native(describe) => {
                results[i] = Some(match std::fs::read(&path) {
                    Ok(bytes) => {
                        let source = String::from_utf8_lossy(&bytes);
                        let source = source.trim_start_matches('\u{feff}');
                        let doc = describe(source, &path.to_string_lossy());
                        let text = serde_json::to_vec(&doc).unwrap_or_default();
                        store(&path, &text, reading, (use_cache, key))
                    }
                    Err(e) => Loaded::Err(cache::unreadable(&path, &e)),
                });
            }
        }
    }
    (results, pending)
}

/// Reads every script in `paths`; one broken script never affects the others.
pub async fn load(paths: Vec<String>, opts: LoadOpts) -> Vec<(String, Loaded)> {
    let use_cache = opts.cache;
    let key = opts.key.clone();
    let scan_paths = paths.clone();
    let scanned = tokio::task::spawn_blocking(move || scan(&scan_paths, use_cache, &key)).await;
    let (mut results, pending) = match scanned {
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
    if !pending.is_empty() {
        describe_by_process(pending, &opts, &mut results).await;
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    const DOC: &str = r#"{"type":"PythonModule","name":"w","tools":[{"type":"function",
        "function":{"name":"f","description":"d","parameters":{"type":"object"}}}],"rulePrompt":"r"}"#;
    const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";

    #[test]
    fn cache_status_is_the_loaders_rule() {
        let dir = crate::scripts::test_dir("cache_status");
        let script = dir.join("w.py");
        fs::write(&script, "def f(): pass\n").unwrap();
        assert_eq!(
            cache_status(&script, true, KEY).unwrap(),
            ("parsed", "missing", None)
        );
        assert_eq!(
            cache_status(&script, false, KEY).unwrap(),
            ("parsed", "off", None)
        );

        let stamp = cache::script_stamp(&script).unwrap();
        cache::write_cache(&script, &stamp, DOC.as_bytes(), KEY).unwrap();
        assert_eq!(
            cache_status(&script, true, KEY).unwrap(),
            ("cached", "fresh", None)
        );
        // another user's key: not this loader's cache
        let (status, why, detail) = cache_status(&script, true, b"another key").unwrap();
        assert_eq!((status, why), ("rebuilt", "untrusted"));
        assert!(detail.unwrap().contains("not this user's"));

        fs::write(&script, "def f(): return 1\n").unwrap();
        assert_eq!(
            cache_status(&script, true, KEY).unwrap(),
            ("stale", "stale", None)
        );
        fs::write(cache::cache_path(&script), "{broken").unwrap();
        let (status, why, _) = cache_status(&script, true, KEY).unwrap();
        assert_eq!((status, why), ("rebuilt", "corrupt"));

        assert!(cache_status(&dir.join("gone.py"), true, KEY).is_err());
        assert!(cache_status(&dir.join("notes.txt"), true, KEY).is_err());
    }
}
