//! Which folders a scan looks in, in precedence order: explicit paths, project folders (when
//! trusted), user folders, plugins; and how a path as the user wrote it is expanded.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::claude_plugins::{claude_plugins, PluginStatus};
use super::model::{
    json_string, Config, Ctx, NoteKind, Plugin, Scan, Source, PROVIDER_DIRS, TRUST_FILE,
};
use super::plugins::{scan_plugin_tool, scan_plugins};
use super::trust::project_trusted;
use super::walk::visit_root;
use crate::fs::expand;

/// Scans every enabled source in precedence order: explicit paths, project folders (when
/// trusted), user folders, plugins.
pub fn scan(config: &Config) -> Scan {
    let mut cx = Ctx {
        scan: Scan::default(),
        seen: HashSet::new(),
        seen_from: Vec::new(),
        source: Source::Explicit,
        provider: "explicit".into(),
        root: PathBuf::new(),
        plugin: None,
    };
    let cwd = expand(&config.cwd.to_string_lossy(), Path::new("/"), &config.home);
    let home = config.home.clone();
    check_homes(&mut cx, config, &home);

    if config.explicit {
        for p in &config.paths {
            let path = expand(p, &cwd, &home);
            cx.enter(Source::Explicit, "explicit", &path, None);
            visit_root(&mut cx, &path, true);
        }
    }

    // Run from the home folder, the project folders are the user's own (`~/.cmdc/tools`, …):
    // the user pass loads them as user files, not as an untrusted project.
    if config.project && !(config.user && is_home(&cwd, &home)) {
        cx.enter(Source::Project, "project", &cwd, None);
        let trusted = project_trusted(&mut cx, config, &cwd, &home);
        cx.scan.project_trusted = trusted;
        for (provider, dir) in PROVIDER_DIRS {
            let folder = cwd.join(dir);
            cx.enter(Source::Project, provider, &folder, None);
            if trusted {
                visit_root(&mut cx, &folder, false);
            } else if folder.is_dir() {
                let reason = format!(
                    "project folder not trusted: {} may hold code from a repository you just \
                     cloned, so it is not loaded. To trust it, run `mix cmdc.tools trust` in \
                     the project (or pass --trust for one run, `trust_project: true` from \
                     Elixir): it adds {} to {}",
                    folder.display(),
                    json_string(&cwd.to_string_lossy()),
                    home.join(".cmdc").join(TRUST_FILE).display()
                );
                cx.note(&folder, NoteKind::Untrusted, reason);
            }
        }
    }

    if config.user {
        for (provider, folder) in user_dirs(config, &home) {
            cx.enter(Source::User, provider, &folder, None);
            visit_root(&mut cx, &folder, false);
        }
    }

    if config.plugins {
        for dir in plugin_homes(config, &home) {
            scan_plugins(&mut cx, &dir);
        }
        scan_claude_plugins(&mut cx, config);
    }

    cx.scan
}

/// Whether `cwd` is the home folder (compared as real paths when they exist).
fn is_home(cwd: &Path, home: &Path) -> bool {
    let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    home.is_absolute() && real(cwd) == real(home)
}

/// Notes a `$CMDC_HOME` or home folder that is not used (see [`cmdc_home`]).
fn check_homes(cx: &mut Ctx, config: &Config, home: &Path) {
    cx.enter(Source::User, "cmdc", home, None);
    if !home.is_absolute() {
        let reason = format!(
            "the home folder {} is not an absolute path: user folders, plugins and the trust \
             list are not read (set HOME to an absolute path)",
            json_string(&home.to_string_lossy())
        );
        cx.note(home, NoteKind::BadHome, reason);
    }
    if let Err(reason) = config.cmdc_home(home) {
        let raw = config.cmdc_home.clone().unwrap_or_default();
        cx.note(&raw, NoteKind::BadHome, reason);
    }
}

/// The user tool folders, in precedence order: `$CMDC_HOME/tools`, `~/.cmdc/tools`,
/// `~/.claude/tools`, `~/.codex/tools`.
pub fn user_dirs(config: &Config, home: &Path) -> Vec<(&'static str, PathBuf)> {
    let mut dirs = Vec::new();
    if let Ok(Some(ch)) = config.cmdc_home(home) {
        dirs.push(("cmdc", ch.join("tools")));
    }
    if home.is_absolute() {
        for (provider, dir) in PROVIDER_DIRS {
            dirs.push((provider, home.join(dir)));
        }
    }
    dirs
}

fn plugin_homes(config: &Config, home: &Path) -> Vec<PathBuf> {
    config
        .cmdc_homes(home)
        .into_iter()
        .map(|h| h.join("plugins"))
        .collect()
}

/// Claude Code's enabled plugins: each one's tool paths walked as a plugin's (provider
/// `claude-plugin:<name@marketplace>`); a broken one, and a bad installed list, noted.
fn scan_claude_plugins(cx: &mut Ctx, config: &Config) {
    let found = claude_plugins(config);
    for (file, reason) in &found.problems {
        cx.enter(Source::Plugin, "claude-plugin", file, None);
        cx.note(
            file,
            NoteKind::BadManifest,
            format!("{}: {reason}", file.display()),
        );
    }
    for p in &found.plugins {
        let provider = match p.id.strip_suffix("@cmdc") {
            Some(name) if p.scope == "cmdc" => format!("plugin:{name}"),
            _ => format!("claude-plugin:{}", p.id),
        };
        match p.status {
            PluginStatus::Enabled => {
                // The plain name: it is also the tools' namespace (no `@`).
                let plugin = Plugin {
                    name: p.name.clone(),
                    version: p.version.clone(),
                    dir: p.root.clone(),
                };
                for rel in &p.tools {
                    scan_plugin_tool(cx, &plugin, &provider, rel);
                }
            }
            PluginStatus::Broken | PluginStatus::NotInstalled => {
                cx.enter(Source::Plugin, &provider, &p.root, None);
                let kind = if p
                    .problems
                    .iter()
                    .any(|w| w.contains("leaves the plugin folder"))
                {
                    NoteKind::OutsidePlugin
                } else {
                    NoteKind::BadManifest
                };
                let what = if p.scope == "cmdc" {
                    "plugin (hooks and MCP servers)"
                } else {
                    "Claude Code plugin"
                };
                let reason = format!("{what} {} refused: {}", p.id, p.problems.join("; "));
                cx.note(&p.root, kind, reason);
            }
            PluginStatus::Disabled => {}
        }
    }
}
