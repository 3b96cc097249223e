use jsonschema::error::ValidationErrorKind;
use serde_json::{json, Value};

use super::engine::options_for;
use super::keyword::without_backtracking;
use super::superset::{superset, superset_source};
use crate::schema::{check, compile, Documents};

/// Patterns with back-references and look-around (ECMA-262 has no atomic groups or possessive
/// quantifiers: the crate refuses those patterns, so they never reach the superset).
const PATTERNS: &[&str] = &[
    "^(a*)*\\1b$",
    "^(a|b)\\1$",
    "(\\w+) \\1",
    "^(a+)b\\1$",
    "^(ab|a)\\1c$",
    "^((a)|b)\\2$",
    "^(a)?\\1b$",
    "^(a(b)\\2)\\1$",
    "^(?:(a)|(b))\\1\\2$",
    "^(?=.*1)(?=.*[a-z]).{3,}$",
    "^(?!ab)a.*",
    "(?<=a)b",
    "(?<!a)b$",
    "^(a|ab)(c|bcd)\\2$",
    "^([ab])\\1*c\\1$",
];

/// A small deterministic generator (xorshift), so a failure names a reproducible string.
struct Strings(u64);

impl Strings {
    fn next(&mut self) -> String {
        let alphabet = ['a', 'b', 'c', '1', ' '];
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        let len = (x % 13) as usize;
        (0..len)
            .map(|i| alphabet[((x >> (5 + 3 * i)) % 5) as usize])
            .collect()
    }
}

/// The crate's own verdict on `s` (its `pattern` keyword, no override).
fn crate_matches(validator: &jsonschema::Validator, s: &str) -> bool {
    validator.is_valid(&Value::String(s.into()))
}

#[test]
fn every_string_a_pattern_matches_its_superset_matches() {
    let mut patterns_matched = 0;
    for pattern in PATTERNS {
        let superset = superset(pattern).unwrap_or_else(|| panic!("no superset for {pattern}"));
        let original = options_for(None)
            .build(&json!({ "pattern": pattern }))
            .unwrap();
        let mut strings = Strings(0x9E37_79B9_7F4A_7C15);
        let (mut refused, mut matched) = (0, 0);
        for _ in 0..4_000 {
            let s = strings.next();
            let in_pattern = crate_matches(&original, &s);
            let in_superset = superset.is_match(&s);
            assert!(
                in_superset || !in_pattern,
                "{pattern} matches {s:?}, its superset {} does not",
                superset.as_str()
            );
            refused += usize::from(!in_superset);
            matched += usize::from(in_pattern);
        }
        // Each pattern's superset decides some strings; most patterns match some.
        assert!(refused > 0, "{pattern}: the superset refused nothing");
        patterns_matched += usize::from(matched > 0);
    }
    assert!(
        patterns_matched * 4 > PATTERNS.len() * 3,
        "{patterns_matched}"
    );
}

#[test]
fn the_prefilter_decides_these_strings() {
    let cases: &[(&str, &[&str])] = &[
        (
            "^(a*)*\\1b$",
            &["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "", "ba", "aac"],
        ),
        ("(\\w+) \\1", &["abc", "", "!!! !!!"]),
        ("^(?=.*1)(?=.*[a-z]).{3,}$", &["ab", ""]),
        ("(?<=a)b", &["a", "ccc"]),
    ];
    for (pattern, refused) in cases {
        let superset = superset(pattern).unwrap();
        for s in *refused {
            assert!(!superset.is_match(s), "{pattern} on {s:?}");
        }
    }
    // Look-arounds and back-references go: the superset is a plain regular expression.
    assert_eq!(superset_source("^(a*)*\\1b$").unwrap(), "^(a*)*(?:a*)?b$");
    assert_eq!(superset_source("(?<=a)b").unwrap(), "b");
}

#[test]
fn no_superset_for_what_is_unclear() {
    for pattern in [
        "^(a\\1)$",   // a reference inside the group it names
        "(?i)(a)\\1", // case-insensitive reference
        "^[a-z]+$",   // nothing to rewrite: the regex crate runs the pattern itself
        "(a)\\2",     // no such group
        "(",          // not a pattern
        "(?>a+)b",    // not ECMA-262: the crate refuses the schema
    ] {
        assert!(superset(pattern).is_none(), "{pattern}");
    }
}

#[test]
fn references_expand_to_a_bounded_size() {
    // Each group refers twice to the one before: 2^12 copies, over the node limit.
    let mut pattern = String::from("(a)");
    for n in 1..13 {
        pattern.push_str(&format!("(\\{n}\\{n})"));
    }
    assert!(superset(&pattern).is_none());
    assert!(superset("(a)(\\1\\1)(\\2\\2)").is_some());
}

/// The errors of a schema compiled here equal the crate's own, for strings the superset
/// refuses (no match run) and strings it accepts (one bounded match), nested and by `$ref`.
#[test]
fn errors_read_as_the_crates_own() {
    let schema = json!({
        "$defs": {"word": {"type": "string", "pattern": "^(a*)*\\1b$"}},
        "type": "object",
        "properties": {
            "x": {"$ref": "#/$defs/word"},
            "y": {"type": "array", "items": {"pattern": "^(\\w+) \\1$"}},
            "z": {"pattern": "^[0-9]+$"}
        }
    });
    let ours = compile(&schema, Documents::default(), None).unwrap();
    let theirs = options_for::<jsonschema::json::SerdeJson>(Some(jsonschema::Draft::Draft7))
        .build(&schema)
        .unwrap();
    let over = format!("{}b{}", "a".repeat(28), "a".repeat(29));
    for instance in [
        json!({"x": "ac"}),
        json!({"x": "aab", "y": ["ab ab", "ab ac", "nope"], "z": "12x"}),
        json!({"x": "c", "y": ["x y"], "z": 5}),
        json!({"x": "a".repeat(30)}),
    ] {
        let ours = check(&ours, &instance).unwrap_err();
        let theirs: Vec<_> = theirs.iter_errors(&instance).collect();
        assert_eq!(ours.len(), theirs.len(), "{instance}");
        for (o, t) in ours.iter().zip(&theirs) {
            assert_eq!(o.path, t.instance_path().as_str(), "{instance}");
            assert_eq!(o.schema_path, t.schema_path().as_str(), "{instance}");
            assert_eq!(o.keyword, t.kind().keyword(), "{instance}");
            match t.kind() {
                // The crate stopped its match at the limit; the superset refused the string
                // outright: the plain error, which is the true answer.
                ValidationErrorKind::BacktrackLimitExceeded { .. } => {
                    let pattern = "^(a*)*\\1b$";
                    let plain = format!(r#"{} does not match "{pattern}""#, t.instance());
                    assert_eq!(o.message, plain);
                }
                _ => assert_eq!(o.message, t.to_string(), "{instance}"),
            }
        }
    }
    // A string the superset accepts: the one bounded match, its over-limit error kept.
    let schema = json!({"properties": {"x": {"pattern": "^(a*)*b\\1$"}}});
    let ours = compile(&schema, Documents::default(), None).unwrap();
    let failures = check(&ours, &json!({"x": over})).unwrap_err();
    let first = failures.get(0).unwrap();
    assert_eq!((first.path, first.keyword), ("/x", "pattern"));
    assert_eq!(first.schema_path, "/properties/x/pattern");
    assert!(first.message.contains("backtracking steps"), "{first:?}");
}

#[test]
fn a_normal_scheduler_never_runs_a_backtracking_match() {
    let schema = json!({"pattern": "^(a*)*\\1b$"});
    let v = compile(&schema, Documents::default(), None).unwrap();
    // Refused by the superset: decided without the match.
    let refused = json!("a".repeat(30));
    let got = without_backtracking(|| check(&v, &refused)).expect("decided");
    let failures = got.unwrap_err();
    let first = failures.get(0).unwrap();
    assert_eq!(first.keyword, "pattern");
    assert_eq!(first.schema_path, "/pattern");
    assert!(
        first.message.ends_with(r#"does not match "^(a*)*\1b$""#),
        "{first:?}"
    );
    // Accepted by the superset: the match is needed, so no answer here...
    let v = compile(
        &json!({"pattern": "^(a*)*b\\1$"}),
        Documents::default(),
        None,
    )
    .unwrap();
    let needs = json!(format!("{}b{}", "a".repeat(28), "a".repeat(29)));
    assert!(without_backtracking(|| check(&v, &needs)).is_none());
    // ...and outside, the bounded match's own error, over the limit.
    let failures = check(&v, &needs).unwrap_err();
    assert!(failures
        .get(0)
        .unwrap()
        .message
        .contains("backtracking steps"));
    assert!(check(&v, &json!("aabaa")).is_ok());
    assert!(without_backtracking(|| check(&v, &json!("aac"))).is_some());
}
