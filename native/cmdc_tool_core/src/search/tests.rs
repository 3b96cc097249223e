use serde_json::{json, Value};

use super::*;

struct T {
    name: &'static str,
    description: &'static str,
    params: Value,
    namespace: Option<&'static str>,
    annotations: Vec<String>,
}

fn t(name: &'static str, description: &'static str, params: Value) -> T {
    T {
        name,
        description,
        params,
        namespace: name.split_once("__").map(|(ns, _)| ns),
        annotations: Vec::new(),
    }
}

fn doc(t: &T) -> Doc<'_> {
    Doc {
        name: t.name,
        title: None,
        description: t.description,
        parameters: &t.params,
        namespace: t.namespace,
        annotations: &t.annotations,
    }
}

fn put(index: &mut Index, t: &T) {
    index.put(&doc(t));
}

fn catalog() -> Vec<T> {
    let mut read = t(
        "fs__read_file",
        "Read the complete contents of a file from the file system.",
        json!({"properties": {"path": {"type": "string", "description": "Path of the file"}}}),
    );
    read.annotations = vec!["readOnlyHint".into()];
    vec![
        read,
        t(
            "fs__write_file",
            "Create a new file or overwrite an existing file with new content.",
            json!({"properties": {"path": {}, "content": {"description": "Text to write"}}}),
        ),
        t(
            "fs__list_directory",
            "List the files and directories in a given directory.",
            json!({"properties": {"path": {}}}),
        ),
        t(
            "git__git_commit",
            "Record changes to the repository with a commit message.",
            json!({"properties": {"message": {"description": "Commit message"}}}),
        ),
        t(
            "git__git_log",
            "Show the commit logs of the repository.",
            json!({"properties": {"max_count": {}}}),
        ),
        t(
            "weather__get_forecast",
            "Get the weather forecast for a location.",
            json!({"properties": {"latitude": {}, "longitude": {}}}),
        ),
    ]
}

fn index() -> Index {
    let mut index = Index::new();
    for t in &catalog() {
        put(&mut index, t);
    }
    index
}

fn q(text: &str) -> Query<'_> {
    Query {
        text,
        mode: Mode::Bm25,
        limit: 5,
        namespaces: &[],
        annotations: &[],
        vector: None,
    }
}

fn names(hits: &[Hit]) -> Vec<&str> {
    hits.iter().map(|h| h.name.as_str()).collect()
}

#[test]
fn bm25_ranks_the_tool_a_person_means() {
    let index = index();
    let top = |text| names(&index.search(&q(text)).unwrap())[0].to_owned();
    assert_eq!(top("read a file"), "fs__read_file");
    assert_eq!(top("write text to a file"), "fs__write_file");
    assert_eq!(
        top("what directories are in this folder"),
        "fs__list_directory"
    );
    assert_eq!(top("commit my changes"), "git__git_commit");
    assert_eq!(top("show the git history log"), "git__git_log");
    assert_eq!(top("weather forecast for Paris"), "weather__get_forecast");
    // Parameter descriptions count too.
    assert_eq!(top("latitude longitude"), "weather__get_forecast");
    // Scores fall with rank.
    let hits = index.search(&q("file")).unwrap();
    assert!(
        hits.windows(2).all(|w| w[0].score >= w[1].score),
        "{hits:?}"
    );
    assert!(index
        .search(&q("quantum chromodynamics"))
        .unwrap()
        .is_empty());
}

#[test]
fn filters_by_namespace_and_annotation() {
    let index = index();
    let git = ["git".to_string()];
    let query = Query {
        namespaces: &git,
        ..q("file commit")
    };
    assert_eq!(
        names(&index.search(&query).unwrap()),
        ["git__git_commit", "git__git_log"]
    );
    let ro = ["read_only".to_string()];
    let query = Query {
        annotations: &ro,
        ..q("file")
    };
    assert_eq!(names(&index.search(&query).unwrap()), ["fs__read_file"]);
    assert_eq!(annotation_key("readOnlyHint"), annotation_key("read_only"));
    assert_eq!(annotation_key("destructiveHint"), "destructive");
}

#[test]
fn put_and_remove_are_incremental_and_match_a_fresh_build() {
    let mut index = index();
    assert_eq!(index.len(), 6);
    assert!(index.remove("fs__read_file"));
    assert!(!index.remove("fs__read_file"));
    assert!(!names(&index.search(&q("read file")).unwrap()).contains(&"fs__read_file"));
    // Replacing a tool re-reads it.
    let renamed = t("git__git_log", "Print the weather.", json!({}));
    put(&mut index, &renamed);
    assert_eq!(index.len(), 5);
    assert_eq!(
        names(&index.search(&q("history log")).unwrap())[0],
        "git__git_log"
    );
    assert!(names(&index.search(&q("weather")).unwrap()).contains(&"git__git_log"));
    // Its old description is gone from the index.
    assert_eq!(
        names(&index.search(&q("show commit")).unwrap()),
        ["git__git_commit"]
    );
    // The same set built fresh scores the same (slots reused, postings unordered).
    let mut fresh = Index::new();
    for t in catalog()
        .iter()
        .filter(|t| t.name != "fs__read_file" && t.name != "git__git_log")
    {
        put(&mut fresh, t);
    }
    put(&mut fresh, &renamed);
    for text in ["file", "weather log", "commit", "directory list"] {
        let a = index.search(&q(text)).unwrap();
        let b = fresh.search(&q(text)).unwrap();
        assert_eq!(names(&a), names(&b), "{text}");
        for (x, y) in a.iter().zip(&b) {
            assert!((x.score - y.score).abs() < 1e-4, "{text}: {x:?} {y:?}");
        }
    }
}

/// A batch (`insert_all`, the registry's bulk path) indexes what one-by-one `put`s index,
/// into an empty index and on top of tools already in, a tool named twice in the batch kept
/// once (its last version).
#[test]
fn a_batch_matches_one_by_one_puts() {
    let prepare = |t: &T| doc(t).prepare();
    let all = catalog();
    let again = t("fs__read_file", "Print the weather.", json!({}));
    let mut batch = Index::new();
    batch.insert_all(all[..2].iter().map(prepare).collect());
    batch.insert_all(all[2..].iter().chain([&again]).map(prepare).collect());
    let mut one_by_one = Index::new();
    for t in all.iter().chain([&again]) {
        put(&mut one_by_one, t);
    }
    assert_eq!(batch.len(), all.len());
    for text in ["file", "weather", "commit log", "directory list", "read"] {
        let (a, b) = (
            batch.search(&q(text)).unwrap(),
            one_by_one.search(&q(text)).unwrap(),
        );
        assert_eq!(names(&a), names(&b), "{text}");
        for (x, y) in a.iter().zip(&b) {
            assert!((x.score - y.score).abs() < 1e-4, "{text}: {x:?} {y:?}");
        }
    }
    assert!(names(&batch.search(&q("weather")).unwrap()).contains(&"fs__read_file"));
}

#[test]
fn regex_mode_ranks_name_matches_first() {
    let index = index();
    let query = Query {
        mode: Mode::Regex,
        limit: 10,
        ..q("commit")
    };
    let hits = index.search(&query).unwrap();
    assert_eq!(names(&hits), ["git__git_commit", "git__git_log"]);
    assert!(hits[0].score > hits[1].score);
    let query = Query {
        mode: Mode::Regex,
        ..q("(?i)^fs__.*(read|write)")
    };
    assert_eq!(
        names(&index.search(&query).unwrap()),
        ["fs__read_file", "fs__write_file"]
    );
}

#[test]
fn bad_queries_are_clear_errors() {
    let index = index();
    let err = |query: Query| index.search(&query).unwrap_err().to_string();
    assert!(err(q("")).contains("empty"));
    assert!(err(q("   ")).contains("empty"));
    let long = "word ".repeat(2_048);
    assert!(err(q(&long)).contains("at most 4096"));
    assert!(err(Query {
        limit: 0,
        ..q("file")
    })
    .contains("limit"));
    let regex = |text| Query {
        mode: Mode::Regex,
        ..q(text)
    };
    assert!(err(regex("(unclosed")).contains("not accepted"));
    let long_pattern = "a".repeat(201);
    assert!(err(regex(&long_pattern)).contains("at most 200"));
    // Exponential for a backtracking engine; linear here.
    let evil = "(a+)+$";
    assert!(index.search(&regex(evil)).unwrap().len() <= 6);
    // A pattern whose automaton would be huge is refused, not built.
    assert!(err(regex("\\w{1000}\\w{1000}\\w{1000}")).contains("not accepted"));
}

#[test]
fn an_empty_index_answers_nothing() {
    let index = Index::new();
    assert!(index.search(&q("read a file")).unwrap().is_empty());
    let regex = Query {
        mode: Mode::Regex,
        ..q("file")
    };
    assert!(index.search(&regex).unwrap().is_empty());
    assert_eq!(index.cost(&q("file")), 4);
}

#[test]
fn cost_grows_with_the_postings_read() {
    let mut index = Index::new();
    let params = json!({});
    let names: Vec<String> = (0..5_000).map(|i| format!("tool_{i}")).collect();
    for (i, name) in names.iter().enumerate() {
        let description = if i % 2 == 0 {
            "Reads a file."
        } else {
            "Sends mail."
        };
        index.put(&Doc {
            name,
            title: None,
            description,
            parameters: &params,
            namespace: None,
            annotations: &[],
        });
    }
    assert!(index.cost(&q("file")) >= 4 * 2_500);
    assert!(index.cost(&q("zebra")) < 10);
    let hits = index
        .search(&Query {
            limit: 3,
            ..q("file")
        })
        .unwrap();
    assert_eq!(hits.len(), 3);
    // Ties break by name, so the answer is stable.
    assert_eq!(names_of(&hits), ["tool_0", "tool_10", "tool_100"]);
}

fn names_of(hits: &[Hit]) -> Vec<&str> {
    names(hits)
}

#[test]
fn removing_thousands_keeps_postings_consistent() {
    let mut index = Index::new();
    let params = json!({"properties": {"path": {"description": "A file path"}}});
    let names: Vec<String> = (0..3_000).map(|i| format!("tool_{i}")).collect();
    let doc = |name| Doc {
        name,
        title: None,
        description: "Reads a file and prints it.",
        parameters: &params,
        namespace: None,
        annotations: &[],
    };
    for name in &names {
        index.put(&doc(name));
    }
    for name in names.iter().step_by(3) {
        assert!(index.remove(name));
    }
    // Re-added ones reuse slots; every live tool is found exactly once.
    for name in names.iter().step_by(6) {
        index.put(&doc(name));
    }
    let all = index
        .search(&Query {
            limit: MAX_LIMIT,
            ..q("file path")
        })
        .unwrap();
    let expected = names.len() - names.len() / 3 + names.len() / 6;
    assert_eq!(index.len(), expected);
    assert_eq!(all.len(), expected.min(MAX_LIMIT));
    let mut seen: Vec<&str> = names_of(&all);
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen.len(), all.len());
    for p in &index.postings {
        for s in p.slots() {
            assert!(index.slots[*s as usize].is_some());
        }
    }
}
