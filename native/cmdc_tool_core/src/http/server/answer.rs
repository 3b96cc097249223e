//! The answers this layer gives by itself (checks, limits): JSON-RPC error bodies, as the
//! Elixir side answers its own errors, so a client SDK shows the message.

use bytes::Bytes;

/// JSON-RPC's "Invalid Request" code.
const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC's "Internal error" code.
const INTERNAL_ERROR: i64 = -32603;

/// A refusal: the HTTP status and the message a person or a model reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: u16,
    pub message: String,
    /// Close the connection after the answer (the rest of the request is not read).
    pub close: bool,
}

impl Refusal {
    /// A refusal that keeps the connection.
    pub fn new(status: u16, message: impl Into<String>) -> Self {
        Refusal {
            status,
            message: message.into(),
            close: false,
        }
    }

    /// A refusal after which the connection closes.
    pub fn closing(status: u16, message: impl Into<String>) -> Self {
        Refusal {
            close: true,
            ..Refusal::new(status, message)
        }
    }

    /// The JSON-RPC error body: `{"jsonrpc":"2.0","id":null,"error":{code, message}}`.
    pub fn body(&self) -> Bytes {
        let code = if self.status >= 500 {
            INTERNAL_ERROR
        } else {
            INVALID_REQUEST
        };
        let value = serde_json::json!({
            "jsonrpc": "2.0",
            "id": null,
            "error": {"code": code, "message": self.message},
        });
        Bytes::from(value.to_string())
    }
}
