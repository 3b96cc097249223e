//! Output of a run: capped buffers, lines split as they come, and the pipe reader that fills
//! them.

use tokio::io::{AsyncRead, AsyncReadExt};

use super::flow::Gate;

/// Keeps the first `cap` bytes written to it and counts the rest.
#[derive(Debug, Default)]
pub struct CappedBuffer {
    pub data: Vec<u8>,
    pub dropped: u64,
    cap: usize,
}

impl CappedBuffer {
    pub fn new(cap: usize) -> Self {
        CappedBuffer {
            data: Vec::new(),
            dropped: 0,
            cap,
        }
    }

    /// Appends what fits; returns the part that was kept.
    pub fn push<'a>(&mut self, chunk: &'a [u8]) -> &'a [u8] {
        let room = self.cap.saturating_sub(self.data.len());
        let kept = &chunk[..chunk.len().min(room)];
        self.data.extend_from_slice(kept);
        self.dropped += (chunk.len() - kept.len()) as u64;
        kept
    }

    pub fn is_full(&self) -> bool {
        self.data.len() >= self.cap
    }
}

/// Splits a byte stream into lines (without the `\n`, and without a `\r` before it); lines
/// longer than `max` come out in pieces of `max` bytes.
#[derive(Debug)]
pub struct LineSplitter {
    pending: Vec<u8>,
    max: usize,
}

impl LineSplitter {
    pub fn new(max: usize) -> Self {
        LineSplitter {
            pending: Vec::new(),
            max: max.max(1),
        }
    }

    /// Feeds a chunk and returns the complete lines it finished.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<Vec<u8>> {
        let mut lines = Vec::new();
        let mut rest = chunk;
        while let Some(i) = rest.iter().position(|&b| b == b'\n') {
            self.pending.extend_from_slice(&rest[..i]);
            self.split_long(&mut lines);
            let mut line = std::mem::take(&mut self.pending);
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            lines.push(line);
            rest = &rest[i + 1..];
        }
        self.pending.extend_from_slice(rest);
        self.split_long(&mut lines);
        lines
    }

    fn split_long(&mut self, lines: &mut Vec<Vec<u8>>) {
        while self.pending.len() > self.max {
            let tail = self.pending.split_off(self.max);
            lines.push(std::mem::replace(&mut self.pending, tail));
        }
    }

    /// The unterminated last line, if any.
    pub fn finish(&mut self) -> Option<Vec<u8>> {
        if self.pending.is_empty() {
            None
        } else {
            Some(std::mem::take(&mut self.pending))
        }
    }
}

pub(super) async fn read_all<R, F>(
    reader: Option<R>,
    cap: usize,
    mut lines: Option<(LineSplitter, F)>,
    stream_all: bool,
    mut gate: Gate,
) -> CappedBuffer
where
    R: AsyncRead + Unpin,
    F: FnMut(&[u8]),
{
    let mut buf = CappedBuffer::new(cap);
    let Some(mut reader) = reader else { return buf };
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        match reader.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let full_before = buf.is_full();
                let kept = buf.push(&chunk[..n]);
                let streamed = if stream_all { &chunk[..n] } else { kept };
                if let Some((splitter, on_line)) = lines.as_mut() {
                    if stream_all || !full_before {
                        for line in splitter.push(streamed) {
                            if gate.admit(&line).await {
                                on_line(&line);
                            }
                        }
                    }
                }
            }
        }
    }
    if let Some((mut splitter, mut on_line)) = lines {
        if let Some(last) = splitter.finish() {
            if gate.admit(&last).await {
                on_line(&last);
            }
        }
        if let Some(last_words) = gate.finish() {
            on_line(&last_words);
        }
    }
    buf
}
