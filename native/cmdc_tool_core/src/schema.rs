//! JSON Schema: compile once (Draft 7 unless `$schema` says otherwise), validate, and describe
//! failures in the shape the Elixir side returns.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use jsonschema::json::{Json, SerdeJson};
use jsonschema::{Draft, Retrieve, Uri, ValidationError, Validator};
use serde_json::Value;

use crate::error::{Error, Result};

/// Errors reported per call at most: enough for a model to fix its call, cheap to build.
pub const MAX_ERRORS: usize = 32;

/// Where `$ref`s to other documents resolve: given documents, or URL prefixes mapped onto folders.
/// Nothing is fetched from the network.
#[derive(Default, Clone)]
pub struct Documents {
    pub documents: HashMap<String, Value>,
    pub dirs: Vec<(String, PathBuf)>,
}

impl Retrieve for Documents {
    fn retrieve(
        &self,
        uri: &Uri<String>,
    ) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        let uri = uri.as_str();
        let bare = uri.split('#').next().unwrap_or(uri);
        if let Some(doc) = self.documents.get(bare) {
            return Ok(doc.clone());
        }
        for (prefix, dir) in &self.dirs {
            if let Some(rest) = bare.strip_prefix(prefix.as_str()) {
                if rest.split('/').any(|part| part == "..") {
                    break;
                }
                let file = dir.join(rest);
                let text = std::fs::read(&file)
                    .map_err(|e| format!("cannot read {} for {uri}: {e}", file.display()))?;
                return Ok(serde_json::from_slice(&text)?);
            }
        }
        Err(format!(
            "remote $ref \"{uri}\" is not available: documents are never fetched over the \
             network; pass it in the :documents option"
        )
        .into())
    }
}

/// The draft a schema names in `$schema`, Draft 7 without one; `Draft::Unknown` for a custom
/// meta-schema.
pub fn draft_for(schema: &Value) -> Draft {
    Draft::Draft7.detect(schema)
}

/// Reads a draft name as users write it: "7", "draft7", "2020-12", "draft2020-12", ...
pub fn parse_draft(name: &str) -> Option<Draft> {
    match name.trim_start_matches("draft").trim_start_matches('-') {
        "4" | "04" => Some(Draft::Draft4),
        "6" | "06" => Some(Draft::Draft6),
        "7" | "07" => Some(Draft::Draft7),
        "2019-09" => Some(Draft::Draft201909),
        "2020-12" => Some(Draft::Draft202012),
        _ => None,
    }
}

/// Compiles a schema for `serde_json::Value` instances. `default_draft` applies when the schema
/// has no `$schema` (Draft 7 if None).
pub fn compile(schema: &Value, docs: Documents, default_draft: Option<Draft>) -> Result<Validator> {
    compile_for::<SerdeJson>(schema, docs, default_draft)
}

/// Compiles a schema for instances in the representation `F` (e.g. BEAM terms read in place).
pub fn compile_for<F: Json>(
    schema: &Value,
    docs: Documents,
    default_draft: Option<Draft>,
) -> Result<Validator<F>> {
    if !matches!(schema, Value::Object(_) | Value::Bool(_)) {
        return Err(Error::Schema(format!(
            "invalid schema: a JSON Schema is an object or a boolean, got {}",
            type_name(schema)
        )));
    }
    let mut options = jsonschema::options_for::<F>().with_retriever(docs);
    let custom_meta_schema = schema.get("$schema").is_some() && draft_for(schema) == Draft::Unknown;
    // A `$schema` naming a custom meta-schema is resolved by the validator (through `docs`), so
    // its vocabularies apply; otherwise the draft is fixed here, Draft 7 by default.
    if !custom_meta_schema {
        options = options.with_draft(match (default_draft, schema.get("$schema")) {
            (Some(draft), None) => draft,
            _ => draft_for(schema),
        });
    }
    options.build(schema).map_err(|e| {
        let at = e.instance_path().as_str();
        Error::Schema(if at.is_empty() {
            format!("invalid schema: {e}")
        } else {
            format!("invalid schema at {at}: {e}")
        })
    })
}

pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// One validation failure, in the shape `CMDC.Tool.validate/2` returns.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub path: String,
    pub keyword: String,
    pub message: String,
    pub schema_path: String,
}

impl Failure {
    pub fn from_error(e: &ValidationError) -> Self {
        // Room for a typical message up front: `to_string` grows from nothing, a few
        // reallocations per failure.
        let mut message = String::with_capacity(128);
        let _ = write!(message, "{e}");
        Failure {
            path: e.instance_path().as_str().to_owned(),
            keyword: e.kind().keyword().to_owned(),
            message,
            schema_path: e.schema_path().as_str().to_owned(),
        }
    }

    /// A failure that is not about the schema: broken JSON text or a term that is not JSON.
    pub fn json(path: &str, message: String) -> Self {
        Failure {
            path: path.to_owned(),
            keyword: "json".into(),
            message,
            schema_path: String::new(),
        }
    }
}

/// Validates a value: the cheap boolean check first, errors only when it fails.
pub fn check(validator: &Validator, value: &Value) -> Result<(), Vec<Failure>> {
    check_for::<SerdeJson>(validator, value)
}

/// `check` for any representation.
pub fn check_for<'i, F: Json>(
    validator: &'i Validator<F>,
    node: F::Node<'i>,
) -> Result<(), Vec<Failure>> {
    if validator.is_valid(node.clone()) {
        return Ok(());
    }
    match failures_for(validator, node) {
        failures if failures.is_empty() => Ok(()),
        failures => Err(failures),
    }
}

/// The failures of an instance already found invalid (by the compiled program): no boolean
/// check first. Empty when `validator` finds it valid after all.
pub fn failures_for<'i, F: Json>(validator: &'i Validator<F>, node: F::Node<'i>) -> Vec<Failure> {
    validator
        .iter_errors(node)
        .take(MAX_ERRORS)
        .map(|e| Failure::from_error(&e))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool_schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 100},
                "mode": {"enum": ["fast", "full"]}
            },
            "required": ["path"],
            "additionalProperties": false
        })
    }

    #[test]
    fn compiles_and_validates() {
        let v = compile(&tool_schema(), Documents::default(), None).unwrap();
        assert!(check(&v, &json!({"path": "a", "limit": 5})).is_ok());
        let errs = check(&v, &json!({"limit": 0, "x": 1})).unwrap_err();
        let keywords: Vec<&str> = errs.iter().map(|f| f.keyword.as_str()).collect();
        assert!(keywords.contains(&"required"));
        assert!(keywords.contains(&"minimum"));
        assert!(keywords.contains(&"additionalProperties"));
        let min = errs.iter().find(|f| f.keyword == "minimum").unwrap();
        assert_eq!(min.path, "/limit");
        assert_eq!(min.schema_path, "/properties/limit/minimum");
    }

    #[test]
    fn draft7_is_the_default_and_schema_keyword_wins() {
        assert_eq!(draft_for(&json!({})), Draft::Draft7);
        let s = json!({"$schema": "https://json-schema.org/draft/2020-12/schema"});
        assert_eq!(draft_for(&s), Draft::Draft202012);
        // `prefixItems` means nothing in Draft 7 and constrains in 2020-12.
        let d7 = compile(
            &json!({"prefixItems": [{"type": "string"}]}),
            Documents::default(),
            None,
        );
        assert!(check(&d7.unwrap(), &json!([1])).is_ok());
        let d2020 = json!({"$schema": "https://json-schema.org/draft/2020-12/schema",
                           "prefixItems": [{"type": "string"}]});
        let d2020 = compile(&d2020, Documents::default(), None).unwrap();
        assert!(check(&d2020, &json!([1])).is_err());
    }

    #[test]
    fn a_default_draft_applies_only_without_schema_keyword() {
        let s = json!({"prefixItems": [{"type": "string"}]});
        let v = compile(&s, Documents::default(), parse_draft("2020-12")).unwrap();
        assert!(check(&v, &json!([1])).is_err());
        assert_eq!(parse_draft("draft7"), Some(Draft::Draft7));
        assert_eq!(parse_draft("nine"), None);
    }

    #[test]
    fn invalid_schemas_are_refused_with_a_reason() {
        let err = compile(&json!({"type": "strnig"}), Documents::default(), None)
            .unwrap_err()
            .to_string();
        assert!(matches!(
            compile(&json!([1]), Documents::default(), None),
            Err(Error::Schema(_))
        ));
        assert!(err.starts_with("invalid schema"), "{err}");
        let err = compile(&json!([1]), Documents::default(), None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("object or a boolean"), "{err}");
    }

    #[test]
    fn remote_refs_never_touch_the_network() {
        let s = json!({"$ref": "http://example.com/schema.json"});
        let err = compile(&s, Documents::default(), None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("not available"), "{err}");
        let mut docs = Documents::default();
        docs.documents.insert(
            "http://example.com/schema.json".into(),
            json!({"type": "integer"}),
        );
        let v = compile(&s, docs, None).unwrap();
        assert!(check(&v, &json!(1)).is_ok());
        assert!(check(&v, &json!("1")).is_err());
    }

    #[test]
    fn error_count_is_capped() {
        let v = compile(
            &json!({"items": {"type": "string"}}),
            Documents::default(),
            None,
        )
        .unwrap();
        let many: Vec<i32> = (0..100).collect();
        assert_eq!(check(&v, &json!(many)).unwrap_err().len(), MAX_ERRORS);
    }
}
