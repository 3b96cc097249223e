//! NIFs for `CMDC.Tool.MCP.HTTP`: the server's transport (`cmdc_tool_core::http::server`, hyper
//! on the NIF's tokio runtime) reports to the process that called `http_listen`, and the Elixir
//! side answers through resources, never blocking a scheduler.
//!
//! Messages to the listening process:
//!   * `{:cmdc_http, id, exchange, %{method, path, query, headers, peer, body}}` for each
//!     request that passed the transport's checks (`headers`: `[{lower_name, value}]`,
//!     `peer`: `{ip_tuple, port}`), answered with `http_reply` or `http_stream`.
//!
//! Messages to a process that called `http_watch(exchange)`:
//!   * `{:cmdc_http_gone, id}` once, if the client leaves before its answer is complete.
//!
//! The listener is a resource: `http_close`, its owner's death (a resource monitor) or its
//! garbage collection stop it and end its connections. An exchange dropped unanswered is
//! answered 500; a stream resource dropped unfinished ends its stream.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use cmdc_tool_core::http::server::exchange::{Exchange, Handler, Head};
use cmdc_tool_core::http::server::limits::Limits;
use cmdc_tool_core::http::server::serve::Listener;
use cmdc_tool_core::http::server::stream::{Refused, Sent, Stream};
use rustler::{Atom, Binary, Encoder, Env, LocalPid, Monitor, NifMap, OwnedEnv, ResourceArc, Term};

use crate::atoms;
use crate::error::{Error, Result};
use crate::options::{self, Options};
use crate::twins::twin_nifs;

/// Bytes of a body a normal scheduler copies; more answers `:yield` (the dirty twin copies).
const NORMAL_BODY_BYTES: usize = 64 * 1024;

/// A listening server; stopped when closed, when its owner dies, or when collected.
pub struct HttpListener(Mutex<Option<Listener>>);

#[rustler::resource_impl]
impl rustler::Resource for HttpListener {
    const IMPLEMENTS_DOWN: bool = true;

    fn down<'a>(&'a self, _env: Env<'a>, _pid: LocalPid, _monitor: Monitor) {
        self.close();
    }
}

impl HttpListener {
    fn close(&self) {
        let listener = self.0.lock().unwrap_or_else(|p| p.into_inner()).take();
        drop(listener);
    }
}

/// One request's answer slot.
pub struct HttpExchange(Arc<Exchange>);

#[rustler::resource_impl]
impl rustler::Resource for HttpExchange {}

/// An open event stream; dropped unfinished, it is closed.
pub struct HttpStream(Arc<Stream>);

#[rustler::resource_impl]
impl rustler::Resource for HttpStream {}

impl Drop for HttpStream {
    fn drop(&mut self) {
        if !self.0.finished() {
            self.0.close();
        }
    }
}

#[derive(NifMap)]
struct ListenOpts {
    ip: String,
    port: u16,
    max_body: u64,
    header_timeout_ms: u64,
    body_timeout_ms: u64,
    max_header_bytes: u64,
    max_connections: u64,
    allowed_origins: Vec<String>,
    stream_soft_bytes: u64,
    stream_hard_bytes: u64,
}

impl Options<'_> for ListenOpts {
    const NIF: &'static str = "http_listen";
    const EXPECTED: &'static str = "ip (string), port (0-65535), max_body, header_timeout_ms, \
        body_timeout_ms, max_header_bytes, max_connections, stream_soft_bytes, \
        stream_hard_bytes (non-negative integers), allowed_origins (list of strings)";
}

fn size(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// Sends each request to the listening process.
struct ToProcess(LocalPid);

impl Handler for ToProcess {
    fn request(&self, head: Head, exchange: Arc<Exchange>) {
        let id = exchange.id;
        let resource = ResourceArc::new(HttpExchange(exchange));
        let _ = OwnedEnv::new().send_and_clear(&self.0, |env| {
            (atoms::cmdc_http(), id, resource, head_term(env, &head)).encode(env)
        });
    }
}

fn bytes<'a>(env: Env<'a>, data: &[u8]) -> Term<'a> {
    let mut bin = rustler::NewBinary::new(env, data.len());
    bin.as_mut_slice().copy_from_slice(data);
    Binary::from(bin).to_term(env)
}

fn ip_term<'a>(env: Env<'a>, ip: IpAddr) -> Term<'a> {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, c, d] = v4.octets();
            (a, b, c, d).encode(env)
        }
        IpAddr::V6(v6) => {
            let s = v6.segments();
            let items: Vec<Term> = s.iter().map(|n| n.encode(env)).collect();
            rustler::types::tuple::make_tuple(env, &items)
        }
    }
}

fn head_term<'a>(env: Env<'a>, head: &Head) -> Term<'a> {
    let headers: Vec<Term<'a>> = head
        .headers
        .iter()
        .map(|(k, v)| (k.as_str(), bytes(env, v)).encode(env))
        .collect();
    let keys = [
        atoms::method().encode(env),
        atoms::path().encode(env),
        atoms::query().encode(env),
        atoms::headers().encode(env),
        atoms::peer().encode(env),
        atoms::body().encode(env),
    ];
    let values = [
        head.method.encode(env),
        head.path.encode(env),
        head.query.encode(env),
        headers.encode(env),
        (ip_term(env, head.peer.ip()), head.peer.port()).encode(env),
        bytes(env, &head.body),
    ];
    Term::map_from_term_arrays(env, &keys, &values).expect("distinct atom keys")
}

/// Binds and serves: `{:ok, {listener, port}}` or `{:error, message}` (the address in use, a
/// bad address). The caller gets every request as a message and owns the listener: its death
/// stops it.
#[rustler::nif]
fn http_listen<'a>(env: Env<'a>, opts: Term<'a>) -> Result<(ResourceArc<HttpListener>, u16)> {
    let opts = options::decode::<ListenOpts>(opts)?;
    let ip: IpAddr = opts
        .ip
        .parse()
        .map_err(|_| Error::Message(format!("{} is not an IP address", opts.ip)))?;
    let runtime = crate::runtime::get()?;
    let addr = SocketAddr::new(ip, opts.port);
    let socket = std::net::TcpListener::bind(addr)
        .map_err(|e| Error::process(format!("cannot listen on {addr}: {e}")))?;
    let limits = Limits {
        max_body: size(opts.max_body),
        header_timeout: Duration::from_millis(opts.header_timeout_ms),
        body_timeout: Duration::from_millis(opts.body_timeout_ms),
        max_header_bytes: size(opts.max_header_bytes),
        max_connections: size(opts.max_connections),
        loopback: ip.is_loopback(),
        allowed_origins: opts.allowed_origins,
        stream_soft_bytes: size(opts.stream_soft_bytes),
        stream_hard_bytes: size(opts.stream_hard_bytes),
    };
    let owner = env.pid();
    let listener = Listener::start(socket, limits, Arc::new(ToProcess(owner)), runtime.handle())?;
    let port = listener.addr.port();
    let resource = ResourceArc::new(HttpListener(Mutex::new(Some(listener))));
    if env.monitor(&resource, &owner).is_none() {
        resource.close();
    }
    Ok((resource, port))
}

/// Stops the listener and ends its connections (open streams, awaited answers).
#[rustler::nif]
fn http_close(listener: ResourceArc<HttpListener>) -> Atom {
    listener.close();
    atoms::ok()
}

/// The caller gets `{:cmdc_http_gone, id}` if the client leaves before its answer is
/// complete (at once if it has already left).
#[rustler::nif]
fn http_watch(env: Env, exchange: ResourceArc<HttpExchange>) -> Atom {
    let pid = env.pid();
    let id = exchange.0.id;
    // Run on a runtime thread when the connection lets go: an owned env sends from there.
    let registered = exchange.0.on_gone(Box::new(move || {
        let _ =
            OwnedEnv::new().send_and_clear(&pid, |env| (atoms::cmdc_http_gone(), id).encode(env));
    }));
    if !registered {
        // Already gone: told from this (scheduler) thread, with its own env.
        let _ = env.send(&pid, (atoms::cmdc_http_gone(), id).encode(env));
    }
    atoms::ok()
}

fn head_pairs(headers: Vec<(String, String)>) -> Vec<(String, String)> {
    headers
        .into_iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v))
        .collect()
}

twin_nifs! {
    /// Answers with a whole body: `{:ok, :done}`, or `{:error, message}` (the client is gone, it was
    /// answered already, a status or header HTTP does not allow). A body over
    /// [`NORMAL_BODY_BYTES`] answers `:yield`: `http_reply_dirty` copies it.
    fn http_reply / http_reply_dirty(
        exchange: ResourceArc<HttpExchange>,
        status: u16,
        headers: Vec<(String, String)>,
        body: Binary,
    ) -> (Result<Atom>),
    |dirty| {
        if !dirty && body.len() > NORMAL_BODY_BYTES {
            return Err(Error::Yield);
        }
        let body = Bytes::copy_from_slice(body.as_slice());
        exchange.0.reply(status, head_pairs(headers), body)?;
        Ok(atoms::done())
    }
}

/// Answers with an event stream: `{:ok, stream}` to write events into with `http_send`, or
/// `{:error, message}`.
#[rustler::nif]
fn http_stream(
    exchange: ResourceArc<HttpExchange>,
    status: u16,
    headers: Vec<(String, String)>,
) -> Result<ResourceArc<HttpStream>> {
    let stream = exchange.0.stream(status, head_pairs(headers))?;
    Ok(ResourceArc::new(HttpStream(stream)))
}

twin_nifs! {
    /// Queues an event (bytes as they go on the wire): `{:ok, :queued}`, `{:ok, :dropped}` (a
    /// `droppable` one while the client lags), `{:error, :full}` (the client does not read: the stream is now
    /// closed, the caller cancels what feeds it) or `{:error, :closed}`. Over
    /// [`NORMAL_BODY_BYTES`]: `:yield`.
    fn http_send / http_send_dirty(
        stream: ResourceArc<HttpStream>,
        event: Binary,
        droppable: bool,
    ) -> (Result<Atom, Atom>),
    |dirty| {
        if !dirty && event.len() > NORMAL_BODY_BYTES {
            return Err(atoms::r#yield());
        }
        match stream.0.send(Bytes::copy_from_slice(event.as_slice()), droppable) {
            Ok(Sent::Queued) => Ok(atoms::queued()),
            Ok(Sent::Dropped) => Ok(atoms::dropped()),
            Err(Refused::Full) => Err(atoms::full()),
            Err(Refused::Closed) => Err(atoms::closed()),
        }
    }
}

/// Ends a stream once its queued events are sent.
#[rustler::nif]
fn http_finish(stream: ResourceArc<HttpStream>) -> Atom {
    stream.0.finish();
    atoms::ok()
}
