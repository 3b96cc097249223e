use super::*;
use crate::schema::{compile, Documents};
use serde_json::{json, Map};
use std::collections::BTreeSet;

fn weather() -> Value {
    json!({
        "type": "object",
        "properties": {
            "city": {"type": "string", "minLength": 1, "description": "City name"},
            "unit": {"enum": ["celsius", "fahrenheit"]},
            "days": {"type": "integer", "minimum": 1, "maximum": 7}
        },
        "required": ["city"],
        "additionalProperties": false
    })
}

fn tool<'a>(name: &'a str, parameters: &'a Value) -> Tool<'a> {
    Tool {
        name,
        description: "Current weather for a city.",
        parameters,
    }
}

fn keywords(ws: &[Warning]) -> Vec<(&str, &str)> {
    ws.iter()
        .map(|w| (w.path.as_str(), w.keyword.as_str()))
        .collect()
}

#[test]
fn openai_default_is_cmdc_shape() {
    let p = weather();
    let (out, ws) = convert(&[tool("get_weather", &p)], Format::OpenAI, false);
    assert_eq!(
        out,
        json!([{"type": "function", "function": {
            "name": "get_weather", "description": "Current weather for a city.", "parameters": p}}])
    );
    assert!(ws.is_empty());
}

#[test]
fn openai_strict_closes_objects_and_makes_optionals_nullable() {
    let p = weather();
    let (out, ws) = convert(&[tool("get_weather", &p)], Format::OpenAI, true);
    assert_eq!(
        out,
        json!([{"type": "function", "function": {
        "name": "get_weather", "description": "Current weather for a city.", "strict": true,
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name"},
                "unit": {"enum": ["celsius", "fahrenheit", null]},
                "days": {"type": ["integer", "null"], "minimum": 1, "maximum": 7}
            },
            "required": ["city", "days", "unit"],
            "additionalProperties": false
        }}}])
    );
    assert_eq!(keywords(&ws), [("/properties/city", "minLength")]);
    assert!(
        ws[0].message.contains("OpenAI strict mode"),
        "{}",
        ws[0].message
    );
    assert_eq!(ws[0].tool, "get_weather");
}

#[test]
fn strict_rewrites_const_refs_and_unions() {
    let p = json!({
        "type": "object",
        "properties": {
            "kind": {"const": "event"},
            "when": {"$ref": "#/$defs/range"},
            "note": {"type": "string", "nullable": true},
            "x": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            "y": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
            "z": {"not": {"type": "string"}}
        },
        "required": ["kind"],
        "$defs": {"range": {"type": "object", "properties": {"start": {"type": "string", "format": "date-time"}}}}
    });
    let (out, ws) = strict_schema("t", &p, Format::OpenAI);
    assert_eq!(
        out,
        json!({
            "type": "object",
            "properties": {
                "kind": {"enum": ["event"]},
                "when": {"anyOf": [{"$ref": "#/$defs/range"}, {"type": "null"}]},
                "note": {"type": ["string", "null"]},
                "x": {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]},
                "y": {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]},
                "z": {"anyOf": [
                    {"type": "string"}, {"type": "number"}, {"type": "boolean"}, {"type": "null"},
                    {"type": "array", "items": {"type": ["string", "number", "boolean", "null"]}},
                    {"type": "object", "properties": {}, "additionalProperties": false,
                     "required": []}
                ]}
            },
            "required": ["kind", "note", "when", "x", "y", "z"],
            "additionalProperties": false,
            "$defs": {"range": {
                "type": "object",
                "properties": {"start": {"type": ["string", "null"], "format": "date-time"}},
                "required": ["start"],
                "additionalProperties": false
            }}
        })
    );
    // `nullable` is OpenAPI: the original refuses null (and "note" is optional, so it is
    // nullable in strict mode anyway, as an absent key).
    // Open objects (the root, the definition) are closed; `z` is left with no type, which
    // OpenAI needs: written as a union of every type.
    assert_eq!(
        keywords(&ws),
        [
            ("/$defs/range", "additionalProperties"),
            ("/properties/note", "nullable"),
            ("/properties/y", "oneOf"),
            ("/properties/z", "not"),
            ("/properties/z", "type"),
            ("", "additionalProperties")
        ]
    );
    assert!(ws[3].message.contains("accepts more"), "{}", ws[3].message);
    assert!(ws[0].message.contains("accepts less"), "{}", ws[0].message);
}

#[test]
fn any_of_beside_one_of_merges_into_one_list_with_a_warning() {
    let p = json!({
        "type": "object",
        "properties": {
            "v": {
                "anyOf": [{"type": "string"}, {"type": "integer"}],
                "oneOf": [{"minimum": 1}, {"maximum": 9}]
            }
        },
        "required": ["v"],
        "additionalProperties": false
    });
    let (out, ws) = strict_schema("t", &p, Format::OpenAI);
    assert_eq!(out["properties"]["v"]["anyOf"].as_array().unwrap().len(), 4);
    assert!(out["properties"]["v"].get("oneOf").is_none());
    // The type-less branches get every type (OpenAI wants a type in each schema).
    assert_eq!(
        keywords(&ws),
        [
            ("/properties/v", "oneOf"),
            ("/properties/v/oneOf/0", "type"),
            ("/properties/v/oneOf/1", "type"),
            ("/properties/v", "anyOf")
        ]
    );
    assert!(ws[3].message.contains("now accepted"), "{}", ws[3].message);

    let (out, ws) = gemini_schema("t", &p);
    let out = out.unwrap();
    assert_eq!(out["properties"]["v"]["anyOf"].as_array().unwrap().len(), 4);
    assert_eq!(
        keywords(&ws),
        [
            ("", "additionalProperties"),
            ("/properties/v", "oneOf"),
            ("/properties/v", "anyOf")
        ]
    );
}

#[test]
fn strict_merges_disjoint_all_of_and_drops_the_rest() {
    let p = json!({"allOf": [
        {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
        {"properties": {"b": {"type": "integer"}}}
    ]});
    let (out, ws) = strict_schema("t", &p, Format::OpenAI);
    // The merged object was open: closed, and said.
    assert_eq!(keywords(&ws), [("", "additionalProperties")]);
    assert_eq!(
        out,
        json!({"type": "object",
               "properties": {"a": {"type": "string"}, "b": {"type": ["integer", "null"]}},
               "required": ["a", "b"], "additionalProperties": false})
    );
    let clash = json!({"type": "object", "allOf": [{"properties": {"a": {"type": "string"}}},
                                                   {"properties": {"a": {"minLength": 2}}}]});
    let (_, ws) = strict_schema("t", &clash, Format::OpenAI);
    assert_eq!(keywords(&ws), [("", "allOf")]);
}

#[test]
fn strict_reports_open_maps_and_root_problems() {
    let p = json!({"type": "object", "additionalProperties": false, "properties": {
        "labels": {"type": "object", "additionalProperties": {"type": "string"}}}});
    let (out, ws) = strict_schema("t", &p, Format::OpenAI);
    assert_eq!(
        keywords(&ws),
        [("/properties/labels", "additionalProperties")]
    );
    assert_eq!(
        out["properties"]["labels"]["additionalProperties"],
        json!(false)
    );
    let (_, ws) = strict_schema(
        "t",
        &json!({"anyOf": [{"type": "object"}, {"type": "string"}]}),
        Format::OpenAI,
    );
    assert!(ws.iter().any(|w| w.path.is_empty() && w.keyword == "type"));
    // `{}` takes any object; strict mode closes it: said, as accepting less.
    let (out, ws) = strict_schema("t", &json!({}), Format::OpenAI);
    assert_eq!(keywords(&ws), [("", "properties")]);
    assert!(ws[0].message.contains("accepts less"), "{}", ws[0].message);
    assert_eq!(
        out,
        json!({"type": "object", "properties": {}, "required": [], "additionalProperties": false})
    );
}

#[test]
fn openai_limits_are_reported() {
    let props: Map<String, Value> = (0..5001)
        .map(|i| (format!("p{i}"), json!({"type": "string"})))
        .collect();
    let p = json!({"type": "object", "properties": props});
    let (_, ws) = strict_schema("big", &p, Format::OpenAI);
    assert!(ws
        .iter()
        .any(|w| w.keyword == "limit" && w.message.contains("5001")));
    let mut deep = json!({"type": "string"});
    for _ in 0..11 {
        deep = json!({"type": "object", "properties": {"n": deep}, "required": ["n"]});
    }
    let (_, ws) = strict_schema("deep", &deep, Format::OpenAI);
    assert!(ws
        .iter()
        .any(|w| w.keyword == "limit" && w.message.contains("11 levels")));
    let values: Vec<Value> = (0..1001).map(|i| json!(format!("v{i}"))).collect();
    let p = json!({"type": "object", "properties": {"e": {"enum": values}}, "required": ["e"]});
    let (_, ws) = strict_schema("enum", &p, Format::OpenAI);
    assert!(ws.iter().any(|w| w.message.contains("1001 enum values")));
}

#[test]
fn anthropic_and_mcp_shapes() {
    let p = weather();
    let (out, ws) = convert(&[tool("get_weather", &p)], Format::Anthropic, false);
    assert!(ws.is_empty());
    assert_eq!(
        out,
        json!([{"name": "get_weather", "description": "Current weather for a city.",
                "input_schema": p}])
    );
    let empty = json!({});
    let (out, _) = convert(&[tool("ping", &empty)], Format::Mcp, false);
    assert_eq!(
        out,
        json!([{"name": "ping", "description": "Current weather for a city.",
                "inputSchema": {"type": "object", "properties": {}}}])
    );
    let (out, ws) = convert(&[tool("get_weather", &p)], Format::Anthropic, true);
    assert_eq!(out[0]["strict"], json!(true));
    // Anthropic strict tool use has no numeric bounds or string lengths.
    let dropped: BTreeSet<&str> = ws.iter().map(|w| w.keyword.as_str()).collect();
    assert_eq!(
        dropped,
        ["maximum", "minLength", "minimum"].into_iter().collect()
    );
}

#[test]
fn responses_format_is_flat_and_says_strict() {
    let p = weather();
    let (out, _) = convert(&[tool("get_weather", &p)], Format::OpenAIResponses, false);
    assert_eq!(out[0]["type"], "function");
    assert_eq!(out[0]["name"], "get_weather");
    assert_eq!(out[0]["strict"], json!(false));
    assert_eq!(out[0]["parameters"], p);
}

#[test]
fn gemini_subset() {
    let p = json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {
            "when": {"$ref": "#/definitions/range", "description": "Time range"},
            "unit": {"type": ["string", "null"], "enum": ["c", "f", null]},
            "count": {"type": "integer", "exclusiveMinimum": 0, "multipleOf": 2},
            "mode": {"const": "fast"},
            "bad-name": {"type": "string"}
        },
        "required": ["when"],
        "additionalProperties": false,
        "definitions": {"range": {"type": "object",
            "properties": {"start": {"type": "string", "format": "date-time"}},
            "additionalProperties": false}}
    });
    let (out, ws) = gemini_schema("t", &p);
    assert_eq!(
        out.unwrap(),
        json!({
            "type": "object",
            "properties": {
                "when": {"type": "object", "description": "Time range",
                         "properties": {"start": {"type": "string", "format": "date-time"}}},
                "unit": {"type": "string", "enum": ["c", "f"], "nullable": true},
                "count": {"type": "integer", "minimum": 1},
                "mode": {"type": "string", "enum": ["fast"]},
                "bad-name": {"type": "string"}
            },
            "required": ["when"]
        })
    );
    let mut got = keywords(&ws);
    got.sort();
    assert_eq!(
        got,
        [
            ("", "additionalProperties"),
            ("/properties/bad-name", "propertyName"),
            ("/properties/count", "multipleOf"),
            ("/properties/when", "additionalProperties"),
        ]
    );
}

#[test]
fn gemini_omits_empty_parameters_and_cuts_recursion() {
    // Open: the original takes any key, the declaration none: said (issue 44).
    for open in [
        json!({"type": "object", "properties": {}}),
        json!({}),
        json!(true),
    ] {
        let (out, ws) = gemini_schema("t", &open);
        assert_eq!(out, None, "{open}");
        assert_eq!(keywords(&ws), [("", "properties")], "{open}");
        assert!(ws[0].message.contains("accepts less"), "{}", ws[0].message);
    }
    // Closed: nothing is lost, nothing said.
    for closed in [
        json!({"type": "object", "properties": {}, "additionalProperties": false}),
        json!({"type": "object", "maxProperties": 0}),
    ] {
        let (out, ws) = gemini_schema("t", &closed);
        assert_eq!(out, None, "{closed}");
        assert!(
            !ws.iter().any(|w| w.keyword == "properties"),
            "{closed}: {ws:?}"
        );
    }
    let tree = json!({"type": "object", "properties": {"node": {"$ref": "#/$defs/node"}},
        "$defs": {"node": {"type": "object", "properties": {
            "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}}});
    let (out, ws) = gemini_schema("t", &tree);
    let out = out.unwrap();
    assert_eq!(
        out["properties"]["node"]["properties"]["children"]["items"],
        json!({"type": "object"})
    );
    assert_eq!(ws.len(), 1);
    assert_eq!(ws[0].keyword, "$ref");
    let (out, _) = convert(&[tool("t", &json!({}))], Format::Gemini, false);
    assert_eq!(
        out,
        json!([{"functionDeclarations": [{"name": "t", "description": "Current weather for a city."}]}])
    );
}

#[test]
fn gemini_mixed_enum_is_dropped_without_becoming_null_only() {
    // An enum of numbers, strings and null (Pydantic `Literal[1, "a", None]`): Gemini enums
    // hold strings, so it goes, and what it took stays taken (not `type: null`).
    let s = json!({"type": "object", "properties": {"m": {"enum": [1, 2.5, "a", null]}}});
    let (out, ws) = gemini_schema("t", &s);
    assert_eq!(out.unwrap()["properties"]["m"], json!({}));
    assert_eq!(keywords(&ws), [("/properties/m", "enum")]);
    // A string enum with null stays, nullable.
    let s = json!({"type": "object", "properties": {"m": {"enum": ["a", null]}}});
    let (out, _) = gemini_schema("t", &s);
    assert_eq!(
        out.unwrap()["properties"]["m"],
        json!({"type": "string", "enum": ["a"], "nullable": true})
    );
}

#[test]
fn tool_names_are_checked_per_format() {
    let p = weather();
    let (_, ws) = convert(&[tool("mcp.server.tool", &p)], Format::OpenAI, false);
    assert_eq!(keywords(&ws), [("", "name")]);
    let (_, ws) = convert(&[tool("mcp.server.tool", &p)], Format::Mcp, false);
    assert!(ws.is_empty());
}

// ---------------------------------------------------------------------------------------------
// Property: every argument map the original schema accepts is accepted by the strict rewrite,
// once absent optional properties are sent as null.

use crate::test_rng::Rng;

fn gen_schema(rng: &mut Rng, depth: u32) -> Value {
    let leaf = depth >= 3;
    match rng.below(if leaf { 8 } else { 13 }) {
        0 => json!({"type": "string", "minLength": rng.below(3)}),
        1 => json!({"type": "integer", "minimum": 0, "maximum": 50}),
        2 => json!({"type": "number", "exclusiveMinimum": 0}),
        3 => json!({"type": "boolean"}),
        4 => json!({"enum": ["a", "b", "c"]}),
        5 => json!({"const": "fixed"}),
        6 => json!({"type": ["string", "null"]}),
        7 => json!({"$ref": "#/$defs/point"}),
        8 => json!({"type": "array", "items": gen_schema(rng, depth + 1), "maxItems": 3}),
        9 => json!({"anyOf": [gen_schema(rng, depth + 1), gen_schema(rng, depth + 1)]}),
        10 => json!({"oneOf": [{"type": "string"}, {"type": "integer"}]}),
        11 => {
            json!({"allOf": [gen_object(rng, depth + 1), {"properties": {"extra": {"type": "boolean"}}}]})
        }
        _ => gen_object(rng, depth + 1),
    }
}

fn gen_object(rng: &mut Rng, depth: u32) -> Value {
    let n = rng.below(4);
    let mut props = Map::new();
    let mut required = Vec::new();
    for i in 0..n {
        let name = format!("p{depth}_{i}");
        if rng.coin() {
            required.push(json!(name));
        }
        props.insert(name, gen_schema(rng, depth));
    }
    // Closed: strict mode closes every object, which is a warned change for an open one.
    json!({"type": "object", "properties": props, "required": required,
           "additionalProperties": false})
}

fn defs() -> Value {
    json!({"point": {"type": "object", "additionalProperties": false,
        "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}}, "required": ["x"]}})
}

/// A value for `schema` and the same value as strict mode expects it (absent optionals = null).
fn gen_value(rng: &mut Rng, schema: &Value, root: &Value) -> (Value, Value) {
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        return gen_value(rng, root.pointer(&r[1..]).unwrap(), root);
    }
    if let Some(Value::Array(bs)) = schema.get("anyOf").or_else(|| schema.get("oneOf")) {
        let b = &bs[rng.below(bs.len())];
        return gen_value(rng, b, root);
    }
    if let Some(Value::Array(parts)) = schema.get("allOf") {
        let mut merged = parts[0].clone();
        for (k, v) in parts[1]["properties"].as_object().unwrap() {
            merged["properties"][k] = v.clone();
        }
        merged
            .as_object_mut()
            .unwrap()
            .remove("additionalProperties");
        return gen_value(rng, &merged, root);
    }
    if let Some(Value::Array(values)) = schema.get("enum") {
        let v = values[rng.below(values.len())].clone();
        return (v.clone(), v);
    }
    if let Some(c) = schema.get("const") {
        return (c.clone(), c.clone());
    }
    let ty = match schema.get("type") {
        Some(Value::Array(ts)) => ts[rng.below(ts.len())].clone(),
        Some(t) => t.clone(),
        None => json!("object"),
    };
    let v = match ty.as_str().unwrap() {
        "string" => json!("s".repeat(rng.below(5))),
        "integer" => json!(rng.below(51)),
        "number" => json!(rng.below(100) as f64 / 7.0 + 0.5),
        "boolean" => json!(rng.coin()),
        "null" => Value::Null,
        "array" => {
            let mut a = Vec::new();
            let mut b = Vec::new();
            for _ in 0..rng.below(4) {
                let (x, y) = gen_value(rng, &schema["items"], root);
                a.push(x);
                b.push(y);
            }
            return (Value::Array(a), Value::Array(b));
        }
        _ => {
            let req: Vec<&str> = schema["required"]
                .as_array()
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let mut a = Map::new();
            let mut b = Map::new();
            for (k, sub) in schema["properties"].as_object().into_iter().flatten() {
                if req.contains(&k.as_str()) || rng.coin() {
                    let (x, y) = gen_value(rng, sub, root);
                    a.insert(k.clone(), x);
                    b.insert(k.clone(), y);
                } else {
                    b.insert(k.clone(), Value::Null);
                }
            }
            return (Value::Object(a), Value::Object(b));
        }
    };
    (v.clone(), v)
}

/// `v` without the null members `like` does not have (the nulls the original schema accepts,
/// which the round trip keeps).
fn without_extra_nulls(v: Value, like: &Value) -> Value {
    match (v, like) {
        (Value::Object(m), Value::Object(l)) => Value::Object(
            m.into_iter()
                .filter(|(k, x)| !x.is_null() || l.contains_key(k))
                .map(|(k, x)| {
                    let x = match l.get(&k) {
                        Some(lx) => without_extra_nulls(x, lx),
                        None => x,
                    };
                    (k, x)
                })
                .collect(),
        ),
        (Value::Array(a), Value::Array(l)) if a.len() == l.len() => Value::Array(
            a.into_iter()
                .zip(l)
                .map(|(x, lx)| without_extra_nulls(x, lx))
                .collect(),
        ),
        (v, _) => v,
    }
}

#[test]
fn strict_rewrite_keeps_every_accepted_call() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut checked = 0;
    let mut round_trips = 0;
    for format in [Format::OpenAI, Format::Anthropic] {
        for _ in 0..150 {
            let mut schema = gen_object(&mut rng, 0);
            schema["$defs"] = defs();
            let (strict, warnings) = strict_schema("t", &schema, format);
            let exact = warnings.is_empty();
            // A warned change that refuses some values the original accepts.
            let tightened = warnings.iter().any(|w| {
                [warn::Effect::Less, warn::Effect::Other]
                    .iter()
                    .any(|e| w.message.contains(e.says()))
            });
            let original = compile(&schema, Documents::default(), None).unwrap();
            let rewritten = compile(&strict, Documents::default(), None)
                .unwrap_or_else(|e| panic!("{e}\n{strict:#}"));
            let plan = null_plan(&schema);
            for _ in 0..20 {
                let (args, strict_args) = gen_value(&mut rng, &schema, &schema);
                if !original.is_valid(&args) {
                    continue;
                }
                if tightened {
                    continue;
                }
                checked += 1;
                // Anthropic keeps `required` as written: the model sends the call as it is.
                let sent = if format == Format::Anthropic {
                    args.clone()
                } else {
                    strict_args
                };
                assert!(
                    rewritten.is_valid(&sent),
                    "schema {schema:#}\nstrict {strict:#}\nargs {args}\nsent {sent}"
                );
                // The way back, where the rewrite kept the meaning (a warning says where it
                // did not): the nulls the rewrite introduced are dropped, nulls the original
                // accepts stay, and the result means what `args` means.
                if !exact {
                    continue;
                }
                round_trips += 1;
                let mut back = sent.clone();
                plan.apply(&mut back);
                assert!(original.is_valid(&back), "{schema:#}\n{sent}\n{back}");
                assert_eq!(without_extra_nulls(back, &args), args, "{schema:#}\n{sent}");
            }
        }
    }
    assert!(checked > 3000, "only {checked} accepted calls generated");
    assert!(round_trips > 1000, "only {round_trips} round trips checked");
}

#[test]
fn strict_null_plan_applies_only_the_branch_a_call_can_be() {
    // Pydantic 2's discriminated union whose tags have defaults (issue 44): strict mode sends
    // `kind: null` for both; the default is the branch's own, never another branch's.
    let schema = json!({"$defs": {
        "Circle": {"properties": {"kind": {"const": "circle", "default": "circle", "type": "string"},
            "r": {"type": "number"}}, "required": ["r"], "type": "object"},
        "Square": {"properties": {"kind": {"const": "square", "default": "square", "type": "string"},
            "side": {"type": "number"}}, "required": ["side"], "type": "object"}},
        "properties": {"shape": {"discriminator": {"propertyName": "kind"},
            "oneOf": [{"$ref": "#/$defs/Square"}, {"$ref": "#/$defs/Circle"}]}},
        "required": ["shape"], "type": "object"});
    let original = compile(&schema, Documents::default(), None).unwrap();
    let plan = null_plan(&schema);
    for (sent, meant) in [
        (
            json!({"shape": {"kind": null, "r": 1.0}}),
            json!({"shape": {"kind": "circle", "r": 1.0}}),
        ),
        (
            json!({"shape": {"kind": null, "side": 2.0}}),
            json!({"shape": {"kind": "square", "side": 2.0}}),
        ),
        (
            json!({"shape": {"kind": "circle", "r": 1.0}}),
            json!({"shape": {"kind": "circle", "r": 1.0}}),
        ),
    ] {
        let mut back = sent.clone();
        plan.apply(&mut back);
        assert_eq!(back, meant, "{sent}");
        assert!(original.is_valid(&back), "{back}");
    }
}

#[test]
fn json_writer_matches_the_value() {
    let p = weather();
    let empty = json!({});
    for format in [
        Format::OpenAI,
        Format::OpenAIResponses,
        Format::Anthropic,
        Format::Gemini,
        Format::Mcp,
    ] {
        for strict in [false, true] {
            let tools = [tool("get_weather", &p), tool("ping", &empty)];
            let (value, _) = convert(&tools, format, strict);
            let (start, end) = list_json_delimiters(format, tools.len());
            let mut out = start.to_vec();
            for (i, t) in tools.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                let c = convert_parameters(t.name, t.parameters, format, strict);
                let params = c.parameters.as_ref().map(|_| c.json.as_slice());
                write_tool_json(&mut out, format, strict, t.name, t.description, params);
            }
            out.extend_from_slice(end);
            let written: Value = serde_json::from_slice(&out).unwrap();
            assert_eq!(written, value, "{format:?} strict={strict}");
        }
        let (start, end) = list_json_delimiters(format, 0);
        let none: Value = serde_json::from_slice(&[start, end].concat()).unwrap();
        assert_eq!(none, convert(&[], format, false).0);
    }
}
