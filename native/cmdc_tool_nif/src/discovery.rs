//! NIF for discovery: runs `cmdc_tool_core::discovery::scan` on a dirty I/O scheduler (it reads
//! the file system, so its time is unbounded) and converts the result to terms. Compiling the
//! files found is the Elixir side's job.

use std::path::{Path, PathBuf};

use cmdc_tool_core::discovery::{self, Config, Meta, Note, Scan, ToolFile, Trust};
use rustler::{Encoder, Env, NifMap, Term};

use crate::atoms;
use crate::term::from_value;

mod keys {
    rustler::atoms! {
        files, ignored, errors, project_trusted,
        source, provider, root, path, real_path, kind, mtime, size, meta, meta_path, doc,
        doc_path, cache_path, plugin, name, version, dir, description, disabled, settings, tools,
        r#type = "type", reason,
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

fn config(opts: ScanOpts) -> Config {
    Config {
        cwd: PathBuf::from(opts.cwd),
        home: PathBuf::from(opts.home),
        cmdc_home: opts.cmdc_home.filter(|h| !h.is_empty()).map(PathBuf::from),
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

fn map<'a>(env: Env<'a>, pairs: &[(rustler::Atom, Term<'a>)]) -> Term<'a> {
    let keys: Vec<Term<'a>> = pairs.iter().map(|(k, _)| k.encode(env)).collect();
    let values: Vec<Term<'a>> = pairs.iter().map(|(_, v)| *v).collect();
    Term::map_from_term_arrays(env, &keys, &values)
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

fn atom<'a>(env: Env<'a>, name: &str) -> Term<'a> {
    match rustler::Atom::from_str(env, name) {
        Ok(a) => a.encode(env),
        Err(_) => atoms::nil().encode(env),
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
            (keys::name(), opt_str(env, &meta.name)),
            (keys::description(), opt_str(env, &meta.description)),
            (keys::disabled(), meta.disabled.encode(env)),
            (keys::settings(), settings),
            (keys::tools(), tools),
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
                (keys::name(), p.name.as_str().encode(env)),
                (keys::version(), p.version.as_str().encode(env)),
                (keys::dir(), path_term(env, &p.dir)),
            ],
        ),
        None => atoms::nil().encode(env),
    };
    map(
        env,
        &[
            (keys::source(), atom(env, f.source.as_str())),
            (keys::provider(), f.provider.as_str().encode(env)),
            (keys::root(), path_term(env, &f.root)),
            (keys::path(), path_term(env, &f.path)),
            (keys::real_path(), path_term(env, &f.real_path)),
            (keys::kind(), atom(env, f.kind.as_str())),
            (keys::mtime(), f.mtime_ns.encode(env)),
            (keys::size(), f.size.encode(env)),
            (keys::meta(), meta),
            (keys::meta_path(), opt_path(env, &f.meta_path)),
            (keys::doc(), opt_str(env, &f.doc)),
            (keys::doc_path(), opt_path(env, &f.doc_path)),
            (keys::cache_path(), opt_path(env, &f.cache_path)),
            (keys::plugin(), plugin),
        ],
    )
}

fn note_term<'a>(env: Env<'a>, n: &Note) -> Term<'a> {
    map(
        env,
        &[
            (keys::r#type(), atom(env, n.kind.as_str())),
            (keys::source(), atom(env, n.source.as_str())),
            (keys::provider(), n.provider.as_str().encode(env)),
            (keys::path(), path_term(env, &n.path)),
            (keys::reason(), n.reason.as_str().encode(env)),
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
            (keys::files(), files.encode(env)),
            (keys::ignored(), ignored.encode(env)),
            (keys::errors(), errors.encode(env)),
            (keys::project_trusted(), scan.project_trusted.encode(env)),
        ],
    )
}

/// Scans the tool folders the options name: `%{files, ignored, errors, project_trusted}`.
/// Runs on a dirty I/O scheduler: it walks folders and reads files.
#[rustler::nif(schedule = "DirtyIo")]
fn discovery_scan<'a>(env: Env<'a>, opts: Term<'a>) -> Term<'a> {
    match opts.decode::<ScanOpts>() {
        Ok(opts) => {
            let scan = discovery::scan(&config(opts));
            (atoms::ok(), scan_term(env, &scan)).encode(env)
        }
        Err(_) => (
            atoms::error(),
            "discovery_scan: expected a map with cwd, home (strings), cmdc_home (string or nil), \
             paths, trusted (lists of strings), explicit, project, user, plugins (booleans) and \
             trust (true, false or nil)",
        )
            .encode(env),
    }
}
