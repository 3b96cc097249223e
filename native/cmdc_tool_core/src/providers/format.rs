//! The output formats: one row of [`FORMATS`] per format (label, where parameters go, strict
//! rules, name rule, envelope), read by the Rust writers and, through the `providers_formats`
//! NIF, by `CMDC.Tool.Providers`. Adding a format is one row here plus its rule module (how its
//! parameters are rewritten, [`Rules`]).

use crate::names::Rule;

/// Output formats (the index of each one's row in [`FORMATS`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    OpenAI,
    OpenAIResponses,
    Anthropic,
    Gemini,
    /// Gemini with `parametersJsonSchema`: full JSON Schema, which the current API also takes.
    GeminiJsonSchema,
    Mcp,
}

/// How a format's parameters are rewritten (each a module of `providers/`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rules {
    /// As the tool gives them (a root that only refers to a definition inlined): cmdc's shape.
    Keep,
    /// An object schema at the root (`object_root.rs`).
    Object,
    /// An object schema, with `$schema` where its draft reads differently from 2020-12
    /// (`object_root.rs`).
    Mcp,
    /// Gemini's OpenAPI 3.0 subset (`gemini.rs`).
    Gemini,
}

/// A strict mode: whose rules (`strict.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strict {
    OpenAI,
    Anthropic,
}

/// What is around one tool, and around the list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Envelope {
    /// `{"type": "function", "function": {name, description, parameters}}`.
    ChatFunction,
    /// `{name, description, parameters, "type": "function"}`.
    TypedFlat,
    /// `{name, description, <parameters key>}`.
    Flat,
    /// Flat tools in one `[{"functionDeclarations": [...]}]`.
    Declarations,
}

/// When a tool carries a `strict` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StrictField {
    /// Always (the Responses API assumes strict when it is absent).
    Always,
    /// Only `true`, when strict.
    WhenStrict,
    Never,
}

/// One format's row.
#[derive(Debug)]
pub struct Spec {
    pub format: Format,
    /// The atom/name users write (`format: :openai`).
    pub label: &'static str,
    /// Where the parameters go in a tool.
    pub parameters_key: &'static str,
    pub rules: Rules,
    /// `None`: `strict: true` changes nothing.
    pub strict: Option<Strict>,
    pub strict_field: StrictField,
    /// Whose tool-name rule applies.
    pub name_rule: Rule,
    pub envelope: Envelope,
    /// How warnings name the target.
    pub target: &'static str,
    /// The tool field that carries example arguments (`input_examples`); `None`: an
    /// "Examples:" block at the end of the description (`CMDC.Tool.InputExamples`).
    pub examples_field: Option<&'static str>,
    /// Deferred tools stay in the list marked `defer_loading`, and the provider can search them
    /// itself; otherwise they are left out and `search_tools` finds them (`CMDC.Tool.Deferred`).
    pub defer_loading: bool,
    /// Functions can be grouped in namespaces (`CMDC.Tool.Deferred.Namespaces`).
    pub namespaces: bool,
}

/// Every format, in [`Format`]'s order.
pub const FORMATS: &[Spec] = &[
    Spec {
        format: Format::OpenAI,
        label: "openai",
        parameters_key: "parameters",
        rules: Rules::Keep,
        strict: Some(Strict::OpenAI),
        strict_field: StrictField::WhenStrict,
        name_rule: Rule::OpenAI,
        envelope: Envelope::ChatFunction,
        target: "OpenAI strict mode",
        examples_field: None,
        defer_loading: false,
        namespaces: false,
    },
    Spec {
        format: Format::OpenAIResponses,
        label: "openai_responses",
        parameters_key: "parameters",
        rules: Rules::Object,
        strict: Some(Strict::OpenAI),
        strict_field: StrictField::Always,
        name_rule: Rule::OpenAI,
        envelope: Envelope::TypedFlat,
        target: "OpenAI strict mode",
        examples_field: None,
        defer_loading: true,
        namespaces: true,
    },
    Spec {
        format: Format::Anthropic,
        label: "anthropic",
        parameters_key: "input_schema",
        rules: Rules::Object,
        strict: Some(Strict::Anthropic),
        strict_field: StrictField::WhenStrict,
        name_rule: Rule::OpenAI,
        envelope: Envelope::Flat,
        target: "Anthropic strict tool use",
        examples_field: Some("input_examples"),
        defer_loading: true,
        namespaces: false,
    },
    Spec {
        format: Format::Gemini,
        label: "gemini",
        parameters_key: "parameters",
        rules: Rules::Gemini,
        strict: None,
        strict_field: StrictField::Never,
        name_rule: Rule::Gemini,
        envelope: Envelope::Declarations,
        target: "Gemini function declarations",
        examples_field: None,
        defer_loading: false,
        namespaces: false,
    },
    Spec {
        format: Format::GeminiJsonSchema,
        label: "gemini_json_schema",
        parameters_key: "parametersJsonSchema",
        rules: Rules::Mcp,
        strict: None,
        strict_field: StrictField::Never,
        name_rule: Rule::Gemini,
        envelope: Envelope::Declarations,
        target: "Gemini parametersJsonSchema",
        examples_field: None,
        defer_loading: false,
        namespaces: false,
    },
    Spec {
        format: Format::Mcp,
        label: "mcp",
        parameters_key: "inputSchema",
        rules: Rules::Mcp,
        strict: None,
        strict_field: StrictField::Never,
        name_rule: Rule::Mcp,
        envelope: Envelope::Flat,
        target: "MCP",
        examples_field: None,
        defer_loading: false,
        namespaces: false,
    },
];

impl Format {
    /// This format's row.
    pub fn spec(self) -> &'static Spec {
        &FORMATS[self as usize]
    }

    pub fn parse(name: &str) -> Option<Format> {
        FORMATS.iter().find(|s| s.label == name).map(|s| s.format)
    }

    pub fn label(self) -> &'static str {
        self.spec().label
    }

    /// Whether `strict: true` rewrites schemas for this format (the others ignore it).
    pub fn has_strict(self) -> bool {
        self.spec().strict.is_some()
    }

    /// Whether tools go in one `functionDeclarations` list (both Gemini forms).
    pub fn is_gemini(self) -> bool {
        self.spec().envelope == Envelope::Declarations
    }

    /// Whose tool-name rule this format follows.
    pub fn name_rule(self) -> Rule {
        self.spec().name_rule
    }
}

/// Where a format puts the parameters.
pub fn parameters_key(format: Format) -> &'static str {
    format.spec().parameters_key
}

/// `Some(flag)` when the tool carries a `strict` field.
pub fn strict_field(format: Format, strict: bool) -> Option<bool> {
    let strict = strict && format.has_strict();
    match format.spec().strict_field {
        StrictField::Always => Some(strict),
        StrictField::WhenStrict if strict => Some(true),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_in_the_enum_order_and_labels_parse_back() {
        for (i, spec) in FORMATS.iter().enumerate() {
            assert_eq!(spec.format as usize, i, "{}", spec.label);
            assert_eq!(Format::parse(spec.label), Some(spec.format));
        }
        assert_eq!(Format::parse("nope"), None);
    }
}
