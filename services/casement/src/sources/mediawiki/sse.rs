//! The Server-Sent Events wire format (the WHATWG HTML standard, "server-sent events"), as
//! the MediaWiki stream source reads it, with bounds a hostile or broken server cannot
//! get past: each byte is looked at once (a long line costs linear time, not quadratic);
//! a line and an event are capped at `max_event_bytes` (what is over is discarded as it
//! arrives and reported as [`Parsed::TooLarge`] with its length); lines end with CRLF, LF
//! or a lone CR; an id that could not be sent back as a `Last-Event-ID` header is ignored.

/// One Server-Sent Event.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct SseEvent {
    pub(super) id: Option<String>,
    pub(super) event: Option<String>,
    pub(super) data: String,
}

/// What a chunk completed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Parsed {
    Event(SseEvent),
    /// An event over the cap: its data was discarded; `bytes` is how long it was.
    TooLarge {
        bytes: usize,
    },
}

/// The SSE parser, fed in chunks.
#[derive(Debug)]
pub(super) struct SseParser {
    /// The line being read (at most `max_bytes`).
    line: Vec<u8>,
    /// The line is over the cap: the rest of it is counted, not kept.
    line_over: bool,
    /// The previous chunk ended with CR: a LF first in this one ends nothing.
    after_cr: bool,
    current: SseEvent,
    has_data: bool,
    /// Bytes of the event so far (its lines, ends included).
    event_bytes: usize,
    /// The event is over the cap: its data is discarded.
    event_over: bool,
    max_bytes: usize,
    /// The server's `retry:` (ms).
    pub(super) retry_ms: Option<u64>,
}

impl SseParser {
    pub(super) fn new(max_bytes: usize) -> Self {
        Self {
            line: Vec::new(),
            line_over: false,
            after_cr: false,
            current: SseEvent::default(),
            has_data: false,
            event_bytes: 0,
            event_over: false,
            max_bytes: max_bytes.max(1),
            retry_ms: None,
        }
    }

    pub(super) fn push(&mut self, chunk: &[u8]) -> Vec<Parsed> {
        let mut parsed = Vec::new();
        if chunk.is_empty() {
            // Nothing: a CR at the end of the last chunk may still be followed by its LF.
            return parsed;
        }
        let mut rest = chunk;
        if self.after_cr && rest.first() == Some(&b'\n') {
            rest = &rest[1..];
        }
        self.after_cr = false;
        while let Some(end) = rest.iter().position(|&b| b == b'\n' || b == b'\r') {
            self.take(&rest[..end]);
            self.end_line(&mut parsed);
            let crlf = rest[end] == b'\r' && rest.get(end + 1) == Some(&b'\n');
            if rest[end] == b'\r' && end + 1 == rest.len() {
                self.after_cr = true;
            }
            rest = &rest[end + 1 + usize::from(crlf)..];
        }
        self.take(rest);
        parsed
    }

    /// Bytes of the line being read, kept up to the cap.
    fn take(&mut self, bytes: &[u8]) {
        self.event_bytes = self.event_bytes.saturating_add(bytes.len());
        let room = self.max_bytes.saturating_sub(self.line.len());
        if bytes.len() > room {
            self.line_over = true;
        }
        self.line.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    fn end_line(&mut self, parsed: &mut Vec<Parsed>) {
        let line = std::mem::take(&mut self.line);
        let over = std::mem::replace(&mut self.line_over, false);
        if line.is_empty() && !over {
            self.dispatch(parsed);
            return;
        }
        self.event_bytes = self.event_bytes.saturating_add(1);
        if over || self.event_bytes > self.max_bytes {
            // The event cannot be taken whole: keep counting its length until it ends.
            self.event_over = true;
            self.current.data = String::new();
            return;
        }
        if line.first() == Some(&b':') {
            return;
        }
        let line = String::from_utf8_lossy(&line);
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line.as_ref(), ""),
        };
        match field {
            "data" => {
                if self.event_over {
                    return;
                }
                if self.has_data {
                    self.current.data.push('\n');
                }
                self.current.data.push_str(value);
                self.has_data = true;
            }
            "id" if is_header_value(value) => self.current.id = Some(value.to_owned()),
            "id" => tracing::warn!(
                "the stream sent an id that cannot be sent back as Last-Event-ID; ignored"
            ),
            "event" => self.current.event = Some(value.to_owned()),
            "retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                self.retry_ms = Some(value.parse().unwrap_or(u64::MAX));
            }
            _ => {}
        }
    }

    /// A blank line: the event so far, if it has data.
    fn dispatch(&mut self, parsed: &mut Vec<Parsed>) {
        let event = std::mem::take(&mut self.current);
        if self.event_over {
            parsed.push(Parsed::TooLarge {
                bytes: self.event_bytes,
            });
        } else if self.has_data {
            parsed.push(Parsed::Event(event));
        }
        self.has_data = false;
        self.event_over = false;
        self.event_bytes = 0;
    }
}

/// Whether `id` can go back to the server as a `Last-Event-ID` header (and be saved to
/// resume from): printable ASCII, as stream ids are (EventStreams' are JSON).
pub(super) fn is_header_value(id: &str) -> bool {
    id.len() <= 8 * 1024 && id.bytes().all(|b| (0x20..0x7f).contains(&b))
}

#[cfg(test)]
mod tests;
