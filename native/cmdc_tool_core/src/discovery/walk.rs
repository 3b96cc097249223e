//! Walking a root: listing folders, classifying files, resolving real paths (a file reached
//! twice is kept once) and attaching the metadata found next to each tool file.

use std::collections::HashSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::metadata::{markdown_body, markdown_display, parse_meta};
use super::model::{Ctx, NoteKind, ToolFile, ToolKind, MAX_DEPTH, MAX_METADATA_BYTES};
use crate::fs::{file_kind, mtime_ns, read_small};
use crate::scripts::languages;

enum Class {
    Tool(ToolKind),
    Metadata,
    Other,
}

fn classify(name: &str) -> Class {
    let ext = match name.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => ext.to_ascii_lowercase(),
        _ => return Class::Other,
    };
    let script = |ext: &str| languages::ALL.iter().any(|l| l.extensions().contains(&ext));
    match ext.as_str() {
        "ex" | "exs" => Class::Tool(ToolKind::Elixir),
        "md" | "json" => Class::Metadata,
        ext if script(ext) => Class::Tool(ToolKind::Script),
        _ => Class::Other,
    }
}

/// Visits a root (a folder, or a file given explicitly). A missing root is an error only when
/// `required` (explicit paths, plugin tool paths); provider folders are optional.
pub(super) fn visit_root(cx: &mut Ctx, root: &Path, required: bool) {
    match fs::metadata(root) {
        Ok(md) if md.is_dir() => {
            let mut visited = HashSet::new();
            walk_dir(cx, root, 0, &mut visited);
        }
        Ok(md) => visit_file(cx, root, &md),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if required {
                let what = if fs::symlink_metadata(root).is_ok() {
                    "is a broken symlink"
                } else {
                    "does not exist"
                };
                cx.note(
                    root,
                    NoteKind::NotFound,
                    format!("{} {what}", root.display()),
                );
            }
        }
        Err(e) => cx.note(
            root,
            NoteKind::Unreadable,
            format!("cannot read {}: {e}", root.display()),
        ),
    }
}

fn walk_dir(cx: &mut Ctx, dir: &Path, depth: usize, visited: &mut HashSet<PathBuf>) {
    let Some((real_dir, entries)) = read_folder(cx, dir, visited) else {
        return;
    };
    let names: HashSet<&str> = entries.iter().map(|(n, _, _)| n.as_str()).collect();
    let mut subdirs = Vec::new();
    for (name, ft, entry) in &entries {
        let path = dir.join(name);
        if let Some(sub) = visit_entry(cx, (&real_dir, &names), path, name, ft, entry) {
            subdirs.push(sub);
        }
    }
    for sub in subdirs {
        if depth + 1 >= MAX_DEPTH {
            cx.note(
                &sub,
                NoteKind::Unsupported,
                format!(
                    "{} is nested deeper than {MAX_DEPTH} folders; not walked",
                    sub.display()
                ),
            );
            continue;
        }
        walk_dir(cx, &sub, depth + 1, visited);
    }
}

/// A folder entry: its name, type and the entry (for its metadata).
type Entry = (String, fs::FileType, fs::DirEntry);

/// A folder's real path and its entries sorted by name, or `None` when it cannot be read or
/// was visited already (a symlink cycle, or a folder reached twice under the same root).
fn read_folder(
    cx: &mut Ctx,
    dir: &Path,
    visited: &mut HashSet<PathBuf>,
) -> Option<(PathBuf, Vec<Entry>)> {
    let real_dir = match fs::canonicalize(dir) {
        Ok(r) => r,
        Err(e) => {
            cx.note(
                dir,
                NoteKind::Unreadable,
                format!("cannot read {}: {e}", dir.display()),
            );
            return None;
        }
    };
    if !visited.insert(real_dir.clone()) {
        return None;
    }
    if let Some(reason) = leaves_plugin(cx, dir, &real_dir) {
        cx.note(dir, NoteKind::OutsidePlugin, reason);
        return None;
    }
    let read = match fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) => {
            cx.note(
                dir,
                NoteKind::Unreadable,
                format!("cannot read folder {}: {e}", dir.display()),
            );
            return None;
        }
    };
    let mut entries: Vec<Entry> = Vec::new();
    for entry in read.flatten() {
        let Ok(ft) = entry.file_type() else { continue };
        match entry.file_name().into_string() {
            Ok(name) => entries.push((name, ft, entry)),
            Err(raw) => {
                let path = dir.join(&raw);
                cx.note(
                    &path,
                    NoteKind::Unsupported,
                    format!("{}: the file name is not UTF-8", path.display()),
                );
            }
        }
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    Some((real_dir, entries))
}

/// Visits one folder entry (`folder`: the folder's real path and its entries' names); a
/// sub-folder to walk is returned.
fn visit_entry(
    cx: &mut Ctx,
    folder: (&Path, &HashSet<&str>),
    path: PathBuf,
    name: &str,
    ft: &fs::FileType,
    entry: &fs::DirEntry,
) -> Option<PathBuf> {
    let (real_dir, names) = folder;
    if name.starts_with('.') {
        cx.note(
            &path,
            NoteKind::Hidden,
            format!("{} is hidden (its name starts with a dot)", path.display()),
        );
        return None;
    }
    if ft.is_dir() {
        return Some(path);
    }
    if ft.is_symlink() {
        match fs::metadata(&path) {
            Ok(md) if md.is_dir() => return Some(path),
            Ok(md) => {
                let real = fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
                match leaves_plugin(cx, &path, &real) {
                    Some(reason) => cx.note(&path, NoteKind::OutsidePlugin, reason),
                    None => visit_classified(cx, &path, real, &md, Some((names, real_dir))),
                }
            }
            Err(_) => cx.note(
                &path,
                NoteKind::Unreadable,
                format!("{} is a broken symlink", path.display()),
            ),
        }
        return None;
    }
    // A plain file: its real path is the real folder plus its name, and its metadata is
    // read relative to the open folder (no path walk).
    if let Class::Tool(_) = classify(name) {
        match entry.metadata() {
            Ok(md) => {
                let real = real_dir.join(name);
                visit_classified(cx, &path, real, &md, Some((names, real_dir)));
            }
            Err(e) => cx.note(
                &path,
                NoteKind::Unreadable,
                format!("cannot read {}: {e}", path.display()),
            ),
        }
    } else {
        classify_other(cx, &path, name, false);
    }
    None
}

/// Inside a plugin, every folder and file must resolve inside the plugin's folder: a symlink to
/// a file or folder elsewhere would load code the plugin does not hold (and that its manifest's
/// checks never saw). The reason it is refused, when it leaves.
fn leaves_plugin(cx: &Ctx, path: &Path, real: &Path) -> Option<String> {
    let plugin = cx.plugin.as_ref()?;
    let real_dir = fs::canonicalize(&plugin.dir).unwrap_or_else(|_| plugin.dir.clone());
    if real.starts_with(&real_dir) {
        return None;
    }
    Some(format!(
        "plugin {}: {} resolves to {}, outside the plugin folder {}; refused",
        plugin.name,
        path.display(),
        real.display(),
        plugin.dir.display()
    ))
}

fn visit_file(cx: &mut Ctx, path: &Path, md: &fs::Metadata) {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if let Class::Tool(_) = classify(&name) {
        let real = fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        visit_classified(cx, path, real, md, None);
    } else {
        classify_other(cx, path, &name, true);
    }
}

fn classify_other(cx: &mut Ctx, path: &Path, name: &str, explicit: bool) {
    match classify(name) {
        Class::Metadata => {
            // Metadata next to a tool file is read with it; on its own it is not listed,
            // unless it was named explicitly.
            if explicit {
                cx.note(
                    path,
                    NoteKind::Metadata,
                    format!(
                        "{} is metadata (.md/.json), never executed as a tool",
                        path.display()
                    ),
                );
            }
        }
        _ => cx.note(
            path,
            NoteKind::Unsupported,
            format!(
                "{}: not a tool file (tools are {}; .md and .json are metadata)",
                path.display(),
                tool_extensions()
            ),
        ),
    }
}

/// The tool file extensions for messages: Elixir's, then each script language's
/// (`.ex, .exs, .py or .ps1`).
fn tool_extensions() -> String {
    let mut all: Vec<String> = vec![".ex".into(), ".exs".into()];
    for lang in languages::ALL {
        all.extend(lang.extensions().iter().map(|e| format!(".{e}")));
    }
    let last = all.pop().unwrap_or_default();
    format!("{} or {last}", all.join(", "))
}

fn visit_classified(
    cx: &mut Ctx,
    path: &Path,
    real: PathBuf,
    md: &fs::Metadata,
    listing: Option<(&HashSet<&str>, &Path)>,
) {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let kind = match classify(&name) {
        Class::Tool(k) => k,
        _ => return classify_other(cx, path, &name, listing.is_none()),
    };
    if !md.is_file() {
        cx.note(
            path,
            NoteKind::Unsupported,
            format!(
                "{} is {}, not a regular file; not opened",
                path.display(),
                file_kind(md)
            ),
        );
        return;
    }
    if !first_visit(cx, path, &real) {
        return;
    }

    let dir = path.parent().unwrap_or(Path::new("/"));
    let stem = name.rsplit_once('.').map(|(s, _)| s).unwrap_or(&name);
    let exists = |file: &str| match listing {
        Some((names, _)) => names.contains(file),
        None => dir.join(file).is_file(),
    };

    let mut tool = ToolFile {
        source: cx.source,
        provider: cx.provider.clone(),
        root: cx.root.clone(),
        path: path.to_path_buf(),
        real_path: real,
        kind,
        mtime_ns: mtime_ns(md),
        size: md.len(),
        meta: None,
        meta_path: None,
        doc: None,
        doc_settings: serde_json::Map::new(),
        doc_path: None,
        cache_path: None,
        plugin: cx.plugin.clone(),
    };

    if read_side_files(cx, &mut tool, dir, stem, &exists, listing.is_some()) {
        cx.scan.files.push(tool);
    }
}

/// Whether `real` is seen for the first time in this scan; a second path to it is noted.
fn first_visit(cx: &mut Ctx, path: &Path, real: &Path) -> bool {
    if !cx.seen.insert(real.to_path_buf()) {
        let first = cx
            .seen_from
            .iter()
            .find(|(r, _)| r == real)
            .map(|(_, p)| p.display().to_string())
            .unwrap_or_default();
        cx.note(
            path,
            NoteKind::Duplicate,
            format!(
                "{} is the same file as {first} (real path {}), which is loaded once",
                path.display(),
                real.display()
            ),
        );
        return false;
    }
    cx.seen_from.push((real.to_path_buf(), path.to_path_buf()));
    true
}

/// Reads a tool's side files (`<stem>.json`, `<stem>.md`, `<stem>.tool.json`) into `tool`;
/// `false` when one is invalid or, inside a plugin, its metadata resolves outside the plugin
/// (a symlink would otherwise rename, describe or configure a plugin's tool from a file the
/// plugin does not hold), which leaves the tool out (noted). `walked`: found by a folder walk.
fn read_side_files(
    cx: &mut Ctx,
    tool: &mut ToolFile,
    dir: &Path,
    stem: &str,
    exists: &dyn Fn(&str) -> bool,
    walked: bool,
) -> bool {
    let path = tool.path.clone();
    let meta_name = format!("{stem}.json");
    if exists(&meta_name) {
        let meta_path = dir.join(&meta_name);
        if let Some(reason) = outside_plugin(cx, &meta_path) {
            cx.note(&path, NoteKind::OutsidePlugin, not_loaded(&path, &reason));
            return false;
        }
        match read_small(&meta_path, MAX_METADATA_BYTES).and_then(|t| parse_meta(&t)) {
            Ok(meta) => {
                tool.meta = Some(meta);
                tool.meta_path = Some(meta_path);
            }
            Err(e) => {
                let reason = format!(
                    "{} not loaded: its metadata {} is invalid: {e}",
                    path.display(),
                    meta_path.display()
                );
                cx.note(&path, NoteKind::BadMetadata, reason);
                return false;
            }
        }
    }
    let doc_name = format!("{stem}.md");
    if exists(&doc_name) {
        let doc_path = dir.join(&doc_name);
        if let Some(reason) = outside_plugin(cx, &doc_path) {
            cx.note(&path, NoteKind::OutsidePlugin, not_loaded(&path, &reason));
            return false;
        }
        match read_small(&doc_path, MAX_METADATA_BYTES).and_then(|t| {
            String::from_utf8(t)
                .map_err(|_| crate::error::Error::Invalid("the file is not UTF-8 text".into()))
        }) {
            Ok(text) => {
                tool.doc = markdown_body(&text);
                tool.doc_path = Some(doc_path);
                tool.doc_settings = markdown_display(&text);
            }
            Err(e) => {
                let reason = format!(
                    "{} not loaded: its metadata {} is unreadable: {e}",
                    path.display(),
                    doc_path.display()
                );
                cx.note(&path, NoteKind::BadMetadata, reason);
                return false;
            }
        }
    }
    let cache_name = format!("{stem}.tool.json");
    if tool.kind == ToolKind::Script && exists(&cache_name) {
        attach_cache(cx, tool, dir.join(cache_name), walked);
    }
    true
}

/// Hands the script loader its cache only when it is a regular file inside the plugin (a
/// cache elsewhere is ignored: the script's description is read from the script).
fn attach_cache(cx: &mut Ctx, tool: &mut ToolFile, cache_path: PathBuf, walked: bool) {
    if let Some(reason) = outside_plugin(cx, &cache_path) {
        // A walked folder's links are noted by the walk; a tool file named explicitly has none.
        if !walked {
            cx.note(&cache_path, NoteKind::OutsidePlugin, reason);
        }
        return;
    }
    match fs::metadata(&cache_path) {
        Ok(md) if md.is_file() => tool.cache_path = Some(cache_path),
        Ok(md) => {
            let reason = format!(
                "{} is {}, not a regular file; not opened (the script's description is read \
                 from the script instead)",
                cache_path.display(),
                file_kind(&md)
            );
            cx.note(&cache_path, NoteKind::Unsupported, reason);
        }
        Err(_) => {}
    }
}

fn not_loaded(tool: &Path, reason: &str) -> String {
    format!("{} not loaded: {reason}", tool.display())
}

/// [`leaves_plugin`] for a file next to a tool (its real path resolved here; nothing to do
/// outside a plugin).
fn outside_plugin(cx: &Ctx, path: &Path) -> Option<String> {
    cx.plugin.as_ref()?;
    let real = fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    leaves_plugin(cx, path, &real)
}
