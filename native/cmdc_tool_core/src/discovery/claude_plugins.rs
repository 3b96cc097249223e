//! Claude Code's plugins as Claude Code installs them: `~/.claude/plugins/installed_plugins.json`
//! (`{"version": 2, "plugins": {"name@marketplace": [{scope, installPath, version, projectPath?,
//! …}]}}`, or version 1's single object per plugin), switched on by `enabledPlugins` in
//! `~/.claude/settings.json` and, when the project is trusted, the project's
//! `.claude/settings.json` and `.claude/settings.local.json` (a later file wins).
//!
//! A plugin's folder holds an optional `.claude-plugin/plugin.json` (`name`, `version`,
//! `description`; `hooks` and `mcpServers` as a path, a list of paths, or inline), and by
//! convention `hooks/hooks.json`, `.mcp.json` and (this library's convention) `tools/` or a
//! `cmdc-plugin.json` listing tool paths. Every path a plugin names follows the plugin rule of
//! [`in_plugin`]: a plugin pointing outside its folder, naming a missing file or looping
//! through symlinks is refused whole, with the problem; nothing it brings is used.
//!
//! This reads files only: hooks and MCP configs are handed over as JSON for the Elixir side to
//! interpret (`CMDC.Tool.Hooks.Config`, `CMDC.Tool.MCP.Servers`), tool paths to the scan.

use std::collections::HashSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::model::{json_string, Config, MANIFEST, MAX_METADATA_BYTES};
use super::plugins::{in_plugin, read_manifest, InPlugin};
use super::trust::trust_decision;
use crate::fs::{expand, read_regular};

/// Claude Code's plugin folder under the home folder.
pub const CLAUDE_PLUGINS_DIR: &str = ".claude/plugins";
/// The list of installed plugins in that folder.
pub const INSTALLED_FILE: &str = "installed_plugins.json";

/// Whether a plugin takes part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PluginStatus {
    /// Enabled and readable: its hooks, servers and tools are used.
    Enabled,
    /// Installed but not enabled (or disabled by a later settings file).
    Disabled,
    /// Enabled, but refused: see its problems.
    Broken,
    /// Enabled in a settings file but not installed.
    NotInstalled,
}

impl PluginStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            PluginStatus::Enabled => "enabled",
            PluginStatus::Disabled => "disabled",
            PluginStatus::Broken => "broken",
            PluginStatus::NotInstalled => "not_installed",
        }
    }
}

/// One JSON document a plugin brings, with the file it came from (`plugin.json` for inline
/// ones).
#[derive(Clone, Debug, PartialEq)]
pub struct Part {
    pub path: PathBuf,
    pub json: Value,
}

/// One plugin, installed or only named by `enabledPlugins`.
#[derive(Clone, Debug)]
pub struct ClaudePlugin {
    /// `name@marketplace`, the key Claude Code uses.
    pub id: String,
    pub name: String,
    pub marketplace: String,
    pub version: String,
    /// `user`, `project`, `local` (as installed), or empty when not installed.
    pub scope: String,
    /// The plugin folder (`installPath`).
    pub root: PathBuf,
    pub status: PluginStatus,
    /// The settings file whose `enabledPlugins` decided (none: not named anywhere).
    pub decided_by: Option<PathBuf>,
    pub description: Option<String>,
    /// `{"hooks": {...}}` documents, in load order.
    pub hooks: Vec<Part>,
    /// `{"mcpServers": {...}}` documents, in load order.
    pub mcp: Vec<Part>,
    /// Tool paths relative to the plugin folder (walked by the scan).
    pub tools: Vec<String>,
    /// Why the plugin is refused (a refused plugin brings nothing).
    pub problems: Vec<String>,
}

/// Every plugin, in id order, and the problems of the files that list them.
#[derive(Clone, Debug, Default)]
pub struct ClaudePlugins {
    pub plugins: Vec<ClaudePlugin>,
    /// `(file, reason)`: an unreadable `installed_plugins.json`, a bad `enabledPlugins`.
    pub problems: Vec<(PathBuf, String)>,
    /// The settings files whose `enabledPlugins` were read, in order.
    pub settings: Vec<PathBuf>,
}

/// Reads the installed list and the settings files, then each plugin that is installed.
pub fn claude_plugins(config: &Config) -> ClaudePlugins {
    let mut out = ClaudePlugins::default();
    let home = &config.home;
    if !home.is_absolute() {
        return out;
    }
    let cwd = expand(&config.cwd.to_string_lossy(), Path::new("/"), home);
    let enabled = enabled_plugins(config, &cwd, &mut out);
    let installed_path = home.join(CLAUDE_PLUGINS_DIR).join(INSTALLED_FILE);
    let installed = match read_regular(&installed_path, 4 * MAX_METADATA_BYTES) {
        Ok(text) => match parse_installed(&text, &cwd) {
            Ok(list) => list,
            Err(why) => {
                out.problems.push((installed_path.clone(), why));
                Vec::new()
            }
        },
        Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
        Err(e) => {
            out.problems
                .push((installed_path.clone(), format!("cannot be read: {e}")));
            Vec::new()
        }
    };
    let mut seen = HashSet::new();
    for install in installed {
        seen.insert(install.id.clone());
        let decision = enabled.iter().rev().find(|(id, _, _)| *id == install.id);
        let on = decision.is_some_and(|(_, on, _)| *on);
        let mut plugin = read_plugin(install);
        plugin.decided_by = decision.map(|(_, _, file)| file.clone());
        plugin.status = match (on, plugin.problems.is_empty()) {
            (false, _) => PluginStatus::Disabled,
            (true, true) => PluginStatus::Enabled,
            (true, false) => PluginStatus::Broken,
        };
        out.plugins.push(plugin);
    }
    for (id, on, file) in &enabled {
        if *on && seen.insert(id.clone()) {
            let (name, marketplace) = split_id(id);
            out.plugins.push(ClaudePlugin {
                id: id.clone(),
                name,
                marketplace,
                version: String::new(),
                scope: String::new(),
                root: PathBuf::new(),
                status: PluginStatus::NotInstalled,
                decided_by: Some(file.clone()),
                description: None,
                hooks: Vec::new(),
                mcp: Vec::new(),
                tools: Vec::new(),
                problems: vec![format!(
                    "enabled in {} but not installed (not in {}); it brings nothing",
                    file.display(),
                    installed_path.display()
                )],
            });
        }
    }
    out.plugins.sort_by(|a, b| a.id.cmp(&b.id));
    out.plugins.extend(cmdc_plugins(config));
    out
}

/// This library's own plugins (`<cmdc home>/plugins/<folder>/` with a `cmdc-plugin.json`) bring
/// hooks and MCP servers the same way (`hooks/hooks.json`, `.mcp.json`, `.claude-plugin/
/// plugin.json`), as `<name>@cmdc`, enabled unless their manifest says `"disabled": true`. Their
/// tools are walked by the scan's own plugin pass (a manifest it cannot read is reported there).
fn cmdc_plugins(config: &Config) -> Vec<ClaudePlugin> {
    let mut found = Vec::new();
    for home in config.cmdc_homes(&config.home) {
        let Ok(entries) = fs::read_dir(home.join("plugins")) else {
            continue;
        };
        let mut dirs: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_dir())
            .filter(|p| {
                !p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with('.'))
            })
            .collect();
        dirs.sort();
        for dir in dirs {
            let Ok(text) = read_regular(&dir.join(MANIFEST), MAX_METADATA_BYTES) else {
                continue;
            };
            let Ok((name, version, _tools, disabled)) = read_manifest(&text) else {
                continue;
            };
            let install = Install {
                id: format!("{name}@cmdc"),
                scope: "cmdc".into(),
                root: dir,
                version,
            };
            let mut plugin = read_plugin(install);
            // The scan walks its tools (cmdc plugins' own rule).
            plugin.tools.clear();
            plugin.status = match (disabled, plugin.problems.is_empty()) {
                (true, _) => PluginStatus::Disabled,
                (false, true) => PluginStatus::Enabled,
                (false, false) => PluginStatus::Broken,
            };
            found.push(plugin);
        }
    }
    found
}

fn split_id(id: &str) -> (String, String) {
    match id.rsplit_once('@') {
        Some((name, market)) => (name.to_string(), market.to_string()),
        None => (id.to_string(), String::new()),
    }
}

/// `(id, enabled, file)` for each `enabledPlugins` entry, in file order (the last word wins).
fn enabled_plugins(
    config: &Config,
    cwd: &Path,
    out: &mut ClaudePlugins,
) -> Vec<(String, bool, PathBuf)> {
    let home = &config.home;
    let mut files = vec![home.join(".claude/settings.json")];
    let project_is_home = real(cwd) == real(home);
    if !project_is_home && project_trusted(config, cwd) {
        files.push(cwd.join(".claude/settings.json"));
        files.push(cwd.join(".claude/settings.local.json"));
    }
    let mut entries = Vec::new();
    for file in files {
        let text = match read_regular(&file, 4 * MAX_METADATA_BYTES) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => {
                out.problems.push((file, format!("cannot be read: {e}")));
                continue;
            }
        };
        out.settings.push(file.clone());
        // A settings file that is not JSON is reported where its hooks are read.
        let Ok(Value::Object(map)) = serde_json::from_slice::<Value>(&text) else {
            continue;
        };
        match map.get("enabledPlugins") {
            None => {}
            Some(Value::Object(ids)) => {
                for (id, value) in ids {
                    match value {
                        Value::Bool(on) => entries.push((id.clone(), *on, file.clone())),
                        other => out.problems.push((
                            file.clone(),
                            format!(
                                "enabledPlugins.{}: expected true or false, got {other}; ignored",
                                json_string(id)
                            ),
                        )),
                    }
                }
            }
            Some(other) => out.problems.push((
                file.clone(),
                format!("\"enabledPlugins\" must be an object of \"name@marketplace\": true|false, got {other}"),
            )),
        }
    }
    entries
}

fn real(p: &Path) -> PathBuf {
    fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

/// The project's trust, as the scan decides it (a bad trust list is reported by the scan).
fn project_trusted(config: &Config, cwd: &Path) -> bool {
    trust_decision(config, cwd, &config.home, &mut |_, _| {})
}

/// One installation that applies here.
#[derive(Debug)]
struct Install {
    id: String,
    scope: String,
    root: PathBuf,
    version: String,
}

/// The installations of `installed_plugins.json` that apply to `cwd`: a `user` (or unscoped)
/// one everywhere, a `project`/`local` one only in its `projectPath`; the most specific wins.
fn parse_installed(text: &[u8], cwd: &Path) -> Result<Vec<Install>, String> {
    let value: Value = serde_json::from_slice(text).map_err(|e| format!("invalid JSON: {e}"))?;
    let Some(Value::Object(plugins)) = value.get("plugins") else {
        return Err("expected {\"version\": 2, \"plugins\": {\"name@marketplace\": [...]}}".into());
    };
    let here = real(cwd);
    let mut out = Vec::new();
    for (id, entries) in plugins {
        let list: Vec<&Value> = match entries {
            Value::Array(items) => items.iter().collect(),
            one @ Value::Object(_) => vec![one],
            other => {
                return Err(format!(
                    "plugins.{}: expected a list of installations, got {other}",
                    json_string(id)
                ))
            }
        };
        let rank = |scope: &str| match scope {
            "local" => 0,
            "project" => 1,
            _ => 2,
        };
        let best = list
            .iter()
            .filter_map(|entry| {
                let entry = entry.as_object()?;
                let scope = entry.get("scope").and_then(Value::as_str).unwrap_or("user");
                if matches!(scope, "project" | "local") {
                    let project = entry.get("projectPath").and_then(Value::as_str)?;
                    if real(Path::new(project)) != here {
                        return None;
                    }
                }
                Some((scope.to_string(), entry))
            })
            .min_by_key(|(scope, _)| rank(scope));
        let Some((scope, entry)) = best else { continue };
        let root = match entry.get("installPath") {
            Some(Value::String(p)) if Path::new(p).is_absolute() => PathBuf::from(p),
            other => {
                return Err(format!(
                    "plugins.{}: \"installPath\" must be an absolute path, got {}",
                    json_string(id),
                    other.map_or("nothing".to_string(), Value::to_string)
                ))
            }
        };
        let version = entry
            .get("version")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        out.push(Install {
            id: id.clone(),
            scope,
            root,
            version,
        });
    }
    Ok(out)
}

/// Reads one installed plugin's manifest and the files it brings; every problem refuses it.
fn read_plugin(install: Install) -> ClaudePlugin {
    let (name, marketplace) = split_id(&install.id);
    let mut p = ClaudePlugin {
        id: install.id,
        name,
        marketplace,
        version: install.version,
        scope: install.scope,
        root: install.root,
        status: PluginStatus::Disabled,
        decided_by: None,
        description: None,
        hooks: Vec::new(),
        mcp: Vec::new(),
        tools: Vec::new(),
        problems: Vec::new(),
    };
    match fs::canonicalize(&p.root) {
        Ok(real) if real.is_dir() => {}
        Ok(_) => return refuse(p, "its folder is not a folder".into()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return refuse(p, "its folder does not exist (reinstall it)".into())
        }
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return refuse(p, "its folder loops (a symlink cycle)".into())
        }
        Err(e) => return refuse(p, format!("its folder cannot be read: {e}")),
    }
    let manifest = match optional(&p, ".claude-plugin/plugin.json") {
        Ok(Some((path, Value::Object(map)))) => Some((path, map)),
        Ok(Some((path, _))) => {
            return refuse(p, format!("{} must be a JSON object", path.display()))
        }
        Ok(None) => None,
        Err(why) => return refuse(p, why),
    };
    let mut problems = Vec::new();
    if let Some((_, map)) = &manifest {
        if let Some(Value::String(v)) = map.get("version") {
            p.version = v.clone();
        }
        p.description = map
            .get("description")
            .and_then(Value::as_str)
            .map(str::to_string);
    }
    // Default files first, then the manifest's (which add to them, as in Claude Code).
    let mut seen = HashSet::new();
    for (rel, kind) in [("hooks/hooks.json", Kind::Hooks), (".mcp.json", Kind::Mcp)] {
        match optional(&p, rel) {
            Ok(Some(part)) => push(&mut p, kind, &mut seen, &mut problems, part),
            Ok(None) => {}
            Err(why) => problems.push(why),
        }
    }
    if let Some((path, map)) = &manifest {
        for (key, kind) in [("hooks", Kind::Hooks), ("mcpServers", Kind::Mcp)] {
            match map.get(key) {
                None => {}
                Some(Value::Object(inline)) => {
                    let part = (path.clone(), Value::Object(inline.clone()));
                    push(&mut p, kind, &mut seen, &mut problems, part);
                }
                Some(value) => {
                    for rel in paths(value, key, &mut problems) {
                        match required(&p, &rel, key) {
                            Ok(part) => push(&mut p, kind, &mut seen, &mut problems, part),
                            Err(why) => problems.push(why),
                        }
                    }
                }
            }
        }
    }
    match tool_paths(&p) {
        Ok(tools) => p.tools = tools,
        Err(why) => problems.push(why),
    }
    for why in problems {
        p = refuse(p, why);
    }
    p
}

fn refuse(mut p: ClaudePlugin, why: String) -> ClaudePlugin {
    p.problems.push(why);
    p.hooks.clear();
    p.mcp.clear();
    p.tools.clear();
    p
}

/// The manifest's `hooks`/`mcpServers` value as paths: a string or a list of strings.
fn paths(value: &Value, key: &str, problems: &mut Vec<String>) -> Vec<String> {
    match value {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) if items.iter().all(Value::is_string) => items
            .iter()
            .filter_map(|i| i.as_str().map(str::to_string))
            .collect(),
        other => {
            problems.push(format!(
                "plugin.json \"{key}\" must be a path, a list of paths or an object, got {other}"
            ));
            Vec::new()
        }
    }
}

/// A conventional file: `Ok(None)` when absent, refused when it leaves the plugin.
fn optional(p: &ClaudePlugin, rel: &str) -> Result<Option<(PathBuf, Value)>, String> {
    match in_plugin(&p.root, rel) {
        InPlugin::Missing => {
            // A dangling symlink is a missing file the plugin names.
            if fs::symlink_metadata(p.root.join(rel)).is_ok() {
                Err(format!("{} is a broken symlink", json_string(rel)))
            } else {
                Ok(None)
            }
        }
        _ => required(p, rel, "file").map(Some),
    }
}

/// A file the plugin names: read and parsed, or the reason it is refused.
fn required(p: &ClaudePlugin, rel: &str, what: &str) -> Result<(PathBuf, Value), String> {
    let path = p
        .root
        .join(rel.strip_prefix("${CLAUDE_PLUGIN_ROOT}/").unwrap_or(rel));
    match in_plugin(&p.root, rel) {
        InPlugin::Inside(real) => {
            let text = read_regular(&real, 4 * MAX_METADATA_BYTES)
                .map_err(|e| format!("{} cannot be read: {e}", path.display()))?;
            let json = serde_json::from_slice(&text)
                .map_err(|e| format!("{} is not valid JSON: {e}", path.display()))?;
            Ok((path, json))
        }
        InPlugin::Outside(why) => Err(format!("{what} {why}")),
        InPlugin::Missing => Err(format!(
            "{what} {} names a missing file ({})",
            json_string(rel),
            path.display()
        )),
        InPlugin::Loops => Err(format!(
            "{what} {} loops (a symlink cycle)",
            json_string(rel)
        )),
        InPlugin::Unreadable(e) => Err(format!("{what} {} cannot be read: {e}", json_string(rel))),
    }
}

/// The two kinds of document a plugin brings.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `{"hooks": {...}}`, or (inline in `plugin.json`) the events object itself.
    Hooks,
    /// `{"mcpServers": {...}}`, or the servers bare.
    Mcp,
}

/// Adds a document of `kind` to the plugin, in its normal shape, unless the same file was read
/// already (inline documents are always new).
fn push(
    p: &mut ClaudePlugin,
    kind: Kind,
    seen: &mut HashSet<PathBuf>,
    problems: &mut Vec<String>,
    part: (PathBuf, Value),
) {
    let (path, json) = part;
    let inline = path.ends_with(".claude-plugin/plugin.json");
    if !inline && !seen.insert(real(&path)) {
        return;
    }
    let (key, shaped) = match kind {
        Kind::Hooks => ("hooks", hooks_doc(json, inline)),
        Kind::Mcp => ("mcpServers", mcp_doc(json)),
    };
    match shaped {
        Ok(map) => {
            let mut doc = Map::new();
            doc.insert(key.into(), Value::Object(map));
            let out = if kind == Kind::Hooks {
                &mut p.hooks
            } else {
                &mut p.mcp
            };
            out.push(Part {
                path,
                json: Value::Object(doc),
            });
        }
        Err(why) => problems.push(format!("{} {why}", path.display())),
    }
}

fn hooks_doc(json: Value, inline: bool) -> Result<Map<String, Value>, String> {
    match json {
        Value::Object(mut map) if map.get("hooks").is_some_and(Value::is_object) => {
            match map.remove("hooks") {
                Some(Value::Object(events)) => Ok(events),
                _ => Err("has no hooks".into()),
            }
        }
        Value::Object(map) if inline => Ok(map),
        _ => Err("must be an object with \"hooks\": {event: [matcher groups]}".into()),
    }
}

fn mcp_doc(json: Value) -> Result<Map<String, Value>, String> {
    match json {
        Value::Object(mut map) => match map.remove("mcpServers") {
            Some(Value::Object(servers)) => Ok(servers),
            Some(_) => Err("\"mcpServers\" must be an object".into()),
            None => Ok(map),
        },
        _ => Err("must be a JSON object of MCP servers".into()),
    }
}

/// Tool paths: a `cmdc-plugin.json` beside `.claude-plugin/` lists them; else `tools/` when
/// it exists.
fn tool_paths(p: &ClaudePlugin) -> Result<Vec<String>, String> {
    match in_plugin(&p.root, MANIFEST) {
        InPlugin::Missing => {}
        InPlugin::Inside(real) => {
            let text = read_regular(&real, MAX_METADATA_BYTES)
                .map_err(|e| format!("{} cannot be read: {e}", MANIFEST))?;
            let (_, _, tools, _) =
                read_manifest(&text).map_err(|e| format!("{} refused: {e}", MANIFEST))?;
            return Ok(tools);
        }
        InPlugin::Outside(why) => return Err(format!("file {why}")),
        InPlugin::Loops => return Err(format!("{} loops (a symlink cycle)", MANIFEST)),
        InPlugin::Unreadable(e) => return Err(format!("{} cannot be read: {e}", MANIFEST)),
    }
    match in_plugin(&p.root, "tools") {
        InPlugin::Inside(real) if real.is_dir() => Ok(vec!["tools".into()]),
        InPlugin::Inside(_) | InPlugin::Missing => Ok(Vec::new()),
        InPlugin::Outside(why) => Err(format!("tool folder {why}")),
        InPlugin::Loops => Err("tool folder \"tools\" loops (a symlink cycle)".into()),
        InPlugin::Unreadable(e) => Err(format!("tool folder \"tools\" cannot be read: {e}")),
    }
}
