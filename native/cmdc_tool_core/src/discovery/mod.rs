//! Discovering tool files on disk: which folders to look in (explicit paths, project, user,
//! plugins), walking them, resolving real paths (a file reached twice is kept once), classifying
//! files, reading mtimes, metadata (`<stem>.json`, `<stem>.md`), plugin manifests
//! (`cmdc-plugin.json`) and the trust list (`trusted.json`).
//!
//! Nothing here executes or compiles anything: the scan only reads the file system and returns
//! what it found, in precedence order. The Elixir side (`CMDC.Tool.Discovery`) compiles.
//!
//! Layers, each file using only those above it: `model` (types, the walk's state) ←
//! `metadata` ← `walk` ← `plugins`, `trust` ← `claude_plugins` (Claude Code's installed
//! plugins) ← `roots` (the entry point, [`scan`]) and `digest`.
//! File reads and path expansion are `crate::fs`.

mod claude_plugins;
mod digest;
mod metadata;
mod model;
mod plugins;
mod roots;
mod trust;
mod walk;

pub use claude_plugins::{
    claude_plugins, ClaudePlugin, ClaudePlugins, Part, PluginStatus, CLAUDE_PLUGINS_DIR,
    INSTALLED_FILE,
};
pub use digest::digest;
pub use metadata::{markdown_body, markdown_display, parse_meta, valid_name};
pub use model::{
    Config, Meta, Note, NoteKind, Plugin, Scan, Source, ToolFile, ToolKind, Trust, MANIFEST,
    MAX_DEPTH, MAX_METADATA_BYTES, PROVIDER_DIRS, TRUST_FILE,
};
pub use plugins::read_manifest;
pub use roots::{scan, user_dirs};
pub use trust::{is_trusted, read_trust_list};

#[cfg(test)]
mod tests;
