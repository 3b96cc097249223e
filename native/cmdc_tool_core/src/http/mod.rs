//! HTTP on hyper: the MCP server's transport (`server/`).

pub mod server;
