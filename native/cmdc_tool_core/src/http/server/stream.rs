//! An outbound event stream (SSE) with a bound: the bytes queued and not yet taken by the
//! connection. A client that does not read its socket makes the queue grow; past `soft` bytes
//! droppable events (progress) are dropped, and the stream is closed (the connection aborted,
//! the sender told `Full` so it cancels the work behind the stream) when an event would take
//! the queue past `hard`, or when the client has fallen `hard` bytes of dropped events behind
//! without the queue draining under `soft` meanwhile. One event is always accepted into an
//! empty queue, so a large final answer still goes out to a client that reads.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::sync::Notify;

/// What became of an event handed to [`Stream::send`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sent {
    /// Queued for the connection.
    Queued,
    /// Dropped: a droppable event while the queue was over its soft bound.
    Dropped,
}

/// Why an event was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The queue is over its bound: the stream is now closed.
    Full,
    /// The stream was closed before (client gone, over the bound, or finished).
    Closed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Open,
    /// Ends once the queue is drained.
    Finished,
    /// Ends now; what is queued is dropped.
    Closed,
}

#[derive(Debug)]
struct Queue {
    events: VecDeque<Bytes>,
    bytes: usize,
    state: State,
    waker: Option<Waker>,
    dropped: u64,
    /// Bytes dropped since the queue was last under `soft`.
    lag: usize,
    /// Told when the stream is closed over its bound: the connection may be blocked on a full
    /// socket, not polling the body, so it is ended from outside.
    abort: Option<Arc<Notify>>,
}

/// The sending side, shared by the writer (Elixir, through the NIF) and the body.
#[derive(Debug)]
pub struct Stream {
    queue: Mutex<Queue>,
    soft: usize,
    hard: usize,
}

impl Stream {
    /// An open stream with its bounds.
    pub fn new(soft: usize, hard: usize) -> Arc<Self> {
        Arc::new(Stream {
            queue: Mutex::new(Queue {
                events: VecDeque::new(),
                bytes: 0,
                state: State::Open,
                waker: None,
                dropped: 0,
                lag: 0,
                abort: None,
            }),
            soft,
            hard: hard.max(soft),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `event` (bytes as they go on the wire), drops it, or refuses it.
    pub fn send(&self, event: Bytes, droppable: bool) -> Result<Sent, Refused> {
        let mut q = self.lock();
        if q.state != State::Open {
            return Err(Refused::Closed);
        }
        if droppable && q.bytes >= self.soft {
            q.lag = q.lag.saturating_add(event.len());
            if q.lag <= self.hard {
                q.dropped += 1;
                return Ok(Sent::Dropped);
            }
            return Err(overflow(&mut q));
        }
        if q.bytes > 0 && q.bytes + event.len() > self.hard {
            return Err(overflow(&mut q));
        }
        q.bytes += event.len();
        q.events.push_back(event);
        wake(&mut q);
        Ok(Sent::Queued)
    }

    /// `abort` is notified if the stream overflows (its connection is then ended).
    pub fn abort_with(&self, abort: Arc<Notify>) {
        self.lock().abort = Some(abort);
    }

    /// Ends the stream once what is queued is sent.
    pub fn finish(&self) {
        let mut q = self.lock();
        if q.state == State::Open {
            q.state = State::Finished;
            wake(&mut q);
        }
    }

    /// Ends the stream now (the writer is gone, or the connection is): nothing more is sent.
    pub fn close(&self) {
        let mut q = self.lock();
        if q.state != State::Closed {
            q.state = State::Closed;
            q.events.clear();
            q.bytes = 0;
            wake(&mut q);
        }
    }

    /// Whether the stream ended normally (`finish`) rather than being closed.
    pub fn finished(&self) -> bool {
        self.lock().state == State::Finished
    }

    /// Bytes queued and not yet taken by the connection.
    pub fn queued_bytes(&self) -> usize {
        self.lock().bytes
    }

    /// Droppable events dropped so far.
    pub fn dropped(&self) -> u64 {
        self.lock().dropped
    }

    fn poll_next(&self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, Refused>>> {
        let mut q = self.lock();
        if q.state == State::Closed {
            return Poll::Ready(Some(Err(Refused::Closed)));
        }
        if let Some(event) = q.events.pop_front() {
            q.bytes -= event.len();
            if q.bytes < self.soft {
                q.lag = 0;
            }
            return Poll::Ready(Some(Ok(event)));
        }
        if q.state == State::Finished {
            return Poll::Ready(None);
        }
        q.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

/// Closes the queue over its bound and ends its connection.
fn overflow(q: &mut Queue) -> Refused {
    q.state = State::Closed;
    q.events.clear();
    q.bytes = 0;
    wake(q);
    if let Some(abort) = q.abort.take() {
        abort.notify_one();
    }
    Refused::Full
}

fn wake(q: &mut Queue) {
    if let Some(waker) = q.waker.take() {
        waker.wake();
    }
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Refused::Full => "the client does not read its event stream: closed",
            Refused::Closed => "the event stream is closed",
        })
    }
}

impl std::error::Error for Refused {}

/// What a [`StreamBody`] runs when the connection lets go of it.
pub type OnDrop = Box<dyn FnOnce(&Stream) + Send + Sync>;

/// The response body reading a [`Stream`]; `on_drop` runs when the connection lets go of it
/// (written to the end, or the client gone).
pub struct StreamBody {
    stream: Arc<Stream>,
    on_drop: Option<OnDrop>,
}

impl StreamBody {
    /// The body of `stream`; `on_drop` is told when the connection lets go of it.
    pub fn new(stream: Arc<Stream>, on_drop: OnDrop) -> Self {
        StreamBody {
            stream,
            on_drop: Some(on_drop),
        }
    }
}

impl Body for StreamBody {
    type Data = Bytes;
    type Error = Refused;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Refused>>> {
        self.stream
            .poll_next(cx)
            .map(|next| next.map(|r| r.map(Frame::data)))
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

impl Drop for StreamBody {
    fn drop(&mut self) {
        if let Some(on_drop) = self.on_drop.take() {
            on_drop(&self.stream);
        }
        self.stream.close();
    }
}
