//! The MCP Streamable HTTP server's transport: hyper 1.x (HTTP/1.1, keep-alive, pipelined
//! requests answered in order) on the NIF's tokio runtime. What needs no protocol knowledge is
//! decided here (`checks`: Host/Origin; `serve`: sizes and time limits, answered as JSON-RPC
//! errors); each accepted request goes to a [`exchange::Handler`] with an
//! [`exchange::Exchange`] to answer it, whole or as a bounded event stream (`stream`).
//!
//! Layers: `serve` → `exchange` → `stream`, `checks` → `limits`, `answer`.

pub mod answer;
pub mod checks;
pub mod exchange;
pub mod limits;
pub mod serve;
pub mod stream;
#[cfg(test)]
mod tests;
