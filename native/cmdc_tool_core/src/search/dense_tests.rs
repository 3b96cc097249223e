//! Dense and hybrid search: vectors follow their tools through puts and removals, the dense
//! ranking is the cosine order, filters hold, and fusion puts a tool both rankings find above
//! those only one finds.

use serde_json::json;

use super::*;

fn put(index: &mut Index, name: &str, description: &str) {
    let params = json!({});
    index.put(&Doc {
        name,
        title: None,
        description,
        parameters: &params,
        namespace: name.split_once("__").map(|(ns, _)| ns),
        annotations: &[],
    });
}

fn query<'q>(text: &'q str, mode: Mode, probe: Option<&'q Probe>) -> Query<'q> {
    Query {
        text,
        mode,
        limit: 5,
        namespaces: &[],
        annotations: &[],
        vector: probe,
    }
}

fn names(index: &Index, q: &Query) -> Vec<String> {
    index
        .search(q)
        .unwrap()
        .into_iter()
        .map(|h| h.name)
        .collect()
}

/// Four tools on the axes of a 4-dimension space (read, weather, git, mail), each a little
/// off-axis so no cosine ties.
fn index() -> Index {
    let mut index = Index::new();
    put(&mut index, "fs__read_file", "Read the contents of a file.");
    put(&mut index, "weather__forecast", "Get the weather forecast.");
    put(
        &mut index,
        "git__commit",
        "Record changes to the repository.",
    );
    put(
        &mut index,
        "mail__send",
        "Send an email message about a file.",
    );
    for (name, v) in [
        ("fs__read_file", [1.0, 0.1, 0.0, 0.0]),
        ("weather__forecast", [0.0, 1.0, 0.1, 0.0]),
        ("git__commit", [0.0, 0.0, 1.0, 0.1]),
        ("mail__send", [0.1, 0.0, 0.0, 1.0]),
    ] {
        index.set_vector(name, &v).unwrap();
    }
    index
}

#[test]
fn dense_ranks_by_cosine_and_keeps_the_filters() {
    let index = index();
    let probe = Probe::new(&[0.2, 3.0, 0.0, 0.0]).unwrap();
    let got = index
        .search(&query("umbrella", Mode::Dense, Some(&probe)))
        .unwrap();
    assert_eq!(got[0].name, "weather__forecast");
    assert_eq!(got[1].name, "fs__read_file");
    assert!(
        got[0].score > 0.99 && got[0].score <= 1.01,
        "{}",
        got[0].score
    );
    let fs = ["fs".to_string()];
    let q = Query {
        namespaces: &fs,
        ..query("umbrella", Mode::Dense, Some(&probe))
    };
    assert_eq!(names(&index, &q), ["fs__read_file"]);
    // A dense search needs a vector; a probe of another dimension finds nothing.
    let e = index.search(&query("x", Mode::Dense, None)).unwrap_err();
    assert!(e.to_string().contains("needs the query's vector"), "{e}");
    let other = Probe::new(&[1.0, 0.0]).unwrap();
    assert!(names(&index, &query("x", Mode::Dense, Some(&other))).is_empty());
}

#[test]
fn hybrid_fuses_both_rankings_and_is_bm25_without_vectors() {
    let index = index();
    // "file" is in fs__read_file's and mail__send's words; the vector points at mail.
    let probe = Probe::new(&[0.0, 0.0, 0.0, 1.0]).unwrap();
    let hybrid = names(&index, &query("file", Mode::Hybrid, Some(&probe)));
    assert_eq!(hybrid[0], "mail__send", "{hybrid:?}");
    // Found by both, it outranks what only one ranking holds; all four are in the fused list.
    assert_eq!(hybrid.len(), 4);
    let bm25 = names(&index, &query("file", Mode::Bm25, None));
    assert_eq!(names(&index, &query("file", Mode::Hybrid, None)), bm25);
    // A request no word finds still gets the dense ranking.
    let probe = Probe::new(&[0.0, 1.0, 0.0, 0.0]).unwrap();
    assert_eq!(
        names(
            &index,
            &query("umbrella tomorrow", Mode::Hybrid, Some(&probe))
        )[0],
        "weather__forecast"
    );
}

#[test]
fn vectors_follow_their_tools() {
    let mut index = index();
    assert_eq!((index.vector_count(), index.vector_dim()), (4, 4));
    assert!(index.missing_vectors(10).is_empty());
    // Replaced content: the old vector goes with the old postings.
    put(&mut index, "git__commit", "Record changes with a message.");
    assert_eq!(index.vector_count(), 3);
    let missing = index.missing_vectors(10);
    assert_eq!(missing.len(), 1);
    assert_eq!(missing[0].0, "git__commit");
    assert_eq!(missing[0].1, "git commit. Record changes with a message.");
    assert!(index.remove("fs__read_file"));
    assert_eq!(index.vector_count(), 2);
    // A new tool in the freed slot starts without a vector.
    put(&mut index, "fs__stat", "Size of a file.");
    assert_eq!(index.vector_count(), 2);
    assert_eq!(index.missing_vectors(1).len(), 1);
    let e = index.set_vector("nope", &[1.0, 0.0, 0.0, 0.0]).unwrap_err();
    assert!(e.to_string().contains("register it"), "{e}");
    let e = index.set_vector("fs__stat", &[1.0, 0.0]).unwrap_err();
    assert!(e.to_string().contains("vectors of 4"), "{e}");
    index.clear_vectors();
    assert_eq!(
        (index.vector_count(), index.missing_vectors(10).len()),
        (0, 4)
    );
}

#[test]
fn a_dense_scan_states_its_cost() {
    let index = index();
    let probe = Probe::new(&[1.0, 0.0, 0.0, 0.0]).unwrap();
    let bm25 = index.cost(&query("file", Mode::Bm25, None));
    let dense = index.cost(&query("file", Mode::Dense, Some(&probe)));
    let hybrid = index.cost(&query("file", Mode::Hybrid, Some(&probe)));
    assert!(dense >= 4 * 4, "{dense}");
    assert_eq!(hybrid, bm25 + dense);
}
