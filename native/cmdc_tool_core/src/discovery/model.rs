//! What a scan is made of: its configuration, the files and notes it reports, and the state of
//! one walk ([`Ctx`]). Every other discovery file reads these; this one reads only `home`.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::home;

/// Folders nested deeper than this under a tool folder are not walked.
pub const MAX_DEPTH: usize = 8;
/// Metadata files larger than this are refused (they are read on every scan).
pub const MAX_METADATA_BYTES: u64 = 256 * 1024;
/// The plugin manifest's file name.
pub const MANIFEST: &str = "cmdc-plugin.json";
/// The trust list's file name, under `~/.cmdc/` (and `$CMDC_HOME/`).
pub const TRUST_FILE: &str = "trusted.json";

/// The tool folders of each provider, relative to the project (`cwd`) or the home folder.
pub const PROVIDER_DIRS: [(&str, &str); 3] = [
    ("cmdc", ".cmdc/tools"),
    ("claude", ".claude/tools"),
    ("codex", ".codex/tools"),
];

/// Where a file was found; also the precedence order (an earlier source wins a name conflict).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Source {
    Explicit,
    Project,
    User,
    Plugin,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Explicit => "explicit",
            Source::Project => "project",
            Source::User => "user",
            Source::Plugin => "plugin",
        }
    }
}

/// Whether project folders are trusted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trust {
    /// Trusted when `cwd` is (under) a folder of the trust list or of `Config::trusted`.
    Auto,
    Always,
    Never,
}

/// What to scan. Paths are as the user wrote them: `~` and relative paths are expanded here.
#[derive(Clone, Debug)]
pub struct Config {
    pub cwd: PathBuf,
    pub home: PathBuf,
    pub cmdc_home: Option<PathBuf>,
    /// Explicit files or folders (source 1).
    pub paths: Vec<String>,
    pub explicit: bool,
    pub project: bool,
    pub user: bool,
    pub plugins: bool,
    pub trust: Trust,
    /// Extra trusted folders (as if listed in the trust file).
    pub trusted: Vec<String>,
}

impl Config {
    pub fn new(cwd: impl Into<PathBuf>, home: impl Into<PathBuf>) -> Config {
        Config {
            cwd: cwd.into(),
            home: home.into(),
            cmdc_home: None,
            paths: Vec::new(),
            explicit: true,
            project: true,
            user: true,
            plugins: true,
            trust: Trust::Auto,
            trusted: Vec::new(),
        }
    }
}

/// What a tool file is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolKind {
    /// `.ex` / `.exs`: compiled by the Elixir side.
    Elixir,
    /// `.py` / `.ps1`: handed to the script loader.
    Script,
}

impl ToolKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ToolKind::Elixir => "elixir",
            ToolKind::Script => "script",
        }
    }
}

/// Metadata for the tools of one file (`<stem>.json`), or for one tool (its `tools` entry).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Meta {
    /// A new name for the tool (renaming settles a conflict).
    pub name: Option<String>,
    pub description: Option<String>,
    pub disabled: bool,
    /// Every other key (and the keys of a `settings` object): per-tool settings such as
    /// `timeout` or a permission policy, kept as JSON.
    pub settings: Map<String, Value>,
    /// Per-tool metadata, by the tool's own name (top level only).
    pub tools: BTreeMap<String, Meta>,
}

/// The plugin a file came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Plugin {
    pub name: String,
    pub version: String,
    pub dir: PathBuf,
}

/// A tool file found by the scan.
#[derive(Clone, Debug)]
pub struct ToolFile {
    pub source: Source,
    /// `explicit`, `cmdc`, `claude`, `codex` or `plugin:<name>`.
    pub provider: String,
    /// The folder (or explicit file) the scan started from.
    pub root: PathBuf,
    /// The path as found (absolute, not resolved).
    pub path: PathBuf,
    /// The resolved real path: the identity of the file.
    pub real_path: PathBuf,
    pub kind: ToolKind,
    pub mtime_ns: i64,
    pub size: u64,
    pub meta: Option<Meta>,
    pub meta_path: Option<PathBuf>,
    /// The `<stem>.md` text, front matter removed.
    pub doc: Option<String>,
    /// The title and hints of the `<stem>.md` front matter (see [`markdown_display`]).
    pub doc_settings: Map<String, Value>,
    pub doc_path: Option<PathBuf>,
    /// A script's `<stem>.tool.json` cache, when present (read by the script loader).
    pub cache_path: Option<PathBuf>,
    pub plugin: Option<Plugin>,
}

/// Why a path was not loaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoteKind {
    // ignored
    Unsupported,
    Hidden,
    Duplicate,
    Untrusted,
    Metadata,
    NoManifest,
    PluginDisabled,
    // errors
    NotFound,
    Unreadable,
    BadMetadata,
    BadManifest,
    BadTrustList,
    /// `$CMDC_HOME` or the home folder is not an absolute path: not used.
    BadHome,
    /// A plugin's file or folder resolves (through a symlink) outside the plugin.
    OutsidePlugin,
}

impl NoteKind {
    pub fn as_str(self) -> &'static str {
        match self {
            NoteKind::Unsupported => "unsupported",
            NoteKind::Hidden => "hidden",
            NoteKind::Duplicate => "duplicate",
            NoteKind::Untrusted => "untrusted",
            NoteKind::Metadata => "metadata",
            NoteKind::NoManifest => "no_manifest",
            NoteKind::PluginDisabled => "plugin_disabled",
            NoteKind::NotFound => "not_found",
            NoteKind::Unreadable => "unreadable",
            NoteKind::BadMetadata => "bad_metadata",
            NoteKind::BadManifest => "bad_manifest",
            NoteKind::BadTrustList => "bad_trust_list",
            NoteKind::BadHome => "bad_home",
            NoteKind::OutsidePlugin => "outside_plugin",
        }
    }
}

/// An ignored path or an error, with a reason a person can act on.
#[derive(Clone, Debug)]
pub struct Note {
    pub source: Source,
    pub provider: String,
    pub path: PathBuf,
    pub kind: NoteKind,
    pub reason: String,
}

/// The result of a scan. `files` is in precedence order and holds each real path once.
#[derive(Clone, Debug, Default)]
pub struct Scan {
    pub files: Vec<ToolFile>,
    pub ignored: Vec<Note>,
    pub errors: Vec<Note>,
    /// Whether project folders were trusted (and scanned).
    pub project_trusted: bool,
}

/// The state of one scan: what was found so far, and where the walk is (source, provider, root,
/// plugin), so each note and file says where it came from.
pub(super) struct Ctx {
    pub(super) scan: Scan,
    pub(super) seen: HashSet<PathBuf>,
    pub(super) seen_from: Vec<(PathBuf, PathBuf)>,
    pub(super) source: Source,
    pub(super) provider: String,
    pub(super) root: PathBuf,
    pub(super) plugin: Option<Plugin>,
}

impl Ctx {
    pub(super) fn note(&mut self, path: &Path, kind: NoteKind, reason: String) {
        let note = Note {
            source: self.source,
            provider: self.provider.clone(),
            path: path.to_path_buf(),
            kind,
            reason,
        };
        if matches!(
            kind,
            NoteKind::NotFound
                | NoteKind::Unreadable
                | NoteKind::BadMetadata
                | NoteKind::BadManifest
                | NoteKind::BadTrustList
                | NoteKind::BadHome
                | NoteKind::OutsidePlugin
        ) {
            self.scan.errors.push(note);
        } else {
            self.scan.ignored.push(note);
        }
    }

    pub(super) fn enter(
        &mut self,
        source: Source,
        provider: &str,
        root: &Path,
        plugin: Option<Plugin>,
    ) {
        self.source = source;
        self.provider = provider.to_string();
        self.root = root.to_path_buf();
        self.plugin = plugin;
    }
}

impl Config {
    /// `$CMDC_HOME` as an absolute path (the rule: [`super::home::cmdc_home`]).
    pub fn cmdc_home(&self, home: &Path) -> Result<Option<PathBuf>, String> {
        let raw = self.cmdc_home.as_ref().map(|p| p.to_string_lossy());
        home::cmdc_home(raw.as_deref(), home)
    }

    /// `$CMDC_HOME` (when valid) and `~/.cmdc` (when the home folder is absolute).
    pub(super) fn cmdc_homes(&self, home: &Path) -> Vec<PathBuf> {
        let raw = self.cmdc_home.as_ref().map(|p| p.to_string_lossy());
        home::cmdc_dirs(raw.as_deref(), home)
    }
}

/// `s` as a JSON string literal, for messages that quote a name.
pub(super) fn json_string(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}
