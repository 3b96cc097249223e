//! The compiler: a schema (already accepted by `jsonschema`) into a [`Program`], or `None` when
//! it uses a keyword outside the supported set.

use std::collections::HashMap;

use jsonschema::Draft;
use jsonschema_regex::{analyze_pattern, PatternAnalysis};
use serde_json::{Map, Value};

use super::program::*;
use crate::pattern::superset::superset;
use crate::schema::{draft_for, options_for, MatchCost};
use crate::tape::Beam;

/// Keywords of some draft that this compiler does not implement: a schema using one (where it
/// applies) is left to the `jsonschema` path.
pub(super) const UNSUPPORTED: &[&str] = &[
    "patternProperties",
    "propertyNames",
    "dependencies",
    "dependentRequired",
    "dependentSchemas",
    "contains",
    "minContains",
    "maxContains",
    "uniqueItems",
    "unevaluatedItems",
    "unevaluatedProperties",
    "$recursiveRef",
    "$recursiveAnchor",
    "$dynamicRef",
    "$dynamicAnchor",
    "$anchor",
    "$vocabulary",
    "contentMediaType",
    "contentEncoding",
    "contentSchema",
    "discriminator",
    "id",
];

/// The draft a schema is validated under, as `schema::compile_for` picks it.
pub fn resolved_draft(schema: &Value, default_draft: Option<Draft>) -> Draft {
    match (default_draft, schema.get("$schema")) {
        (Some(draft), None) => draft,
        _ => draft_for(schema),
    }
}

pub(super) struct Compiler<'s> {
    root: &'s Value,
    draft: Draft,
    nodes: Vec<Node>,
    refs: HashMap<String, u32>,
}

impl Program {
    /// Compiles `schema` (already accepted by the `jsonschema` compiler) under `draft`; `None`
    /// when it uses anything outside the supported set.
    pub fn compile(schema: &Value, draft: Draft) -> Option<Program> {
        if !matches!(
            draft,
            Draft::Draft6 | Draft::Draft7 | Draft::Draft201909 | Draft::Draft202012
        ) {
            return None;
        }
        let mut c = Compiler {
            root: schema,
            draft,
            nodes: Vec::new(),
            refs: HashMap::new(),
        };
        c.refs.insert("#".into(), 0);
        c.nodes.push(Node::any());
        let root = c.node(schema, true)?;
        c.nodes[0] = root;
        for node in &mut c.nodes {
            node.plain = node.equal.is_empty()
                && node.all_of.is_empty()
                && node.any_of.is_empty()
                && node.one_of.is_empty()
                && node.not.is_none()
                && node.if_.is_none();
        }
        Some(Program { nodes: c.nodes })
    }
}

impl Compiler<'_> {
    fn push(&mut self, node: Node) -> u32 {
        self.nodes.push(node);
        (self.nodes.len() - 1) as u32
    }

    fn sub(&mut self, schema: &Value) -> Option<u32> {
        let node = self.node(schema, false)?;
        Some(self.push(node))
    }

    /// `Some(None)` when absent, `None` when present and unsupported.
    fn optional(&mut self, schema: Option<&Value>) -> Option<Option<u32>> {
        match schema {
            None => Some(None),
            Some(s) => self.sub(s).map(Some),
        }
    }

    fn subs(&mut self, list: &Value) -> Option<Vec<u32>> {
        list.as_array()?.iter().map(|s| self.sub(s)).collect()
    }

    fn rest(&mut self, schema: &Value) -> Option<Rest> {
        Some(match schema {
            Value::Bool(true) => Rest::Any,
            Value::Bool(false) => Rest::Forbid,
            _ => Rest::Schema(self.sub(schema)?),
        })
    }

    fn leaf(&self, keyword: &str, value: &Value) -> Option<(Leaf, MatchCost)> {
        if let ("pattern", Value::String(pattern)) = (keyword, value) {
            // The crate's own analysis, so the verdict is the crate's.
            if let Some(PatternAnalysis::Alternation(mut words)) = analyze_pattern(pattern) {
                words.sort_unstable();
                let cost = MatchCost::one_of(words.len());
                return Some((Leaf::OneOf(words.into()), cost));
            }
        }
        let cost = match (keyword, value) {
            ("pattern", Value::String(pattern)) => MatchCost::of(pattern),
            _ => MatchCost::LEAF,
        };
        if let ("pattern", Value::String(pattern)) = (keyword, value) {
            // A backtracking pattern's linear superset refuses here what it can; the rest is
            // deferred to the validator's one bounded match.
            if let Some(superset) = cost.backtracks().then(|| superset(pattern)).flatten() {
                let cost = MatchCost::superset(superset.as_str().len());
                return Some((Leaf::Superset(superset), cost));
            }
        }
        let mut one = Map::new();
        one.insert(keyword.into(), value.clone());
        let validator = options_for::<Beam>(Some(self.draft))
            .build(&Value::Object(one))
            .ok()?;
        Some((Leaf::Crate(validator), cost))
    }

    // Over 80 lines on purpose: one pass over the schema's keywords, each arm filling the
    // checks of its family (string, number, object, array, applicators), assembled at the end;
    // split by family, each part would walk the keyword map again and share a dozen locals.
    fn node(&mut self, schema: &Value, root: bool) -> Option<Node> {
        let map = match schema {
            Value::Bool(true) => return Some(Node::any()),
            Value::Bool(false) => {
                return Some(Node {
                    never: true,
                    ..Node::any()
                })
            }
            Value::Object(map) => map,
            _ => return None,
        };
        if !root && map.contains_key("$id") {
            return None;
        }
        let mut node = match self.with_ref(map)? {
            Ok(node) => node,
            Err(replaced) => return Some(replaced),
        };
        let mut string = StringChecks::default();
        let mut number = NumberChecks::default();
        let (mut props, mut required): (Option<&Map<String, Value>>, Vec<&str>) = (None, vec![]);
        let (mut additional, mut min_props, mut max_props) = (None, None, None);
        let (mut items, mut additional_items, mut prefix_items) = (None, None, None);
        let (mut min_items, mut max_items) = (None, None);
        for (key, value) in map {
            match key.as_str() {
                "type" => node.types = types(value)?,
                "enum" => node.equal.push(value.as_array()?.clone()),
                "const" => node.equal.push(vec![value.clone()]),
                "minLength" => string.min = Some(count(value)?),
                "maxLength" => string.max = Some(count(value)?),
                "pattern" | "format" => string.leaves.push(self.leaf(key, value)?),
                "minimum" => number.min = Some(limit(value)?),
                "maximum" => number.max = Some(limit(value)?),
                "exclusiveMinimum" => number.exclusive_min = Some(limit(value)?),
                "exclusiveMaximum" => number.exclusive_max = Some(limit(value)?),
                "multipleOf" => {
                    let mut one = Map::new();
                    one.insert("multipleOf".into(), value.clone());
                    number.multiple_of = Some(
                        jsonschema::options()
                            .with_draft(self.draft)
                            .build(&Value::Object(one))
                            .ok()?,
                    );
                }
                "properties" => props = Some(value.as_object()?),
                "required" => {
                    required = value
                        .as_array()?
                        .iter()
                        .map(Value::as_str)
                        .collect::<Option<_>>()?
                }
                "additionalProperties" => additional = Some(value),
                "minProperties" => min_props = Some(count(value)?),
                "maxProperties" => max_props = Some(count(value)?),
                "items" => items = Some(value),
                "additionalItems" if !matches!(self.draft, Draft::Draft202012) => {
                    additional_items = Some(value)
                }
                "prefixItems" if self.draft == Draft::Draft202012 => prefix_items = Some(value),
                "minItems" => min_items = Some(count(value)?),
                "maxItems" => max_items = Some(count(value)?),
                "allOf" => {
                    let subs = self.subs(value)?;
                    node.all_of.extend(subs)
                }
                "anyOf" => node.any_of = self.subs(value)?,
                "oneOf" => node.one_of = self.subs(value)?,
                "not" => node.not = Some(self.sub(value)?),
                "if" if self.draft != Draft::Draft6 => {
                    let cond = self.sub(value)?;
                    let then = self.optional(map.get("then"))?;
                    let otherwise = self.optional(map.get("else"))?;
                    node.if_ = Some((cond, then, otherwise));
                }
                k if UNSUPPORTED.contains(&k)
                    || matches!(k, "additionalItems" | "prefixItems" | "if") =>
                {
                    return None
                }
                _ => {} // annotations and unknown keywords
            }
        }
        if string.min.is_some() || string.max.is_some() || !string.leaves.is_empty() {
            node.string = Some(Box::new(string));
        }
        if number.min.is_some()
            || number.max.is_some()
            || number.exclusive_min.is_some()
            || number.exclusive_max.is_some()
            || number.multiple_of.is_some()
        {
            node.number = Some(Box::new(number));
        }
        if props.is_some()
            || !required.is_empty()
            || additional.is_some()
            || min_props.is_some()
            || max_props.is_some()
        {
            node.object = Some(Box::new(
                self.object(props, &required, additional, min_props, max_props)?,
            ));
        }
        if items.is_some() || prefix_items.is_some() || min_items.is_some() || max_items.is_some() {
            let (prefix, rest) = self.items(items, prefix_items, additional_items)?;
            node.array = Some(Box::new(ArrayChecks {
                prefix,
                rest,
                min: min_items,
                max: max_items,
            }));
        }
        Some(node)
    }

    /// The node a schema's `$ref` starts: `Ok(node)` to fill with the siblings (2019-09 and
    /// later, where `$ref` is one more check), `Err(node)` when the reference replaces them
    /// (earlier drafts); `None` when it cannot be compiled here.
    fn with_ref(&mut self, map: &Map<String, Value>) -> Option<Result<Node, Node>> {
        let Some(target) = map.get("$ref") else {
            return Some(Ok(Node::any()));
        };
        let target = self.reference(target.as_str()?)?;
        let node = Node {
            all_of: vec![target],
            ..Node::any()
        };
        if matches!(self.draft, Draft::Draft201909 | Draft::Draft202012) {
            Some(Ok(node))
        } else if map.contains_key("$id") {
            None
        } else {
            Some(Err(node))
        }
    }

    /// The array checks' positional part: `items` as a list (before 2020-12, with
    /// `additionalItems`) or `prefixItems` + `items` (2020-12).
    fn items(
        &mut self,
        items: Option<&Value>,
        prefix_items: Option<&Value>,
        additional_items: Option<&Value>,
    ) -> Option<(Vec<u32>, Rest)> {
        match (items, prefix_items) {
            (Some(Value::Array(list)), None) if self.draft != Draft::Draft202012 => {
                let prefix = list.iter().map(|s| self.sub(s)).collect::<Option<_>>()?;
                let rest = match additional_items {
                    Some(s) => self.rest(s)?,
                    None => Rest::Any,
                };
                Some((prefix, rest))
            }
            (Some(Value::Array(_)), _) => None,
            (items, prefix) => {
                let prefix = match prefix {
                    Some(list) => self.subs(list)?,
                    None => vec![],
                };
                let rest = match items {
                    Some(s) => self.rest(s)?,
                    None => Rest::Any,
                };
                Some((prefix, rest))
            }
        }
    }

    fn object(
        &mut self,
        props: Option<&Map<String, Value>>,
        required: &[&str],
        additional: Option<&Value>,
        min: Option<u64>,
        max: Option<u64>,
    ) -> Option<ObjectChecks> {
        let mut list: Vec<Prop> = Vec::new();
        for (name, schema) in props.into_iter().flatten() {
            let schema = self.sub(schema)?;
            list.push(Prop {
                name: name.as_str().into(),
                schema: Some(schema),
                bit: None,
            });
        }
        let mut bits = 0usize;
        for name in required {
            let at = match list.iter().position(|p| &*p.name == *name) {
                Some(at) => at,
                None => {
                    list.push(Prop {
                        name: (*name).into(),
                        schema: None,
                        bit: None,
                    });
                    list.len() - 1
                }
            };
            if list[at].bit.is_none() {
                if bits == MAX_REQUIRED {
                    return None;
                }
                list[at].bit = Some(bits as u8);
                bits += 1;
            }
        }
        let additional = match additional {
            None => Rest::Any,
            Some(schema) => self.rest(schema)?,
        };
        Some(ObjectChecks::new(list, additional, min, max))
    }

    /// A local `$ref` ("#" or "#/json/pointer"), compiled once.
    fn reference(&mut self, uri: &str) -> Option<u32> {
        let pointer = uri.strip_prefix('#')?;
        if !pointer.is_empty() && !pointer.starts_with('/') {
            return None;
        }
        let key = format!("#{pointer}");
        if let Some(&id) = self.refs.get(&key) {
            return Some(id);
        }
        let mut target = self.root;
        for token in pointer.split('/').skip(1) {
            // A resource boundary on the way changes what the target's own refs mean.
            if target.get("$id").is_some() && !std::ptr::eq(target, self.root) {
                return None;
            }
            let token = percent_decode(token)?.replace("~1", "/").replace("~0", "~");
            target = match target {
                Value::Object(map) => map.get(&token)?,
                Value::Array(list) => list.get(token.parse::<usize>().ok()?)?,
                _ => return None,
            };
        }
        let id = self.push(Node::any());
        self.refs.insert(key, id);
        let node = self.node(target, std::ptr::eq(target, self.root))?;
        self.nodes[id as usize] = node;
        Some(id)
    }
}

pub(super) fn types(value: &Value) -> Option<u8> {
    let one = |v: &Value| -> Option<u8> {
        Some(match v.as_str()? {
            "null" => T_NULL,
            "boolean" => T_BOOL,
            "object" => T_OBJECT,
            "array" => T_ARRAY,
            "number" => T_NUMBER,
            "integer" => T_INTEGER,
            "string" => T_STRING,
            _ => return None,
        })
    };
    match value {
        Value::Array(list) => list.iter().try_fold(0u8, |m, v| Some(m | one(v)?)),
        v => one(v),
    }
}

pub(super) fn percent_decode(s: &str) -> Option<String> {
    if !s.contains('%') {
        return Some(s.to_owned());
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

pub(super) fn limit(v: &Value) -> Option<Limit> {
    let n = match v {
        Value::Number(n) => n,
        _ => return None,
    };
    if let Some(u) = n.as_u64() {
        Some(Limit::U(u))
    } else if let Some(i) = n.as_i64() {
        Some(Limit::I(i))
    } else {
        n.as_f64().map(Limit::F)
    }
}

pub(super) fn count(v: &Value) -> Option<u64> {
    match v {
        Value::Number(n) => n.as_u64().or_else(|| {
            n.as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 0.0)
                .map(|f| f as u64)
        }),
        _ => None,
    }
}
