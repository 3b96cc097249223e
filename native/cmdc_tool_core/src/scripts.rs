//! Script tools: the pure parts. The worker protocol's frames, the choice of interpreter per
//! script folder, the `{name}.tool.json` cache next to a script, and (in [`powershell`]) the
//! native reading of PowerShell scripts. The NIF crate runs the processes; nothing here does.

pub mod powershell;

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

// ------------------------------------------------------------------------------------------------
// frames

/// Largest frame either side accepts (a result larger than this is an error, not an OOM).
pub const MAX_FRAME: usize = 256 * 1024 * 1024;

/// Frame kinds. Requests: [`DESCRIBE`] (payload: a script path), [`CALL`] (payload:
/// `{"fn": name, "args": {...}}`). Answers: [`DESCRIBED`], [`READY`], [`RESULT`], [`PROGRESS`],
/// [`ERROR`], each with a UTF-8 JSON payload.
pub const DESCRIBE: u8 = b'D';
pub const CALL: u8 = b'C';
pub const DESCRIBED: u8 = b'D';
pub const READY: u8 = b'R';
pub const RESULT: u8 = b'O';
pub const PROGRESS: u8 = b'P';
pub const ERROR: u8 = b'E';

/// One frame: a 4-byte big-endian length `N`, then `N` bytes: the kind byte and the payload.
pub fn encode_frame(kind: u8, payload: &[u8]) -> Vec<u8> {
    let len = (payload.len() + 1) as u32;
    let mut out = Vec::with_capacity(payload.len() + 5);
    out.extend_from_slice(&len.to_be_bytes());
    out.push(kind);
    out.extend_from_slice(payload);
    out
}

/// The body length announced by a frame header, checked against [`MAX_FRAME`].
pub fn frame_len(header: [u8; 4]) -> Result<usize, String> {
    let n = u32::from_be_bytes(header) as usize;
    if n == 0 {
        return Err("the worker sent an empty frame (protocol error)".into());
    }
    if n > MAX_FRAME {
        return Err(format!(
            "the worker sent a {n}-byte frame, over the {MAX_FRAME}-byte limit"
        ));
    }
    Ok(n)
}

/// Splits a frame body into its kind and payload.
pub fn split_body(body: &[u8]) -> (u8, &[u8]) {
    (body[0], &body[1..])
}

/// Reads one frame from a blocking reader: `Ok(None)` at a clean end of stream.
pub fn read_frame<R: std::io::Read>(r: &mut R) -> Result<Option<(u8, Vec<u8>)>, String> {
    let mut header = [0u8; 4];
    match r.read_exact(&mut header) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.to_string()),
    }
    let n = frame_len(header)?;
    let mut body = vec![0u8; n];
    r.read_exact(&mut body).map_err(|e| e.to_string())?;
    let payload = body.split_off(1);
    Ok(Some((body[0], payload)))
}

/// The payload of a call request. `args_json` is already JSON text (the caller's encoder made
/// it), so it is spliced in, never re-parsed.
pub fn call_payload(function: &str, args_json: &[u8]) -> Vec<u8> {
    let name = serde_json::to_string(function).expect("a str always serializes");
    let mut out = Vec::with_capacity(args_json.len() + name.len() + 16);
    out.extend_from_slice(b"{\"fn\":");
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b",\"args\":");
    out.extend_from_slice(args_json);
    out.push(b'}');
    out
}

/// A JSON error payload as the worker would send it: `{"kind", "message", "log"}`.
pub fn error_payload(kind: &str, message: &str, log: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({"kind": kind, "message": message, "log": log}))
        .expect("a JSON value always serializes")
}

// ------------------------------------------------------------------------------------------------
// kinds of script and interpreters

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Python,
    PowerShell,
}

impl Kind {
    /// The kind of a script by its extension, or an error naming the supported ones.
    pub fn of(path: &Path) -> Result<Kind, String> {
        match path
            .extension()
            .and_then(OsStr::to_str)
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            Some("py") => Ok(Kind::Python),
            Some("ps1") => Ok(Kind::PowerShell),
            _ => Err(format!(
                "{} is not a script tool: expected a .py or .ps1 file",
                path.display()
            )),
        }
    }

    /// The `type` field of the cache document.
    pub fn module_type(self) -> &'static str {
        match self {
            Kind::Python => "PythonModule",
            Kind::PowerShell => "PowerShellModule",
        }
    }
}

/// The virtual-environment interpreters looked for in a script's folder, in order.
pub const VENV_PYTHONS: &[&str] = &[
    ".venv/bin/python3",
    "venv/bin/python3",
    ".venv/bin/python",
    "venv/bin/python",
    ".venv/Scripts/python.exe",
    "venv/Scripts/python.exe",
];

/// Finds an executable named `name` on `path_var` (a PATH value).
pub fn which(name: &str, path_var: Option<&OsStr>) -> Option<PathBuf> {
    let path_var = path_var?;
    std::env::split_paths(path_var)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    match fs::metadata(path) {
        Ok(meta) if meta.is_file() => {
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                meta.permissions().mode() & 0o111 != 0
            }
            #[cfg(not(unix))]
            {
                true
            }
        }
        _ => false,
    }
}

/// The interpreter for a Python script in `dir`: a venv's `python3` in the folder when there is
/// one, else `python3` on `path_var`, else `configured`; an error that says what was tried.
pub fn find_python(
    dir: &Path,
    path_var: Option<&OsStr>,
    configured: Option<&Path>,
) -> Result<PathBuf, String> {
    for rel in VENV_PYTHONS {
        let candidate = dir.join(rel);
        if is_executable(&candidate) {
            return Ok(candidate);
        }
    }
    if let Some(found) = which("python3", path_var) {
        return Ok(found);
    }
    if let Some(conf) = configured {
        if is_executable(conf) {
            return Ok(conf.to_path_buf());
        }
        return Err(format!(
            "the configured Python interpreter {} is not an executable file",
            conf.display()
        ));
    }
    Err(format!(
        "no Python interpreter found for scripts in {}: no .venv/venv there, no python3 on PATH \
         and none configured. Fix: install Python 3, or pass python: \"/path/to/python3\" \
         (or set config :cmdc_tool, python: ...)",
        dir.display()
    ))
}

/// The message a PowerShell call gives when `pwsh` is not on PATH.
pub const PWSH_MISSING: &str = "running PowerShell script tools needs `pwsh` (PowerShell 7+) on \
    PATH, and it was not found. Fix: install PowerShell (https://aka.ms/powershell) or put pwsh on \
    PATH; the tool's description was read without it.";

// ------------------------------------------------------------------------------------------------
// the {name}.tool.json cache

/// `{dir}/{stem}.tool.json` for a script `{dir}/{stem}.{ext}`.
pub fn cache_path(script: &Path) -> PathBuf {
    let stem = script
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    script.with_file_name(format!("{stem}.tool.json"))
}

/// Nanoseconds since the epoch (0 for times before it).
pub fn mtime_ns(time: SystemTime) -> u128 {
    time.duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
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

/// Reads the cache of `script`. A cache this library wrote records the script's modification
/// time (`scriptMtimeNs`) and is current while the script still has exactly that time (so a
/// script restored to an older time, or given one in the future, is handled too). A cache
/// without that field (written by another tool, e.g. the seeds' format) is current while the
/// file is not older than the script.
pub fn read_cache(script: &Path) -> Result<Cached, String> {
    let kind = Kind::of(script)?;
    let script_meta = fs::metadata(script)
        .map_err(|e| format!("cannot read the script {}: {e}", script.display()))?;
    let script_mtime = script_meta.modified().map_err(|e| e.to_string())?;
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
    let cache_mtime = cache_meta.modified().map_err(|e| e.to_string())?;
    let text = match fs::read(&cache) {
        Ok(bytes) => bytes,
        Err(e) => return Ok(Cached::Corrupt(format!("cannot read: {e}"))),
    };
    let doc: Value = match serde_json::from_slice(&text) {
        Ok(doc) => doc,
        Err(e) => return Ok(Cached::Corrupt(format!("not JSON: {e}"))),
    };
    if let Err(why) = check_document(&doc, kind) {
        return Ok(Cached::Corrupt(why));
    }
    let current = match doc.get("scriptMtimeNs").and_then(Value::as_str) {
        Some(ns) => ns == mtime_ns(script_mtime).to_string(),
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

/// Checks that a document has the shape a script description must have.
pub fn check_document(doc: &Value, kind: Kind) -> Result<(), String> {
    let obj = doc.as_object().ok_or("the document is not a JSON object")?;
    match obj.get("type").and_then(Value::as_str) {
        Some(t) if t == kind.module_type() => {}
        Some(t) => return Err(format!("type is {t:?}, expected {:?}", kind.module_type())),
        None => return Err("no \"type\" field".into()),
    }
    if !obj.get("name").is_some_and(Value::is_string) {
        return Err("no \"name\" string".into());
    }
    let tools = obj
        .get("tools")
        .and_then(Value::as_array)
        .ok_or("no \"tools\" array")?;
    for (i, tool) in tools.iter().enumerate() {
        let function = tool
            .get("function")
            .and_then(Value::as_object)
            .ok_or(format!("tools[{i}] has no \"function\" object"))?;
        if !function.get("name").is_some_and(Value::is_string) {
            return Err(format!("tools[{i}].function has no \"name\""));
        }
        if !function.get("parameters").is_some_and(Value::is_object) {
            return Err(format!("tools[{i}].function has no \"parameters\" object"));
        }
    }
    if let Some(p) = obj.get("rulePrompt") {
        if !p.is_string() && !p.is_null() {
            return Err("\"rulePrompt\" is not a string".into());
        }
    }
    Ok(())
}

/// Writes the cache of `script` from a freshly parsed description (JSON text), recording the
/// script's modification time and its path relative to the cache (the file name). Returns the
/// document as written. The write goes through a temporary file and a rename.
pub fn write_cache(script: &Path, description: &[u8]) -> Result<String, String> {
    let kind = Kind::of(script)?;
    let mut doc: Value = serde_json::from_slice(description)
        .map_err(|e| format!("the description of {} is not JSON: {e}", script.display()))?;
    check_document(&doc, kind)?;
    let mtime = fs::metadata(script)
        .and_then(|m| m.modified())
        .map_err(|e| format!("cannot read the script {}: {e}", script.display()))?;
    if let Some(obj) = doc.as_object_mut() {
        let file = script
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        obj.insert("scriptPath".into(), Value::String(file));
        obj.insert(
            "scriptMtimeNs".into(),
            Value::String(mtime_ns(mtime).to_string()),
        );
    }
    let text = serde_json::to_string_pretty(&doc).expect("a JSON value always serializes");
    let cache = cache_path(script);
    let tmp = cache.with_extension(format!("json.tmp{}", std::process::id()));
    let written = fs::write(&tmp, text.as_bytes()).and_then(|()| fs::rename(&tmp, &cache));
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        // A read-only folder still gets its tools; it only loses the cache.
        return Err(format!("cannot write {}: {e}", cache.display()));
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
    use std::time::Duration;

    fn tmpdir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("cmdc_scripts_{name}_{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    const DOC: &str = r#"{"type":"PythonModule","name":"w","tools":[{"type":"function",
        "function":{"name":"f","description":"d","parameters":{"type":"object"}}}],"rulePrompt":"r"}"#;

    #[test]
    fn frames_round_trip() {
        let frame = encode_frame(CALL, b"{\"a\":1}");
        assert_eq!(&frame[..4], &8u32.to_be_bytes());
        let mut r = &frame[..];
        let (kind, payload) = read_frame(&mut r).unwrap().unwrap();
        assert_eq!(kind, CALL);
        assert_eq!(payload, b"{\"a\":1}");
        assert_eq!(read_frame(&mut r).unwrap(), None);
        assert!(frame_len(0u32.to_be_bytes()).is_err());
        assert!(frame_len(((MAX_FRAME + 1) as u32).to_be_bytes()).is_err());
        assert_eq!(split_body(b"Oxy"), (b'O', &b"xy"[..]));
    }

    #[test]
    fn call_payload_splices_args() {
        let p = call_payload("get \"it\"", b"{\"x\":[1,2]}");
        let v: Value = serde_json::from_slice(&p).unwrap();
        assert_eq!(v["fn"], "get \"it\"");
        assert_eq!(v["args"]["x"][1], 2);
        let e: Value = serde_json::from_slice(&error_payload("timeout", "slow", "")).unwrap();
        assert_eq!(e["kind"], "timeout");
    }

    #[test]
    fn kinds() {
        assert_eq!(Kind::of(Path::new("a/b.py")).unwrap(), Kind::Python);
        assert_eq!(Kind::of(Path::new("a/b.PS1")).unwrap(), Kind::PowerShell);
        assert!(Kind::of(Path::new("a/b.rb"))
            .unwrap_err()
            .contains(".py or .ps1"));
        assert_eq!(
            cache_path(Path::new("/x/tools.py")),
            PathBuf::from("/x/tools.tool.json")
        );
    }

    #[cfg(unix)]
    #[test]
    fn interpreter_choice() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tmpdir("interp");
        let bin = dir.join("bin");
        fs::create_dir_all(&bin).unwrap();
        let exe = |p: &Path| {
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, "#!/bin/sh\n").unwrap();
            fs::set_permissions(p, fs::Permissions::from_mode(0o755)).unwrap();
        };
        let conf = dir.join("conf/python");
        exe(&conf);
        // nothing on PATH: the configured one, else an error saying what to do
        let empty = dir.join("empty");
        fs::create_dir_all(&empty).unwrap();
        let path_var = std::ffi::OsString::from(bin.as_os_str());
        assert_eq!(
            find_python(&empty, Some(&path_var), Some(&conf)).unwrap(),
            conf
        );
        let err = find_python(&empty, Some(&path_var), None).unwrap_err();
        assert!(err.contains("no Python interpreter found"), "{err}");
        // python3 on PATH wins over the configured one
        exe(&bin.join("python3"));
        assert_eq!(
            find_python(&empty, Some(&path_var), Some(&conf)).unwrap(),
            bin.join("python3")
        );
        // a venv in the script's folder wins over PATH
        let venv = dir.join("proj/.venv/bin/python3");
        exe(&venv);
        assert_eq!(
            find_python(&dir.join("proj"), Some(&path_var), None).unwrap(),
            venv
        );
        // a non-executable file is not an interpreter
        let noexec = dir.join("noexec/venv/bin/python3");
        fs::create_dir_all(noexec.parent().unwrap()).unwrap();
        fs::write(&noexec, "").unwrap();
        assert_eq!(
            find_python(&dir.join("noexec"), Some(&path_var), None).unwrap(),
            bin.join("python3")
        );
    }

    #[test]
    fn cache_miss_hit_stale_corrupt() {
        let dir = tmpdir("cache");
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

        assert!(write_cache(&script, b"[1]").is_err());
        assert!(read_cache(&dir.join("missing.py")).is_err());
    }
}
