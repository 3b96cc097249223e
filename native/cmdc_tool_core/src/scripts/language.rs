//! What a script language is to the rest of `scripts/`: one [`Language`] implementation per
//! language (`python.rs`, `powershell.rs`, listed in `languages.rs`). Loading and calling
//! (`load.rs`, `pool.rs`) only ask these questions, so a language is added in one file.

use std::collections::HashMap;
use std::ffi::OsString;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;

use serde_json::Value;

use crate::error::Result;

/// Per-language settings: a language's [`Language::name`] → its keys → values (Python:
/// `worker`, `interpreter`; PowerShell: `runner`). The generic options carry this map; only
/// the language reads its keys.
#[derive(Debug, Clone, Default)]
pub struct Settings(pub HashMap<String, HashMap<String, String>>);

impl Settings {
    /// The value of `key` for `language`, when set.
    pub fn get(&self, language: &str, key: &str) -> Option<&str> {
        self.0.get(language)?.get(key).map(String::as_str)
    }

    /// Sets `key` of `language` (builder style).
    pub fn with(mut self, language: &str, key: &str, value: impl Into<String>) -> Self {
        self.0
            .entry(language.to_owned())
            .or_default()
            .insert(key.to_owned(), value.into());
        self
    }
}

/// How descriptions are read.
pub enum Describer {
    /// In this process from the source text (`source`, `path`) → the description document.
    Native(fn(&str, &str) -> Value),
    /// By a process started with [`Mode::Describe`] that answers `describe` frames
    /// (`protocol.rs`); one serves many scripts of one interpreter.
    Process,
}

/// How calls run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Calls {
    /// Warm workers per script ([`Mode::Serve`]), speaking the frames of `protocol.rs`.
    Warm,
    /// A process per call ([`Mode::Call`]): the request as JSON on its stdin, the answer one
    /// stdout line starting with `\x1eCMDC_RESULT ` or `\x1eCMDC_ERROR `.
    PerCall,
}

/// What a started process is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Describe,
    Serve,
    Call,
}

/// A command to start: program, arguments and the environment it needs.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Program {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    pub env: Vec<(&'static str, &'static str)>,
}

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One script language.
pub trait Language: Send + Sync {
    /// Its name: the atom Elixir gets (`:python`) and the key of its [`Settings`].
    fn name(&self) -> &'static str;
    /// Its name in messages (`Python`).
    fn label(&self) -> &'static str;
    /// File extensions, lower case, without the dot.
    fn extensions(&self) -> &'static [&'static str];
    /// The `type` field of its description document (and of the cache).
    fn module_type(&self) -> &'static str;
    /// The program its tools need on PATH (`doctor` checks it): `python3`, `pwsh`.
    fn program(&self) -> &'static str;
    /// How to let one function run without asking, as a sentence's object with `{function}`
    /// where the function's name goes (the approval message appends "in <path>").
    fn allow_hint(&self) -> &'static str;
    fn describer(&self) -> Describer;
    fn calls(&self) -> Calls;
    /// The process to start for `mode` and the script at `script` (a describer serves the
    /// scripts of its folder's interpreter), with the caller's PATH. An error is a
    /// [`crate::error::Error::Script`] when it has a kind of its own (e.g. `pwsh_missing`).
    fn command<'a>(
        &'a self,
        mode: Mode,
        script: &'a Path,
        settings: &'a Settings,
        path_env: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Program>>;
}
