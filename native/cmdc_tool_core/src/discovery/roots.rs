//! Which folders a scan looks in, in precedence order: explicit paths, project folders (when
//! trusted), user folders, plugins; and how a path as the user wrote it is expanded.

use std::collections::HashSet;
use std::path::{Component, Path, PathBuf};

use serde_json::Value;

use super::plugins::scan_plugins;
use super::trust::project_trusted;
use super::walk::visit_root;
use super::{Config, Ctx, NoteKind, Scan, Source, PROVIDER_DIRS, TRUST_FILE};

/// Expands `~` (alone or followed by `/`) to `home` and makes relative paths absolute under
/// `cwd`; `.` and `..` components are resolved lexically, as `Path.expand/1` does (the real
/// path, which identifies the file, follows symlinks).
pub fn expand(path: &str, cwd: &Path, home: &Path) -> PathBuf {
    let joined = if path == "~" {
        home.to_path_buf()
    } else if let Some(rest) = path.strip_prefix("~/") {
        home.join(rest)
    } else {
        let p = Path::new(path);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            cwd.join(p)
        }
    };
    let mut out = PathBuf::new();
    for c in joined.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() && !out.has_root() {
                    out.push(c);
                }
            }
            other => out.push(other),
        }
    }
    out
}

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

    if config.explicit {
        for p in &config.paths {
            let path = expand(p, &cwd, &home);
            cx.enter(Source::Explicit, "explicit", &path, None);
            visit_root(&mut cx, &path, true);
        }
    }

    if config.project {
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
    }

    cx.scan
}

/// The user tool folders, in precedence order: `$CMDC_HOME/tools`, `~/.cmdc/tools`,
/// `~/.claude/tools`, `~/.codex/tools`.
pub fn user_dirs(config: &Config, home: &Path) -> Vec<(&'static str, PathBuf)> {
    let mut dirs = Vec::new();
    if let Some(ch) = &config.cmdc_home {
        dirs.push((
            "cmdc",
            expand(&ch.to_string_lossy(), &config.cwd, home).join("tools"),
        ));
    }
    for (provider, dir) in PROVIDER_DIRS {
        dirs.push((provider, home.join(dir)));
    }
    dirs
}

pub(super) fn cmdc_homes(config: &Config, home: &Path) -> Vec<PathBuf> {
    let mut homes = Vec::new();
    if let Some(ch) = &config.cmdc_home {
        homes.push(expand(&ch.to_string_lossy(), &config.cwd, home));
    }
    let default = home.join(".cmdc");
    if !homes.contains(&default) {
        homes.push(default);
    }
    homes
}

fn plugin_homes(config: &Config, home: &Path) -> Vec<PathBuf> {
    cmdc_homes(config, home)
        .into_iter()
        .map(|h| h.join("plugins"))
        .collect()
}

pub(super) fn json_string(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}
