//! Flow control for a long-lived run's streamed output (an MCP server's stdout and stderr): a
//! credit [`Window`] shared by the run's two readers and its owner.
//!
//! Each streamed line takes one credit and counts its bytes; the owner gives credits back with
//! [`Window::ack`] as it consumes lines. Without a credit the stdout reader waits: it stops
//! reading, the pipe fills, and the program blocks on its next write, so what is in flight stays
//! bounded however fast the program writes and nobody is killed for it. stderr never waits (a
//! program blocked on its log could never answer on stdout): a stderr line without a credit is
//! dropped and counted ([`Window::take_dropped`]), and while stdout waits it gets returned
//! credits first.

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

/// At most `messages` lines and (beyond the first line) `bytes` bytes streamed and not yet
/// acknowledged. Cheap to clone: clones share the window.
#[derive(Clone)]
pub struct Window(Arc<Shared>);

struct Shared {
    messages: usize,
    bytes: usize,
    state: Mutex<State>,
    credit: Notify,
}

#[derive(Default)]
struct State {
    /// Sizes of the lines sent and not yet acknowledged, oldest first.
    sent: VecDeque<usize>,
    /// Their total.
    bytes: usize,
    /// stderr lines dropped since the last `take_dropped`.
    dropped: u64,
    /// The stdout reader waits for a credit: stderr takes none meanwhile.
    waiting: bool,
    /// The program has ended: what is left in its pipes passes without credits.
    open: bool,
}

impl fmt::Debug for Window {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (messages, bytes) = self.in_flight();
        f.debug_struct("Window")
            .field("messages", &self.0.messages)
            .field("bytes", &self.0.bytes)
            .field("in_flight", &(messages, bytes))
            .finish()
    }
}

impl Window {
    /// A window of `messages` lines (at least 1) and `bytes` bytes; a single line larger than
    /// `bytes` still passes when nothing else is in flight.
    pub fn new(messages: usize, bytes: usize) -> Window {
        Window(Arc::new(Shared {
            messages: messages.max(1),
            bytes: bytes.max(1),
            state: Mutex::new(State::default()),
            credit: Notify::new(),
        }))
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        match self.0.state.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// The owner consumed `n` more lines: their credits come back. Acknowledging more than was
    /// sent gives back only what was sent (the window never grows). Returns the credits returned.
    pub fn ack(&self, n: usize) -> usize {
        let mut state = self.lock();
        let n = n.min(state.sent.len());
        let freed: usize = state.sent.drain(..n).sum();
        state.bytes -= freed;
        drop(state);
        if n > 0 {
            self.0.credit.notify_one();
        }
        n
    }

    /// Lines and bytes streamed and not yet acknowledged.
    pub fn in_flight(&self) -> (usize, usize) {
        let state = self.lock();
        (state.sent.len(), state.bytes)
    }

    /// stderr lines dropped since the last call (then zero again).
    pub fn take_dropped(&self) -> u64 {
        std::mem::take(&mut self.lock().dropped)
    }

    /// Waits for the credit to send a line of `size` bytes, and takes it.
    pub(super) async fn send(&self, size: usize) {
        loop {
            // Created before the check: an ack between the check and the wait is not missed.
            let notified = self.0.credit.notified();
            {
                let mut state = self.lock();
                if self.fits(&state, size) {
                    state.waiting = false;
                    state.sent.push_back(size);
                    state.bytes += size;
                    return;
                }
                state.waiting = true;
            }
            notified.await;
        }
    }

    /// Takes the credit for a line of `size` bytes if there is one; else counts a drop.
    pub(super) fn try_send(&self, size: usize) -> bool {
        let mut state = self.lock();
        if !state.waiting && self.fits(&state, size) {
            state.sent.push_back(size);
            state.bytes += size;
            true
        } else {
            state.dropped += 1;
            false
        }
    }

    /// The program has ended: what is left in its pipes (a pipe's worth, read for a bounded
    /// time) passes without credits rather than being lost to an owner that is slow to ack.
    pub(super) fn open(&self) {
        self.lock().open = true;
        self.0.credit.notify_one();
    }

    fn fits(&self, state: &State, size: usize) -> bool {
        state.open
            || state.sent.len() < self.0.messages
                && (state.sent.is_empty() || state.bytes + size <= self.0.bytes)
    }
}

/// Bytes kept of a dropped stderr line, to hand over as the program's last words.
const LAST_WORDS: usize = 4096;

/// How one reader passes its lines: freely, waiting for credits (stdout), or dropping the lines
/// that have none (stderr).
pub(super) enum Gate {
    Open,
    Wait(Window),
    Drop {
        window: Window,
        last: Option<Vec<u8>>,
    },
}

impl Gate {
    /// The gates of a run's stdout and stderr.
    pub(super) fn pair(window: Option<&Window>) -> (Gate, Gate) {
        match window {
            None => (Gate::Open, Gate::Open),
            Some(w) => (
                Gate::Wait(w.clone()),
                Gate::Drop {
                    window: w.clone(),
                    last: None,
                },
            ),
        }
    }

    /// Whether `line` may be sent now (stdout waits until it may).
    pub(super) async fn admit(&mut self, line: &[u8]) -> bool {
        match self {
            Gate::Open => true,
            Gate::Wait(window) => {
                window.send(line.len()).await;
                true
            }
            Gate::Drop { window, last } => {
                if window.try_send(line.len()) {
                    *last = None;
                    return true;
                }
                let kept = last.get_or_insert_with(Vec::new);
                kept.clear();
                kept.extend_from_slice(&line[..line.len().min(LAST_WORDS)]);
                false
            }
        }
    }

    /// At the end of the stream: the last line, when it was dropped (its head), sent without a
    /// credit so that why a program stopped is not lost to a flood before it.
    pub(super) fn finish(&mut self) -> Option<Vec<u8>> {
        match self {
            Gate::Drop { window, last } => {
                let last = last.take()?;
                // Delivered after all: no longer counted as dropped.
                let mut state = window.lock();
                state.dropped = state.dropped.saturating_sub(1);
                Some(last)
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Window;

    #[test]
    fn credits_count_lines_and_bytes_and_never_grow() {
        let w = Window::new(3, 100);
        assert!(w.try_send(60));
        assert!(!w.try_send(60), "over the bytes");
        assert!(w.try_send(40));
        assert_eq!(w.in_flight(), (2, 100));
        assert_eq!(w.take_dropped(), 1);
        assert_eq!(w.take_dropped(), 0);
        assert_eq!(w.ack(10), 2, "only what was sent comes back");
        assert_eq!(w.in_flight(), (0, 0));
        assert!(w.try_send(500), "one line over the bytes passes alone");
        assert!(!w.try_send(0), "but nothing beside it");
        w.ack(1);
        assert!(w.try_send(0) && w.try_send(0) && w.try_send(0));
        assert!(!w.try_send(0), "over the lines");
    }

    #[tokio::test]
    async fn a_waiting_sender_resumes_on_ack_before_stderr() {
        let w = Window::new(1, 1 << 20);
        w.send(1).await;
        let waiting = tokio::spawn({
            let w = w.clone();
            async move { w.send(1).await }
        });
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(!waiting.is_finished());
        assert_eq!(w.ack(1), 1);
        // The returned credit goes to the waiting stdout, not to a stderr line arriving now.
        assert!(!w.try_send(1));
        waiting.await.unwrap();
        assert_eq!(w.in_flight(), (1, 1));
    }
}
