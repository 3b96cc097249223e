//! The listener and its connections: hyper's HTTP/1.1 server (keep-alive; pipelined requests
//! answered one after the other, in order), a bound on connections, and for each request the
//! checks and limits this layer answers itself before the handler sees it.
//!
//! Time limits: a head must be complete `header_timeout` after the server starts reading it
//! (on a kept-alive connection, from the previous answer: the idle time-out too; hyper's
//! `header_read_timeout`), and the body `body_timeout` after the head, so a request trickling in
//! holds its connection at most their sum. Over the limits: 408 or 413 as JSON-RPC errors, then
//! the connection is closed.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode};
use http_body::Body as _;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, watch, Notify, OwnedSemaphorePermit, Semaphore};

use super::answer::Refusal;
use super::checks;
use super::exchange::{Exchange, Handler, Head, Reply};
use super::limits::Limits;
use super::stream::StreamBody;
use crate::error::{Error, Result};

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Body = UnsyncBoxBody<Bytes, BoxError>;

/// A listening server; dropping it (or [`Listener::close`]) stops accepting and ends every
/// connection, open streams included.
pub struct Listener {
    pub addr: SocketAddr,
    shutdown: watch::Sender<bool>,
}

struct Shared {
    limits: Limits,
    handler: Arc<dyn Handler>,
    next_id: AtomicU64,
}

impl Listener {
    /// Serves `listener` (a bound std socket) on the runtime `rt`.
    pub fn start(
        listener: std::net::TcpListener,
        limits: Limits,
        handler: Arc<dyn Handler>,
        rt: &tokio::runtime::Handle,
    ) -> Result<Listener> {
        let addr = listener
            .local_addr()
            .map_err(|e| Error::Process(format!("cannot read the listening address: {e}")))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| Error::Process(format!("cannot make the listener non-blocking: {e}")))?;
        let listener = {
            let _inside = rt.enter();
            TcpListener::from_std(listener)
                .map_err(|e| Error::Process(format!("cannot serve on {addr}: {e}")))?
        };
        let (shutdown, stop) = watch::channel(false);
        let shared = Arc::new(Shared {
            limits,
            handler,
            next_id: AtomicU64::new(1),
        });
        rt.spawn(accept_loop(listener, shared, stop));
        Ok(Listener { addr, shutdown })
    }

    /// Stops accepting and ends every connection.
    pub fn close(&self) {
        let _ = self.shutdown.send(true);
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.close();
    }
}

async fn stopped(stop: &mut watch::Receiver<bool>) {
    while !*stop.borrow_and_update() {
        if stop.changed().await.is_err() {
            return;
        }
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let permits = Arc::new(Semaphore::new(shared.limits.max_connections.max(1)));
    loop {
        let permit = tokio::select! {
            permit = permits.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => return,
            },
            _ = stopped(&mut stop) => return,
        };
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stopped(&mut stop) => return,
        };
        match accepted {
            Ok((socket, peer)) => {
                // Heads and bodies leave in separate writes: Nagle would hold the second for
                // the client's delayed ACK.
                let _ = socket.set_nodelay(true);
                tokio::spawn(connection(
                    socket,
                    peer,
                    shared.clone(),
                    stop.clone(),
                    permit,
                ));
            }
            // Out of descriptors (or a connection reset before accept): try again shortly
            // rather than spin.
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
        }
    }
}

async fn connection(
    socket: TcpStream,
    peer: SocketAddr,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
    _permit: OwnedSemaphorePermit,
) {
    let limits = &shared.limits;
    let abort = Arc::new(Notify::new());
    let service = {
        let (shared, abort) = (shared.clone(), abort.clone());
        service_fn(move |req| respond(req, peer, shared.clone(), abort.clone()))
    };
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(limits.max_header_bytes.max(8192))
        .serve_connection(TokioIo::new(socket), service);
    tokio::select! {
        _ = conn => {}
        _ = abort.notified() => {}
        _ = stopped(&mut stop) => {}
    }
}

/// Runs `gone` on the exchange if dropped armed: the connection let go of the request before
/// its answer came (the client left).
struct Waiting(Option<Arc<Exchange>>);

impl Drop for Waiting {
    fn drop(&mut self) {
        if let Some(exchange) = self.0.take() {
            exchange.gone();
        }
    }
}

async fn respond(
    req: Request<Incoming>,
    peer: SocketAddr,
    shared: Arc<Shared>,
    abort: Arc<Notify>,
) -> std::result::Result<Response<Body>, Infallible> {
    let limits = &shared.limits;
    if let Err(refusal) = checks::check(req.headers(), limits) {
        return Ok(refuse(&refusal));
    }
    if req.body().size_hint().lower() > limits.max_body as u64 {
        return Ok(refuse(&too_large(limits)));
    }
    let (parts, body) = req.into_parts();
    let body = match read_body(body, limits).await {
        Ok(body) => body,
        Err(refusal) => return Ok(refuse(&refusal)),
    };
    let head = Head {
        method: parts.method.as_str().to_owned(),
        path: parts.uri.path().to_owned(),
        query: parts.uri.query().unwrap_or("").to_owned(),
        headers: parts
            .headers
            .iter()
            .map(|(k, v)| (k.as_str().to_owned(), Bytes::copy_from_slice(v.as_bytes())))
            .collect(),
        peer,
        body,
    };
    let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
    let (tx, rx) = oneshot::channel();
    let exchange = Exchange::new(id, tx, limits.stream_soft_bytes, limits.stream_hard_bytes);
    let mut waiting = Waiting(Some(exchange.clone()));
    shared.handler.request(head, exchange.clone());
    let reply = rx.await;
    waiting.0 = None;
    Ok(match reply {
        Ok(Reply::Whole {
            status,
            headers,
            body,
        }) => response(
            status,
            &headers,
            Full::new(body).map_err(never).boxed_unsync(),
        ),
        Ok(Reply::Stream {
            status,
            headers,
            stream,
        }) => {
            stream.abort_with(abort);
            let on_drop = Box::new(move |s: &super::stream::Stream| {
                if s.finished() {
                    exchange.done()
                } else {
                    exchange.gone()
                }
            });
            let body = StreamBody::new(stream, on_drop).map_err(|e| Box::new(e) as BoxError);
            response(status, &headers, body.boxed_unsync())
        }
        Err(_) => refuse(&Refusal::new(
            500,
            "the request was dropped unanswered (the server's handler failed)",
        )),
    })
}

fn never(e: Infallible) -> BoxError {
    match e {}
}

fn too_large(limits: &Limits) -> Refusal {
    Refusal::closing(
        413,
        format!(
            "the request body is over {} bytes (the server's :max_body)",
            limits.max_body
        ),
    )
}

async fn read_body(body: Incoming, limits: &Limits) -> std::result::Result<Bytes, Refusal> {
    let read = Limited::new(body, limits.max_body).collect();
    match tokio::time::timeout(limits.body_timeout, read).await {
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(e)) if e.downcast_ref::<LengthLimitError>().is_some() => Err(too_large(limits)),
        Ok(Err(e)) => Err(Refusal::closing(
            400,
            format!("cannot read the request body: {e}"),
        )),
        Err(_) => Err(Refusal::closing(
            408,
            format!(
                "the request body was not complete after {} ms (the server's :body_timeout_ms)",
                limits.body_timeout.as_millis()
            ),
        )),
    }
}

fn refuse(refusal: &Refusal) -> Response<Body> {
    let mut headers = vec![("content-type".to_owned(), "application/json".to_owned())];
    if refusal.close {
        headers.push(("connection".to_owned(), "close".to_owned()));
    }
    let body = Full::new(refusal.body()).map_err(never).boxed_unsync();
    response(refusal.status, &headers, body)
}

/// A response of checked parts (`Exchange` checked the handler's, ours are constants).
fn response(status: u16, headers: &[(String, String)], body: Body) -> Response<Body> {
    let mut response = Response::new(body);
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    let map = response.headers_mut();
    for (name, value) in headers {
        if let (Ok(name), Ok(value)) = (
            http::HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            map.append(name, value);
        }
    }
    response
}
