//! An incremental, bounded parser of `text/event-stream` (Server-Sent Events), as Streamable
//! HTTP answers carry them: fed the body's chunks as they arrive, it yields complete events.
//!
//! Each event has a type (`message` unless the stream says otherwise), its `data` lines joined
//! with `\n`, and the last `id` seen. Comment lines (`:`) and unknown fields are ignored;
//! `\r\n`, `\r` and `\n` all end a line. What an unfinished event holds (its data lines and the
//! unfinished line) is bounded by `max_bytes`: a stream that never ends an event, or one endless
//! line, is refused once over it, in time linear in the bytes read.

/// One complete event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub kind: String,
    pub data: Vec<u8>,
    pub id: Option<String>,
}

/// The parser's state between chunks.
#[derive(Debug)]
pub struct Parser {
    max_bytes: usize,
    /// The unfinished line.
    line: Vec<u8>,
    /// The last chunk ended with `\r`: a `\n` that starts the next one belongs to it.
    after_cr: bool,
    data: Option<Vec<u8>>,
    kind: Option<String>,
    id: Option<String>,
}

/// An unfinished event grew over the bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooBig;

impl Parser {
    /// A parser that holds at most `max_bytes` of an unfinished event.
    pub fn new(max_bytes: usize) -> Parser {
        Parser {
            max_bytes,
            line: Vec::new(),
            after_cr: false,
            data: None,
            kind: None,
            id: None,
        }
    }

    /// The bytes held for the event not complete yet.
    pub fn pending_bytes(&self) -> usize {
        self.line.len() + self.data.as_ref().map_or(0, Vec::len)
    }

    /// Feeds a chunk; the events it completes are pushed onto `out`, in order.
    pub fn feed(&mut self, mut chunk: &[u8], out: &mut Vec<Event>) -> Result<(), TooBig> {
        if self.after_cr {
            self.after_cr = false;
            if let Some(rest) = chunk.strip_prefix(b"\n") {
                chunk = rest;
            }
        }
        while let Some(end) = chunk.iter().position(|&b| b == b'\n' || b == b'\r') {
            let (head, rest) = chunk.split_at(end);
            self.grow(head)?;
            let line = std::mem::take(&mut self.line);
            self.line(&line, out);
            chunk = &rest[1..];
            if rest[0] == b'\r' {
                match chunk.first() {
                    Some(b'\n') => chunk = &chunk[1..],
                    None => self.after_cr = true,
                    Some(_) => {}
                }
            }
        }
        self.grow(chunk)
    }

    fn grow(&mut self, bytes: &[u8]) -> Result<(), TooBig> {
        if self.pending_bytes() + bytes.len() > self.max_bytes {
            return Err(TooBig);
        }
        self.line.extend_from_slice(bytes);
        Ok(())
    }

    fn line(&mut self, line: &[u8], out: &mut Vec<Event>) {
        if line.is_empty() {
            let kind = self.kind.take();
            if let Some(data) = self.data.take() {
                out.push(Event {
                    kind: kind.unwrap_or_else(|| "message".to_owned()),
                    data,
                    id: self.id.clone(),
                });
            }
            return;
        }
        if line[0] == b':' {
            return;
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(i) => {
                let value = &line[i + 1..];
                (&line[..i], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"data" => match &mut self.data {
                Some(data) => {
                    data.push(b'\n');
                    data.extend_from_slice(value);
                }
                None => self.data = Some(value.to_vec()),
            },
            b"event" => self.kind = Some(String::from_utf8_lossy(value).into_owned()),
            b"id" if !value.contains(&0) => {
                self.id = Some(String::from_utf8_lossy(value).into_owned())
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(chunks: &[&[u8]], max: usize) -> Result<Vec<Event>, TooBig> {
        let mut parser = Parser::new(max);
        let mut out = Vec::new();
        for chunk in chunks {
            parser.feed(chunk, &mut out)?;
        }
        Ok(out)
    }

    #[test]
    fn events_ids_comments_and_line_ends() {
        let events = parse(
            &[
                b"id: 7\ndata: {\"a\":\ndata: 1}\n\n: keep-alive\n\nevent: x\r\ndata: y\r",
                b"\n\r\n",
            ],
            1024,
        )
        .unwrap();
        assert_eq!(
            events,
            vec![
                Event {
                    kind: "message".into(),
                    data: b"{\"a\":\n1}".to_vec(),
                    id: Some("7".into())
                },
                Event {
                    kind: "x".into(),
                    data: b"y".to_vec(),
                    id: Some("7".into())
                }
            ]
        );
    }

    #[test]
    fn split_anywhere_gives_the_same_events() {
        let text: &[u8] = b"event: a\r\ndata: 1\r\n\r\ndata:2\rdata: 3\r\rid: 9\ndata\n\n";
        let whole = parse(&[text], 1024).unwrap();
        assert_eq!(whole.len(), 3);
        assert_eq!(whole[1].data, b"2\n3");
        assert_eq!(whole[2].data, b"");
        for cut in 0..text.len() {
            assert_eq!(
                parse(&[&text[..cut], &text[cut..]], 1024).unwrap(),
                whole,
                "{cut}"
            );
        }
    }

    #[test]
    fn an_event_that_never_ends_is_refused_at_the_bound() {
        let line = vec![b'x'; 600];
        assert_eq!(parse(&[&line, &line], 1000), Err(TooBig));
        let lines = b"data: 12345678\n".repeat(200);
        assert_eq!(parse(&[&lines], 1000), Err(TooBig));
        // Complete events free what they held.
        let events = b"data: 12345678\n\n".repeat(1000);
        assert_eq!(parse(&[&events], 100).unwrap().len(), 1000);
    }
}
