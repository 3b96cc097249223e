//! The server's limits and allow-lists, with their defaults in one place (Elixir's
//! `CMDC.Tool.MCP.HTTP.Limits` sends every field; these defaults serve Rust callers and tests).

use std::time::Duration;

/// What one listener accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Request bodies over this many bytes get 413 (a `Content-Length` over it: on the head).
    pub max_body: usize,
    /// A request's head must be complete this long after the server starts reading it, which on
    /// a kept-alive connection is when the previous answer was written: the idle time-out too.
    pub header_timeout: Duration,
    /// A request's body must be complete this long after its head: 408 otherwise.
    pub body_timeout: Duration,
    /// The read buffer of a connection (at least 8 KiB, hyper's minimum): a head longer than
    /// this gets 431.
    pub max_header_bytes: usize,
    /// Connections served at once; more wait in the listen backlog.
    pub max_connections: usize,
    /// Bound to a loopback address: `Host` must name a loopback host (DNS rebinding).
    pub loopback: bool,
    /// Origins allowed besides loopback ones (`https://app.example.com`), compared whole.
    pub allowed_origins: Vec<String>,
    /// An event stream holding this many unsent bytes drops droppable events (progress).
    pub stream_soft_bytes: usize,
    /// An event stream that would hold more unsent bytes than this is closed.
    pub stream_hard_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body: 4 * 1024 * 1024,
            header_timeout: Duration::from_secs(30),
            body_timeout: Duration::from_secs(30),
            max_header_bytes: 16 * 1024,
            max_connections: 4_096,
            loopback: true,
            allowed_origins: Vec::new(),
            stream_soft_bytes: 256 * 1024,
            stream_hard_bytes: 1024 * 1024,
        }
    }
}
