//! The Server-Sent Events wire format, as the MediaWiki stream source reads it.

/// One Server-Sent Event.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct SseEvent {
    pub(super) id: Option<String>,
    pub(super) event: Option<String>,
    pub(super) data: String,
}

/// The SSE wire format (the WHATWG HTML standard, "server-sent events"), fed in chunks.
#[derive(Debug, Default)]
pub(super) struct SseParser {
    buffer: Vec<u8>,
    current: SseEvent,
    has_data: bool,
    /// The server's `retry:` (ms).
    pub(super) retry_ms: Option<u64>,
}

impl SseParser {
    pub(super) fn push(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        self.buffer.extend_from_slice(chunk);
        let mut events = Vec::new();
        while let Some(end) = self.buffer.iter().position(|&b| b == b'\n') {
            let mut line: Vec<u8> = self.buffer.drain(..=end).collect();
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            let line = String::from_utf8_lossy(&line).into_owned();
            if line.is_empty() {
                if self.has_data {
                    events.push(std::mem::take(&mut self.current));
                } else {
                    self.current = SseEvent::default();
                }
                self.has_data = false;
                continue;
            }
            if line.starts_with(':') {
                continue;
            }
            let (field, value) = match line.split_once(':') {
                Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
                None => (line.as_str(), ""),
            };
            match field {
                "data" => {
                    if self.has_data {
                        self.current.data.push('\n');
                    }
                    self.current.data.push_str(value);
                    self.has_data = true;
                }
                "id" if !value.contains('\0') => self.current.id = Some(value.to_owned()),
                "event" => self.current.event = Some(value.to_owned()),
                "retry" => self.retry_ms = value.parse().ok(),
                _ => {}
            }
        }
        events
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parser_reads_events_across_chunks() {
        let mut parser = SseParser::default();
        let mut events =
            parser.push(b": ok\n\nevent: message\nid: [{\"offset\":1}]\ndata: {\"a\":");
        assert!(events.is_empty());
        events.extend(parser.push(b"1}\r\n\r\ndata: x\ndata: y\nretry: 2500\n\n"));
        assert_eq!(
            events,
            vec![
                SseEvent {
                    id: Some("[{\"offset\":1}]".into()),
                    event: Some("message".into()),
                    data: "{\"a\":1}".into(),
                },
                SseEvent {
                    id: None,
                    event: None,
                    data: "x\ny".into(),
                },
            ]
        );
        assert_eq!(parser.retry_ms, Some(2500));
    }
}
