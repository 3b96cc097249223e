//! The trust list (`trusted.json`): whether project folders, which may hold code from a
//! repository just cloned, are loaded.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::model::{Config, Ctx, NoteKind, Trust, MAX_METADATA_BYTES, TRUST_FILE};
use crate::error::{Error, Result};
use crate::fs::{expand, read_regular};

/// Reads a trust list: `{"trusted": [folders]}` or a bare array of folders, each absolute or
/// starting with `~/`.
pub fn read_trust_list(text: &[u8], cwd: &Path, home: &Path) -> Result<Vec<PathBuf>> {
    let value: Value =
        serde_json::from_slice(text).map_err(|e| Error::Json(format!("invalid JSON: {e}")))?;
    let shape = || Error::Json("expected {\"trusted\": [folders]} or an array of folders".into());
    let list = match &value {
        Value::Array(items) => items,
        Value::Object(map) => match map.get("trusted") {
            Some(Value::Array(items)) => items,
            _ => return Err(shape()),
        },
        _ => return Err(shape()),
    };
    list.iter()
        .map(|item| match item {
            // A relative entry would trust whatever folder the agent runs in.
            Value::String(s) if s == "~" || s.starts_with("~/") || Path::new(s).is_absolute() => {
                Ok(expand(s, cwd, home))
            }
            other => Err(Error::Json(format!(
                "a trusted folder must be an absolute path or start with ~/, got {other}"
            ))),
        })
        .collect()
}

pub(super) fn project_trusted(cx: &mut Ctx, config: &Config, cwd: &Path, home: &Path) -> bool {
    trust_decision(config, cwd, home, &mut |file, reason| {
        cx.note(file, NoteKind::BadTrustList, reason)
    })
}

/// Whether the project is trusted (`config.trust`, `config.trusted`, the trust lists);
/// `problem` hears of each trust list that cannot be used.
pub(super) fn trust_decision(
    config: &Config,
    cwd: &Path,
    home: &Path,
    problem: &mut dyn FnMut(&Path, String),
) -> bool {
    match config.trust {
        Trust::Always => return true,
        Trust::Never => return false,
        Trust::Auto => {}
    }
    let mut folders: Vec<PathBuf> = config
        .trusted
        .iter()
        .map(|t| expand(t, cwd, home))
        .collect();
    for dir in config.cmdc_homes(home) {
        let file = dir.join(TRUST_FILE);
        match read_regular(&file, MAX_METADATA_BYTES) {
            Ok(text) => match read_trust_list(&text, cwd, home) {
                Ok(list) => folders.extend(list),
                Err(e) => problem(&file, format!("trust list {} ignored: {e}", file.display())),
            },
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => problem(
                &file,
                format!("trust list {} unreadable: {e}", file.display()),
            ),
        }
    }
    is_trusted(cwd, &folders)
}

/// Whether `cwd` is one of `folders` or under one (compared as real paths when they exist).
pub fn is_trusted(cwd: &Path, folders: &[PathBuf]) -> bool {
    let real_cwd = fs::canonicalize(cwd).unwrap_or_else(|_| cwd.to_path_buf());
    folders.iter().any(|f| {
        let real = fs::canonicalize(f).unwrap_or_else(|_| f.clone());
        real_cwd.starts_with(&real)
    })
}
