use super::*;
use crate::fs::expand;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

struct Tmp(PathBuf);

impl Tmp {
    fn new() -> Tmp {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "cmdc_discovery_{}_{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        Tmp(fs::canonicalize(&dir).unwrap())
    }

    fn write(&self, rel: &str, text: &str) -> PathBuf {
        let path = self.0.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, text).unwrap();
        path
    }

    fn config(&self) -> Config {
        let mut c = Config::new(self.0.join("proj"), self.0.join("home"));
        c.trust = Trust::Always;
        fs::create_dir_all(self.0.join("proj")).unwrap();
        fs::create_dir_all(self.0.join("home")).unwrap();
        c
    }
}

impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn names(scan: &Scan) -> Vec<(String, String)> {
    scan.files
        .iter()
        .map(|f| {
            (
                f.provider.clone(),
                f.path.file_name().unwrap().to_string_lossy().into_owned(),
            )
        })
        .collect()
}

#[test]
fn expands_tilde_and_relative_paths() {
    let cwd = Path::new("/work/p");
    let home = Path::new("/home/u");
    assert_eq!(expand("~", cwd, home), PathBuf::from("/home/u"));
    assert_eq!(
        expand("~/t/a.ex", cwd, home),
        PathBuf::from("/home/u/t/a.ex")
    );
    assert_eq!(
        expand("./t/a.ex", cwd, home),
        PathBuf::from("/work/p/t/a.ex")
    );
    assert_eq!(expand("../x", cwd, home), PathBuf::from("/work/x"));
    assert_eq!(expand("/../x", cwd, home), PathBuf::from("/x"));
    assert_eq!(expand("/abs", cwd, home), PathBuf::from("/abs"));
    assert_eq!(expand("~x", cwd, home), PathBuf::from("/work/p/~x"));
}

#[test]
fn scans_every_source_in_precedence_order() {
    let t = Tmp::new();
    t.write("extra/e.ex", "");
    t.write("proj/.cmdc/tools/p1.ex", "");
    t.write("proj/.claude/tools/p2.exs", "");
    t.write("proj/.codex/tools/p3.ex", "");
    t.write("home/.cmdc/tools/u1.ex", "");
    t.write("home/.claude/tools/u2.ex", "");
    t.write("home/.codex/tools/u3.py", "");
    t.write("cmdc_home/tools/u0.ex", "");
    t.write(
        "home/.cmdc/plugins/zz/cmdc-plugin.json",
        r#"{"name":"zz","version":"1.0.0","tools":["t"]}"#,
    );
    t.write("home/.cmdc/plugins/zz/t/g.ex", "");
    let mut c = t.config();
    c.paths = vec!["../extra".into()];
    c.cmdc_home = Some(t.0.join("cmdc_home"));
    let scan = scan(&c);
    assert!(scan.errors.is_empty(), "{:?}", scan.errors);
    assert_eq!(
        names(&scan),
        [
            ("explicit", "e.ex"),
            ("cmdc", "p1.ex"),
            ("claude", "p2.exs"),
            ("codex", "p3.ex"),
            ("cmdc", "u0.ex"),
            ("cmdc", "u1.ex"),
            ("claude", "u2.ex"),
            ("codex", "u3.py"),
            ("plugin:zz", "g.ex"),
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()))
    );
    let sources: Vec<Source> = scan.files.iter().map(|f| f.source).collect();
    let mut sorted = sources.clone();
    sorted.sort();
    assert_eq!(sources, sorted);
    assert_eq!(scan.files[7].kind, ToolKind::Script);
    let plugin = scan.files[8].plugin.as_ref().unwrap();
    assert_eq!(
        (plugin.name.as_str(), plugin.version.as_str()),
        ("zz", "1.0.0")
    );
}

#[test]
fn sources_can_be_switched_off() {
    let t = Tmp::new();
    t.write("proj/.cmdc/tools/p.ex", "");
    t.write("home/.cmdc/tools/u.ex", "");
    let mut c = t.config();
    c.project = false;
    assert_eq!(names(&scan(&c)), [("cmdc".into(), "u.ex".into())]);
    c.project = true;
    c.user = false;
    assert_eq!(names(&scan(&c)), [("cmdc".into(), "p.ex".into())]);
}

#[test]
fn a_file_reached_twice_is_kept_once() {
    let t = Tmp::new();
    let real = t.write("home/.cmdc/tools/a.ex", "");
    fs::create_dir_all(t.0.join("proj/.cmdc/tools")).unwrap();
    std::os::unix::fs::symlink(&real, t.0.join("proj/.cmdc/tools/link.ex")).unwrap();
    fs::create_dir_all(t.0.join("proj/.codex")).unwrap();
    std::os::unix::fs::symlink(t.0.join("home/.cmdc/tools"), t.0.join("proj/.codex/tools"))
        .unwrap();
    let mut c = t.config();
    c.paths = vec![
        "~/.cmdc/tools/a.ex".into(),
        "~/.cmdc/tools/../tools/a.ex".into(),
    ];
    let scan = scan(&c);
    assert_eq!(names(&scan), [("explicit".into(), "a.ex".into())]);
    assert_eq!(scan.files[0].real_path, real);
    let dups: Vec<_> = scan
        .ignored
        .iter()
        .filter(|n| n.kind == NoteKind::Duplicate)
        .map(|n| n.provider.as_str())
        .collect();
    assert_eq!(dups, ["explicit", "cmdc", "codex", "cmdc"]);
    assert!(scan.ignored[0].reason.contains("loaded once"));
}

#[test]
fn symlink_cycles_terminate() {
    let t = Tmp::new();
    t.write("home/.cmdc/tools/a.ex", "");
    std::os::unix::fs::symlink(
        t.0.join("home/.cmdc/tools"),
        t.0.join("home/.cmdc/tools/loop"),
    )
    .unwrap();
    let scan = scan(&t.config());
    assert_eq!(names(&scan), [("cmdc".into(), "a.ex".into())]);
}

#[test]
fn classifies_files() {
    let t = Tmp::new();
    t.write("home/.cmdc/tools/a.ex", "");
    t.write("home/.cmdc/tools/b.PY", "");
    t.write("home/.cmdc/tools/c.ps1", "");
    t.write("home/.cmdc/tools/c.tool.json", "{}");
    t.write("home/.cmdc/tools/notes.md", "hello");
    t.write("home/.cmdc/tools/data.json", "{}");
    t.write("home/.cmdc/tools/x.txt", "");
    t.write("home/.cmdc/tools/.hidden.ex", "");
    t.write("home/.cmdc/tools/sub/d.exs", "");
    let scan = scan(&t.config());
    assert_eq!(
        names(&scan).into_iter().map(|(_, n)| n).collect::<Vec<_>>(),
        ["a.ex", "b.PY", "c.ps1", "d.exs"]
    );
    assert_eq!(
        scan.files[2].cache_path,
        Some(t.0.join("home/.cmdc/tools/c.tool.json"))
    );
    let ignored: Vec<_> = scan
        .ignored
        .iter()
        .map(|n| {
            (
                n.kind,
                n.path.file_name().unwrap().to_string_lossy().into_owned(),
            )
        })
        .collect();
    assert_eq!(
        ignored,
        [
            (NoteKind::Hidden, ".hidden.ex".to_string()),
            (NoteKind::Unsupported, "x.txt".to_string())
        ]
    );
    assert!(scan.ignored[1].reason.contains("not a tool file"));
}

#[test]
fn explicit_paths_report_missing_and_metadata() {
    let t = Tmp::new();
    t.write("proj/tools/a.md", "doc");
    let mut c = t.config();
    c.paths = vec!["tools/a.md".into(), "nope.ex".into()];
    let scan = scan(&c);
    assert!(scan.files.is_empty());
    assert_eq!(scan.ignored[0].kind, NoteKind::Metadata);
    assert!(scan.ignored[0].reason.contains("never executed"));
    assert_eq!(scan.errors[0].kind, NoteKind::NotFound);
    assert_eq!(scan.errors[0].path, t.0.join("proj/nope.ex"));
}

#[test]
fn reads_metadata_next_to_a_tool() {
    let t = Tmp::new();
    t.write("home/.cmdc/tools/a.ex", "");
    t.write(
        "home/.cmdc/tools/a.json",
        r#"{"name":"renamed","timeout":5000,"settings":{"permission":"ask"},
            "tools":{"other":{"disabled":true}}}"#,
    );
    t.write(
        "home/.cmdc/tools/a.md",
        "---\ntitle: x\n---\n\n# A\nDoes a.\n",
    );
    t.write("home/.cmdc/tools/b.ex", "");
    t.write("home/.cmdc/tools/b.json", "{not json");
    let scan = scan(&t.config());
    assert_eq!(scan.files.len(), 1);
    let a = &scan.files[0];
    let meta = a.meta.as_ref().unwrap();
    assert_eq!(meta.name.as_deref(), Some("renamed"));
    assert_eq!(meta.settings["timeout"], 5000);
    assert_eq!(meta.settings["permission"], "ask");
    assert!(meta.tools["other"].disabled);
    assert_eq!(a.doc.as_deref(), Some("# A\nDoes a."));
    assert_eq!(scan.errors.len(), 1);
    assert_eq!(scan.errors[0].kind, NoteKind::BadMetadata);
    assert!(scan.errors[0].reason.contains("b.json is invalid"));
}

impl Tmp {
    fn fifo(&self, rel: &str) -> PathBuf {
        let path = self.0.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        let status = std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .expect("mkfifo runs");
        assert!(status.success());
        path
    }
}

/// Scans on another thread: a scan that blocks on a special file fails the test instead of
/// hanging it.
fn scan_within(config: Config, secs: u64) -> Scan {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(scan(&config)));
    rx.recv_timeout(std::time::Duration::from_secs(secs))
        .expect("the scan blocked (did it open a FIFO?)")
}

#[test]
fn special_files_are_never_opened() {
    let t = Tmp::new();
    // FIFOs as metadata, script cache, trust list, plugin manifest and tool file; a socket; a
    // symlink to a character device.
    t.write("home/.cmdc/tools/a.ex", "");
    t.fifo("home/.cmdc/tools/a.json");
    t.write("home/.cmdc/tools/b.ex", "");
    t.fifo("home/.cmdc/tools/b.md");
    t.write("home/.cmdc/tools/s.py", "");
    t.fifo("home/.cmdc/tools/s.tool.json");
    t.fifo("home/.cmdc/tools/f.ex");
    t.write("home/.cmdc/tools/c.ex", "");
    std::os::unix::fs::symlink("/dev/null", t.0.join("home/.cmdc/tools/c.json")).unwrap();
    let _socket =
        std::os::unix::net::UnixListener::bind(t.0.join("home/.cmdc/tools/sock.ex")).unwrap();
    t.fifo("home/.cmdc/trusted.json");
    t.fifo("home/.cmdc/plugins/p/cmdc-plugin.json");
    t.write("home/.cmdc/tools/ok.ex", "");

    let mut config = t.config();
    config.trust = Trust::Auto;
    let scan = scan_within(config, 10);

    assert_eq!(
        names(&scan),
        [
            ("cmdc".into(), "ok.ex".into()),
            ("cmdc".into(), "s.py".into())
        ]
    );
    assert_eq!(scan.files[1].cache_path, None);
    let reason = |name: &str| {
        scan.errors
            .iter()
            .chain(&scan.ignored)
            .find(|n| n.path.ends_with(name) || n.reason.contains(name))
            .map(|n| n.reason.clone())
            .unwrap_or_else(|| panic!("no note for {name}: {scan:?}"))
    };
    for (name, kind) in [
        ("a.json", "a FIFO (named pipe)"),
        ("b.md", "a FIFO (named pipe)"),
        ("s.tool.json", "a FIFO (named pipe)"),
        ("f.ex", "a FIFO (named pipe)"),
        ("sock.ex", "a socket"),
        ("c.json", "a character device"),
        ("trusted.json", "a FIFO (named pipe)"),
        ("cmdc-plugin.json", "a FIFO (named pipe)"),
    ] {
        let text = reason(name);
        assert!(
            text.contains(kind) && text.contains("not opened"),
            "{name}: {text}"
        );
    }
}

#[test]
fn metadata_is_validated() {
    assert!(parse_meta(br#"{"name": "bad name"}"#).is_err());
    assert!(parse_meta(br#"{"disabled": "yes"}"#).is_err());
    assert!(parse_meta(br#"{"tools": {"x": {"tools": {}}}}"#)
        .unwrap()
        .tools["x"]
        .settings
        .contains_key("tools"));
    assert!(parse_meta(b"[]").is_err());
    assert_eq!(markdown_body("---\nno end"), Some("---\nno end".into()));
    assert_eq!(markdown_body("  \n"), None);
}

#[test]
fn markdown_front_matter_gives_title_and_hints() {
    let text = "---\ntitle: \"Read a file\"\nreadOnlyHint: true\nopen_world_hint: false\n\
                layout: post\nnamespace: files\n---\nReads a file.\n";
    let display = markdown_display(text);
    assert_eq!(
        serde_json::Value::Object(display),
        serde_json::json!({
            "title": "Read a file",
            "namespace": "files",
            "annotations": {"readOnlyHint": true, "open_world_hint": false}
        })
    );
    assert_eq!(markdown_body(text), Some("Reads a file.".into()));
    assert!(markdown_display("title: not front matter\n").is_empty());
    assert!(markdown_display("---\ntitle: no end\n").is_empty());
}

#[test]
fn markdown_front_matter_gives_examples() {
    let block = "---\ntitle: Search\nexamples:\n  - {\"q\": \"elixir\"}\n\n  - {\"q\": \"rust\", \"max\": 3}\n\
                 readOnlyHint: true\n---\nSearches.\n";
    let display = markdown_display(block);
    assert_eq!(
        display["examples"],
        serde_json::json!([{"q": "elixir"}, {"q": "rust", "max": 3}])
    );
    assert_eq!(
        display["annotations"],
        serde_json::json!({"readOnlyHint": true})
    );
    let inline = markdown_display("---\nexamples: [{\"q\": \"x\"}]\n---\n");
    assert_eq!(inline["examples"], serde_json::json!([{"q": "x"}]));
    // What is not JSON is handed over as written, for the Elixir side to reject by name.
    let bad = markdown_display("---\nexamples:\n  - q: x\n---\n");
    assert_eq!(bad["examples"], serde_json::json!(["q: x"]));
    assert_eq!(
        markdown_display("---\nexamples: soon\n---\n")["examples"],
        serde_json::json!("soon")
    );
}

#[test]
fn untrusted_project_folders_are_skipped_with_a_reason() {
    let t = Tmp::new();
    t.write("proj/.cmdc/tools/p.ex", "");
    t.write("proj/.claude/tools/q.ex", "");
    let mut c = t.config();
    c.trust = Trust::Auto;
    let s = scan(&c);
    assert!(s.files.is_empty());
    assert!(!s.project_trusted);
    assert_eq!(s.ignored.len(), 2);
    assert_eq!(s.ignored[0].kind, NoteKind::Untrusted);
    assert!(s.ignored[0].reason.contains("trusted.json"));

    t.write(
        "home/.cmdc/trusted.json",
        &format!(r#"{{"trusted": ["{}"]}}"#, t.0.display()),
    );
    let s = scan(&c);
    assert!(s.project_trusted);
    assert_eq!(s.files.len(), 2);

    c.trust = Trust::Never;
    assert!(scan(&c).files.is_empty());

    t.write("home/.cmdc/trusted.json", "[1]");
    c.trust = Trust::Auto;
    let s = scan(&c);
    assert!(s.files.is_empty());
    assert_eq!(s.errors[0].kind, NoteKind::BadTrustList);

    c.trusted = vec!["~/../proj".into()];
    assert!(scan(&c).project_trusted);

    c.trusted = vec![];
    t.write("home/.cmdc/trusted.json", r#"["."]"#);
    let s = scan(&c);
    assert!(!s.project_trusted);
    assert!(s.errors[0].reason.contains("absolute path"));
}

#[test]
fn cmdc_home_holds_a_trust_list_and_plugins_too() {
    let t = Tmp::new();
    t.write("proj/.cmdc/tools/p.ex", "");
    t.write(
        "ch/trusted.json",
        &format!(r#"["{}"]"#, t.0.join("proj").display()),
    );
    t.write(
        "ch/plugins/q/cmdc-plugin.json",
        r#"{"name":"q","version":"2"}"#,
    );
    t.write("ch/plugins/q/tools/q.ex", "");
    let mut c = t.config();
    c.trust = Trust::Auto;
    c.cmdc_home = Some(t.0.join("ch"));
    let s = scan(&c);
    assert!(s.project_trusted);
    assert_eq!(
        names(&s),
        [
            ("cmdc".into(), "p.ex".into()),
            ("plugin:q".into(), "q.ex".into())
        ]
    );
}

#[test]
fn plugin_manifests() {
    let t = Tmp::new();
    t.write(
        "home/.cmdc/plugins/a/cmdc-plugin.json",
        r#"{"name":"a","version":"1"}"#,
    );
    t.write("home/.cmdc/plugins/a/tools/x.ex", "");
    t.write("home/.cmdc/plugins/b/tools/y.ex", "");
    t.write(
        "home/.cmdc/plugins/c/cmdc-plugin.json",
        r#"{"version":"1"}"#,
    );
    t.write(
        "home/.cmdc/plugins/d/cmdc-plugin.json",
        r#"{"name":"d","tools":["../../tools", "missing"]}"#,
    );
    t.write(
        "home/.cmdc/plugins/e/cmdc-plugin.json",
        r#"{"name":"e","disabled":true}"#,
    );
    t.write("home/.cmdc/plugins/e/tools/z.ex", "");
    let mut c = t.config();
    c.user = false;
    let s = scan(&c);
    assert_eq!(names(&s), [("plugin:a".into(), "x.ex".into())]);
    let kinds: Vec<_> = s.ignored.iter().map(|n| n.kind).collect();
    assert_eq!(kinds, [NoteKind::NoManifest, NoteKind::PluginDisabled]);
    let errors: Vec<_> = s.errors.iter().map(|n| n.kind).collect();
    assert_eq!(
        errors,
        [
            NoteKind::BadManifest,
            NoteKind::BadManifest,
            NoteKind::NotFound
        ]
    );
    assert!(s.errors[0].reason.contains("\"name\""));
    assert!(s.errors[1].reason.contains("leaves the plugin folder"));
}

#[test]
fn the_digest_changes_with_any_change() {
    let t = Tmp::new();
    let f = t.write("home/.cmdc/tools/a.ex", "one");
    let c = t.config();
    let d0 = digest(&scan(&c));
    assert_eq!(d0, digest(&scan(&c)));
    t.write("home/.cmdc/tools/a.json", r#"{"timeout": 1}"#);
    let d1 = digest(&scan(&c));
    assert_ne!(d0, d1);
    t.write("home/.cmdc/tools/a.json", r#"{"timeout": 2}"#);
    let d2 = digest(&scan(&c));
    assert_ne!(d1, d2);
    fs::write(&f, "two").unwrap();
    assert_ne!(d2, digest(&scan(&c)));
    t.write("home/.cmdc/tools/notes.txt", "");
    let d3 = digest(&scan(&c));
    fs::remove_file(t.0.join("home/.cmdc/tools/notes.txt")).unwrap();
    assert_ne!(d3, digest(&scan(&c)));
}

#[test]
fn mtimes_and_sizes_change_with_edits() {
    let t = Tmp::new();
    let f = t.write("home/.cmdc/tools/a.ex", "one");
    let before = scan(&t.config()).files[0].clone();
    std::thread::sleep(std::time::Duration::from_millis(20));
    fs::write(&f, "two!").unwrap();
    let after = scan(&t.config()).files[0].clone();
    assert!(after.mtime_ns > before.mtime_ns);
    assert_eq!((before.size, after.size), (3, 4));
}

mod timing {
    use super::*;

    /// `cargo test -p cmdc_tool_core --release scan_timing -- --ignored --nocapture`
    #[test]
    #[ignore = "prints a timing figure, asserts nothing: run by hand with --ignored --nocapture"]
    fn scan_timing() {
        let root = std::env::temp_dir().join(format!("cmdc_scan_timing_{}", std::process::id()));
        for i in 0..1000 {
            let dir = root.join(format!("home/.cmdc/tools/g{}", i % 10));
            fs::create_dir_all(&dir).unwrap();
            fs::write(dir.join(format!("t{i}.ex")), "defmodule X do end").unwrap();
            if i % 10 == 0 {
                fs::write(dir.join(format!("t{i}.json")), r#"{"timeout": 1}"#).unwrap();
            }
        }
        let mut c = Config::new(root.join("proj"), root.join("home"));
        c.project = false;
        c.plugins = false;
        let mut times = Vec::new();
        for _ in 0..21 {
            let t = std::time::Instant::now();
            let s = scan(&c);
            times.push(t.elapsed());
            assert_eq!(s.files.len(), 1000);
        }
        times.sort();
        println!("scan of 1000 files: median {:?}", times[10]);
        let s = scan(&c);
        let t = std::time::Instant::now();
        let d = digest(&s);
        println!("digest: {:?} ({d})", t.elapsed());
        fs::remove_dir_all(&root).unwrap();
    }
}

#[test]
fn bad_metadata_manifests_and_trust_lists_are_json_errors() {
    use crate::error::Error;
    let json_error = |r: crate::error::Error, want: &str| {
        assert!(matches!(&r, Error::Json(m) if m.contains(want)), "{r:?}");
    };
    json_error(
        parse_meta(br#"{"name": "bad name"}"#).unwrap_err(),
        "\"name\" must be a tool name",
    );
    json_error(
        parse_meta(br#"{"tools": {"x": {"disabled": 1}}}"#).unwrap_err(),
        "in \"tools\".\"x\": \"disabled\" must be true or false",
    );
    json_error(read_manifest(b"{").unwrap_err(), "invalid JSON");
    json_error(
        read_manifest(br#"{"name": ""}"#).unwrap_err(),
        "\"name\" must be a non-empty string",
    );
    let here = Path::new("/");
    json_error(
        read_trust_list(br#"["relative/dir"]"#, here, here).unwrap_err(),
        "must be an absolute path or start with ~/",
    );
    json_error(
        read_trust_list(b"3", here, here).unwrap_err(),
        "expected {\"trusted\": [folders]}",
    );
}

#[test]
fn a_relative_cmdc_home_is_ignored_and_never_reads_the_project() {
    let t = Tmp::new();
    // a cloned repository trusting everything, with tools and plugins under its .cmdc
    t.write("proj/.cmdc/trusted.json", r#"["/"]"#);
    t.write("proj/.cmdc/tools/evil.ex", "");
    t.write(
        "proj/.cmdc/plugins/p/cmdc-plugin.json",
        r#"{"name":"p","version":"1"}"#,
    );
    t.write("proj/.cmdc/plugins/p/tools/p.ex", "");
    t.write("home/.cmdc/tools/mine.ex", "");
    for relative in [".cmdc", "./.cmdc", "proj/../.cmdc"] {
        let mut c = t.config();
        c.trust = Trust::Auto;
        c.cmdc_home = Some(PathBuf::from(relative));
        let s = scan(&c);
        assert!(!s.project_trusted, "{relative}");
        assert_eq!(names(&s), [("cmdc".into(), "mine.ex".into())], "{relative}");
        let bad: Vec<&Note> = s
            .errors
            .iter()
            .filter(|n| n.kind == NoteKind::BadHome)
            .collect();
        assert_eq!(bad.len(), 1, "{:?}", s.errors);
        assert!(bad[0].reason.contains("not an absolute path"));
        assert!(bad[0].reason.contains(relative));
    }
    // `~/…` is the user's
    let mut c = t.config();
    c.cmdc_home = Some(PathBuf::from("~/ch"));
    t.write("home/ch/tools/ch.ex", "");
    let s = scan(&c);
    assert!(names(&s).contains(&("cmdc".into(), "ch.ex".into())));
    assert!(s.errors.iter().all(|n| n.kind != NoteKind::BadHome));
}

#[test]
fn a_relative_home_reads_no_user_folders() {
    let t = Tmp::new();
    t.write("proj/home/.cmdc/tools/x.ex", "");
    let mut c = t.config();
    c.cwd = t.0.join("proj");
    c.home = PathBuf::from("home");
    let s = scan(&c);
    assert!(
        names(&s).iter().all(|(_, n)| n != "x.ex"),
        "{:?}",
        names(&s)
    );
    assert!(s.errors.iter().any(|n| n.kind == NoteKind::BadHome));
}

#[test]
fn the_home_folder_as_the_project_is_the_users() {
    let t = Tmp::new();
    t.write("home/.cmdc/tools/mine.ex", "");
    t.write("home/.claude/tools/theirs.py", "");
    let mut c = t.config();
    c.trust = Trust::Auto;
    c.cwd = t.0.join("home");
    let s = scan(&c);
    let found = names(&s);
    assert!(
        found.contains(&("cmdc".into(), "mine.ex".into())),
        "{found:?}"
    );
    assert!(found.contains(&("claude".into(), "theirs.py".into())));
    assert!(s.files.iter().all(|f| f.source == Source::User));
    assert!(
        s.ignored.iter().all(|n| n.kind != NoteKind::Untrusted),
        "{:?}",
        s.ignored
    );
}

#[test]
fn plugin_metadata_symlinked_outside_the_plugin_is_refused() {
    let t = Tmp::new();
    let renames = t.write("elsewhere/meta.json", r#"{"name":"innocent"}"#);
    let doc = t.write("elsewhere/doc.md", "Run anything the model asks.\n");
    let cache = t.write("elsewhere/cache.tool.json", "{}");
    t.write(
        "home/.cmdc/plugins/p/cmdc-plugin.json",
        r#"{"name":"p","version":"1"}"#,
    );
    let tools = t.0.join("home/.cmdc/plugins/p/tools");
    t.write("home/.cmdc/plugins/p/tools/a.py", "def a(): pass\n");
    t.write("home/.cmdc/plugins/p/tools/b.ex", "");
    t.write("home/.cmdc/plugins/p/tools/c.py", "def c(): pass\n");
    t.write("home/.cmdc/plugins/p/tools/d.ex", "");
    let inside = t.write("home/.cmdc/plugins/p/lib/d.md", "Shared text.\n");
    std::os::unix::fs::symlink(&renames, tools.join("a.json")).unwrap();
    std::os::unix::fs::symlink(&doc, tools.join("b.md")).unwrap();
    std::os::unix::fs::symlink(&cache, tools.join("c.tool.json")).unwrap();
    std::os::unix::fs::symlink(&inside, tools.join("d.md")).unwrap();
    let s = scan(&t.config());
    let found = names(&s);
    // a and b would be described by files the plugin does not hold: not loaded
    assert!(
        !found.iter().any(|(_, n)| n == "a.py" || n == "b.ex"),
        "{found:?}"
    );
    // c loads from its script, without the outside cache; d's symlink stays inside the plugin
    let c = s.files.iter().find(|f| f.path.ends_with("c.py")).unwrap();
    assert_eq!(c.cache_path, None);
    let d = s.files.iter().find(|f| f.path.ends_with("d.ex")).unwrap();
    assert_eq!(d.doc.as_deref(), Some("Shared text."));
    let refused: Vec<&Note> = s
        .errors
        .iter()
        .filter(|n| n.kind == NoteKind::OutsidePlugin)
        .collect();
    // each outside link once, and each tool it kept from loading
    assert_eq!(refused.len(), 5, "{:?}", s.errors);
    for (file, link) in [("a.py", "a.json"), ("b.ex", "b.md")] {
        let n = refused.iter().find(|n| n.path.ends_with(file)).unwrap();
        assert!(n.reason.contains("not loaded"), "{}", n.reason);
        assert!(n.reason.contains(link), "{}", n.reason);
        assert!(
            n.reason.contains("outside the plugin folder"),
            "{}",
            n.reason
        );
        assert!(refused.iter().any(|n| n.path.ends_with(link)));
    }
    assert!(refused.iter().any(|n| n.path.ends_with("c.tool.json")));
}

#[test]
fn plugin_symlinks_resolve_inside_the_plugin_or_are_refused() {
    let t = Tmp::new();
    let outside = t.write("elsewhere/steal.py", "def steal(): pass\n");
    t.write("elsewhere/dir/more.ex", "");
    t.write(
        "home/.cmdc/plugins/p/cmdc-plugin.json",
        r#"{"name":"p","version":"1"}"#,
    );
    t.write("home/.cmdc/plugins/p/tools/ok.ex", "");
    let inside = t.write("home/.cmdc/plugins/p/lib/shared.py", "def shared(): pass\n");
    let tools = t.0.join("home/.cmdc/plugins/p/tools");
    std::os::unix::fs::symlink(&outside, tools.join("steal.py")).unwrap();
    std::os::unix::fs::symlink(t.0.join("elsewhere/dir"), tools.join("linked_dir")).unwrap();
    std::os::unix::fs::symlink(&inside, tools.join("shared.py")).unwrap();
    let s = scan(&t.config());
    let found = names(&s);
    assert!(
        found.contains(&("plugin:p".into(), "ok.ex".into())),
        "{found:?}"
    );
    assert!(found.contains(&("plugin:p".into(), "shared.py".into())));
    assert!(!found.iter().any(|(_, n)| n == "steal.py" || n == "more.ex"));
    let refused: Vec<&Note> = s
        .errors
        .iter()
        .filter(|n| n.kind == NoteKind::OutsidePlugin)
        .collect();
    assert_eq!(refused.len(), 2, "{:?}", s.errors);
    for n in refused {
        assert!(
            n.reason.contains("outside the plugin folder"),
            "{}",
            n.reason
        );
        assert!(n.reason.contains("refused"));
    }
}

/// A Claude Code plugin installed as Claude Code lays it out: the cache folder, the installed
/// list, and (when `enabled`) `enabledPlugins` in the user's settings.
fn install_claude_plugin(
    t: &Tmp,
    id: &str,
    files: &[(&str, &str)],
    enabled: Option<bool>,
) -> PathBuf {
    let (name, market) = id.split_once('@').unwrap();
    let root =
        t.0.join(format!("home/.claude/plugins/cache/{market}/{name}/1.0.0"));
    fs::create_dir_all(&root).unwrap();
    for (rel, text) in files {
        t.write(
            &format!("home/.claude/plugins/cache/{market}/{name}/1.0.0/{rel}"),
            text,
        );
    }
    let list = t.0.join("home/.claude/plugins/installed_plugins.json");
    let mut installed: serde_json::Value = fs::read(&list)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(serde_json::json!({"version": 2, "plugins": {}}));
    installed["plugins"][id] = serde_json::json!([{
        "scope": "user", "installPath": root, "version": "1.0.0",
        "installedAt": "2026-11-01T00:00:00.000Z", "lastUpdated": "2026-11-01T00:00:00.000Z"
    }]);
    t.write(
        "home/.claude/plugins/installed_plugins.json",
        &installed.to_string(),
    );
    if let Some(on) = enabled {
        let settings = t.0.join("home/.claude/settings.json");
        let mut s: serde_json::Value = fs::read(&settings)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or(serde_json::json!({}));
        s["enabledPlugins"][id] = serde_json::Value::Bool(on);
        t.write("home/.claude/settings.json", &s.to_string());
    }
    root
}

const HOOKS: &str = r#"{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "${CLAUDE_PLUGIN_ROOT}/h.sh"}]}]}}"#;

#[test]
fn claude_plugins_enabled_disabled_and_their_parts() {
    let t = Tmp::new();
    let root = install_claude_plugin(
        &t,
        "guard@market",
        &[
            (
                ".claude-plugin/plugin.json",
                r#"{"name": "guard", "version": "2.0.0", "description": "d", "mcpServers": {"inline": {"command": "srv"}}}"#,
            ),
            ("hooks/hooks.json", HOOKS),
            (".mcp.json", r#"{"files": {"command": "fs"}}"#),
            ("tools/t.ex", ""),
        ],
        Some(true),
    );
    install_claude_plugin(
        &t,
        "off@market",
        &[("hooks/hooks.json", HOOKS), ("tools/u.ex", "")],
        Some(false),
    );
    install_claude_plugin(&t, "quiet@market", &[("hooks/hooks.json", HOOKS)], None);
    let found = claude_plugins(&t.config());
    let status: Vec<_> = found
        .plugins
        .iter()
        .map(|p| (p.id.as_str(), p.status))
        .collect();
    assert_eq!(
        status,
        [
            ("guard@market", PluginStatus::Enabled),
            ("off@market", PluginStatus::Disabled),
            ("quiet@market", PluginStatus::Disabled)
        ]
    );
    let g = &found.plugins[0];
    assert_eq!(
        (g.name.as_str(), g.marketplace.as_str(), g.version.as_str()),
        ("guard", "market", "2.0.0")
    );
    assert_eq!(g.hooks.len(), 1);
    assert_eq!(g.hooks[0].path, root.join("hooks/hooks.json"));
    // `.mcp.json`'s bare servers and the manifest's inline ones, both as `mcpServers`.
    let servers: Vec<_> = g
        .mcp
        .iter()
        .flat_map(|m| m.json["mcpServers"].as_object().unwrap().keys().cloned())
        .collect();
    assert_eq!(servers, ["files", "inline"]);
    assert_eq!(g.tools, ["tools"]);
    assert!(found.problems.is_empty(), "{:?}", found.problems);
    // The scan walks the enabled plugin's tools only.
    let mut c = t.config();
    c.user = false;
    c.project = false;
    assert_eq!(
        names(&scan(&c)),
        [("claude-plugin:guard@market".into(), "t.ex".into())]
    );
}

#[test]
fn claude_plugins_project_settings_count_only_when_trusted() {
    let t = Tmp::new();
    install_claude_plugin(&t, "p@m", &[("hooks/hooks.json", HOOKS)], Some(true));
    t.write(
        "proj/.claude/settings.local.json",
        r#"{"enabledPlugins": {"p@m": false}}"#,
    );
    let mut c = t.config();
    assert_eq!(claude_plugins(&c).plugins[0].status, PluginStatus::Disabled);
    c.trust = Trust::Never;
    let found = claude_plugins(&c);
    assert_eq!(found.plugins[0].status, PluginStatus::Enabled);
    assert_eq!(
        found.plugins[0].decided_by,
        Some(t.0.join("home/.claude/settings.json"))
    );
}

#[test]
fn claude_plugins_pointing_outside_missing_or_looping_are_refused() {
    let t = Tmp::new();
    t.write("outside/hooks.json", HOOKS);
    let out = install_claude_plugin(
        &t,
        "out@m",
        &[(
            ".claude-plugin/plugin.json",
            r#"{"name": "out", "hooks": "../../../../../../outside/hooks.json"}"#,
        )],
        Some(true),
    );
    let link = install_claude_plugin(&t, "link@m", &[], Some(true));
    fs::create_dir_all(link.join("hooks")).unwrap();
    std::os::unix::fs::symlink(
        t.0.join("outside/hooks.json"),
        link.join("hooks/hooks.json"),
    )
    .unwrap();
    install_claude_plugin(
        &t,
        "gone@m",
        &[(
            ".claude-plugin/plugin.json",
            r#"{"name": "gone", "mcpServers": "./servers.json"}"#,
        )],
        Some(true),
    );
    let looping = install_claude_plugin(
        &t,
        "loop@m",
        &[(
            ".claude-plugin/plugin.json",
            r#"{"name": "loop", "hooks": ["./a.json"]}"#,
        )],
        Some(true),
    );
    std::os::unix::fs::symlink(looping.join("b.json"), looping.join("a.json")).unwrap();
    std::os::unix::fs::symlink(looping.join("a.json"), looping.join("b.json")).unwrap();
    let good = install_claude_plugin(&t, "good@m", &[("hooks/hooks.json", HOOKS)], Some(true));
    t.write("home/.claude/settings.json", r#"{"enabledPlugins": {"out@m": true, "link@m": true, "gone@m": true, "loop@m": true, "good@m": true, "ghost@m": true}}"#);
    let found = claude_plugins(&t.config());
    let by = |id: &str| found.plugins.iter().find(|p| p.id == id).unwrap();
    for id in ["out@m", "link@m", "gone@m", "loop@m"] {
        let p = by(id);
        assert_eq!(p.status, PluginStatus::Broken, "{id}");
        assert!(p.hooks.is_empty() && p.mcp.is_empty() && p.tools.is_empty());
    }
    assert!(
        by("out@m").problems[0].contains("leaves the plugin folder"),
        "{:?}",
        by("out@m").problems
    );
    assert!(
        by("link@m").problems[0].contains("leaves the plugin folder"),
        "{:?}",
        by("link@m").problems
    );
    assert!(
        by("gone@m").problems[0].contains("names a missing file"),
        "{:?}",
        by("gone@m").problems
    );
    assert!(
        by("loop@m").problems[0].contains("loops"),
        "{:?}",
        by("loop@m").problems
    );
    assert_eq!(by("ghost@m").status, PluginStatus::NotInstalled);
    // The others load.
    assert_eq!(by("good@m").status, PluginStatus::Enabled);
    assert_eq!(by("good@m").hooks[0].path, good.join("hooks/hooks.json"));
    let _ = out;
    // The scan reports each broken one; an outside path as `outside_plugin`.
    let mut c = t.config();
    c.user = false;
    c.project = false;
    let s = scan(&c);
    let kinds: Vec<_> = s
        .errors
        .iter()
        .map(|n| (n.provider.as_str(), n.kind))
        .collect();
    assert_eq!(
        kinds,
        [
            ("claude-plugin:ghost@m", NoteKind::BadManifest),
            ("claude-plugin:gone@m", NoteKind::BadManifest),
            ("claude-plugin:link@m", NoteKind::OutsidePlugin),
            ("claude-plugin:loop@m", NoteKind::BadManifest),
            ("claude-plugin:out@m", NoteKind::OutsidePlugin),
        ]
    );
}

#[test]
fn a_bad_installed_list_is_a_problem_not_a_failure() {
    let t = Tmp::new();
    t.write("home/.claude/plugins/installed_plugins.json", "{not json");
    t.write("home/.claude/settings.json", r#"{"enabledPlugins": ["x"]}"#);
    let found = claude_plugins(&t.config());
    assert!(found.plugins.is_empty());
    assert_eq!(found.problems.len(), 2);
    assert!(found.problems[0]
        .1
        .contains("\"enabledPlugins\" must be an object"));
    assert!(found.problems[1].1.contains("invalid JSON"));
}

#[test]
fn this_librarys_own_plugins_bring_hooks_and_servers_too() {
    let t = Tmp::new();
    t.write(
        "home/.cmdc/plugins/kit/cmdc-plugin.json",
        r#"{"name": "kit", "version": "0.3.0"}"#,
    );
    t.write("home/.cmdc/plugins/kit/hooks/hooks.json", HOOKS);
    t.write(
        "home/.cmdc/plugins/kit/.mcp.json",
        r#"{"mcpServers": {"db": {"command": "db"}}}"#,
    );
    t.write("home/.cmdc/plugins/kit/tools/k.ex", "");
    t.write(
        "home/.cmdc/plugins/off/cmdc-plugin.json",
        r#"{"name": "off", "disabled": true}"#,
    );
    t.write("home/.cmdc/plugins/off/hooks/hooks.json", HOOKS);
    t.write(
        "home/.cmdc/plugins/bad/cmdc-plugin.json",
        r#"{"name": "bad", "hooks": "/etc/hooks.json"}"#,
    );
    t.write("home/.cmdc/plugins/bad/tools/b.ex", "");
    t.write(
        "home/.cmdc/plugins/bad/.claude-plugin/plugin.json",
        r#"{"name": "bad", "hooks": "/etc/hooks.json"}"#,
    );
    let found = claude_plugins(&t.config());
    let status: Vec<_> = found
        .plugins
        .iter()
        .map(|p| (p.id.as_str(), p.status, p.hooks.len(), p.mcp.len()))
        .collect();
    assert_eq!(
        status,
        [
            ("bad@cmdc", PluginStatus::Broken, 0, 0),
            ("kit@cmdc", PluginStatus::Enabled, 1, 1),
            ("off@cmdc", PluginStatus::Disabled, 1, 0)
        ]
    );
    // Its tools are walked once, by the plugin pass; the broken one's hooks are an error.
    let mut c = t.config();
    c.user = false;
    c.project = false;
    let s = scan(&c);
    // cmdc plugins' tools follow their own rule (the broken hooks do not stop them).
    let tools: Vec<(String, String)> = vec![
        ("plugin:bad".into(), "b.ex".into()),
        ("plugin:kit".into(), "k.ex".into()),
    ];
    assert_eq!(names(&s), tools);
    let errors: Vec<_> = s
        .errors
        .iter()
        .map(|n| (n.provider.as_str(), n.kind))
        .collect();
    assert_eq!(errors, [("plugin:bad", NoteKind::OutsidePlugin)]);
    assert!(s.errors[0]
        .reason
        .contains("plugin (hooks and MCP servers) bad@cmdc refused"));
}
