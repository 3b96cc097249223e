//! One request handed over to the handler (the Elixir side, through the NIF), and how it is
//! answered: whole ([`Exchange::reply`]) or as an event stream ([`Exchange::stream`]). If the
//! client leaves first (connection closed while the answer is awaited, or while its stream is
//! open), the callbacks given to [`Exchange::on_gone`] run once, so the work behind it is
//! cancelled; an exchange dropped unanswered is answered 500.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use tokio::sync::oneshot;

use super::stream::Stream;
use crate::error::{Error, Result};

/// A request as the handler sees it: header names in lower case, the body whole.
#[derive(Debug, Clone)]
pub struct Head {
    pub method: String,
    pub path: String,
    pub query: String,
    pub headers: Vec<(String, Bytes)>,
    pub peer: SocketAddr,
    pub body: Bytes,
}

/// The answer the connection writes.
pub enum Reply {
    Whole {
        status: u16,
        headers: Vec<(String, String)>,
        body: Bytes,
    },
    Stream {
        status: u16,
        headers: Vec<(String, String)>,
        stream: Arc<Stream>,
    },
}

/// Receives every request that passed the checks.
pub trait Handler: Send + Sync + 'static {
    fn request(&self, head: Head, exchange: Arc<Exchange>);
}

type Callback = Box<dyn FnOnce() + Send>;

enum Presence {
    /// The client waits; these run if it leaves.
    Waiting(Vec<Callback>),
    /// It left.
    Gone,
    /// It got its whole answer: nothing more to tell.
    Done,
}

/// One request's answer slot.
pub struct Exchange {
    pub id: u64,
    reply: Mutex<Option<oneshot::Sender<Reply>>>,
    presence: Mutex<Presence>,
    soft: usize,
    hard: usize,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Exchange {
    /// An exchange whose answer goes to `tx`; streams get the bounds `soft`/`hard` bytes.
    pub fn new(id: u64, tx: oneshot::Sender<Reply>, soft: usize, hard: usize) -> Arc<Self> {
        Arc::new(Exchange {
            id,
            reply: Mutex::new(Some(tx)),
            presence: Mutex::new(Presence::Waiting(Vec::new())),
            soft,
            hard,
        })
    }

    /// Answers with a whole body.
    pub fn reply(&self, status: u16, headers: Vec<(String, String)>, body: Bytes) -> Result<()> {
        check_head(status, &headers)?;
        self.send(Reply::Whole {
            status,
            headers,
            body,
        })?;
        self.done();
        Ok(())
    }

    /// Answers with an event stream, returned to write into.
    pub fn stream(&self, status: u16, headers: Vec<(String, String)>) -> Result<Arc<Stream>> {
        check_head(status, &headers)?;
        let stream = Stream::new(self.soft, self.hard);
        self.send(Reply::Stream {
            status,
            headers,
            stream: stream.clone(),
        })?;
        Ok(stream)
    }

    fn send(&self, reply: Reply) -> Result<()> {
        let tx = lock(&self.reply).take();
        match tx {
            Some(tx) => tx
                .send(reply)
                .map_err(|_| Error::Process("the client has gone".into())),
            None => Err(Error::Invalid("this request was already answered".into())),
        }
    }

    /// Runs `f` once if the client leaves before its answer is complete. `false` (and `f`
    /// dropped unrun) when it has already left: the caller tells its own way, since `f` may
    /// only be safe to run from the runtime's threads.
    pub fn on_gone(&self, f: Callback) -> bool {
        let mut presence = lock(&self.presence);
        match &mut *presence {
            Presence::Waiting(callbacks) => {
                callbacks.push(f);
                true
            }
            Presence::Gone => false,
            Presence::Done => true,
        }
    }

    /// Whether the client left before its answer was complete.
    pub fn is_gone(&self) -> bool {
        matches!(*lock(&self.presence), Presence::Gone)
    }

    /// The client left: run the callbacks (unless the answer was complete).
    pub fn gone(&self) {
        let previous = std::mem::replace(&mut *lock(&self.presence), Presence::Gone);
        match previous {
            Presence::Waiting(callbacks) => callbacks.into_iter().for_each(|f| f()),
            Presence::Done => *lock(&self.presence) = Presence::Done,
            Presence::Gone => {}
        }
    }

    /// The answer is complete: nothing more to tell.
    pub fn done(&self) {
        let mut presence = lock(&self.presence);
        if matches!(*presence, Presence::Waiting(_)) {
            *presence = Presence::Done;
        }
    }
}

/// A status hyper can write and header names and values HTTP allows.
fn check_head(status: u16, headers: &[(String, String)]) -> Result<()> {
    http::StatusCode::from_u16(status)
        .map_err(|_| Error::Invalid(format!("{status} is not an HTTP status")))?;
    for (name, value) in headers {
        http::HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| Error::Invalid(format!("{name:?} is not an HTTP header name")))?;
        http::HeaderValue::from_str(value).map_err(|_| {
            Error::Invalid(format!("the value of header {name} is not allowed in HTTP"))
        })?;
    }
    Ok(())
}
