//! The `{name}.tool.json` cache next to a script: when it is current, how it is checked, and
//! how it is written (atomically, stamped with the script's version).

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::interpreter::Language;
use crate::error::{Error, Result};
use crate::fs::mtime_ns;

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

/// What identifies one version of a script's file: modification time, size, inode and
/// change time. An edit that restores the mtime (a checkout, `touch -r`, `cp -p`) still changes
/// the change time, which no user call can set, so it is never taken for the old version.
pub fn stamp(meta: &fs::Metadata) -> String {
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
    /// The script changed after the cache was written.
    Stale,
    /// The cache file is unreadable or not a valid description: rebuild it.
    Corrupt(String),
}

/// Reads the cache of `script`. A cache this library wrote records the script's [`stamp`]
/// (`scriptStamp`) and is current while the script still has exactly that stamp (so a script
/// restored to an older time, given one in the future, or edited with its mtime kept, is
/// re-read). A cache without that field (written by another tool, e.g. sy-f-misc) is current
/// while the file is not older than the script.
pub fn read_cache(script: &Path) -> Result<Cached> {
    let kind = Language::of(script)?;
    let script_meta = fs::metadata(script).map_err(|e| unreadable(script, &e))?;
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
    let cache_mtime = cache_meta.modified().map_err(|e| Error::io(&cache, &e))?;
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
    let script_mtime = script_meta.modified().map_err(|e| unreadable(script, &e))?;
    let current = match doc.get("scriptStamp").and_then(Value::as_str) {
        Some(recorded) => recorded == stamp(&script_meta),
        // A cache without our stamp (written by another tool) is current while the file is not
        // older than the script.
        None => cache_mtime >= script_mtime,
    };
    if !current {
        return Ok(Cached::Stale);
    }
    match String::from_utf8(text) {
        Ok(text) => Ok(Cached::Fresh(text)),
        Err(_) => Ok(Cached::Corrupt("not UTF-8".into())),
    }
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

/// Writes the cache of `script` from a freshly parsed description (JSON text), recording the
/// script's modification time and its path relative to the cache (the file name). Returns the
/// document as written. The write goes through a temporary file and a rename.
pub fn write_cache(script: &Path, description: &[u8]) -> Result<String> {
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
    let meta = fs::metadata(script).map_err(|e| unreadable(script, &e))?;
    if let Some(obj) = doc.as_object_mut() {
        let file = script
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        obj.insert("scriptPath".into(), Value::String(file));
        obj.insert("scriptStamp".into(), Value::String(stamp(&meta)));
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
        assert_eq!(read_cache(&script).unwrap(), Cached::Missing);

        let written = write_cache(&script, DOC.as_bytes()).unwrap();
        assert!(written.contains("\"scriptPath\": \"w.py\""));
        match read_cache(&script).unwrap() {
            Cached::Fresh(text) => {
                let v: Value = serde_json::from_str(&text).unwrap();
                assert_eq!(v["tools"][0]["function"]["name"], "f");
                let abs: Value = serde_json::from_str(&with_paths(&text, &script)).unwrap();
                assert_eq!(abs["scriptPath"], script.to_string_lossy().as_ref());
            }
            other => panic!("expected a fresh cache, got {other:?}"),
        }

        // the script is edited after the cache was written
        std::thread::sleep(Duration::from_millis(20));
        fs::write(&script, "def f(): return 1\n").unwrap();
        assert_eq!(read_cache(&script).unwrap(), Cached::Stale);

        // a broken cache is never trusted
        write_cache(&script, DOC.as_bytes()).unwrap();
        fs::write(cache_path(&script), "{\"type\": \"PythonModule\", ").unwrap();
        assert!(
            matches!(read_cache(&script).unwrap(), Cached::Corrupt(m) if m.contains("not JSON"))
        );
        fs::write(cache_path(&script), r#"{"type":"PythonModule","name":"w"}"#).unwrap();
        assert!(matches!(read_cache(&script).unwrap(), Cached::Corrupt(m) if m.contains("tools")));
        fs::write(
            cache_path(&script),
            DOC.replace("PythonModule", "PowerShellModule"),
        )
        .unwrap();
        assert!(matches!(read_cache(&script).unwrap(), Cached::Corrupt(m) if m.contains("type")));

        // a cache written by another tool (no scriptMtimeNs) is trusted by file times
        fs::write(cache_path(&script), DOC).unwrap();
        assert!(matches!(read_cache(&script).unwrap(), Cached::Fresh(_)));
        let future = SystemTime::now() + Duration::from_secs(3600);
        let set_mtime = |p: &Path, t: SystemTime| {
            fs::File::options()
                .write(true)
                .open(p)
                .unwrap()
                .set_modified(t)
                .unwrap()
        };
        set_mtime(&script, future);
        assert_eq!(read_cache(&script).unwrap(), Cached::Stale);

        // ours records the script's time: a script dated in the future still hits
        write_cache(&script, DOC.as_bytes()).unwrap();
        assert!(matches!(read_cache(&script).unwrap(), Cached::Fresh(_)));

        // a script restored to an older time than recorded is re-read
        write_cache(&script, DOC.as_bytes()).unwrap();
        let old = SystemTime::now() - Duration::from_secs(3600);
        fs::File::options()
            .write(true)
            .open(&script)
            .unwrap()
            .set_modified(old)
            .unwrap();
        assert_eq!(read_cache(&script).unwrap(), Cached::Stale);

        let err = write_cache(&script, b"[1]").unwrap_err();
        assert!(
            matches!(&err, Error::Json(m) if m.contains("not a JSON object")),
            "{err:?}"
        );
        let err = read_cache(&dir.join("missing.py")).unwrap_err();
        assert!(
            matches!(&err, Error::Invalid(m) if m.starts_with("cannot read the script")),
            "{err:?}"
        );
    }

    #[test]
    fn an_edit_that_keeps_the_mtime_and_size_is_seen() {
        let dir = crate::scripts::test_dir("cache_same_mtime");
        let script = dir.join("w.py");
        fs::write(&script, "def f(): return 1\n").unwrap();
        write_cache(&script, DOC.as_bytes()).unwrap();
        assert!(matches!(read_cache(&script).unwrap(), Cached::Fresh(_)));
        let before = fs::metadata(&script).unwrap().modified().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        fs::write(&script, "def f(): return 2\n").unwrap(); // same size
        fs::File::options()
            .write(true)
            .open(&script)
            .unwrap()
            .set_modified(before)
            .unwrap();
        assert_eq!(fs::metadata(&script).unwrap().modified().unwrap(), before);
        assert_eq!(read_cache(&script).unwrap(), Cached::Stale);
    }
}
