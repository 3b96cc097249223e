//! The output formats and where each puts a tool's parameters.

/// Output formats.
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

impl Format {
    pub fn parse(name: &str) -> Option<Format> {
        Some(match name {
            "openai" => Format::OpenAI,
            "openai_responses" => Format::OpenAIResponses,
            "anthropic" => Format::Anthropic,
            "gemini" => Format::Gemini,
            "gemini_json_schema" => Format::GeminiJsonSchema,
            "mcp" => Format::Mcp,
            _ => return None,
        })
    }

    pub fn label(self) -> &'static str {
        match self {
            Format::OpenAI => "openai",
            Format::OpenAIResponses => "openai_responses",
            Format::Anthropic => "anthropic",
            Format::Gemini => "gemini",
            Format::GeminiJsonSchema => "gemini_json_schema",
            Format::Mcp => "mcp",
        }
    }

    /// Whether `strict: true` rewrites schemas for this format (the others ignore it).
    pub fn has_strict(self) -> bool {
        matches!(
            self,
            Format::OpenAI | Format::OpenAIResponses | Format::Anthropic
        )
    }

    /// Whether tools go in one `functionDeclarations` list (both Gemini forms).
    pub fn is_gemini(self) -> bool {
        matches!(self, Format::Gemini | Format::GeminiJsonSchema)
    }
}

/// Where a format puts the parameters, and whether it states strictness.
pub fn parameters_key(format: Format) -> &'static str {
    match format {
        Format::OpenAI | Format::OpenAIResponses | Format::Gemini => "parameters",
        Format::Anthropic => "input_schema",
        Format::GeminiJsonSchema => "parametersJsonSchema",
        Format::Mcp => "inputSchema",
    }
}

/// `Some(flag)` when the tool carries a `strict` field: always for the Responses API (which
/// assumes strict when it is absent), only when strict for OpenAI chat and Anthropic.
pub fn strict_field(format: Format, strict: bool) -> Option<bool> {
    let strict = strict && format.has_strict();
    match format {
        Format::OpenAIResponses => Some(strict),
        Format::OpenAI | Format::Anthropic if strict => Some(true),
        _ => None,
    }
}
