//! Plugins: folders under `<cmdc home>/plugins/` with a manifest (`cmdc-plugin.json`) naming
//! their tool paths, which must stay inside the plugin folder.

use std::ffi::OsStr;
use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};

use serde_json::Value;

use super::model::{json_string, Ctx, NoteKind, Plugin, Source, MANIFEST, MAX_METADATA_BYTES};
use super::walk::visit_root;
use crate::error::{Error, Result};
use crate::fs::read_regular;

/// Reads a plugin manifest: `name` and `version` (strings), optional `tools` (paths relative to
/// the plugin folder, default `["tools"]`) and `disabled`.
pub fn read_manifest(text: &[u8]) -> Result<(String, String, Vec<String>, bool)> {
    let bad = |why: &str| Error::Json(why.to_owned());
    let value: Value =
        serde_json::from_slice(text).map_err(|e| Error::Json(format!("invalid JSON: {e}")))?;
    let map = value
        .as_object()
        .ok_or_else(|| bad("expected a JSON object with \"name\", \"version\" and \"tools\""))?;
    let name = match map.get("name") {
        Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
        _ => return Err(bad("\"name\" must be a non-empty string")),
    };
    let version = match map.get("version") {
        Some(Value::String(s)) => s.clone(),
        None => String::new(),
        _ => return Err(bad("\"version\" must be a string")),
    };
    let tools = match map.get("tools") {
        None => vec!["tools".to_string()],
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| match i {
                Value::String(s) if !s.is_empty() => Ok(s.clone()),
                other => Err(Error::Json(format!(
                    "\"tools\" must list paths (non-empty strings), got {other}"
                ))),
            })
            .collect::<Result<_>>()?,
        Some(Value::String(s)) if !s.is_empty() => vec![s.clone()],
        _ => {
            return Err(bad(
                "\"tools\" must be a list of paths relative to the plugin folder",
            ))
        }
    };
    let disabled = match map.get("disabled") {
        None => false,
        Some(Value::Bool(b)) => *b,
        _ => return Err(bad("\"disabled\" must be true or false")),
    };
    Ok((name, version, tools, disabled))
}

pub(super) fn scan_plugins(cx: &mut Ctx, plugins_dir: &Path) {
    let mut dirs = match fs::read_dir(plugins_dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect::<Vec<_>>(),
        Err(_) => return,
    };
    dirs.sort();
    for dir in dirs {
        let hidden = dir
            .file_name()
            .and_then(OsStr::to_str)
            .is_some_and(|n| n.starts_with('.'));
        if !hidden {
            scan_plugin(cx, &dir);
        }
    }
}

/// One plugin folder: its manifest read, then each tool path it lists walked.
fn scan_plugin(cx: &mut Ctx, dir: &Path) {
    cx.enter(Source::Plugin, "plugin", dir, None);
    let manifest = dir.join(MANIFEST);
    let text = match read_regular(&manifest, MAX_METADATA_BYTES) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            cx.note(
                dir,
                NoteKind::NoManifest,
                format!("plugin folder {} has no {MANIFEST}; skipped", dir.display()),
            );
            return;
        }
        Err(e) => {
            cx.note(
                &manifest,
                NoteKind::BadManifest,
                format!("cannot read {}: {e}", manifest.display()),
            );
            return;
        }
    };
    let (name, version, tools, disabled) = match read_manifest(&text) {
        Ok(m) => m,
        Err(e) => {
            cx.note(
                &manifest,
                NoteKind::BadManifest,
                format!("plugin manifest {} refused: {e}", manifest.display()),
            );
            return;
        }
    };
    let provider = format!("plugin:{name}");
    cx.enter(Source::Plugin, &provider, dir, None);
    if disabled {
        cx.note(
            dir,
            NoteKind::PluginDisabled,
            format!("plugin {name} is disabled in {}", manifest.display()),
        );
        return;
    }
    let plugin = Plugin {
        name,
        version,
        dir: dir.to_path_buf(),
    };
    for rel in tools {
        scan_plugin_tool(cx, &plugin, &provider, &rel);
    }
}

/// Where a path a plugin names (relative to its folder) leads.
pub(super) enum InPlugin {
    /// Inside the plugin: the real path.
    Inside(PathBuf),
    /// Absolute, `~`, `..`, or resolving (through a symlink) outside the plugin: why.
    Outside(String),
    /// Nothing there (or a broken symlink).
    Missing,
    /// A symlink cycle.
    Loops,
    /// Another error reading it.
    Unreadable(String),
}

/// The one rule for paths a plugin names (this library's plugins and Claude Code's): relative
/// to the plugin folder (a leading `./` or `${CLAUDE_PLUGIN_ROOT}/` allowed), never absolute,
/// `~…` or through `..`, and resolving inside the plugin folder's real path.
pub(super) fn in_plugin(dir: &Path, rel: &str) -> InPlugin {
    let rel = rel.strip_prefix("${CLAUDE_PLUGIN_ROOT}/").unwrap_or(rel);
    let rel_path = Path::new(rel);
    let real_dir = fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let lexically_out = rel_path.is_absolute()
        || rel.starts_with('~')
        || rel_path
            .components()
            .any(|c| matches!(c, Component::ParentDir));
    if lexically_out {
        return InPlugin::Outside(format!(
            "{} leaves the plugin folder {}",
            json_string(rel),
            dir.display()
        ));
    }
    let target = dir.join(rel_path);
    match fs::canonicalize(&target) {
        Ok(real) if real.starts_with(&real_dir) => InPlugin::Inside(real),
        Ok(real) => InPlugin::Outside(format!(
            "{} resolves to {}: it leaves the plugin folder {}",
            json_string(rel),
            real.display(),
            dir.display()
        )),
        Err(e) if e.kind() == io::ErrorKind::NotFound => InPlugin::Missing,
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => InPlugin::Loops,
        Err(e) => InPlugin::Unreadable(e.to_string()),
    }
}

/// One tool path of a plugin's manifest, walked unless it leaves the plugin folder.
pub(super) fn scan_plugin_tool(cx: &mut Ctx, plugin: &Plugin, provider: &str, rel: &str) {
    let dir = &plugin.dir;
    let target = dir.join(rel);
    cx.enter(Source::Plugin, provider, &target, Some(plugin.clone()));
    if let InPlugin::Outside(why) = in_plugin(dir, rel) {
        cx.note(
            &target,
            NoteKind::BadManifest,
            format!("plugin {}: tool path {why}; refused", plugin.name),
        );
        return;
    }
    visit_root(cx, &target, true);
}
