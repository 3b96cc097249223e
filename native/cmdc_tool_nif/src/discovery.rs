//! NIF for discovery: runs `cmdc_tool_core::discovery::scan` on a dirty I/O scheduler (it reads
//! the file system, so its time is unbounded) and converts the result to terms. Compiling the
//! files found is the Elixir side's job.

use std::path::{Path, PathBuf};

use cmdc_tool_core::discovery::{
    self, ClaudePlugin, Config, Meta, Note, NoteKind, Part, Scan, Source, ToolFile, ToolKind, Trust,
};
use rustler::{Encoder, Env, NifMap, Term};

use crate::atoms;
use crate::error::Result;
use crate::options::{self, Options};
use crate::term::from_value;

fn source_atom(source: Source) -> rustler::Atom {
    match source {
        Source::Explicit => atoms::explicit(),
        Source::Project => atoms::project(),
        Source::User => atoms::user(),
        Source::Plugin => atoms::plugin(),
    }
}

fn kind_atom(kind: ToolKind) -> rustler::Atom {
    match kind {
        ToolKind::Elixir => atoms::elixir(),
        ToolKind::Script => atoms::script(),
    }
}

fn note_atom(kind: NoteKind) -> rustler::Atom {
    match kind {
        NoteKind::Unsupported => atoms::unsupported(),
        NoteKind::Hidden => atoms::hidden(),
        NoteKind::Duplicate => atoms::duplicate(),
        NoteKind::Untrusted => atoms::untrusted(),
        NoteKind::Metadata => atoms::metadata(),
        NoteKind::NoManifest => atoms::no_manifest(),
        NoteKind::PluginDisabled => atoms::plugin_disabled(),
        NoteKind::NotFound => atoms::not_found(),
        NoteKind::Unreadable => atoms::unreadable(),
        NoteKind::BadMetadata => atoms::bad_metadata(),
        NoteKind::BadManifest => atoms::bad_manifest(),
        NoteKind::BadTrustList => atoms::bad_trust_list(),
        NoteKind::BadHome => atoms::bad_home(),
        NoteKind::OutsidePlugin => atoms::outside_plugin(),
    }
}

/// The options `CMDC.Tool.Discovery` passes (atom keys; `trust` is `true`, `false` or `nil`
/// for "consult the trust list").
#[derive(NifMap)]
struct ScanOpts {
    cwd: String,
    home: String,
    cmdc_home: Option<String>,
    paths: Vec<String>,
    explicit: bool,
    project: bool,
    user: bool,
    plugins: bool,
    trust: Option<bool>,
    trusted: Vec<String>,
}

impl Options<'_> for ScanOpts {
    const NIF: &'static str = "discovery_scan";
    const EXPECTED: &'static str = "cwd, home (strings), cmdc_home (string or nil), paths, \
        trusted (lists of strings), explicit, project, user, plugins (booleans) and trust (true, \
        false or nil)";
}

impl From<ScanOpts> for Config {
    fn from(opts: ScanOpts) -> Self {
        Config {
            cwd: PathBuf::from(opts.cwd),
            home: PathBuf::from(opts.home),
            // An empty one is passed on: the scan reports it as not absolute.
            cmdc_home: opts.cmdc_home.map(PathBuf::from),
            paths: opts.paths,
            explicit: opts.explicit,
            project: opts.project,
            user: opts.user,
            plugins: opts.plugins,
            trust: match opts.trust {
                None => Trust::Auto,
                Some(true) => Trust::Always,
                Some(false) => Trust::Never,
            },
            trusted: opts.trusted,
        }
    }
}

fn map<'a>(env: Env<'a>, pairs: &[(rustler::Atom, Term<'a>)]) -> Term<'a> {
    let mut keys = [atoms::nil().encode(env); 16];
    let mut values = [atoms::nil().encode(env); 16];
    let n = pairs.len().min(16);
    for (i, (k, v)) in pairs.iter().take(n).enumerate() {
        keys[i] = k.encode(env);
        values[i] = *v;
    }
    Term::map_from_term_arrays(env, &keys[..n], &values[..n])
        .unwrap_or_else(|_| rustler::types::map::map_new(env))
}

fn path_term<'a>(env: Env<'a>, path: &Path) -> Term<'a> {
    path.to_string_lossy().as_ref().encode(env)
}

fn opt_path<'a>(env: Env<'a>, path: &Option<PathBuf>) -> Term<'a> {
    match path {
        Some(p) => path_term(env, p),
        None => atoms::nil().encode(env),
    }
}

fn opt_str<'a>(env: Env<'a>, s: &Option<String>) -> Term<'a> {
    match s {
        Some(s) => s.as_str().encode(env),
        None => atoms::nil().encode(env),
    }
}

fn meta_term<'a>(env: Env<'a>, meta: &Meta) -> Term<'a> {
    let settings = from_value(env, &serde_json::Value::Object(meta.settings.clone()));
    let tool_keys: Vec<Term<'a>> = meta.tools.keys().map(|k| k.as_str().encode(env)).collect();
    let tool_values: Vec<Term<'a>> = meta.tools.values().map(|m| meta_term(env, m)).collect();
    let tools = Term::map_from_term_arrays(env, &tool_keys, &tool_values)
        .unwrap_or_else(|_| rustler::types::map::map_new(env));
    map(
        env,
        &[
            (atoms::name(), opt_str(env, &meta.name)),
            (atoms::description(), opt_str(env, &meta.description)),
            (atoms::disabled(), meta.disabled.encode(env)),
            (atoms::settings(), settings),
            (atoms::tools(), tools),
        ],
    )
}

fn file_term<'a>(env: Env<'a>, f: &ToolFile) -> Term<'a> {
    let meta = match &f.meta {
        Some(m) => meta_term(env, m),
        None => atoms::nil().encode(env),
    };
    let plugin = match &f.plugin {
        Some(p) => map(
            env,
            &[
                (atoms::name(), p.name.as_str().encode(env)),
                (atoms::version(), p.version.as_str().encode(env)),
                (atoms::dir(), path_term(env, &p.dir)),
            ],
        ),
        None => atoms::nil().encode(env),
    };
    map(
        env,
        &[
            (atoms::source(), source_atom(f.source).encode(env)),
            (atoms::provider(), f.provider.as_str().encode(env)),
            (atoms::root(), path_term(env, &f.root)),
            (atoms::path(), path_term(env, &f.path)),
            (atoms::real_path(), path_term(env, &f.real_path)),
            (atoms::kind(), kind_atom(f.kind).encode(env)),
            (atoms::mtime(), f.mtime_ns.encode(env)),
            (atoms::size(), f.size.encode(env)),
            (atoms::meta(), meta),
            (atoms::meta_path(), opt_path(env, &f.meta_path)),
            (atoms::doc(), opt_str(env, &f.doc)),
            (
                atoms::doc_settings(),
                from_value(env, &serde_json::Value::Object(f.doc_settings.clone())),
            ),
            (atoms::doc_path(), opt_path(env, &f.doc_path)),
            (atoms::cache_path(), opt_path(env, &f.cache_path)),
            (atoms::plugin(), plugin),
        ],
    )
}

fn note_term<'a>(env: Env<'a>, n: &Note) -> Term<'a> {
    map(
        env,
        &[
            (atoms::r#type(), note_atom(n.kind).encode(env)),
            (atoms::source(), source_atom(n.source).encode(env)),
            (atoms::provider(), n.provider.as_str().encode(env)),
            (atoms::path(), path_term(env, &n.path)),
            (atoms::reason(), n.reason.as_str().encode(env)),
        ],
    )
}

fn scan_term<'a>(env: Env<'a>, scan: &Scan) -> Term<'a> {
    let files: Vec<Term<'a>> = scan.files.iter().map(|f| file_term(env, f)).collect();
    let ignored: Vec<Term<'a>> = scan.ignored.iter().map(|n| note_term(env, n)).collect();
    let errors: Vec<Term<'a>> = scan.errors.iter().map(|n| note_term(env, n)).collect();
    map(
        env,
        &[
            (atoms::files(), files.encode(env)),
            (atoms::ignored(), ignored.encode(env)),
            (atoms::errors(), errors.encode(env)),
            (atoms::project_trusted(), scan.project_trusted.encode(env)),
        ],
    )
}

/// Scans the tool folders the options name: `{:ok, {%{files, ignored, errors,
/// project_trusted}, digest}}`, or `{:ok, {:unchanged, digest}}` when the scan's digest equals
/// `previous` (an integer from an earlier call, or `nil`). Folders that cannot be read are
/// entries of `errors`, not a failure; `{:error, message}` only for options of the wrong shape.
/// Runs on a dirty I/O scheduler: it walks folders and reads files.
#[rustler::nif(schedule = "DirtyIo")]
fn discovery_scan<'a>(env: Env<'a>, opts: Term<'a>, previous: Option<u64>) -> Result<Term<'a>> {
    let config = Config::from(options::decode::<ScanOpts>(opts)?);
    let scan = discovery::scan(&config);
    let digest = discovery::digest(&scan);
    Ok(if previous == Some(digest) {
        (atoms::unchanged(), digest).encode(env)
    } else {
        (scan_term(env, &scan), digest).encode(env)
    })
}

/// A path as JSON text: lossy, so a non-UTF-8 name never fails the conversion.
fn path_json(path: &Path) -> serde_json::Value {
    serde_json::Value::String(path.to_string_lossy().into_owned())
}

/// One Claude Code plugin as JSON (string keys; the Elixir side makes the struct).
fn claude_plugin_json(p: &ClaudePlugin) -> serde_json::Value {
    let parts = |parts: &[Part]| {
        parts
            .iter()
            .map(|part| serde_json::json!({"path": path_json(&part.path), "json": part.json}))
            .collect::<Vec<_>>()
    };
    serde_json::json!({
        "id": p.id,
        "name": p.name,
        "marketplace": p.marketplace,
        "version": p.version,
        "scope": p.scope,
        "root": path_json(&p.root),
        "status": p.status.as_str(),
        "decided_by": p.decided_by.as_deref().map(path_json),
        "description": p.description,
        "hooks": parts(&p.hooks),
        "mcp": parts(&p.mcp),
        "tools": p.tools,
        "problems": p.problems,
    })
}

/// Claude Code's installed plugins (`~/.claude/plugins/installed_plugins.json`, enabled by
/// `enabledPlugins`): `{:ok, %{"plugins" => [...], "problems" => [{path, reason}], "settings"
/// => [path]}}` with string keys (see `cmdc_tool_core::discovery::claude_plugins`). Takes the
/// options of `discovery_scan`. Runs on a dirty I/O scheduler: it reads files.
#[rustler::nif(schedule = "DirtyIo")]
fn discovery_claude_plugins<'a>(env: Env<'a>, opts: Term<'a>) -> Result<Term<'a>> {
    let config = Config::from(options::decode::<ScanOpts>(opts)?);
    let found = discovery::claude_plugins(&config);
    let value = serde_json::json!({
        "plugins": found.plugins.iter().map(claude_plugin_json).collect::<Vec<_>>(),
        "problems": found
            .problems
            .iter()
            .map(|(path, reason)| serde_json::json!({"path": path_json(path), "reason": reason}))
            .collect::<Vec<_>>(),
        "settings": found.settings.iter().map(|p| path_json(p)).collect::<Vec<_>>(),
    });
    Ok(from_value(env, &value))
}
