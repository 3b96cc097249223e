//! HTTP on hyper (and rustls), inside the NIF's tokio runtime: the MCP server's transport
//! (`server/`); the MCP client's Streamable HTTP transport and OAuth token introspection
//! (`client`), its TLS settings (`tls`), its TCP connections (`connect`), and the bounded
//! parser of the event streams its answers carry (`sse`).

pub mod client;
pub mod connect;
pub mod server;
pub mod sse;
pub mod tls;

#[cfg(test)]
mod tests;
