//! A JSON Schema compiled into a tree of checks that read instances directly: no index, no
//! intermediate value, nothing allocated while validating.
//!
//! Why: the in-place path (`tape.rs`) reads a term into an index and then runs the `jsonschema`
//! validator over it, visiting every node twice. Tool schemas use a small set of keywords; for
//! those, [`Program`] checks the instance as it reads it, through the [`Instance`] trait (BEAM
//! terms in the NIF crate, `serde_json::Value` here for `cargo test`).
//!
//! The program only answers "valid" (and then the instance is known to be JSON all through) or
//! "not decided here" ([`Stop`]): anything invalid, unusual (big integers, atoms with non-ASCII
//! names, keys given twice) or not JSON goes to the `jsonschema` path, which names the errors.
//! A schema using a keyword outside the supported set does not compile ([`Program::compile`]
//! gives `None`) and every instance takes the `jsonschema` path.
//!
//! Semantics follow the `jsonschema` crate exactly: numbers compare mathematically (`1 == 1.0`,
//! exact across integer and float), `pattern` and `format` are checked by that crate's own
//! validators for a one-string node, `multipleOf` by its validator for a one-number value.
//!
//! Files, each using only those above it: `program` (the types), `number` (exact number
//! comparison), `compile` (schema to program), `eval` (program over an instance), `slice` (a
//! top-level array a slice of elements at a time), `value` (`serde_json::Value` as an instance).
#![allow(unsafe_code)]

mod compile;
mod eval;
mod number;
mod program;
mod slice;
mod value;

pub use crate::budget::Budget;
pub use compile::resolved_draft;
pub use eval::check_json;
pub use program::{Instance, Program, Stop, ValueKind, MAX_DEPTH};

#[cfg(test)]
mod tests {
    use super::program::Checked;
    use super::*;
    use crate::schema::{compile, Documents};
    use jsonschema::Draft;
    use serde_json::json;
    use serde_json::Value;
    use std::path::PathBuf;

    fn run(program: &Program, v: &Value) -> Checked {
        program.validate(v, &mut Budget::with(1 << 40, true))
    }

    fn tool_schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1},
                "repo": {"type": "string", "pattern": "^[\\w.-]+/[\\w.-]+$"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 100},
                "state": {"enum": ["open", "closed", "all"]},
                "labels": {"type": "array", "items": {"type": "string"}},
                "sort": {"type": "object", "properties": {"field": {"type": "string"}},
                         "required": ["field"]}
            },
            "required": ["query", "repo"],
            "additionalProperties": false
        })
    }

    #[test]
    fn a_tool_schema_compiles_and_decides() {
        let p = Program::compile(&tool_schema(), Draft::Draft7).expect("supported");
        let ok = json!({"query": "x", "repo": "a/b", "limit": 20.0, "state": "open",
                        "labels": ["a"], "sort": {"field": "f", "other": [1, {"x": null}]}});
        assert_eq!(run(&p, &ok), Ok(()));
        for bad in [
            json!({"query": "x"}),
            json!({"query": "", "repo": "a/b"}),
            json!({"query": "x", "repo": "no slash"}),
            json!({"query": "x", "repo": "a/b", "limit": 0}),
            json!({"query": "x", "repo": "a/b", "limit": 1.5}),
            json!({"query": "x", "repo": "a/b", "state": "stale"}),
            json!({"query": "x", "repo": "a/b", "extra": 1}),
            json!({"query": "x", "repo": "a/b", "labels": [1]}),
            json!({"query": "x", "repo": "a/b", "sort": {}}),
            json!([]),
        ] {
            assert_eq!(run(&p, &bad), Err(Stop::Invalid), "{bad}");
        }
    }

    #[test]
    fn numbers_compare_mathematically() {
        let p = Program::compile(&json!({"enum": [1, 2.5]}), Draft::Draft7).unwrap();
        assert_eq!(run(&p, &json!(1.0)), Ok(()));
        assert_eq!(run(&p, &json!(2.5)), Ok(()));
        assert_eq!(run(&p, &json!(2)), Err(Stop::Invalid));
        let p = Program::compile(&json!({"maximum": 9007199254740992_i64}), Draft::Draft7);
        let p = p.unwrap();
        assert_eq!(run(&p, &json!(9007199254740993_i64)), Err(Stop::Invalid));
        assert_eq!(run(&p, &json!(9007199254740992.0)), Ok(()));
    }

    #[test]
    fn unsupported_keywords_leave_the_schema_to_jsonschema() {
        for s in [
            json!({"uniqueItems": true}),
            json!({"properties": {"a": {"patternProperties": {"x": true}}}}),
            json!({"$ref": "other.json"}),
            json!({"$defs": {"a": {"$id": "x"}}, "$ref": "#/$defs/a"}),
        ] {
            assert!(Program::compile(&s, Draft::Draft202012).is_none(), "{s}");
        }
        assert!(Program::compile(&json!({}), Draft::Draft4).is_none());
    }

    #[test]
    fn recursive_refs_compile_once() {
        let s = json!({"properties": {"child": {"$ref": "#"}, "n": {"type": "integer"}}});
        let p = Program::compile(&s, Draft::Draft7).unwrap();
        assert_eq!(run(&p, &json!({"child": {"child": {"n": 1}}})), Ok(()));
        assert_eq!(
            run(&p, &json!({"child": {"child": {"n": "1"}}})),
            Err(Stop::Invalid)
        );
        // A ref loop that never descends ends in a fallback, not a stack overflow.
        let s = json!({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
                       "$ref": "#/$defs/a"});
        if let Some(p) = Program::compile(&s, Draft::Draft202012) {
            assert_eq!(run(&p, &json!(1)), Err(Stop::Fallback));
        }
    }

    #[test]
    fn a_normal_budget_yields() {
        let p = Program::compile(&json!({"type": "array"}), Draft::Draft7).unwrap();
        let big = Value::Array(vec![json!(1); 100]);
        let mut budget = Budget::with(10, false);
        assert_eq!(p.validate(&big, &mut budget), Err(Stop::Yield));
    }

    #[test]
    fn a_pattern_that_can_backtrack_is_left_to_the_other_path() {
        let s = json!({"type": "string", "pattern": "^(a*)*\\1b$"});
        let p = Program::compile(&s, Draft::Draft7).unwrap();
        // Never run here: the other path's one match decides (and names a failure)...
        let mut budget = Budget::with(20, false);
        assert_eq!(p.validate(&json!("aab"), &mut budget), Err(Stop::Deferred));
        // ...unless the pattern's linear superset refuses the string: invalid, decided here
        // within a normal call's budget (`pattern::superset`).
        let mut budget = Budget::with(20, false);
        let a30 = json!("a".repeat(30));
        assert_eq!(p.validate(&a30, &mut budget), Err(Stop::Invalid));
        assert_eq!(run(&p, &json!("ac")), Err(Stop::Invalid));
        // Without a superset (nothing to rewrite the reference into: it names its own group)
        // every string is deferred.
        let s = json!({"type": "string", "pattern": "^(a\\1)$"});
        if let Some(p) = Program::compile(&s, Draft::Draft7) {
            assert_eq!(run(&p, &json!("ac")), Err(Stop::Deferred));
        }
        // What is not a string is still decided here.
        assert_eq!(run(&p, &json!(1)), Err(Stop::Invalid));
        // Another linear pattern costs by its size: a 2,000-word one ~40 strings of 12,000 units.
        let words: Vec<String> = (0..2000).map(|i| format!("w{i}")).collect();
        let s = json!({"items": {"pattern": format!("^(?:{})$", words.join("|"))}});
        let p = Program::compile(&s, Draft::Draft7).unwrap();
        let strings = Value::Array(vec![json!("w1999"); 2000]);
        let mut budget = Budget::with(12_000, false);
        assert_eq!(p.validate(&strings, &mut budget), Err(Stop::Yield));
        assert_eq!(run(&p, &strings), Ok(()));
    }

    #[test]
    fn a_literal_alternation_is_a_binary_search_with_the_crates_verdict() {
        let words: Vec<String> = (0..2000).map(|i| format!("w{i}")).collect();
        let pattern = format!("^({})$", words.join("|"));
        let s = json!({"items": {"pattern": pattern}});
        let p = Program::compile(&s, Draft::Draft7).unwrap();
        let crate_validator = jsonschema::validator_for(&s).unwrap();
        for word in [
            "w0", "w1999", "w999", "w2000", "w", "", "W1", "w1999 ", "nope",
        ] {
            let v = json!([word]);
            let verdict = run(&p, &v);
            assert_eq!(verdict.is_ok(), crate_validator.is_valid(&v), "{word}");
            assert!(matches!(verdict, Ok(()) | Err(Stop::Invalid)), "{word}");
        }
        // Charged by the search's depth (~0.2 µs a string for 2,000 words): 10 units a string
        // read and matched, so 2,000 strings fit in 20,000 units, not in a normal call's 12,000.
        let strings = Value::Array(vec![json!("w1999"); 2000]);
        let mut budget = Budget::with(20_001, false);
        assert_eq!(p.validate(&strings, &mut budget), Ok(()));
        let mut budget = Budget::with(12_000, false);
        assert_eq!(p.validate(&strings, &mut budget), Err(Stop::Yield));
    }

    #[test]
    fn a_top_level_array_is_checked_element_by_element_as_a_whole_run_checks_it() {
        let sliced = |s: Value, items: &[Value]| {
            let p = Program::compile(&s, Draft::Draft202012).unwrap();
            assert!(p.slices_arrays(), "{s}");
            let mut budget = Budget::with(1 << 40, true);
            let each = items
                .iter()
                .enumerate()
                .try_for_each(|(i, item)| p.element(i, item, &mut budget))
                .and_then(|()| super::eval::require(p.array_len_ok(items.len() as u64)));
            let whole = run(&p, &Value::Array(items.to_vec()));
            assert_eq!(each, whole, "{s} on {items:?}");
        };
        let items = [json!(1), json!("a"), json!({"k": [null]}), json!(2.5)];
        for s in [
            json!({}),
            json!({"type": "array"}),
            json!({"maxItems": 3}),
            json!({"minItems": 4, "maxItems": 4}),
            json!({"prefixItems": [{"const": 1}, {"type": "string"}]}),
            json!({"prefixItems": [{"const": 1}], "items": false}),
            json!({"items": {"type": ["integer", "string"]}}),
            json!({"type": ["array", "object"], "items": true}),
        ] {
            sliced(s.clone(), &items);
            sliced(s, &items[..2]);
        }
        // Checks on the whole array (or no array at all) are not element by element.
        for s in [
            json!({"enum": [[1]]}),
            json!({"anyOf": [{"type": "array"}]}),
            json!({"type": "object"}),
            json!(false),
        ] {
            let p = Program::compile(&s, Draft::Draft202012).unwrap();
            assert!(!p.slices_arrays(), "{s}");
        }
    }

    fn suite_dir() -> Option<PathBuf> {
        let dir = match std::env::var_os("JSON_SCHEMA_TEST_SUITE") {
            Some(dir) => PathBuf::from(dir),
            None => PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../../shared/json-schema-test-suite"),
        };
        dir.join("tests").is_dir().then_some(dir)
    }

    /// Every required case of the official suite: where the program decides, it decides as the
    /// suite (and `jsonschema`) says.
    fn suite(dir: &str, draft: Draft) {
        let Some(root) = suite_dir() else {
            println!(
                "SKIPPED: the JSON Schema Test Suite is not there (set JSON_SCHEMA_TEST_SUITE)"
            );
            return;
        };
        let (mut decided, mut total, mut compiled_groups, mut groups) = (0, 0, 0, 0);
        let mut files: Vec<_> = std::fs::read_dir(root.join("tests").join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .collect();
        files.sort();
        let mut failures = vec![];
        for file in files {
            let groups_json: Value =
                serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
            for group in groups_json.as_array().unwrap() {
                groups += 1;
                let schema = &group["schema"];
                let mut docs = Documents::default();
                docs.dirs
                    .push(("http://localhost:1234/".into(), root.join("remotes")));
                if compile(schema, docs, Some(draft)).is_err() {
                    continue;
                }
                let draft = resolved_draft(schema, Some(draft));
                let Some(program) = Program::compile(schema, draft) else {
                    continue;
                };
                compiled_groups += 1;
                for case in group["tests"].as_array().unwrap() {
                    total += 1;
                    let expected = case["valid"].as_bool().unwrap();
                    match run(&program, &case["data"]) {
                        Ok(()) if expected => decided += 1,
                        Err(Stop::Invalid) if !expected => decided += 1,
                        Err(Stop::Fallback | Stop::Deferred) => {}
                        got => failures.push(format!(
                            "{}: {}: {}: got {got:?}",
                            file.display(),
                            group["description"],
                            case["description"]
                        )),
                    }
                }
            }
        }
        println!(
            "{dir}: {compiled_groups}/{groups} groups compiled, {decided}/{total} of their cases decided"
        );
        assert!(failures.is_empty(), "{}", failures.join("\n"));
        assert!(compiled_groups * 2 > groups, "too few groups compiled");
    }

    #[test]
    fn the_test_suite_draft7() {
        suite("draft7", Draft::Draft7);
    }

    #[test]
    fn the_test_suite_draft2020_12() {
        suite("draft2020-12", Draft::Draft202012);
    }
}
