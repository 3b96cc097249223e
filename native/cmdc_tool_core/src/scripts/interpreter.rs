//! Which program runs a script: its kind by extension, the Python interpreter of its folder
//! (a venv there, else `python3` on the caller's PATH, else the configured one; version-manager
//! shims resolved once), and `pwsh`.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use tokio::process::Command;

use crate::error::{Error, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Language {
    Python,
    PowerShell,
}

impl Language {
    /// The kind of a script by its extension, or an error naming the supported ones.
    pub fn of(path: &Path) -> Result<Language> {
        match path
            .extension()
            .and_then(OsStr::to_str)
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            Some("py") => Ok(Language::Python),
            Some("ps1") => Ok(Language::PowerShell),
            _ => Err(Error::Invalid(format!(
                "{} is not a script tool: expected a .py or .ps1 file",
                path.display()
            ))),
        }
    }

    /// The `type` field of the cache document.
    pub fn module_type(self) -> &'static str {
        match self {
            Language::Python => "PythonModule",
            Language::PowerShell => "PowerShellModule",
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
) -> Result<PathBuf> {
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
        return Err(Error::Process(format!(
            "the configured Python interpreter {} is not an executable file",
            conf.display()
        )));
    }
    Err(Error::Process(format!(
        "no Python interpreter found for scripts in {}: no .venv/venv there, no python3 on PATH \
         and none configured. Fix: install Python 3, or pass python: \"/path/to/python3\" \
         (or set config :cmdc_tool, python: ...)",
        dir.display()
    )))
}

/// The message a PowerShell call gives when `pwsh` is not on PATH.
pub const PWSH_MISSING: &str = "running PowerShell script tools needs `pwsh` (PowerShell 7+) on \
    PATH, and it was not found. Fix: install PowerShell (https://aka.ms/powershell) or put pwsh on \
    PATH; the tool's description was read without it.";

/// The PATH to search: the caller's view when given (the VM's environment can differ from the
/// OS process's), else the process's.
pub fn path_var(given: Option<&str>) -> Option<OsString> {
    match given {
        Some(p) => Some(OsString::from(p)),
        None => std::env::var_os("PATH"),
    }
}

/// The interpreter for scripts in `dir`. A version-manager shim (pyenv, asdf) costs ~100 ms per
/// start, so it is resolved once to the interpreter it runs (per folder, as shims read
/// `.python-version` files).
pub async fn python_for(
    dir: &Path,
    configured: Option<&str>,
    path_env: Option<&str>,
) -> Result<PathBuf> {
    static RESOLVED: OnceLock<Mutex<HashMap<(PathBuf, PathBuf), PathBuf>>> = OnceLock::new();
    let found = find_python(
        dir,
        path_var(path_env).as_deref(),
        configured.map(Path::new),
    )?;
    let shim = found
        .components()
        .any(|c| c.as_os_str() == "shims" || c.as_os_str() == ".asdf");
    if !shim {
        return Ok(found);
    }
    let cache = RESOLVED.get_or_init(Default::default);
    let key = (found.clone(), dir.to_path_buf());
    if let Some(real) = cache.lock().ok().and_then(|c| c.get(&key).cloned()) {
        return Ok(real);
    }
    let mut probe = Command::new(&found);
    if let Some(p) = path_env {
        probe.env("PATH", p);
    }
    let probe = probe
        .args(["-c", "import sys; sys.stdout.write(sys.executable)"])
        .current_dir(dir)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .output();
    let real = match tokio::time::timeout(Duration::from_secs(20), probe).await {
        Ok(Ok(out)) if out.status.success() && !out.stdout.is_empty() => {
            PathBuf::from(String::from_utf8_lossy(&out.stdout).into_owned())
        }
        _ => found,
    };
    if let Ok(mut c) = cache.lock() {
        c.insert(key, real.clone());
    }
    Ok(real)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds() {
        assert_eq!(Language::of(Path::new("a/b.py")).unwrap(), Language::Python);
        assert_eq!(
            Language::of(Path::new("a/b.PS1")).unwrap(),
            Language::PowerShell
        );
        let err = Language::of(Path::new("a/b.rb")).unwrap_err();
        assert!(
            matches!(&err, Error::Invalid(m) if m.contains(".py or .ps1")),
            "{err:?}"
        );
    }

    #[cfg(unix)]
    #[test]
    fn interpreter_choice() {
        use std::os::unix::fs::PermissionsExt;
        let dir = crate::scripts::test_dir("interp");
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
        assert!(
            matches!(&err, Error::Process(m) if m.contains("no Python interpreter found")),
            "{err:?}"
        );
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
}
