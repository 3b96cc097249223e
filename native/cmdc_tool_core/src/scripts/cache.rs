//! The `{name}.tool.json` cache next to a script: when it is current, how it is checked, and
//! how it is written (atomically, stamped with the script's version).

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::interpreter::Language;
use super::stamp::{self, Digest};
use crate::error::{Error, Result};
use crate::fs::mtime_ns;
use crate::permissions::{Policy, ResultApproval};

/// The error for a script that cannot be read (missing, unreadable).
pub(super) fn unreadable(script: &Path, e: &std::io::Error) -> Error {
    Error::Invalid(format!("cannot read the script {}: {e}", script.display()))
}

/// `{dir}/{stem}.tool.json` for a script `{dir}/{stem}.{ext}`.
pub fn cache_path(script: &Path) -> PathBuf {
    let stem = script
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    script.with_file_name(format!("{stem}.tool.json"))
}

/// What identifies one version of a script's file for the worker pools (a new version starts
/// new workers): modification time, size, inode and change time. An edit that restores the
/// mtime (a checkout, `touch -r`, `cp -p`) still changes the change time, which no user call
/// can set, so it is never taken for the old version. (The cache uses a content hash instead:
/// see [`read_cache`].)
pub fn file_version(meta: &fs::Metadata) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        format!(
            "{}:{}:{}:{}.{}",
            mtime_ns(meta),
            meta.size(),
            meta.ino(),
            meta.ctime(),
            meta.ctime_nsec()
        )
    }
    #[cfg(not(unix))]
    {
        format!("{}:{}", mtime_ns(meta), meta.len())
    }
}

/// What the cache says about a script.
#[derive(Debug, PartialEq)]
pub enum Cached {
    /// The cache is current: its document (a JSON object, as text).
    Fresh(String),
    /// No cache file yet.
    Missing,
    /// A cache this user's key tagged, for an older version of the script.
    Stale,
    /// A description without a valid tag (written by another tool such as sy-f-misc, shipped
    /// in a repository, or edited by hand): never the script's word. The script is read again;
    /// the document (parsed) may only make the fresh description stricter (see [`tighten`]).
    Untrusted(Value, String),
    /// The cache file is unreadable or not a valid description: rebuild it.
    Corrupt(String),
}

/// A cache larger than this is not read (a description of thousands of tools is a few MiB).
pub const MAX_CACHE_BYTES: u64 = 16 * 1024 * 1024;

/// The content hash of the script as it is now (`sha256:…`, what `scriptStamp` records), read
/// in pieces. A regular file only: a FIFO would block the read forever.
pub fn script_stamp(script: &Path) -> Result<String> {
    use std::io::Read;
    let meta = fs::metadata(script).map_err(|e| unreadable(script, &e))?;
    if !meta.is_file() {
        return Err(Error::Invalid(format!(
            "cannot read the script {}: not a regular file",
            script.display()
        )));
    }
    let mut file = fs::File::open(script).map_err(|e| unreadable(script, &e))?;
    let mut hash = stamp::Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => hash.update(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(unreadable(script, &e)),
        }
    }
    Ok(format!("sha256:{}", stamp::hex(&hash.finalize())))
}

/// Reads the cache of `script`, whose content hash is `current` ([`script_stamp`]). It is
/// current only when its `cacheTag` is valid under `key` (so this user's loader wrote it) and
/// its `scriptStamp` is `current`. File times play no part: a fresh `git clone` gives a script
/// and a crafted cache the same mtime.
pub fn read_cache(script: &Path, current: &str, key: &[u8]) -> Result<Cached> {
    let kind = Language::of(script)?;
    let cache = cache_path(script);
    let cache_meta = match fs::metadata(&cache) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Cached::Missing),
        Err(e) => return Ok(Cached::Corrupt(format!("cannot stat: {e}"))),
    };
    if !cache_meta.is_file() {
        // A FIFO would block the read forever; a device could act on being opened.
        return Ok(Cached::Corrupt("not a regular file; not opened".into()));
    }
    if cache_meta.len() > MAX_CACHE_BYTES {
        return Ok(Cached::Corrupt(format!(
            "larger than {} MiB; not read",
            MAX_CACHE_BYTES >> 20
        )));
    }
    let text = match fs::read(&cache) {
        Ok(bytes) => bytes,
        Err(e) => return Ok(Cached::Corrupt(format!("cannot read: {e}"))),
    };
    let doc: Value = match serde_json::from_slice(&text) {
        Ok(doc) => doc,
        Err(e) => return Ok(Cached::Corrupt(format!("not JSON: {e}"))),
    };
    if let Err(why) = check_document(&doc, kind) {
        return Ok(Cached::Corrupt(why.to_string()));
    }
    let tagged = match doc.get("cacheTag").and_then(Value::as_str) {
        Some(t) if !key.is_empty() => stamp::same_tag(t, &stamp::tag(key, &doc)),
        _ => false,
    };
    if !tagged {
        let why = if doc.get("cacheTag").is_some() {
            "its cacheTag is not this user's"
        } else {
            "it has no cacheTag"
        };
        return Ok(Cached::Untrusted(doc, why.into()));
    }
    let recorded = doc.get("scriptStamp").and_then(Value::as_str);
    if recorded != Some(current) {
        return Ok(Cached::Stale);
    }
    match String::from_utf8(text) {
        Ok(text) => Ok(Cached::Fresh(text)),
        Err(_) => Ok(Cached::Corrupt("not UTF-8".into())),
    }
}

/// The canonical (policy, result approval) of a normalized tool entry.
fn permissions_of(tool: &Value) -> Option<(Policy, ResultApproval)> {
    let p = tool.get("permissions")?;
    let policy = [
        Policy::Auto,
        Policy::AskOnce,
        Policy::AskAlways,
        Policy::Deny,
    ]
    .into_iter()
    .find(|x| p.get("executionPolicy").and_then(Value::as_str) == Some(x.as_str()))?;
    let result = [
        ResultApproval::Never,
        ResultApproval::OnError,
        ResultApproval::Always,
    ]
    .into_iter()
    .find(|x| p.get("resultApprovalPolicy").and_then(Value::as_str) == Some(x.as_str()))?;
    Some((policy, result))
}

fn tool_name(tool: &Value) -> Option<&str> {
    tool.get("function")?.get("name")?.as_str()
}

/// Lets an untrusted cache (both documents normalized) only make the script's fresh
/// description stricter: for a tool in both, the stricter policy and result approval win;
/// a tool the cache lists and the script does not define is left out. Returns warnings
/// naming what was kept out, which the caller adds to the description.
pub fn tighten(fresh: &mut Value, untrusted: &Value, file: &str) -> Vec<String> {
    let mut warnings = Vec::new();
    let old: Vec<&Value> = untrusted
        .get("tools")
        .and_then(Value::as_array)
        .map(|t| t.iter().collect())
        .unwrap_or_default();
    let Some(tools) = fresh.get_mut("tools").and_then(Value::as_array_mut) else {
        return warnings;
    };
    let names: Vec<String> = tools
        .iter()
        .filter_map(|t| tool_name(t).map(str::to_owned))
        .collect();
    for gone in old.iter().filter_map(|t| tool_name(t)) {
        if !names.iter().any(|n| n == gone) {
            warnings.push(format!(
                "{file}: the cached description lists a tool {gone:?} that the script does \
                 not define; not offered"
            ));
        }
    }
    for tool in tools.iter_mut() {
        let Some(name) = tool_name(tool).map(str::to_owned) else {
            continue;
        };
        let Some(cached) = old.iter().find(|t| tool_name(t) == Some(name.as_str())) else {
            continue;
        };
        let (Some((p, r)), Some((cp, cr))) = (permissions_of(tool), permissions_of(cached)) else {
            continue;
        };
        if cp > p || cr > r {
            let (p, r) = (p.max(cp), r.max(cr));
            tool["permissions"] = serde_json::json!({
                "executionPolicy": p.as_str(),
                "resultApprovalPolicy": r.as_str(),
            });
            warnings.push(format!(
                "{file}: {name}: the cached description is stricter than the script; kept \
                 ({} / {})",
                p.as_str(),
                r.as_str()
            ));
        }
    }
    warnings
}

/// Checks that a document has the shape a script description must have: an [`Error::Json`]
/// says what is missing (the reason a cache is rebuilt).
pub fn check_document(doc: &Value, kind: Language) -> Result<()> {
    let bad = |why: String| Error::Json(why);
    let obj = doc
        .as_object()
        .ok_or_else(|| bad("the document is not a JSON object".into()))?;
    match obj.get("type").and_then(Value::as_str) {
        Some(t) if t == kind.module_type() => {}
        Some(t) => {
            return Err(bad(format!(
                "type is {t:?}, expected {:?}",
                kind.module_type()
            )))
        }
        None => return Err(bad("no \"type\" field".into())),
    }
    if !obj.get("name").is_some_and(Value::is_string) {
        return Err(bad("no \"name\" string".into()));
    }
    let tools = obj
        .get("tools")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("no \"tools\" array".into()))?;
    for (i, tool) in tools.iter().enumerate() {
        let function = tool
            .get("function")
            .and_then(Value::as_object)
            .ok_or_else(|| bad(format!("tools[{i}] has no \"function\" object")))?;
        if !function.get("name").is_some_and(Value::is_string) {
            return Err(bad(format!("tools[{i}].function has no \"name\"")));
        }
        if !function.get("parameters").is_some_and(Value::is_object) {
            return Err(bad(format!(
                "tools[{i}].function has no \"parameters\" object"
            )));
        }
    }
    if let Some(p) = obj.get("rulePrompt") {
        if !p.is_string() && !p.is_null() {
            return Err(bad("\"rulePrompt\" is not a string".into()));
        }
    }
    Ok(())
}

/// Writes the cache of `script` from a freshly read description (JSON text): records the
/// script's file name, `script_stamp` (the hash of the version that was read, taken before
/// reading it) and the tag under `key`. Returns the document as written. The write goes
/// through a temporary file and a rename.
pub fn write_cache(
    script: &Path,
    script_stamp: &str,
    description: &[u8],
    key: &[u8],
) -> Result<String> {
    let kind = Language::of(script)?;
    let mut doc: Value = serde_json::from_slice(description).map_err(|e| {
        Error::Json(format!(
            "the description of {} is not JSON: {e}",
            script.display()
        ))
    })?;
    check_document(&doc, kind).map_err(|why| {
        Error::Json(format!(
            "the description of {} is not a script description: {why}",
            script.display()
        ))
    })?;
    if key.is_empty() {
        return Err(Error::Invalid(
            "no cache key: the cache is not written".into(),
        ));
    }
    if let Some(obj) = doc.as_object_mut() {
        let file = script
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        obj.insert("scriptPath".into(), Value::String(file));
        obj.insert("scriptStamp".into(), Value::String(script_stamp.to_owned()));
        obj.remove("cacheTag");
    }
    let tag = stamp::tag(key, &doc);
    if let Some(obj) = doc.as_object_mut() {
        obj.insert("cacheTag".into(), Value::String(tag));
    }
    let text = serde_json::to_string_pretty(&doc).expect("a JSON value always serializes");
    let cache = cache_path(script);
    let tmp = cache.with_extension(format!("json.tmp{}", std::process::id()));
    let written = fs::write(&tmp, text.as_bytes()).and_then(|()| fs::rename(&tmp, &cache));
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        // A read-only folder still gets its tools; it only loses the cache.
        return Err(Error::io(&cache, &e));
    }
    Ok(text)
}

/// The description with `scriptPath` (and the absolute path) set for the caller.
pub fn with_paths(text: &str, script: &Path) -> String {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(mut obj)) => {
            obj.insert(
                "scriptPath".into(),
                Value::String(script.to_string_lossy().into_owned()),
            );
            serde_json::to_string(&Value::Object(obj)).unwrap_or_else(|_| text.to_owned())
        }
        _ => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, SystemTime};

    const DOC: &str = r#"{"type":"PythonModule","name":"w","tools":[{"type":"function",
        "function":{"name":"f","description":"d","parameters":{"type":"object"}}}],"rulePrompt":"r"}"#;
    const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";

    fn read(script: &Path) -> Cached {
        read_cache(script, &script_stamp(script).unwrap(), KEY).unwrap()
    }

    fn write(script: &Path, doc: &str) -> String {
        write_cache(script, &script_stamp(script).unwrap(), doc.as_bytes(), KEY).unwrap()
    }

    fn set_mtime(p: &Path, t: SystemTime) {
        fs::File::options()
            .write(true)
            .open(p)
            .unwrap()
            .set_modified(t)
            .unwrap()
    }

    #[test]
    fn cache_paths() {
        assert_eq!(
            cache_path(Path::new("/x/tools.py")),
            PathBuf::from("/x/tools.tool.json")
        );
    }

    #[test]
    fn cache_miss_hit_stale_corrupt() {
        let dir = crate::scripts::test_dir("cache");
        let script = dir.join("w.py");
        fs::write(&script, "def f(): pass\n").unwrap();
        assert_eq!(read(&script), Cached::Missing);

        let written = write(&script, DOC);
        assert!(written.contains("\"scriptPath\": \"w.py\""));
        assert!(written.contains("\"scriptStamp\": \"sha256:"));
        assert!(written.contains("\"cacheTag\": \"hmac-sha256:"));
        match read(&script) {
            Cached::Fresh(text) => {
                let v: Value = serde_json::from_str(&text).unwrap();
                assert_eq!(v["tools"][0]["function"]["name"], "f");
                let abs: Value = serde_json::from_str(&with_paths(&text, &script)).unwrap();
                assert_eq!(abs["scriptPath"], script.to_string_lossy().as_ref());
            }
            other => panic!("expected a fresh cache, got {other:?}"),
        }

        // file times play no part: a script dated in the future or the past still hits
        set_mtime(&script, SystemTime::now() + Duration::from_secs(3600));
        assert!(matches!(read(&script), Cached::Fresh(_)));
        set_mtime(&script, SystemTime::now() - Duration::from_secs(3600));
        assert!(matches!(read(&script), Cached::Fresh(_)));

        // the script is edited after the cache was written (the cache is newer: still stale)
        fs::write(&script, "def f(): return 1\n").unwrap();
        set_mtime(
            &cache_path(&script),
            SystemTime::now() + Duration::from_secs(3600),
        );
        assert_eq!(read(&script), Cached::Stale);

        // a broken cache is never trusted
        write(&script, DOC);
        fs::write(cache_path(&script), "{\"type\": \"PythonModule\", ").unwrap();
        assert!(matches!(read(&script), Cached::Corrupt(m) if m.contains("not JSON")));
        fs::write(cache_path(&script), r#"{"type":"PythonModule","name":"w"}"#).unwrap();
        assert!(matches!(read(&script), Cached::Corrupt(m) if m.contains("tools")));
        fs::write(
            cache_path(&script),
            DOC.replace("PythonModule", "PowerShellModule"),
        )
        .unwrap();
        assert!(matches!(read(&script), Cached::Corrupt(m) if m.contains("type")));
        let big = fs::File::create(cache_path(&script)).unwrap();
        big.set_len(MAX_CACHE_BYTES + 1).unwrap();
        assert!(matches!(read(&script), Cached::Corrupt(m) if m.contains("MiB")));
        // the stamp is the content hash, read in pieces
        assert_eq!(
            script_stamp(&script).unwrap(),
            stamp::script_stamp(&fs::read(&script).unwrap())
        );

        let err = write_cache(&script, "sha256:x", b"[1]", KEY).unwrap_err();
        assert!(
            matches!(&err, Error::Json(m) if m.contains("not a JSON object")),
            "{err:?}"
        );
        let err = script_stamp(&dir.join("missing.py")).unwrap_err();
        assert!(
            matches!(&err, Error::Invalid(m) if m.starts_with("cannot read the script")),
            "{err:?}"
        );
        let err = script_stamp(&dir).unwrap_err();
        assert!(
            matches!(&err, Error::Invalid(m) if m.contains("not a regular file")),
            "{err:?}"
        );
    }

    #[test]
    fn a_cache_without_this_users_tag_is_never_the_scripts_word() {
        let dir = crate::scripts::test_dir("cache_untrusted");
        let script = dir.join("w.py");
        fs::write(&script, "def f(): pass\n").unwrap();
        let cache = cache_path(&script);

        // written by another tool (sy-f-misc), or shipped in a repository, newer than the
        // script: untrusted whatever its time
        fs::write(&cache, DOC).unwrap();
        set_mtime(&cache, SystemTime::now() + Duration::from_secs(3600));
        assert!(matches!(read(&script), Cached::Untrusted(_, why) if why.contains("no cacheTag")));

        // a crafted stamp: the right content hash, a tag made without the key
        let mut forged: Value = serde_json::from_str(DOC).unwrap();
        forged["scriptStamp"] = script_stamp(&script).unwrap().into();
        forged["cacheTag"] = stamp::tag(b"someone else's key", &forged).into();
        fs::write(&cache, forged.to_string()).unwrap();
        assert!(
            matches!(read(&script), Cached::Untrusted(_, why) if why.contains("not this user's"))
        );

        // ours, then edited by hand (a tool added, a permission loosened): the tag breaks
        let ours = write(&script, DOC);
        let mut edited: Value = serde_json::from_str(&ours).unwrap();
        edited["tools"][0]["function"]["name"] = "system".into();
        fs::write(&cache, edited.to_string()).unwrap();
        assert!(matches!(read(&script), Cached::Untrusted(..)));
        fs::write(&cache, &ours).unwrap();
        assert!(matches!(read(&script), Cached::Fresh(_)));

        // no key: nothing is trusted, nothing written
        let current = script_stamp(&script).unwrap();
        assert!(matches!(
            read_cache(&script, &current, b"").unwrap(),
            Cached::Untrusted(..)
        ));
        assert!(write_cache(&script, &current, DOC.as_bytes(), b"").is_err());
    }

    #[test]
    fn an_edit_that_keeps_the_mtime_and_size_is_seen() {
        let dir = crate::scripts::test_dir("cache_same_mtime");
        let script = dir.join("w.py");
        fs::write(&script, "def f(): return 1\n").unwrap();
        write(&script, DOC);
        assert!(matches!(read(&script), Cached::Fresh(_)));
        let before = fs::metadata(&script).unwrap().modified().unwrap();
        fs::write(&script, "def f(): return 2\n").unwrap(); // same size
        set_mtime(&script, before);
        assert_eq!(fs::metadata(&script).unwrap().modified().unwrap(), before);
        assert_eq!(read(&script), Cached::Stale);
    }

    fn tools(spec: &[(&str, &str, &str)]) -> Value {
        let tools: Vec<Value> = spec
            .iter()
            .map(|(name, policy, result)| {
                serde_json::json!({"type": "function",
                    "function": {"name": name, "parameters": {"type": "object"}},
                    "permissions": {"executionPolicy": policy, "resultApprovalPolicy": result}})
            })
            .collect();
        serde_json::json!({"type": "PythonModule", "name": "w", "tools": tools})
    }

    #[test]
    fn an_untrusted_cache_only_tightens() {
        let mut fresh = tools(&[
            ("wipe", "deny", "never"),
            ("rotate_keys", "ask-always", "never"),
            ("read", "ask-once", "never"),
            ("list", "auto", "never"),
        ]);
        let cached = tools(&[
            ("wipe", "auto", "never"),
            ("rotate_keys", "auto", "always"),
            ("read", "ask-always", "never"),
            ("system", "auto", "never"),
        ]);
        let warnings = tighten(&mut fresh, &cached, "ops.py");
        let got: Vec<(String, String, String)> = fresh["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                let p = &t["permissions"];
                (
                    t["function"]["name"].as_str().unwrap().into(),
                    p["executionPolicy"].as_str().unwrap().into(),
                    p["resultApprovalPolicy"].as_str().unwrap().into(),
                )
            })
            .collect();
        let want = [
            ("wipe", "deny", "never"),
            ("rotate_keys", "ask-always", "always"),
            ("read", "ask-always", "never"),
            ("list", "auto", "never"),
        ];
        assert_eq!(
            got,
            want.map(|(a, b, c)| (a.to_owned(), b.to_owned(), c.to_owned()))
        );
        assert_eq!(warnings.len(), 3, "{warnings:?}");
        assert!(warnings
            .iter()
            .any(|w| w.contains("\"system\"") && w.contains("not offered")));
        assert!(warnings
            .iter()
            .any(|w| w.contains("rotate_keys") && w.contains("stricter")));
    }
}
