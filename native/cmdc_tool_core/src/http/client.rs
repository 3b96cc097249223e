//! The native HTTP client: hyper's pooled client (`hyper-util`'s legacy client: keep-alive,
//! HTTP/1.1, HTTP/2 where the server offers it by ALPN) over rustls (`tls`), on the NIF's tokio
//! runtime. One [`Client`] per MCP server (or introspection endpoint) keeps its idle
//! connections; [`exchange`] runs one request and hands its answer over as [`Event`]s.
//!
//! Every answer is bounded, whatever its status, size or pace:
//!   * a success's body is read whole up to `max_body` (a larger `content-length` is refused
//!     before one byte of it is read; a body that grows past it is refused as it does);
//!   * an event stream (`text/event-stream`) is parsed as it arrives (`sse`), each event
//!     bounded by `max_body`, and each event waits for a credit ([`Credits`]) before it is
//!     handed over: a fast stream waits in the server's socket buffers, not in the VM;
//!   * an error status's body is read up to `max_error_body` (its text), the rest dropped.
//!
//! A connection goes back to the pool only when its answer was read to its end (hyper's rule):
//! an answer cut short, refused or abandoned (the future dropped: a cancelled or timed-out call)
//! closes its connection, which frees everything held for it at once. A request whose pooled
//! connection the server had closed before it was sent is sent again on a new one (hyper-util).

use std::error::Error as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderName, HeaderValue, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::{Method, Uri};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use tokio::sync::Semaphore;

use super::connect::{Connector, ReadSinceWrite};
use super::sse;
use super::tls::{self, Verify};
use crate::error::Result;

/// How a client connects and keeps connections.
#[derive(Debug, Clone)]
pub struct Settings {
    /// How long an idle kept-alive connection waits for the next request.
    pub idle: Duration,
    /// Idle connections kept per origin (0: a connection per request).
    pub max_idle: usize,
    /// Time to open a TCP connection.
    pub connect_timeout: Duration,
    /// Whom `https` servers must prove to be.
    pub verify: Verify,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            idle: Duration::from_secs(30),
            max_idle: 8,
            connect_timeout: Duration::from_secs(10),
            verify: Verify::System,
        }
    }
}

type Inner = hyper_util::client::legacy::Client<HttpsConnector<Connector>, Full<Bytes>>;

/// A pooled client, and an unpooled twin for the one retry that must go out on a new
/// connection. Cheap to clone: clones share the pool.
#[derive(Clone)]
pub struct Client {
    pooled: Inner,
    fresh: Inner,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Client")
    }
}

impl Client {
    /// A client with `settings` (reads the system's trust store on first use; an unreadable CA
    /// file is an error).
    pub fn new(settings: &Settings) -> Result<Client> {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_connect_timeout(Some(settings.connect_timeout));
        http.set_nodelay(true);
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls::client_config(&settings.verify)?)
            .https_or_http()
            .enable_http1()
            .enable_http2()
            .wrap_connector(Connector(http));
        let build = |max_idle: usize| {
            hyper_util::client::legacy::Client::builder(TokioExecutor::new())
                .pool_idle_timeout(settings.idle)
                .pool_max_idle_per_host(max_idle)
                .pool_timer(TokioTimer::new())
                .timer(TokioTimer::new())
                .build(connector.clone())
        };
        Ok(Client {
            pooled: build(settings.max_idle),
            fresh: build(0),
        })
    }
}

/// One request.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Bytes,
}

/// What one answer may hold.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// A success's body, or one event of a stream.
    pub max_body: usize,
    /// What is read of an error status's body.
    pub max_error_body: usize,
    /// Parse a success's `text/event-stream` body into events (else it is one body).
    pub events: bool,
}

/// A part of an answer, in order: `Head`, then either `Event`s and `End`, or one `Body`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Head {
        status: u16,
        headers: Vec<(String, String)>,
    },
    Event(sse::Event),
    /// The whole body (an error status's cut at `max_error_body`): the last part.
    Body(Bytes),
    /// The event stream ended (the server closed it, or it broke): the last part.
    End,
}

/// Where an exchange failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// No connection (refused, unreachable, TLS refused, connect time-out).
    Connect,
    /// The request could not be sent, or the connection ended before the answer's head.
    Send,
    /// The answer's body broke off, or is not well formed.
    Answer,
    /// The answer is over its bound.
    TooBig,
}

/// A failed exchange: where, and what a person can act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub stage: Stage,
    pub message: String,
}

impl Failure {
    fn new(stage: Stage, message: impl Into<String>) -> Failure {
        Failure {
            stage,
            message: message.into(),
        }
    }
}

/// The credits of an event stream: each event handed over takes one; its owner gives them
/// back ([`Credits::ack`]) as it consumes events. Without one the reader waits (and so does
/// the server, once the socket's buffers are full).
#[derive(Debug, Clone)]
pub struct Credits(Arc<CreditState>);

#[derive(Debug)]
struct CreditState {
    semaphore: Semaphore,
    taken: AtomicUsize,
}

impl Credits {
    /// A window of `n` events (at least 1).
    pub fn new(n: usize) -> Credits {
        Credits(Arc::new(CreditState {
            semaphore: Semaphore::new(n.max(1)),
            taken: AtomicUsize::new(0),
        }))
    }

    /// The owner consumed `n` events: their credits come back (never more than were taken).
    /// Returns the credits returned.
    pub fn ack(&self, n: usize) -> usize {
        let mut returned = 0;
        let _ = self
            .0
            .taken
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |taken| {
                returned = n.min(taken);
                Some(taken - returned)
            });
        self.0.semaphore.add_permits(returned);
        returned
    }

    async fn take(&self) {
        if let Ok(permit) = self.0.semaphore.acquire().await {
            permit.forget();
            self.0.taken.fetch_add(1, Ordering::AcqRel);
        }
    }
}

/// Sends `request` and hands its answer to `emit`, part by part. `Ok` once the last part
/// (`Body` or `End`) was handed over.
pub async fn exchange<F>(
    client: &Client,
    request: Request,
    bounds: Bounds,
    credits: &Credits,
    mut emit: F,
) -> std::result::Result<(), Failure>
where
    F: FnMut(Event),
{
    let response = match client.pooled.request(build(&request)?).await {
        Ok(response) => response,
        // A kept-alive connection the server closed as the request arrived: sent again, once,
        // on a new connection (an answer that had begun never is: the server acted on it).
        Err(e) if closed_before_answer(&e) => client
            .fresh
            .request(build(&request)?)
            .await
            .map_err(|e| failed(&e))?,
        Err(e) => return Err(failed(&e)),
    };
    let status = response.status().as_u16();
    let stream = bounds.events && (200..300).contains(&status) && event_stream(&response);
    let declared = response
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok());
    let headers = response
        .headers()
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_owned(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    emit(Event::Head { status, headers });
    let success = (200..300).contains(&status);
    let body = response.into_body();
    if stream {
        events(body, bounds.max_body, credits, emit).await
    } else if success {
        if declared.is_some_and(|n| n > bounds.max_body as u64) {
            return Err(too_big(bounds.max_body));
        }
        let bytes = read(body, bounds.max_body).await?;
        settle().await;
        emit(Event::Body(bytes));
        Ok(())
    } else {
        let bytes = read_head(body, bounds.max_error_body).await;
        settle().await;
        emit(Event::Body(bytes));
        Ok(())
    }
}

type ClientError = hyper_util::client::legacy::Error;

fn failed(e: &ClientError) -> Failure {
    let stage = if e.is_connect() {
        Stage::Connect
    } else {
        Stage::Send
    };
    Failure::new(stage, chain(e))
}

/// The connection ended before one byte of the answer (hyper's "incomplete message", and
/// nothing read since the request was written).
fn closed_before_answer(e: &ClientError) -> bool {
    let mut incomplete = false;
    let mut source = e.source();
    while let Some(cause) = source {
        if let Some(hyper_error) = cause.downcast_ref::<hyper::Error>() {
            incomplete |= hyper_error.is_incomplete_message();
        }
        source = cause.source();
    }
    let unread = e.connect_info().is_some_and(|connected| {
        let mut extensions = hyper::http::Extensions::new();
        connected.get_extras(&mut extensions);
        extensions
            .get::<ReadSinceWrite>()
            .is_some_and(|read| read.get() == 0)
    });
    incomplete && unread
}

/// Lets the runtime run the tasks the answer's end woke before the answer is handed over:
/// hyper-util returns a kept-alive connection to its pool from a task of its own, and a request
/// that finds the pool empty opens a new connection (a race its own comments describe). A
/// caller that sends its next request at once would otherwise open a connection per request.
async fn settle() {
    for _ in 0..4 {
        tokio::task::yield_now().await;
    }
}

fn build(request: &Request) -> std::result::Result<hyper::Request<Full<Bytes>>, Failure> {
    let uri: Uri = request
        .url
        .parse()
        .map_err(|e| Failure::new(Stage::Send, format!("not a URL: {:?}: {e}", request.url)))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
        return Err(Failure::new(
            Stage::Send,
            format!("not an http:// or https:// URL: {:?}", request.url),
        ));
    }
    let method = Method::from_bytes(request.method.as_bytes())
        .map_err(|_| Failure::new(Stage::Send, format!("not a method: {:?}", request.method)))?;
    let mut builder = hyper::Request::builder().method(method).uri(uri);
    for (name, value) in &request.headers {
        let bad = || {
            Failure::new(
                Stage::Send,
                format!("the header {name:?} is not valid HTTP"),
            )
        };
        let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad())?;
        let value = HeaderValue::from_str(value).map_err(|_| bad())?;
        builder = builder.header(name, value);
    }
    builder
        .body(Full::new(request.body.clone()))
        .map_err(|e| Failure::new(Stage::Send, e.to_string()))
}

fn event_stream(response: &hyper::Response<Incoming>) -> bool {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim_start()
                .to_ascii_lowercase()
                .starts_with("text/event-stream")
        })
}

fn too_big(max: usize) -> Failure {
    Failure::new(
        Stage::TooBig,
        format!("an answer over {max} bytes (max_response_bytes); its stream was closed"),
    )
}

/// An error and its causes, one after the other (hyper's top error says little alone:
/// "client error (Connect)").
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = cause.source();
    }
    text
}

async fn read(mut body: Incoming, max: usize) -> std::result::Result<Bytes, Failure> {
    let mut out = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| {
            Failure::new(
                Stage::Answer,
                format!(
                    "the connection broke in the middle of the answer: {}",
                    chain(&e)
                ),
            )
        })?;
        if let Ok(data) = frame.into_data() {
            if out.len() + data.len() > max {
                return Err(too_big(max));
            }
            out.extend_from_slice(&data);
        }
    }
    Ok(Bytes::from(out))
}

/// At most `max` bytes of a body; a body that breaks off gives what arrived.
async fn read_head(mut body: Incoming, max: usize) -> Bytes {
    let mut out = Vec::new();
    while out.len() < max {
        match body.frame().await {
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    let take = data.len().min(max - out.len());
                    out.extend_from_slice(&data[..take]);
                }
            }
            _ => break,
        }
    }
    Bytes::from(out)
}

async fn events<F>(
    mut body: Incoming,
    max: usize,
    credits: &Credits,
    mut emit: F,
) -> std::result::Result<(), Failure>
where
    F: FnMut(Event),
{
    let mut parser = sse::Parser::new(max);
    let mut ready = Vec::new();
    loop {
        match body.frame().await {
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    parser
                        .feed(&data, &mut ready)
                        .map_err(|sse::TooBig| too_big(max))?;
                    for event in ready.drain(..) {
                        credits.take().await;
                        emit(Event::Event(event));
                    }
                }
            }
            // A stream that ends or breaks ends alike: its owner decides what was missing.
            Some(Err(_)) | None => {
                emit(Event::End);
                return Ok(());
            }
        }
    }
}
