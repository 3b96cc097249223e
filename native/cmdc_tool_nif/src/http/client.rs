//! NIFs for `CMDC.Tool.HTTP.Client`: a pooled hyper + rustls client as a resource, and requests
//! run on the NIF's tokio runtime that report to their caller with messages, as `exec` does.
//! The logic lives in `cmdc_tool_core::http::client`.
//!
//! Messages sent to the process that called `http_request` (`id` is the integer it returned):
//!   * `{:cmdc_http, id, {:head, status, [{name, value}]}}` (names lower case)
//!   * `{:cmdc_http, id, {:event, type, data, event_id | nil}}` (a `text/event-stream`
//!     answer's events, each taking a credit the owner returns with `http_ack`)
//!   * last, exactly one of: `{:cmdc_http, id, {:body, binary}}` (the whole body),
//!     `{:cmdc_http, id, :end}` (the event stream ended), `{:cmdc_http, id, {:error, stage,
//!     message}}` with `stage` one of `:connect`, `:send`, `:answer`, `:too_big`.
//!
//! The request handle is a resource: `http_cancel`, the owner's death (a resource monitor) and
//! the handle being garbage collected (its `Drop`) all abort the request, which closes its
//! connection.

use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use cmdc_tool_core::http::client::{self, Bounds, Client, Credits, Event, Settings, Stage};
use cmdc_tool_core::http::tls::Verify;
use rustler::{Atom, Binary, Encoder, Env, LocalPid, Monitor, NifMap, OwnedEnv, ResourceArc, Term};
use tokio::task::AbortHandle;

use crate::atoms;
use crate::error::{Error, Result};
use crate::options::{self, Options};
use crate::twins::twin_nifs;

/// Bytes of a request body a normal scheduler copies; more answers `:yield`.
const NORMAL_BODY_BYTES: usize = 64 * 1024;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A client and its pool of idle connections (closed when the last reference goes).
pub struct HttpClient(AssertUnwindSafe<Client>);

#[rustler::resource_impl]
impl rustler::Resource for HttpClient {}

/// A running request. Dropping the last reference aborts it.
pub struct HttpRequest {
    id: u64,
    abort: AbortHandle,
    credits: Credits,
}

impl Drop for HttpRequest {
    fn drop(&mut self) {
        self.abort.abort();
    }
}

#[rustler::resource_impl]
impl rustler::Resource for HttpRequest {
    const IMPLEMENTS_DOWN: bool = true;

    fn down<'a>(&'a self, _env: Env<'a>, _pid: LocalPid, _monitor: Monitor) {
        self.abort.abort();
    }
}

#[derive(NifMap)]
struct ClientOpts {
    idle_ms: u64,
    max_idle: u64,
    connect_timeout_ms: u64,
    /// A PEM file of the CA certificates trusted instead of the system's.
    ca_file: Option<String>,
    /// No certificate verification at all (only when the caller named it).
    verify_none: bool,
}

impl Options<'_> for ClientOpts {
    const NIF: &'static str = "http_client_new";
    const EXPECTED: &'static str = "idle_ms, max_idle, connect_timeout_ms (non-negative \
        integers), ca_file (string or nil), verify_none (boolean)";
}

impl From<ClientOpts> for Settings {
    fn from(opts: ClientOpts) -> Self {
        Settings {
            idle: Duration::from_millis(opts.idle_ms.max(1)),
            max_idle: usize::try_from(opts.max_idle).unwrap_or(usize::MAX),
            connect_timeout: Duration::from_millis(opts.connect_timeout_ms.max(1)),
            verify: match (opts.verify_none, opts.ca_file) {
                (true, _) => Verify::DangerouslyNone,
                (false, Some(path)) => Verify::CaFile(PathBuf::from(path)),
                (false, None) => Verify::System,
            },
        }
    }
}

/// A new client: `{:ok, client}`, or `{:error, message}` (an unreadable CA file, no system
/// trust store). Reads the system's trust store on first use: a dirty I/O scheduler.
#[rustler::nif(schedule = "DirtyIo")]
fn http_client_new(opts: Term) -> Result<ResourceArc<HttpClient>> {
    let settings = Settings::from(options::decode::<ClientOpts>(opts)?);
    let runtime = crate::runtime::get()?;
    let _guard = runtime.enter();
    let client = Client::new(&settings)?;
    Ok(ResourceArc::new(HttpClient(AssertUnwindSafe(client))))
}

#[derive(NifMap)]
struct RequestOpts {
    method: String,
    url: String,
    headers: Vec<(String, String)>,
    max_body: u64,
    max_error_body: u64,
    /// Parse a success's event stream into events.
    events: bool,
    /// Events handed over and not yet acknowledged.
    window: u64,
}

impl Options<'_> for RequestOpts {
    const NIF: &'static str = "http_request";
    const EXPECTED: &'static str = "method, url (strings), headers (list of {name, value} \
        strings), max_body, max_error_body, window (positive integers), events (boolean)";
}

fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

twin_nifs! {
    /// Starts a request on `client`; answers `{:ok, {handle, id}}` at once (or `{:error,
    /// message}`). The answer arrives as messages (see the module's doc). A body over 64 kB
    /// answers `:yield`: copying it is done by `http_request_dirty`.
    fn http_request / http_request_dirty<'a>(
        env: Env,
        client: ResourceArc<HttpClient>,
        opts: Term<'a>,
        body: Binary<'a>,
    ) -> (Result<(ResourceArc<HttpRequest>, u64)>),
    |dirty| {
        if !dirty && body.len() > NORMAL_BODY_BYTES {
            return Err(Error::Yield);
        }
        start(env, &client, opts, body)
    }
}

fn start<'a>(
    env: Env<'a>,
    client: &HttpClient,
    opts: Term<'a>,
    body: Binary<'a>,
) -> Result<(ResourceArc<HttpRequest>, u64)> {
    let opts = options::decode::<RequestOpts>(opts)?;
    let runtime = crate::runtime::get()?;
    let request = client::Request {
        method: opts.method,
        url: opts.url,
        headers: opts.headers,
        body: Bytes::copy_from_slice(body.as_slice()),
    };
    let bounds = Bounds {
        max_body: to_usize(opts.max_body),
        max_error_body: to_usize(opts.max_error_body),
        events: opts.events,
    };
    let credits = Credits::new(to_usize(opts.window));
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let owner = env.pid();
    let task = runtime.spawn(drive(
        client.0.clone(),
        request,
        bounds,
        credits.clone(),
        owner,
        id,
    ));
    let abort = task.abort_handle();
    // A panic inside the exchange must still end in a final message (an abort sends none).
    runtime.spawn(async move {
        if let Err(e) = task.await {
            if e.is_panic() {
                let mut msg_env = OwnedEnv::new();
                send(&mut msg_env, &owner, id, |env| {
                    let message = format!("the HTTP request failed internally: {e}");
                    (atoms::error(), atoms::answer(), message).encode(env)
                });
            }
        }
    });
    let handle = ResourceArc::new(HttpRequest { id, abort, credits });
    if env.monitor(&handle, &owner).is_none() {
        // The owner is already gone.
        handle.abort.abort();
    }
    Ok((handle.clone(), handle.id))
}

fn bytes<'a>(env: Env<'a>, data: &[u8]) -> Term<'a> {
    let mut bin = rustler::NewBinary::new(env, data.len());
    bin.as_mut_slice().copy_from_slice(data);
    Binary::from(bin).to_term(env)
}

fn stage(stage: Stage) -> Atom {
    match stage {
        Stage::Connect => atoms::connect(),
        Stage::Send => atoms::send(),
        Stage::Answer => atoms::answer(),
        Stage::TooBig => atoms::too_big(),
    }
}

/// Sends `{:cmdc_http, id, payload}`; a dead recipient is not an error.
fn send<F>(msg_env: &mut OwnedEnv, pid: &LocalPid, id: u64, payload: F)
where
    F: for<'a> FnOnce(Env<'a>) -> Term<'a>,
{
    let _ = msg_env.send_and_clear(pid, |env| {
        (atoms::cmdc_http(), id, payload(env)).encode(env)
    });
}

fn event_term<'a>(env: Env<'a>, event: &Event) -> Term<'a> {
    match event {
        Event::Head { status, headers } => (atoms::head(), *status, headers).encode(env),
        Event::Event(e) => (
            atoms::event(),
            e.kind.as_str(),
            bytes(env, &e.data),
            e.id.as_deref(),
        )
            .encode(env),
        Event::Body(body) => (atoms::body(), bytes(env, body)).encode(env),
        Event::End => atoms::end().encode(env),
    }
}

async fn drive(
    client: Client,
    request: client::Request,
    bounds: Bounds,
    credits: Credits,
    pid: LocalPid,
    id: u64,
) {
    let mut msg_env = OwnedEnv::new();
    let result = client::exchange(&client, request, bounds, &credits, |event| {
        send(&mut msg_env, &pid, id, |env| event_term(env, &event))
    })
    .await;
    if let Err(failure) = result {
        send(&mut msg_env, &pid, id, |env| {
            (
                atoms::error(),
                stage(failure.stage),
                failure.message.as_str(),
            )
                .encode(env)
        });
    }
}

/// Aborts a request: its connection is closed. No further message is sent for it.
#[rustler::nif]
fn http_cancel(request: ResourceArc<HttpRequest>) -> Atom {
    request.abort.abort();
    atoms::ok()
}

/// Returns `n` credits of a request's event stream (the owner consumed `n` more `:event`
/// messages): `{:ok, credits_returned}`, never more than were taken. A counter: a normal
/// scheduler.
#[rustler::nif]
fn http_ack(request: ResourceArc<HttpRequest>, n: Term) -> Result<usize> {
    let n: u64 = n.decode().map_err(|_| {
        Error::Message(format!(
            "http_ack: expected a non-negative integer count of events, got: {}",
            crate::term::shown(n)
        ))
    })?;
    Ok(request.credits.ack(to_usize(n)))
}
